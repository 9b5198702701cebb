"""The tunnels' sync in a thread of its own, on the latest tick's view of the pods: an
instance whose SSH answers slowly (a connect waits up to its timeout) never holds up
the reconciler's ticks. A sync still running when ticks come skips to the newest."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from reconciler.core.domain import KubeObject
from reconciler.core.translate.ssh import SshAddress

log = logging.getLogger(__name__)

Sync = Callable[[Sequence[KubeObject], Callable[[str], SshAddress | None]], None]


class SyncWorker:
    def __init__(self, sync: Sync) -> None:
        self._sync = sync
        self._pending: tuple[Sequence[KubeObject], Callable[[str], SshAddress | None]] | None = None
        self._stopped = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="service-tunnels", daemon=True)
        self._thread.start()

    def submit(
        self, pods: Sequence[KubeObject], address_of: Callable[[str], SshAddress | None]
    ) -> None:
        with self._changed:
            self._pending = (pods, address_of)
            self._changed.notify()

    def close(self, timeout: float = 30.0) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._pending is None and not self._stopped:
                    self._changed.wait()
                if self._stopped:
                    return
                pending, self._pending = self._pending, None
            if pending is None:
                continue
            try:
                self._sync(*pending)
            except Exception:  # one bad sync never ends the tunnels: the next tick tries again
                log.exception("the Services' tunnels could not be kept in step")
