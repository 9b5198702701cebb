"""`reconciler offers` at its boundaries, as a real process against both simulators: the
kept catalog is used only while younger than --catalog-ttl (a copy past it, by any
margin, is fetched again with one request), and --max-gpu-price caps a pod that names no
`runpod.io/max-price` exactly as the planner would, while the annotation overrides it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.demo.examples import GPU_POD
from reconciler.demo.sandbox import Sandbox
from tests.cli.test_offers_command import catalog_reads, offers

UNCAPPED_POD = GPU_POD.replace(
    '    runpod.io/max-price: "1.00"            # USD/h for the whole pod\n', ""
)
KEPT_AGO = 900.0
KEPT = ("--catalog-ttl", "3600")  # the kept copy serves


@pytest.fixture
def aged() -> Iterator[Sandbox]:
    """A sandbox whose reconciler kept its GPU catalog KEPT_AGO seconds ago (wall clock)."""
    with Sandbox() as sandbox:
        behind = (datetime.now(UTC) - sandbox.clock.now()).total_seconds() - KEPT_AGO
        sandbox.advance(max(0.0, behind))
        sandbox.add_pod("notebook")
        sandbox.tick()  # the create reads the catalog; the reconciler keeps it
        yield sandbox


def prices(done: object) -> list[float]:
    lines = getattr(done, "stdout", "").splitlines()[1:]
    return [float(line.split()[-2]) for line in lines]


@pytest.mark.parametrize(("ttl", "fetched"), [(KEPT_AGO * 2, 0), (KEPT_AGO / 1.5, 1)])
def test_the_kept_catalog_is_used_only_within_its_ttl(
    aged: Sandbox, tmp_path: Path, ttl: float, fetched: int
) -> None:
    manifest = tmp_path / "gpu-pod.yaml"
    manifest.write_text(GPU_POD)
    before = catalog_reads(aged)
    done = offers(aged, "-f", str(manifest), "--catalog-ttl", f"{ttl:g}", key=True)
    assert done.returncode == 0, done.stderr
    assert catalog_reads(aged) - before == fetched
    assert ("(1 request)" in done.stderr) == bool(fetched)


def test_max_gpu_price_caps_a_pod_without_its_own_price(aged: Sandbox, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(UNCAPPED_POD)
    wide = prices(offers(aged, "-f", str(manifest), "--max-gpu-price", "10", *KEPT))
    narrow = prices(offers(aged, "-f", str(manifest), "--max-gpu-price", "0.6", *KEPT))
    assert wide and narrow
    assert max(wide) > 0.6 >= max(narrow)
    assert set(narrow) == {p for p in wide if p <= 0.6}


def test_the_pods_own_max_price_wins_over_the_flag(aged: Sandbox, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(GPU_POD)  # runpod.io/max-price: "1.00"
    shown = prices(offers(aged, "-f", str(manifest), "--max-gpu-price", "0.3", *KEPT))
    assert shown and max(shown) <= 1.0 and max(shown) > 0.3
