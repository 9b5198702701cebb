"""Two virtual nodes of one cluster, one RunPod account, and Immediate-binding claims
(docs/architecture.md §3, "Cloud resources"): both nodes' reconcilers see every such
claim (no node is selected for it), each names its volumes with its own owner digest,
so a claim both provisioned would have two volumes under two names, one billing for
ever. Real `reconciler sync --once` processes, each with its own database, run at the
same time against both simulators; RunPod's request log counts the volumes made."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.chaos.invariants import volumes_left_billing, volumes_made_twice
from tests.chaos.ticks import Reconciler, TickPlan, TickResult
from tests.chaos.world import (
    IMMEDIATE_CLASS,
    SimHost,
    Snapshot,
    claim_manifest,
    csi_driver,
    sim_host,
    storage_classes,
)

# Real processes against the simulators: several seconds a round on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NAMESPACE = "shared"
CLAIMS = 20
CLUSTER = "two-nodes"
PVS = "/api/v1/persistentvolumes"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SimHost]:
    with sim_host(tmp_path) as running:
        running.ensure_namespace(NAMESPACE)
        for storage_class in storage_classes():
            running.put_object("storageclasses", storage_class)
        running.put_object("csidrivers", csi_driver())
        yield running


def nodes(host: SimHost, tmp_path: Path) -> tuple[Reconciler, Reconciler]:
    return (
        Reconciler(host, tmp_path, "node-a", CLUSTER),
        Reconciler(host, tmp_path, "node-b", CLUSTER),
    )


def together(
    a: Reconciler, b: Reconciler, plan_a: TickPlan | None = None
) -> tuple[TickResult, TickResult]:
    """One tick of each, at the same time."""
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(a.tick, plan_a or TickPlan())
        second = pool.submit(b.tick, TickPlan())
        return first.result(), second.result()


def add_claims(host: SimHost) -> None:
    """The claims, all at once; then both nodes read them before either holds one: the
    volume list (read after the claims, before any decision) answers each node's first
    try 429 with Retry-After 2 s, so neither decides before the other has read."""
    for i in range(CLAIMS):
        manifest = claim_manifest(NAMESPACE, f"c{i:02d}", IMMEDIATE_CLASS, "10Gi")
        host.put_object("persistentvolumeclaims", manifest)
    fault = {"method": "GET", "path": "/v2/network-volumes", "status": 429, "count": 2}
    host.runpod("POST", "faults", {**fault, "retryAfter": 2})


def refused_holds(host: SimHost) -> int:
    """Claim patches refused 409: a hold written on a claim the other node held first."""
    return sum(
        1
        for method, path, _query, status in host.kube_requests()
        if method == "PATCH" and "/persistentvolumeclaims/" in path and status == 409
    )


def look(host: SimHost, a: Reconciler, b: Reconciler) -> Snapshot:
    return Snapshot.take(host, a.owner, a.node, NAMESPACE, (b.owner,))


def phases(snap: Snapshot) -> list[str]:
    return [(c.get("status") or {}).get("phase", "Pending") for c in snap.claims.values()]


def volume_posts(host: SimHost) -> list[int]:
    return [
        r["status"]
        for r in host.runpod_requests()
        if (r["method"], r["path"]) == ("POST", "/v2/network-volumes")
    ]


def converge(host: SimHost, a: Reconciler, b: Reconciler, rounds: int = 4) -> Snapshot:
    for _ in range(rounds):
        results = together(a, b)
        assert all(r.returncode == 0 for r in results), [r.returncode for r in results]
    return look(host, a, b)


def delete_claims(host: SimHost) -> None:
    for i in range(CLAIMS):
        host.delete_object("persistentvolumeclaims", NAMESPACE, f"c{i:02d}")


def ends_clean(host: SimHost, a: Reconciler, b: Reconciler) -> None:
    """Every claim deleted: every volume either node made goes, none bills on."""
    delete_claims(host)
    snap = converge(host, a, b)
    assert snap.claims == {}
    assert volumes_left_billing(host.runpod_requests(), snap) == []
    assert snap.our_volumes() == {}


def test_twenty_immediate_claims_on_two_nodes_get_one_volume_each(
    host: SimHost, tmp_path: Path
) -> None:
    a, b = nodes(host, tmp_path)
    add_claims(host)
    snap = converge(host, a, b)
    assert refused_holds(host) > 0  # both went for the same claims
    assert phases(snap) == ["Bound"] * CLAIMS
    assert volumes_made_twice(host.runpod_requests()) == []
    assert volume_posts(host).count(201) == CLAIMS
    assert sum(len(v) for v in snap.our_volumes().values()) == CLAIMS
    assert snap.duplicate_volumes() == [] and snap.leaked_volumes() == []
    ends_clean(host, a, b)


@pytest.mark.parametrize("loss", ["crash-after-post", "refused-pv-create"])
def test_a_node_lost_after_a_volume_post_leaves_one_volume_per_claim(
    host: SimHost, tmp_path: Path, loss: str
) -> None:
    """Node a holds a claim and POSTs its volume, then dies before the PV and its
    database is lost; or two PV creates are refused (a webhook, a quota: whichever node
    made them), and node a's database is lost. Both nodes tick meanwhile and after."""
    a, b = nodes(host, tmp_path)
    add_claims(host)
    if loss == "crash-after-post":
        first, _ = together(a, b, TickPlan(crash_at="after-volume-create:1"))
        assert first.crashed
    else:
        host.kube_fault("POST", PVS, 403, 2)
        together(a, b)
        refused = [r for r in host.kube_requests() if r[:2] == ["POST", PVS] and r[3] == 403]
        assert len(refused) == 2, refused
    a.delete_database()
    snap = converge(host, a, b)
    assert phases(snap) == ["Bound"] * CLAIMS
    assert volumes_made_twice(host.runpod_requests()) == []
    assert snap.duplicate_volumes() == [] and snap.leaked_volumes() == []
    ends_clean(host, a, b)
