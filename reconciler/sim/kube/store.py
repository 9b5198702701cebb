"""The state of the simulated cluster and the API server's write semantics.

Stored objects are immutable once committed (every write stores a fresh copy), so a
list can hand out references and serialise them outside the lock, and each object's
JSON is computed once and reused by every list page that contains it. Keys are kept
sorted, as in etcd, so `limit`/`continue` paging is a bisect plus a scan of one page.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import json
import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.sim.clock import SimClock
from reconciler.sim.kube.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from reconciler.sim.kube.resources import NAMESPACES, PODS, RESOURCES, Resource
from reconciler.sim.kube.select import Selector
from reconciler.sim.kube.status import ApiError, already_exists, conflict, not_found
from reconciler.sim.kube.strategy import (
    check_json_types,
    prepare_for_create,
    prepare_for_update,
    prepare_for_write,
    validate,
    validate_update,
)

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Watch history kept; a watch from an older resourceVersion gets 410 Expired.
WATCH_HISTORY = 20_000
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SYSTEM_METADATA = (
    "uid",
    "creationTimestamp",
    "namespace",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
PATCH_TYPES = {
    "application/merge-patch+json": merge_patch,
    "application/strategic-merge-patch+json": strategic_merge_patch,
    "application/json-patch+json": json_patch,
}

Key = tuple[str, str]  # (namespace or "", name)
Hook = Callable[[Resource, dict[str, Any]], None]
UpdateHook = Callable[[Resource, dict[str, Any], dict[str, Any]], None]


@dataclass
class Entry:
    obj: dict[str, Any]
    _json: bytes | None = field(default=None, repr=False)

    def json(self) -> bytes:
        # Computed at most once per stored version; a benign race at worst does it twice.
        if self._json is None:
            self._json = json.dumps(self.obj, separators=(",", ":")).encode()
        return self._json


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    resource: Resource
    type: str  # ADDED, MODIFIED, DELETED
    entry: Entry
    previous: dict[str, Any] | None


@dataclass(frozen=True)
class Page:
    resource_version: str
    items: list[Entry]
    continue_token: str


def format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._rv = 0
        self._objects: dict[Resource, dict[Key, Entry]] = {r: {} for r in RESOURCES}
        self._keys: dict[Resource, list[Key]] = {r: [] for r in RESOURCES}
        self._log: list[WatchEvent] = []
        self._log_floor = 0
        self._random = random.Random()
        self._admission: list[Hook] = []
        self._reactions: list[Hook] = []
        self._update_admission: list[UpdateHook] = []
        self._removals: list[Hook] = []
        self._reacting = False
        for name in INITIAL_NAMESPACES:
            self.create(NAMESPACES, None, {"metadata": {"name": name}})

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    def add_controller(
        self,
        admit: Hook,
        react: Hook,
        admit_update: UpdateHook | None = None,
        removed: Hook | None = None,
    ) -> None:
        """A modelled controller: `admit` may change an object about to be created (as
        the controller that creates it would have), `react` sees every committed write
        and may write in turn (its own writes do not wake it again);
        `admit_update(resource, old, new)` may refuse an update, as an admission plugin;
        `removed` sees each object as it leaves the store."""
        self._admission.append(admit)
        self._reactions.append(react)
        if admit_update is not None:
            self._update_admission.append(admit_update)
        if removed is not None:
            self._removals.append(removed)

    # reads ------------------------------------------------------------------------

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object itself: callers must not modify it."""
        with self.lock:
            return self._entry(resource, namespace, name).obj

    def find(self, resource: Resource, namespace: str | None, name: str) -> Entry | None:
        with self.lock:
            return self._objects[resource].get((namespace or "", name))

    def list_page(
        self,
        resource: Resource,
        namespace: str | None,
        selector: Selector,
        limit: int = 0,
        token: str = "",
    ) -> Page:
        with self.lock:
            list_rv, start_key = _decode_token(token) if token else (self._rv, None)
            keys, objects = self._keys[resource], self._objects[resource]
            if start_key is not None:
                index = bisect.bisect_right(keys, start_key)
            else:
                index = bisect.bisect_left(keys, (namespace, "")) if namespace else 0
            items: list[Entry] = []
            while index < len(keys):
                key = keys[index]
                if namespace and key[0] != namespace:
                    break
                entry = objects[key]
                if selector.everything or selector.matches(entry.obj):
                    if limit and len(items) == limit:
                        return Page(str(list_rv), items, _encode_token(list_rv, _key_of(items[-1])))
                    items.append(entry)
                index += 1
            return Page(str(list_rv), items, "")

    def events_after(self, rv: int) -> list[WatchEvent]:
        with self.lock:
            if rv < self._log_floor:
                raise ApiError(
                    410, f"too old resource version: {rv} ({self._log_floor})", "Expired"
                )
            start = bisect.bisect_right(self._log, rv, key=lambda event: event.rv)
            return self._log[start:]

    # writes -----------------------------------------------------------------------

    def create(
        self,
        resource: Resource,
        namespace: str | None,
        body: dict[str, Any],
        keep_status: bool = False,
    ) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        check_json_types(resource, obj)
        with self.lock:
            self._bind_namespace(resource, namespace, obj)
            meta = obj["metadata"]
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generate_name(resource, namespace, meta["generateName"])
            # The system's metadata comes first (FillObjectMetaSystemFields, before the
            # strategy's PrepareForCreate): a Job's generated selector names its uid.
            for stale in (*_SYSTEM_METADATA, "resourceVersion"):
                meta.pop(stale, None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=format_time(self.clock.now()))
            if namespace:
                meta["namespace"] = namespace
            status = obj.get("status")
            prepare_for_create(resource, obj)
            if keep_status and status is not None:
                obj["status"] = status
            prepare_for_write(resource, obj)
            for admit in self._admission:
                admit(resource, obj)
            validate(resource, obj)
            key = (namespace or "", meta["name"])
            if key in self._objects[resource]:
                raise already_exists(resource.plural, meta["name"])
            obj["kind"], obj["apiVersion"] = resource.kind, resource.api_version
            return self._commit(resource, key, obj, "ADDED")

    def update(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        subresource: str = "",
    ) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        check_json_types(resource, obj)
        with self.lock:
            old = self._entry(resource, namespace, name).obj
            return self._write(resource, old, obj, subresource)

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        content_type: str,
        patch: Any,
        subresource: str = "",
    ) -> dict[str, Any]:
        apply = PATCH_TYPES.get(content_type)
        if apply is None:
            raise ApiError(415, f"the server does not support patch type {content_type!r}")
        with self.lock:
            old = self._entry(resource, namespace, name).obj
            try:
                patched = apply(copy.deepcopy(old), patch)
            except PatchError as error:
                raise ApiError(422, str(error)) from error
            if not isinstance(patched, dict):
                raise ApiError(422, "the patch did not produce an object")
            check_json_types(resource, patched)
            return self._write(resource, old, patched, subresource)

    def put(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        """Create or overwrite an object, status included: a test arranging the cluster."""
        meta = body.get("metadata", {})
        namespace = meta.get("namespace") or ("default" if resource.namespaced else None)
        with self.lock:
            entry = self.find(resource, namespace, meta.get("name", ""))
            if entry is None:
                return self.create(resource, namespace, body, keep_status=True)
            obj = copy.deepcopy(body)
            for system in _SYSTEM_METADATA:
                if system in entry.obj["metadata"]:
                    obj["metadata"].setdefault(system, entry.obj["metadata"][system])
            obj["metadata"].pop("resourceVersion", None)
            obj["kind"], obj["apiVersion"] = resource.kind, resource.api_version
            prepare_for_write(resource, obj)
            return self._commit(resource, _key_of_obj(obj), obj, "MODIFIED")

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        grace_seconds: int | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        with self.lock:
            old = self._entry(resource, namespace, name).obj
            _check_preconditions(resource, old, preconditions or {})
            if resource is NAMESPACES:
                return self._delete_namespace(old)
            grace = _pod_grace(old, grace_seconds) if resource is PODS else 0
            meta = old["metadata"]
            if "deletionTimestamp" in meta and grace >= meta.get("deletionGracePeriodSeconds", 0):
                return old  # already terminating at least as fast as asked
            if grace == 0 and not meta.get("finalizers"):
                return self._remove(resource, _key_of_obj(old), old)
            obj = copy.deepcopy(old)
            deadline = self.clock.now() + timedelta(seconds=grace)
            obj["metadata"].update(
                deletionTimestamp=format_time(deadline), deletionGracePeriodSeconds=grace
            )
            return self._commit(resource, _key_of_obj(obj), obj, "MODIFIED")

    def bind(self, namespace: str, name: str, binding: dict[str, Any]) -> None:
        with self.lock:
            pod = self._entry(PODS, namespace, name).obj
            _check_binding(pod, binding)
            obj = copy.deepcopy(pod)
            obj["spec"]["nodeName"] = binding["target"]["name"]
            conditions = [
                c for c in obj["status"].get("conditions", []) if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": format_time(self.clock.now()),
                }
            )
            obj["status"]["conditions"] = conditions
            self._commit(PODS, (namespace, name), obj, "MODIFIED")

    def evict(self, namespace: str, name: str, eviction: dict[str, Any]) -> dict[str, Any]:
        """pods/eviction as without PodDisruptionBudgets (the simulator serves none): the
        pod is marked DisruptionTarget and deleted with the eviction's delete options."""
        with self.lock:
            pod = self._entry(PODS, namespace, name).obj
            _check_eviction(pod, eviction)
            options = eviction.get("deleteOptions") or {}
            _check_preconditions(PODS, pod, options.get("preconditions") or {})
            self.disrupt(namespace, name, "EvictionByEvictionAPI", "Eviction API: evicting")
            return self.delete(PODS, namespace, name, options.get("gracePeriodSeconds"))

    def disrupt(
        self, namespace: str, name: str, reason: str, message: str, fail: bool = False
    ) -> None:
        """The DisruptionTarget condition the control plane sets on a pod it is about to
        delete (and, for pod garbage collection, phase Failed); none on a finished pod."""
        with self.lock:
            pod = self._entry(PODS, namespace, name).obj
            status = pod.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                return
            obj = copy.deepcopy(pod)
            conditions = [
                c
                for c in obj["status"].get("conditions", [])
                if c.get("type") != "DisruptionTarget"
            ]
            conditions.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": format_time(self.clock.now()),
                }
            )
            obj["status"]["conditions"] = conditions
            if fail:
                obj["status"]["phase"] = "Failed"
            self._commit(PODS, (namespace, name), obj, "MODIFIED")

    # internals --------------------------------------------------------------------

    def _entry(self, resource: Resource, namespace: str | None, name: str) -> Entry:
        entry = self._objects[resource].get((namespace or "", name))
        if entry is None:
            raise not_found(resource.plural, name)
        return entry

    def _write(
        self,
        resource: Resource,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str,
    ) -> dict[str, Any]:
        """Shared tail of update and patch: preconditions, subresource scoping, validation."""
        name = old["metadata"]["name"]
        if new["metadata"].get("name", name) != name:
            raise ApiError(
                400,
                f"the name of the object ({new['metadata'].get('name')}) "
                f"does not match the name on the URL ({name})",
            )
        sent_rv = new["metadata"].get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise conflict(
                resource.plural,
                name,
                "the object has been modified; please "
                "apply your changes to the latest version and try again",
            )
        sent_uid = new["metadata"].get("uid")
        if sent_uid and sent_uid != old["metadata"]["uid"]:
            raise conflict(
                resource.plural,
                name,
                f"Precondition failed: UID in precondition: "
                f"{sent_uid}, UID in object meta: {old['metadata']['uid']}",
            )
        obj = _scope_to_subresource(resource, old, new, subresource)
        for system in _SYSTEM_METADATA:
            obj["metadata"].pop(system, None)
            if system in old["metadata"]:
                obj["metadata"][system] = old["metadata"][system]
        obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        obj["kind"], obj["apiVersion"] = resource.kind, resource.api_version
        prepare_for_update(resource, old, obj)
        prepare_for_write(resource, obj)
        validate(resource, obj)
        validate_update(resource, old, obj)
        for admit in self._update_admission:
            admit(resource, old, obj)
        if obj == old:
            return old  # a no-op write does not bump the resourceVersion, as in etcd
        key = _key_of_obj(old)
        committed = self._commit(resource, key, obj, "MODIFIED")
        meta = committed["metadata"]
        if (
            "deletionTimestamp" in meta
            and not meta.get("finalizers")
            and meta.get("deletionGracePeriodSeconds", 0) == 0
        ):
            return self._remove(resource, key, committed)
        return committed

    def _commit(self, resource: Resource, key: Key, obj: dict[str, Any], kind: str) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        objects = self._objects[resource]
        previous = objects.get(key)
        if previous is None:
            bisect.insort(self._keys[resource], key)
        entry = Entry(obj)
        objects[key] = entry
        self._record(resource, kind, entry, previous.obj if previous else None)
        self._react(self._reactions, resource, obj)
        return obj

    def _react(self, hooks: list[Hook], resource: Resource, obj: dict[str, Any]) -> None:
        if not self._reacting:
            self._reacting = True
            try:
                for react in hooks:
                    react(resource, obj)
            finally:
                self._reacting = False

    def _remove(self, resource: Resource, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(self._rv)
        del self._objects[resource][key]
        keys = self._keys[resource]
        del keys[bisect.bisect_left(keys, key)]
        self._record(resource, "DELETED", Entry(final), obj)
        self._react(self._removals, resource, final)
        return final

    def _record(self, resource: Resource, kind: str, entry: Entry, previous: dict | None) -> None:
        self._log.append(WatchEvent(self._rv, resource, kind, entry, previous))
        if len(self._log) > 2 * WATCH_HISTORY:
            del self._log[:-WATCH_HISTORY]
            self._log_floor = self._log[0].rv - 1
        self.changed.notify_all()

    def _delete_namespace(self, namespace: dict[str, Any]) -> dict[str, Any]:
        """Immediate cascade: the namespace controller's work without its delay."""
        name = namespace["metadata"]["name"]
        for resource in RESOURCES:
            if resource.namespaced:
                for key in [k for k in self._keys[resource] if k[0] == name]:
                    self._remove(resource, key, self._objects[resource][key].obj)
        return self._remove(NAMESPACES, ("", name), namespace)

    def _bind_namespace(self, resource: Resource, namespace: str | None, obj: dict) -> None:
        meta = obj["metadata"]
        if not resource.namespaced:
            meta.pop("namespace", None)
            return
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise ApiError(
                400,
                "the namespace of the provided object does not match the "
                "namespace sent on the request",
            )
        if ("", namespace) not in self._objects[NAMESPACES]:
            raise not_found("namespaces", namespace or "")
        # Set before admission, as the API server does: controllers' admission reads it.
        meta["namespace"] = namespace

    def _generate_name(self, resource: Resource, namespace: str | None, prefix: str) -> str:
        while True:
            name = prefix + "".join(self._random.choice(_NAME_CHARS) for _ in range(5))
            if (namespace or "", name) not in self._objects[resource]:
                return name


def _scope_to_subresource(
    resource: Resource,
    old: dict[str, Any],
    new: dict[str, Any],
    subresource: str,
) -> dict[str, Any]:
    """The status subresource changes only status; the main resource never changes it.

    Pods are the exception the API server makes: their status strategy resets only spec,
    deletionTimestamp and ownerReferences, so labels and annotations written through
    pods/status are kept (the kubelet's status manager relies on one request).
    """
    if subresource == "status" and resource.plural == "pods":
        obj = copy.deepcopy(new)
        obj["spec"] = copy.deepcopy(old.get("spec", {}))
        for key in ("deletionTimestamp", "ownerReferences"):
            if key in old.get("metadata", {}):
                obj["metadata"][key] = copy.deepcopy(old["metadata"][key])
            else:
                obj["metadata"].pop(key, None)
        return obj
    if subresource == "status":
        obj = copy.deepcopy(old)
        obj["status"] = new.get("status", {})
        return obj
    if resource.has_status:
        new["status"] = copy.deepcopy(old.get("status", {}))
    return new


def _pod_grace(pod: dict[str, Any], requested: int | None) -> int:
    """Pods nobody runs (unbound or finished) go at once, as in the API server's pod strategy."""
    spec, phase = pod.get("spec", {}), pod.get("status", {}).get("phase")
    if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
        return 0
    if requested is None:
        return int(spec.get("terminationGracePeriodSeconds", 30))
    return max(0, requested)


def _check_preconditions(resource: Resource, obj: dict, preconditions: dict[str, Any]) -> None:
    meta = obj["metadata"]
    for field_name, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = preconditions.get(field_name)
        if wanted and wanted != meta.get(field_name):
            raise conflict(
                resource.plural,
                meta["name"],
                f"Precondition failed: {label} in precondition: {wanted}, "
                f"{label} in object meta: {meta.get(field_name)}",
            )


def _check_binding(pod: dict[str, Any], binding: dict[str, Any]) -> None:
    name, meta = pod["metadata"]["name"], pod["metadata"]
    target = binding.get("target") or {}
    if not target.get("name") or target.get("kind", "Node") != "Node":
        raise ApiError(422, "binding target must be a Node with a name", "Invalid")
    wanted_uid = (binding.get("metadata") or {}).get("uid")
    if wanted_uid and wanted_uid != meta["uid"]:
        raise conflict(
            "pods/binding",
            name,
            f"Precondition failed: UID in precondition: "
            f"{wanted_uid}, UID in object meta: {meta['uid']}",
        )
    if "deletionTimestamp" in meta:
        raise conflict(
            "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
        )
    if pod["spec"].get("nodeName"):
        raise conflict(
            "pods/binding",
            name,
            f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"',
        )


def _check_eviction(pod: dict[str, Any], eviction: dict[str, Any]) -> None:
    meta = eviction.get("metadata") or {}
    if eviction.get("kind", "Eviction") != "Eviction":
        raise ApiError(400, f"the body is a {eviction.get('kind')}, not an Eviction")
    if meta.get("name") != pod["metadata"]["name"]:
        raise ApiError(
            400,
            f"name in URL does not match name in Eviction object: "
            f"{pod['metadata']['name']} vs {meta.get('name')}",
        )
    if meta.get("namespace") and meta["namespace"] != pod["metadata"]["namespace"]:
        raise ApiError(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        )


def _key_of(entry: Entry) -> Key:
    return _key_of_obj(entry.obj)


def _key_of_obj(obj: dict[str, Any]) -> Key:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _encode_token(rv: int, key: Key) -> str:
    raw = json.dumps({"rv": rv, "start": list(key)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_token(token: str) -> tuple[int, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error) as error:
        raise ApiError(400, "continue key is not valid: " + str(error)) from error
