"""The planner cut by concern; `reconciler.core.planner.plan` puts them together.

Layers (checked by lint-imports): lifecycle > running | admission > outcomes >
situation > observation; money beside lifecycle.
"""
