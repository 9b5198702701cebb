"""What a tick does besides observe, plan, apply and record (`runtime/tick/engine.py`):
chores that each read or keep something for someone else, run by the engine at fixed
points of every tick (`base.Chore`), in the order of `around_the_tick`.

- `money`: the spend caps' reads (namespace caps, what the resources keep), the hourly
  billing reads and their saving, the ghost-charge audit and the clusters' billing leaks;
- `offload`: the unscheduled pods and their Jobs, and the Node when new work may start;
- `listed`: what the tick's list tells others (the kubelet endpoint's CPU use and SSH
  addresses) and the look-alikes it reports.
"""
