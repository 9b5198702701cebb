"""When start-up lines are read early: which pods' instances are starting
(`reconciler.core.logs.starting`: provisioning, starting, or running without a runtime; only
mapped, live pods), and whether the quota is ample enough for a request that can wait
(`reconciler.core.capacity.pacing.ample`: our share beyond the reserve, and the recent rate with
it within half of what every window sustains)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.core.capacity.pacing import Window, ample
from reconciler.core.domain import Instance, InstanceStatus, Runtime
from reconciler.core.logs.starting import Starting, starting
from reconciler.core.mapping import MappingRow, MappingState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pod(name: str, deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"containers": [{"name": "main"}]}}


def row(name: str, state: MappingState = MappingState.RUNNING, age: int = 0) -> MappingRow:
    created = T0 - timedelta(seconds=age)
    return MappingRow(f"uid-{name}", "ml", name, state, created, created, instance_id=f"i-{name}")


def instance(name: str, status: InstanceStatus, runtime: bool = False) -> Instance:
    return Instance(f"i-{name}", name, status, runtime=Runtime() if runtime else None)


@pytest.mark.parametrize(
    ("status", "runtime", "expected"),
    [
        (InstanceStatus.PROVISIONING, False, True),
        (InstanceStatus.STARTING, False, True),
        (InstanceStatus.RUNNING, False, True),  # ContainerCreating until the runtime shows
        (InstanceStatus.RUNNING, True, False),
        (InstanceStatus.EXITED, False, False),
        (InstanceStatus.ERROR, False, False),
    ],
)
def test_what_counts_as_starting(status: InstanceStatus, runtime: bool, expected: bool) -> None:
    found = starting([pod("a")], [instance("a", status, runtime)], [row("a")])
    assert bool(found) is expected


def test_only_mapped_live_pods_oldest_first() -> None:
    pods = [pod("new"), pod("old"), pod("gone", deleting=True), pod("creating")]
    instances = [instance(n, InstanceStatus.STARTING) for n in ("new", "old", "gone", "orphan")]
    rows = [
        row("new", age=1),
        row("old", age=100),
        row("gone"),
        row("creating", MappingState.CREATING),
    ]
    found = starting(pods, instances, rows)
    assert [s.instance_id for s in found] == ["i-old", "i-new"]
    assert found[0] == Starting(found[0].pod, "i-old") and found[0].pod.namespace == "ml"


def test_ample_while_the_account_spends_under_half_of_what_windows_sustain() -> None:
    windows = [Window("minute", 50, 60.0, 60), Window("hour", 2900, 3000.0, 3000)]
    assert ample(windows, rate=0.2)
    # 50 requests over 60 s sustain 0.83/s: half is 0.42/s, and one more request counts.
    assert not ample(windows, rate=0.42)
    assert not ample([Window("minute", 1, 60.0, 60)], rate=0.0, extra=2)


def test_sharers_and_their_reserve_count() -> None:
    windows = [Window("minute", 8, 60.0, 60)]
    assert ample(windows, share_count=1.0, rate=0.0)
    # Three reconcilers on the key: a reserve of 6 leaves less than one request each.
    assert not ample(windows, share_count=3.0, rate=0.0)


def test_no_window_heard_of_is_ample() -> None:
    assert ample([], rate=100.0)
