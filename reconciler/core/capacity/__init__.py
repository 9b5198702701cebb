"""What RunPod can give us: the request quota's pacing, where GPU stock ran out, and
what a refused create means."""
