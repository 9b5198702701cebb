"""`kubectl exec` on a pod on RunPod: the API server's SPDY streams, carried over SSH.

    /exec/{namespace}/{pod}/{container}?command=...&input=1&output=1&error=1&tty=1

Before the upgrade, as a kubelet does, a bad request or a pod we cannot reach gets an
HTTP error that the API server passes on to kubectl: unknown pod (404), no SSH access
(400), no sshd answering (500, within 10 s, saying what the image needs). Then the
client opens its streams (`error`, `stdin`, `stdout`, `stderr`, `resize`), the command
runs with its argv quoted exactly (`core.translate.ssh.remote_command`), on a pty sized by
the resize stream with `-t`, stdin's end is passed on, and the remote exit status is
written on the error stream as a kubelet writes it.

Where the sshd is comes from RunPod, never from the pod: anyone who may edit the pod
may write its annotations (`runpod.io/port-mappings` is the tick's output, for people).
The instance is the one our own row holds for the pod; its address is the one the last
tick's list gave for it (no RunPod request), or else one `GET /v2/pods/{id}` of that id
asks (before the first tick, or while the list does not show it running). An instance
whose tags name another pod or another owner is refused. A gang pod reaches its Instant
Cluster member's own sshd the same way (`kubelet/members.py`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import paramiko

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.runpod import errors as runpod_errors
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.spdy.session import Session, Stream
from reconciler.adapters.ssh.client import (
    CONNECT_SECONDS,
    SessionBroke,
    SshConnector,
    SshError,
    exit_code,
)
from reconciler.adapters.store.repository import Store
from reconciler.core.domain import KubeObject
from reconciler.core.kubenames import name_problem
from reconciler.core.logs.starting import is_starting, starting_message
from reconciler.core.mapping import MappingState
from reconciler.core.node import remotecommand as rc
from reconciler.core.pods import podinfo
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.ssh import (
    SSH_PORT,
    SshAddress,
    remote_command,
    runs_for,
    ssh_address,
)
from reconciler.runtime.kubelet.members import MemberUnreachable, member_address

log = logging.getLogger(__name__)

STREAMS_SECONDS = 30.0
"""How long the client has to open its streams after the upgrade (the kubelet's
streamCreationTimeout)."""
GOODBYE_SECONDS = 5.0
"""After the exit status, how long the client has to read it and hang up."""
FIRST_SIZE_SECONDS = 2.0
"""How long a `-t` exec waits for the terminal's size before starting on 80x24."""
EXEC_STREAMS = 8
"""Streams an exec session may hold open: the protocol's five, and room for a client
that opens one it does not need (reset at once)."""
_READ = 32 * 1024
ATTACH_UNSUPPORTED = (
    "attach is not supported for pods on RunPod: the container's main process (PID 1) "
    "has no streams reachable over SSH; use kubectl exec -it POD -- sh for a shell, and "
    "kubectl logs -f for the main process's output"
)


class StreamError(Exception):
    """A request refused before the upgrade: HTTP status and a sentence for kubectl."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Target:
    instance_id: str
    host: str
    port: int
    workdir: str = ""
    """The container's `workingDir`, where exec runs commands (empty: root's home)."""


class SshTargets:
    """Which instance a pod's exec goes to, and where its sshd listens."""

    def __init__(
        self,
        node_name: str,
        kube: KubeClient,
        store: Store,
        runpod: RunPodClient,
        owner_id: str | None = None,
        listed: Callable[[str], SshAddress | None] = lambda _uid: None,
    ) -> None:
        """`owner_id`: ours, which an instance's owner tag must not contradict (None: not
        known here, as in `reconciler exec`); `listed`: a pod UID's address as the last
        tick's list gave it."""
        self.node_name, self.kube, self.store, self.runpod = node_name, kube, store, runpod
        self.owner_id, self.listed = owner_id, listed

    def resolve(self, namespace: str, name: str, container: str) -> Target:
        names = [("namespace", namespace), ("pod name", name)]
        names += [("container name", container)] if container else []  # port-forward: none
        for kind, value in names:
            if (problem := name_problem(kind, value)) is not None:
                raise StreamError(400, problem)
        pod = self.kube.pods.find(namespace, name)
        if pod is None or pod.get("spec", {}).get("nodeName") != self.node_name:
            raise StreamError(404, f'pods "{name}" not found on node "{self.node_name}"')
        try:
            chosen = choose_container(pod)
        except TranslationError as exc:
            raise StreamError(400, f'pod "{name}" has no container on RunPod: {exc}') from exc
        runs = chosen["name"]
        if container and container != runs:
            raise StreamError(
                400,
                f'container "{container}" of pod "{name}" does not run: only "{runs}" '
                "runs on RunPod",
            )
        uid = str(pod["metadata"]["uid"])
        address = self.listed(uid)
        if podinfo.asks_for_cluster(pod):
            address = address or self._member(pod, runs)
        else:
            row = self.store.row(uid)
            if row is None or row.instance_id is None or row.state is not MappingState.RUNNING:
                raise StreamError(400, f'container "{runs}" in pod "{name}" is not running')
            if address is None or address.instance_id != row.instance_id:
                address = self._asked(row.instance_id, uid, (runs, name))
        workdir = str(chosen.get("workingDir") or "")
        return Target(address.instance_id, address.host, address.port, workdir)

    def _member(self, pod: KubeObject, runs: str) -> SshAddress:
        """A gang pod's member, read by id from the cluster our row names (the last
        tick's list did not pair them)."""
        try:
            return member_address(pod, runs, self.store, self.runpod, self.owner_id)
        except MemberUnreachable as exc:
            raise StreamError(exc.status, exc.message) from exc

    def _asked(self, instance_id: str, pod_uid: str, names: tuple[str, str]) -> SshAddress:
        """The instance's sshd as RunPod reports it (one GET); `names`: the container
        and the pod, for the refusals."""
        try:
            instance = self.runpod.instances.get(instance_id)
        except runpod_errors.RunPodError as exc:
            raise StreamError(502, f"RunPod did not say where the pod's sshd is: {exc}") from exc
        if not runs_for(instance, pod_uid, self.owner_id):
            log.warning(
                "refused exec: RunPod instance %s, which the row of pod %s names, is tagged "
                "for another pod or owner",
                instance_id,
                pod_uid,
            )
            raise StreamError(400, f"RunPod instance {instance_id} does not run this pod")
        address = ssh_address(instance)
        if address is not None:
            return address
        if SSH_PORT not in instance.ports:
            raise StreamError(
                400,
                f"RunPod instance {instance_id} publishes no {SSH_PORT} (created without SSH "
                "access): exec needs the reconciler's SSH key (--ssh-key-secret or "
                "--ssh-key-file) set when the pod is created; "
                "delete the pod to have it recreated with SSH",
            )
        if is_starting(instance):
            raise StreamError(400, starting_message(*names, instance))
        raise StreamError(
            400,
            f'container "{names[0]}" in pod "{names[1]}" is not running: RunPod instance '
            f"{instance_id} is {instance.status.value}",
        )


class Upgrader(Protocol):
    """The HTTP side: answers an error, or switches protocols and hands over the socket."""

    def refuse(self, status: int, message: str, headers: Mapping[str, str] = ...) -> None: ...

    def upgrade(self, protocol: str) -> Session: ...


def serve_exec(
    http: Upgrader,
    headers: Any,
    query: Mapping[str, Sequence[str]],
    target: Callable[[], Target],
    ssh: SshConnector,
) -> None:
    try:
        request = rc.parse_exec(query)
    except rc.ExecRequestError as exc:
        return http.refuse(400, str(exc))
    protocol = handshake(http, headers, rc.EXEC_PROTOCOLS)
    if protocol is None:
        return None
    reached = reach(http, target, ssh, "exec")
    if reached is None:
        return None
    transport, where = reached
    try:
        session = http.upgrade(protocol)
        _run(session, protocol, request, transport, remote_command(request.command, where.workdir))
    finally:
        transport.close()
    return None


def reach(
    http: Upgrader, target: Callable[[], Target], ssh: SshConnector, what: str
) -> tuple[paramiko.Transport, Target] | None:
    """An SSH transport to the pod's instance and where it is, or None once the caller
    got its refusal."""
    try:
        where = target()
        return ssh.connect(where.instance_id, where.host, where.port), where
    except StreamError as exc:
        http.refuse(exc.status, exc.message)
    except SshError as exc:
        http.refuse(500, exc.message)
    except Exception:  # a caller gets a sentence, never a dropped connection
        log.exception("could not reach the instance for %s", what)
        http.refuse(500, f"{what} could not start; the reconciler's log says why")
    return None


def handshake(http: Upgrader, headers: Any, served: Sequence[str]) -> str | None:
    """The protocol to speak, as Kubernetes' own handshake picks it, or None when the
    request was refused."""
    connection = str(headers.get("Connection", "")).lower()
    upgrade = str(headers.get("Upgrade", "")).lower()
    if "upgrade" not in connection or "spdy/3.1" not in upgrade:
        http.refuse(400, "unable to upgrade: missing upgrade headers in request (SPDY/3.1)")
        return None
    offered = [
        p.strip()
        for value in headers.get_all("X-Stream-Protocol-Version") or []
        for p in value.split(",")
    ]
    if not offered:
        http.refuse(400, "unable to upgrade: X-Stream-Protocol-Version is required")
        return None
    protocol = rc.negotiate(offered, served)
    if protocol is None:
        http.refuse(
            403,
            f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
            f"server accepts {list(served)}",
            {"X-Accepted-Stream-Protocol-Versions": ", ".join(served)},
        )
        return None
    return protocol


def _run(
    session: Session,
    protocol: str,
    request: rc.ExecRequest,
    transport: paramiko.Transport,
    command: str,
) -> None:
    streams = _streams(session, request.streams())
    if streams is None:
        session.close()
        return
    session.stop_accepting()
    try:
        code = _command(session, streams, request, transport, command)
        status = rc.exit_status(protocol, request.command, code)
    except (paramiko.SSHException, OSError, EOFError, SessionBroke) as exc:
        status = rc.internal_error(protocol, f"the SSH session to the instance broke: {exc}")
    with contextlib.suppress(ConnectionError):
        for name in (rc.STREAM_STDOUT, rc.STREAM_STDERR):
            if name in streams:
                streams[name].close()
        streams[rc.STREAM_ERROR].write(status)
        streams[rc.STREAM_ERROR].close()
    session.wait(GOODBYE_SECONDS)
    session.close()


def _streams(session: Session, wanted: frozenset[str]) -> dict[str, Stream] | None:
    """The streams the request needs, as the client opens them; others are reset."""
    streams: dict[str, Stream] = {}
    while set(streams) != wanted:
        stream = session.accept(STREAMS_SECONDS)
        if stream is None:
            log.info("an exec client did not open its streams in time")
            return None
        kind = stream.header("streamType")
        if kind in wanted and kind not in streams:
            streams[kind] = stream
        else:
            stream.reset()
    return streams


def _command(
    session: Session,
    streams: dict[str, Stream],
    request: rc.ExecRequest,
    transport: paramiko.Transport,
    command: str,
) -> int:
    channel = transport.open_session(timeout=CONNECT_SECONDS)
    # The client gone (Ctrl-C), idle too long or broken: the command's channel goes at
    # once, as a kubelet ends the exec, rather than when the command ends by itself.
    session.on_end(lambda: _close(channel))
    resize, sizes = streams.get(rc.STREAM_RESIZE), rc.ResizeDecoder()
    if request.tty:
        size = _first_size(resize, sizes) if resize else None
        width, height = (size.width, size.height) if size else (80, 24)
        channel.get_pty(term="xterm", width=width, height=height)
    channel.exec_command(command)
    # stdin and resize pumps end with the client's streams, not with the command
    if rc.STREAM_STDIN in streams:
        _thread(_pump_stdin, streams[rc.STREAM_STDIN], channel, request.tty)
    if resize is not None:
        _thread(_pump_resize, resize, sizes, channel)
    stderr = _thread(_pump_out, channel.recv_stderr, streams.get(rc.STREAM_STDERR))
    _pump_out(channel.recv, streams.get(rc.STREAM_STDOUT))
    stderr.join()
    return exit_code(channel)


def _close(channel: paramiko.Channel) -> None:
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):  # gone already
        channel.close()


def _thread(target: Callable[..., None], *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name="exec-pump", daemon=True)
    thread.start()
    return thread


def _pump_out(recv: Callable[[int], bytes], stream: Stream | None) -> None:
    while data := recv(_READ):
        if stream is not None:
            with contextlib.suppress(ConnectionError):
                stream.write(data)


def _pump_stdin(stream: Stream, channel: paramiko.Channel, tty: bool) -> None:
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        while data := stream.read():
            channel.sendall(data)
        # The client's end of input, passed on: on a pty as a terminal ends input (^D),
        # since a channel that sent EOF takes no more window changes (paramiko refuses
        # them), and the command's terminal may still be resized.
        if tty:
            channel.sendall(b"\x04")
        else:
            channel.shutdown_write()


def _first_size(stream: Stream, decoder: rc.ResizeDecoder) -> rc.TerminalSize | None:
    """The terminal's size, which kubectl sends as soon as its streams are open: the pty
    starts with it, so the command never sees a default size first."""
    while (data := stream.read(FIRST_SIZE_SECONDS)) is not None and data:
        sizes = list(decoder.feed(data))
        if sizes:
            return sizes[-1]
    return None


def _pump_resize(stream: Stream, decoder: rc.ResizeDecoder, channel: paramiko.Channel) -> None:
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        while data := stream.read():
            for size in decoder.feed(data):
                channel.resize_pty(width=size.width, height=size.height)
