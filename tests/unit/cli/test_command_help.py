"""Help per command: a command's `--help` shows the options it uses (`drain --help` fits
one screen), the settings flags it does not use are still taken as before (a script that
passes `sync`'s flags or variables to it keeps working), and `sync --help` lists its
settings under the concern each belongs to, as `Settings` groups them."""

from __future__ import annotations

import click
from click.testing import CliRunner

from reconciler.app import main
from reconciler.cli.options import CONCERNS
from reconciler.core.config import PLACE_OF, settings_fields

SCREEN = 60


def help_of(*path: str) -> str:
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def test_drain_help_fits_one_screen_with_what_drain_uses() -> None:
    shown = help_of("drain")
    assert len(shown.splitlines()) <= SCREEN, shown
    for flag in ("--timeout", "--force", "--node-name", "--cluster-id", "--runpod-api-key"):
        assert flag in shown
    for flag in ("--max-instances", "--kubelet-port", "--log-read-share", "--offload"):
        assert flag not in shown


def test_drain_still_takes_every_settings_flag_and_variable() -> None:
    drain = main.commands["drain"]
    options = {p.name: p for p in drain.params if isinstance(p, click.Option)}
    for _, flag in settings_fields():
        assert flag.name in options, flag.flag
        assert flag.flag in options[flag.name].opts
        envvar = options[flag.name].envvar
        assert flag.envvar == (envvar if isinstance(envvar, str) else envvar[0])
    parsed = CliRunner().invoke(main, ["drain", "--max-instances", "3", "--help"])
    assert parsed.exit_code == 0, parsed.output


def test_sync_help_lists_each_setting_under_its_concern() -> None:
    heading = None
    found: dict[str, str | None] = {}
    titles = {f"{title}:" for title in CONCERNS.values()} | {"Options:"}
    for line in help_of("sync").splitlines():
        if line.strip() in titles and not line.startswith(" "):
            heading = line.strip().removesuffix(":")
        words = line.split()
        if words and words[0].startswith("--"):
            found[words[0].rstrip(",")] = heading
    for _, flag in settings_fields():
        assert found.get(flag.flag) == CONCERNS[PLACE_OF[flag.name][0]], flag.flag
    assert found["--once"] == "Options"
