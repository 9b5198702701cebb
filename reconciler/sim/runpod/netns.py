"""A simulated pod's own network and `/etc/hosts`, as a container has them.

Each pod gets a network namespace with its own loopback, and a mount namespace in which
`/etc/hosts` is a bind mount of the pod's own hosts file (as Docker mounts it: a file
written in place changes, a rename onto it fails with EBUSY). A command the pod's sshd
runs enters both, so it resolves names from the pod's file and reaches what listens on
the pod's loopback, and never the machine's: the machine's own `/etc/hosts` and
loopback are untouched. A namespace lives as long as a holder process (`sleep`) in it.

The sshd's remote forwards listen inside the pod's network namespace: the socket is made
by a thread that has entered it (`setns` moves only the calling thread).
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading
from pathlib import Path

_CLONE_NEWNET = 0x40000000
_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


class PodNetwork:
    """One pod's namespaces, held by a process; `close()` ends them."""

    def __init__(self, sandbox: Path, hostname: str) -> None:
        self.hosts = sandbox / ".etc-hosts"
        self.hosts.write_text(f"{_HOSTS}127.0.1.1\t{hostname}\n")
        script = (
            'ip link set lo up && mount --bind "$0" /etc/hosts && echo ready && exec sleep infinity'
        )
        self._holder = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                str(self.hosts),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._holder.stdout is not None
        if self._holder.stdout.readline().strip() != b"ready":
            error = self._holder.stderr.read().decode() if self._holder.stderr else ""
            self._holder.kill()
            raise OSError(f"the pod's namespaces could not be made: {error.strip()}")
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self._holder.pid

    def command(self, argv: tuple[str, ...], cwd: Path) -> tuple[str, ...]:
        """`argv` run inside the pod's namespaces, in `cwd`."""
        return ("nsenter", f"--target={self.pid}", "--net", "--mount", f"--wd={cwd}", *argv)

    def listen(self, host: str, port: int) -> socket.socket:
        """A listening TCP socket on the pod's own `host`:`port` (0: any free port)."""
        made: list[socket.socket] = []
        failed: list[BaseException] = []

        def inside() -> None:
            try:
                _enter(f"/proc/{self.pid}/ns/net")
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((host, port))
                    sock.listen(128)
                    sock.setblocking(False)
                except BaseException:
                    sock.close()
                    raise
                made.append(sock)
            except BaseException as error:
                failed.append(error)

        thread = threading.Thread(target=inside, name="runpod-sim-netns")
        with self._lock:
            thread.start()
            thread.join()
        if failed:
            raise failed[0]
        return made[0]

    def close(self) -> None:
        if self._holder.poll() is None:
            self._holder.kill()
        self._holder.wait()
        for stream in (self._holder.stdout, self._holder.stderr):
            if stream is not None:
                stream.close()


def _enter(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns into the pod's network namespace")
    finally:
        os.close(fd)


def bind_address(requested: str, gateway_ports: str) -> tuple[str, ...]:
    """Where OpenSSH's sshd listens for a `tcpip-forward` (channels.c
    `channel_fwd_bind_addr`): with `GatewayPorts no` (the default) an explicit
    `127.0.0.1` or `::1` is kept and any other address becomes loopback (both
    families); `yes` binds the wildcard whatever was asked; `clientspecified` keeps the
    address asked for, "" or "*" being the wildcard."""
    if gateway_ports == "yes" or (gateway_ports == "clientspecified" and requested in ("", "*")):
        return ("0.0.0.0",)
    if gateway_ports == "clientspecified" and requested != "localhost":
        return (requested,)
    if requested in ("127.0.0.1", "::1"):
        return (requested,)
    return ("127.0.0.1", "::1")
