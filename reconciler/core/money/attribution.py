"""Whose network volumes and Instant Clusters they are, for RunPod's charges of them
(docs/architecture.md §3, Money).

RunPod bills a network volume (`GET /v2/billing/network-volumes`) and an Instant
Cluster (`GET /v2/billing/clusters`) by id only. The tick already sees who each of ours
belongs to: a volume's PersistentVolume names its claim, a cluster's members carry
their gang's tag, whose Job the cluster row or the gang's pods name. That is written
down (an `Attribution` per resource, kept as long as `--cost-history`), so that the
charges stay attributed after the claim, the Job or the resource itself is gone.

A resource of ours whose owner is not known (a volume of ours that no PV names, a
cluster whose Job left no row and no pod) is attributed to nobody: its charges are
shown as unattributed, never dropped.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reconciler.core.cluster_row import ClusterRow
from reconciler.core.domain import Instance, KubeObject, RunPodVolume
from reconciler.core.resources import clusters
from reconciler.core.resources.volume_objects import (
    PROVISIONED_BY,
    PROVISIONER,
    claim_uid_of,
    is_our_volume_object,
)


class Billed(enum.StrEnum):
    """A kind of RunPod resource billed apart from instances."""

    NETWORK_VOLUME = "network-volume"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class Attribution:
    kind: str
    """A `Billed` value, or a plug-in resource's billing kind (`BillingRoute.kind`)."""
    resource_id: str
    namespace: str | None
    """None: ours, but whose is not known (its charges are shown as unattributed)."""
    name: str | None
    """The claim's name (a volume) or the Job's (a cluster)."""
    owner_uid: str | None
    """The claim's or the Job's UID."""
    detail: str | None = None
    """The volume's type (STANDARD, HIGH_PERFORMANCE) or the cluster's GPU type."""


def of_volumes(
    volumes: Sequence[KubeObject], leaked: Iterable[RunPodVolume], owner_id: str
) -> list[Attribution]:
    """Volumes we provisioned, by the PV that names each (its claim), and leaked volumes
    of ours (no PV names them) as nobody's."""
    found = []
    for pv in volumes:
        spec = pv.get("spec") or {}
        annotations = (pv.get("metadata") or {}).get("annotations") or {}
        handle = (spec.get("csi") or {}).get("volumeHandle")
        if not is_our_volume_object(pv) or annotations.get(PROVISIONED_BY) != PROVISIONER:
            continue  # a PV made by hand for someone's volume: not ours to bill
        if not handle:
            continue
        claim = spec.get("claimRef") or {}
        kind = ((spec.get("csi") or {}).get("volumeAttributes") or {}).get("type")
        found.append(
            Attribution(
                Billed.NETWORK_VOLUME,
                str(handle),
                claim.get("namespace"),
                claim.get("name"),
                claim.get("uid"),
                kind,
            )
        )
    for volume in leaked:
        uid = claim_uid_of(volume, owner_id)
        found.append(Attribution(Billed.NETWORK_VOLUME, volume.id, None, None, uid, volume.type))
    return found


def of_clusters(
    members: Sequence[Instance],
    rows: Sequence[ClusterRow],
    gang_pods: Sequence[KubeObject],
    owner_id: str,
) -> list[Attribution]:
    """Clusters of ours, by their gang's row, else by the gang's pods (its Job); a
    listed cluster whose Job neither names is nobody's."""
    jobs: dict[str, tuple[str | None, str | None]] = {
        row.job_uid: (row.namespace, row.job_name) for row in rows
    }
    for pod in gang_pods:
        job, name = clusters.job_uid(pod), clusters.job_name(pod)
        if job is not None and name:
            jobs.setdefault(job, (pod["metadata"].get("namespace", "default"), name))
    found: dict[str, Attribution] = {}
    for row in rows:
        if row.cluster_id:
            found[row.cluster_id] = Attribution(
                Billed.CLUSTER,
                row.cluster_id,
                row.namespace,
                row.job_name,
                row.job_uid,
                row.gpu_type_id,
            )
    for gang, listed in clusters.members_by_gang(members, owner_id).items():
        job = clusters.key_job(gang)
        namespace, job_name = jobs.get(job) or (None, None)
        for cluster_id in {m.cluster_id for m in listed if m.cluster_id}:
            if cluster_id not in found or found[cluster_id].namespace is None:
                gpu = listed[0].gpu_type_id
                found[cluster_id] = Attribution(
                    Billed.CLUSTER, cluster_id, namespace, job_name, job, gpu
                )
    return list(found.values())
