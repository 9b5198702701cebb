"""Loopback simulators of RunPod v2 and the Kubernetes API, for tests and the demo."""
