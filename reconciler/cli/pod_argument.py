"""One way to name a pod across the commands that take one (`logs`, `exec`): either
`NAMESPACE/POD`, or `POD` with `-n NAMESPACE` as kubectl takes it (default: default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

METAVAR = "[NAMESPACE/]POD"


def namespace_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--namespace",
        "-n",
        default=None,
        help="The pod's namespace, as kubectl's -n (or name the pod NAMESPACE/POD); "
        "default: default.",
    )(function)


def pod_of(target: str, namespace: str | None) -> tuple[str, str]:
    """(namespace, pod) from the argument and the -n option; a clash is a usage error."""
    given, slash, pod = target.rpartition("/")
    if not pod or (slash and not given):
        raise click.BadParameter(f"{target!r} is not POD or NAMESPACE/POD", param_hint="POD")
    if slash and namespace is not None and namespace != given:
        raise click.UsageError(f"{target} names namespace {given}, but -n says {namespace}")
    return (given if slash else namespace or "default"), pod
