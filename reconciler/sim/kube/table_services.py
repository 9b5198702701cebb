"""Server-side printing of Services and EndpointSlices (pkg/printers/internalversion
`printService`, `printEndpointSlice`): NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE and
SELECTOR; NAME ADDRESSTYPE PORTS ENDPOINTS AGE, at most three ports or addresses then
"+ N more...", "<unset>" for none."""

from __future__ import annotations

from typing import Any

Column = tuple[str, int]

SERVICE_COLUMNS: tuple[Column, ...] = (
    ("Name", 0),
    ("Type", 0),
    ("Cluster-IP", 0),
    ("External-IP", 0),
    ("Port(s)", 0),
    ("Age", 0),
    ("Selector", 1),
)
SLICE_COLUMNS: tuple[Column, ...] = (
    ("Name", 0),
    ("AddressType", 0),
    ("Ports", 0),
    ("Endpoints", 0),
    ("Age", 0),
)


def service_cells(service: dict[str, Any], age: str) -> list[Any]:
    spec = service.get("spec") or {}
    ports = [
        (f"{p['port']}:{p['nodePort']}" if p.get("nodePort") else str(p.get("port")))
        + f"/{p.get('protocol') or 'TCP'}"
        for p in spec.get("ports") or []
    ]
    selector = spec.get("selector") or {}
    return [
        service["metadata"]["name"],
        spec.get("type") or "ClusterIP",
        spec.get("clusterIP") or "<none>",
        _external(spec),
        ",".join(ports) or "<none>",
        age,
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


def slice_cells(piece: dict[str, Any], age: str) -> list[Any]:
    ports = [
        str(p["port"]) if p.get("port") is not None else (p.get("name") or "*")
        for p in piece.get("ports") or []
    ]
    addresses = [a for e in piece.get("endpoints") or [] for a in e.get("addresses") or []]
    return [
        piece["metadata"]["name"],
        piece.get("addressType") or "",
        _at_most_three(ports),
        _at_most_three(addresses),
        age,
    ]


def _external(spec: dict[str, Any]) -> str:
    if spec.get("type") == "ExternalName":
        return str(spec.get("externalName") or "<none>")
    return ",".join(spec.get("externalIPs") or []) or "<none>"


def _at_most_three(items: list[str]) -> str:
    if len(items) > 3:
        return f"{','.join(items[:3])} + {len(items) - 3} more..."
    return ",".join(items) or "<unset>"
