"""The CLI skeleton: help everywhere, `db` and `state show` output, one-line user errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reconciler.adapters.store import db, migrate
from reconciler.adapters.store.models import Mapping, MappingState, Tick
from reconciler.app import main


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += all_commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


@pytest.mark.parametrize("path", all_commands(main), ids=" ".join)
def test_every_command_has_help_text(path: tuple[str, ...]) -> None:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    assert command.help and command.help.strip(), f"{' '.join(path) or 'reconciler'} has no help"
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert "reconciler, version" in result.output


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def test_fresh_database_shows_an_empty_list(url: str) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["--database-url", url, "db", "upgrade"]).exit_code == 0
    result = runner.invoke(main, ["--database-url", url, "state", "show", "--output", "json"])
    assert result.exit_code == 0
    assert json.loads(result.output) == []


def test_database_url_from_the_environment(url: str) -> None:
    runner = CliRunner()
    env = {"RECONCILER_DATABASE_URL": url}
    assert runner.invoke(main, ["db", "upgrade"], env=env).exit_code == 0
    result = runner.invoke(main, ["db", "current"], env=env)
    assert result.output.strip() == f"{migrate.head_revision()} (latest)"


def seed(url: str) -> None:
    engine = db.make_engine(url)
    migrate.upgrade(engine)
    now = datetime.now(UTC)
    with db.session_factory(engine)() as session:
        session.add_all([
            Mapping(pod_uid="uid-1", namespace="ml", name="train", state=MappingState.RUNNING,
                    instance_id="pod_abc", instance_name="ml-train-uid1",
                    gpu_type_id="NVIDIA GeForce RTX 4090", datacenter_id="US-TX-3",
                    cost_per_hr=0.69, last_instance_status="RUNNING",
                    created_at=now - timedelta(minutes=12), updated_at=now),
            Mapping(pod_uid="uid-2", namespace="web", name="serve",
                    state=MappingState.TERMINATED, instance_id="pod_old",
                    created_at=now - timedelta(hours=3), updated_at=now),
            Tick(started_at=now, finished_at=now, actions_applied=2),
        ])
        session.commit()
    engine.dispose()


def test_seeded_rows_as_json(url: str) -> None:
    seed(url)
    result = CliRunner().invoke(main, ["--database-url", url, "state", "show", "-o", "json",
                                       "--all"])
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == ["train", "serve"]
    assert rows[0]["instance_id"] == "pod_abc"
    assert rows[0]["cost_per_hr"] == 0.69
    assert set(rows[0]) >= {"pod_uid", "namespace", "state", "gpu_type", "created_at"}


def test_table_hides_finished_rows_unless_asked(url: str) -> None:
    seed(url)
    result = CliRunner().invoke(main, ["--database-url", url, "state", "show"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split() == ["NAMESPACE", "POD", "STATE", "INSTANCE", "GPU", "DC", "COST/H",
                                "STATUS", "AGE", "NOTE"]
    assert "pod_abc" in lines[1] and "$0.69" in lines[1] and "12m" in lines[1]
    assert "serve" not in result.output
    assert "last tick #1" in result.output
    everything = CliRunner().invoke(main, ["--database-url", url, "state", "show", "--all"])
    assert "serve" in everything.output


def test_namespace_filter(url: str) -> None:
    seed(url)
    result = CliRunner().invoke(main, ["--database-url", url, "state", "show", "-n", "web",
                                       "--all", "-o", "json"])
    assert [r["name"] for r in json.loads(result.output)] == ["serve"]


@pytest.mark.parametrize("bad_url, message", [
    ("sqlite:////no/such/dir/state.db", "cannot open database"),
    ("nope://", "unsupported database kind"),
    ("::::", "not a database URL"),
])
def test_unusable_database_is_one_clear_line(bad_url: str, message: str) -> None:
    result = CliRunner().invoke(main, ["--database-url", bad_url, "state", "show"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and message in result.output
    assert "Traceback" not in result.output


def test_database_without_schema_says_how_to_fix(url: str) -> None:
    result = CliRunner().invoke(main, ["--database-url", url, "state", "show"])
    assert result.exit_code == 1
    assert "reconciler db upgrade" in result.output


def test_bad_flag_value_is_rejected_cleanly() -> None:
    result = CliRunner().invoke(main, ["--log-format", "xml", "state", "show"])
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.output


def test_password_in_url_is_never_printed() -> None:
    result = CliRunner().invoke(
        main, ["--database-url", "postgresql+nosuchdriver://u:hunter22@127.0.0.1/db", "state",
               "show"])
    assert result.exit_code == 1
    assert "hunter22" not in result.output
