"""A small in-memory model of both worlds, to build planner inputs and apply plans."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.core.actions import (
    Action,
    Adopt,
    Create,
    DeleteRow,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
    RestoreTags,
    SaveRow,
    Terminate,
)
from reconciler.core.capacity.stock import Place
from reconciler.core.config import Settings
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.core.domain import (
    Availability,
    BillingRecord,
    DataCenterStock,
    GpuType,
    Instance,
    InstanceStatus,
    KubeObject,
    PortMapping,
    Runtime,
)
from reconciler.core.mapping import MappingRow
from reconciler.core.money.namespace_caps import NamespaceCaps
from reconciler.core.planner import CreateInputs, Observation, plan_tick
from reconciler.core.pods.ownership import Ownership, Records, unlisted_annotations
from reconciler.core.pods.podinfo import is_ours_to_run

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = Settings.of(cluster_id="cluster-a", max_instances=50, max_hourly_spend=100.0)
OWNER = SETTINGS.owner_id

CATALOG = [
    GpuType(
        "NVIDIA GeForce RTX 4090",
        "RTX 4090",
        24,
        True,
        True,
        0.69,
        0.34,
        availability=Availability.HIGH,
        datacenters=(DataCenterStock("US-TX-3", Availability.HIGH),),
    ),
    GpuType(
        "NVIDIA A100 80GB PCIe",
        "A100 80GB",
        80,
        True,
        True,
        1.64,
        1.19,
        availability=Availability.MEDIUM,
        datacenters=(DataCenterStock("EU-RO-1", Availability.MEDIUM),),
    ),
]

_ids = itertools.count(1)


def pod(
    name: str,
    uid: str | None = None,
    *,
    phase: str = "Pending",
    created: datetime = T0,
    annotations: dict[str, str] | None = None,
    restart_policy: str = "Always",
    deleting: bool = False,
    command: list[str] | None = None,
    ports: list[int] | None = None,
) -> KubeObject:
    container: dict[str, Any] = {
        "name": "main",
        "image": "python:3.11",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    if command is not None:
        container["command"] = command
    if ports:
        container["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in ports]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": uid or f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "annotations": dict(annotations or {}),
    }
    if deleting:
        meta["deletionTimestamp"] = (created + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": meta,
        "spec": {
            "nodeName": SETTINGS.node.name,
            "restartPolicy": restart_policy,
            "containers": [container],
        },
        "status": {"phase": phase},
    }


def instance(
    pod_uid: str | None,
    *,
    status: InstanceStatus = InstanceStatus.RUNNING,
    owner: str = OWNER,
    created: datetime = T0,
    instance_id: str | None = None,
    runtime: bool = True,
) -> Instance:
    env = {OWNER_ENV: owner}
    if pod_uid is not None:
        env[POD_UID_ENV] = pod_uid
    return Instance(
        id=instance_id or f"inst{next(_ids)}",
        name=f"ml-{pod_uid}",
        status=status,
        env=env,
        cost_per_hr=0.69 if status is InstanceStatus.RUNNING else 0.0,
        gpu_type_id=CATALOG[0].id,
        gpu_count=1,
        datacenter_id="US-TX-3",
        created_at=created,
        runtime=Runtime(60, (PortMapping(22, "tcp", "1.2.3.4", 40022),))
        if runtime and status is InstanceStatus.RUNNING
        else None,
    )


@dataclass
class World:
    pods: dict[str, KubeObject] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)
    rows: dict[str, MappingRow] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    exit_logs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    namespace_caps: dict[str, NamespaceCaps] = field(default_factory=dict)
    billing: list[BillingRecord] = field(default_factory=list)
    spend: dict[str, float] = field(default_factory=dict)
    now: datetime = T0
    settings: Settings = SETTINGS
    rate_budget: int | None = None
    refused: frozenset[Place] = frozenset()

    def add(self, *objects: KubeObject | Instance) -> World:
        for obj in objects:
            if isinstance(obj, Instance):
                self.instances[obj.id] = obj
            else:
                self.pods[obj["metadata"]["uid"]] = obj
        return self

    def observe(self) -> Observation:
        instances = [self._aged(i) for i in self.instances.values()]
        pods = [p for p in self.pods.values() if is_ours_to_run(p)]
        rows = list(self.rows.values())
        # As the engine reads them: an id a pod names that the world has not is RunPod's 404.
        gone = unlisted_annotations(pods, rows, self.instances.keys())
        records = Records({i.id: i for i in instances}, gone=frozenset(gone))
        return Observation(
            pods=list(self.pods.values()),
            instances=instances,
            rows=rows,
            ownership=Ownership.of(self.settings.owner_id, instances, rows, pods, records),
            catalog=CATALOG,
            create_inputs={uid: CreateInputs() for uid in self.pods},
            exit_codes=dict(self.exit_codes),
            rate_budget=self.rate_budget,
            refused=self.refused,
            exit_logs=dict(self.exit_logs),
            namespace_caps=dict(self.namespace_caps),
            billing=list(self.billing),
            spend=dict(self.spend),
        )

    def _aged(self, inst: Instance) -> Instance:
        """A running container's uptime grows with the world's clock, as on RunPod."""
        if inst.runtime is None or inst.created_at is None:
            return inst
        uptime = int((self.now - inst.created_at).total_seconds())
        return dataclasses.replace(
            inst, runtime=dataclasses.replace(inst.runtime, uptime_seconds=uptime)
        )

    def plan(self) -> list[Action]:
        return plan_tick(self.observe(), self.settings, self.now)

    def apply(self, actions: list[Action]) -> None:
        """Every action succeeds, as the executor would make it (creates start RUNNING)."""
        for action in actions:
            self._apply(action)

    def _apply(self, action: Action) -> None:
        match action:
            case SaveRow(row=row) | Adopt(row=row):
                self.rows[row.pod_uid] = row
            case DeleteRow(pod_uid=uid):
                self.rows.pop(uid, None)
            case Create(pod=ref, row=row, candidates=candidates):
                new = instance(ref.uid, created=self.now)
                new = Instance(**{**new.__dict__, "env": dict(candidates[0].env)})
                self.instances[new.id] = new
                self.rows[ref.uid] = row.changed(state=row.state.RUNNING, instance_id=new.id)
            case RestoreTags(instance_id=iid, env=env):
                self.instances[iid] = Instance(**{**self.instances[iid].__dict__, "env": env})
            case Terminate(instance_id=iid, row=row):
                self.instances.pop(iid, None)
                if row is not None:
                    self.rows[row.pod_uid] = row
            case PatchStatus(pod=ref, status=status, row=row, annotations=changes):
                if ref.uid in self.pods:
                    self.pods[ref.uid] = {**self.pods[ref.uid], "status": copy.deepcopy(status)}
                    if changes:
                        meta = self.pods[ref.uid]["metadata"] = dict(self.pods[ref.uid]["metadata"])
                        meta["annotations"] = {**meta.get("annotations", {}), **changes}
                    self.touch(ref.uid)
                self.rows[row.pod_uid] = row
            case PatchMetadata(pod=ref, annotations=changes):
                meta = self.pods[ref.uid]["metadata"]
                meta["annotations"] = {**meta.get("annotations", {}), **changes}
                self.touch(ref.uid)
            case FinalizePod(pod=ref, row=row):
                self.pods.pop(ref.uid, None)
                if row is not None:
                    self.rows[row.pod_uid] = row

    def touch(self, uid: str) -> None:
        """A new resourceVersion, as the API server gives every write to a pod."""
        meta = self.pods[uid]["metadata"] = dict(self.pods[uid]["metadata"])
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)


def kinds(actions: list[Action]) -> list[str]:
    return [type(a).__name__ for a in actions]
