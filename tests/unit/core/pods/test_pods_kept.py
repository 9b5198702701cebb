"""`podinfo.kept`: a listed pod without what the reconciler never reads (managedFields, the
ServiceAccount token volume and its mounts), everything else as it was."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.core.pods import podinfo

TOKEN = {
    "name": "kube-api-access-x2b9q",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt"}},
        ]
    },
}
TOKEN_MOUNT = {
    "name": "kube-api-access-x2b9q",
    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
}
MANAGED_FIELDS = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


def _pod(volumes: list[Any], mounts: list[Any], **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u", **metadata},
        "spec": {
            "containers": [{"name": "main", "volumeMounts": list(mounts)}],
            "ephemeralContainers": [{"name": "debug", "volumeMounts": list(mounts)}],
            "volumes": list(volumes),
        },
        "status": {"phase": "Running"},
    }


def test_managed_fields_go_and_the_rest_of_the_metadata_stays() -> None:
    pod = _pod([], [], managedFields=MANAGED_FIELDS, labels={"app": "a"})

    podinfo.kept(pod)

    assert pod["metadata"] == {"name": "p", "uid": "u", "labels": {"app": "a"}}


def test_the_token_volume_and_its_mounts_go_the_other_volumes_stay_in_order() -> None:
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    own = {"name": "own", "projected": {"sources": [{"downwardAPI": {"items": []}}]}}
    mounts = [{"name": "data", "mountPath": "/data"}, {"name": "own", "mountPath": "/own"}]
    pod = _pod([claim, TOKEN, own], [mounts[0], TOKEN_MOUNT, mounts[1]])

    podinfo.kept(pod)

    assert pod["spec"]["volumes"] == [claim, own]
    assert pod["spec"]["containers"][0]["volumeMounts"] == mounts
    assert pod["spec"]["ephemeralContainers"][0]["volumeMounts"] == mounts


def test_lists_left_empty_lose_their_key() -> None:
    pod = _pod([TOKEN], [TOKEN_MOUNT])

    podinfo.kept(pod)

    assert "volumes" not in pod["spec"]
    assert "volumeMounts" not in pod["spec"]["containers"][0]


def test_a_pod_without_token_volume_is_left_as_it_was() -> None:
    """A projected volume of the user's own (no serviceAccountToken source) is theirs."""
    own = {"name": "own", "projected": {"sources": [{"secret": {"name": "s"}}]}}
    pod = _pod([own], [{"name": "own", "mountPath": "/own"}])
    before = copy.deepcopy(pod)

    assert podinfo.kept(pod) is pod
    assert pod == before
    bare: dict[str, Any] = {"metadata": {"name": "p"}}
    assert podinfo.kept(bare) == {"metadata": {"name": "p"}}
