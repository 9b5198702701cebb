"""Keeps every running pod's tunnels in step with the cluster, after each tick.

Each sync reads, from Kubernetes only, the Services of the namespaces the node's pods
live in (and each Service of another namespace a pod names) and their EndpointSlices;
it costs no RunPod request: where an instance's sshd is comes from the tick's own list
(`SshAddresses`). Per pod: the Services it reaches (`service_links`), their forwards
and names (`PodTunnel.apply`); a tunnel whose SSH connection broke is made again. A pod
whose Services cannot be reached, in part or at all, gets a `ServicesUnreachable`
Event saying why, once per reason while this process runs.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
from collections.abc import Callable, Mapping, Sequence

from reconciler.adapters.kube import errors as kube_errors
from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.cluster import default_namespace
from reconciler.adapters.ssh.client import CONNECT_SECONDS, SshConnector, SshError
from reconciler.core.config import Settings
from reconciler.core.domain import KubeObject
from reconciler.core.pods import podinfo
from reconciler.core.reasons import Notice
from reconciler.core.resources.clusters import CLUSTER_ID
from reconciler.core.translate.service_backends import may_dial, ready_backends
from reconciler.core.translate.service_hosts import hosts_block
from reconciler.core.translate.service_links import (
    ServicePort,
    left_out,
    named_services,
    reachable,
    service_ports,
)
from reconciler.core.translate.service_slices import MANAGER, selecting, slice_body
from reconciler.core.translate.ssh import SshAddress
from reconciler.runtime.kubelet.endpoint import stored_host_keys
from reconciler.runtime.kubelet.sshkey import ssh_identity
from reconciler.runtime.services.inbound import Acceptor, PodInbound
from reconciler.runtime.services.splice import Slots
from reconciler.runtime.services.tunnels import PodTunnel
from reconciler.runtime.services.worker import SyncWorker
from reconciler.runtime.tick.engine import Engine
from reconciler.runtime.tick.tick_report import TickReport

log = logging.getLogger(__name__)


class ServiceTunnels:
    """Every pod's `PodTunnel`, by pod UID; `sync` from the tick's thread."""

    def __init__(
        self, settings: Settings, kube: KubeClient, connector: SshConnector | None
    ) -> None:
        self.settings = settings.services
        self.node = settings.node.name
        self.kube = kube
        self.connector = connector
        self.tunnels: dict[str, PodTunnel] = {}
        self.inbound: dict[str, PodInbound] = {}
        self._acceptor: Acceptor | None = None
        self.worker: SyncWorker | None = None
        self._slices: Mapping[str, Sequence[KubeObject]] = {}
        self._told: set[tuple[str, str]] = set()
        self._next = 0
        self._lock = threading.Lock()

    def sync(
        self, pods: Sequence[KubeObject], address_of: Callable[[str], SshAddress | None]
    ) -> None:
        running = [pod for pod in pods if _running(pod, address_of)]
        if self.settings.forwards_per_pod == 0:
            running = []
        try:
            services = self._services(running)
            self._slices = {ns: self.kube.services.slices(ns) for ns in _namespaces(services)}
        except kube_errors.KubeError as exc:
            log.warning("could not read the Services of pods on RunPod: %s", exc)
            return
        wanted = set()
        slices: dict[tuple[str, str], KubeObject] = {}
        for pod in running:
            uid = str(pod["metadata"]["uid"])
            wanted.add(uid)
            try:
                self._sync_pod(pod, uid, services, address_of(uid))
                slices.update(self._inbound(pod, uid, services))
            except SshError as exc:
                self._drop(uid)
                self._tell(
                    pod, f"its Services are unreachable, and it is unreachable from them: {exc}"
                )
        for uid in set(self.tunnels) - wanted:
            self._drop(uid)
        self._publish(slices)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
        for uid in list(self.tunnels):
            self._drop(uid)
        if self._acceptor is not None:
            self._acceptor.close()
            self._acceptor = None

    def _inbound(
        self, pod: KubeObject, uid: str, services: Mapping[str, Sequence[KubeObject]]
    ) -> dict[tuple[str, str], KubeObject]:
        """The pod's listeners for the Services selecting it, and their slices."""
        namespace = str(pod["metadata"].get("namespace") or "default")
        own = services.get(namespace, [])
        ports = selecting(pod, own)
        inbound = self.inbound.get(uid)
        if inbound is None:
            if self._acceptor is None:
                self._acceptor = Acceptor()
            inbound = PodInbound(
                _name(pod),
                self.tunnels[uid].transport,
                self._acceptor,
                Slots(self.settings.connections_per_pod),
                self.settings.listen_address,
            )
            self.inbound[uid] = inbound
        listening = inbound.apply(ports)
        address = self.settings.endpoint_address
        if not address:
            return {}
        by_name = {str(s["metadata"]["name"]): s for s in own}
        bodies = {}
        for service in sorted({p.service for p in ports}):
            mine = {p.name: listening[p] for p in ports if p.service == service}
            body = slice_body(pod, by_name[service], self.node, address, mine)
            bodies[(namespace, str(body["metadata"]["name"]))] = body
        return bodies

    def _publish(self, wanted: Mapping[tuple[str, str], KubeObject]) -> None:
        """Our slices made, changed or deleted to be `wanted` (only what differs)."""
        try:
            ours = {
                (str(piece["metadata"]["namespace"]), str(piece["metadata"]["name"])): piece
                for piece in self.kube.services.managed_by(MANAGER)
            }
            for key, body in wanted.items():
                current = ours.get(key)
                if current is None:
                    self.kube.services.create_slice(key[0], body)
                elif _differs(current, body):
                    version = current["metadata"].get("resourceVersion")
                    body = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
                    self.kube.services.replace_slice(key[0], key[1], body)
            for key in set(ours) - set(wanted):
                self.kube.services.delete_slice(*key)
        except kube_errors.KubeError as exc:
            log.warning("could not publish the EndpointSlices of pods on RunPod: %s", exc)

    def dial(self, port: ServicePort) -> socket.socket:
        """A connection to a ready backend of the Service port (round robin); OSError
        when none answers."""
        backends = ready_backends(self._slices.get(port.namespace, ()), port.service, port.name)
        with self._lock:
            self._next += 1
            start = self._next
        problem: OSError = OSError("no ready endpoint")
        for i in range(len(backends)):
            host, number = backends[(start + i) % len(backends)]
            try:
                return self._connect(host, number)
            except OSError as exc:
                problem = exc
        raise problem

    def _connect(self, host: str, port: int) -> socket.socket:
        for family, kind, proto, _, address in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        ):
            if not may_dial(str(address[0]), self.settings.backends):
                raise OSError(f"{host} is {address[0]}, which --service-backends forbids")
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(CONNECT_SECONDS)
                sock.connect(address)
                sock.settimeout(None)
                return sock
            except OSError:
                sock.close()
                raise
        raise OSError(f"{host} resolves to nothing")

    def _sync_pod(
        self,
        pod: KubeObject,
        uid: str,
        services: Mapping[str, Sequence[KubeObject]],
        address: SshAddress | None,
    ) -> None:
        chosen = reachable(pod, [s for group in services.values() for s in group])
        limit = self.settings.forwards_per_pod
        ports = service_ports(chosen, limit, pod)
        tunnel = self._tunnel(uid, pod, address)
        block = hosts_block(
            ports, str(pod["metadata"].get("namespace")), self.settings.cluster_domain
        )
        failed = tunnel.apply(ports, block)
        over = left_out(chosen, limit)
        if over:
            self._tell(
                pod,
                f"more Service ports than --service-forwards-per-pod={limit}: "
                f"{', '.join(over)} not reachable",
            )
        if failed:
            self._tell(pod, f"a port its instance already uses: {', '.join(failed)} not reachable")

    def _tunnel(self, uid: str, pod: KubeObject, address: SshAddress | None) -> PodTunnel:
        tunnel = self.tunnels.get(uid)
        if tunnel is not None and tunnel.alive:
            return tunnel
        if tunnel is not None:
            log.info("pod %s: its SSH connection broke; making it again", _name(pod))
            self._drop(uid)
        if self.connector is None:
            raise SshError("the reconciler has no SSH key (--ssh-key-file or --ssh-key-secret)")
        if address is None and CLUSTER_ID in podinfo.pod_annotations(pod):
            raise SshError("members of an Instant Cluster get no tunnels")
        if address is None:
            raise SshError("its instance publishes no SSH (22/tcp) the reconciler can reach")
        transport = self.connector.connect(address.instance_id, address.host, address.port)
        transport.set_keepalive(30)
        tunnel = PodTunnel(
            _name(pod), transport, self.dial, Slots(self.settings.connections_per_pod)
        )
        self.tunnels[uid] = tunnel
        return tunnel

    def _services(self, pods: Sequence[KubeObject]) -> dict[str, list[KubeObject]]:
        """Services by namespace: those of the pods' namespaces, `default/kubernetes`,
        and each one another namespace's that a pod names."""
        listed = _namespaces_of(pods)
        found = {ns: self.kube.services.in_namespace(ns) for ns in listed}
        named = {("default", "kubernetes")} | {n for p in pods for n in named_services(p)}
        for namespace, name in sorted(named):
            if namespace in listed or not pods:
                continue
            service = self.kube.services.read(namespace, name)
            if service is not None:
                found.setdefault(namespace, []).append(service)
        return found

    def _drop(self, uid: str) -> None:
        inbound = self.inbound.pop(uid, None)
        if inbound is not None:
            inbound.close()
        tunnel = self.tunnels.pop(uid, None)
        if tunnel is not None:
            tunnel.close()

    def _tell(self, pod: KubeObject, message: str) -> None:
        key = (str(pod["metadata"]["uid"]), message)
        if key in self._told:
            return
        self._told.add(key)
        log.info("pod %s: %s", _name(pod), message)  # the Event is the user's signal
        try:
            self.kube.events.record(pod, Notice.SERVICES_UNREACHABLE.value, message, "Warning")
        except kube_errors.KubeError as exc:
            log.warning("could not record an Event on %s: %s", _name(pod), exc)


def _differs(current: KubeObject, wanted: KubeObject) -> bool:
    labels = (current.get("metadata") or {}).get("labels") or {}
    return any(current.get(k) != wanted[k] for k in ("addressType", "endpoints", "ports")) or any(
        labels.get(k) != v for k, v in wanted["metadata"]["labels"].items()
    )


def _running(pod: KubeObject, address_of: Callable[[str], SshAddress | None]) -> bool:
    """A live pod whose instance runs: the tick's list shows its sshd, or the pod shows
    Running (as observed when the tick began: it may have turned so in the tick)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return False
    return status.get("phase") == "Running" or address_of(str(meta.get("uid"))) is not None


def _namespaces_of(pods: Sequence[KubeObject]) -> set[str]:
    return {str(pod["metadata"].get("namespace") or "default") for pod in pods}


def _namespaces(services: Mapping[str, Sequence[KubeObject]]) -> set[str]:
    return {ns for ns, group in services.items() if group}


def _name(pod: KubeObject) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def attach_tunnels(engine: Engine, background: bool = False) -> ServiceTunnels:
    """Tunnels kept after each of the engine's ticks that observed both worlds (the
    leader's ticks: a standby ticks none), over SSH with the reconciler's key; with
    `background`, in a thread of their own (`SyncWorker`), else in the tick's."""
    identity = ssh_identity(engine.settings, engine.kube, default_namespace())
    connector = (
        SshConnector(
            identity.private_pem,
            stored_host_keys(engine.store, engine.clock),
            engine.settings.ssh.proxy_command,
        )
        if identity is not None
        else None
    )
    tunnels = ServiceTunnels(engine.settings, engine.kube, connector)
    if background:
        tunnels.worker = SyncWorker(tunnels.sync)
    before = engine.hooks.after

    def after(done: Engine, report: TickReport) -> None:
        before(done, report)
        if report.observation is None:
            return
        if tunnels.worker is not None:
            tunnels.worker.submit(report.observation.pods, done.ssh_addresses.of)
        else:
            tunnels.sync(report.observation.pods, done.ssh_addresses.of)

    engine.hooks = dataclasses.replace(engine.hooks, after=after)
    return tunnels
