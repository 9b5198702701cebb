"""The cluster's users and the fault injector of a campaign run, driven by one seeded RNG.

Users add batch and long-running pods, batch processes exit (through the RunPod
simulator's `/_sim/pods/{id}/exit`), pods are deleted (gracefully, or forced so that
their instance is orphaned), finished pods are cleaned up, and instances vanish or turn
ERROR behind the reconciler's back. Storage users make PersistentVolumeClaims of three
network-volume classes (the shipped WaitForFirstConsumer/Delete one, Immediate/Delete,
WaitForFirstConsumer/Retain), most with a pod that mounts the claim, grow bound claims,
and delete claims with their pods. Faults: RunPod 5xx and 429 storms on list, create
and delete, creates that succeed but answer 5xx, creates that hang (shorter than the
client's 30 s read timeout, which no flag lowers), listing lag, Kubernetes 409/500
answers on status patches, pod deletes, the pod list and events; a batch process that
exits while its terminal status patch is refused, its rows lost after the tick; a
lagging list while a writer dies after a create and short runs follow it; and a hostile
namespace: for one tick the users' namespace carries caps no tick may choke on.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from reconciler.core.contract import GANG_ENV
from reconciler.core.resources.clusters import CLUSTER_ID
from tests.chaos.world import (
    IMMEDIATE_CLASS,
    RETAIN_CLASS,
    SHIPPED_CLASS,
    VOLUME_DATACENTER,
    Json,
    SimHost,
    Snapshot,
    claim_manifest,
    csi_driver,
    deleting,
    finished,
    gang_manifest,
    pod_manifest,
    storage_classes,
)

MAX_LIVE_PODS = 7
# A lag longer than the create grace (tests/chaos/ticks.py: 3 s) makes in-doubt creates
# repeat: duplicates made beyond every grace, to heal.
LONG_LAG = 4.0
HANG_SECONDS = 2.5
# Shorter than the create grace, which the hold on creates after a writer died lasts:
# the instance of a writer killed after its create stays unlisted while the short runs
# after it take its Lease, and none of them may make it again. The hold ends on its own:
# nothing makes the list catch up.
CHAIN_LAG = 2.5
# How often a gang whose rank 0 exited 0 then loses a member, before a tick read it.
MEMBER_LOST_AFTER_SUCCESS = 0.5
CHAIN_FAULT = "lagging-list-chained-successors"
HOSTILE_FAULT = "hostile-namespace"
HOSTILE_CAPS = {"runpod.io/max-instances": "9" * 31, "runpod.io/max-hourly-spend": "NaN\n\x1b[2J"}
"""A cap no database integer holds (it once failed every tick) and a NaN with a newline
and an escape sequence."""
TERMINAL_FAULT = "refused-terminal-status"
ABANDON_FAULT = "claim-deleted-while-provisioning"
GANG_DONE_FAULT = "gang-done-refused-status"
BITES = (CHAIN_FAULT, TERMINAL_FAULT, ABANDON_FAULT, GANG_DONE_FAULT)
"""Faults that need a state to bite: counted apart when they met it."""

# Which workload event makes an armed crash point likely to be reached this tick.
STEER = {
    "after-intent": "add",
    "after-create": "add",
    "after-id-write": "add",
    "after-terminating": "end",
    "after-delete": "end",
    "after-status-patch": "add",
    "after-finalize": "delete",
    "after-registry-intent": "add-private",
    "after-registry-create": "add-private",
    "after-registry-unused": "delete-private",
    "after-registry-delete": "delete-private",
    "after-cluster-intent": "add-gang",
    "after-cluster-create": "add-gang",
    "after-cluster-deleting": "end-gang",
    "after-cluster-delete": "end-gang",
    "after-volume-intent": "add-claim",
    "after-volume-create": "add-claim",
    "after-volume-unused": "delete-claim",
    "after-volume-delete": "delete-claim",
}
GANG_SIZE = 2
MAX_LIVE_CLAIMS = 5
CLASSES = (SHIPPED_CLASS, IMMEDIATE_CLASS, RETAIN_CLASS)
PRIVATE_SHARE = 0.3
"""Of the pods added unsteered, those with a private image (a registry credential each)."""


@dataclass
class Workload:
    host: SimHost
    namespace: str
    node: str
    rng: random.Random
    uid_by_name: dict[str, str] = field(default_factory=dict)
    batch: set[str] = field(default_factory=set)
    private: set[str] = field(default_factory=set)
    """Names of the pods whose image is pulled with a registry credential."""
    faults: Counter[str] = field(default_factory=Counter)
    bites: Counter[str] = field(default_factory=Counter)
    """Of `BITES`, how many met their state (a running batch process; a writer that died
    after a create)."""
    ended: dict[str, datetime] = field(default_factory=dict)
    """When each pod's work ended by our hand: its process exited, its instance failed
    or vanished (the first time; by pod UID)."""
    ended_on: dict[str, str] = field(default_factory=dict)
    """The instance each of those ended on (by pod UID): one no list showed yet, made by
    a create whose answer was lost, may be made again after the create grace."""
    lose_rows: bool = False
    """The coming tick's rows are to be lost after it (the database deleted)."""
    hostile: bool = False
    """The users' namespace carries HOSTILE_CAPS until the next round (or the settle)."""
    gangs: list[str] = field(default_factory=list)
    """Names of the Indexed Jobs run as clusters that were not deleted yet."""
    gangs_succeeded: dict[str, datetime] = field(default_factory=dict)
    """When the rank 0 of a gang of each Job (by UID) exited 0: its work is done."""
    succeeded_pods: dict[str, str] = field(default_factory=dict)
    """The pods (UID to Job UID) of those gangs: each must end Succeeded."""
    ended_clusters: set[str] = field(default_factory=set)
    """Clusters whose gang we ended: rank 0 exited by our hand (a member runs on after
    its exit), or a member failed."""
    _snap: Snapshot | None = None
    _next: int = 0

    # --- users -----------------------------------------------------------------------

    def add_pod(
        self, snap: Snapshot | None = None, private: bool | None = None, claim: str | None = None
    ) -> None:
        name = f"p{self._next:03d}"
        self._next += 1
        is_batch = self.rng.random() < 0.5
        if private is None:
            private = claim is None and self.rng.random() < PRIVATE_SHARE
        secret = f"pull-{name}" if private else None
        if secret is not None:
            self.host.put_pull_secret(self.namespace, secret, f"pw-{name}")
            self.private.add(name)
        manifest = pod_manifest(self.namespace, name, self.node, is_batch, secret, claim)
        pod = self.host.create_pod(manifest)
        self.uid_by_name[name] = pod["metadata"]["uid"]
        if is_batch:
            self.batch.add(pod["metadata"]["uid"])

    def add_claim(self, snap: Snapshot, storage_class: str | None = None) -> None:
        """A claim of one of the network-volume classes, with a pod mounting it (always
        for WaitForFirstConsumer: nothing is provisioned before its first consumer)."""
        live = [c for c in snap.claims.values() if not c["metadata"].get("deletionTimestamp")]
        if len(live) >= MAX_LIVE_CLAIMS:
            self._delete_claim(snap)
            return
        room = self.keep_bounded(snap)
        storage_class = storage_class or (self.rng.choice(CLASSES) if room else IMMEDIATE_CLASS)
        name = f"c{self._next:03d}"
        self._next += 1
        size = f"{self.rng.randint(10, 30)}Gi"
        self.host.put_object(
            "persistentvolumeclaims", claim_manifest(self.namespace, name, storage_class, size)
        )
        if room and (storage_class != IMMEDIATE_CLASS or self.rng.random() < 0.5):
            self.add_pod(claim=name)

    def _delete_claim(self, snap: Snapshot) -> None:
        """A user deletes a claim and the pods that mount it (the claim goes once they
        have ended: pvc-protection); a bound claim of a Delete class nobody mounts is
        chosen first, its volume being deleted in the coming tick."""
        live = [c for c in snap.claims.values() if not c["metadata"].get("deletionTimestamp")]
        if not live:
            self.add_claim(snap, IMMEDIATE_CLASS)  # something to delete next time
            return
        mounting = {
            name
            for pod in snap.pods.values()
            if snap.live(pod["metadata"]["uid"])
            for name in _claims_of(pod)
        }
        ready = [
            c
            for c in live
            if (c.get("status") or {}).get("phase") == "Bound"
            and c["spec"]["storageClassName"] != RETAIN_CLASS
            and c["metadata"]["name"] not in mounting
        ]
        claim = self.rng.choice(ready or live)
        name = claim["metadata"]["name"]
        for pod in snap.pods.values():
            if name in _claims_of(pod) and not deleting(pod):
                self.host.delete_pod(self.namespace, pod["metadata"]["name"], 30)
        self.host.delete_object("persistentvolumeclaims", self.namespace, name)

    def abandon_claim(self, snap: Snapshot) -> None:
        """A user deletes a claim that is not bound yet, with its pods; one whose volume
        RunPod made already is chosen first: it bites then, as after a writer died
        between the volume's POST and its PV (the provisioner must not leak it)."""
        pending = [
            c
            for c in snap.claims.values()
            if (c.get("status") or {}).get("phase") != "Bound"
            and not c["metadata"].get("deletionTimestamp")
        ]
        made = snap.our_volumes()
        in_the_gap = [c for c in pending if c["metadata"]["uid"] in made]
        if not pending:
            return
        claim = self.rng.choice(in_the_gap or pending)
        name = claim["metadata"]["name"]
        for pod in snap.pods.values():
            if name in _claims_of(pod) and not deleting(pod):
                self.host.delete_pod(self.namespace, pod["metadata"]["name"], 30)
        self.host.delete_object("persistentvolumeclaims", self.namespace, name)
        self.faults[ABANDON_FAULT] += 1
        self.bites[ABANDON_FAULT] += bool(in_the_gap)

    def _grow_claim(self, snap: Snapshot) -> None:
        """A bound claim asks for 5 GiB more: its volume grows."""
        bound = [
            c
            for c in snap.claims.values()
            if (c.get("status") or {}).get("phase") == "Bound"
            and not c["metadata"].get("deletionTimestamp")
        ]
        if not bound:
            return
        claim = self.rng.choice(bound)
        asked = int(claim["spec"]["resources"]["requests"]["storage"].removesuffix("Gi"))
        patch = {"spec": {"resources": {"requests": {"storage": f"{asked + 5}Gi"}}}}
        self.host.patch_object(
            "persistentvolumeclaims", self.namespace, claim["metadata"]["name"], patch
        )

    def add_storage(self) -> None:
        """The StorageClasses and the CSIDriver (cluster-wide: the same for every run)."""
        for storage_class in storage_classes():
            self.host.put_object("storageclasses", storage_class)
        self.host.put_object("csidrivers", csi_driver())

    def foreign_volumes(self) -> set[str]:
        """Network volumes in the account that are not ours, one named like ours but for
        another owner."""
        names = ["datasets", "runpod-reconciler-00000000-pvc-" + "0" * 36]
        return {
            self.host.runpod(
                "POST", "network-volumes", {"name": n, "size": 10, "dataCenter": VOLUME_DATACENTER}
            )["id"]
            for n in names
        }

    def add_gang(self, snap: Snapshot | None = None) -> None:
        """An Indexed Job whose pods run as one Instant Cluster."""
        name = f"g{self._next:03d}"
        self._next += 1
        job = self.host.create_job(gang_manifest(self.namespace, name, self.node, GANG_SIZE))
        self.gangs.append(name)
        for pod in self.host.pods():  # made by the Job controller as the Job was
            owners = pod["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == job["metadata"]["uid"] for ref in owners):
                self.uid_by_name[pod["metadata"]["name"]] = pod["metadata"]["uid"]

    def _end_gang(self, snap: Snapshot) -> None:
        """A gang's cluster goes: its Job is deleted, one of its members fails (the gang
        fails, and the Job makes it again), or its rank 0's process exits: 0, the gang
        succeeded (its pods end Succeeded and the Job completes: it must never run
        again), else it failed as a member does."""
        running = self._running_gangs(snap)
        if not running or not self.gangs:
            self.add_gang()  # something to end next time
            return
        roll = self.rng.random()
        if roll < 1 / 3:
            name = self.gangs.pop(self.rng.randrange(len(self.gangs)))
            self.host.delete_job(self.namespace, name)
            return
        members, pods = self.rng.choice(running)
        if roll < 2 / 3:
            self.host.runpod("POST", f"pods/{members[0]['id']}/fail", missing_ok=True)
            # The gang failed here: nothing later in this round (a fault's rank 0 exit)
            # may end it again, as if it had succeeded.
            self.ended_clusters.add(members[0]["cluster"]["id"])
            self.faults["cluster-member-error"] += 1
            return
        self._exit_rank_0(members, pods, self.rng.choice([0, 0, 1]))

    def _running_gangs(self, snap: Snapshot) -> list[tuple[list[Json], list[str]]]:
        """(members, pod UIDs) of each cluster whose members all run and that the gang's
        live pods run on (their `runpod.io/cluster-id`): a duplicate the heal is about to
        delete is none of the gang's work."""
        found = []
        for clusters in snap.clusters.values():
            for cluster_id, members in sorted(clusters.items()):
                pods = [
                    uid
                    for uid, pod in sorted(snap.pods.items())
                    if snap.live(uid)
                    and ((pod["metadata"].get("annotations") or {}).get(CLUSTER_ID) == cluster_id)
                ]
                ended = cluster_id in self.ended_clusters
                if pods and not ended and all(m["status"] == "RUNNING" for m in members):
                    found.append((members, pods))
        return found

    def _exit_rank_0(self, members: list[Json], pods: list[str], code: int) -> bool:
        """Rank 0's process exits with `code`: the gang's end. True if it was there."""
        rank_0 = [m for m in members if (m.get("cluster") or {}).get("rank") == 0]
        if not rank_0:
            return False
        answer = self.host.runpod_exit(rank_0[0]["id"], code)
        if not answer:
            return False
        self.ended_clusters.add(rank_0[0]["cluster"]["id"])
        self.faults[f"gang-rank-0-exit-{'0' if code == 0 else 'non-0'}"] += 1
        if code == 0:
            job = str((rank_0[0].get("env") or {}).get(GANG_ENV, "?")).partition("/")[0]
            self.gangs_succeeded.setdefault(job, datetime.now(UTC))
            for uid in pods:
                self.succeeded_pods[uid] = job
            if self.rng.random() < MEMBER_LOST_AFTER_SUCCESS:
                self._lose_a_member(members, rank_0[0])
        return True

    def _lose_a_member(self, members: list[Json], rank_0: Json) -> None:
        """After rank 0 exited 0, before a tick read it: a member's host fails (rank 0's
        own too: its log stays readable) or a member other than rank 0 vanishes. The
        gang's success must survive it."""
        if self.rng.random() < 0.5:
            victim = self.rng.choice(members)
            self.host.runpod("POST", f"pods/{victim['id']}/fail", missing_ok=True)
            self.faults["gang-member-error-after-success"] += 1
            return
        others = [m for m in members if m["id"] != rank_0["id"]]
        if others:
            self.host.runpod("DELETE", f"pods/{self.rng.choice(others)['id']}", missing_ok=True)
            self.faults["gang-member-vanished-after-success"] += 1

    def step(self, snap: Snapshot, steer: str | None) -> None:
        """One round of user activity; `steer` makes one kind of event certain."""
        self._snap = snap
        self.calm_namespace()
        events: dict[str, Callable[[Snapshot], None]] = {
            "add": self.add_pod,
            "add-gang": self.add_gang,
            "end-gang": self._end_gang,
            "add-private": lambda snap: self.add_pod(snap, private=True),
            "add-claim": lambda snap: self.add_claim(
                snap, IMMEDIATE_CLASS if steer == "add-claim" else None
            ),
            "delete-claim": self._delete_claim,
            "abandon-claim": self.abandon_claim,
            "grow-claim": self._grow_claim,
            "end": self._end_one,
            "delete-private": self._delete_private,
            "delete": self._delete_one,
            "force": self._force_delete_one,
            "cleanup": self._cleanup_finished,
            "vanish": self._vanish_one,
            "error": self._error_one,
        }
        odds = {
            "add": 0.45,
            "add-gang": 0.08,
            "end-gang": 0.08,
            "add-private": 0.0,
            "delete-private": 0.0,
            "add-claim": 0.12,
            "delete-claim": 0.08,
            "abandon-claim": 0.04,
            "grow-claim": 0.1,
            "end": 0.35,
            "delete": 0.25,
            "force": 0.08,
            "cleanup": 0.2,
            "vanish": 0.04,
            "error": 0.04,
        }
        room = self.keep_bounded(snap)
        for name, chance in odds.items():
            if name in ("add", "add-gang") and not room and steer != name:
                continue
            if name == steer or self.rng.random() < chance:
                events[name](snap)

    def _live(self, snap: Snapshot) -> list[Json]:
        return [snap.pods[uid] for uid in sorted(snap.pods) if snap.live(uid)]

    def _running_instance(self, snap: Snapshot, batch: bool) -> Json | None:
        """A running instance of a live pod whose work we did not end since `snap`."""
        choices = [
            i
            for uid in sorted(snap.owned)
            if snap.live(uid) and (uid in self.batch) == batch and uid not in self.ended
            for i in snap.owned[uid]
            if i["status"] == "RUNNING"
        ]
        return self.rng.choice(choices) if choices else None

    def _end_one(self, snap: Snapshot) -> None:
        """A batch process exits (its pod should end), else a pod is deleted."""
        instance = self._running_instance(snap, batch=True)
        if instance is None:
            self._delete_one(snap)
            return
        self._exit(instance, self.rng.choice([0, 0, 1, 3]))

    def _exit(self, instance: Json, code: int) -> None:
        self.host.runpod("POST", f"pods/{instance['id']}/exit", {"code": code}, missing_ok=True)
        self._ended(instance)

    def _ended(self, instance: Json) -> None:
        uid = (instance.get("env") or {}).get("RUNPOD_RECONCILER_POD_UID", "?")
        self.ended.setdefault(uid, datetime.now(UTC))
        self.ended_on.setdefault(uid, instance["id"])

    def _delete_one(self, snap: Snapshot, grace: int = 30) -> None:
        live = self._live(snap)
        if len(live) < 2:
            self.add_pod()  # keep something around to delete next time
        if live:
            pod = self.rng.choice(live)
            self.host.delete_pod(self.namespace, pod["metadata"]["name"], grace)

    def _delete_private(self, snap: Snapshot) -> None:
        """A pod whose instance pulled with a credential is deleted: its instance goes,
        and with it the last use of the credential."""
        running = [
            pod
            for pod in self._live(snap)
            if pod["metadata"]["name"] in self.private and snap.owned.get(pod["metadata"]["uid"])
        ]
        if not running:
            self.add_pod(private=True)  # something to delete next time
            return
        pod = self.rng.choice(running)
        self.host.delete_pod(self.namespace, pod["metadata"]["name"], 30)

    def _force_delete_one(self, snap: Snapshot) -> None:
        self._delete_one(snap, grace=0)

    def _cleanup_finished(self, snap: Snapshot) -> None:
        done = [p for p in snap.pods.values() if finished(p) and not deleting(p)]
        if done:
            self.host.delete_pod(self.namespace, self.rng.choice(done)["metadata"]["name"], 30)

    def _vanish_one(self, snap: Snapshot) -> None:
        """A running pod's instance is deleted behind the reconciler's back: one its pod
        names. An instance no list showed yet, of a create whose answer was lost, is
        created again once the grace is over (docs/architecture.md §4): nothing could
        tell it ever existed, so that case is left out."""
        instance = self._running_instance(snap, batch=self.rng.random() < 0.5)
        if instance is not None and _named_by_its_pod(snap, instance):
            self.host.runpod("DELETE", f"pods/{instance['id']}", missing_ok=True)
            self._ended(instance)
            self.faults["instance-vanished"] += 1

    def _error_one(self, snap: Snapshot) -> None:
        instance = self._running_instance(snap, batch=False)
        if instance is not None:
            self.host.runpod("POST", f"pods/{instance['id']}/fail", missing_ok=True)
            self._ended(instance)
            self.faults["instance-error"] += 1

    def keep_bounded(self, snap: Snapshot) -> bool:
        """Whether there is room for another pod."""
        return len(self._live(snap)) < MAX_LIVE_PODS

    # --- faults ----------------------------------------------------------------------

    def inject_fault(self) -> str:
        """One fault for the coming tick; returns its name."""
        name = self.rng.choice(sorted(FAULTS))
        FAULTS[name](self)
        self.faults[name] += 1
        return name

    def calm_namespace(self) -> None:
        """Take a hostile namespace's caps off again."""
        if self.hostile:
            self.host.annotate_namespace(self.namespace, {})
            self.hostile = False

    def lag(self, seconds: float) -> None:
        self.host.runpod("POST", "listing-lag", {"seconds": seconds})

    def foreign_instances(self) -> set[str]:
        """Instances in the account that are not ours, one of them dressed up like ours."""
        some_uid = next(iter(self.uid_by_name.values()), "none")
        bodies = [
            {"name": f"{self.namespace}-p000-{some_uid[:8]}"},
            {
                "name": "look-alike",
                "env": {
                    "RUNPOD_RECONCILER_OWNER": f"other/{self.node}",
                    "RUNPOD_RECONCILER_POD_UID": some_uid,
                },
            },
            {"name": "half-tagged", "env": {"RUNPOD_RECONCILER_POD_UID": some_uid}},
        ]
        return {self.host.runpod("POST", "pods", body)["id"] for body in bodies}


def _claims_of(pod: Json) -> set[str]:
    return {
        (v.get("persistentVolumeClaim") or {}).get("claimName", "")
        for v in (pod.get("spec") or {}).get("volumes") or ()
    } - {""}


def _named_by_its_pod(snap: Snapshot, instance: Json) -> bool:
    pod = snap.pods.get((instance.get("env") or {}).get("RUNPOD_RECONCILER_POD_UID", ""))
    annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get("runpod.io/pod-id") == instance["id"])


def _runpod_fault(method: str, path: str, status: int, count: int) -> Callable[[Workload], None]:
    def inject(w: Workload) -> None:
        w.host.runpod(
            "POST",
            "faults",
            {"method": method, "path": path, "status": status, "count": count, "retryAfter": 1},
        )

    return inject


def _kube_fault(method: str, path: str, status: int, count: int) -> Callable[[Workload], None]:
    def inject(w: Workload) -> None:
        w.host.kube_fault(method, path, status, count)

    return inject


def _create_then(kind: str, **extra: float) -> Callable[[Workload], None]:
    def inject(w: Workload) -> None:
        w.host.runpod("POST", "faults", {"kind": kind, "count": 1, **extra})

    return inject


def _refused_terminal_status(w: Workload) -> None:
    """A batch process exits, the status patch that records it is refused, and the rows
    are lost after the tick: only the pod can say the work is done (or its instance)."""
    instance = w._running_instance(w._snap, batch=True) if w._snap is not None else None
    if instance is not None:
        w._exit(instance, 1)
        w.bites[TERMINAL_FAULT] += 1
    w.host.kube_fault("PATCH", "/api/v1/namespaces/*/pods/*/status", 409, 3)
    w.lose_rows = True


def _gang_done_refused_status(w: Workload) -> None:
    """A gang's rank 0 exits 0, the status patches that record its pods' end are refused,
    and the rows are lost after the tick: only the pods (or RunPod) can say the gang
    succeeded, and its Job must never get a second cluster."""
    running = w._running_gangs(w._snap) if w._snap is not None else []
    if running and w._exit_rank_0(*w.rng.choice(running), code=0):
        w.bites[GANG_DONE_FAULT] += 1
    w.host.kube_fault("PATCH", "/api/v1/namespaces/*/pods/*/status", 409, 3)
    w.lose_rows = True


def _hostile_namespace(w: Workload) -> None:
    """The users' namespace gets HOSTILE_CAPS for one tick: its creates wait with a
    reason, and nothing else in the tick (terminations first) may wait for them."""
    w.host.annotate_namespace(w.namespace, HOSTILE_CAPS)
    w.hostile = True


def _lagging_list(w: Workload) -> None:
    """The campaign arms the tick at after-create and runs short successors after it."""
    w.lag(CHAIN_LAG)


FAULTS: dict[str, Callable[[Workload], None]] = {
    "runpod-list-503": _runpod_fault("GET", "/v2/pods", 503, 1),
    "runpod-list-429-storm": _runpod_fault("GET", "/v2/pods", 429, 2),
    "runpod-create-429-storm": _runpod_fault("POST", "/v2/pods", 429, 3),
    "runpod-create-500": _runpod_fault("POST", "/v2/pods", 500, 1),
    "runpod-delete-500": _runpod_fault("DELETE", "/v2/pods/*", 500, 2),
    "runpod-delete-429-storm": _runpod_fault("DELETE", "/v2/pods/*", 429, 3),
    "create-then-500": _create_then("create-then-fail", status=500),
    "create-then-502": _create_then("create-then-fail", status=502),
    "create-then-hang": _create_then("create-then-hang", seconds=HANG_SECONDS),
    "listing-lag-short": lambda w: w.lag(0.4),
    "listing-lag-long": lambda w: w.lag(LONG_LAG),
    "listing-lag-off": lambda w: w.lag(0),
    "kube-status-409": _kube_fault("PATCH", "/api/v1/namespaces/*/pods/*/status", 409, 2),
    "kube-status-500": _kube_fault("PATCH", "/api/v1/namespaces/*/pods/*/status", 500, 1),
    "kube-pod-delete-409": _kube_fault("DELETE", "/api/v1/namespaces/*/pods/*", 409, 1),
    "kube-pod-list-500": _kube_fault("GET", "/api/v1/pods", 500, 1),
    "kube-events-500": _kube_fault("POST", "/api/v1/namespaces/*/events", 500, 2),
    TERMINAL_FAULT: _refused_terminal_status,
    GANG_DONE_FAULT: _gang_done_refused_status,
    CHAIN_FAULT: _lagging_list,
    HOSTILE_FAULT: _hostile_namespace,
}
