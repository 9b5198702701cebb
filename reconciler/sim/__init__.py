"""Loopback simulators of RunPod v2 (`runpod/`) and the Kubernetes API (`kube/`), for tests
and the demo, and the simulated `clock` both run on."""
