"""`reconciler exec NAMESPACE/POD -- CMD...`: a command in a pod's instance over SSH, as
`kubectl exec` runs it through the kubelet endpoint; for CronJob mode, where no endpoint
runs. It needs the reconciler's key (`--ssh-key-file`, or the Secret the reconciler
keeps it in, `--ssh-key-secret`) and its database (which instance is the pod's)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import termios
import tty as ttymode
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast

import click

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.cluster import default_namespace
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.ssh.client import SshConnector, SshError, run_command
from reconciler.cli.connection import (
    connection_options,
    reaching,
)
from reconciler.cli.options import some_settings_options
from reconciler.cli.pod_argument import METAVAR, namespace_option, pod_of
from reconciler.core.translate.ssh import remote_command
from reconciler.runtime import process_log
from reconciler.runtime.kubelet.endpoint import stored_host_keys
from reconciler.runtime.kubelet.exec import SshTargets, StreamError
from reconciler.runtime.kubelet.sshkey import SshKeyError, load_identity, secret_identity
from reconciler.runtime.process.wiring import open_store
from reconciler.runtime.tick.engine import utcnow


@click.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("target", metavar=METAVAR)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@namespace_option
@click.option("--stdin", "-i", is_flag=True, help="Pass this process's stdin to the command.")
@click.option("--tty", "-t", is_flag=True, help="Run the command on a pty of this terminal's size.")
@click.option(
    "--container", "-c", default="", help="The container (default: the one that runs on RunPod)."
)
@click.option(
    "--ssh-key-file",
    envvar="RECONCILER_SSH_KEY_FILE",
    default="",
    help="The reconciler's SSH private key (the one its instances were created with).",
)
@click.option(
    "--ssh-key-secret",
    envvar="RECONCILER_SSH_KEY_SECRET",
    default="",
    help="Or the Secret, in the reconciler's namespace, that the reconciler keeps it in.",
)
@click.option(
    "--ssh-proxy-command",
    envvar="RECONCILER_SSH_PROXY_COMMAND",
    default="",
    help="An OpenSSH ProxyCommand (%h host, %p port) to reach the instance's sshd through "
    "(empty: connect directly).",
)
@connection_options()
@some_settings_options("node_name")
@click.pass_obj
def exec_command(
    obj: Any,
    target: str,
    command: tuple[str, ...],
    namespace: str | None,
    stdin: bool,
    tty: bool,
    container: str,
    ssh_key_file: str,
    ssh_key_secret: str,
    ssh_proxy_command: str,
    kubeconfig: str | None,
    kube_context: str | None,
    runpod_url: str,
    runpod_api_key: str,
    node_name: str,
) -> None:
    """Run CMD in a pod's instance and exit with its exit code."""
    process_log.register_secret(runpod_api_key)
    namespace, pod = pod_of(target, namespace)
    if not (ssh_key_file or ssh_key_secret):
        raise click.UsageError("give the reconciler's key: --ssh-key-file or --ssh-key-secret")
    try:
        with reaching():
            kube = KubeClient.from_config(kubeconfig, kube_context)
            identity = (
                load_identity(ssh_key_file)
                if ssh_key_file
                else secret_identity(kube, default_namespace(), ssh_key_secret, make=False)
            )
            with RunPodClient(runpod_api_key, runpod_url) as runpod:
                store = open_store(obj.database_url, upgrade=False)
                where = SshTargets(node_name, kube, store, runpod).resolve(
                    namespace, pod, container
                )
                # The host keys the endpoint and earlier runs saw, kept in the database.
                ssh = SshConnector(
                    identity.private_pem, stored_host_keys(store, utcnow), ssh_proxy_command
                )
                transport = ssh.connect(where.instance_id, where.host, where.port)
        try:
            with (
                LocalTerminal.opened(tty, raw=stdin) as terminal,
                _unbuffered_stdin() if stdin else contextlib.nullcontext() as source,
            ):
                code = run_command(
                    transport,
                    remote_command(command, where.workdir),
                    source,
                    sys.stdout.buffer,
                    sys.stderr.buffer,
                    terminal,
                )
        finally:
            transport.close()
    except (SshKeyError, SshError, StreamError) as exc:
        raise click.ClickException(getattr(exc, "message", str(exc))) from None
    sys.exit(code)


def _unbuffered_stdin() -> BinaryIO:
    # A read of stdin still waiting when the command ends must hold no buffer's lock, or
    # the interpreter aborts at exit (a terminal's stdin never ends by itself).
    return cast(BinaryIO, open(sys.stdin.fileno(), "rb", buffering=0, closefd=False))


class LocalTerminal:
    """This process's terminal, for `-t`: its size (80x24 when there is none), its
    SIGWINCH, and raw mode on stdin while the command runs with `-i`, so keys go to the
    remote pty as typed."""

    @classmethod
    @contextlib.contextmanager
    def opened(cls, tty: bool, raw: bool) -> Iterator[LocalTerminal | None]:
        if not tty:
            yield None
            return
        terminal = cls()
        saved = None
        if raw and sys.stdin.isatty():
            saved = termios.tcgetattr(sys.stdin.fileno())
            ttymode.setraw(sys.stdin.fileno())
        try:
            yield terminal
        finally:
            if saved is not None:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
            signal.signal(signal.SIGWINCH, signal.SIG_DFL)

    def size(self) -> tuple[int, int]:
        for stream in (sys.stdout, sys.stdin):
            with contextlib.suppress(OSError, ValueError):
                size = os.get_terminal_size(stream.fileno())
                return size.columns, size.lines
        return 80, 24

    def on_resize(self, resize: Callable[[int, int], None]) -> None:
        signal.signal(signal.SIGWINCH, lambda *_: resize(*self.size()))
