"""RunPod v2 JSON → domain values, tolerant of what a newer API may send.

Unknown fields are ignored, an unknown status becomes `InstanceStatus.UNKNOWN`, numbers
may arrive as numeric strings, and missing optional fields take their defaults. Only a
pod without an `id`, or with an id not of RunPod's form, is refused: an instance we
cannot address would look to the planner like a vanished one, which is worse than a
failed tick. RunPod's text that is shown (names, GPU types, data centers, images, ports)
has its control characters escaped (`_text`).

A list is read once per id (`once_per_id`): an entry repeated is one resource, not two
(taken as two, every instance would be its own duplicate, and terminated); an entry whose
id is not of RunPod's form is left out, with a warning, since no request may name it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.runpod.errors import RunPodError
from reconciler.core.domain import (
    Availability,
    BillingRecord,
    CpuFlavor,
    DataCenterStock,
    GpuType,
    Instance,
    InstanceStatus,
    PortMapping,
    RegistryAuth,
    ResourceCharge,
    RunPodVolume,
    Runtime,
    is_runpod_id,
)
from reconciler.core.printable import escaped, quoted

logger = logging.getLogger(__name__)

Json = Mapping[str, Any]
# JSON gives dicts: testing for dict first spares the Mapping ABC's slower check. A list
# of 10 000 pods is parsed on every tick, so these few microseconds add up (docs, Performance).
_MAPPING = (dict, Mapping)


def once_per_id(entries: list[Any], route: str) -> list[Any]:
    """The list's entries, each id once (the first entry of it), without those whose id
    is not of RunPod's form. An entry with no id at all is kept: parsing it refuses the
    answer, as before."""
    seen: set[str] = set()
    kept, repeated, odd = [], 0, []
    for entry in entries:
        ident = entry.get("id") if type(entry) is dict else None
        if not ident:
            kept.append(entry)
        elif not is_runpod_id(ident):
            odd.append(ident)
        elif ident in seen:
            repeated += 1
        else:
            seen.add(ident)
            kept.append(entry)
    if repeated or odd:
        left_out(route, repeated, odd)
    return kept


def left_out(route: str, repeated: int, odd: list[Any]) -> None:
    """Say what a list's reading left out: entries again under an id already read, ids
    not of RunPod's form."""
    if repeated:
        logger.warning(
            "%s listed %d entries again under an id it had listed: read once", route, repeated
        )
    if odd:
        shown = ", ".join(quoted(str(ident)) for ident in odd[:5])
        logger.warning("%s listed ids not of RunPod's form, left out: %s", route, shown)


def parse_instance(data: object) -> Instance:
    """One pod of RunPod's list. This runs for every instance on every tick, so each
    field takes the type JSON gives first and falls back to the tolerant readers only
    when RunPod sent something else (docs, Performance)."""
    raw = data if type(data) is dict else _mapping(data)
    if not raw.get("id"):
        raise RunPodError("RunPod answered with a pod that has no id")
    if not is_runpod_id(raw["id"]):
        raise RunPodError(
            f"RunPod answered with a pod whose id {quoted(str(raw['id']))} is not of its form"
        )
    get = raw.get
    gpu, cpu, member = _object(get("gpu")), _object(get("cpu")), _object(get("cluster"))
    return Instance(
        id=str(raw["id"]),
        name=_text(get("name")),
        status=InstanceStatus.parse(get("status")),
        image=_text(get("image")),
        env=_string_map(get("env")),
        cost_per_hr=_float(get("cost")),
        gpu_type_id=_optional_text(gpu.get("id")),
        gpu_count=_int(gpu.get("count"), default=1 if gpu.get("id") else 0),
        cpu_flavor_id=_optional_text(cpu.get("id")),
        vcpu_count=_int(cpu.get("vcpuCount")),
        memory_gb=_int(cpu.get("memory")),
        cloud=_optional_text(get("cloud")),
        datacenter_id=_optional_text(get("dataCenterId")),
        ports=tuple(map(escaped, _strings(get("ports")))),
        created_at=parse_datetime(get("createdAt")),
        started_at=parse_datetime(get("startedAt")),
        runtime=parse_runtime(get("runtime")),
        actions=_strings(get("actions")),
        registry_auth_id=_optional_str(get("registry")),
        cluster_id=_optional_str(member.get("id")) if member else None,
        rank=_optional_int(member.get("rank")) if member else None,
        overlay_ip=_optional_str(member.get("ip")) if member else None,
        network_volume_id=_network_volume_id(get("mounts")),
        container_disk_gb=_int(get("disk")),
        volume_gb=_int(_object(_object(get("mounts")).get("persistent")).get("size")),
    )


def _network_volume_id(mounts: object) -> str | None:
    network = _object(mounts).get("network")
    first = network[0] if type(network) is list and network else None
    return _optional_str(_object(first).get("volumeId")) if first else None


def parse_runtime(data: object) -> Runtime | None:
    """None until the container runs.

    The contract says `runtime` is null when the pod is not RUNNING, yet its own create
    example answers `"runtime": {}` for a PROVISIONING pod. An object with neither
    `uptime` nor `ports` carries no evidence that a container runs, so it counts as
    no runtime; otherwise a pod could be reported Ready before it is.
    """
    runtime = _object(data)
    if "uptime" not in runtime and "ports" not in runtime:
        return None
    get = runtime.get
    ports, gpus = get("ports"), get("gpus")
    mappings = [_port(item) for item in ports] if type(ports) is list and ports else []
    return Runtime(
        uptime_seconds=parse_uptime(get("uptime")),
        ports=tuple([port for port in mappings if port is not None]),
        cpu_percent=_percent(get("cpu")),
        memory_percent=_percent(get("memory")),
        gpu_percents=tuple([_percent(g) or 0 for g in gpus]) if type(gpus) is list else (),
    )


def parse_uptime(value: object) -> int:
    return _int(value)


def _percent(data: object) -> int | None:
    """A `{"util": n}` block's 0-100 figure; None when absent or not a number."""
    value = _optional_int(_object(data).get("util"))
    if value is None:
        return None
    return 0 if value < 0 else 100 if value > 100 else value


def _port(data: object) -> PortMapping | None:
    if not isinstance(data, _MAPPING) or _optional_int(data.get("private")) is None:
        return None
    return PortMapping(
        private_port=_int(data.get("private")),
        protocol=str(data.get("type") or "tcp").lower(),
        public_ip=_optional_text(data.get("ip")),
        public_port=_optional_int(data.get("public")),
    )


def parse_gpu_type(data: Json) -> GpuType:
    price = _mapping(data.get("price"))
    max_count = _mapping(data.get("maxCount"))
    return GpuType(
        id=_text(data["id"]),
        name=_text(data.get("name") or data["id"]),
        memory_gb=_int(data.get("memory")),
        secure=bool(data.get("secure")),
        community=bool(data.get("community")),
        secure_price=_price(price.get("secure")),
        community_price=_price(price.get("community")),
        max_count_secure=_int(max_count.get("secure"), default=8),
        max_count_community=_int(max_count.get("community"), default=8),
        availability=Availability.parse(data.get("availability")),
        datacenters=tuple(_stock(item) for item in _list(data.get("dataCenters"))),
    )


def _stock(data: object) -> DataCenterStock:
    entry = _mapping(data)
    availability = Availability.parse(entry.get("availability"))
    return DataCenterStock(_text(entry.get("id")), availability)


def parse_gpu_types(data: object) -> list[GpuType]:
    entries = _list(_mapping(data).get("gpus"))
    return [parse_gpu_type(entry) for entry in entries if _mapping(entry).get("id")]


def parse_cpu_flavors(data: object) -> list[CpuFlavor]:
    entries = [_mapping(entry) for entry in _list(_mapping(data).get("cpus"))]
    return [_cpu_flavor(entry) for entry in entries if entry.get("id")]


def _cpu_flavor(data: Json) -> CpuFlavor:
    vcpu, price = _mapping(data.get("vcpu")), _mapping(data.get("price"))
    return CpuFlavor(
        id=_text(data["id"]),
        name=_text(data.get("name") or data["id"]),
        vcpu_min=_int(vcpu.get("min"), default=2),
        vcpu_max=_int(vcpu.get("max")),
        ram_gb_per_vcpu=_float(data.get("ramGbPerVcpu")),
        price_per_vcpu=_price(price.get("securePerVcpu")),
        availability=Availability.parse(data.get("availability")),
        datacenters=tuple(_stock(item) for item in _list(data.get("dataCenters"))),
    )


def parse_registry(data: object) -> RegistryAuth:
    entry = _mapping(data)
    if not entry.get("id"):
        raise RunPodError("RunPod answered with a registry credential that has no id")
    if not is_runpod_id(entry["id"]):
        raise RunPodError(
            f"RunPod answered with a registry credential id {quoted(str(entry['id']))}"
        )
    return RegistryAuth(id=str(entry["id"]), name=_text(entry.get("name")))


def parse_network_volume(data: object) -> RunPodVolume:
    entry = _mapping(data)
    if not entry.get("id"):
        raise RunPodError("RunPod answered with a network volume that has no id")
    if not is_runpod_id(entry["id"]):
        raise RunPodError(f"RunPod answered with a network volume id {quoted(str(entry['id']))}")
    return RunPodVolume(
        id=str(entry["id"]),
        name=_text(entry.get("name")),
        size_gb=_int(entry.get("size")),
        datacenter=_text(entry.get("dataCenter")),
        type=_text(entry.get("type") or "STANDARD"),
    )


def parse_pod_billing(data: object) -> list[BillingRecord]:
    """The records of `GET /v2/billing/pods`; a record without pod or times is skipped."""
    records = _mapping(data).get("records")
    if not isinstance(records, list):
        raise RunPodError("GET /v2/billing/pods answered without a records list")
    parsed = []
    for entry in map(_mapping, records):
        start, end = parse_datetime(entry.get("startTime")), parse_datetime(entry.get("endTime"))
        if not entry.get("podId") or start is None or end is None:
            continue
        parsed.append(
            BillingRecord(
                instance_id=str(entry["podId"]),
                start=start,
                end=end,
                total_usd=_float(entry.get("totalAmount")),
                gpu_usd=_float(entry.get("gpuAmount")),
                disk_usd=_float(entry.get("diskAmount")),
            )
        )
    return parsed


def parse_resource_billing(data: object, route: str, id_field: str) -> list[ResourceCharge]:
    """The records of `GET /v2/billing/network-volumes` (`networkVolumeId`) or
    `GET /v2/billing/clusters` (`clusterId`); a record without id or times is skipped."""
    records = _mapping(data).get("records")
    if not isinstance(records, list):
        raise RunPodError(f"{route} answered without a records list")
    parsed = []
    for entry in map(_mapping, records):
        start, end = parse_datetime(entry.get("startTime")), parse_datetime(entry.get("endTime"))
        if not entry.get(id_field) or start is None or end is None:
            continue
        parsed.append(
            ResourceCharge(str(entry[id_field]), start, end, _float(entry.get("totalAmount")))
        )
    return parsed


def parse_datetime(value: object) -> datetime | None:
    """An aware UTC datetime; a naive timestamp is taken as UTC, garbage as unknown."""
    if type(value) is not str or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is UTC:  # RunPod's own "…Z"
        return parsed
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _mapping(value: object) -> Json:
    return value if isinstance(value, _MAPPING) else {}


_EMPTY: Json = {}


def _object(value: object) -> Json:
    """`_mapping` for the per-instance path: JSON's dict without the ABC check; the
    shared empty object is never written to."""
    if type(value) is dict:
        return value
    return value if isinstance(value, Mapping) else _EMPTY


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: object) -> tuple[str, ...]:
    if type(value) is not list or not value:
        return ()
    return tuple(map(str, value))


def _string_map(value: object) -> dict[str, str]:
    return {str(key): str(item) for key, item in _object(value).items() if item is not None}


def _text(value: object) -> str:
    """RunPod's text that is only ever shown or compared (names, GPU types, data
    centers, images): its control characters escaped (`core/printable.py`), so that
    wherever it is shown (pod annotations, Events, `kubectl describe`, the CLI, logs) an
    escape sequence or a newline cannot forge what follows. Printable text is unchanged,
    so nothing that matches by value (a catalog's GPU id, a data center a pod names)
    matches otherwise."""
    return escaped(value if type(value) is str else str(value or ""))


def _optional_text(value: object) -> str | None:
    return _text(value) or None


def _optional_str(value: object) -> str | None:
    if type(value) is str:
        return value or None
    return None if value is None else str(value)


# No figure RunPod sends (dollars, seconds, gigabytes, percents, ports) comes near this;
# one past it is a broken answer, taken as missing so that no later sum or date overflows.
_ABSURD = 1e15


def _float(value: object) -> float:
    """A finite figure; 0.0 when absent, not a number, non-finite (`Infinity`, the JSON
    number 1e400 that parses as one) or absurd."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) and abs(number) < _ABSURD else 0.0


def _price(value: object) -> float:
    """A catalog price: a JSON number, finite, above 0 and not absurd; else 0.0, which
    makes the offer unusable (`core.translate.gpus`, `cpus`), never free. A price sent
    as a string is not taken: RunPod sends numbers."""
    if type(value) not in (int, float):
        return 0.0
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) and 0 < number < _ABSURD else 0.0


def _optional_int(value: object) -> int | None:
    """A whole figure; None when absent, not a number, non-finite or absurd."""
    if type(value) is int:  # JSON's usual answer: spare the conversions
        return value if -_ABSURD < value < _ABSURD else None
    if value is None:
        return None
    if isinstance(value, float) and not (math.isfinite(value) and abs(value) < _ABSURD):
        return None
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if abs(number) < _ABSURD else None


def _int(value: object, default: int = 0) -> int:
    if type(value) is int and -_ABSURD < value < _ABSURD:
        return value
    parsed = _optional_int(value)
    return default if parsed is None else parsed
