"""What a cluster does around Services, acting at once on every write.

- The ClusterIP allocator (pkg/registry/core/service/ipallocator): a new Service that is
  not headless or ExternalName gets a free address of the service range (10.96.0.0/12
  here, as kubeadm's default), the first of which is the `kubernetes` Service's. An
  address asked for must be in the range and free (422 otherwise).
- The EndpointSlice controller (pkg/controller/endpointslice over
  staging/src/k8s.io/endpointslice): for each Service with a selector it keeps the
  slices labelled `kubernetes.io/service-name` and managed by
  `endpointslice-controller.k8s.io`, one endpoint per selected pod that
  `ShouldPodBeInEndpoints` admits (not Succeeded or Failed, and holding an IP in
  `status.podIP`/`podIPs`: a pod with no IP gets no endpoint), at the pod's IP with each
  Service port's target port (a named one looked up in the pod's containers). An
  endpoint is ready when the pod is Ready and not being deleted, serving when Ready,
  terminating when being deleted. Slices with another `managed-by` are left alone; the
  controller's own go with their Service (the garbage collector's work).
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from reconciler.sim.kube.resources import ENDPOINT_SLICES, NODES, PODS, SERVICES, Resource
from reconciler.sim.kube.select import Selector
from reconciler.sim.kube.status import invalid

if TYPE_CHECKING:
    from reconciler.sim.kube.store import Store

SERVICE_RANGE = ipaddress.ip_network("10.96.0.0/12")
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
_ALL = Selector()


class ServiceControllers:
    def __init__(self, store: Store) -> None:
        self.store = store

    def add_kubernetes_service(self, secure_port: int) -> None:
        """The `kubernetes` Service the API server keeps in `default` (its endpoints are
        the API server's own; none here, as with `--endpoint-reconciler-type=none`)."""
        self.store.create(
            SERVICES,
            "default",
            {
                "metadata": {"name": "kubernetes", "labels": {"component": "apiserver"}},
                "spec": {
                    "clusterIP": str(SERVICE_RANGE[1]),
                    "ports": [{"name": "https", "port": 443, "targetPort": secure_port}],
                },
            },
        )

    # admission -----------------------------------------------------------------

    def admit(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource is not SERVICES:
            return
        spec = obj.setdefault("spec", {})
        if spec.get("type") == "ExternalName":
            return
        asked = spec.get("clusterIP") or ""
        if asked == "None":
            spec["clusterIPs"] = ["None"]
        else:
            spec["clusterIP"] = self._allocate(obj, asked)
            spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")

    def _allocate(self, obj: dict[str, Any], asked: str) -> str:
        taken = {
            str((service.get("spec") or {}).get("clusterIP"))
            for service in _objects(self.store, SERVICES, None)
        }
        if not asked:
            free = (str(ip) for ip in SERVICE_RANGE.hosts() if str(ip) not in taken)
            return next(free)
        name = obj["metadata"].get("name", "")
        try:
            address = ipaddress.ip_address(asked)
        except ValueError:
            raise invalid(
                "Service",
                name,
                [("spec.clusterIPs[0]", f'Invalid value: "{asked}": must be a valid IP address')],
            ) from None
        if address not in SERVICE_RANGE or address in (SERVICE_RANGE[0], SERVICE_RANGE[-1]):
            why = "the provided network does not match the current range"
            raise invalid(
                "Service",
                name,
                [
                    (
                        "spec.clusterIPs",
                        f'Invalid value: ["{asked}"]: failed to allocate IP {asked}: {why}',
                    )
                ],
            )
        if asked in taken:
            raise invalid(
                "Service",
                name,
                [
                    (
                        "spec.clusterIPs",
                        f'Invalid value: ["{asked}"]: failed to allocate IP {asked}: '
                        "provided IP is already allocated",
                    )
                ],
            )
        return asked

    # the EndpointSlice controller ------------------------------------------------

    def react(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource is SERVICES:
            self._sync(obj)
        elif resource is PODS:
            namespace = obj["metadata"].get("namespace")
            for service in _objects(self.store, SERVICES, namespace):
                if _selects(service, obj):
                    self._sync(service)

    def removed(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource is SERVICES:
            for piece in self._slices_of(obj):
                self._delete(piece)
        elif resource is PODS:
            self.react(PODS, obj)

    def _sync(self, service: dict[str, Any]) -> None:
        meta = service["metadata"]
        current = self.store.find(SERVICES, meta["namespace"], meta["name"])
        selector = (service.get("spec") or {}).get("selector")
        if current is None or not selector:
            return
        service = current.obj
        pods = [
            pod
            for pod in _objects(self.store, PODS, meta["namespace"])
            if _selects(service, pod) and _should_be_in_endpoints(pod)
        ]
        endpoints = [self._endpoint(pod, service) for pod in pods]
        endpoints = [e for e in endpoints if e is not None]
        # With no endpoint, the controller keeps a placeholder slice without ports.
        ports = _slice_ports(service, pods[0]) if endpoints else []
        owned = self._slices_of(service)
        body: dict[str, Any] = {
            "metadata": {
                "labels": {SERVICE_NAME: meta["name"], MANAGED_BY: CONTROLLER},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports,
        }
        if not owned:
            body["metadata"]["generateName"] = f"{meta['name']}-"
            self.store.create(ENDPOINT_SLICES, meta["namespace"], body)
            return
        first, *rest = owned
        if (first.get("endpoints") or [], first.get("ports")) != (endpoints, ports):
            updated = {**first, "endpoints": endpoints, "ports": ports}
            self.store.update(
                ENDPOINT_SLICES, meta["namespace"], first["metadata"]["name"], updated
            )
        for extra in rest:
            self._delete(extra)

    def _endpoint(self, pod: dict[str, Any], service: dict[str, Any]) -> dict[str, Any] | None:
        status, meta = pod.get("status") or {}, pod["metadata"]
        ips = [entry.get("ip") for entry in status.get("podIPs") or []] or [status.get("podIP")]
        ipv4 = [ip for ip in ips if ip and ipaddress.ip_address(ip).version == 4]
        if not ipv4:
            return None
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if node_name and self.store.find(NODES, None, node_name) is None:
            return None  # the controller skips a pod whose Node it cannot find
        ready_condition = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        terminating = "deletionTimestamp" in meta
        publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
        endpoint: dict[str, Any] = {
            "addresses": [ipv4[0]],
            "conditions": {
                "ready": publish or (ready_condition and not terminating),
                "serving": ready_condition,
                "terminating": terminating,
            },
            "targetRef": {
                "kind": "Pod",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        }
        if node_name:
            endpoint["nodeName"] = node_name
        return endpoint

    def _slices_of(self, service: dict[str, Any]) -> list[dict[str, Any]]:
        meta = service["metadata"]
        return [
            piece
            for piece in _objects(self.store, ENDPOINT_SLICES, meta["namespace"])
            if (piece["metadata"].get("labels") or {}).get(SERVICE_NAME) == meta["name"]
            and (piece["metadata"].get("labels") or {}).get(MANAGED_BY) == CONTROLLER
        ]

    def _delete(self, piece: dict[str, Any]) -> None:
        meta = piece["metadata"]
        if self.store.find(ENDPOINT_SLICES, meta["namespace"], meta["name"]) is not None:
            self.store.delete(ENDPOINT_SLICES, meta["namespace"], meta["name"])


def _objects(store: Store, resource: Resource, namespace: str | None) -> list[dict[str, Any]]:
    return [entry.obj for entry in store.list_page(resource, namespace, _ALL).items]


def _selects(service: dict[str, Any], pod: dict[str, Any]) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _should_be_in_endpoints(pod: dict[str, Any]) -> bool:
    """ShouldPodBeInEndpoints(pod, includeTerminating=true)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    return bool(status.get("podIP") or status.get("podIPs"))


def _slice_ports(service: dict[str, Any], pod: dict[str, Any] | None) -> list[dict[str, Any]]:
    ports = []
    for port in (service.get("spec") or {}).get("ports") or []:
        target = port.get("targetPort")
        if isinstance(target, str):
            target = _named_port(pod, target) if pod is not None else None
            if target is None:
                continue
        ports.append({"name": port.get("name") or "", "port": target, "protocol": port["protocol"]})
    return ports


def _named_port(pod: dict[str, Any], name: str) -> int | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name:
                return int(port["containerPort"])
    return None
