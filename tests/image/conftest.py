"""The image tier (`-m image`): one image per test session, built with `make image` (or
the one RECONCILER_TEST_IMAGE names, as `make image-test` passes it), shared by every
test. Where no container engine answers the tests skip, saying why; where CI is set
that is a failure instead (tests/needs.py), so that CI cannot pass without the image."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.needs import unavailable

from .engine import IMAGE_VARIABLE, Image, Unavailable, build, find_engine

_figures: list[str] = []


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    try:
        engine = find_engine()
        given = os.environ.get(IMAGE_VARIABLE)
        built = Image(engine, given) if given else build(engine, uuid.uuid4().hex[:12])
    except Unavailable as reason:
        unavailable(str(reason))
    if built.build_seconds is not None:
        _figures.append(f"built in {built.build_seconds:.0f} s with {engine}")
    _figures.append(f"the project's layers add {built.added_bytes() / 1e6:.0f} MB to the base")
    yield built
    if not given:
        subprocess.run([engine, "rmi", built.ref], capture_output=True, timeout=120, check=False)


@pytest.fixture
def volume(image: Image) -> Iterator[str]:
    """A named volume of the engine's own, as a PersistentVolumeClaim gives the pod."""
    name = f"reconciler-test-{uuid.uuid4().hex[:12]}"
    image.engine_output("volume", "create", name)
    yield name
    subprocess.run(
        [image.engine, "volume", "rm", "--force", name], capture_output=True, timeout=120
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for figure in _figures:
        terminalreporter.write_line(f"image: {figure}")
