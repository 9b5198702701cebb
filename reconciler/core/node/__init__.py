"""The virtual node: its Node object, the placement rules a pod must meet to land on it,
and what `kubectl exec` and the kubelet agree on."""
