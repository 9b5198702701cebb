"""`reconciler cost` on a prepared store: grouping by pod, namespace and GPU, `--since`,
the JSON keys scripts read, the >10% list-price flag, and one-line errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.repository import Store
from reconciler.cli.commands import main
from reconciler.core.domain import BillingRecord
from reconciler.core.mapping import MappingRecord, MappingState

NOW = datetime.now(UTC)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = db.make_engine(url)
    migrate.upgrade(engine)
    store = Store(db.session_factory(engine))
    start = NOW - timedelta(hours=10)

    def row(uid: str, namespace: str, gpu: str, cost: float, instance: str) -> MappingRecord:
        return MappingRecord(
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
    store.save_billing(records, NOW, NOW, forget_before=NOW - timedelta(days=31))
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
        {"pod": "web/pod-b", "usd": 6.0, "list_usd": 2.0, "mismatch": True},
        {"pod": "ml/pod-a", "usd": 4.0, "list_usd": 4.0, "mismatch": False},
    ]


def test_by_namespace_and_gpu(url: str) -> None:
    assert _cost(url, "--by", "namespace")["rows"] == [
        {"namespace": "web", "usd": 6.0},
        {"namespace": "ml", "usd": 4.0},
    ]
    assert _cost(url, "--by", "gpu")["rows"] == [
        {"gpu": "4090", "usd": 6.0},
        {"gpu": "A100", "usd": 4.0},
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
