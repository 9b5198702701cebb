"""Start-up errors and bad settings are one line, never a traceback.

Settings: every duration, price and count must be finite and in range; a NaN, an
infinity, a negative or absurd value, from a flag or from its environment variable, is
refused with exit code 2 and one line naming the flag or variable, before anything
starts (no database file, no request). Start-up: a damaged SQLite file (with its path,
"is not a database" and what to do), a schema written by a newer version (with or
without --no-migrate), an old schema with --no-migrate, an unreadable kubeconfig and a
database file that cannot be opened (with its path).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from reconciler.adapters.store import db, migrate
from reconciler.cli.commands import main
from reconciler.cli.drain_command import drain
from reconciler.cli.sync_command import sync as sync_command
from reconciler.core.config import settings_fields


def sync(database: Path | str, *args: str, env: dict[str, str] | None = None) -> Result:
    url = database if isinstance(database, str) else f"sqlite:///{database}"
    return CliRunner().invoke(
        main,
        ["--database-url", url, "sync", "--once", "--runpod-url", "http://127.0.0.1:9", *args],
        env={"RUNPOD_API_KEY": "k", **(env or {})},
    )


# A log line of the text format; logged warnings are not the error under test.
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING) ")


def one_line(result: Result) -> str:
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.strip().splitlines() if not LOG_LINE.match(line)]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--orphan-grace-time", "nan"], {}, "--orphan-grace-time"),
        (["--orphan-grace-time", "inf"], {}, "--orphan-grace-time"),
        (["--orphan-grace-time", "1e300"], {}, "--orphan-grace-time"),
        (["--create-grace-time", "-1"], {}, "--create-grace-time"),
        (["--max-pending-time", "-inf"], {}, "--max-pending-time"),
        (["--max-gpu-price", "0"], {}, "--max-gpu-price"),
        (["--max-hourly-spend", "nan"], {}, "--max-hourly-spend"),
        (["--max-instances", "-5"], {}, "--max-instances"),
        (["--max-creates-per-tick", "-1"], {}, "--max-creates-per-tick"),
        (["--container-disk-gb", "0"], {}, "--container-disk-gb"),
        (["--catalog-ttl", "nan"], {}, "--catalog-ttl"),
        (["--tick-deadline", "0"], {}, "--tick-deadline"),
        (["--interval", "nan"], {}, "--interval"),
        (["--heartbeat-interval", "inf"], {}, "--heartbeat-interval"),
        (["--stay", "nan"], {}, "--stay"),
        (["--exit-code-timeout", "nan"], {}, "--exit-code-timeout"),
        (["--cost-history", "-1"], {}, "--cost-history"),
        (["--health-address", "not-an-address"], {}, "--health-address"),
        (["--health-address", ":99999"], {}, "--health-address"),
        ([], {"RECONCILER_ORPHAN_GRACE_TIME": "nan"}, "RECONCILER_ORPHAN_GRACE_TIME"),
        ([], {"RECONCILER_MAX_GPU_PRICE": "-2"}, "RECONCILER_MAX_GPU_PRICE"),
    ],
)
def test_a_bad_setting_is_exit_2_and_one_line_before_anything_starts(
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    named: str,
) -> None:
    database = tmp_path / "state.db"
    result = sync(database, *args, env=env)
    assert result.exit_code == 2, result.output
    line = one_line(result)
    assert line.startswith("Error: invalid") and named in line
    assert not database.exists()  # nothing started


@pytest.mark.parametrize(
    ("name", "flag"),
    [(flag.name, flag) for _, flag in settings_fields() if flag.limits is not None],
)
def test_every_declared_range_is_checked_from_its_variable(
    tmp_path: Path, name: str, flag: object
) -> None:
    """A setting declared with limits needs nothing more to be checked."""
    low, high, _ = flag.limits  # type: ignore[attr-defined]
    value = str(low - 1) if high == float("inf") else str(high * 2 + 1)
    database = tmp_path / "state.db"
    result = sync(database, env={flag.envvar: value})  # type: ignore[attr-defined]
    assert result.exit_code == 2, result.output
    assert flag.envvar in one_line(result), name  # type: ignore[attr-defined]
    assert not database.exists()


def test_every_setting_is_a_flag_of_sync_and_drain() -> None:
    for command in (sync_command, drain):
        options = {param.name: param for param in command.params}
        for _, flag in settings_fields():
            assert flag.flag in options[flag.name].opts  # type: ignore[union-attr]
            assert flag.envvar in (options[flag.name].envvar or ())  # type: ignore[operator]


def test_a_damaged_database_names_its_path_and_what_to_do(tmp_path: Path) -> None:
    database = tmp_path / "state.db"
    database.write_bytes(b"this is not SQLite at all" * 100)
    for result in (
        sync(database),
        CliRunner().invoke(main, ["--database-url", f"sqlite:///{database}", "state", "show"]),
    ):
        assert result.exit_code == 1
        line = one_line(result)
        assert str(database) in line and "is not a database" in line
        assert "move it aside" in line


def stamp(database: Path, revision: str) -> None:
    engine = db.make_engine(f"sqlite:///{database}")
    migrate.upgrade(engine)
    engine.dispose()
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE alembic_version SET version_num = ?", (revision,))


@pytest.mark.parametrize("no_migrate", [False, True])
def test_a_schema_from_a_newer_version_says_upgrade_the_reconciler(
    tmp_path: Path,
    no_migrate: bool,
) -> None:
    database = tmp_path / "state.db"
    stamp(database, "20991231_from_the_future")
    result = sync(database, *(["--no-migrate"] if no_migrate else []))
    assert result.exit_code == 1
    line = one_line(result)
    assert "written by a newer version" in line and "upgrade the reconciler" in line
    assert str(database) in line
    shown = CliRunner().invoke(main, ["--database-url", f"sqlite:///{database}", "state", "show"])
    assert "written by a newer version" in one_line(shown)


def test_no_migrate_refuses_a_schema_it_does_not_know(tmp_path: Path) -> None:
    database = tmp_path / "state.db"
    result = sync(database, "--no-migrate")
    assert result.exit_code == 1
    line = one_line(result)
    assert "has no schema yet" in line and "reconciler db upgrade" in line


def test_an_unreadable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [\n")
    result = sync(tmp_path / "state.db", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 1
    line = one_line(result)
    assert "no usable Kubernetes configuration" in line and str(kubeconfig) in line


def test_a_database_that_cannot_be_opened_names_its_path(tmp_path: Path) -> None:
    database = tmp_path / "no-such-dir" / "state.db"
    result = sync(database)
    assert result.exit_code == 1
    line = one_line(result)
    assert f"cannot open database {database}" in line
