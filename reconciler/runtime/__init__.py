"""Runtime: one tick (`tick/`) and the process around the ticks (`process/`)."""
