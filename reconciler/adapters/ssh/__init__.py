"""SSH to RunPod instances with the reconciler's own key (paramiko)."""
