"""What a test needs from the machine (a program, a PostgreSQL server): where it is
missing the test is skipped, saying why, except where the CI variable is set. There it
fails: .ci/run installs all of it, and a skip there would mean CI checked less than it
says."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, and in CI this test must run", pytrace=False)
    pytest.skip(reason)


def program(name: str) -> str:
    """The path of `name` on PATH."""
    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} is not installed here")
    return found
