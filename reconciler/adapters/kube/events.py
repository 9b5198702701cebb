"""Events on pods: a repeat bumps the count of the one recorded before."""

from __future__ import annotations

import hashlib
from datetime import datetime

from reconciler.adapters.kube.errors import KubeConflict
from reconciler.adapters.kube.transport import MERGE_PATCH, KubeTransport, q, rfc3339
from reconciler.core.domain import KubeObject
from reconciler.core.printable import escaped

DEFAULT_COMPONENT = "runpod-reconciler"
MAX_EVENT_MESSAGE = 1024
"""An Event's note is at most 1 kB (events.k8s.io validation); a longer message is cut."""


class Events:
    """Events recorded on pods (and other objects)."""

    def __init__(self, kube: KubeTransport) -> None:
        self._kube = kube

    def record(
        self,
        pod: KubeObject,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = DEFAULT_COMPONENT,
        occurred_at: datetime | None = None,
    ) -> None:
        """Record an Event on `pod`; a repeat of the same one bumps its count instead.

        The event's name is derived from (object UID, reason, message, type, component),
        so repeats are found again after a restart, without any local cache. Most events
        are new: one POST; only a repeat (409 AlreadyExists) costs a GET and a PATCH more.

        `occurred_at` stamps the Event with when the thing happened elsewhere (a line of
        RunPod's log) and makes recording it again harmless: a repeat no later than the
        Event's last time is that occurrence seen twice, so it is not counted (the GET,
        no PATCH). Times have whole seconds: two such repeats within one second count once.
        """
        meta = pod["metadata"]
        namespace = meta.get("namespace") or "default"
        # Messages quote users' values: a newline or an escape sequence must not reach
        # whoever reads the Event in a terminal.
        message = escaped(message)[:MAX_EVENT_MESSAGE]
        name = _event_name(pod, reason, message, type, component)
        collection = f"/api/v1/namespaces/{q(namespace)}/events"
        stamp = rfc3339(occurred_at or self._kube.now())
        event = _new_event(pod, name, reason, message, type, component, stamp)
        try:
            self._kube.request("POST", collection, body=event)
            return
        except KubeConflict:  # recorded before: count this one on top of it
            existing = self._kube.request("GET", f"{collection}/{q(name)}")
        if occurred_at is not None and str(existing.get("lastTimestamp") or "") >= stamp:
            return  # this occurrence (or a later one) is counted already
        bump = {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": stamp}
        self._kube.request("PATCH", f"{collection}/{q(name)}", body=bump, content_type=MERGE_PATCH)


def _event_name(
    obj: KubeObject,
    reason: str,
    message: str,
    type: str,
    component: str,
) -> str:
    meta = obj["metadata"]
    identity = "\0".join((meta.get("uid", ""), reason, message, type, component))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return f"{meta['name'][:236]}.{digest}"


def _new_event(
    obj: KubeObject,
    name: str,
    reason: str,
    message: str,
    type: str,
    component: str,
    stamp: str,
) -> KubeObject:
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            # List items carry no kind: what the reconciler reports on is a pod unless told.
            "kind": obj.get("kind", "Pod"),
            "apiVersion": obj.get("apiVersion", "v1"),
            "namespace": namespace,
            "name": meta["name"],
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
