"""The ports an instance exposes, in v2's "8888/http" / "22/tcp" form.

RunPod publishes `/http` ports through its HTTPS proxy and `/tcp` ports on a public
address. Only TCP containerPorts can be either, so UDP and SCTP ports are left out.
The `runpod.io/ports` annotation replaces the derived list when a port's kind is
guessed wrong.
"""

from __future__ import annotations

import re

from reconciler.core.domain import KubeObject
from reconciler.core.translate.annotations import MAX_LIST_ITEMS, PORTS, read
from reconciler.core.translate.errors import invalid_annotation

# Ports that conventionally speak HTTP (web servers, dev servers, Jupyter, MinIO...).
HTTP_PORTS = frozenset({80, 443, 3000, 5000, 8000, 8080, 8888, 9000})
PROTOCOLS = ("http", "tcp")
_PORT = re.compile(r"[0-9]{1,5}")


def container_ports(container: KubeObject) -> tuple[str, ...]:
    ports: list[str] = []
    for spec in container.get("ports") or []:
        if spec.get("protocol", "TCP") != "TCP":
            continue
        number = int(spec["containerPort"])
        port = f"{number}/{'http' if number in HTTP_PORTS else 'tcp'}"
        if port not in ports:
            ports.append(port)
    return tuple(ports)


def instance_ports(
    pod: KubeObject, job: KubeObject | None, container: KubeObject
) -> tuple[str, ...]:
    value = read(pod, job, PORTS)
    if value is None:
        return container_ports(container)
    return parse_ports(value)


def parse_ports(value: str) -> tuple[str, ...]:
    """A `runpod.io/ports` value such as "8888/http,22/tcp"; "" exposes nothing."""
    if not value.strip():
        return ()
    ports: list[str] = []
    seen: set[int] = set()
    if value.count(",") >= MAX_LIST_ITEMS:
        raise invalid_annotation(PORTS, value, f"a list of at most {MAX_LIST_ITEMS} ports")
    for item in value.split(","):
        number, protocol = _parse_port(value, item.strip())
        if number in seen:
            raise invalid_annotation(PORTS, value, f"a list without duplicates (port {number})")
        seen.add(number)
        ports.append(f"{number}/{protocol}")
    return tuple(ports)


def _parse_port(value: str, item: str) -> tuple[int, str]:
    number, _, protocol = item.partition("/")
    expected = 'a list of "port/protocol" with port 1-65535 and protocol http or tcp'
    if not _PORT.fullmatch(number) or not 1 <= int(number) <= 65535:
        raise invalid_annotation(PORTS, value, expected)
    if protocol.lower() not in PROTOCOLS:
        raise invalid_annotation(PORTS, value, expected)
    return int(number), protocol.lower()
