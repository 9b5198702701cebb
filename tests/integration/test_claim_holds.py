"""Another reconciler's hold on a claim is honoured (docs/architecture.md §3, "Cloud
resources"): two reconcilers (two virtual nodes) see one Immediate claim; the first held
it (our finalizer and its volume's name on the claim) and died after its volume's POST,
or its PV create was refused. The second leaves the claim to it instead of overwriting
the hold and making a second volume that bills forever."""

from __future__ import annotations

from typing import Any

from reconciler.core.resources.volume_objects import (
    PROVISIONING_FINALIZER,
    VOLUME_NAME_ANNOTATION,
    volume_name,
)
from reconciler.demo.sandbox import Sandbox

from .test_claims import add_claim, add_class, claim, volume_calls

OTHER = "cluster-x/other-virtual-node"


def test_a_claim_another_reconciler_holds_gets_no_second_volume(box: Sandbox) -> None:
    add_class(box)
    made: dict[str, Any] = add_claim(box)
    uid = made["metadata"]["uid"]
    theirs = volume_name(OTHER, uid)
    # What the other reconciler left: its hold on the claim, and the volume it POSTed.
    held = claim(box)
    held["metadata"]["finalizers"] = [PROVISIONING_FINALIZER]
    held["metadata"].setdefault("annotations", {})[VOLUME_NAME_ANNOTATION] = theirs
    box.kube_sim.put("persistentvolumeclaims", held)
    box.runpod_sim.add_volume(theirs, size=22, datacenter="EU-RO-1")
    for _ in range(3):
        box.tick()
        box.advance(60)
    assert [c for c in volume_calls(box) if c[0] == "POST"] == []
    assert len(box.runpod_sim.volumes) == 1
    now = claim(box)["metadata"]
    assert now["annotations"][VOLUME_NAME_ANNOTATION] == theirs  # the hold stays theirs
