"""Finished work never runs twice (docs/architecture.md §4): a batch pod's end is on the
pod before its instance goes. When the terminal status patch is refused, the stopped
instance stays and the patch is tried again; losing the database meanwhile never makes
a second instance."""

from __future__ import annotations

from pathlib import Path

from reconciler.demo.sandbox import Sandbox

STATUS = "/api/v1/namespaces/*/pods/*/status"


def creates(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if r.method == "POST" and r.path == "/v2/pods")


def delete_database(box: Sandbox) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(box.workdir / "reconciler.db") + suffix).unlink(missing_ok=True)


def terminated(box: Sandbox) -> list[str]:
    return [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]


def test_a_refused_terminal_status_keeps_the_instance_and_never_reruns(box: Sandbox) -> None:
    box.add_pod("train", command=["python", "train.py"], restart_policy="Never")
    box.tick()
    box.advance(60)
    box.tick()
    [instance] = box.owned_instances()
    box.runpod_sim.exit_process(instance["id"], 1)
    box.kube_sim.inject_fault("PATCH", STATUS, 409, count=2)
    box.tick()
    assert terminated(box) == []  # the pod does not say it ended yet: the instance stays
    delete_database(box)
    box.restart()
    for _ in range(4):
        box.advance(box.settings.timing.create_grace_time + 1)
        box.tick()
    pod = box.pod("train") or {}
    assert pod["status"]["phase"] == "Failed", pod["status"]
    state = pod["status"]["containerStatuses"][0]["state"]
    assert state["terminated"]["exitCode"] == 1, state
    assert creates(box) == 1
    assert box.owned_instances() == []  # terminated once the end was recorded
