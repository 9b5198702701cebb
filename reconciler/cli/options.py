"""The flags that fill `Settings`, shared by `sync` and `demo`.

Each has an explicit RECONCILER_* environment variable (the same for every command),
so a Deployment configures the reconciler with env alone.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import click

from reconciler.core.config import DEFAULT_NODE_NAME, Settings, settings_problems
from reconciler.core.domain import Cloud
from reconciler.core.quantity import canonical_quantity

F = Callable[..., Any]

_DEFAULTS = Settings()

# (flag, Settings field, click type, help)
SETTINGS_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--node-name", "node_name", str, "Name of the virtual node whose pods run on RunPod."),
    (
        "--cluster-id",
        "cluster_id",
        str,
        "Cluster half of the owner id tagged on instances (default: kube-system's UID).",
    ),
    (
        "--max-gpu-price",
        "max_gpu_price",
        float,
        "USD/h a pod may cost without a runpod.io/max-price annotation.",
    ),
    (
        "--cloud-type",
        "cloud",
        click.Choice([c.value for c in Cloud]),
        "Cloud tier for pods without runpod.io/cloud-type.",
    ),
    (
        "--datacenter-ids",
        "datacenter_ids",
        str,
        "Comma-separated data centers instances may use (empty: any); one where the GPU "
        "catalog offers no GPU type is named in a warning.",
    ),
    ("--container-disk-gb", "container_disk_gb", int, "Default container disk in GB."),
    ("--max-instances", "max_instances", int, "Most owned instances at once."),
    ("--max-hourly-spend", "max_hourly_spend", float, "Most USD/h all owned instances cost."),
    (
        "--max-creates-per-tick",
        "max_creates_per_tick",
        int,
        "Most create calls in one tick; also bounded by our share of the remaining RunPod "
        "rate budget.",
    ),
    (
        "--max-pending-time",
        "max_pending_time",
        float,
        "Seconds a pod may wait for an instance before it fails.",
    ),
    (
        "--max-pending-time-before-offload",
        "max_pending_time_before_offload",
        float,
        "Seconds a managed pod may be unschedulable before it is offloaded to RunPod.",
    ),
    (
        "--pending-threshold",
        "pending_threshold",
        int,
        "Offload the oldest unschedulable managed pods beyond this many (0: off).",
    ),
    (
        "--create-grace-time",
        "create_grace_time",
        float,
        "Seconds an in-doubt create may take to appear before creating again.",
    ),
    (
        "--orphan-grace-time",
        "orphan_grace_time",
        float,
        "Seconds an instance without a pod must be old before it is terminated.",
    ),
    ("--catalog-ttl", "catalog_ttl", float, "Seconds the GPU catalog is cached."),
    (
        "--exit-code-timeout",
        "exit_code_timeout",
        float,
        "Seconds a stopped batch instance's exit code may stay unreadable before the "
        "instance is terminated anyway and its pod fails with ExitCodeUnknown.",
    ),
    (
        "--cost-history",
        "cost_history_days",
        int,
        "Days finished pods' mappings and billing records are kept, for `reconciler cost` "
        "and the leak audit.",
    ),
    ("--node-gpus", "node_gpus", int, "nvidia.com/gpu capacity of the virtual node."),
    ("--node-pods", "node_pods", int, "Pod capacity of the virtual node."),
    (
        "--node-cpu",
        "node_cpu",
        str,
        "CPU capacity of the virtual node: any Kubernetes quantity, written in the API "
        "server's canonical form (4k, not 4000).",
    ),
    (
        "--node-memory",
        "node_memory",
        str,
        "Memory capacity of the virtual node: any Kubernetes quantity, written in the API "
        "server's canonical form.",
    ),
    (
        "--tick-deadline",
        "tick_deadline",
        float,
        "Seconds a tick may take: later creates wait for the next tick, and no RunPod "
        "request runs past it.",
    ),
    (
        "--kubelet-address",
        "kubelet_address",
        str,
        "The virtual node's InternalIP: this reconciler's pod IP (default: $POD_IP).",
    ),
    (
        "--kubelet-port",
        "kubelet_port",
        click.IntRange(0, 65535),
        "Port of the kubelet endpoint (kubectl logs) the virtual node advertises (0: none).",
    ),
    (
        "--kubelet-tls-secret",
        "kubelet_tls_secret",
        str,
        "[namespace/]name of a TLS Secret for the kubelet endpoint (default: self-signed).",
    ),
    (
        "--log-keep-lines",
        "log_keep_lines",
        click.IntRange(0, 5000),
        "Lines of a pod's log kept after its instance ends.",
    ),
    (
        "--log-keep-bytes",
        "log_keep_bytes",
        click.IntRange(0),
        "Most bytes of a pod's log kept after its instance ends.",
    ),
]
# Flags that fall back to a variable the pod's downward API sets.
_FALLBACK_ENV = {"kubelet_address": "POD_IP"}


class SettingsError(click.ClickException):
    """A setting out of its range: one line naming the flag or variable, exit code 2 (a
    usage error), before anything starts."""

    exit_code = 2


def envvar_of(flag: str) -> str:
    return "RECONCILER_" + flag.lstrip("-").replace("-", "_").upper()


def setting_error(flag: str, name: str, problem: str) -> SettingsError:
    """The error for the flag `flag` (parameter `name`), naming where its value came from."""
    context = click.get_current_context(silent=True)
    source = context.get_parameter_source(name) if context is not None else None
    if source is click.core.ParameterSource.ENVIRONMENT:
        where = f"environment variable {envvar_of(flag)}"
    else:
        where = f"{flag} (or {envvar_of(flag)})"
    return SettingsError(f"invalid {where}: {problem}")


def settings_options(command: F) -> F:
    for flag, name, kind, help_text in reversed(SETTINGS_FLAGS):
        default = getattr(_DEFAULTS, name)
        if isinstance(default, tuple):
            default = ",".join(default)
        elif isinstance(default, Cloud):
            default = default.value
        envvar: str | list[str] = envvar_of(flag)
        if name in _FALLBACK_ENV:
            envvar = [str(envvar), _FALLBACK_ENV[name]]
        command = click.option(
            flag,
            name,
            type=kind,
            default=default,
            envvar=envvar,
            show_envvar=True,
            show_default=True,
            help=help_text,
        )(command)
    return command


def settings_from(options: dict[str, Any]) -> Settings:
    """Pops the settings flags out of a command's keyword arguments."""
    values = {name: options.pop(name) for _, name, _, _ in SETTINGS_FLAGS}
    values["cloud"] = Cloud(values["cloud"])
    values["datacenter_ids"] = tuple(
        part.strip() for part in values["datacenter_ids"].split(",") if part.strip()
    )
    if not values["node_name"]:
        values["node_name"] = DEFAULT_NODE_NAME
    for name, flag in (("node_cpu", "--node-cpu"), ("node_memory", "--node-memory")):
        try:
            values[name] = canonical_quantity(values[name])
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint=flag) from None
    values["kubelet_address"] = _ip_address(values["kubelet_address"].strip())
    settings = Settings(**values)
    flags = {name: flag for flag, name, _, _ in SETTINGS_FLAGS}
    for name, problem in settings_problems(settings):
        raise setting_error(flags[name], name, problem)
    return settings


def _ip_address(text: str) -> str:
    """An InternalIP must be an IP: the API server dials it for logs and exec."""
    if not text:
        return ""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an IP address", param_hint="--kubelet-address"
        ) from None
