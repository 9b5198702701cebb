"""What `reconciler demo --keep-running` prints while the world runs on: one line per thing
a person watching wants to see, as `sky launch` shows provisioning in the terminal that
launched it.

A pod placed (its GPU, data center and price: the reconciler's `CreatedInstance` Event),
Running, ended, its instance terminated (and then gone from RunPod's list: billing
stopped), an Instant Cluster made, a network volume provisioned or grown, and any
Warning once. Nothing else: the Events RunPod's own lines become (image pulls,
start-up) and repeats of an Event already told stay out, so the lines can be read as
they come.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.core.pods import podinfo
from reconciler.core.reasons import Notice, VolumeNotice
from reconciler.demo.sandbox import Sandbox

TOLD = frozenset(
    {
        Notice.CREATED_INSTANCE,
        Notice.CREATED_CLUSTER,
        Notice.ADOPTED_INSTANCE,
        Notice.OFFLOADED,
        Notice.COMPLETED,
        Notice.TERMINATING_INSTANCE,
        VolumeNotice.PROVISIONED,
        VolumeNotice.RESIZED,
    }
)
"""The Normal Events told; every Warning is told too (once per Event)."""
ENDED = ("Succeeded", "Failed")
KINDS = {"PersistentVolumeClaim": "pvc"}
"""Short names of the kinds an Event can be about, as kubectl takes them."""


class Teller:
    """Tells what changed since the last look. It starts from the world as it is, so the
    scripted story, told already, is not told again."""

    def __init__(self, box: Sandbox, echo: Callable[[str], None]) -> None:
        self.box, self.echo = box, echo
        self._events: set[str] = set()
        self._phases: dict[str, str] = {}
        self._instances: set[str] = set()
        self.look(tell=False)

    def look(self, tell: bool = True) -> None:
        lines = [*self._new_events(), *self._new_phases(), *self._gone_instances()]
        if tell:
            stamp = f"{self.box.clock.now():%H:%M:%S}"
            for subject, text in lines:
                self.echo(f"{stamp}  {subject:<24} {text}")

    def _new_events(self) -> list[tuple[str, str]]:
        told = []
        for event in sorted(self.box.kube_sim.list("events", None), key=_stored):
            uid = event["metadata"]["uid"]
            if uid in self._events:
                continue
            self._events.add(uid)
            if event.get("type") == "Warning" or event.get("reason") in TOLD:
                told.append((_subject(event["involvedObject"]), _event_text(event)))
        return told

    def _new_phases(self) -> list[tuple[str, str]]:
        told = []
        for pod in self.box.kube_sim.list("pods", None):
            meta = pod["metadata"]
            key, phase = f"{meta['namespace']}/{meta['name']}", podinfo.phase(pod)
            if self._phases.get(key) == phase:
                continue
            self._phases[key] = phase
            if phase == "Running" or phase in ENDED:
                told.append((key, _phase_text(pod, phase)))
        return told

    def _gone_instances(self) -> list[tuple[str, str]]:
        listed = {str(instance["id"]) for instance in self.box.owned_instances()}
        gone, self._instances = self._instances - listed, listed
        return [
            (f"instance {instance_id}", "gone from RunPod's list: it bills no more")
            for instance_id in sorted(gone)
        ]


def _stored(event: dict[str, Any]) -> int:
    return int(event["metadata"].get("resourceVersion", "0"))


def _subject(target: dict[str, Any]) -> str:
    name = f"{target.get('namespace')}/{target.get('name')}"
    kind = str(target.get("kind", ""))
    return name if kind == "Pod" else f"{KINDS.get(kind, kind.lower())} {name}"


def _event_text(event: dict[str, Any]) -> str:
    warning = "warning: " if event.get("type") == "Warning" else ""
    return f"{warning}{event.get('reason')}: {event.get('message')}"


def _phase_text(pod: dict[str, Any], phase: str) -> str:
    instance = (pod["metadata"].get("annotations") or {}).get("runpod.io/pod-id")
    return f"{phase} on RunPod instance {instance}" if instance else phase
