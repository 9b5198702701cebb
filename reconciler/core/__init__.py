"""Core: the pure decisions (domain, planner, translation, offload). No I/O, no clock."""
