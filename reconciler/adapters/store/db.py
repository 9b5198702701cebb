"""Engines and sessions. SQLite gets the pragmas a small concurrent writer needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError
from sqlalchemy.orm import Session, sessionmaker

BUSY_TIMEOUT_MS = 10_000


class DatabaseURLError(ValueError):
    """The database URL cannot be used; the message is safe to show to a user."""


def describe_error(url: str, exc: DatabaseError) -> str:
    """One line for a user about a database that cannot be used: where, what, what to do.
    Never the password, never SQLAlchemy's multi-line text."""
    reason = str(exc.orig) if exc.orig is not None else type(exc).__name__
    where = location(url)
    code = getattr(exc.orig, "sqlite_errorname", None)
    if code == "SQLITE_NOTADB":
        return (
            f"cannot open database {where}: the file is not a database (damaged, or not "
            "SQLite); move it aside and start again: the state is rebuilt from the "
            "instances' tags and the pods' runpod.io/pod-id annotations"
        )
    if code == "SQLITE_CANTOPEN":
        return (
            f"cannot open database {where}: unable to open the file (does its directory "
            "exist, and may this user write there?)"
        )
    return f"cannot open database {where}: {reason.splitlines()[0] if reason else reason}"


def location(url: str) -> str:
    """The file of a SQLite URL, else the URL without its password."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return repr(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        return parsed.database
    return parsed.render_as_string(hide_password=True)


def make_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseURLError(f"not a database URL: {url!r}") from exc
    if parsed.get_backend_name() != "sqlite":
        return _server_engine(parsed.render_as_string(hide_password=False))
    engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
    event.listen(engine, "connect", _configure_sqlite)
    return engine


def _server_engine(url: str) -> Engine:
    try:
        return create_engine(url, pool_pre_ping=True)
    except NoSuchModuleError as exc:
        raise DatabaseURLError(f"unsupported database kind in URL: {exc}") from None
    except ImportError as exc:
        raise DatabaseURLError(f"the database driver is not installed: {exc.name}") from None


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets `state show` read while a tick writes; NORMAL is durable enough with WAL.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    # Rows outlive their session (the planner reads them after commit), so no expiry.
    return sessionmaker(engine, expire_on_commit=False)


def missing_sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names, when it does not exist (connecting would create it);
    None for other databases, in-memory SQLite and files that exist."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    database = parsed.database
    if (
        parsed.get_backend_name() != "sqlite"
        or not database
        or database == ":memory:"
        or database.startswith("file:")
    ):
        return None
    path = Path(database).expanduser().resolve()
    return None if path.exists() else path
