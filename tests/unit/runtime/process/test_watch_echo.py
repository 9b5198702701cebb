"""The watch's change filter ignores the echo of the annotations the reconciler writes
(each one would otherwise cost an early tick, and a RunPod list call), while a user's
annotation change still counts."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.runtime.process.watch import ChangeFilter


def _pod(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": "u1",
            "name": "p",
            "resourceVersion": "1",
            "annotations": dict(annotations),
        },
        "spec": {"nodeName": "virtual-runpod"},
        "status": {"phase": "Pending"},
    }


def test_our_annotations_echoing_back_change_nothing() -> None:
    changes = ChangeFilter()
    assert changes.matters("ADDED", _pod({"team": "a"}))
    echoed = _pod(
        {
            "team": "a",
            "runpod.io/pod-id": "abc",
            "runpod.io/cost-per-hr": "0.49",
            "runpod.io/public-ip": "1.2.3.4",
        }
    )
    echoed["metadata"]["resourceVersion"] = "2"
    assert not changes.matters("MODIFIED", echoed)


def test_a_users_annotation_still_counts() -> None:
    changes = ChangeFilter()
    changes.matters("ADDED", _pod({}))
    edited = copy.deepcopy(_pod({"runpod.io/gpu-types": "L40S"}))
    assert changes.matters("MODIFIED", edited)


def test_the_spend_we_write_echoing_back_changes_nothing() -> None:
    changes = ChangeFilter()
    changes.matters("ADDED", _pod({"runpod.io/pod-id": "abc"}))
    billed = _pod({"runpod.io/pod-id": "abc", "runpod.io/spend-usd": "0.49"})
    billed["metadata"]["resourceVersion"] = "2"
    assert not changes.matters("MODIFIED", billed)


def test_the_first_status_we_write_on_a_bound_pod_changes_nothing() -> None:
    """A pod created bound to our node has no PodScheduled condition; the first status we
    write, as its kubelet, says PodScheduled=True. Its echo used to cost a tick (and a
    RunPod list) for every new pod."""
    changes = ChangeFilter()
    changes.matters("ADDED", _pod({}))
    written = _pod({})
    written["metadata"]["resourceVersion"] = "2"
    written["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
        ],
    }
    assert not changes.matters("MODIFIED", written)
