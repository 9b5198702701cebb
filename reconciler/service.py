"""The loop mode: `reconciler sync` ticks on a schedule until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
from types import FrameType

from apscheduler.schedulers.blocking import BlockingScheduler

from reconciler.config import Settings
from reconciler.engine import Engine, utcnow
from reconciler.wiring import Connections, reconciler

log = logging.getLogger(__name__)


def run_loop(settings: Settings, conn: Connections, interval: float) -> None:
    """Tick every `interval` seconds (never two at once) until told to stop."""
    with reconciler(settings, conn) as engine:
        scheduler = BlockingScheduler(timezone="UTC")
        scheduler.add_job(_tick, "interval", seconds=interval, args=[engine],
                          max_instances=1, coalesce=True, jitter=interval * 0.1,
                          next_run_time=utcnow())

        def stop(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s; finishing the tick in progress", signal.Signals(signum).name)
            scheduler.shutdown(wait=False)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        scheduler.start()
    log.info("stopped cleanly")


def _tick(engine: Engine) -> None:
    report = engine.tick()
    log.info("tick #%s: %d pods, %d instances, %d applied, %d failed in %.2f s",
             report.tick_id, report.pods, report.instances, sum(report.applied.values()),
             sum(report.failed.values()), report.duration)


