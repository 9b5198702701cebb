"""The simulated RunPod's network volumes: the contract's rules, their data and their bill.

    GET    /v2/network-volumes        every volume of the account, after the listing lag
                                      (`listing`): a new one is read by id at once
    POST   /v2/network-volumes        201; 422 off the schema (size 10-4096, type), 400 for
                                      an unknown data center
    GET    /v2/network-volumes/{id}   404 for an unknown id
    PATCH  /v2/network-volumes/{id}   `name`, `size`: grow only (400 on a shrink), nothing
                                      else (422: the data center and the type are immutable)
    DELETE /v2/network-volumes/{id}   204; 404 unknown; 400 while a pod (stopped or not)
                                      mounts it (`faults.volume_delete_keeps_billing`: 204, hidden,
                                      billing on until deleted again)
    GET    /v2/billing/network-volumes   per volume per bucket, standard and
                                      high-performance amounts

A pod that mounts a volume (`mounts.network`) is placed in the volume's data center, on
the secure cloud only; a create that names other data centers, an unknown volume or the
community cloud is refused (400, a rule: it fails the same on every candidate).

Each volume's data is a real directory (`directory(id)`), which every pod mounting it
sees at its mount path inside its SSH sandbox (`ssh`): a file one pod writes is
there for the next. Deleting the volume deletes the directory.

Storage bills from creation to deletion at the size it had in each moment: $0.07 per GB
and month standard, $0.14 high performance (the simulator's prices, flat).
"""

from __future__ import annotations

import shutil
import string
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from random import Random
from typing import Any

from reconciler.sim.runpod import billing
from reconciler.sim.runpod.listing import Listing
from reconciler.sim.runpod.validate import Problem, check_create_volume, check_update_volume

VOLUME_TYPES = ("STANDARD", "HIGH_PERFORMANCE")
USD_PER_GB_HOUR = {"STANDARD": 0.07 / (30 * 24), "HIGH_PERFORMANCE": 0.14 / (30 * 24)}
_ID_ALPHABET = string.ascii_lowercase + string.digits


@dataclass
class SimVolume(Listing):
    id: str
    name: str
    datacenter: str
    type: str
    created_at: datetime
    sizes: list[tuple[datetime, int]]
    """Each size the volume had, from when: the bill follows it."""
    directory: Path
    deleted_at: datetime | None = None
    listed_from: datetime | None = None

    @property
    def size(self) -> int:
        return self.sizes[-1][1]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "size": self.size,
            "dataCenter": self.datacenter,
            "type": self.type,
        }

    def amount(self, start: datetime, end: datetime, now: datetime) -> float:
        """USD charged within [start, end) up to `now`."""
        stops = [moment for moment, _ in self.sizes[1:]] + [self.deleted_at or now]
        gb_seconds = sum(
            size * _overlap(since, until, start, end)
            for (since, size), until in zip(self.sizes, stops, strict=True)
        )
        return USD_PER_GB_HOUR[self.type] * gb_seconds / 3600


@dataclass
class Volumes:
    """The account's network volumes, live and deleted (deleted ones still bill history)."""

    random: Random = field(default_factory=lambda: Random(1))
    live: dict[str, SimVolume] = field(default_factory=dict)
    gone: list[SimVolume] = field(default_factory=list)
    hidden: dict[str, SimVolume] = field(default_factory=dict)
    """Volumes a DELETE answered 204 for and hid (404, not listed) that bill on, until
    their id is deleted again: the leak a billing audit must find."""
    _root: Path | None = None

    def create(
        self, body: Any, datacenters: set[str], now: datetime, listed_from: datetime
    ) -> SimVolume:
        """A volume made through the API: listed from `listed_from` (the listing lag)."""
        check_create_volume(body)
        if body["dataCenter"] not in datacenters:
            raise Problem(400, f"dataCenter: unknown data center {body['dataCenter']}")
        volume = self.add(body["name"], body["size"], body["dataCenter"], now, body.get("type"))
        volume.listed_from = listed_from
        return volume

    def listed(self, now: datetime) -> list[SimVolume]:
        """What `GET /v2/network-volumes` shows now: the live volumes past their lag."""
        return [volume for volume in self.live.values() if volume.listed(now)]

    def add(
        self, name: str, size: int, datacenter: str, now: datetime, kind: str | None = None
    ) -> SimVolume:
        volume_id = self._new_id()
        directory = self._directory_root() / volume_id
        directory.mkdir()
        volume = SimVolume(
            volume_id, name, datacenter, kind or "STANDARD", now, [(now, size)], directory
        )
        self.live[volume_id] = volume
        return volume

    def get(self, volume_id: str) -> SimVolume:
        volume = self.live.get(volume_id)
        if volume is None:
            raise Problem(404, "network volume not found")
        return volume

    def update(self, volume_id: str, body: Any, now: datetime) -> SimVolume:
        check_update_volume(body)
        volume = self.get(volume_id)
        size = body.get("size", volume.size)
        if size < volume.size:
            raise Problem(400, f"size {size}: network volume storage cannot be reduced")
        if size != volume.size:
            volume.sizes.append((now, size))
        volume.name = body.get("name", volume.name)
        return volume

    def delete(
        self, volume_id: str, mounted_by: Iterable[str], now: datetime, keeps_billing: bool = False
    ) -> None:
        hidden = self.hidden.pop(volume_id, None)
        if hidden is not None:  # deleted before, yet billing: this DELETE ends it
            hidden.deleted_at = now
            self.gone.append(hidden)
            return
        volume = self.get(volume_id)
        users = sorted(mounted_by)
        if users:
            raise Problem(400, f"network volume is in use by pod {users[0]}")
        del self.live[volume_id]
        shutil.rmtree(volume.directory, ignore_errors=True)
        if keeps_billing:
            self.hidden[volume_id] = volume
            return
        volume.deleted_at = now
        self.gone.append(volume)

    def placement(self, body: Mapping[str, Any]) -> list[str] | None:
        """The data centers a create may use given its network mount (None: no mount)."""
        mounts = body.get("mounts", {}).get("network", [])
        if not mounts:
            return None
        if not mounts[0]["path"].startswith("/") or not mounts[0]["path"].strip("/"):
            raise Problem(400, "mounts.network[0].path must be an absolute path below /")
        volume = self.live.get(mounts[0]["volumeId"])
        if volume is None:
            raise Problem(400, f"network volume {mounts[0]['volumeId']} not found")
        if body.get("cloud", "SECURE") != "SECURE":
            raise Problem(400, "network volumes are offered on the SECURE cloud only")
        wanted = body.get("dataCenterIds", [])
        if wanted and volume.datacenter not in wanted:
            raise Problem(
                400,
                f"network volume {volume.id} is in {volume.datacenter}, "
                f"not in dataCenterIds {', '.join(wanted)}",
            )
        return [volume.datacenter]

    def mounted_directories(self, mounts: Mapping[str, Any]) -> dict[str, Path]:
        """A pod's network mounts as {mount path: the volume's directory}."""
        return {
            mount["path"]: self.live[mount["volumeId"]].directory
            for mount in mounts.get("network", [])
            if mount["volumeId"] in self.live
        }

    def billing(
        self, window: billing.Window, volume_id: str | None, now: datetime
    ) -> dict[str, Any]:
        """The body of `GET /v2/billing/network-volumes`."""
        billed: list[tuple[datetime, int, dict[str, Any]]] = []
        for order, volume in enumerate([*self.gone, *self.live.values(), *self.hidden.values()]):
            if volume_id is not None and volume.id != volume_id:
                continue
            first = max(window.start, billing.floor_bucket(volume.created_at, window.size))
            last = min(window.end, volume.deleted_at or window.end)
            for start, end in billing.buckets(first, last, window.size):
                amount = volume.amount(start, end, now)
                if amount:
                    record = {
                        "startTime": billing.iso(start),
                        "endTime": billing.iso(end),
                        "networkVolumeId": volume.id,
                        **_amounts(amount, volume.type),
                    }
                    billed.append((start, order, record))
        records = [record for _, _, record in sorted(billed, key=lambda item: item[:2])]
        totals = {
            key: round(sum(r[key] for r in records), billing.AMOUNT_DECIMALS)
            for key in ("totalAmount", "standardAmount", "highPerformanceAmount")
        }
        query = {
            "startTime": billing.iso(window.start),
            "endTime": billing.iso(window.end),
            "bucketSize": window.size,
            "networkVolumeId": volume_id,
        }
        return {
            "records": records,
            "metadata": {
                "query": query,
                "recordCount": len(records),
                "uniqueNetworkVolumeCount": len({r["networkVolumeId"] for r in records}),
                "totals": totals,
            },
        }

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _directory_root(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="runpod-sim-volumes-"))
        return self._root

    def _new_id(self) -> str:
        taken = {*self.live, *self.hidden, *(volume.id for volume in self.gone)}
        while True:
            candidate = "".join(self.random.choices(_ID_ALPHABET, k=10))
            if candidate not in taken:
                return candidate


def _amounts(amount: float, kind: str) -> dict[str, float]:
    rounded = round(amount, billing.AMOUNT_DECIMALS)
    high = kind == "HIGH_PERFORMANCE"
    return {
        "totalAmount": rounded,
        "standardAmount": 0.0 if high else rounded,
        "highPerformanceAmount": rounded if high else 0.0,
    }


def _overlap(a_start: datetime, a_end: datetime, b_start: datetime, b_end: datetime) -> float:
    return max(0.0, (min(a_end, b_end) - max(a_start, b_start)).total_seconds())
