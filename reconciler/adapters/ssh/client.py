"""Connections to an instance's sshd, with the reconciler's key and each instance's host
key remembered at first contact.

paramiko, not asyncssh: the kubelet endpoint serves each request on its own thread,
and paramiko's blocking channels fit that without an event loop (the RunPod simulator's
sshd is asyncssh, so the two sides are different implementations).

Every failure is an `SshError` whose message says what happened and what to do; none
carries key material. A connection that fails before SSH is spoken (refused, no answer,
something else than sshd listening) gets one sentence whatever the cause, so the answer
tells a caller nothing about what listens where; the cause goes to our log.
"""

from __future__ import annotations

import contextlib
import io
import logging
import shlex
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import BinaryIO, Protocol

import paramiko

log = logging.getLogger(__name__)

USER = "root"
_CHUNK = 32 * 1024
CONNECT_SECONDS = 8.0
"""Connecting, the SSH handshake and authentication each wait at most this long, so a
pod without sshd answers within 10 seconds."""

NO_SSHD = (
    "no SSH server answers on the pod's instance: its image must start sshd "
    "from the PUBLIC_KEY variable, as RunPod's official images do (install openssh-server "
    "and run RunPod's start script, or start sshd with PUBLIC_KEY in "
    "/root/.ssh/authorized_keys), and its address must be reachable from here (else "
    "--ssh-proxy-command)"
)


class SshError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionBroke(SshError):
    """The connection ended before the command's exit status came: its end is unknown,
    never a success."""


class HostKeyChanged(SshError):
    """The instance shows another host key than at first contact: refused."""


class HostKeys:
    """Each instance's host key, remembered at first contact (trust on first use): in
    memory, and through `remember` when given (the state store's: the key kept for an
    instance, keeping the one offered if none was), so a restart still knows it."""

    def __init__(self, remember: Callable[[str, str], str] | None = None) -> None:
        self._keys: dict[str, str] = {}
        self._remember = remember
        self._lock = threading.Lock()

    def check(self, instance_id: str, key: paramiko.PKey) -> None:
        seen = f"{key.get_name()} {key.get_base64()}"
        with self._lock:
            known = self._keys.get(instance_id)
            if known is None:
                known = self._remember(instance_id, seen) if self._remember else seen
                self._keys[instance_id] = known
        if known != seen:
            raise HostKeyChanged(
                f"the host key of RunPod instance {instance_id} changed since first contact "
                f"(now {key.get_name()} {key.fingerprint}): refused, as a man in the middle "
                "would look the same"
            )


class SshConnector:
    """`proxy_command` (OpenSSH's ProxyCommand, `%h` and `%p` the sshd's host and port):
    each connection goes through that command's stdin and stdout; empty: a direct TCP
    connection."""

    def __init__(self, private_pem: bytes, host_keys: HostKeys, proxy_command: str = "") -> None:
        try:
            self._key = paramiko.Ed25519Key.from_private_key(io.StringIO(private_pem.decode()))
        except (paramiko.SSHException, ValueError, UnicodeDecodeError) as exc:
            raise SshError("the reconciler's SSH key is not an ed25519 private key") from exc
        self._host_keys = host_keys
        self._proxy_command = proxy_command

    def connect(self, instance_id: str, host: str, port: int) -> paramiko.Transport:
        """An authenticated transport to the instance's sshd, or SshError."""
        try:
            sock = self._dial(host, port)
        except (OSError, ValueError) as exc:
            raise _no_sshd(instance_id, host, port, exc) from None
        transport = paramiko.Transport(sock)
        try:
            transport.banner_timeout = transport.auth_timeout = CONNECT_SECONDS
            transport.start_client(timeout=CONNECT_SECONDS)
            self._host_keys.check(instance_id, transport.get_remote_server_key())
            transport.auth_publickey(USER, self._key)
        except HostKeyChanged:
            transport.close()
            raise
        except paramiko.AuthenticationException:
            transport.close()
            raise SshError(
                f"the sshd of RunPod instance {instance_id} refused the reconciler's key: the "
                "image must add PUBLIC_KEY to root's authorized_keys"
            ) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            transport.close()
            raise _no_sshd(instance_id, host, port, exc) from None
        return transport

    def _dial(self, host: str, port: int) -> socket.socket:
        if not self._proxy_command:
            return socket.create_connection((host, port), timeout=CONNECT_SECONDS)
        return _proxied(self._proxy_command, host, port)


def _proxied(command: str, host: str, port: int) -> socket.socket:
    """A socket whose other end is the proxy command's stdin and stdout, as OpenSSH
    runs a ProxyCommand: a real socket, so its end and timeouts read as a TCP
    connection's (paramiko's own ProxyCommand never sees the command's end). Each of %h
    and %p is one word of the command, whatever the address holds; the command's stderr
    is ours."""
    words = [word.replace("%h", host).replace("%p", str(port)) for word in shlex.split(command)]
    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            words, stdin=theirs.fileno(), stdout=theirs.fileno(), start_new_session=True
        )
    except OSError:
        ours.close()
        raise
    finally:
        theirs.close()
    threading.Thread(target=process.wait, daemon=True).start()  # reaped when it ends
    ours.settimeout(CONNECT_SECONDS)
    return ours


def _no_sshd(instance_id: str, host: str, port: int, exc: BaseException) -> SshError:
    log.warning("no SSH with RunPod instance %s at %s:%d: %s", instance_id, host, port, _why(exc))
    return SshError(NO_SSHD)


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "no answer"
    return str(exc) or type(exc).__name__


class Terminal(Protocol):
    """The local terminal a command's pty follows (`reconciler exec -t`)."""

    def size(self) -> tuple[int, int]:
        """(columns, rows) now."""
        ...

    def on_resize(self, resize: Callable[[int, int], None]) -> None:
        """Have `resize(columns, rows)` called whenever the terminal's size changes."""
        ...


def run_command(
    transport: paramiko.Transport,
    command: str,
    stdin: BinaryIO | None,
    stdout: BinaryIO,
    stderr: BinaryIO,
    terminal: Terminal | None = None,
) -> int:
    """Runs `command` (one shell command line) and copies the three streams; stdin's end
    is passed on. With a `terminal`, on a pty of its size, resized with it (stderr then
    comes through the pty, as with `ssh -t`). Returns the remote exit status."""
    channel = transport.open_session(timeout=CONNECT_SECONDS)
    if terminal is not None:
        columns, rows = terminal.size()
        channel.get_pty(term="xterm", width=columns, height=rows)
        terminal.on_resize(lambda c, r: channel.resize_pty(width=c, height=r))
    channel.exec_command(command)
    if stdin is not None:
        threading.Thread(target=_feed, args=(stdin, channel), daemon=True).start()
    else:
        channel.shutdown_write()
    errors = threading.Thread(target=_copy, args=(channel.recv_stderr, stderr), daemon=True)
    errors.start()
    _copy(channel.recv, stdout)
    errors.join()
    return exit_code(channel)


def exit_code(channel: paramiko.Channel) -> int:
    """The command's exit status, once its output has ended."""
    code = channel.recv_exit_status()
    channel.close()
    if code < 0:  # paramiko's answer for a channel closed without one
        raise SessionBroke("the connection closed before the command's exit status came")
    return code


def _feed(source: BinaryIO, channel: paramiko.Channel) -> None:
    read = getattr(source, "read1", source.read)  # read1: what has come, without waiting
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        while data := read(_CHUNK):
            channel.sendall(data)
        channel.shutdown_write()


def _copy(recv: Callable[[int], bytes], sink: BinaryIO) -> None:
    while data := recv(_CHUNK):
        sink.write(data)
        sink.flush()
