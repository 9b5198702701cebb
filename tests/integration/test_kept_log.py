"""The log kept when a pod's instance ends while the pod object stays (docs/guides/logs.md,
"After the end"): its last 1000 lines at most, and at most 1 MiB of them, the newest kept; and it
goes when the pod's row goes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.demo.sandbox import Sandbox

from .conftest import FAST

MIB = 1 << 20


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(FAST) as sandbox:
        yield sandbox


def finished_batch_pod(box: Sandbox, lines: list[str]) -> str:
    """A batch pod that printed `lines` and ended; returns its UID, its log kept."""
    box.add_pod("job", command=["python", "train.py"], restart_policy="Never")
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("job") or {})
    assert instance is not None
    box.runpod_sim.logs.write_container(instance["id"], lines)
    box.runpod_sim.exit_process(instance["id"], 0)
    box.tick()
    assert (box.pod("job") or {})["status"]["phase"] == "Succeeded"
    assert instance["id"] not in box.runpod_sim.instances
    return str((box.pod("job") or {})["metadata"]["uid"])


def kept_lines(box: Sandbox, uid: str) -> list[str]:
    kept = box.store.saved_logs.read(uid)
    assert kept is not None
    return [line for _ts, line in kept]


def test_the_last_1000_lines_are_kept(box: Sandbox) -> None:
    printed = [f"step {n}" for n in range(1500)]
    assert kept_lines(box, finished_batch_pod(box, printed)) == printed[-1000:]


def test_at_most_1_mib_is_kept_the_newest_lines(box: Sandbox) -> None:
    printed = [f"{n:04d} " + "x" * 2043 for n in range(700)]  # 2 KiB a line, 1.4 MiB
    kept = kept_lines(box, finished_batch_pod(box, printed))
    size = sum(len(line.encode()) + 1 for line in kept)  # each line with its newline
    assert kept == printed[-len(kept) :]
    assert size <= MIB < size + len(printed[-len(kept) - 1].encode()) + 1


def test_the_kept_log_is_deleted_with_the_pods_row(box: Sandbox) -> None:
    uid = finished_batch_pod(box, ["done"])
    assert kept_lines(box, uid)[-1] == "done"
    box.kube_sim.delete_pod("default", "job")
    box.tick()
    assert box.store.row(uid) is not None  # kept for `reconciler cost`, and the log with it
    box.advance(box.settings.caps.cost_history_days * 86400 + 60)
    box.tick()
    assert box.store.row(uid) is None
    assert box.store.saved_logs.read(uid) is None
