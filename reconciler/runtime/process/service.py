"""The loop mode: `reconciler sync` runs until SIGTERM or SIGINT, serving /healthz, /readyz
and /metrics meanwhile.

While this replica leads (always, without `--leader-elect`) it holds the database's
writer lock and runs three things on an APScheduler: the tick every `interval` seconds,
the node heartbeat every `heartbeat_interval` seconds, independent of the tick so the
node stays Ready between ticks, and the pod watches, which ask for an early tick when a
pod changes. A standby replica only tries for the leader Lease: it takes no lock and
writes nothing. SIGTERM lets a running tick finish, then releases the lock and the Lease.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler

from reconciler.adapters.kube.cluster import FALLBACK_NAMESPACE
from reconciler.adapters.kube.errors import KubeError
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.transport import MIB
from reconciler.core.actions import Create
from reconciler.core.config import Settings
from reconciler.core.plan.admission import create_slots
from reconciler.runtime.kubelet.endpoint import start_endpoint
from reconciler.runtime.process.debounce import Debouncer
from reconciler.runtime.process.health import Health, HealthServer
from reconciler.runtime.process.leader import (
    DEFAULT_LEASE_NAME,
    DEFAULT_LEASE_SECONDS,
    Attempt,
    Change,
    LeaderElector,
)
from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.process.watch import (
    PENDING_SELECTOR,
    ChangeFilter,
    PodWatch,
    may_be_offloaded,
    node_selector,
)
from reconciler.runtime.process.wiring import (
    Connections,
    LockHeld,
    Reconciler,
    RunMode,
    connect,
    holding,
    holding_writer_lease,
)
from reconciler.runtime.process.writer_lease import WriterHeld, identity
from reconciler.runtime.services.manager import attach_tunnels
from reconciler.runtime.tick.engine import Engine, TickReport, utcnow
from reconciler.runtime.tick.executor import WriterLost

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopOptions:
    interval: float = 15.0
    """Seconds between periodic ticks: the safety net behind the watch."""
    heartbeat_interval: float = 10.0
    """Seconds between node heartbeats (the kubelet renews its Lease every 10 s)."""
    health_address: str = ":8080"
    watch: bool = True
    """Watch pods and tick early when one changes."""
    leader_elect: bool = False
    leader_namespace: str = FALLBACK_NAMESPACE
    lease_name: str = DEFAULT_LEASE_NAME
    lease_seconds: int = DEFAULT_LEASE_SECONDS


class LeadershipLost(RuntimeError):
    """Another replica leads now. The process exits, and restarts as a standby: simpler
    and safer than unwinding a leader's jobs, lock and watches in place."""


def run_loop(settings: Settings, conn: Connections, options: LoopOptions) -> None:
    """Run until told to stop; raises LockHeld or LeadershipLost when it cannot go on."""
    metrics = Metrics()
    health = Health(options.interval, time.monotonic, metrics)
    server = HealthServer(options.health_address, health).start()
    log.info("serving /healthz, /readyz and /metrics on port %d", server.port)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; finishing the tick in progress", signal.Signals(signum).name)
        stop.set()

    previous = {
        signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        with (
            connect(
                settings,
                conn,
                RunMode.LOOP,
                on_runpod_response=metrics.runpod_response,
                after_tick=health.record,
            ) as parts,
            RunPodClient(
                conn.runpod_api_key,
                conn.runpod_url,
                on_response=metrics.runpod_response,
                max_answer_bytes=settings.caps.runpod_max_answer_mib * MIB,
            ) as logs_runpod,
        ):
            replica = Replica(parts, health, options, stop)
            engine = parts.engine
            kubelet = start_endpoint(
                engine.settings,
                engine.kube,
                engine.store,
                logs_runpod,
                engine.clock,
                lambda: replica.leading,
                options.leader_namespace,
                usage=engine.usage.usage,
                listed=engine.ssh_addresses.of,
            )
            tunnels = attach_tunnels(engine, background=True)
            try:
                replica.run()
            finally:
                tunnels.close()
                if kubelet is not None:
                    kubelet.stop()
    finally:
        server.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    log.info("stopped cleanly")


def creates_capped(report: TickReport, settings: Settings) -> bool:
    """Whether pods may still be waiting for a create slot: the executor left creates
    for later, or the plan used every slot it had while more pods needed one."""
    if report.deferred_creates:
        return True
    if report.observation is None:
        return False
    creates = report.planned.get(Create.__name__, 0)
    waiting = len(report.observation.create_inputs)
    return waiting > creates and creates >= create_slots(report.observation, settings)


class Ticker:
    """Runs ticks one at a time: on the schedule, and early when the watch saw a change,
    never closer together than the RunPod quota allows (`RunPodClient.tick_gap`)."""

    def __init__(
        self,
        engine: Engine,
        health: Health,
        scheduler: BackgroundScheduler,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine, self.health, self.scheduler = engine, health, scheduler
        self.debouncer = Debouncer(monotonic, min_gap=engine.runpod.tick_gap)
        self._running = threading.Lock()

    def periodic(self) -> None:
        since = self.debouncer.since_last_start()
        if since is not None and since < self.debouncer.min_gap():
            return  # the quota is low: a tick began lately, and the next one is paced
        if not self._running.acquire(blocking=False):
            return  # an early tick is running: it is as fresh as this one would be
        try:
            self._tick()
        finally:
            self._running.release()

    def changed(self) -> None:
        """Called by the watches: schedule an early tick unless one is already due."""
        delay = self.debouncer.poke()
        if delay is not None:
            self._schedule_early(delay)

    def _schedule_early(self, delay: float) -> None:
        # No misfire limit: a late early tick still has a change to look at. (Once the
        # scheduler is shut down, the job is only queued, never run.)
        self.scheduler.add_job(
            self._early,
            "date",
            misfire_grace_time=None,
            run_date=utcnow() + timedelta(seconds=delay),
        )

    def _early(self) -> None:
        with self._running:  # waits for a tick in progress: it may have missed the change
            hold = self.debouncer.hold()
            if hold > 0:  # the last tick spent quota: the gap grew since this was due
                self._schedule_early(hold)
                return
            if self.debouncer.fire():
                self.health.metrics.early_ticks.inc()
                self._tick()

    def _tick(self) -> None:
        self.debouncer.started()
        try:
            report = self.engine.tick()  # its metrics and readiness: `Health.record`
        except WriterLost as exc:
            log.error("tick stopped: %s", exc)  # the writer Lease's own job stops the loop
            return
        # A tick that changed nothing is routine; each decision has its own line anyway.
        level = logging.INFO if report.applied or report.failed else logging.DEBUG
        log.log(
            level,
            "tick #%s: %d pods, %d instances, %d applied, %d failed in %.2f s%s",
            report.tick_id,
            report.pods,
            report.instances,
            sum(report.applied.values()),
            sum(report.failed.values()),
            report.duration,
            "".join(f"; {line}" for line in report.section_lines()),
        )
        if creates_capped(report, self.engine.settings):
            # Pods are left waiting for a create slot: the next tick comes as soon as the
            # quota's gap allows, not at the next periodic tick.
            self.changed()


class Replica:
    """One reconciler process: elects (if asked to), and while leading runs the jobs."""

    def __init__(
        self, parts: Reconciler, health: Health, options: LoopOptions, stop: threading.Event
    ) -> None:
        self.parts, self.health, self.options, self.stop = parts, health, options, stop
        self.engine = engine = parts.engine
        self.metrics = health.metrics
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.ticker = Ticker(engine, health, self.scheduler)
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            self.elector = LeaderElector(
                engine.kube,
                options.leader_namespace,
                options.lease_name,
                identity(),
                options.lease_seconds,
                utcnow,
                time.monotonic,
            )
        self._held = ExitStack()  # the node's writer Lease and the writer lock, once leading
        self._watches: list[PodWatch] = []
        self._leading = False
        self._lost: str | None = None

    @property
    def leading(self) -> bool:
        return self._leading and not self._lost

    def run(self) -> None:
        self.scheduler.start()
        try:
            if self.elector is None:
                self._lead()  # a second writer on this database is refused right here
            else:
                self._stand_by(self.elector)
            while not self.stop.wait(1.0):
                pass
        finally:
            self._shut_down()
        if self._lost:
            raise LeadershipLost(self._lost)

    def _stand_by(self, elector: LeaderElector) -> None:
        self.metrics.leader.set(0)
        log.info(
            "leader election on lease %s/%s as %s: trying every %.1f s",
            elector.namespace,
            elector.name,
            elector.identity,
            elector.retry_period,
        )
        self.scheduler.add_job(
            self._elect,
            "interval",
            seconds=elector.retry_period,
            next_run_time=utcnow(),
            max_instances=1,
            coalesce=True,
        )

    def _elect(self) -> None:
        assert self.elector is not None
        attempt, change = self.elector.attempt()
        if change is Change.STOPPED_LEADING:
            log.error("lost the leader lease; stopping, to restart as a standby")
            self.metrics.leader.set(0)
            self._lost = "another replica took over the leader lease"
            self.stop.set()
            return
        if change is Change.STARTED_LEADING:
            log.info("became the leader")
        if not self.elector.leading:
            if attempt is Attempt.REFUSED:
                # A standby that hears from the API server is as ready as it can be:
                # it must not hold a rollout up (Kubernetes' convention for standbys).
                self.health.ok_now()
            return
        if not self._leading and not self.stop.is_set():
            try:
                self._lead()
            except (LockHeld, WriterHeld) as exc:
                # The old leader's lock: released on its way out, taken over at once
                # from the leader whose lease expired or a dead process on this host,
                # else expired after the lock's TTL.
                log.warning(
                    "leading, but %s; trying again in %.1f s", exc, self.elector.retry_period
                )

    def _lead(self) -> None:
        """Take the node's writer Lease and the writer lock, then tick, beat and watch."""
        predecessor = self.elector.predecessor if self.elector is not None else None
        with ExitStack() as taking:  # both or neither
            taking.enter_context(holding_writer_lease(self.parts.writer_lease))
            taking.enter_context(holding(self.parts.lock, predecessor))
            self._held = taking.pop_all()
        self._leading = True
        self.metrics.leader.set(1)
        options, now = self.options, utcnow()
        self.scheduler.add_job(
            self._heartbeat,
            "interval",
            seconds=options.heartbeat_interval,
            next_run_time=now,
            max_instances=1,
            coalesce=True,
        )
        self.scheduler.add_job(
            self._keep_writer_lease,
            "interval",
            seconds=self.parts.writer_lease.elector.retry_period,
            max_instances=1,
            coalesce=True,
        )
        self.scheduler.add_job(
            self.ticker.periodic,
            "interval",
            seconds=options.interval,
            jitter=options.interval * 0.1,
            next_run_time=now,
            max_instances=1,
            coalesce=True,
        )
        if options.watch:
            self._start_watches()

    def _start_watches(self) -> None:
        kube, changed = self.engine.kube, self.ticker.changed
        self._watches = [
            PodWatch(
                kube,
                node_selector(self.engine.settings.node.name),
                changed,
                name="watch-node-pods",
            ).start(),
            PodWatch(
                kube,
                PENDING_SELECTOR,
                changed,
                ChangeFilter(may_be_offloaded),
                name="watch-pending-pods",
            ).start(),
        ]

    def _keep_writer_lease(self) -> None:
        """Renew the node's writer Lease between ticks too; stop when it is lost."""
        try:
            self.parts.writer_lease.keep()
        except WriterLost as exc:
            log.error("%s; stopping", exc)
            self._lost = str(exc)
            self.stop.set()

    def _heartbeat(self) -> None:
        try:
            self.parts.heartbeat.beat()
            self.metrics.heartbeats.labels("ok").inc()
        except KubeError as exc:
            self.metrics.heartbeats.labels("failed").inc()
            log.warning("node heartbeat failed: %s", exc)

    def _shut_down(self) -> None:
        # The scheduler first: a running tick finishes with the lock still held, and no
        # job starts after it. Pokes from the watches meanwhile are dropped.
        self.scheduler.shutdown(wait=True)
        for watch in self._watches:
            watch.stop()
        self._held.close()
        # The Lease last: a successor then finds the database lock already free.
        if self.elector is not None:
            self.elector.release()
