"""The planner cut by concern; `reconciler.core.planner.plan_tick` puts them together.

Layers (checked by lint-imports): lifecycle | money_guards | gangs > running | admission
| gang_end > hourly_costs > outcomes > situation > observation.
"""
