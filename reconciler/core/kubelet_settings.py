"""The settings of the kubelet endpoint the virtual node serves (`settings.kubelet`)."""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.core.setting import ip_address, seconds, setting

DAY = 24 * 3600.0


@dataclass(frozen=True)
class KubeletSettings:
    """The kubelet endpoint the virtual node serves (kubectl logs, exec, port-forward, top)."""

    address: str = setting(
        "",
        "--kubelet-address",
        "The virtual node's InternalIP: this reconciler's pod IP (default: $POD_IP).",
        parse=ip_address,
        fallback_env="POD_IP",
    )
    """Where the reconciler's own pod, and so the kubelet endpoint, can be reached. Empty:
    the node lists only its name as a Hostname address."""

    port: int = setting(
        10250,
        "--kubelet-port",
        "Port of the kubelet endpoint (kubectl logs) the virtual node advertises (0: none).",
        limits=(0, 65535, "a port number"),
    )
    """Advertised in the node's status.daemonEndpoints; 0 serves and advertises none."""

    tls_secret: str = setting(
        "",
        "--kubelet-tls-secret",
        "[namespace/]name of a TLS Secret for the kubelet endpoint (default: self-signed).",
    )
    """A kubernetes.io/tls Secret."""

    idle_timeout: float = setting(
        30.0,
        "--kubelet-idle-timeout",
        "Seconds a kubelet-endpoint connection may stay silent before its TLS handshake "
        "and request headers are complete; then it is closed.",
        limits=seconds(1, 3600),
    )
    """Also between two requests of a connection: closed before anyone is authenticated."""

    max_connections: int = setting(
        200,
        "--kubelet-max-connections",
        "Connections the kubelet endpoint holds at once; more are closed at once.",
        limits=(1, 100_000, "a number of connections"),
    )

    max_unauthenticated: int = setting(
        32,
        "--kubelet-max-unauthenticated",
        "Connections the kubelet endpoint holds before they are authenticated; beyond "
        "it, the oldest of them is closed for a new one.",
        limits=(1, 100_000, "a number of connections"),
    )
    """Bounds the memory anyone who can connect makes the endpoint hold: this many times
    a request head's bytes."""

    request_header_timeout: float = setting(
        10.0,
        "--kubelet-request-header-timeout",
        "Seconds a request's line and headers may take to arrive whole (the first "
        "request's TLS handshake included); then the connection is closed.",
        limits=seconds(1, 3600),
    )
    """Go's ReadHeaderTimeout: a client that trickles bytes is never idle."""

    max_headers: int = setting(
        64,
        "--kubelet-max-headers",
        "Headers one request to the kubelet endpoint may carry; more are answered 431.",
        limits=(8, 100, "a number of headers"),
    )

    max_header_bytes: int = setting(
        64 * 1024,
        "--kubelet-max-header-bytes",
        "Bytes one request's headers may hold together; more are answered 431.",
        limits=(4096, 1 << 20, "a number of bytes"),
    )

    max_follows: int = setting(
        100,
        "--kubelet-max-follows",
        "`kubectl logs -f` served at once on this node, in every namespace together; more "
        "are refused with a sentence naming this flag.",
        limits=(1, 100_000, "a number of follows"),
    )

    max_follows_per_namespace: int = setting(
        32,
        "--kubelet-max-follows-per-namespace",
        "`kubectl logs -f` served at once for the pods of one namespace; more are refused "
        "with a sentence naming this flag.",
        limits=(1, 100_000, "a number of follows"),
    )
    """Every follow comes through the API server, as one caller: the pod's namespace is
    the tenant the endpoint can tell."""

    max_streaming_per_namespace: int = setting(
        16,
        "--kubelet-max-streaming-per-namespace",
        "exec and port-forward sessions served at once for the pods of one namespace.",
        limits=(1, 100_000, "a number of sessions"),
    )
    """Every such request comes through the API server, so the endpoint cannot tell one
    user from another: a namespace is the tenant it can tell, and one tenant's sessions
    cannot take every connection slot from the others' logs, exec and `kubectl top`."""

    streaming_connection_idle_timeout: float = setting(
        4 * 3600.0,
        "--streaming-connection-idle-timeout",
        "Seconds an exec or port-forward session may pass with no frame either way; then "
        "it is closed (the kubelet's flag of this name).",
        limits=seconds(1, DAY),
    )
