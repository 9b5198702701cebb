"""How a command reaches the cluster and RunPod: the flags `sync`, `drain`, `logs`, `exec`
and `offers` share (`connection_options`), and one place that turns a failure to reach
either into a one-line error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from reconciler.adapters.kube.errors import KubeError
from reconciler.adapters.runpod.errors import RunPodError
from reconciler.core.config import DEFAULT_RUNPOD_URL
from reconciler.runtime import process_log

kubeconfig_option = click.option(
    "--kubeconfig",
    envvar=["RECONCILER_KUBECONFIG", "KUBECONFIG"],
    default=None,
    help="Kubeconfig file, or several separated by ':' and merged as kubectl merges them "
    "(the first file that sets a value wins; missing files are skipped) "
    "[default: ~/.kube/config, else the in-cluster config].",
)
context_option = click.option(
    "--context",
    "kube_context",
    envvar="RECONCILER_CONTEXT",
    default=None,
    help="The kubeconfig context to use [default: its current-context].",
)
runpod_url_option = click.option(
    "--runpod-url",
    envvar="RECONCILER_RUNPOD_URL",
    default=DEFAULT_RUNPOD_URL,
    help="Base URL of the RunPod API.",
)
runpod_api_key_option = click.option(
    "--runpod-api-key",
    envvar="RUNPOD_API_KEY",
    required=True,
    show_envvar=True,
    show_default=False,
    help="RunPod API key (prefer the environment variable).",
)


F = Callable[..., Any]


def connection_options(runpod_api_key: bool = True) -> Callable[[F], F]:
    """--kubeconfig, --context, --runpod-url and, unless the command declares its own
    (`offers` needs the key only sometimes), the required --runpod-api-key."""
    options = [kubeconfig_option, context_option, runpod_url_option]
    if runpod_api_key:
        options.append(runpod_api_key_option)

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


@contextmanager
def reaching(what: str = "") -> Iterator[None]:
    """A Kubernetes or RunPod error inside becomes a one-line CLI error (`what` first,
    e.g. "cannot drain"), with any secret in it redacted."""
    try:
        yield
    except (KubeError, RunPodError) as exc:
        message = f"{what}: {exc}" if what else str(exc)
        raise click.ClickException(process_log.redact(message)) from None
