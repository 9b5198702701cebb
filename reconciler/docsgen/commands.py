"""Every command of the `reconciler` program and every flag, with its environment
variable and default, as click resolves them."""

from __future__ import annotations

import inspect
from pathlib import Path

import click

from reconciler.app import main
from reconciler.docsgen.markdown import cell, code, table

INTRO = """\
# Commands and flags

Every flag is also an environment variable: the one named below, else click's automatic
`RECONCILER_<COMMAND>_<FLAG>`. Every duration, price and count is checked before anything
starts: a value that is not finite or out of its range (say `--orphan-grace-time nan`, a
negative price) is one line naming the flag or variable and the accepted range, with exit
code 2. So are a damaged database, a schema written by a newer version (or, with
`--no-migrate`, any schema but the current one), an unusable kubeconfig and a bad
`--health-address`: one line each, never a traceback.
"""


def page(_root: Path) -> str:
    parts = [INTRO] + [_command(*found) for found in _walk(main, "reconciler", None)]
    return "\n".join(part.strip() + "\n" for part in parts)


def _walk(
    command: click.Command, path: str, parent: click.Context | None
) -> list[tuple[str, click.Command, click.Context]]:
    context = click.Context(command, info_name=path.split()[-1], parent=parent)
    if parent is None:
        context = click.Context(command, info_name=path, **(main.context_settings or {}))
    found = [(path, command, context)]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            found += _walk(command.commands[name], f"{path} {name}", context)
    return found


def _command(path: str, command: click.Command, context: click.Context) -> str:
    usage = " ".join([path, *command.collect_usage_pieces(context)])
    text = [f"## `{path}`\n", f"```\n{usage}\n```\n", inspect.cleandoc(command.help or "")]
    rows = [_row(param, context) for param in command.params if _shown(param)]
    if rows:
        text.append("\n" + table(("flag", "environment", "default", "meaning"), rows))
    return "\n".join(text) + "\n"


def _shown(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and not param.hidden and param.name != "help"


def _row(param: click.Parameter, context: click.Context) -> tuple[str, ...]:
    assert isinstance(param, click.Option)
    names = ", ".join(code(name) for name in (*param.opts, *param.secondary_opts))
    return (names, _envvars(param, context), _default(param, context), cell(param.help or ""))


def _envvars(param: click.Option, context: click.Context) -> str:
    if not param.expose_value:  # --version: acts at once, reads no variable
        names = []
    elif param.envvar:
        names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
    elif param.allow_from_autoenv and context.auto_envvar_prefix and param.name:
        names = [f"{context.auto_envvar_prefix}_{param.name.upper()}"]
    else:
        names = []
    return ", ".join(code(name) for name in names)


def _default(param: click.Option, context: click.Context) -> str:
    if param.required:
        return "(required)"
    if not param.expose_value:
        return ""
    if isinstance(param.show_default, str):
        return param.show_default
    default = param.get_default(context, call=False)
    if param.is_flag and not param.secondary_opts:
        return "off" if not default else "on"
    if param.is_flag:
        return code(param.opts[0] if default else param.secondary_opts[0])
    if not isinstance(default, str | int | float) or default == "":
        return ""  # none, computed at run time (the help says how), or required
    return code(str(default))
