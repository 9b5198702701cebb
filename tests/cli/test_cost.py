"""`reconciler cost` on a prepared store: grouping by pod, namespace and GPU, `--since`,
the JSON keys scripts read, the >10% list-price flag, one-line errors, and network
volumes' and Instant Clusters' charges by claim and Job (a charge nothing maps shown as
unmapped, not dropped)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.queries import SpendLine
from reconciler.adapters.store.repository import Store
from reconciler.cli.commands import main
from reconciler.cli.cost_view import charges, group
from reconciler.core.domain import BillingRecord, ResourceCharge
from reconciler.core.mapping import MappingRow, MappingState
from reconciler.core.money.attribution import Attribution, Billed

NOW = datetime.now(UTC)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = db.make_engine(url)
    migrate.upgrade(engine)
    store = Store(db.session_factory(engine))
    start = NOW - timedelta(hours=10)

    def row(uid: str, namespace: str, gpu: str, cost: float, instance: str) -> MappingRow:
        return MappingRow(
            uid,
            namespace,
            f"pod-{uid}",
            MappingState.TERMINATED,
            start,
            NOW,
            instance_id=instance,
            gpu_type_id=gpu,
            cost_per_hr=cost,
            attempt_started_at=start,
            ended_at=start + timedelta(hours=4),
        )

    store.save_row(row("a", "ml", "A100", 1.0, "i-a"))
    store.save_row(row("b", "web", "4090", 0.5, "i-b"))
    hours = [start + timedelta(hours=h) for h in range(4)]
    records = [BillingRecord("i-a", h, h + timedelta(hours=1), 1.0) for h in hours]
    # Pod b was charged three times its list price: a wrong price, or a leak.
    records += [BillingRecord("i-b", h, h + timedelta(hours=1), 1.5) for h in hours]
    store.billing.save(records, NOW, NOW, forget_before=NOW - timedelta(days=31))
    engine.dispose()
    return url


def _cost(url: str, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["--database-url", url, "cost", "-o", "json", *args])
    assert result.exit_code == 0, result.output
    parsed: dict[str, object] = json.loads(result.output)
    return parsed


def test_by_pod_with_the_list_price_flag(url: str) -> None:
    shown = _cost(url)
    assert shown["total_usd"] == 10.0
    assert shown["rows"] == [
        {"pod": "web/pod-b", "usd": 6.0, "kind": "pod", "list_usd": 2.0, "mismatch": True},
        {"pod": "ml/pod-a", "usd": 4.0, "kind": "pod", "list_usd": 4.0, "mismatch": False},
    ]


def test_by_namespace_and_gpu(url: str) -> None:
    assert _cost(url, "--by", "namespace")["rows"] == [
        {"namespace": "web", "usd": 6.0},
        {"namespace": "ml", "usd": 4.0},
    ]
    assert _cost(url, "--by", "gpu")["rows"] == [
        {"gpu": "4090", "usd": 6.0, "kind": "pod"},
        {"gpu": "A100", "usd": 4.0, "kind": "pod"},
    ]


def test_since_keeps_later_hours_only(url: str) -> None:
    # Billed hours began 10, 9, 8 and 7 hours before NOW; a moment later, "9h" ago is
    # just after the second one began.
    assert _cost(url, "--since", "9h")["total_usd"] == 5.0
    last = (NOW - timedelta(hours=7)).replace(tzinfo=None).isoformat()  # naive means UTC
    assert _cost(url, "--since", last)["total_usd"] == 2.5


def test_table_and_bad_input(url: str) -> None:
    table = CliRunner().invoke(main, ["--database-url", url, "cost"])
    assert table.exit_code == 0
    assert "web/pod-b" in table.output and "differs by >10%" in table.output
    assert "total $10.00" in table.output
    bad = CliRunner().invoke(main, ["--database-url", url, "cost", "--since", "soon"])
    assert bad.exit_code == 2
    assert "neither a duration" in bad.output


@pytest.fixture
def with_storage_and_clusters(url: str) -> str:
    """Two hours of a claim's volume in ml, a Job's cluster in web, and a volume of ours
    whose claim is not known; none of them, nor the claim or the Job, exists now."""
    engine = db.make_engine(url)
    store = Store(db.session_factory(engine))
    store.attributions.save(
        [
            Attribution(Billed.NETWORK_VOLUME, "vol-1", "ml", "ckpt", "c-1", "STANDARD"),
            Attribution(Billed.CLUSTER, "cl-1", "web", "train", "j-1", "A100"),
            Attribution(Billed.NETWORK_VOLUME, "vol-2", None, None, "c-2", "STANDARD"),
        ],
        NOW,
    )
    start = NOW - timedelta(hours=10)
    hours = [start + timedelta(hours=h) for h in range(2)]
    for kind, resource, usd in (
        (Billed.NETWORK_VOLUME, "vol-1", 0.25),
        (Billed.NETWORK_VOLUME, "vol-2", 0.5),
        (Billed.CLUSTER, "cl-1", 3.0),
    ):
        records = [ResourceCharge(resource, h, h + timedelta(hours=1), usd) for h in hours]
        store.billing.save_resources(kind, records, NOW, NOW, NOW - timedelta(days=31))
    engine.dispose()
    return url


def test_volumes_and_clusters_by_claim_and_job(with_storage_and_clusters: str) -> None:
    shown = _cost(with_storage_and_clusters)
    assert shown["total_usd"] == 10.0 + 0.5 + 1.0 + 6.0
    rows = {(row["kind"], row["pod"]): row["usd"] for row in shown["rows"]}  # type: ignore[union-attr, index]
    assert rows[("cluster", "web/train")] == 6.0
    assert rows[("network-volume", "ml/ckpt")] == 0.5
    assert rows[("network-volume", "(unmapped)")] == 1.0
    assert rows[("pod", "web/pod-b")] == 6.0


def test_namespaces_sum_pods_volumes_and_clusters(with_storage_and_clusters: str) -> None:
    assert _cost(with_storage_and_clusters, "--by", "namespace")["rows"] == [
        {"namespace": "web", "usd": 12.0},
        {"namespace": "ml", "usd": 4.5},
        {"namespace": "(unmapped)", "usd": 1.0},
    ]
    by_type = _cost(with_storage_and_clusters, "--by", "gpu")["rows"]
    assert {"gpu": "A100", "usd": 6.0, "kind": "cluster"} in by_type  # type: ignore[operator]
    assert {"gpu": "STANDARD", "usd": 0.5, "kind": "network-volume"} in by_type  # type: ignore[operator]
    table = CliRunner().invoke(main, ["--database-url", with_storage_and_clusters, "cost"])
    assert "web/train" in table.output and "cluster" in table.output
    assert f"clusters through {NOW:%Y-%m-%d %H:%M} UTC" in table.output
    reach = _cost(with_storage_and_clusters)["billed_until_by_kind"]
    assert reach == {"network-volume": NOW.isoformat(), "cluster": NOW.isoformat()}  # type: ignore[comparison-overlap]


def test_an_orphans_charges_are_shown_under_no_pod_not_an_empty_namespace() -> None:
    """An orphan's row knows its pod's UID alone (the pod was never seen)."""
    hour = datetime(2026, 1, 1, tzinfo=UTC)
    lines = [SpendLine("i1", hour, 0.49, "uid-gone", "", "ml-forgotten", "A6000")]
    assert [row.key for row in group(charges(lines), "namespace")] == ["(no pod)"]
    assert [row.key for row in group(charges(lines), "pod")] == ["(no pod)/ml-forgotten"]


def test_what_billing_has_not_covered_yet_shows_at_list_price_marked_so(tmp_path: Path) -> None:
    """RunPod bills whole hours, read hourly: a pod of the last two minutes has no charge
    yet, and one that ran on past the last read has an hour no charge shows. Both show at
    list price, as an estimate."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = db.make_engine(url)
    migrate.upgrade(engine)
    store = Store(db.session_factory(engine))
    now = datetime.now(UTC)

    def running(uid: str, since: datetime, cost: float) -> MappingRow:
        return MappingRow(
            uid,
            "ml",
            f"pod-{uid}",
            MappingState.RUNNING,
            since,
            since,
            instance_id=f"i-{uid}",
            cost_per_hr=cost,
            attempt_started_at=since,
        )

    store.save_row(running("new", now - timedelta(minutes=2), 0.49))
    table = CliRunner().invoke(main, ["--database-url", url, "cost"])
    assert table.exit_code == 0, table.output
    assert "total $0.00 (RunPod billing: pods through never read yet)" in table.output
    assert "not billed yet, at list price (an estimate" in table.output
    assert "ml/pod-new  $0.02" in table.output
    shown = _cost(url)
    assert shown["unbilled_list_usd"] == pytest.approx(0.49 * 2 / 60, abs=0.001)

    # Billing read up to an hour ago covers the older pod's first hours, not its last.
    store.save_row(running("old", now - timedelta(hours=3), 1.0))
    hours = [now - timedelta(hours=h) for h in (3, 2)]
    records = [BillingRecord("i-old", h, h + timedelta(hours=1), 1.0) for h in hours]
    store.billing.save(records, now - timedelta(hours=1), now, now - timedelta(days=31))
    engine.dispose()
    shown = _cost(url)
    assert shown["total_usd"] == 2.0
    by_pod = shown["unbilled_list_usd_by_pod"]
    assert isinstance(by_pod, dict)
    assert by_pod["ml/pod-old"] == pytest.approx(1.0, abs=0.01)
    assert by_pod["ml/pod-new"] == pytest.approx(0.49 * 2 / 60, abs=0.001)

    # An ended pod counts to its end; one whose row recorded no end, to its last write.
    engine = db.make_engine(url)
    store = Store(db.session_factory(engine))
    ended = running("ended", now - timedelta(minutes=50), 1.2)
    store.save_row(
        replace(ended, state=MappingState.TERMINATED, ended_at=now - timedelta(minutes=20))
    )
    unended = running("unended", now - timedelta(minutes=50), 1.2)
    store.save_row(
        replace(unended, state=MappingState.FAILED, updated_at=now - timedelta(minutes=40))
    )
    engine.dispose()
    by_pod = _cost(url)["unbilled_list_usd_by_pod"]
    assert isinstance(by_pod, dict)
    assert by_pod["ml/pod-ended"] == pytest.approx(1.2 * 30 / 60, abs=0.01)
    assert by_pod["ml/pod-unended"] == pytest.approx(1.2 * 10 / 60, abs=0.01)
