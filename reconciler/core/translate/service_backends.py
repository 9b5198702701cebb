"""Which backend of a Service the reconciler dials for a pod on RunPod, as kube-proxy
would pick one: an endpoint of the Service's EndpointSlices (every manager's, as
kube-proxy reads them) that is ready (`conditions.ready` unset counts as ready, per the
API), at the slice's port of the Service port's name.

An FQDN slice may name anything, and the reconciler dials from where it runs: under
`ServiceBackends.CLUSTER` an address that is loopback, link-local or unspecified is
never dialled (the reconciler's own ports, a machine's metadata service).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from reconciler.core.domain import KubeObject
from reconciler.core.service_settings import ServiceBackends

SERVICE_NAME = "kubernetes.io/service-name"


def ready_backends(
    slices: Iterable[KubeObject], service: str, port_name: str
) -> list[tuple[str, int]]:
    """(address, port) of each ready endpoint of `service`'s port named `port_name`."""
    found: list[tuple[str, int]] = []
    for piece in slices:
        labels = (piece.get("metadata") or {}).get("labels") or {}
        if labels.get(SERVICE_NAME) != service:
            continue
        port = next(
            (
                p.get("port")
                for p in piece.get("ports") or []
                if (p.get("name") or "") == port_name and (p.get("protocol") or "TCP") == "TCP"
            ),
            None,
        )
        if not isinstance(port, int):
            continue
        for endpoint in piece.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in (endpoint.get("addresses") or [])[:1]:
                found.append((str(address), port))
    return sorted(set(found))


def may_dial(address: str, scope: ServiceBackends) -> bool:
    """Whether a resolved backend address may be dialled under `scope`."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if scope == ServiceBackends.ANY:
        return True
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)
