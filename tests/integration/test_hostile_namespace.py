"""One namespace's hostile annotations through both simulators over real HTTP: a cap out
of range is a reason for that namespace only (an Event naming the annotation and the
accepted range), the tick still terminates deleted pods, and removing the annotation
lets the namespace create again; a store that fails saving derived data (caps,
billing, look-alikes) blocks no termination."""

from __future__ import annotations

import pytest

from reconciler.core.money.namespace_caps import MAX_INSTANCES_ANNOTATION
from reconciler.demo.sandbox import Sandbox

from .test_lifecycle import phase


def _annotate_namespace(box: Sandbox, namespace: str, annotations: dict[str, str]) -> None:
    box.ensure_namespace(namespace)
    obj = box.kube_sim.get("namespaces", None, namespace) or {}
    obj["metadata"]["annotations"] = annotations
    box.kube_sim.put("namespaces", obj)


def _running(box: Sandbox, name: str, namespace: str = "default") -> None:
    box.add_pod(name, namespace=namespace)
    box.tick()
    box.advance(30)
    box.tick()
    box.tick()
    assert (box.pod(name, namespace) or {})["status"]["phase"] == "Running"


@pytest.mark.parametrize("value", ["9" * 31, "-1", "1e3", "0_1", " 1 ", "+5", "\uff11"])
def test_an_out_of_range_cap_holds_only_its_namespace(box: Sandbox, value: str) -> None:
    _running(box, "old")
    old_instance = box.instance_for(box.pod("old") or {})
    assert old_instance is not None
    _annotate_namespace(box, "team-a", {MAX_INSTANCES_ANNOTATION: value})
    box.add_pod("new", namespace="team-a")
    box.add_pod("other", namespace="team-b")
    box.kube_sim.delete_pod("default", "old", grace_seconds=30)
    report = box.tick()
    assert not report.errors, report.errors
    assert old_instance["id"] not in {i["id"] for i in box.owned_instances()}
    assert box.instance_for(box.pod("other", "team-b") or {}) is not None
    assert box.instance_for(box.pod("new", "team-a") or {}) is None
    told = [e for e in box.events("new", "team-a") if e["reason"] == "BudgetExceeded"]
    assert told and MAX_INSTANCES_ANNOTATION in told[0]["message"]
    assert "whole number from 0 to" in told[0]["message"]
    box.tick()
    assert phase(box, "old") is None

    # Taking the annotation off lets the namespace create again, without a restart.
    _annotate_namespace(box, "team-a", {})
    box.advance(120)
    assert not box.tick().errors
    assert box.instance_for(box.pod("new", "team-a") or {}) is not None


def test_a_store_failing_to_save_derived_data_blocks_no_termination(
    box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    _running(box, "old")
    old_instance = box.instance_for(box.pod("old") or {})
    assert old_instance is not None

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk I/O error")

    for part, name in (
        ("namespaces", "save_caps"),
        ("billing", "save"),
        ("namespaces", "sync_lookalikes"),
    ):
        monkeypatch.setattr(getattr(box.store, part), name, broken)
    _annotate_namespace(box, "team-a", {MAX_INSTANCES_ANNOTATION: "3"})
    box.add_pod("new", namespace="team-a")
    box.kube_sim.delete_pod("default", "old", grace_seconds=30)
    box.advance(2 * 3600)  # a billing read is due too
    report = box.tick()
    assert old_instance["id"] not in {i["id"] for i in box.owned_instances()}
    assert box.instance_for(box.pod("new", "team-a") or {}) is not None
    assert any("disk I/O error" in e for e in report.errors)


def test_a_pod_id_annotation_cannot_claim_someone_elses_instance(box: Sandbox) -> None:
    """Whoever may create a pod may write runpod.io/pod-id: naming another team's
    untagged instance in the account must not make the reconciler retag or delete it."""
    theirs = box.runpod_sim.add_instance("team-b-notebook", env={"JUPYTER_TOKEN": "x"})
    box.add_pod("hostile", annotations={"runpod.io/pod-id": theirs})
    for _ in range(3):
        box.tick()
        box.advance(30)
    box.kube_sim.delete_pod("default", "hostile", grace_seconds=30)
    for _ in range(4):
        box.tick()
        box.advance(box.settings.timing.orphan_grace_time)
    touched = [
        (r.method, r.path)
        for r in box.runpod_sim.requests
        if theirs in r.path and r.method != "GET"
    ]
    assert touched == []
    assert box.runpod_sim.instances[theirs]["env"] == {"JUPYTER_TOKEN": "x"}


def test_pod_id_annotations_that_no_row_can_hold_fail_no_commit(box: Sandbox) -> None:
    """Two pods naming one instance id, or an id longer than a row holds, made every
    tick's commit fail (the rows' instance ids are unique): rows are rebuilt only from
    an id RunPod could have given, claimed by one pod alone."""
    _running(box, "old")
    old_instance = box.instance_for(box.pod("old") or {})
    assert old_instance is not None
    box.add_pod("a", annotations={"runpod.io/pod-id": "same"})
    box.add_pod("b", annotations={"runpod.io/pod-id": "same"})
    box.add_pod("c", annotations={"runpod.io/pod-id": "x" * 100})
    box.kube_sim.delete_pod("default", "old", grace_seconds=30)
    for _ in range(3):
        assert not box.tick().errors
        box.advance(box.settings.timing.create_grace_time)
    assert old_instance["id"] not in {i["id"] for i in box.owned_instances()}
    assert phase(box, "old") is None
    assert box.instance_for(box.pod("c") or {}) is not None  # created, not failed as lost
