"""The shape `reconciler offers -f` checks a manifest against before the planner reads it:
a list, string or number where the API server's schema has a map (or the reverse) is
named by its path; nulls are absent fields; the shipped examples pass."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from reconciler.cli.manifest_shape import JOB, POD, shape_problem
from reconciler.demo import examples


def pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "img", **spec}
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container]}}


@pytest.mark.parametrize(
    ("manifest", "says"),
    [
        (pod(resources="lots"), "spec.containers[0].resources must be a map, not a string"),
        (pod(resources={"limits": {"cpu": [1]}}), "resources.limits.cpu must be a quantity"),
        (pod(resources={"limits": {"cpu": True}}), "must be a quantity, not a boolean"),
        (pod(command="sh"), "spec.containers[0].command must be a list, not a string"),
        (pod(ports=[{"containerPort": "80"}]), "containerPort must be a whole number"),
        (
            {"metadata": {"name": "p", "annotations": {"a": 1}}, "spec": {}},
            "metadata.annotations.a must be a string, not a number",
        ),
        ({"metadata": {"labels": ["a"]}, "spec": {}}, "metadata.labels must be a map, not a list"),
        ({"metadata": {}, "spec": {"containers": {"a": 1}}}, "spec.containers must be a list"),
    ],
)
def test_a_wrong_shape_is_named_by_its_path(manifest: dict[str, Any], says: str) -> None:
    problem = shape_problem(manifest, POD)
    assert problem is not None and says in problem


def test_a_job_template_is_checked_as_a_pod() -> None:
    job = {"metadata": {}, "spec": {"template": {"metadata": ["a"], "spec": {}}}}
    assert shape_problem(job, JOB) == "spec.template.metadata must be a map, not a list"


def test_nulls_and_unknown_fields_pass() -> None:
    manifest = pod(resources=None, extra=[[{"any": "thing"}]])
    manifest["metadata"]["annotations"] = None
    assert shape_problem(manifest, POD) is None


def test_the_shipped_examples_pass() -> None:
    for text in (examples.GPU_POD, examples.GPU_JOB, examples.TORCHRUN_JOB, examples.CHECKPOINTS):
        for document in yaml.safe_load_all(text):
            if document.get("kind") in ("Pod", "Job"):
                shape = POD if document["kind"] == "Pod" else JOB
                assert shape_problem(document, shape) is None, document["metadata"]
