"""A container engine (Docker or Podman, the CLI alone) and the image it built, for the
image tests: build once with `make image`, run containers as the cluster's manifests do,
read what the image is made of."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE_VARIABLE = "RECONCILER_TEST_ENGINE"
IMAGE_VARIABLE = "RECONCILER_TEST_IMAGE"

# Podman's default open-files and process limits exceed the hard limits of some machines
# (CI's among them), where every `run` is refused; these are ample for the reconciler.
LIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")
# How the Deployment and the CronJob run the container (deploy/deployment.yaml): root
# filesystem read-only, a scratch /tmp, no capability, no privilege escalation.
HARDENED = (
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
)
DATA = "/var/lib/reconciler"  # the volume the Dockerfile declares
TEST_IMAGE = "runpod-reconciler-test"


class Unavailable(Exception):
    """Why no image can be built here; the tests skip with this reason (fail under CI)."""


def find_engine() -> str:
    """The engine `make image` would pick: a Docker that answers, else Podman."""
    named = os.environ.get(ENGINE_VARIABLE)
    if named:
        return named
    for name in ("docker", "podman"):
        if shutil.which(name) and _answers(name):
            return name
    raise Unavailable(
        "no container engine: install Docker or Podman "
        "(bash .ci/run installs Podman and makes a stand-in base image)"
    )


def _answers(engine: str) -> bool:
    done = subprocess.run([engine, "info"], capture_output=True, timeout=120, check=False)
    return done.returncode == 0


def base_reference() -> str:
    """The Dockerfile's FROM, as the engines name it locally."""
    match = re.search(r"^FROM\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert match, "the Dockerfile has no FROM"
    name = match.group(1)
    if name.count("/") == 0:
        return f"docker.io/library/{name}"
    return name if "." in name.split("/")[0] else f"docker.io/{name}"


def normalized(requirement: str) -> str:
    """A requirement's distribution name, as the packaging standards compare names."""
    name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions_only_for_tests() -> set[str]:
    """What the test extra installs that the image must not have (pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    shipped = {normalized(r) for r in project["dependencies"]}
    shipped |= {normalized(r) for r in project["optional-dependencies"]["postgres"]}
    return {normalized(r) for r in project["optional-dependencies"]["test"]} - shipped


@dataclasses.dataclass(frozen=True)
class Image:
    engine: str
    ref: str
    build_seconds: float | None = None  # None: built before the tests (`make image-test`)

    def run(
        self, *args: str, options: Sequence[str] = (), entrypoint: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A throwaway container; `args` follow the image's entrypoint (`reconciler`)."""
        command = [self.engine, "run", "--rm", *LIMITS, *options]
        if entrypoint is not None:
            command += ["--entrypoint", entrypoint]
        return subprocess.run(
            [*command, self.ref, *args], capture_output=True, text=True, timeout=300, check=False
        )

    def engine_output(self, *args: str) -> str:
        done = subprocess.run(
            [self.engine, *args], capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def inspect(self, ref: str | None = None) -> dict[str, object]:
        (details,) = json.loads(self.engine_output("image", "inspect", ref or self.ref))
        assert isinstance(details, dict)
        return details

    def added_bytes(self) -> int:
        """What the project's layers add to the base image, uncompressed."""
        return int(self.inspect()["Size"]) - int(self.inspect(base_reference())["Size"])  # type: ignore[call-overload]

    def project_layers(self, directory: Path) -> Iterator[tarfile.TarFile]:
        """The image's own layers (not the base's), saved as `docker save` writes them."""
        archive = directory / "image.tar"
        self.engine_output("save", "--output", str(archive), self.ref)
        base_layers = len(self.inspect(base_reference())["RootFS"]["Layers"])  # type: ignore[index]
        with tarfile.open(archive) as outer:
            manifest = json.load(_member(outer, "manifest.json"))
            for layer in manifest[0]["Layers"][base_layers:]:
                with tarfile.open(fileobj=_member(outer, layer), mode="r:*") as inner:
                    yield inner


def _member(archive: tarfile.TarFile, name: str) -> tarfile.ExFileObject:
    member = archive.extractfile(name)
    assert member is not None, name
    return member


def build(engine: str, tag: str) -> Image:
    """`make image` with this engine, as a user builds it."""
    if shutil.which("make") is None:
        raise Unavailable("`make` is not installed")
    started = time.monotonic()
    make = ["make", "--no-print-directory", "image", f"ENGINE={engine}", f"IMAGE={TEST_IMAGE}"]
    # Within pytest's own 600 s per test, so that a slow build fails with its output.
    done = subprocess.run(
        [*make, f"TAG={tag}"], cwd=ROOT, capture_output=True, text=True, timeout=540, check=False
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return Image(engine, f"{TEST_IMAGE}:{tag}", time.monotonic() - started)
