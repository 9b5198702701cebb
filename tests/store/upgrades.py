"""Several processes upgrading one database's schema at the same moment, as replicas
of one Deployment do when they start together."""

from __future__ import annotations

import subprocess
import sys

_UPGRADE = (
    "import sys; from reconciler.adapters.store import db, migrate; "
    "migrate.upgrade(db.make_engine(sys.argv[1]))"
)


def upgrade_at_once(url: str, processes: int = 5) -> list[str]:
    """The standard error of every process whose upgrade failed."""
    running = [
        subprocess.Popen([sys.executable, "-c", _UPGRADE, url], stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    outcomes = [(process.communicate()[1], process.returncode) for process in running]
    return [stderr for stderr, code in outcomes if code]
