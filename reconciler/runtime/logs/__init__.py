"""Pods' logs at run time: where a log is read from, one RunPod stream shared by its
followers, and RunPod's system lines as Events on the pod."""
