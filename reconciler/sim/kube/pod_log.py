"""`GET pods/{name}/log` as the API server serves it: by calling the node's kubelet.

What a real API server does, and so this one:
- checks the request first: the pod exists, it has a node, the container is one of
  the pod's (named, or the only one), and the integer options are not negative;
- finds the kubelet from the Node object: the first address in the order of
  `--kubelet-preferred-address-types` (Hostname, InternalDNS, InternalIP, ExternalDNS,
  ExternalIP), on `status.daemonEndpoints.kubeletEndpoint.Port` (10250 when unset).
  It does not fall back to the next address when that one fails: a Hostname nobody
  can resolve breaks every call. (Only IP literals and `localhost` resolve here: the
  simulator never asks a DNS server.)
- calls `https://<address>:<port>/containerLogs/<ns>/<pod>/<container>?<options>` with
  its kubelet client certificate, without verifying the kubelet's serving certificate
  unless given a CA for it (`--kubelet-certificate-authority`);
- relays the body as it comes; a kubelet error answer becomes a Status with the
  kubelet's code and its words.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Protocol
from urllib.parse import quote

import requests

from reconciler.sim.kube.resources import NODES, PODS
from reconciler.sim.kube.status import ApiError, not_found
from reconciler.sim.kube.store import Store

PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
DEFAULT_KUBELET_PORT = 10250
_BOOL_OPTIONS = ("follow", "previous", "timestamps", "insecureSkipTLSVerifyBackend")
_INT_OPTIONS = ("sinceSeconds", "tailLines", "limitBytes")
# The API server reads at most this much of a kubelet's error answer.
_MAX_ERROR_BYTES = 50_000

Query = dict[str, list[str]]


class KubeletCaller(Protocol):
    """What the API server needs to call a kubelet (`KubeSimulator` is one)."""

    store: Store
    kubelet_ca_file: str | None

    def kubelet_client_files(self) -> tuple[str, str]: ...


def open_pod_log(sim: KubeletCaller, namespace: str, name: str, query: Query) -> requests.Response:
    """The kubelet's streaming answer (200), or an ApiError to send instead."""
    entry = sim.store.find(PODS, namespace, name)
    if entry is None:
        raise not_found("pods", name)
    pod = entry.obj
    container = _container(pod, _arg(query, "container"))
    options = _options(query)
    node_name = pod.get("spec", {}).get("nodeName")
    if not node_name:
        raise ApiError(400, f"pod {name} does not have a host assigned")
    node = sim.store.find(NODES, None, node_name)
    if node is None:
        raise not_found("nodes", node_name)
    host, port = kubelet_location(node.obj)
    url = (
        f"https://{_url_host(host)}:{port}/containerLogs/{quote(namespace)}/"
        f"{quote(name)}/{quote(container)}"
    )
    try:
        answer = requests.get(
            url,
            params=options,
            stream=True,
            timeout=(5, None),
            cert=sim.kubelet_client_files(),
            verify=sim.kubelet_ca_file or False,
        )
    except requests.RequestException as exc:
        raise ApiError(500, f'Get "{url}": {_cause(exc)}') from exc
    if answer.status_code != 200:
        with answer:
            text = answer.raw.read(_MAX_ERROR_BYTES).decode("utf-8", "replace").strip()
        raise ApiError(answer.status_code, text or f"the kubelet answered {answer.status_code}")
    return answer


def kubelet_location(node: dict[str, Any]) -> tuple[str, int]:
    status = node.get("status", {})
    addresses = status.get("addresses") or []
    for wanted in PREFERRED_ADDRESS_TYPES:
        for address in addresses:
            if address.get("type") == wanted and address.get("address"):
                host = address["address"]
                if not _resolvable(host):
                    raise ApiError(500, f"dial tcp: lookup {host}: no such host")
                port = status.get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port")
                return host, int(port or DEFAULT_KUBELET_PORT)
    raise ApiError(500, f"no preferred addresses found; known addresses: {addresses}")


def _container(pod: dict[str, Any], wanted: str) -> str:
    spec = pod.get("spec", {})
    names = [c["name"] for c in spec.get("containers", [])]
    others = [
        c["name"] for c in spec.get("initContainers", []) + spec.get("ephemeralContainers", [])
    ]
    name = pod["metadata"]["name"]
    if not wanted:
        if len(names) == 1:
            return names[0]
        raise ApiError(
            400,
            f"a container name must be specified for pod {name}, "
            f"choose one of: [{' '.join(names)}]",
        )
    if wanted not in names + others:
        raise ApiError(400, f"container {wanted} is not valid for pod {name}")
    return wanted


def _options(query: Query) -> dict[str, str]:
    """The options as the API server passes them on: set ones only, validated."""
    options: dict[str, str] = {}
    for key in _BOOL_OPTIONS:
        if _arg(query, key) in ("true", "1"):
            options[key] = "true"
    for key in _INT_OPTIONS:
        raw = _arg(query, key)
        if not raw:
            continue
        least = 0 if key == "tailLines" else 1
        if not raw.lstrip("-").isdigit() or int(raw) < least:
            bound = "greater than or equal to 0" if least == 0 else "greater than 0"
            raise ApiError(
                422,
                f'PodLogOptions "" is invalid: {key}: Invalid value: {raw}: must be {bound}',
                reason="Invalid",
            )
        options[key] = raw
    if _arg(query, "sinceTime"):
        if "sinceSeconds" in options:
            raise ApiError(
                422,
                'PodLogOptions "" is invalid: at most one of sinceTime or '
                "sinceSeconds may be specified",
                reason="Invalid",
            )
        options["sinceTime"] = _arg(query, "sinceTime")
    return options


def _resolvable(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _cause(exc: requests.RequestException) -> str:
    if isinstance(exc, requests.ConnectionError):
        return "dial tcp: connect: connection refused"
    return type(exc).__name__


def _arg(query: Query, name: str) -> str:
    values = query.get(name)
    return values[0] if values else ""
