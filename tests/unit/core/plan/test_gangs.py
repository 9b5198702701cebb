"""A gang's forming, its pure decisions (`core.plan.gangs.plan_gangs`): its pods wait
until every index of the Job is on the node, and while the Job is unread; then one
create of N members is planned; a create in doubt (its row `creating`, no member listed)
is not made again within the create grace, and is after it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.core.actions import CreateCluster, PatchStatus
from reconciler.core.cluster_row import ClusterRow, ClusterState
from reconciler.core.config import Settings
from reconciler.core.domain import Availability
from reconciler.core.plan.gangs import plan_gangs
from reconciler.core.plan.observation import CreateInputs, Observation
from reconciler.core.plan.situation import Situation
from reconciler.core.reasons import PodReason
from reconciler.core.resources import clusters

from ...conftest import build_gpu

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
JOB = "job-uid"
SETTINGS = Settings.of(cluster_id="cluster")
GPU = build_gpu("NVIDIA H100 80GB HBM3", memory=80, price=1.5, availability=Availability.HIGH)


def job() -> dict[str, Any]:
    spec = {"completionMode": "Indexed", "completions": 2, "parallelism": 2}
    return {"metadata": {"name": "train", "namespace": "ml", "uid": JOB}, "spec": spec}


def pod(index: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"train-{index}",
            "namespace": "ml",
            "uid": f"pod-{index}",
            "annotations": {
                "batch.kubernetes.io/job-completion-index": str(index),
                "runpod.io/cluster": "true",
            },
            "ownerReferences": [{"kind": "Job", "controller": True, "uid": JOB, "name": "train"}],
            "creationTimestamp": NOW.isoformat(),
        },
        "spec": {
            "nodeName": "virtual-runpod",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "ghcr.io/acme/train:1",
                    "command": ["torchrun", "train.py"],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def plan(pods: list[dict[str, Any]], inputs: bool = True, rows: tuple = ()) -> list[Any]:
    obs = replace(
        Observation([], [], []),
        gang_pods=pods,
        gang_inputs={JOB: CreateInputs(job=job())} if inputs else {},
        clusters=rows,
        catalog=[GPU],
        cluster_catalog=[GPU],
    )
    return plan_gangs(Situation(obs, SETTINGS, NOW))


def test_a_gang_waits_until_every_index_is_on_the_node() -> None:
    actions = plan([pod(0)])
    assert not [a for a in actions if isinstance(a, CreateCluster)]
    patched = [a for a in actions if isinstance(a, PatchStatus)]
    assert [a.pod.name for a in patched] == ["train-0"]
    assert PodReason.CLUSTER_FORMING.value in str(patched[0].status)
    assert "waiting for all 2 pods of Job train (1 on the node)" in str(patched[0].status)


def test_a_gang_whose_job_is_unread_waits_for_it() -> None:
    actions = plan([pod(0), pod(1)], inputs=False)
    assert not [a for a in actions if isinstance(a, CreateCluster)]
    assert "waiting for the pod's Job to be read" in str(actions)


def test_a_whole_gang_gets_one_create_of_n_members() -> None:
    creates = [a for a in plan([pod(0), pod(1)]) if isinstance(a, CreateCluster)]
    assert len(creates) == 1
    assert [p.name for p in creates[0].pods] == ["train-0", "train-1"]
    assert {c.pod_count for c in creates[0].candidates} == {2}
    assert creates[0].row.gang == clusters.gang_key(JOB, [pod(0), pod(1)])


def test_a_create_in_doubt_is_not_made_again_within_the_create_grace() -> None:
    key = clusters.gang_key(JOB, [pod(0), pod(1)])
    grace = SETTINGS.timing.create_grace_time

    def creating(age: float) -> ClusterRow:
        at = NOW - timedelta(seconds=age)
        return ClusterRow(key, JOB, "ml", "train", ClusterState.CREATING, at, at)

    assert plan([pod(0), pod(1)], rows=(creating(grace - 1),)) == []
    later = plan([pod(0), pod(1)], rows=(creating(grace + 1),))
    assert [type(a) for a in later] == [CreateCluster]
