"""Logging set-up: text or JSON lines, with known secrets scrubbed from every record."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

_secrets: set[str] = set()

REDACTED = "[REDACTED]"
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


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
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
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
    # also carry bearer tokens.
    for noisy in ("urllib3", "kubernetes", "alembic"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
