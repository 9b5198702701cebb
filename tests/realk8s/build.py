"""Build the real control plane from its Go modules, once per version, into a cache.

kube-apiserver, kube-controller-manager and kube-scheduler come from `k8s.io/kubernetes`
through the wrapper module in `gobuild/kube` (a consumer does not inherit the release's
replaces of its staging modules, so the wrapper repeats them); etcd comes from
`go.etcd.io/etcd/server/v3` through `gobuild/etcd`, a module of its own because the two
pin different versions of shared dependencies. Both go.sum files are committed, so the
build downloads exactly what they name.

The binaries go to a directory outside the checkout, keyed by the versions, so a fresh
clone on the same machine (as CI makes) finds them built. Nothing is done when all four
are there. `python -m tests.realk8s.build` builds and prints the directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

HERE = Path(__file__).resolve().parent / "gobuild"
KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
BINARIES = (*KUBE_BINARIES, "etcd")


def _required(module_dir: Path, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", _go_mod(module_dir), re.M)
    if match is None:
        raise RuntimeError(f"{module_dir}/go.mod requires no {module}")
    return match.group(1)


def _go_mod(module_dir: Path) -> str:
    return (module_dir / "go.mod").read_text()


def versions() -> tuple[str, str]:
    """The Kubernetes and etcd versions the wrapper modules pin."""
    return (
        _required(HERE / "kube", "k8s.io/kubernetes"),
        _required(HERE / "etcd", "go.etcd.io/etcd/server/v3"),
    )


def cache_dir() -> Path:
    kube, etcd = versions()
    root = os.environ.get("RECONCILER_K8S_CACHE") or Path.home() / ".cache/runpod-reconciler/k8s"
    return Path(root) / f"kubernetes-{kube}-etcd-{etcd}"


def built(directory: Path | None = None) -> bool:
    directory = directory or cache_dir()
    return all((directory / name).is_file() for name in BINARIES)


def _ldflags(kube: str) -> str:
    # As upstream's hack/lib/version.sh stamps it, so `kubectl version` reads the release.
    major, minor = kube.lstrip("v").split(".")[:2]
    stamp = "k8s.io/component-base/version"
    return (
        f"-s -w -X {stamp}.gitVersion={kube} -X {stamp}.gitMajor={major} "
        f"-X {stamp}.gitMinor={minor} -X {stamp}.gitTreeState=clean"
    )


def _go(args: list[str], module_dir: Path, log: list[str]) -> None:
    if shutil.which("go") is None:
        raise RuntimeError("the real control plane is built with Go, and no `go` is on PATH")
    # Never a newer toolchain than this machine's, and no cgo (as upstream builds them).
    env = {
        **os.environ,
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
        "GOFLAGS": "-mod=readonly -buildvcs=false",
    }
    started = time.monotonic()
    done = subprocess.run(
        ["go", *args], cwd=module_dir, env=env, capture_output=True, text=True, check=False
    )
    log.append(
        f"built {Path(args[args.index('-o') + 1]).name} in {time.monotonic() - started:.0f} s"
    )
    if done.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed in {module_dir}:\n{done.stderr[-4000:]}")


def build(directory: Path | None = None, out: TextIO = sys.stderr) -> Path:
    """The directory holding the four binaries, built first where any is missing."""
    directory = directory or cache_dir()
    if built(directory):
        return directory
    kube, _ = versions()
    partial = directory.with_name(directory.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    for name in KUBE_BINARIES:
        flags = ["-trimpath", "-ldflags", _ldflags(kube)]
        _go(
            ["build", "-p", "2", *flags, "-o", str(partial / name), f"./{name}"], HERE / "kube", log
        )
        print(log[-1], file=out)
    _go(
        [
            "build",
            "-p",
            "2",
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            str(partial / "etcd"),
            "./etcd",
        ],
        HERE / "etcd",
        log,
    )
    print(log[-1], file=out)
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
