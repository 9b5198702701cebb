"""Build the real control plane from its Go modules, once per version, into a cache.

kube-apiserver, kube-controller-manager and kube-scheduler come from `k8s.io/kubernetes`
through the wrapper module in `gobuild/kube` (a consumer does not inherit the release's
replaces of its staging modules, so the wrapper repeats them); etcd comes from
`go.etcd.io/etcd/server/v3` through `gobuild/etcd`, and metrics-server (what `kubectl top`
reads, through the API server's aggregation layer) from `sigs.k8s.io/metrics-server`
through `gobuild/metrics-server`, which names it as a `tool`. Each is a module of its own
because they pin different versions of shared dependencies (metrics-server v0.8.0 is
built on the v0.33 Kubernetes libraries). Every go.sum is committed, so the build
downloads exactly what they name.

The binaries go to a directory outside the checkout, keyed by the versions, so a fresh
clone on the same machine (as CI makes) finds them built. Nothing is done when all five
are there. `python -m tests.realk8s.build` builds and prints the directory.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "gobuild"

# How often a build in progress says so: the slowest binary takes minutes.
PROGRESS_SECONDS = 30.0
COLD_BUILD = "about 15 minutes cold on 2 idle cores, longer on busy ones"


@dataclass(frozen=True)
class GoModule:
    """A wrapper module in `gobuild/` and the binaries built from it."""

    directory: str
    requires: str
    """The module whose version the binaries are (and the cache is keyed by)."""
    packages: tuple[tuple[str, str], ...]
    """(binary, package to build)."""
    stamp: str = ""
    """The package whose `gitVersion` (and more) `-X` stamps, as upstream's build does."""

    def version(self) -> str:
        go_mod = (HERE / self.directory / "go.mod").read_text()
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(self.requires)} (v\S+)", go_mod, re.M)
        if match is None:
            raise RuntimeError(f"{HERE / self.directory}/go.mod requires no {self.requires}")
        return match.group(1)

    def ldflags(self) -> str:
        flags = "-s -w"
        if self.stamp:
            flags += f" -X {self.stamp}.gitVersion={self.version()}"
        if self.stamp == "k8s.io/component-base/version":
            # As hack/lib/version.sh stamps it, so `kubectl version` reads the release.
            major, minor = self.version().lstrip("v").split(".")[:2]
            flags += (
                f" -X {self.stamp}.gitMajor={major} -X {self.stamp}.gitMinor={minor}"
                f" -X {self.stamp}.gitTreeState=clean"
            )
        return flags


MODULES = (
    GoModule(
        "kube",
        "k8s.io/kubernetes",
        tuple(
            (name, f"./{name}")
            for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
        ),
        stamp="k8s.io/component-base/version",
    ),
    GoModule("etcd", "go.etcd.io/etcd/server/v3", (("etcd", "./etcd"),)),
    GoModule(
        "metrics-server",
        "sigs.k8s.io/metrics-server",
        (("metrics-server", "sigs.k8s.io/metrics-server/cmd/metrics-server"),),
        # Where metrics-server's own Makefile stamps its version.
        stamp="k8s.io/client-go/pkg/version",
    ),
)
BINARIES = tuple(name for module in MODULES for name, _ in module.packages)


def versions() -> dict[str, str]:
    """The version of each module the wrappers pin, by wrapper."""
    return {module.directory: module.version() for module in MODULES}


def cache_dir() -> Path:
    root = os.environ.get("RECONCILER_K8S_CACHE") or Path.home() / ".cache/runpod-reconciler/k8s"
    key = {"kube": "kubernetes", "etcd": "etcd", "metrics-server": "metrics-server"}
    return Path(root) / "-".join(f"{key[name]}-{version}" for name, version in versions().items())


def built(directory: Path | None = None) -> bool:
    directory = directory or cache_dir()
    return all((directory / name).is_file() for name in BINARIES)


def _go(args: list[str], module_dir: Path, waiting: Callable[[], None]) -> None:
    """Run `go`, calling `waiting` every PROGRESS_SECONDS until it ends."""
    go = _go_program()
    # Never a newer toolchain than this machine's, and no cgo (as upstream builds them).
    env = {
        **os.environ,
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
        "GOFLAGS": "-mod=readonly -buildvcs=false",
    }
    # Go's output goes to a file, not a pipe: nobody reads a pipe while go runs for minutes.
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            [go, *args], cwd=module_dir, env=env, stdout=output, stderr=subprocess.STDOUT
        )
        try:
            while True:
                try:
                    process.wait(PROGRESS_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    waiting()
        finally:
            if process.poll() is None:  # interrupted (Ctrl-C): no go left building
                process.kill()
                process.wait()
        if process.returncode != 0:
            output.seek(0)
            said = output.read().decode(errors="replace")[-4000:]
            raise RuntimeError(f"go {' '.join(args)} failed in {module_dir}:\n{said}")


def _minutes(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def build(directory: Path | None = None, say: Callable[[str], None] = _stderr) -> Path:
    """The directory holding the five binaries, built first where any is missing, telling
    `say` what is being built and for how long it has been."""
    directory = directory or cache_dir()
    if built(directory):
        return directory
    say(
        f"building the real control plane ({len(BINARIES)} binaries from their Go modules, "
        f"{COLD_BUILD}) with {_go_version()} into {directory}"
    )
    partial = directory.with_name(directory.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    targets = [(module, name, package) for module in MODULES for name, package in module.packages]
    for number, (module, name, package) in enumerate(targets, 1):
        started = time.monotonic()
        step = f"[{number}/{len(targets)}] {name}"
        say(f"  {step}: building ({module.requires} {module.version()})")
        flags = ["-trimpath", "-ldflags", module.ldflags()]
        _go(
            ["build", "-p", "2", *flags, "-o", str(partial / name), package],
            HERE / module.directory,
            functools.partial(_still, say, step, started, began),
        )
        say(f"  {step}: built in {_minutes(time.monotonic() - started)}")
    # Moved into place whole, so a build stopped halfway is never taken for a finished one.
    if directory.exists():
        shutil.rmtree(directory)
    partial.rename(directory)
    say(f"built the real control plane in {_minutes(time.monotonic() - began)}")
    return directory


def _still(say: Callable[[str], None], step: str, started: float, began: float) -> None:
    now = time.monotonic()
    say(f"  {step}: still building, {_minutes(now - started)} (all: {_minutes(now - began)})")


def _go_program() -> str:
    found = shutil.which("go")
    if found is None:
        raise RuntimeError("the real control plane is built with Go, and no `go` is on PATH")
    return found


def _go_version() -> str:
    done = subprocess.run([_go_program(), "version"], capture_output=True, text=True, check=False)
    words = done.stdout.split()
    return words[2] if len(words) > 2 else "go"


if __name__ == "__main__":
    try:
        print(build())
    except RuntimeError as error:
        sys.exit(str(error))
