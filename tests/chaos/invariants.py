"""The promises a campaign run checks, as pure functions over what the worlds recorded.

- `foreign_violations`: no instance without our owner tag was ever touched (the RunPod
  simulator's request log has no DELETE or action on a foreign id) and all still exist.
- `journal_violations`: the journal accounts for every side effect both simulators saw
  (each create or delete RunPod answered, each pod status/metadata patch and pod delete
  Kubernetes answered has a journal row; Kubernetes calls of a tick that died are left
  out by `outside`, their rows being committed after the call), claims none that did
  not happen, and only processes that died left rows open (at most one each).
- `History`: follows snapshots tick by tick: duplicates seen, orphan instance-seconds,
  and finished work never re-run (a finished pod never gets a new instance).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.contract import POD_UID_ENV
from tests.chaos.ticks import JournalRow
from tests.chaos.world import Json, Snapshot

_INSTANCE_PATH = re.compile(r"^/v2/pods/(?P<id>[^/]+)(?P<action>/action)?$")
_POD_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)(?P<sub>/status)?$")


def foreign_violations(
    requests: Iterable[Json], foreign: set[str], snapshot: Snapshot
) -> list[str]:
    found = []
    for request in requests:
        match = _INSTANCE_PATH.match(request["path"])
        if match and match["id"] in foreign and request["method"] != "GET":
            found.append(
                f"foreign instance {match['id']} touched: {request['method']} "
                f"{request['path']} -> {request['status']}"
            )
    present = {i["id"] for i in snapshot.instances}
    found += [f"foreign instance {i} is gone" for i in sorted(foreign - present)]
    return found


def action_requests(requests: Iterable[Json]) -> list[str]:
    """The reconciler terminates with DELETE, never with stop (docs/architecture.md §4)."""
    return [
        f"{r['method']} {r['path']} {r['body']}"
        for r in requests
        if (m := _INSTANCE_PATH.match(r["path"])) and m["action"]
    ]


# --- the journal ------------------------------------------------------------------------


def journal_violations(
    runpod_requests: Iterable[Json],
    kube_requests: Iterable[list[Any]],
    journal: list[JournalRow],
    namespace: str,
    uid_by_name: Mapping[str, str],
) -> list[str]:
    rows = Counter(_journal_key(r) for r in journal)
    ok_rows = Counter(_journal_key(r) for r in journal if r.outcome == "ok")
    seen, answered = _runpod_effects(runpod_requests)
    seen += _kube_effects(kube_requests, namespace, uid_by_name)
    problems = [
        f"{n} x {kind} of {key} in the simulator log, {rows[(kind, key)]} journal rows"
        for (kind, key), n in seen.items()
        if n > rows[(kind, key)]
    ]
    problems += [
        f"journal says {kind} of {key} succeeded {n} x, the simulator answered "
        f"{answered[(kind, key)]} x"
        for (kind, key), n in ok_rows.items()
        if kind in ("create", "terminate") and n > answered[(kind, key)]
    ]
    return problems + _open_row_violations(journal)


def outside(requests: list[Any], spans: Iterable[tuple[int, int]]) -> list[Any]:
    """The requests not in any of these (start, end) index spans of the log.

    The Kubernetes requests of a tick that died are left out of the journal check: their
    journal rows are committed with the tick's next write (docs/architecture.md §4), so a
    crash can lose them; the next tick observes what they did. RunPod's creates and
    terminates are never left out: their rows are committed before the call.
    """
    dropped = {i for start, end in spans for i in range(start, end)}
    return [r for i, r in enumerate(requests) if i not in dropped]


def _journal_key(row: JournalRow) -> tuple[str, str]:
    """What a row acted on as the simulators' logs name it: instance id, else pod UID."""
    subject = row.instance_id if row.kind == "terminate" else row.pod_uid
    return row.kind, subject or "?"


def _runpod_effects(
    requests: Iterable[Json],
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Calls that may have changed something, and calls answered with success."""
    effects: Counter[tuple[str, str]] = Counter()
    answered: Counter[tuple[str, str]] = Counter()
    for request in requests:
        method, path, status = request["method"], request["path"], request["status"]
        if method == "POST" and path == "/v2/pods" and (status == 201 or status >= 500):
            uid = ((request["body"] or {}).get("env") or {}).get(POD_UID_ENV, "?")
            effects[("create", uid)] += 1
            answered[("create", uid)] += status == 201
        elif method == "DELETE" and (match := _INSTANCE_PATH.match(path)):
            effects[("terminate", match["id"])] += status == 204
            answered[("terminate", match["id"])] += status in (204, 404)
    return +effects, answered


def _kube_effects(
    requests: Iterable[list[Any]], namespace: str, uid_by_name: Mapping[str, str]
) -> Counter[tuple[str, str]]:
    effects: Counter[tuple[str, str]] = Counter()
    for method, path, _query, status in requests:
        match = _POD_PATH.match(path)
        if not match or match["ns"] != namespace or not 200 <= status < 300:
            continue
        kind = {
            ("DELETE", None): "finalize-pod",
            ("PATCH", None): "patch-metadata",
            ("PATCH", "/status"): "patch-status",
        }.get((method, match["sub"]))
        if kind is not None:
            effects[(kind, uid_by_name.get(match["name"], match["name"]))] += 1
    return effects


def _open_row_violations(journal: list[JournalRow]) -> list[str]:
    problems = [
        f"journal row {r.id} ({r.kind}) left open by tick {r.tick_id}, which finished"
        for r in journal
        if not r.finished and r.tick_finished
    ]
    by_tick = Counter((r.generation, r.tick_id) for r in journal if not r.finished)
    return problems + [
        f"tick {tick} of database #{generation} left {n} journal rows open"
        for (generation, tick), n in by_tick.items()
        if n > 1
    ]


# --- tick by tick -----------------------------------------------------------------------


@dataclass
class History:
    """What the snapshots after each tick showed, accumulated over one run."""

    ever: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    finished_with: dict[str, set[str]] = field(default_factory=dict)
    duplicate_pods: set[str] = field(default_factory=set)
    orphan_seconds: float = 0.0
    orphan_first_seen: dict[str, float] = field(default_factory=dict)
    longest_orphan: float = 0.0
    violations: list[str] = field(default_factory=list)

    def observe(self, snap: Snapshot, now: float, elapsed: float) -> None:
        for uid, group in snap.owned.items():
            self.ever[uid].update(i["id"] for i in group)
        self.duplicate_pods.update(snap.duplicates())
        self._follow_orphans(snap, now, elapsed)
        self._check_finished_work(snap)

    def _follow_orphans(self, snap: Snapshot, now: float, elapsed: float) -> None:
        orphans = {i["id"] for i in snap.orphans()}
        duplicates = {
            i["id"]
            for g in snap.owned.values()
            if len(g) > 1
            for i in sorted(g, key=lambda i: i["createdAt"])[1:]
        }
        extra = orphans | duplicates
        self.orphan_seconds += elapsed * len(extra)
        for instance_id in extra:
            first = self.orphan_first_seen.setdefault(instance_id, now)
            self.longest_orphan = max(self.longest_orphan, now - first)
        for instance_id in set(self.orphan_first_seen) - extra:
            del self.orphan_first_seen[instance_id]

    def _check_finished_work(self, snap: Snapshot) -> None:
        for uid, pod in snap.pods.items():
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                continue
            now_owned = {i["id"] for i in snap.owned.get(uid, [])}
            before = self.finished_with.setdefault(uid, self.ever[uid] | now_owned)
            new = now_owned - before
            if new:
                self.violations.append(
                    f"finished pod {pod['metadata']['name']} got new instances {sorted(new)}"
                )
                before.update(new)

    def created_twice(self) -> dict[str, int]:
        return {uid: len(ids) for uid, ids in self.ever.items() if len(ids) > 1}
