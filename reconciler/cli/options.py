"""The flags that fill `Settings`, shared by `sync` and `demo` (and some by `offers`),
made from the settings' declarations (`reconciler.core.config.setting`).

Each has an explicit RECONCILER_* environment variable (the same for every command),
so a Deployment configures the reconciler with env alone.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable
from dataclasses import Field
from typing import Any

import click

from reconciler.core.config import (
    PLACE_OF,
    Settings,
    setting_types,
    settings_fields,
    settings_problems,
)
from reconciler.core.setting import Flag, envvar_of

F = Callable[..., Any]


class SettingsError(click.ClickException):
    """A setting out of its range: one line naming the flag or variable, exit code 2 (a
    usage error), before anything starts."""

    exit_code = 2


def setting_error(flag: str, name: str, problem: str) -> SettingsError:
    """The error for the flag `flag` (parameter `name`), naming where its value came from."""
    context = click.get_current_context(silent=True)
    source = context.get_parameter_source(name) if context is not None else None
    if source is click.core.ParameterSource.ENVIRONMENT:
        where = f"environment variable {envvar_of(flag)}"
    else:
        where = f"{flag} (or {envvar_of(flag)})"
    return SettingsError(f"invalid {where}: {problem}")


CONCERNS = {
    "node": "The virtual node",
    "placement": "Placement",
    "caps": "Money and counts",
    "timing": "Timing",
    "kubelet": "The kubelet endpoint (kubectl logs, exec, port-forward, top)",
    "logs": "Pods' logs",
    "ssh": "SSH to instances",
    "services": "Cluster Services for pods on RunPod",
}
"""The help's heading of each group of settings (`Settings`' attributes)."""


class SettingOption(click.Option):
    """A settings flag, knowing the concern (the settings group) its help is listed under."""

    def __init__(self, *args: Any, concern: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.concern = concern


class GroupedHelp(click.Command):
    """A command whose `--help` lists its settings flags under their concern's heading, as
    the settings are grouped, after the command's own options."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {"Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                sections.setdefault(getattr(param, "concern", "Options"), []).append(record)
        for title, records in sections.items():
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)


def settings_options(command: F) -> F:
    return _with_settings(command, lambda _name: True)


def some_settings_options(*names: str) -> Callable[[F], F]:
    """The flags of these settings only (a command that needs few of them); the others
    keep their defaults in `settings_from`."""
    return lambda command: _with_settings(command, lambda name: name in names)


def settings_options_showing(*names: str) -> Callable[[F], F]:
    """Every settings flag, and only these in the help: a command that uses few of them
    still takes the others (as it did), so that a script passing the same flags or
    variables to it as to `sync` keeps working."""
    return lambda command: _with_settings(command, lambda _name: True, shown=names)


def _with_settings(
    command: F, wanted: Callable[[str], bool], shown: tuple[str, ...] | None = None
) -> F:
    for item, flag in reversed(list(settings_fields())):
        if not wanted(flag.name):
            continue
        envvar: list[str] = [flag.envvar, *([flag.fallback_env] if flag.fallback_env else [])]
        command = click.option(
            flag.flag,
            flag.name,
            cls=SettingOption,
            concern=CONCERNS[PLACE_OF[flag.name][0]],
            type=_click_type(_TYPES[flag.name]),
            default=_shown(item.default),
            envvar=envvar if flag.fallback_env else flag.envvar,
            show_envvar=True,
            show_default=True,
            hidden=shown is not None and flag.name not in shown,
            help=flag.help,
        )(command)
    return command


_TYPES = setting_types()


def _click_type(kind: Any) -> Any:
    """A choice for an enum; text for a tuple (comma-separated); else the field's type."""
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return click.Choice([member.value for member in kind])
    if typing.get_origin(kind) is tuple:
        return str
    return kind


def _shown(default: Any) -> Any:
    if isinstance(default, enum.Enum):
        return default.value
    if isinstance(default, tuple):
        return ",".join(default)
    return default


def settings_from(options: dict[str, Any]) -> Settings:
    """Pops the settings flags out of a command's keyword arguments."""
    values = {
        flag.name: _value(item, flag, options.pop(flag.name))
        for item, flag in settings_fields()
        if flag.name in options
    }
    settings = Settings.of(**values)
    flags = {flag.name: flag.flag for _, flag in settings_fields()}
    for name, problem in settings_problems(settings):
        raise setting_error(flags[name], name, problem)
    return settings


def _value(item: Field[Any], flag: Flag, given: Any) -> Any:
    if isinstance(item.default, enum.Enum):
        return type(item.default)(given)
    if isinstance(item.default, tuple):
        return tuple(part.strip() for part in given.split(",") if part.strip())
    if flag.parse is None:
        return given
    try:
        return flag.parse(given)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint=flag.flag) from None
