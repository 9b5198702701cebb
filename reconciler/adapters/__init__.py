"""Adapters: the RunPod client, the Kubernetes adapter and the state store."""
