"""What the README tells a newcomer to copy works: its GPU pod and Job are the examples
the demo applies (tests/cli/test_demo_live.py brings those to Running), both pass strict
schema validation, and its kustomize overlay installs `deploy/` with the user's image
through `kubectl apply -k`'s built-in kustomize alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reconciler.demo.examples import EXAMPLES

from .manifests import DEPLOY, find, kustomize, pod_spec, validate

README = DEPLOY.parent / "README.md"


def readme_example(name: str) -> str:
    match = re.search(
        rf"<!-- example: {re.escape(name)} -->\n```yaml\n(.*?)```", README.read_text(), re.S
    )
    assert match, f"the README has no example {name}"
    return match.group(1)


def test_the_readme_shows_the_examples_the_demo_applies() -> None:
    for name, text in EXAMPLES.items():
        assert readme_example(name) == text
        validate(yaml.safe_load(text))


@pytest.mark.parametrize("mode", ["Deployment", "CronJob"])
def test_the_readme_overlay_sets_the_image_with_kubectl_alone(tmp_path: Path, mode: str) -> None:
    overlay = tmp_path / "my-install"
    overlay.mkdir()
    # The README's overlay sits next to a checkout named runpod-reconciler.
    (tmp_path / "runpod-reconciler").symlink_to(DEPLOY.parent)
    text = readme_example("kustomization.yaml").replace("<registry>", "registry.example")
    if mode == "CronJob":  # the overlay's other choice, named in its comment
        text = text.replace("runpod-reconciler/deploy ", "runpod-reconciler/deploy/cronjob ")
    (overlay / "kustomization.yaml").write_text(text)
    objects = kustomize(overlay)
    workloads = [o for o in objects if o["kind"] in ("Deployment", "CronJob")]
    assert [w["kind"] for w in workloads] == [mode]
    spec = pod_spec(workloads[0])
    images = {c["image"] for c in spec["containers"] + spec.get("initContainers", [])}
    assert images == {"registry.example/runpod-reconciler:0.1.0"}
    assert find(objects, "Namespace")["metadata"]["name"] == "runpod-system"
