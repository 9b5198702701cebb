"""Cluster Services for pods on RunPod, both ways over the instances' SSH
(docs/architecture.md §7): `tunnels` carries a pod's connections to Services
(remote forwards), `inbound` the cluster's connections to pods (EndpointSlices that
lead to the reconciler, then `direct-tcpip`), `manager` keeps both in step with the
cluster after every tick (in the loop on a thread of its own, `worker`), `splice`
moves the bytes."""
