"""The reconciler's own log (not the pods' logs, which `runtime/logs/sources.py` reads):
text or JSON lines, with known secrets scrubbed from every record.

Decisions about pods (create, adopt, bind, fail, terminate, finalize) are one INFO line
each; in JSON they also carry their subject as fields (DECISION_FIELDS), so a log
collector can follow one pod or one instance without parsing messages.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

_secrets: set[str] = set()

REDACTED = "[REDACTED]"
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
DECISION_FIELDS = ("action", "pod", "namespace", "instance", "reason", "price", "tick")

_decisions = logging.getLogger("reconciler.decisions")


@dataclass(frozen=True)
class Decision:
    """What the reconciler did about one pod (or one orphaned instance)."""

    action: str
    namespace: str | None
    pod: str | None
    instance: str | None = None
    reason: str | None = None
    price: float | None = None
    """USD per hour of the instance, when known."""
    tick: int | None = None

    def message(self) -> str:
        subject = f"{self.namespace}/{self.pod}" if self.pod else "(no pod)"
        parts = [f"{self.action} {subject}"]
        if self.instance:
            parts.append(f"instance {self.instance}")
        if self.price is not None:
            parts.append(f"${self.price:.2f}/h")
        if self.reason:
            parts.append(self.reason)
        return ": ".join(parts[:2]) + "".join(f", {part}" for part in parts[2:])


def decision(made: Decision) -> None:
    _decisions.info(made.message(), extra={"decision": asdict(made)})


def register_secret(value: str) -> None:
    """Make sure `value` never reaches a log line, whoever logs it."""
    if len(value) >= 4:
        _secrets.add(value)


def redact(text: str) -> str:
    for secret in _secrets:
        text = text.replace(secret, REDACTED)
    return text


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class _JSONFormatter(_RedactingFormatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "decision", None)
        if isinstance(fields, dict):
            entry.update(
                {key: fields[key] for key in DECISION_FIELDS if fields.get(key) is not None}
            )
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry))


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(_JSONFormatter())
    else:
        handler.setFormatter(_RedactingFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The kubernetes client and urllib3 are chatty at INFO; their debug logs could
    # also carry bearer tokens. APScheduler logs every job run at INFO, paramiko every
    # SSH connection and authentication.
    for noisy in ("urllib3", "kubernetes", "alembic", "apscheduler", "paramiko"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
