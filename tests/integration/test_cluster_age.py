"""A cluster of ours whose age RunPod's list does not give (no member shows `createdAt`:
the contract requires it, a broken answer may leave it out) is aged from when a list
first showed it, on RunPod's clock, kept in the store so that a restart does not start
the count again (`core.resources.cluster_age`): within its grace it is not deleted (it may
be another writer's, just made), past it it is, as a second cluster for one gang (the
create grace) and as an orphan (the orphan grace) alike."""

from __future__ import annotations

from typing import Any

import requests

from reconciler.core.contract import GANG_ENV
from reconciler.demo.sandbox import API_KEY, Sandbox

CREATE_GRACE, ORPHAN_GRACE = 30, 60  # the sandbox's (tests/integration/conftest.py)


def another_cluster(box: Sandbox, env: dict[str, str] | None = None) -> str:
    """A cluster made by another writer of ours with the gang's create body (`env`
    changed), shown in the list from now on without `createdAt`."""
    [ours] = [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]
    body: dict[str, Any] = {**ours.body, "env": {**ours.body["env"], **(env or {})}}
    made = requests.post(
        f"{box.runpod_sim.base_url}/v2/clusters",
        json=body,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=10,
    )
    assert made.status_code == 201, made.text
    cluster_id = str(made.json()["id"])
    members = [
        pod_id
        for pod_id, pod in box.runpod_sim.instances.items()
        if (pod.get("cluster") or {}).get("id") == cluster_id
    ]
    box.runpod_sim.faults.list_fields({"createdAt": None}, ids=members, count=10_000)
    return cluster_id


def deleted(box: Sandbox, cluster_id: str) -> bool:
    return any(
        (r.method, r.path) == ("DELETE", f"/v2/clusters/{cluster_id}")
        for r in box.runpod_sim.requests
    )


def running_gang(box: Sandbox) -> str:
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(CREATE_GRACE + 1)
    box.tick()
    [cluster_id] = box.runpod_sim.clusters
    return cluster_id


def test_a_second_cluster_without_its_age_goes_once_the_create_grace_passed(box: Sandbox) -> None:
    kept = running_gang(box)
    second = another_cluster(box)
    box.tick()  # first listed now
    box.advance(CREATE_GRACE - 10)
    box.tick()
    assert not deleted(box, second)  # may be a create of another writer's, just made
    box.advance(15)
    box.tick()
    assert deleted(box, second) and not deleted(box, kept)


def test_an_orphan_without_its_age_waits_the_orphan_grace_from_its_first_sighting(
    box: Sandbox,
) -> None:
    """Its Job's pods not read yet (another writer's gang, just made): kept through the
    orphan grace, across a restart, and collected past it."""
    running_gang(box)
    orphan = another_cluster(box, {GANG_ENV: "0b7e2a4c-0000-4000-8000-000000000000/other"})
    box.tick(dry_run=True)
    assert box.store.listed_clusters.first_listed() == {}  # a dry run writes nothing
    box.tick()  # first listed now
    assert set(box.store.listed_clusters.first_listed()) == {orphan}
    assert not deleted(box, orphan)
    box.advance(ORPHAN_GRACE - 20)
    box.restart()  # the first sighting is kept: the count does not start again
    box.tick()
    assert not deleted(box, orphan)
    box.advance(30)
    box.tick()
    assert deleted(box, orphan)
    box.advance(30)
    box.tick()
    box.tick()
    assert box.store.listed_clusters.first_listed() == {}  # gone: forgotten
