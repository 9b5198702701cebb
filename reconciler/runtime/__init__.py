"""Runtime: one tick (engine, executor) and the loop around it (service, watch, leader)."""
