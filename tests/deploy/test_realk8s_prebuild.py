"""The realk8s tier on a machine where nothing is built: the control plane is built
before the first test (outside every test, so no test's timeout counts the build), its
progress shows in the terminal as it goes, and nothing is built when no realk8s test is
selected or the plane is built already. A stand-in `go` on PATH records each build (and
which test, if any, was running) and leaves binaries that exit at once, so the plane then
fails fast."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.realk8s import build

ROOT = Path(__file__).resolve().parents[2]
REALK8S_TEST = "tests/realk8s/test_rbac.py"

FAKE_GO = """#!{python}
import os, sys
from pathlib import Path
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(os.environ.get("PYTEST_CURRENT_TEST", "(no test)") + "\\t" + " ".join(args) + "\\n")
if args[:1] == ["version"]:
    print("go version go1.26.0 linux/amd64")
elif "-o" in args:
    binary = Path(args[args.index("-o") + 1])
    binary.write_text("#!/bin/sh\\nexit 3\\n")
    binary.chmod(0o755)
"""


def run(tmp_path: Path, *selection: str, go: bool = True) -> tuple[str, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "go.log"
    log.touch()
    if go:
        (bin_dir / "go").write_text(FAKE_GO.format(python=sys.executable, log=str(log)))
        (bin_dir / "go").chmod(0o755)
    (bin_dir / "kubectl").symlink_to("/bin/false")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_CURRENT_TEST")}
    env["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}"
    env["RECONCILER_K8S_CACHE"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *selection],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.stdout + done.stderr, log.read_text().splitlines()


def test_the_plane_is_built_before_any_test_with_its_progress_shown(tmp_path: Path) -> None:
    output, builds = run(tmp_path, REALK8S_TEST)
    built = [line for line in builds if "\tbuild " in line]
    assert len(built) == 5, builds
    assert {line.split("\t")[0] for line in built} == {"(no test)"}, built
    shown = output.index("[1/5] kube-apiserver: building (k8s.io/kubernetes v")
    assert output.index("built the real control plane in", shown) < output.index("etcd exited")


def test_nothing_is_built_when_no_realk8s_test_is_selected(tmp_path: Path) -> None:
    output, builds = run(tmp_path, REALK8S_TEST, "-m", "not realk8s")
    assert builds == [], output
    assert "building the real control plane" not in output


def test_without_go_the_tier_says_why_it_cannot_run(tmp_path: Path) -> None:
    output, _ = run(tmp_path, REALK8S_TEST, go=False)
    assert "not building the real control plane: no go on PATH" in output
    assert "no Go toolchain can build it" in output and "skipped" in output


def test_nothing_is_built_when_the_plane_is_built_already(tmp_path: Path) -> None:
    built = tmp_path / "cache" / build.cache_dir().name
    built.mkdir(parents=True)
    for name in build.BINARIES:
        (built / name).write_text("#!/bin/sh\nexit 3\n")
        (built / name).chmod(0o755)
    output, builds = run(tmp_path, REALK8S_TEST)
    assert [line for line in builds if "\tbuild " in line] == [], builds
    assert "building the real control plane" not in output
    assert "etcd exited" in output  # the tests went on with what was there
