"""A PostgreSQL server for the tests: the one RECONCILER_TEST_POSTGRES_URL names, else a
throwaway one started from Debian's postgresql binaries in a temporary directory on a
free loopback port (as the `postgres` user when we are root: the server refuses root).
Each test gets a database of its own."""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

URL_VARIABLE = "RECONCILER_TEST_POSTGRES_URL"


class Unavailable(Exception):
    """Why no server can be had here; the tests skip with this reason."""


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        raise Unavailable(
            f"no PostgreSQL: set {URL_VARIABLE}, or install Debian's "
            "postgresql package (bash .ci/run does)"
        )
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(command: list[str]) -> None:
    if os.geteuid() == 0:
        if shutil.which("su") is None:
            raise Unavailable("running as root without `su`: cannot start PostgreSQL")
        command = ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(command)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


@contextmanager
def server() -> Iterator[str]:
    """The URL of a server where we may create databases."""
    if os.environ.get(URL_VARIABLE):
        yield os.environ[URL_VARIABLE]
        return
    bindir = _bindir()
    with tempfile.TemporaryDirectory(prefix="reconciler-pg-") as workdir:
        if os.geteuid() == 0:
            shutil.chown(workdir, "postgres")
        data, port = Path(workdir) / "data", _free_port()
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "reconciler",
                "--no-sync",
            ]
        )
        options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        _run(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                f"{workdir}/server.log",
                "-w",
                "start",
            ]
        )
        try:
            yield f"postgresql+psycopg://reconciler@127.0.0.1:{port}/postgres"
        finally:
            _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])


@contextmanager
def database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server, dropped afterwards."""
    name = f"reconciler_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
