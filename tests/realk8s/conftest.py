"""Fixtures of the `realk8s` tier: one real control plane for the session (built from its
Go modules before the first test, `prebuild`), and per test a reconciler process and a
RunPod simulator."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.needs import program, unavailable
from tests.realk8s import build
from tests.realk8s.plane import Plane
from tests.realk8s.prebuild import failure
from tests.realk8s.prebuild import pytest_collection_finish as pytest_collection_finish
from tests.realk8s.world import World, install_rbac, wait_for

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.realk8s)


@pytest.fixture(scope="session")
def plane(pytestconfig: pytest.Config) -> Iterator[Plane]:
    program("kubectl")
    failed = failure(pytestconfig)
    if failed is not None:
        pytest.fail(f"the real control plane could not be built: {failed}", pytrace=False)
    if not build.built() and shutil.which("go") is None:
        unavailable("the real control plane is not built here, and no Go toolchain can build it")
    with Plane() as started:
        yield started


@pytest.fixture(scope="session")
def reconciler_kubeconfig(plane: Plane) -> Path:
    return install_rbac(plane)


@pytest.fixture
def world(plane: Plane, reconciler_kubeconfig: Path) -> Iterator[World]:
    with tempfile.TemporaryDirectory(prefix="realk8s-world-") as directory:
        started = World(plane, reconciler_kubeconfig, Path(directory))
        try:
            wait_for("the virtual node to be Ready", started.node_ready, timeout=60)
            yield started
        finally:
            started.stop()
