"""Which cluster Services a pod on RunPod reaches, where inside its instance, and the
kubelet's service-link variables for them.

A pod reaches the Services of its own namespace, and a Service of another namespace
that its `runpod.io/services` annotation names (`namespace/name`) only when that Service
consents: its own `runpod.io/reachable-from-namespaces` lists the pod's namespace (or
`*`). The traffic leaves through the reconciler, so without the consent a tenant could
reach past the other namespace's NetworkPolicies. Only Services with a ClusterIP
(not headless, not ExternalName) and their TCP ports are forwarded: SSH carries TCP
only.

Where: every forwarded port listens on the instance's 127.0.0.1. OpenSSH's sshd, with
its default `GatewayPorts no`, binds a remote forward asked for on any other address
to localhost (channels.c `channel_fwd_bind_addr`), so an address per Service cannot be
had from a stock image; ports tell Services apart instead. Each Service port gets a
local port in `LOCAL_PORTS` from a hash of its namespace, name and port, the older
Service keeping it on a clash, so it stays the same for the pod's whole life (the
instance's variables are written once, at create); the Service's own port is forwarded
too where no other reachable Service has it and the pod declares no such port of its
own, so `http://svc.ns.svc.cluster.local/` works as in the cluster. A process of the
pod that listens on an undeclared port may find a Service's own port taken; the
variables' ports never clash with a declared one.

The variables (pkg/kubelet/envvars `FromServices`, the kubelet's `getServiceEnvVarMap`):
`<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT` (the first port), `<NAME>_SERVICE_PORT_<PORT
NAME>` for named ports, and Docker's link variables `<NAME>_PORT`,
`<NAME>_PORT_<port>_<PROTO>` with `_PROTO`, `_PORT`, `_ADDR`; the name upper-cased with
`-` made `_`. They keep the kubelet's meaning (the address and port to reach that
Service port at), so their values are 127.0.0.1 and the local port, while the names keep
the Service's port number. The Services of the pod's namespace count only with
`enableServiceLinks` (true by default); `default/kubernetes` always does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.domain import KubeObject

SERVICES_ANNOTATION = "runpod.io/services"
REACHABLE_FROM = "runpod.io/reachable-from-namespaces"
LOOPBACK = "127.0.0.1"
LOCAL_PORTS = range(20000, 30000)
"""Below Linux's ephemeral range (32768-60999): an outgoing connection never holds one."""
_MASTER = ("default", "kubernetes")


@dataclass(frozen=True, order=True)
class ServicePort:
    """One TCP port of one Service, as the instance reaches it."""

    namespace: str
    service: str
    port: int
    """The Service's port."""
    name: str
    """The port's name; "" for a lone unnamed port."""
    local_port: int
    """Where the instance reaches it: 127.0.0.1 and this port."""
    alias: bool
    """The Service's own port is forwarded too (no other reachable Service has it)."""

    @property
    def listen_ports(self) -> tuple[int, ...]:
        return (self.local_port, self.port) if self.alias else (self.local_port,)


def reachable(pod: KubeObject, services: Iterable[KubeObject]) -> list[KubeObject]:
    """The Services the pod reaches: its namespace's, `default/kubernetes`, and those of
    other namespaces it names that consent; oldest first."""
    namespace = _namespace(pod)
    named = named_services(pod)
    chosen = {}
    for service in services:
        key = (_namespace(service), _name(service))
        if not _has_cluster_ip(service) or not _tcp_ports(service):
            continue
        if (
            key[0] == namespace
            or key == _MASTER
            or (key in named and _consents(service, namespace))
        ):
            chosen[key] = service
    return sorted(chosen.values(), key=_age)


def service_ports(
    services: Sequence[KubeObject], limit: int, pod: KubeObject | None = None
) -> list[ServicePort]:
    """The forwarded ports of `services` (oldest Service first, at most `limit`), none on
    a port `pod`'s containers declare: those are the pod's own to listen on."""
    entries = [
        (service, port) for service in sorted(services, key=_age) for port in _tcp_ports(service)
    ]
    entries = entries[:limit]
    declared = declared_ports(pod) if pod is not None else set()
    taken: set[int] = set(declared)
    own_ports: dict[int, int] = {}
    for _, port in entries:
        own_ports[int(port["port"])] = own_ports.get(int(port["port"]), 0) + 1
    result = []
    for service, port in entries:
        local = _local_port(service, port, taken)
        taken.add(local)
        number = int(port["port"])
        alias = own_ports[number] == 1 and number not in LOCAL_PORTS and number not in declared
        result.append(
            ServicePort(
                _namespace(service),
                _name(service),
                number,
                str(port.get("name") or ""),
                local,
                alias,
            )
        )
    return result


def declared_ports(pod: KubeObject) -> set[int]:
    """The ports the pod's containers declare."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        int(port["containerPort"])
        for container in containers
        for port in container.get("ports") or []
        if isinstance(port.get("containerPort"), int)
    }


def left_out(services: Sequence[KubeObject], limit: int) -> list[str]:
    """`namespace/name` of Services with a port beyond `limit`, for the Event."""
    entries = [service for service in sorted(services, key=_age) for _ in _tcp_ports(service)]
    return sorted({f"{_namespace(s)}/{_name(s)}" for s in entries[limit:]})


def link_variables(
    pod: KubeObject, services: Sequence[KubeObject], ports: Sequence[ServicePort]
) -> dict[str, str]:
    """The service-link variables of the pod's container, as the kubelet makes them."""
    links = (pod.get("spec") or {}).get("enableServiceLinks")
    namespace = _namespace(pod)
    local = {(p.namespace, p.service, p.port): p.local_port for p in ports}
    env: dict[str, str] = {}
    for service in services:
        key = (_namespace(service), _name(service))
        own = key[0] == namespace and links is not False
        if not own and key != _MASTER:
            continue
        shadowed = links is not False and _shadowed(services, namespace)
        if key == _MASTER and namespace != "default" and shadowed:
            continue  # a `kubernetes` Service of the pod's own namespace wins, as with the kubelet
        env.update(_variables(service, local))
    return env


def _variables(service: KubeObject, local: Mapping[tuple[str, str, int], int]) -> dict[str, str]:
    prefix = _env_name(_name(service))
    ports = [
        (p, local[(_namespace(service), _name(service), int(p["port"]))])
        for p in _tcp_ports(service)
        if (_namespace(service), _name(service), int(p["port"])) in local
    ]
    if not ports:
        return {}
    env = {
        f"{prefix}_SERVICE_HOST": LOOPBACK,
        f"{prefix}_SERVICE_PORT": str(ports[0][1]),
    }
    for port, at in ports:
        if port.get("name"):
            env[f"{prefix}_SERVICE_PORT_{_env_name(str(port['name']))}"] = str(at)
    for index, (port, at) in enumerate(ports):
        url = f"tcp://{LOOPBACK}:{at}"
        if index == 0:
            env[f"{prefix}_PORT"] = url
        link = f"{prefix}_PORT_{int(port['port'])}_TCP"
        env.update(
            {link: url, f"{link}_PROTO": "tcp", f"{link}_PORT": str(at), f"{link}_ADDR": LOOPBACK}
        )
    return env


def _local_port(service: KubeObject, port: KubeObject, taken: set[int]) -> int:
    seed = f"{_namespace(service)}/{_name(service)}/{int(port['port'])}".encode()
    start = int.from_bytes(hashlib.sha256(seed).digest()[:4], "big") % len(LOCAL_PORTS)
    for step in range(len(LOCAL_PORTS)):
        candidate = LOCAL_PORTS[(start + step) % len(LOCAL_PORTS)]
        if candidate not in taken:
            return candidate
    raise ValueError("no local port left")


def _tcp_ports(service: KubeObject) -> list[KubeObject]:
    ports = (service.get("spec") or {}).get("ports") or []
    return [
        p for p in ports if (p.get("protocol") or "TCP") == "TCP" and isinstance(p.get("port"), int)
    ]


def _has_cluster_ip(service: KubeObject) -> bool:
    spec = service.get("spec") or {}
    return spec.get("type") != "ExternalName" and spec.get("clusterIP") not in (None, "", "None")


def named_services(pod: KubeObject) -> set[tuple[str, str]]:
    """(namespace, name) of the Services the pod's annotation names."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(SERVICES_ANNOTATION) or ""
    named = set()
    for entry in text.split(","):
        namespace, _, name = entry.strip().partition("/")
        if namespace and name:
            named.add((namespace, name))
    return named


def _consents(service: KubeObject, namespace: str) -> bool:
    text = ((service.get("metadata") or {}).get("annotations") or {}).get(REACHABLE_FROM) or ""
    allowed = {entry.strip() for entry in text.split(",")}
    return namespace in allowed or "*" in allowed


def _shadowed(services: Sequence[KubeObject], namespace: str) -> bool:
    return any(_namespace(s) == namespace and _name(s) == "kubernetes" for s in services)


def _age(service: KubeObject) -> tuple[str, str, str]:
    meta = service.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace")),
        str(meta.get("name")),
    )


def _namespace(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _name(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _env_name(text: str) -> str:
    return text.replace("-", "_").upper()
