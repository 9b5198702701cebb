"""`pods/{name}/exec` and `pods/{name}/portforward` as the API server serves them to
kubectl: checked, then served over SPDY by the node's kubelet (`/exec/...`,
`/portForward/<ns>/<pod>`).

What a real API server does, and so this one:
- checks the request: the pod exists, has a node and has not completed, the container
  is one of the pod's (named, or the only one), a command is given, and at least one of
  stdin, stdout and stderr is asked for;
- turns kubectl's options into the kubelet's query (`command`, and `input`, `output`,
  `error`, `tty` as "1") and calls `/exec/<ns>/<pod>/<container>` on the kubelet found
  from the Node object (see `pod_log.kubelet_location`), over TLS with its kubelet
  client certificate, asking for the same upgrade (`SPDY/3.1`, the client's
  `X-Stream-Protocol-Version` values);
- a kubelet that refuses the upgrade has its answer become a Status with its code and
  words; a 101 is passed to kubectl and the two connections are spliced byte for byte
  (the API server does not read SPDY), see `upgrade`.

kubectl 1.30+ first asks for a WebSocket (`v5.channel.k8s.io`; port-forward, 1.31+,
tunnels SPDY in one): `pod_ws` translates it to SPDY toward the kubelet as
kube-apiserver does. A request asking for no upgrade at all is refused ("Upgrade
request required").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from reconciler.sim.kube.pod_log import KubeletCaller, kubelet_location
from reconciler.sim.kube.resources import NODES, PODS
from reconciler.sim.kube.status import ApiError, not_found
from reconciler.sim.kube.upgrade import is_websocket, proxy, versions

Query = dict[str, list[str]]
_FLAGS = (("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty"))


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
    flags = exec_flags(query)
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


def serve_upgrade(
    handler: Any,
    sim: KubeletCaller,
    subresource: str,
    target: tuple,
    query: Query,
    record: Callable[[int], None],
) -> None:
    """Answer a checked exec or port-forward by the upgrade kubectl asked for: SPDY is
    proxied, a WebSocket served by `pod_ws`. `record` logs the status just before it
    is sent; a refusal is raised as an ApiError."""
    if not is_websocket(handler.headers):
        offered = handler.headers.get_all("X-Stream-Protocol-Version") or []
        proxy(handler, sim, target, ["Upgrade: SPDY/3.1", *versions(offered)], record)
        return
    try:  # the websockets package comes with the test extra; `pip install .` has none
        from reconciler.sim.kube.pod_ws import serve_websocket
    except ImportError:
        raise ApiError(
            400,
            "this simulator serves WebSocket with the websockets package, which is not "
            "installed (pip install 'runpod-reconciler[test]'); kubectl falls back to SPDY",
        ) from None
    serve_websocket(handler, sim, subresource, target, exec_flags(query), record)


def exec_flags(query: Query) -> dict[str, bool]:
    return {ours: _true(query, theirs) for theirs, ours in _FLAGS}


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
