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

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

HERE = Path(__file__).resolve().parent / "gobuild"


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


def _go(args: list[str], module_dir: Path) -> None:
    if shutil.which("go") is None:
        raise RuntimeError("the real control plane is built with Go, and no `go` is on PATH")
    # Never a newer toolchain than this machine's, and no cgo (as upstream builds them).
    env = {
        **os.environ,
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
        "GOFLAGS": "-mod=readonly -buildvcs=false",
    }
    done = subprocess.run(
        ["go", *args], cwd=module_dir, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed in {module_dir}:\n{done.stderr[-4000:]}")


def build(directory: Path | None = None, out: TextIO = sys.stderr) -> Path:
    """The directory holding the five binaries, built first where any is missing."""
    directory = directory or cache_dir()
    if built(directory):
        return directory
    partial = directory.with_name(directory.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    for module in MODULES:
        for name, package in module.packages:
            started = time.monotonic()
            flags = ["-trimpath", "-ldflags", module.ldflags()]
            _go(
                ["build", "-p", "2", *flags, "-o", str(partial / name), package],
                HERE / module.directory,
            )
            print(f"built {name} in {time.monotonic() - started:.0f} s", file=out)
    # Moved into place whole, so a build stopped halfway is never taken for a finished one.
    if directory.exists():
        shutil.rmtree(directory)
    partial.rename(directory)
    return directory


if __name__ == "__main__":
    try:
        print(build())
    except RuntimeError as error:
        sys.exit(str(error))
