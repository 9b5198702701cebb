"""SPDY/3.1, the stream multiplexing a Kubernetes API server speaks to a kubelet for exec,
attach and port-forward: the frames (`frames`), the compressed header blocks (`headers`)
and a server-side session that hands out the streams a client opens (`session`)."""
