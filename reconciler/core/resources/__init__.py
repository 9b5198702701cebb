"""One pure module per cloud resource (docs/architecture.md §3, "Cloud resources"):
what each needs, its plan, its leaks and whose it is. Instances' decisions are the
planner's (`core.plan`, `core.mapping`); Instant Clusters', network volumes' and registry
credentials' are here. The runtime half of each is `runtime/tick/resources/`."""
