"""Kill-anywhere and fault campaign, bounded: two runs (the second deleting the database
at random moments), every crash point exercised, every invariant of `invariants.py`
held, convergence after the faults stop. Plus regressions the campaign found. That each
invariant can fail is tested in `test_invariants.py`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.runtime.tick.crashpoints import POINTS
from tests.chaos.campaign import MAX_SETTLE_TICKS, Campaign, RunResult, table
from tests.chaos.invariants import (
    duplicates,
    hostile_namespace_violations,
    instances_made,
    list_times,
    reruns,
)
from tests.chaos.ticks import CREATE_GRACE, Reconciler, TickPlan
from tests.chaos.workload import HOSTILE_CAPS, Workload
from tests.chaos.world import SimHost, Snapshot, pod_manifest, sim_host

# The campaign's module fixture runs hundreds of ticks (330 s once on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def campaign() -> list[RunResult]:
    return Campaign(runs=2, seed=11, chaos_ticks=22).execute()


def test_every_crash_point_is_exercised(campaign: list[RunResult]) -> None:
    fired = {p: sum(r.fired[p] for r in campaign) for p in POINTS}
    assert all(fired.values()), fired


def test_kills_faults_and_database_deletions_happen(campaign: list[RunResult]) -> None:
    assert sum(r.kills for r in campaign) > 0
    assert sum(sum(r.faults.values()) for r in campaign) >= 10
    assert campaign[1].db_chaos and campaign[1].db_deletions > 0
    assert sum(r.second_writers for r in campaign) > 0


def test_every_invariant_holds(campaign: list[RunResult]) -> None:
    assert not [v for r in campaign for v in r.violations], table(campaign)


def test_both_worlds_converge_after_the_faults_stop(campaign: list[RunResult]) -> None:
    settles = [r.settle_ticks for r in campaign]
    assert all(s is not None and s <= MAX_SETTLE_TICKS for s in settles), settles


# --- regressions ------------------------------------------------------------------------


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SimHost]:
    with sim_host(tmp_path) as running:
        running.ensure_namespace("lock")
        yield running


def test_a_tick_after_a_crashed_tick_is_not_refused(host: SimHost, tmp_path: Path) -> None:
    reconciler = Reconciler(host, tmp_path, "lock-node", "lock-cluster")
    host.create_pod(pod_manifest("lock", "a", "lock-node", batch=False))
    assert reconciler.tick(TickPlan(crash_at="after-create:1")).crashed
    after = reconciler.tick(TickPlan())
    assert after.returncode == 0 and after.report is not None


def test_a_late_listed_instance_does_not_fail_its_pod(host: SimHost, tmp_path: Path) -> None:
    reconciler = Reconciler(host, tmp_path, "lag-node", "lag-cluster")
    host.runpod("POST", "listing-lag", {"seconds": 4 * CREATE_GRACE})
    host.create_pod(pod_manifest("lock", "a", "lag-node", batch=False))
    for _ in range(3):  # each tick takes about a second: the grace runs out meanwhile
        reconciler.tick(TickPlan())
    pod = next(p for p in host.pods() if p["metadata"]["name"] == "a")
    assert pod["status"].get("phase") != "Failed", pod["status"]


def test_a_hostile_namespace_fails_no_tick(host: SimHost, tmp_path: Path) -> None:
    """`reconciler sync --once` while the pods' namespace carries the hostile-namespace
    fault's caps: the run ends with its report, the deleted pod's instance is terminated
    in it, and the namespace's new pod waits."""
    reconciler = Reconciler(host, tmp_path, "hostile-node", "hostile-cluster")
    host.create_pod(pod_manifest("lock", "old", "hostile-node", batch=False))
    reconciler.tick(TickPlan())
    (old,) = [i["id"] for i in host.instances() if i.get("desiredStatus") != "TERMINATED"]
    host.annotate_namespace("lock", HOSTILE_CAPS)
    host.create_pod(pod_manifest("lock", "new", "hostile-node", batch=False))
    host.delete_pod("lock", "old", grace=30)
    result = reconciler.tick(TickPlan())
    assert result.returncode == 0 and not hostile_namespace_violations(result), result
    live = [i["id"] for i in host.instances() if i.get("desiredStatus") != "TERMINATED"]
    assert old not in live and live == []


def test_a_refused_writer_takes_the_instance_another_wrote_on_the_pod(
    host: SimHost, tmp_path: Path
) -> None:
    """The campaign's duplicate (a second instance 59 ms after the first): a writer whose
    create RunPod refused (429 on every try) keeps a waiting row; a second writer, on a
    database of its own, creates the instance, writes it onto the pod and releases the
    Lease; RunPod's list lags. The first writer's next tick must take the pod's word."""
    first = Reconciler(host, tmp_path, "two-node", "two-cluster")
    second = Reconciler(host, tmp_path, "two-node", "two-cluster", database="two-node-second")
    host.create_pod(pod_manifest("lock", "a", "two-node", batch=False))
    refusals = {"method": "POST", "path": "/v2/pods", "status": 429, "count": 4, "retryAfter": 0}
    host.runpod("POST", "faults", refusals)
    assert first.tick(TickPlan()).returncode == 0
    assert host.instances() == [], "the refused create made an instance"
    host.runpod("POST", "listing-lag", {"seconds": 600})
    assert second.tick(TickPlan()).returncode == 0
    [made] = [i["id"] for i in host.instances()]
    pod = next(p for p in host.pods() if p["metadata"]["name"] == "a")
    assert pod["metadata"]["annotations"]["runpod.io/pod-id"] == made
    assert first.tick(TickPlan()).returncode == 0
    assert [i["id"] for i in host.instances()] == [made]


def test_ending_the_work_of_an_instance_the_list_hides_is_an_explained_rerun(
    host: SimHost, tmp_path: Path
) -> None:
    """Seed 108's rerun: a create answered 500 made the instance, which the list hides
    past the create grace; the workload, which reads RunPod's own state, fails it once it
    runs; the writer, which cannot know of it, creates again after the grace. The
    duplicate check explains that second instance; the rerun check must too."""
    reconciler = Reconciler(host, tmp_path, "doubt-node", "doubt-cluster")
    workload = Workload(host, "lock", "doubt-node", random.Random(0))
    host.runpod("POST", "listing-lag", {"seconds": 600})
    host.runpod("POST", "faults", {"kind": "create-then-fail", "status": 500, "count": 1})
    host.create_pod(pod_manifest("lock", "a", "doubt-node", batch=False))
    assert reconciler.tick(TickPlan()).returncode == 0
    time.sleep(1.0)  # booted (the simulator's boot takes 0.4 s): RUNNING, unlisted
    workload._error_one(Snapshot.take(host, reconciler.owner, reconciler.node, "lock"))
    [(uid, ended_on)] = workload.ended_on.items()
    time.sleep(CREATE_GRACE + 0.5)
    assert reconciler.tick(TickPlan()).returncode == 0
    requests = host.runpod_requests()
    made, lists = instances_made(requests), list_times(requests)
    first, _second = made[uid]  # the in-doubt instance, then its create tried again
    assert first.instance_id == ended_on
    assert len(duplicates(made, lists, CREATE_GRACE)[1]) == 1
    unexplained, explained = reruns(made, workload.ended, lists, CREATE_GRACE, workload.ended_on)
    assert unexplained == [] and len(explained) == 1
