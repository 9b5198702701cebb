"""The API server's rules for Services and EndpointSlices (pkg/apis/core/validation
ValidateService, pkg/apis/core/v1/defaults.go, pkg/registry/core/service,
pkg/apis/discovery/validation; Kubernetes 1.37).

- Service defaults: `type: ClusterIP`, `sessionAffinity: None`, each port's
  `protocol: TCP` and `targetPort` = its `port`, `internalTrafficPolicy: Cluster`,
  `ipFamilies: [IPv4]`, `ipFamilyPolicy: SingleStack`, `clusterIPs` = `[clusterIP]`; the
  status is reset on create. The ClusterIP itself is the allocator's (`service_controllers`).
- Service validation: the name is an RFC 1123 label, no dots (a DNS-1035 label before
  RelaxedServiceNameValidation: a leading digit is allowed now); ports are required
  unless headless or ExternalName; a port is 1-65535 with a protocol TCP, UDP or
  SCTP; with more than one port each needs a unique name; a (port, protocol) pair
  appears once; `targetPort` is a port number or an
  IANA service name; the selector's keys and values are label keys and values.
- Service update: the ClusterIP may not change once set, and an update that leaves it
  out keeps it (the registry copies allocated values over).
- EndpointSlice: `addressType` IPv4, IPv6 or FQDN, immutable; every endpoint holds
  1 to 100 addresses of that type, none unspecified, loopback or link-local (an
  endpoint is what other nodes dial); at most 1000 endpoints; ports' protocol defaults to
  TCP, their names are DNS-1123 labels (or empty) and unique.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from reconciler.sim.kube.resources import ENDPOINT_SLICES, SERVICES, Resource
from reconciler.sim.kube.status import invalid

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
PROTOCOLS = ("SCTP", "TCP", "UDP")
ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_IANA_SVC_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_MAX_ENDPOINTS = 1000
_MAX_ADDRESSES = 100

Causes = list[tuple[str, str]]


def prepare_for_create(resource: Resource, obj: dict[str, Any]) -> None:
    if resource is SERVICES:
        obj["status"] = {"loadBalancer": {}}
    prepare_for_write(resource, obj)


def prepare_for_write(resource: Resource, obj: dict[str, Any]) -> None:
    """The defaults, which the API server applies on decoding every write."""
    spec = obj.get("spec")
    if resource is SERVICES and isinstance(spec, dict):
        _default(spec, "type", "ClusterIP")
        _default(spec, "sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            _default(spec, "internalTrafficPolicy", "Cluster")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            _default(spec, "externalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                _default(port, "protocol", "TCP")
                if port.get("targetPort") in (None, 0, ""):
                    port["targetPort"] = port.get("port")
    elif resource is ENDPOINT_SLICES:
        for port in obj.get("ports") or []:
            if isinstance(port, dict):
                _default(port, "protocol", "TCP")


def _default(holder: dict[str, Any], key: str, value: Any) -> None:
    if holder.get(key) in (None, ""):
        holder[key] = value


def validate(resource: Resource, obj: dict[str, Any]) -> None:
    if resource is SERVICES:
        causes = _service_causes(obj)
    elif resource is ENDPOINT_SLICES:
        causes = _slice_causes(obj)
    else:
        return
    if causes:
        raise invalid(resource.kind, obj["metadata"].get("name", ""), causes)


def validate_update(resource: Resource, old: dict[str, Any], new: dict[str, Any]) -> None:
    causes: Causes = []
    if resource is SERVICES:
        before = (old.get("spec") or {}).get("clusterIP")
        after = (new.get("spec") or {}).get("clusterIP")
        if before and after != before:
            causes.append(
                ("spec.clusterIPs[0]", f'Invalid value: "{after}": may not change once set')
            )
    elif resource is ENDPOINT_SLICES and old.get("addressType") != new.get("addressType"):
        causes.append(
            ("addressType", f'Invalid value: "{new.get("addressType")}": field is immutable')
        )
    if causes:
        raise invalid(resource.kind, new["metadata"].get("name", ""), causes)


def keep_allocated(old: dict[str, Any], new: dict[str, Any]) -> None:
    """An update that leaves the ClusterIP out keeps the one allocated (patchAllocatedValues)."""
    before, after = old.get("spec") or {}, new.get("spec")
    if isinstance(after, dict) and before.get("clusterIP") and not after.get("clusterIP"):
        after["clusterIP"] = before["clusterIP"]
        after["clusterIPs"] = list(before.get("clusterIPs") or [before["clusterIP"]])
    for key in ("ipFamilies", "ipFamilyPolicy"):
        if isinstance(after, dict) and key in before and key not in after:
            after[key] = before[key]


def _service_causes(obj: dict[str, Any]) -> Causes:
    name = obj["metadata"].get("name") or ""
    causes: Causes = []
    if "." in name:
        causes.append(("metadata.name", f'Invalid value: "{name}": must not contain dots'))
    elif name and (len(name) > 63 or not _DNS1123_LABEL.fullmatch(name)):
        causes.append(
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower '
                "case alphanumeric characters or '-', and must start and end with an "
                "alphanumeric character",
            )
        )
    spec = obj.get("spec") or {}
    kind = spec.get("type")
    if kind not in SERVICE_TYPES:
        causes.append(("spec.type", f'Unsupported value: "{kind}": {_supported(SERVICE_TYPES)}'))
    headless = spec.get("clusterIP") == "None"
    ports = spec.get("ports") or []
    if not ports and not headless and kind != "ExternalName":
        causes.append(("spec.ports", "Required value"))
    if kind == "ExternalName" and not spec.get("externalName"):
        causes.append(("spec.externalName", "Required value"))
    causes += _service_ports_causes(ports)
    causes += _selector_causes(spec.get("selector"))
    if spec.get("sessionAffinity") not in ("None", "ClientIP"):
        causes.append(
            (
                "spec.sessionAffinity",
                f'Unsupported value: "{spec.get("sessionAffinity")}": '
                'supported values: "ClientIP", "None"',
            )
        )
    return causes


def _service_ports_causes(ports: list[Any]) -> Causes:
    causes: Causes = []
    names: set[str] = set()
    pairs: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        at = f"spec.ports[{i}]"
        if not isinstance(port, dict):
            causes.append((at, "Invalid value: must be an object"))
            continue
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            causes.append((f"{at}.name", "Required value"))
        elif name and not _DNS1123_LABEL.fullmatch(name):
            causes.append((f"{at}.name", f'Invalid value: "{name}": must be a DNS-1123 label'))
        elif name in names:
            causes.append((f"{at}.name", f'Duplicate value: "{name}"'))
        names.add(name)
        number = port.get("port")
        if not _valid_port(number):
            causes.append(
                (f"{at}.port", f"Invalid value: {number}: must be between 1 and 65535, inclusive")
            )
        protocol = port.get("protocol")
        if protocol not in PROTOCOLS:
            causes.append(
                (f"{at}.protocol", f'Unsupported value: "{protocol}": {_supported(PROTOCOLS)}')
            )
        if (number, protocol) in pairs:
            causes.append((at, f'Duplicate value: {{"port":{number},"protocol":"{protocol}"}}'))
        pairs.add((number, protocol))
        causes += _target_port_causes(f"{at}.targetPort", port.get("targetPort"))
    return causes


def _target_port_causes(at: str, target: Any) -> Causes:
    if isinstance(target, int) and not isinstance(target, bool):
        if _valid_port(target):
            return []
        return [(at, f"Invalid value: {target}: must be between 1 and 65535, inclusive")]
    text = str(target)
    named = (
        isinstance(target, str)
        and len(text) <= 15
        and _IANA_SVC_NAME.fullmatch(text) is not None
        and "--" not in text
        and any(c.isalpha() for c in text)
    )
    if named:
        return []
    return [(at, f'Invalid value: "{text}": must contain only alpha-numeric characters')]


def _selector_causes(selector: Any) -> Causes:
    causes: Causes = []
    for key, value in (selector or {}).items():
        label_name = key.rsplit("/", 1)[-1]
        if len(label_name) > 63 or not _LABEL_NAME.fullmatch(label_name):
            causes.append(("spec.selector", f'Invalid value: "{key}": name part must be valid'))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            causes.append(("spec.selector", f'Invalid value: "{value}": a valid label must be '))
    return causes


def _slice_causes(obj: dict[str, Any]) -> Causes:
    causes: Causes = []
    address_type = obj.get("addressType")
    if not address_type:
        causes.append(("addressType", "Required value"))
    elif address_type not in ADDRESS_TYPES:
        causes.append(
            ("addressType", f'Unsupported value: "{address_type}": {_supported(ADDRESS_TYPES)}')
        )
    endpoints = obj.get("endpoints") or []
    if len(endpoints) > _MAX_ENDPOINTS:
        causes.append(
            ("endpoints", f"Too many: {len(endpoints)}: must have at most {_MAX_ENDPOINTS} items")
        )
    for i, endpoint in enumerate(endpoints):
        causes += _endpoint_causes(f"endpoints[{i}]", endpoint, address_type)
    names: set[str] = set()
    for i, port in enumerate(obj.get("ports") or []):
        at = f"ports[{i}]"
        name = port.get("name") or ""
        if name and not _DNS1123_LABEL.fullmatch(name):
            causes.append((f"{at}.name", f'Invalid value: "{name}": must be a DNS-1123 label'))
        elif name in names:
            causes.append((f"{at}.name", f'Duplicate value: "{name}"'))
        names.add(name)
        if port.get("protocol") not in PROTOCOLS:
            causes.append((f"{at}.protocol", f'Unsupported value: "{port.get("protocol")}"'))
        if port.get("port") is not None and not _valid_port(port.get("port")):
            causes.append(
                (f"{at}.port", f"Invalid value: {port.get('port')}: must be between 1 and 65535")
            )
    return causes


def _endpoint_causes(at: str, endpoint: dict[str, Any], address_type: Any) -> Causes:
    addresses = endpoint.get("addresses") or []
    if not addresses:
        return [(f"{at}.addresses", "Required value: must contain at least 1 address")]
    if len(addresses) > _MAX_ADDRESSES:
        return [(f"{at}.addresses", f"Too many: {len(addresses)}: must have at most 100 items")]
    causes: Causes = []
    for j, address in enumerate(addresses):
        problem = _address_problem(str(address), address_type)
        if problem:
            causes.append((f"{at}.addresses[{j}]", f'Invalid value: "{address}": {problem}'))
    return causes


def _address_problem(address: str, address_type: Any) -> str | None:
    """ValidateEndpointIP: the address must be of the slice's family and one another node
    can dial."""
    if address_type == "FQDN":
        return None if _DNS1123_LABEL.fullmatch(address.split(".")[0] or "-") else "invalid"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"must be a valid {address_type} address"
    if (ip.version == 4) != (address_type == "IPv4"):
        return f"must be a valid {address_type} address"
    if ip.is_unspecified:
        return f"may not be unspecified ({ip})"
    if ip.is_loopback:
        return "may not be in the loopback range (127.0.0.0/8, ::1/128)"
    if ip.is_link_local:
        return "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
    if ip in ipaddress.ip_network("224.0.0.0/24") or ip in ipaddress.ip_network(
        "ff02::/10", strict=False
    ):
        return "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
    return None


def _valid_port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _supported(values: tuple[str, ...]) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)
