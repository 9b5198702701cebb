"""Which Jobs form a gang and what a gang is (`core.resources.clusters`): only an
Indexed Job whose parallelism equals its completions, of 2 to 250 identical pods; a
gang is its Job's live pods, one per namespace and Job, so a new attempt (new pods) is a
new gang with a new key, and a finished or deleted pod is no longer in it."""

from __future__ import annotations

from typing import Any

from reconciler.core.resources import clusters

JOB = "job-uid"


def job(**spec: Any) -> dict:
    base = {"completionMode": "Indexed", "completions": 2, "parallelism": 2}
    return {"metadata": {"name": "train", "uid": JOB}, "spec": {**base, **spec}}


def pod(uid: str, index: int, job_uid: str = JOB, namespace: str = "ml", **status: Any) -> dict:
    return {
        "metadata": {
            "name": f"train-{index}",
            "namespace": namespace,
            "uid": uid,
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            "ownerReferences": [{"kind": "Job", "controller": True, "uid": job_uid}],
        },
        "spec": {"containers": [{"name": "main", "image": "train:1"}]},
        "status": {"phase": "Running", **status},
    }


PODS = [pod("a", 0), pod("b", 1)]


def test_an_indexed_job_of_equal_parallelism_and_identical_pods_is_a_cluster() -> None:
    assert clusters.why_not_a_cluster(job(), PODS) is None


def test_a_job_that_is_not_indexed_or_runs_its_pods_in_turns_is_refused() -> None:
    assert "not Indexed" in str(clusters.why_not_a_cluster(job(completionMode="NonIndexed"), PODS))
    unequal = clusters.why_not_a_cluster(job(parallelism=1), PODS)
    assert "parallelism (1) must equal its completions (2)" in str(unequal)


def test_a_cluster_has_2_to_250_pods() -> None:
    assert "of 1 pods" in str(clusters.why_not_a_cluster(job(completions=1, parallelism=1), []))
    assert clusters.why_not_a_cluster(job(completions=250, parallelism=250), PODS) is None
    too_many = clusters.why_not_a_cluster(job(completions=251, parallelism=251), PODS)
    assert "of 251 pods" in str(too_many)


def test_pods_that_differ_beyond_their_index_are_refused() -> None:
    other = pod("b", 1)
    other["spec"]["containers"][0]["image"] = "train:2"
    assert "are not the same" in str(clusters.why_not_a_cluster(job(), [PODS[0], other]))


def test_a_new_attempt_of_the_job_is_a_new_gang() -> None:
    first = clusters.gang_key(JOB, PODS)
    assert clusters.gang_key(JOB, list(reversed(PODS))) == first  # order is no attempt
    assert clusters.gang_key(JOB, [PODS[0], pod("c", 1)]) != first
    assert clusters.key_job(first) == JOB


def test_a_gang_is_its_jobs_live_pods_per_namespace() -> None:
    finished = pod("f", 1, phase="Failed")
    deleting = pod("d", 1)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    elsewhere = pod("x", 0, namespace="other")
    gangs = clusters.live_gangs([*PODS, finished, deleting, elsewhere, pod("y", 0, "job-2")])
    assert gangs[clusters.gang_key(JOB, PODS)] == PODS
    assert len(gangs) == 3  # ml's Job, other's pod naming the same UID, and job-2
    assert sorted(len(live) for live in gangs.values()) == [1, 1, 2]
