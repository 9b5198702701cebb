"""The RunPod REST v2 client: `RunPodClient` and the errors it raises (`errors`)."""

from reconciler.adapters.runpod.client import RunPodClient

__all__ = ["RunPodClient"]
