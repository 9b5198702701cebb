"""`pods/{name}/exec` and `pods/{name}/portforward` as the API server serves them to
kubectl's SPDY client: checked, then proxied to the node's kubelet as an upgraded
connection (`/exec/...`, `/portForward/<ns>/<pod>`).

What a real API server does, and so this one:
- checks the request: the pod exists, has a node and has not completed, the container
  is one of the pod's (named, or the only one), a command is given, and at least one of
  stdin, stdout and stderr is asked for;
- turns kubectl's options into the kubelet's query (`command`, and `input`, `output`,
  `error`, `tty` as "1") and calls `/exec/<ns>/<pod>/<container>` on the kubelet found
  from the Node object (see `kube_pod_log.kubelet_location`), over TLS with its kubelet
  client certificate, asking for the same upgrade (`SPDY/3.1`, the client's
  `X-Stream-Protocol-Version` values);
- a kubelet that refuses the upgrade has its answer become a Status with its code and
  words; a 101 is passed to kubectl and the two connections are spliced byte for byte
  (the API server does not read SPDY).

kubectl 1.32 first asks for a WebSocket (`v5.channel.k8s.io`; port-forward tunnels
SPDY in one), which this simulator does not serve yet: it answers 400, and kubectl
falls back to SPDY, as it does with an API server older than 1.30.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from typing import Any
from urllib.parse import quote, urlencode

from reconciler.sim.kube_pod_log import KubeletCaller, kubelet_location
from reconciler.sim.kube_resources import NODES, PODS
from reconciler.sim.kube_status import ApiError, not_found

Query = dict[str, list[str]]
_FLAGS = (("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty"))
_MAX_HEAD = 64 * 1024
_MAX_ERROR_BYTES = 50_000
_CHUNK = 64 * 1024


def kubelet_exec_request(sim: KubeletCaller, namespace: str, name: str, query: Query) -> tuple:
    """(host, port, path with query) of the kubelet call, or an ApiError."""
    entry = sim.store.find(PODS, namespace, name)
    if entry is None:
        raise not_found("pods", name)
    pod = entry.obj
    phase = pod.get("status", {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise ApiError(
            400, f"cannot exec into a container in a completed pod; current phase is {phase}"
        )
    container = _container(pod, (query.get("container") or [""])[0])
    command = query.get("command") or []
    if not command:
        raise ApiError(400, "you must specify at least one command for the container")
    flags = {ours: _true(query, theirs) for theirs, ours in _FLAGS}
    if not (flags["input"] or flags["output"] or flags["error"]):
        raise ApiError(400, "you must specify at least 1 of stdin, stdout, stderr")
    host, port = _kubelet_of(sim, pod)
    params = [("command", part) for part in command]
    params += [(flag, "1") for flag, on in flags.items() if on]
    path = f"/exec/{quote(namespace)}/{quote(name)}/{quote(container)}?{urlencode(params)}"
    return host, port, path


def kubelet_port_forward_request(
    sim: KubeletCaller, namespace: str, name: str, query: Query
) -> tuple:
    """(host, port, path) of a port-forward's kubelet call, or an ApiError."""
    entry = sim.store.find(PODS, namespace, name)
    if entry is None:
        raise not_found("pods", name)
    host, port = _kubelet_of(sim, entry.obj)
    ports = [("port", value) for value in query.get("ports", [])]
    path = f"/portForward/{quote(namespace)}/{quote(name)}"
    return host, port, path + (f"?{urlencode(ports)}" if ports else "")


def _kubelet_of(sim: KubeletCaller, pod: dict[str, Any]) -> tuple[str, int]:
    node_name = pod.get("spec", {}).get("nodeName")
    if not node_name:
        raise ApiError(400, f"pod {pod['metadata']['name']} does not have a host assigned")
    node = sim.store.find(NODES, None, node_name)
    if node is None:
        raise not_found("nodes", node_name)
    return kubelet_location(node.obj)


def open_upgrade(sim: KubeletCaller, target: tuple, headers: Any) -> tuple:
    """Ask the kubelet for the upgrade: (its connection, its 101 answer) ready to splice,
    or an ApiError carrying its refusal."""
    host, port, path = target
    upstream = _connect(sim, host, port)
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Connection: Upgrade",
        "Upgrade: SPDY/3.1",
        "Content-Length: 0",
    ]
    lines += [
        f"X-Stream-Protocol-Version: {v}"
        for v in headers.get_all("X-Stream-Protocol-Version") or []
    ]
    upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head, rest = _read_head(upstream)
    status = int(head.split(b" ", 2)[1])
    if status != 101:
        body = rest + _read_body(upstream, head, len(rest))
        upstream.close()
        text = body.decode("utf-8", "replace").strip()
        raise ApiError(status, text or f"the kubelet answered {status}")
    return upstream, head + b"\r\n\r\n" + rest


def _connect(sim: KubeletCaller, host: str, port: int) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=sim.kubelet_ca_file)
    if sim.kubelet_ca_file is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(*sim.kubelet_client_files())
    try:
        raw = socket.create_connection((host, port), timeout=5)
        sock = context.wrap_socket(raw, server_hostname=host)
    except OSError as exc:
        raise ApiError(500, f"error dialing backend: {exc}") from exc
    sock.settimeout(None)
    return sock


def _read_head(sock: ssl.SSLSocket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(_CHUNK)
        if not chunk or len(data) > _MAX_HEAD:
            raise ApiError(500, "the kubelet closed the connection before answering")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _read_body(sock: ssl.SSLSocket, head: bytes, have: int) -> bytes:
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")[1:]
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    body = b""
    while have + len(body) < min(length, _MAX_ERROR_BYTES):
        chunk = sock.recv(_CHUNK)
        if not chunk:
            break
        body += chunk
    return body


def splice(client: Any, client_read: Any, upstream: ssl.SSLSocket, answer: bytes) -> None:
    """Pass the kubelet's 101 on, then bytes both ways until either side ends, which ends
    both (SPDY needs no half-close, and TLS has none)."""
    client.sendall(answer)

    def down() -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(_CHUNK):
                client.sendall(data)
        _end(client)

    thread = threading.Thread(target=down, name="kube-sim-exec", daemon=True)
    thread.start()
    with contextlib.suppress(OSError, ValueError):
        while data := client_read(_CHUNK):
            upstream.sendall(data)
    _end(upstream)
    thread.join()
    upstream.close()


def _end(sock: Any) -> None:
    # The TCP connection itself: SSLSocket.shutdown would drop its TLS state while the
    # other direction may still be reading it.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _true(query: Query, name: str) -> bool:
    return (query.get(name) or [""])[0] in ("true", "1")


def _container(pod: dict[str, Any], wanted: str) -> str:
    names = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
    name = pod["metadata"]["name"]
    if not wanted:
        if len(names) == 1:
            return names[0]
        raise ApiError(
            400,
            f"a container name must be specified for pod {name}, choose one of: "
            f"[{' '.join(names)}]",
        )
    if wanted not in names:
        raise ApiError(400, f"container {wanted} is not valid for pod {name}")
    return wanted
