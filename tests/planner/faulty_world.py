"""The planner's test world with the faults of the real ones: a call whose answer is lost
(it took effect, the executor does not know) or that is refused (it did not), a RunPod
list that shows new instances only after a lag, instances whose env (and so our tags)
was replaced, mapping rows lost (a deleted database), batch processes that end, and
ticks a few seconds apart.

Each action is carried out as `reconciler.runtime.tick.executor` carries it out, failure
included: a create's intent row is saved before the call and its instance id only after
it; a terminate's row before the DELETE; a status patch's row only after the patch; a
terminate that follows the pod's end is not sent when that status patch failed. (The
loop's executor: a `--once` run's writing of new instance ids onto their pods is not
modelled.)
The world remembers what the planner cannot always see (which pod each instance was made
for, whose process ended) so that properties can be stated across ticks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum

from reconciler.core.actions import (
    Action,
    Create,
    FinalizePod,
    PatchMetadata,
    PatchStatus,
    RestoreTags,
    Terminate,
)
from reconciler.core.contract import OWNER_ENV
from reconciler.core.domain import Instance, InstanceStatus
from reconciler.core.mapping import MappingState
from reconciler.core.planner import Observation
from reconciler.core.pods import podinfo
from reconciler.core.reasons import PodReason
from reconciler.core.translate.container import is_batch
from tests.planner.world import OWNER, World, instance


class Answer(Enum):
    OK = "ok"
    LOST = "lost"
    """The call took effect; its answer never came (a timeout, a 5xx after the fact)."""
    REFUSED = "refused"
    """The call took no effect (a 409 from the API server, a 400 for want of stock)."""


class Fault(Enum):
    """What the world does between two ticks."""

    NONE = "none"
    EXIT = "exit"
    """A batch pod's process ends (code 0 or 1): its instance stops."""
    DROP_TAGS = "drop-tags"
    """Someone replaces an instance's env in RunPod's console: our tags go."""
    LOSE_ROWS = "lose-rows"
    """The database is deleted."""


@dataclass(frozen=True)
class Step:
    """One tick: how long after the last it starts, what happened meanwhile, and the
    answers its calls get, in order (OK once these run out)."""

    seconds: int
    fault: Fault = Fault.NONE
    target: int = 0
    """Which instance the fault picks, counted round the eligible ones."""
    exit_code: int = 0
    answers: tuple[Answer, ...] = ()


@dataclass
class FaultyWorld(World):
    lag: timedelta = timedelta(0)
    """How long a new instance stays out of RunPod's list."""
    listed_at: dict[str, datetime] = field(default_factory=dict)
    made_for: dict[str, str] = field(default_factory=dict)
    """Instance id -> the UID of the pod it was made for, whatever its tags now say."""
    rows_lost_at: list[datetime] = field(default_factory=list)
    ended: set[str] = field(default_factory=set)
    """UIDs of pods that showed a final phase."""
    exited: dict[str, str] = field(default_factory=dict)
    """Pod UID -> the instance whose process ended (its work is done)."""
    _answers: Iterator[Answer] = field(default_factory=lambda: iter(()))
    _status_failed: set[str] = field(default_factory=set)
    """Pods whose status patch failed this tick (the executor's memory of one run)."""

    def remember_ours(self) -> FaultyWorld:
        """Note which pod each of our instances was made for."""
        for inst in self.instances.values():
            if inst.owner == OWNER and inst.pod_uid is not None:
                self.made_for[inst.id] = inst.pod_uid
        return self

    # --- observing -------------------------------------------------------------------

    def listed(self, inst: Instance) -> bool:
        return self.listed_at.get(inst.id, self.now) <= self.now

    def observe(self) -> Observation:
        """RunPod's list, plus what the engine asks for by id: the instance a running
        row maps for a live pod (only a 404 proves it gone)."""
        seen = super().observe()
        asked = {
            row.instance_id
            for row in self.rows.values()
            if row.state is MappingState.RUNNING and row.instance_id and row.pod_uid in self.pods
        }
        shown = [i for i in seen.instances if self.listed(i) or i.id in asked]
        return dataclasses.replace(seen, instances=shown)

    def note_ended(self) -> None:
        """Pods that show a final phase. (A finished row alone does not count: a pod
        that was failed before anything ran for it may run once its row is lost.)"""
        self.ended |= {uid for uid, p in self.pods.items() if podinfo.is_finished(p)}

    def live_instances_for(self, uid: str) -> list[Instance]:
        return [i for i in self.instances.values() if self.made_for.get(i.id) == uid]

    def hidden_from_everyone(self, inst: Instance) -> bool:
        """Nothing the planner reads can tell that `inst` exists: out of the list, its
        pod's annotation does not name it, and the rows were lost since it was made."""
        pod = self.pods.get(self.made_for.get(inst.id, ""))
        annotated = podinfo.pod_annotations(pod).get(podinfo.POD_ID_ANNOTATION) if pod else None
        lost_since = any(inst.created_at is None or t >= inst.created_at for t in self.rows_lost_at)
        return not self.listed(inst) and annotated != inst.id and lost_since

    # --- between ticks ---------------------------------------------------------------

    def before_tick(self, step: Step) -> None:
        self.now += timedelta(seconds=step.seconds)
        self._answers = iter(step.answers)
        self._status_failed = set()
        match step.fault:
            case Fault.EXIT:
                running = [
                    i
                    for i in self.instances.values()
                    if i.status is InstanceStatus.RUNNING
                    and (p := self.pods.get(self.made_for.get(i.id, ""))) is not None
                    and is_batch(p)
                ]
                if running:
                    self._exit(running[step.target % len(running)], step.exit_code)
            case Fault.DROP_TAGS:
                tagged = [i for i in self.instances.values() if OWNER_ENV in i.env]
                if tagged:
                    dropped = tagged[step.target % len(tagged)]
                    self.instances[dropped.id] = dataclasses.replace(dropped, env={"USER": "x"})
            case Fault.LOSE_ROWS:
                self.rows.clear()
                self.rows_lost_at.append(self.now)
            case Fault.NONE:
                pass

    def _exit(self, inst: Instance, code: int) -> None:
        self.instances[inst.id] = dataclasses.replace(
            inst, status=InstanceStatus.EXITED, runtime=None, cost_per_hr=0.0
        )
        self.exit_codes[inst.id] = code
        self.exited[self.made_for[inst.id]] = inst.id

    # --- carrying out a plan ---------------------------------------------------------

    def _answer(self) -> Answer:
        return next(self._answers, Answer.OK)

    def _apply(self, action: Action) -> None:
        match action:
            case Create():
                self._create(action)
            case Terminate(instance_id=iid, row=row, pod=ref) if (
                action.after_pod_end and ref is not None and ref.uid in self._status_failed
            ):
                pass  # the pod's end is not on the pod: the stopped instance waits
            case Terminate(instance_id=iid, row=row):
                if row is not None:
                    self.rows[row.pod_uid] = row  # committed before the DELETE
                if self._answer() is not Answer.REFUSED:
                    self.instances.pop(iid, None)
            case PatchStatus(row=row) | FinalizePod(row=row):
                answer = self._answer()
                if answer is not Answer.OK and isinstance(action, PatchStatus):
                    self._status_failed.add(action.pod.uid)
                if answer is Answer.REFUSED:
                    return
                kept = dict(self.rows)
                super()._apply(action)
                if answer is Answer.LOST:  # the pod changed; the row was never saved
                    self.rows = kept
            case PatchMetadata() | RestoreTags():
                if self._answer() is not Answer.REFUSED:
                    super()._apply(action)
            case _:
                super()._apply(action)

    def _create(self, action: Create) -> None:
        uid, intent = action.pod.uid, action.row
        answer = self._answer()
        if answer is Answer.REFUSED:  # a 400 on every candidate: no stock
            self.rows[uid] = intent.changed(
                state=MappingState.PENDING,
                attempt_id=None,
                reason=PodReason.CAPACITY_UNAVAILABLE,
                last_error="no GPU type that fits this pod could be created",
                updated_at=self.now,
            )
            return
        request = action.candidates[0]
        made = dataclasses.replace(
            instance(uid, created=self.now), name=request.name, env=dict(request.env)
        )
        self.instances[made.id] = made
        self.listed_at[made.id] = self.now + self.lag
        self.made_for[made.id] = uid
        self.rows[uid] = (
            intent  # in doubt: the intent stays, and later ticks look for the instance
            if answer is Answer.LOST
            else intent.changed(state=MappingState.RUNNING, instance_id=made.id)
        )
