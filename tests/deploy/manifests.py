"""What deploy/ ships, loaded for the tests: manifest files, kustomize builds, chart
renderings, and their validation against the Kubernetes API schemas."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "runpod-reconciler"
# The oldest Kubernetes release still in common support when this was written.
KUBE_VERSION = "1.30.0"
RELEASE = "runpod-reconciler"
NAMESPACE = "runpod-system"

Obj = dict[str, Any]


def documents(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def manifest_files() -> list[Path]:
    """Every plain manifest: the YAML under deploy/ that is neither chart nor kustomization."""
    return sorted(
        p
        for p in DEPLOY.rglob("*.yaml")
        if CHART not in p.parents and p.name != "kustomization.yaml"
    )


def kustomize(directory: Path) -> list[Obj]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (for `kubectl kustomize`) is not installed")
    built = subprocess.run(
        [kubectl, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return documents(built.stdout)


def render_chart(values: Obj | None = None) -> dict[str, str]:
    """Template path -> rendered text, as `helm template` would give for our release."""
    with helm.Chart.load(CHART) as chart:
        return chart.render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)


def chart_objects(values: Obj | None = None) -> list[Obj]:
    return [
        doc
        for path, text in sorted(render_chart(values).items())
        if path.endswith(".yaml")
        for doc in documents(text)
    ]


def validate(obj: Obj) -> None:
    """Strict: an unknown field is an error too, as with `kubectl apply --validate=strict`."""
    kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def find(objects: list[Obj], kind: str, name: str | None = None) -> Obj:
    matches = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"{len(matches)} {kind} {name or ''}"
    return matches[0]


def kinds(objects: list[Obj]) -> set[str]:
    return {o["kind"] for o in objects}


def pod_spec(workload: Obj) -> Obj:
    if workload["kind"] == "CronJob":
        return workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return workload["spec"]["template"]["spec"]


def env(workload: Obj) -> dict[str, Any]:
    """The container's variables: a value, or the valueFrom source."""
    (container,) = pod_spec(workload)["containers"]
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in container.get("env", [])}
