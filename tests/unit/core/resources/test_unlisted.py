"""Which resources each kind expects that its list omits or shows without their tags
(docs/architecture.md §3, "Cloud resources", "Gone only on a 404 by id"): the pure half
of the one read-by-id path (`runtime/tick/by_id.py`). Instances: a running row of a live pod;
clusters: a live gang's running row or its pods' annotation; volumes: the handle of a
released or grown PV. What the list shows as we know it, and what nothing live expects,
is never read."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.contract import GANG_ENV, OWNER_ENV, POD_UID_ENV
from reconciler.core.domain import Instance, InstanceStatus, RunPodVolume
from reconciler.core.mapping import MappingRow, MappingState, unconfirmed_instances
from reconciler.core.pods.ownership import Ownership
from reconciler.core.resources import clusters, network_volumes
from reconciler.core.resources.volume_objects import (
    CSI_DRIVER,
    PROVISIONED_BY,
    PROVISIONER,
    StorageView,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _row(uid: str, instance: str, state: MappingState = MappingState.RUNNING) -> MappingRow:
    return MappingRow(uid, "ns", uid, state, NOW, NOW, instance_id=instance)


def _confirm(rows: list[MappingRow], listed: list[Instance], live: set[str]) -> list[str]:
    owners = Ownership.of(OWNER, listed, rows, [])
    lost = {instance.id for instance, _ in owners.lost_tags}
    return unconfirmed_instances(rows, owners.owned, lost, live)


def test_instances_read_by_id_are_those_live_pods_map_and_the_list_omits() -> None:
    rows = [
        _row("a", "i-a"),  # listed
        _row("b", "i-b"),  # omitted: read
        _row("c", "i-c"),  # its pod is gone: the orphan rules, not a read
        _row("d", "i-d", MappingState.CREATING),  # not made yet: the create grace
    ]
    assert _confirm(rows, [_instance("i-a", "a")], {"a", "b", "d"}) == ["i-b"]


def _instance(instance_id: str, uid: str | None, owner: str | None = "owner") -> Instance:
    env = {OWNER_ENV: owner, POD_UID_ENV: uid}
    return Instance(
        id=instance_id,
        name=instance_id,
        status=InstanceStatus.RUNNING,
        env={k: v for k, v in env.items() if v is not None},
    )


OWNER = "owner"


def test_instances_read_by_id_are_also_those_the_list_shows_with_other_tags() -> None:
    rows = [_row(uid, f"i-{uid}") for uid in "abcd"]
    listed = [
        _instance("i-a", "a"),  # as we know it
        _instance("i-b", "b", owner="someone-else"),  # owner tag swapped: read
        _instance("i-c", "x"),  # another pod's UID tag: read
        _instance("i-d", None, owner=None),  # tags gone: read before restoring them
    ]
    assert _confirm(rows, listed, set("abcd")) == ["i-b", "i-c", "i-d"]


def test_instances_read_by_id_are_also_those_the_list_shows_ended_or_broken() -> None:
    rows = [_row(uid, f"i-{uid}") for uid in "abcd"]
    statuses = {"b": InstanceStatus.ERROR, "c": InstanceStatus.TERMINATED}
    statuses["d"] = InstanceStatus.EXITED  # a batch pod's end: its log says more
    listed = [
        dataclasses.replace(
            _instance(f"i-{uid}", uid), status=statuses.get(uid, InstanceStatus.RUNNING)
        )
        for uid in "abcd"
    ]
    assert _confirm(rows, listed, set("abcd")) == ["i-b", "i-c"]


def _gang_pod(uid: str, cluster_id: str | None = None) -> dict[str, Any]:
    annotations = {clusters.CLUSTER_ID: cluster_id} if cluster_id else {}
    return {
        "metadata": {
            "uid": uid,
            "namespace": "ns",
            "name": uid,
            "annotations": annotations,
            "ownerReferences": [{"kind": "Job", "uid": "job-1", "controller": True}],
        },
        "status": {"phase": "Running"},
    }


def _member(cluster_id: str, gang: str | None = None, owner: str = OWNER) -> Instance:
    env = {OWNER_ENV: owner, **({GANG_ENV: gang} if gang else {})}
    return Instance(
        id=f"m-{cluster_id}",
        name="m",
        status=InstanceStatus.RUNNING,
        cluster_id=cluster_id,
        env=env,
    )


def test_clusters_read_by_id_are_those_a_live_gang_records_and_the_list_omits() -> None:
    pods = [_gang_pod("p0", "c-annotated"), _gang_pod("p1")]
    gang = clusters.gang_key("job-1", pods)
    rows = [
        ClusterRow(gang, "job-1", "ns", "train", ClusterState.RUNNING, NOW, NOW, "c-row"),
        ClusterRow("old", "job-0", "ns", "old", ClusterState.RUNNING, NOW, NOW, "c-dead"),
    ]
    assert clusters.unlisted(rows, pods, [], OWNER) == ["c-annotated", "c-row"]
    listed = [_member("c-annotated"), _member("c-row", gang)]
    assert clusters.unlisted(rows, pods, listed, OWNER) == []


def test_a_cluster_a_gang_records_shown_without_its_tags_is_read_by_id() -> None:
    pods = [_gang_pod("p0"), _gang_pod("p1")]
    gang = clusters.gang_key("job-1", pods)
    rows = [ClusterRow(gang, "job-1", "ns", "train", ClusterState.RUNNING, NOW, NOW, "c-row")]
    assert clusters.unlisted(rows, pods, [_member("c-row")], OWNER) == ["c-row"]  # no gang tag
    swapped = [_member("c-row", gang, owner="someone-else")]
    assert clusters.unlisted(rows, pods, swapped, OWNER) == ["c-row"]
    assert clusters.unlisted(rows, pods, [_member("c-row", gang)], OWNER) == []


def _pv(name: str, handle: str, phase: str, policy: str = "Delete") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "claimRef": {"uid": name.removeprefix("pvc-"), "namespace": "ns", "name": "c"},
            "csi": {"driver": CSI_DRIVER, "volumeHandle": handle},
            "persistentVolumeReclaimPolicy": policy,
            "capacity": {"storage": "20G"},
        },
        "status": {"phase": phase},
    }


def test_volumes_read_by_id_are_those_a_released_pv_names_and_the_list_omits() -> None:
    pvs = [
        _pv("pvc-1", "v-released", "Released"),
        _pv("pvc-2", "v-bound", "Bound"),  # nothing decided on it: not read
        _pv("pvc-3", "v-listed", "Released"),
        _pv("pvc-4", "v-retained", "Released", policy="Retain"),
    ]
    listed = [RunPodVolume("v-listed", "n", 20, "EU-RO-1")]
    view = StorageView((), (), pvs, (), (), "owner", "node", listed=listed)
    assert network_volumes.unlisted(view) == ["v-released"]
    assert network_volumes.unlisted(StorageView((), (), pvs, (), (), "owner", "node")) == []
