"""The Kubernetes API simulator: `simulator.KubeSimulator` is the server tests and the demo
start; `python -m reconciler.sim.kube` serves one as a process (see `simulator`).

Kept empty of imports: its modules are imported one by one, so a test that needs one
rule (`quantity`, `spdy`) does not load the whole server.
"""
