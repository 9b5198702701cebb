"""The promises a campaign run checks, as pure functions over what the worlds recorded.

- `foreign_violations`, `foreign_volume_violations`: no instance without our owner tag,
  no network volume without our name, was ever touched (the RunPod simulator's request
  log has no DELETE, PATCH or action on a foreign id) and all still exist.
- `volumes_made_twice`: one volume per claim, ever, whichever reconciler made it
  (RunPod's request log); `volumes_left_billing`: each volume a POST made that is still
  there at the end is named by a PV and kept by a live claim or a Retain PV.
- `clusters_made_twice`: one cluster per gang tag, ever; `gangs_rerun`: no cluster for a
  Job after its gang's rank 0 exited 0; `gang_ends_lost`: that gang's pods end Succeeded.
- `request_log_violations`: the request log those read holds the whole run.
- `journal_violations`: the journal accounts for every side effect both simulators saw
  (each create or delete RunPod answered, each pod status/metadata patch and pod delete
  Kubernetes answered has a journal row; Kubernetes calls of a tick that died are left
  out by `outside`, their rows being committed after the call; a network volume's
  create and delete too, whose rows are committed before the call), claims none that did
  not happen, and only processes that died left rows open (at most one each).
- `instances_made` reads RunPod's request log for every instance a create made (even
  one answered 5xx, even one deleted before anyone looked): `duplicates` sorts a pod's
  second instance into explained or not, `reruns` finds an instance made for a pod after
  its work had ended.
- `tick_violations`, `steady_violations`, `orphan_violations`: how ticks ended, the
  fixed point after convergence, how long orphans lived.
- `History`: follows snapshots tick by tick: orphan instance-seconds, and when each pod
  was first seen finished.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from reconciler.core.contract import GANG_ENV, POD_UID_ENV
from reconciler.sim.runpod.gateway import REQUEST_LOG_LIMIT
from tests.chaos.ticks import JournalRow, TickResult
from tests.chaos.world import Json, Snapshot, deleting, finished, phase

_INSTANCE_PATH = re.compile(r"^/v2/pods/(?P<id>[^/]+)(?P<action>/action)?$")
_REGISTRY_PATH = re.compile(r"^/v2/registries/(?P<id>[^/]+)$")
_VOLUME_PATH = re.compile(r"^/v2/network-volumes/(?P<id>[^/]+)$")
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


def foreign_volume_violations(
    requests: Iterable[Json], foreign: set[str], snapshot: Snapshot
) -> list[str]:
    """No network volume that is not ours was ever changed, and all still exist."""
    found = [
        f"foreign volume {m['id']} touched: {r['method']} {r['path']} -> {r['status']}"
        for r in requests
        if (m := _VOLUME_PATH.match(r["path"])) and m["id"] in foreign and r["method"] != "GET"
    ]
    present = {v["id"] for v in snapshot.volumes}
    return found + [f"foreign volume {v} is gone" for v in sorted(foreign - present)]


def volumes_made_twice(requests: Iterable[Json]) -> list[str]:
    """A claim's volume is made once, ever, by whichever reconciler of the account made
    it: two POSTs RunPod answered 201 for one claim are a duplicate, even if one was
    deleted since, and even under two names (two virtual nodes: each names its volumes
    with its own owner digest and the claim's UID)."""
    made: dict[str, list[str]] = defaultdict(list)
    for name in _volume_names_made(requests):
        made[_claim_of_volume(name)].append(name)
    return [
        f"{len(names)} volumes made for claim {claim}: {sorted(names)}"
        for claim, names in made.items()
        if len(names) > 1
    ]


def volumes_left_billing(requests: Iterable[Json], snapshot: Snapshot) -> list[str]:
    """Every volume a POST of ours made (RunPod's request log: any of the account's
    reconcilers, whatever the final snapshot's owner) that still exists at the end is
    named by a PV, and its claim is alive or its PV keeps it (Retain: Released); any
    other bills on with nothing to use it."""
    names = set(_volume_names_made(requests))
    by_handle = {_pv_handle(pv): pv for pv in snapshot.persistent_volumes}
    found = []
    for volume in snapshot.volumes:
        if volume["name"] not in names:
            continue
        claim, pv = _claim_of_volume(volume["name"]), by_handle.get(volume["id"])
        if pv is None:
            gone = "its claim is gone" if claim not in snapshot.claims else "its claim lives"
            found.append(f"volume {volume['id']} ({volume['name']}) bills on: no PV, {gone}")
        elif claim not in snapshot.claims and pv["spec"].get("persistentVolumeReclaimPolicy") != (
            "Retain"
        ):
            found.append(
                f"volume {volume['id']} ({volume['name']}) bills on: its claim is gone and "
                f"its PV {pv['metadata']['name']} does not retain it"
            )
    return found


def _volume_names_made(requests: Iterable[Json]) -> list[str]:
    return [
        str((r["body"] or {}).get("name"))
        for r in requests
        if (r["method"], r["path"], r["status"]) == ("POST", "/v2/network-volumes", 201)
    ]


def _claim_of_volume(name: str) -> str:
    """Our volumes are named `<prefix><owner digest>-pvc-<claim UID>`."""
    return name.rpartition("-pvc-")[2] or name


def _pv_handle(pv: Json) -> str:
    return str((pv["spec"].get("csi") or {}).get("volumeHandle") or "")


def request_log_violations(requests: Sequence[Json]) -> list[str]:
    """The invariants that read RunPod's request log see the whole run only if the
    simulator kept all of it (it keeps the newest `REQUEST_LOG_LIMIT`)."""
    if len(requests) >= REQUEST_LOG_LIMIT:
        return [f"RunPod's request log holds {len(requests)} requests: the oldest are gone"]
    return []


def clusters_made(requests: Iterable[Json]) -> list[Json]:
    """Every cluster a create made, whatever the answer said (RunPod's ledger: the log's
    `created`; a create answered 502 may have made one, which a count of 201s misses)."""
    return [
        r
        for r in requests
        if (r["method"], r["path"]) == ("POST", "/v2/clusters") and r.get("created")
    ]


def clusters_made_twice(
    requests: Iterable[Json], lists: Sequence[datetime] = (), grace: float = 0.0
) -> list[str]:
    """A gang's cluster is made once: its tag is one attempt of one Job, so a second
    cluster RunPod made for one gang tag (counted from its ledger, whatever the answer)
    is a duplicate (a re-run, if the first had finished), even if the heal deleted one
    since and the final snapshot shows one; unless it is explained as an instance's is
    (`duplicates`: an in-doubt create made again while the first was hidden from the
    list past the create grace)."""
    made: dict[str, list[Made]] = defaultdict(list)
    for r in clusters_made(requests):
        gang = ((r["body"] or {}).get("env") or {}).get(GANG_ENV)
        if gang:
            listed = _time(r["listed_from"]) if r.get("listed_from") else None
            at = _time(r.get("at") or _EPOCH)
            made[gang].append(Made(gang, r["created"], at, r["status"], listed))
    unexplained, _ = duplicates(made, lists, grace, "gang")
    counts = Counter(line.split(":", 1)[0].removeprefix("gang ") for line in unexplained)
    return [f"{n + 1} clusters made for gang {gang}" for gang, n in counts.items()]


def gangs_rerun(requests: Iterable[Json], succeeded: Mapping[str, datetime]) -> list[str]:
    """A gang whose rank 0 exited 0 has done its work: no cluster is made for its Job after
    that (by Job UID, the gang tag's first part: a re-run is a new attempt of the Job,
    under a new tag, which the per-tag count cannot see)."""
    return [
        f"Job {job} got cluster for gang {gang} at {made:%H:%M:%S.%f}, after its rank 0 "
        f"exited 0 at {succeeded[job]:%H:%M:%S.%f}"
        for r in clusters_made(requests)
        if (gang := ((r["body"] or {}).get("env") or {}).get(GANG_ENV))
        and (job := str(gang).partition("/")[0]) in succeeded
        and (made := _time(r["at"])) > succeeded[job]
    ]


def gang_ends_lost(
    succeeded_pods: Mapping[str, str], finished_as: Mapping[str, str], snapshot: Snapshot
) -> list[str]:
    """The pods of a gang whose rank 0 exited 0 end Succeeded, never Failed (a lost
    success: ClusterMemberFailed, and the Job runs the work again). `succeeded_pods`:
    pod UID to its Job's UID; `finished_as`: how each pod was first seen finished."""
    found = [
        f"pod {uid} of Job {job} (rank 0 exited 0) ended {finished_as[uid]}"
        for uid, job in sorted(succeeded_pods.items())
        if uid in finished_as and not finished_as[uid].startswith("Succeeded")
    ]
    return found + [
        f"pod {uid} of Job {job} (rank 0 exited 0) is still {phase(snapshot.pods[uid])}"
        for uid, job in sorted(succeeded_pods.items())
        if uid not in finished_as and uid in snapshot.pods and not deleting(snapshot.pods[uid])
    ]


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
    """What a row acted on as the simulators' logs name it: resource id, else pod UID."""
    if row.kind == "create-registry-auth":
        return row.kind, "*"  # the POST names no pod: counted as a whole
    by_id = row.kind in ("terminate", "delete-registry-auth", "delete-network-volume")
    subject = row.resource_id if by_id else row.pod_uid
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
        elif method == "POST" and path == "/v2/registries" and (status == 201 or status >= 500):
            effects[("create-registry-auth", "*")] += 1
        elif method == "DELETE" and (match := _REGISTRY_PATH.match(path)):
            effects[("delete-registry-auth", match["id"])] += status == 204
        elif method == "POST" and path == "/v2/network-volumes" and status == 201:
            # The volume's name ends with its claim's UID, the row's subject.
            claim = str((request["body"] or {}).get("name", "")).rpartition("-pvc-")[2]
            effects[("create-network-volume", claim)] += 1
        elif method == "DELETE" and (match := _VOLUME_PATH.match(path)):
            effects[("delete-network-volume", match["id"])] += status == 204
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


# --- creates, from RunPod's request log ------------------------------------------------


@dataclass(frozen=True)
class Made:
    """One instance a create request made."""

    pod_uid: str
    instance_id: str
    at: datetime
    status: int
    """What RunPod answered: 201, or a 5xx when the create failed after making it."""
    listed_from: datetime | None
    """When the list first showed it (the listing lag in force at the create)."""


def instances_made(requests: Iterable[Json]) -> dict[str, list[Made]]:
    """Every instance a create made, by pod UID, in the order made."""
    made: dict[str, list[Made]] = defaultdict(list)
    for r in requests:
        if r["method"] == "POST" and r["path"] == "/v2/pods" and r.get("created"):
            uid = ((r["body"] or {}).get("env") or {}).get(POD_UID_ENV, "?")
            listed = _time(r["listed_from"]) if r.get("listed_from") else None
            made[uid].append(Made(uid, r["created"], _time(r["at"]), r["status"], listed))
    return dict(made)


def list_times(requests: Iterable[Json]) -> list[datetime]:
    """When RunPod answered a list of its pods."""
    return [
        _time(r["at"])
        for r in requests
        if r["method"] == "GET" and r["path"] == "/v2/pods" and r["status"] == 200
    ]


def duplicates(
    made: Mapping[str, list[Made]], lists: Sequence[datetime], grace: float, kind: str = "pod"
) -> tuple[list[str], list[str]]:
    """(unexplained, explained) second instances of one pod.

    Only one fault explains one: the instance before it was made by a create whose answer
    was lost (a 5xx), the list the next create was decided on did not show it yet (the
    listing lag in force when it was made), and the writer waited its create grace
    first (docs/architecture.md §4: a create in doubt is tried again after the grace).
    Anything else (a lag with the answer received, a writer's lost rows, a hold on
    creates not kept: the hold lasts the create grace, and nothing makes the list catch
    up when it ends) is a duplicate the reconciler must not make. `made` is by pod UID,
    or by gang tag for clusters (`kind` "gang").
    """
    unexplained: list[str] = []
    explained: list[str] = []
    for uid, group in made.items():
        for before, after in pairwise(group):
            line = f"{kind} {uid}: {after.instance_id} made at {after.at:%H:%M:%S.%f} after " + (
                f"{before.instance_id} ({before.status} at {before.at:%H:%M:%S.%f})"
            )
            if _in_doubt_and_hidden(before, after, lists, grace):
                explained.append(f"{line}: in doubt and not listed yet")
            else:
                unexplained.append(line)
    return unexplained, explained


def _in_doubt_and_hidden(
    before: Made, after: Made, lists: Sequence[datetime], grace: float
) -> bool:
    """Whether `after` is the create of an in-doubt `before` tried again: its answer lost
    (a 5xx), the list `after` was decided on did not show it yet, and the create grace
    was waited first."""
    hidden = _hidden(before, _last_before(lists, after.at))
    waited = after.at - before.at >= timedelta(seconds=grace)
    return before.status >= 500 and hidden and waited


def reruns(
    made: Mapping[str, list[Made]],
    ended: Mapping[str, datetime],
    lists: Sequence[datetime],
    grace: float,
    ended_on: Mapping[str, str],
) -> tuple[list[str], list[str]]:
    """(unexplained, explained) instances made for a pod after its work ended (its
    process exited, its instance failed or vanished, or it was seen finished), even after
    the pod was deleted. `ended_on` names, by pod UID, the instance whose work the
    workload ended when that was the first end seen (not for a pod seen finished first).

    Only one fault explains one, the one that explains a duplicate: the ended instance
    was made by a create in doubt that no list showed yet, and this is the writer's
    create tried again after its grace (docs/architecture.md §4). The writer could not
    know of the work; the instance ran it all the same (a lag longer than the create
    grace, which the campaign's long lag acts out)."""
    unexplained: list[str] = []
    explained: list[str] = []
    for uid, group in made.items():
        if uid not in ended:
            continue
        for before, m in pairwise([None, *group]):
            if m is None or m.at <= ended[uid]:
                continue
            line = (
                f"pod {uid} got instance {m.instance_id} at {m.at:%H:%M:%S.%f}, after its "
                f"work ended at {ended[uid]:%H:%M:%S.%f}"
            )
            on = ended_on.get(uid)
            if (
                before is not None
                and before.instance_id == on
                and _in_doubt_and_hidden(before, m, lists, grace)
            ):
                explained.append(f"{line} on {on}: in doubt and not listed yet")
            else:
                where = f" on {on}" if on else " (seen finished)"
                unexplained.append(line + where + _made_before(before))
    return unexplained, explained


def _made_before(before: Made | None) -> str:
    """The pod's instance made before: what a reader needs to tell a lag from a bug."""
    if before is None:
        return "; no instance before it"
    listed = f", listed from {before.listed_from:%H:%M:%S.%f}" if before.listed_from else ""
    return f"; before it {before.instance_id} ({before.status} at {before.at:%H:%M:%S.%f}{listed})"


def _hidden(made: Made, listed_at: datetime | None) -> bool:
    if made.listed_from is None or listed_at is None:
        return False
    return listed_at < made.listed_from


def _last_before(times: Sequence[datetime], moment: datetime) -> datetime | None:
    earlier = [t for t in times if t <= moment]
    return max(earlier) if earlier else None


_EPOCH = "1970-01-01T00:00:00+00:00"


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# --- ticks ------------------------------------------------------------------------------


def tick_violations(result: TickResult, contended: bool) -> list[str]:
    """A clean tick that hung, a refusal with no other writer, an exit with no report."""
    if result.hung:
        return [f"tick hung past {result.seconds:.0f} s and was killed ({result.plan})"]
    if result.refused and not contended:
        return [f"tick refused with no other writer ({result.plan})"]
    if result.died or result.refused:
        return []
    if result.returncode not in (0, 1) or result.report is None:
        return [f"tick exited {result.returncode} without a report ({result.plan})"]
    return []


def hostile_namespace_violations(result: TickResult) -> list[str]:
    """A tick while the users' namespace carried out-of-range caps: it ends with its
    report, and none of its errors comes from the caps (saving one once failed every
    tick before anything was applied, deleted pods' instances billing on)."""
    if result.died or result.refused or result.hung:
        return []
    if result.report is None:
        return [f"tick exited {result.returncode} without a report under a hostile namespace"]
    errors = [e for e in result.report.get("errors") or () if "caps" in e or "runpod.io/" in e]
    return [f"a namespace's caps failed the tick: {errors}"] if errors else []


def steady_violations(plans: Sequence[Mapping[str, int]]) -> list[str]:
    """After convergence the plans must turn empty and stay empty (rows may trail)."""
    quiet = [not p for p in plans]
    if not any(quiet) or not all(quiet[quiet.index(True) :]):
        return [f"ticks after convergence planned {list(plans)}"]
    return []


def orphan_violations(orphans_gone: int | None, limit: int, left: Sequence[str]) -> list[str]:
    """Orphans must be gone within `limit` clean ticks (`orphans_gone`: the first tick
    after which none was left; None: never)."""
    if orphans_gone is None or orphans_gone > limit:
        return [f"orphans outlived {limit} clean ticks: {list(left)}"]
    return []


# --- tick by tick -----------------------------------------------------------------------


@dataclass
class History:
    """What the snapshots after each tick showed, accumulated over one run."""

    duplicate_pods: set[str] = field(default_factory=set)
    orphan_seconds: float = 0.0
    orphan_first_seen: dict[str, float] = field(default_factory=dict)
    longest_orphan: float = 0.0
    seen_finished: dict[str, datetime] = field(default_factory=dict)
    """When each pod was first seen Succeeded or Failed."""
    finished_as: dict[str, str] = field(default_factory=dict)
    """How each pod was first seen finished: its phase, and its reason if it has one."""

    def observe(self, snap: Snapshot, now: float, elapsed: float, at: datetime) -> None:
        self.duplicate_pods.update(snap.duplicates())
        self._follow_orphans(snap, now, elapsed)
        for uid, pod in snap.pods.items():
            if finished(pod):
                self.seen_finished.setdefault(uid, at)
                reason = (pod.get("status") or {}).get("reason")
                self.finished_as.setdefault(
                    uid, f"{phase(pod)} ({reason})" if reason else phase(pod)
                )

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
