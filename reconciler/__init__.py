"""runpod-reconciler: burst Kubernetes GPU pods onto RunPod, crash-safely."""

__version__ = "0.1.0"
