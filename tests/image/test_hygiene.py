"""What the image is made of: the size its own layers add to the base (reported in the
session summary, held under a ceiling), no compiler and no test dependency in it, no
secret in its layers, configuration or history, and a build context that `.dockerignore`
keeps to the files the Dockerfile copies."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .engine import ROOT, Image, distributions_only_for_tests, normalized

pytestmark = pytest.mark.image

# The target: 87 MB when it was set, 92 MB on 2026-12-07 (docs/reference/performance.md
# and its record docs/reference/perf/image.json say of what). Each
# trimming step of the Dockerfile is needed to stay under it, and so is leaving the test
# dependencies out.
CEILING_MB = 100
# Only the project's own files go into the context: the reconciler, its migrations,
# pyproject.toml and the README (about 1.2 MB).
CONTEXT_CEILING_MB = 3

SECRET_FILE = re.compile(
    r"(^|/)(\.env|kubeconfig|\.kube/config|id_(rsa|ed25519|ecdsa)|[^/]*\.(key|db)|\.git)$"
)
SECRET_TEXT = re.compile(
    rb"-----BEGIN [A-Z ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{40,}"  # a private key
    rb"|rpa_[A-Za-z0-9]{20,}"  # a RunPod API key
    rb"|eyJhbGciOi[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"  # a token (a JWT)
)
SECRET_SETTING = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)[A-Z_]*=\S", re.IGNORECASE)


def test_the_projects_layers_stay_under_the_ceiling(image: Image) -> None:
    assert image.added_bytes() / 1e6 <= CEILING_MB


def test_no_test_dependency_and_no_compiler_in_the_image(image: Image) -> None:
    listing = image.run(
        "-c",
        "import importlib.metadata as m, json; "
        "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))",
        entrypoint="python3",
    )
    assert listing.returncode == 0, listing.stderr
    installed = {normalized(name) for name in json.loads(listing.stdout)}
    assert "runpod-reconciler" in installed
    assert installed & distributions_only_for_tests() == set()
    compilers = image.run(
        "-c", "for c in cc gcc g++ clang ld as make; do command -v $c; done", entrypoint="sh"
    )
    assert compilers.stdout == ""


def test_no_secret_in_the_layers_the_configuration_or_the_history(
    image: Image, tmp_path: Path
) -> None:
    for layer in image.project_layers(tmp_path):
        for member in layer:
            assert not SECRET_FILE.search(member.name), member.name
            content = layer.extractfile(member) if member.isfile() else None
            if content is not None:
                assert not SECRET_TEXT.search(content.read()), member.name
    config = image.inspect()["Config"]
    assert [v for v in config["Env"] if SECRET_SETTING.search(v)] == []  # type: ignore[index]
    history = image.engine_output("history", "--no-trunc", "--format", "{{.CreatedBy}}", image.ref)
    assert SECRET_SETTING.search(history) is None


def test_the_build_context_is_only_what_the_image_needs(image: Image, tmp_path: Path) -> None:
    """The context as the engine sends it (after .dockerignore), copied whole into a probe."""
    probe = tmp_path / "Dockerfile"
    probe.write_text(f"FROM {image.ref}\nCOPY . /context\n")
    tag = f"{image.ref}-context"
    image.engine_output("build", "--file", str(probe), "--tag", tag, str(ROOT))
    try:
        listing = Image(image.engine, tag).run(
            "-c",
            "import json, pathlib; print(json.dumps({str(p.relative_to('/context')): "
            "p.stat().st_size for p in pathlib.Path('/context').rglob('*') if p.is_file()}))",
            entrypoint="python3",
        )
    finally:
        image.engine_output("rmi", tag)
    assert listing.returncode == 0, listing.stderr
    sizes: dict[str, int] = json.loads(listing.stdout)
    tops = {path.split("/")[0] for path in sizes}
    assert tops <= {"pyproject.toml", "README.md", "reconciler", "migrations"}
    assert not [p for p in sizes if "__pycache__" in p or SECRET_FILE.search(p)]
    assert sum(sizes.values()) / 1e6 <= CONTEXT_CEILING_MB
