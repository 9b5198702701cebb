"""The loop mode: `reconciler sync` ticks on a schedule until SIGTERM or SIGINT, serving
/healthz, /readyz and /metrics meanwhile."""

from __future__ import annotations

import logging
import signal
from types import FrameType

from apscheduler.schedulers.blocking import BlockingScheduler

from reconciler.config import Settings
from reconciler.engine import Engine, utcnow
from reconciler.health import Health, HealthServer
from reconciler.metrics import Metrics
from reconciler.wiring import Connections, reconciler

log = logging.getLogger(__name__)


def run_loop(settings: Settings, conn: Connections, interval: float,
             health_address: str) -> None:
    """Tick every `interval` seconds (never two at once) until told to stop."""
    health = Health(interval, utcnow, Metrics())
    server = HealthServer(health_address, health).start()
    log.info("serving /healthz, /readyz and /metrics on port %d", server.port)
    try:
        with reconciler(settings, conn) as engine:
            _schedule(engine, health, interval)
    finally:
        server.stop()
    log.info("stopped cleanly")


def _schedule(engine: Engine, health: Health, interval: float) -> None:
    scheduler = BlockingScheduler(timezone="UTC")
    scheduler.add_job(_tick, "interval", seconds=interval, args=[engine, health],
                      max_instances=1, coalesce=True, jitter=interval * 0.1,
                      next_run_time=utcnow())

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; finishing the tick in progress", signal.Signals(signum).name)
        # shutdown(wait=True) lets a running tick finish before the lock is released.
        scheduler.shutdown(wait=True)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    scheduler.start()


def _tick(engine: Engine, health: Health) -> None:
    report = engine.tick()
    health.metrics.observe(report, engine.runpod.rate_budget)
    if report.ok:
        health.last_ok = report.finished_at
    log.info("tick #%s: %d pods, %d instances, %d applied, %d failed in %.2f s",
             report.tick_id, report.pods, report.instances, sum(report.applied.values()),
             sum(report.failed.values()), report.duration)
