"""The loop mode's HTTP endpoints: /healthz, /readyz and /metrics.

Readiness is judged from the last tick, never by calling RunPod per probe: ready when a
tick observed both worlds within the last three intervals. A leader-election standby
does not tick: it counts as ready while its Lease attempts get an answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reconciler.runtime.process.metrics import Metrics
from reconciler.runtime.tick.engine import Engine, TickReport


class Health:
    """What the probes read; the loop updates it after every tick (a standby, after every
    answered election attempt)."""

    def __init__(self, interval: float, monotonic: Callable[[], float], metrics: Metrics) -> None:
        """Ages are measured on `monotonic`: a step of the wall clock (or the tick's
        times, which are RunPod's) must not make a live loop unready."""
        self.window = 3 * interval
        self.monotonic, self.metrics = monotonic, metrics
        self.last_ok: float | None = None

    def record(self, engine: Engine, report: TickReport) -> None:
        """After each tick of the loop: its metrics, and readiness when it observed."""
        self.metrics.observe(report, engine.runpod.rate_budget, engine.settings.owner_id)
        if report.ok:
            self.ok_now()

    def ok_now(self) -> None:
        """Ready as of now (a tick observed both worlds; a standby heard its Lease)."""
        self.last_ok = self.monotonic()

    def ready(self) -> bool:
        return self.last_ok is not None and self.monotonic() - self.last_ok <= self.window


def parse_address(address: str) -> tuple[str, int]:
    """ ":8080" listens on every interface, "127.0.0.1:0" on a free loopback port.
    Raises ValueError with a message for the user."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535 or " " in host:
        raise ValueError(
            f"{address!r} is not [HOST]:PORT with a port from 0 to 65535 "
            "(for example :8080 or 127.0.0.1:9090)"
        )
    return host.strip("[]") or "0.0.0.0", int(port)


class HealthServer:
    def __init__(self, address: str, health: Health) -> None:
        handler = type("Handler", (_Handler,), {"health": health})
        self._server = ThreadingHTTPServer(parse_address(address), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="health"
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    health: Health

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._reply(200, b"ok\n", "text/plain")
        elif self.path == "/readyz":
            ready = self.health.ready()
            self._reply(
                200 if ready else 503, b"ready\n" if ready else b"not ready\n", "text/plain"
            )
        elif self.path == "/metrics":
            self._reply(200, generate_latest(self.health.metrics.registry), CONTENT_TYPE_LATEST)
        else:
            self._reply(404, b"not found\n", "text/plain")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds would drown the log."""
