"""The pods we serve: the facts read from their JSON, which are offloaded, which RunPod
instances are theirs, what they use, and DaemonSet pods that are never run."""
