"""The shipped RBAC against the real authorizer: every other test of this tier runs the
reconciler with exactly deploy/common/rbac.yaml; here one verb is taken away (patching
pods/status) and the real API server refuses what the reconciler then cannot do, so the
pod never shows Running and the reconciler says why."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.realk8s.plane import Plane, kubeconfig
from tests.realk8s.test_pods import gpu_pod
from tests.realk8s.world import DEPLOY, NAMESPACE, World

ACCOUNT = "reconciler-without-status"


def _without_status_patch(plane: Plane) -> Path:
    """A ServiceAccount bound to the shipped roles, its ClusterRole less pods/status."""
    documents = list(yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()))
    for document in documents:
        document["metadata"]["name"] = document["metadata"]["name"].replace(
            "runpod-reconciler", ACCOUNT
        )
        if document["kind"] == "ClusterRole":
            document["rules"] = [r for r in document["rules"] if r["resources"] != ["pods/status"]]
        if "roleRef" in document:
            document["roleRef"]["name"] = document["roleRef"]["name"].replace(
                "runpod-reconciler", ACCOUNT
            )
            document["subjects"] = [
                {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}
            ]
    plane.kubectl("create", "serviceaccount", ACCOUNT, "-n", NAMESPACE)
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    token = plane.kubectl("create", "token", ACCOUNT, "-n", NAMESPACE).stdout.strip()
    path = plane.workdir / f"{ACCOUNT}.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(plane.url, plane.ca, token, ACCOUNT)))
    return path


def test_without_one_shipped_verb_the_real_api_server_refuses_it(
    plane: Plane, reconciler_kubeconfig: Path, tmp_path: Path
) -> None:
    crippled = World(plane, _without_status_patch(plane), tmp_path)
    try:
        crippled.apply(gpu_pod("refused"))
        crippled.wait_for(
            "the refusal in the reconciler's log",
            lambda: "forbidden" in crippled.log().lower() and "pods/status" in crippled.log(),
            timeout=90,
        )
        pod = crippled.get("pod", "refused") or {}
        assert pod["status"].get("phase") != "Running"
    finally:
        crippled.kubectl("delete", "pod", "refused", "--wait=false", check=False)
        crippled.stop()
    del reconciler_kubeconfig  # installs the shipped roles this test copies
