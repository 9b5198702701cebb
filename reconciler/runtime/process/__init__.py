"""The process around the ticks: the loop (`service`) and its wiring (`wiring`), the one
CronJob run (`cronjob_run`), leader election and the writer Lease (`leader`,
`writer_lease`), the node's `heartbeat`, the pod watches (`watch`) and the early ticks they
ask (`debounce`), the HTTP endpoints (`health`) and their `metrics`, and `reconciler drain`
(`drain`)."""
