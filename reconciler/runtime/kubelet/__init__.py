"""The virtual node's kubelet endpoint: `kubectl logs` for pods on RunPod, and `kubectl top`."""
