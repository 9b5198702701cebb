"""One tick: observe, plan, apply and record (`engine`, `executor`), what a tick is given and
leaves (`journal`, `crashpoints`, `tick_report`, `catalog`, `create_inputs`, `by_id`,
`refusal_kinds`, `collector`), the cloud resources' plug-ins (`resources/`) and the money
chores around the plan (`money/`). Nothing here knows the process that runs ticks
(`runtime/process/`)."""
