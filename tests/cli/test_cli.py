"""The CLI skeleton: help everywhere, `db` and `state show` output, one-line user errors,
global options after the subcommand, JSON everywhere in JSON mode, and reading commands
that never create a database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from alembic.script import ScriptDirectory
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
        session.add_all(
            [
                Mapping(
                    pod_uid="uid-1",
                    namespace="ml",
                    name="train",
                    state=MappingState.RUNNING,
                    instance_id="pod_abc",
                    instance_name="ml-train-uid1",
                    gpu_type_id="NVIDIA GeForce RTX 4090",
                    datacenter_id="US-TX-3",
                    cost_per_hr=0.69,
                    last_instance_status="RUNNING",
                    created_at=now - timedelta(minutes=12),
                    updated_at=now,
                ),
                Mapping(
                    pod_uid="uid-2",
                    namespace="web",
                    name="serve",
                    state=MappingState.TERMINATED,
                    instance_id="pod_old",
                    created_at=now - timedelta(hours=3),
                    updated_at=now,
                ),
                Tick(started_at=now, finished_at=now, actions_applied=2),
            ]
        )
        session.commit()
    engine.dispose()


def test_seeded_rows_as_json(url: str) -> None:
    seed(url)
    result = CliRunner().invoke(
        main, ["--database-url", url, "state", "show", "-o", "json", "--all"]
    )
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
    assert lines[0].split() == [
        "NAMESPACE",
        "POD",
        "STATE",
        "INSTANCE",
        "GPU",
        "DC",
        "COST/H",
        "STATUS",
        "AGE",
        "NOTE",
    ]
    assert "pod_abc" in lines[1] and "$0.69" in lines[1] and "12m" in lines[1]
    assert "serve" not in result.output
    assert "last tick #1" in result.output
    everything = CliRunner().invoke(main, ["--database-url", url, "state", "show", "--all"])
    assert "serve" in everything.output


def test_namespace_filter(url: str) -> None:
    seed(url)
    result = CliRunner().invoke(
        main, ["--database-url", url, "state", "show", "-n", "web", "--all", "-o", "json"]
    )
    assert [r["name"] for r in json.loads(result.output)] == ["serve"]


@pytest.mark.parametrize(
    "bad_url, message",
    [
        ("sqlite:////no/such/dir/state.db", "no database at /no/such/dir/state.db"),
        ("nope://", "unsupported database kind"),
        ("::::", "not a database URL"),
    ],
)
def test_unusable_database_is_one_clear_line(bad_url: str, message: str) -> None:
    result = CliRunner().invoke(main, ["--database-url", bad_url, "state", "show"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and message in result.output
    assert "Traceback" not in result.output


def test_database_without_schema_says_how_to_fix(url: str) -> None:
    Path(url.removeprefix("sqlite:///")).touch()
    result = CliRunner().invoke(main, ["--database-url", url, "state", "show"])
    assert result.exit_code == 1
    assert "reconciler db upgrade" in result.output


def test_bad_flag_value_is_rejected_cleanly() -> None:
    result = CliRunner().invoke(main, ["--log-format", "xml", "state", "show"])
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.output


def test_password_in_url_is_never_printed() -> None:
    result = CliRunner().invoke(
        main,
        ["--database-url", "postgresql+nosuchdriver://u:hunter22@127.0.0.1/db", "state", "show"],
    )
    assert result.exit_code == 1
    assert "hunter22" not in result.output


def test_state_show_on_a_missing_database_says_so_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "reconciler.db"
    path.parent.mkdir()
    for command in (["state", "show"], ["db", "current"]):
        result = CliRunner().invoke(main, ["--database-url", f"sqlite:///{path}", *command])
        assert result.exit_code == 1
        assert f"no database at {path}" in result.output and "--database-url" in result.output
        assert list(path.parent.iterdir()) == []


def test_global_options_work_after_the_subcommand(url: str) -> None:
    runner = CliRunner()
    upgraded = runner.invoke(main, ["db", "upgrade", "--database-url", url])
    assert upgraded.exit_code == 0, upgraded.output
    shown = runner.invoke(
        main, ["state", "show", "-o", "json", f"--database-url={url}", "--log-level", "WARNING"]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == []


def test_json_mode_makes_every_output_json(url: str) -> None:
    runner = CliRunner()
    outputs = [
        runner.invoke(main, ["--log-format", "json", "--database-url", url, *command])
        for command in (["db", "upgrade"], ["db", "current"], ["state", "show"])
    ]
    assert [r.exit_code for r in outputs] == [0, 0, 0], [r.output for r in outputs]
    upgraded, current, shown = (json.loads(r.stdout) for r in outputs)
    assert (
        upgraded
        == current
        == {"revision": migrate.head_revision(), "latest": migrate.head_revision()}
    )
    assert shown == []
    # An explicit --output still wins.
    table = runner.invoke(
        main, ["--log-format", "json", "--database-url", url, "state", "show", "-o", "table"]
    )
    assert table.stdout.startswith("NAMESPACE") or "no pods" in table.stdout.lower()


def test_json_mode_errors_are_json_on_standard_error(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = CliRunner().invoke(
        main, ["state", "show", "--log-format", "json", "--database-url", f"sqlite:///{missing}"]
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert json.loads(result.stderr)["error"].startswith(f"no database at {missing}")
    usage = CliRunner().invoke(main, ["--log-format", "json", "state", "show", "--nope"])
    assert usage.exit_code == 2
    assert "--nope" in json.loads(usage.stderr)["error"]


def test_downgrade_rolls_the_schema_back_and_upgrade_forward_again(url: str) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["--database-url", url, "db", "upgrade"]).exit_code == 0
    first = migrate_revisions()[0]
    down = runner.invoke(main, ["--database-url", url, "db", "downgrade", first, "-o", "json"])
    assert down.exit_code == 0, down.output
    assert json.loads(down.stdout)["revision"] == first
    assert (
        f"{first} (latest is {migrate.head_revision()})"
        in runner.invoke(main, ["--database-url", url, "db", "current"]).output
    )
    assert runner.invoke(main, ["--database-url", url, "db", "upgrade"]).exit_code == 0


def migrate_revisions() -> list[str]:
    script = ScriptDirectory(migrate.SCRIPT_LOCATION)
    return [r.revision for r in reversed(list(script.walk_revisions()))]
