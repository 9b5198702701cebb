"""The RunPod REST v2 simulator: `simulator.RunPodSimulator` is the server tests and the demo
start; `python -m reconciler.sim.runpod` serves one as a process (see `simulator`).

Kept empty of imports: `python -m reconciler.sim.runpod.net`, the SSH ProxyCommand run on
every connection to a simulated pod, loads only its own module, not the whole server.
"""
