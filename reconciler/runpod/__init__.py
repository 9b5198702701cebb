"""The RunPod REST v2 client."""
