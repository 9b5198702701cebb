"""`reconciler sync --once` through Click's runner against a sandbox's simulators."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from click.testing import CliRunner, Result

from reconciler.cli.commands import main
from reconciler.demo.sandbox import API_KEY, Sandbox


def sync_once(
    box: Sandbox,
    *args: str,
    runpod_url: str | None = None,
    env: Mapping[str, str] | None = None,
    global_args: Sequence[str] = (),
) -> Result:
    """One tick: `global_args` go before `sync` (e.g. --log-format), `args` after it;
    `env` is added to the RunPod key's."""
    return CliRunner().invoke(
        main,
        [
            *global_args,
            "--database-url",
            box.database_url,
            "sync",
            "--once",
            "--kubeconfig",
            box.kubeconfig,
            "--runpod-url",
            runpod_url or box.runpod_sim.base_url,
            *args,
        ],
        env={"RUNPOD_API_KEY": API_KEY, **(env or {})},
    )
