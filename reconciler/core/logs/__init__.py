"""Pods' logs, as decisions: the `kubectl logs` request's options and the lines shown,
the share of RunPod's quota that log reads may spend, and which starting instances'
lines to read."""
