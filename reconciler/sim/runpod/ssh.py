"""The sshd of simulated RunPod pods: a real SSH server per pod on 127.0.0.1.

RunPod's official images start sshd when the pod's env carries `PUBLIC_KEY`, which
`startSsh` puts there. A simulated pod created with both gets a server (asyncssh, a
different implementation from the product's paramiko client, so neither side's
assumptions pass unchecked) that accepts those keys for `root` and only while the pod
is RUNNING; a connection at any other time is dropped.

- exec and shell run `sh -c` in the pod's sandbox directory, which stands for the pod's
  filesystem: `/tmp`, `/workspace` and `/root` in a command are read relative to it (a
  command runs with the sandbox as its working directory), so `tar cf - /tmp/x` names
  its members `tmp/x` as in a container. A network volume the pod mounts is a link at
  its mount path inside the sandbox to the volume's directory, and the path's first
  folder is read relative to the sandbox too. A pty, when asked for, is a real one, sized by
  the client's requests.
- Flow control as OpenSSH's sshd: input the command does not read stops being taken
  in (the client's window closes), and output the client does not read stops being read
  from the command (it blocks in its pipe or terminal), so a stalled session holds a
  few hundred KiB, never its command's whole output.
- direct-tcpip to the pod's loopback answers HTTP GET on the ports `serve()` set up;
  any other destination is refused, as an unused port in a container is.
- A pod has its own network and `/etc/hosts` (`netns`): commands run inside
  them, and `tcpip-forward` listens there where OpenSSH's sshd would
  (`forwards`; `GatewayPorts no` unless `gateway_ports` says otherwise).
- `set_running(False)` closes the listener (an image that runs no sshd refuses the
  connection); `set_running(True, new_host_key=True)` comes back with another host key
  (a rebuilt machine).

One asyncio loop in one thread serves every pod of a simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import signal
import struct
import tempfile
import termios
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from reconciler.sim.runpod.forwards import open_forward
from reconciler.sim.runpod.netns import PodNetwork

_TIMEOUT = 30.0
_FOLDERS = ("tmp", "workspace", "root")
_READ = 65536
_HELD = 256 * 1024
"""Input bytes waiting for a command that does not read before the channel stops taking
more (the client's window then closes, as with OpenSSH's sshd)."""
_OUTPUT_HELD = 64 * 1024
"""Output bytes waiting for a client whose window is full before the command's output
stops being read (it then waits in its pipe or terminal, and the command blocks, as
with OpenSSH's sshd)."""


def sandboxed(command: str, folders: tuple[str, ...] = _FOLDERS) -> str:
    """The command with the pod's own top-level folders read relative to its sandbox."""
    names = "|".join(re.escape(folder) for folder in folders)
    mapped = re.compile(rf"(?<![\w./-])/({names})(?=[/\s'\";|&)]|$)")
    return mapped.sub(r"\1", command)


@dataclass
class _Pod:
    keys: frozenset[bytes]
    """The public key blobs `PUBLIC_KEY` lists (one authorized_keys line each)."""
    env: dict[str, str]
    is_running: Callable[[], bool]
    sandbox: Path
    host_key: asyncssh.SSHKey
    port: int = 0
    server: Any = None
    served: dict[int, bytes] = field(default_factory=dict)
    counting: set[int] = field(default_factory=set)
    """Ports whose server reads until the client's end of input, then answers with the
    number of bytes it read (an upload that needs the half-close)."""
    connections: set[asyncssh.SSHServerConnection] = field(default_factory=set)
    folders: tuple[str, ...] = _FOLDERS
    """The top-level folders a command reads inside the sandbox (mount paths' too)."""
    network: PodNetwork | None = None
    gateway_ports: str = "no"
    """sshd_config's GatewayPorts: "no" (OpenSSH's default), "yes" or "clientspecified"."""


class SshHost:
    """Every pod's sshd for one simulator; call from any thread."""

    def __init__(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="runpod-sim-pods-"))
        self._pods: dict[str, _Pod] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="runpod-sim-sshd", daemon=True
        )
        self._thread.start()

    def start_pod(
        self,
        pod_id: str,
        public_keys: str,
        env: dict[str, str],
        is_running: Callable[[], bool],
        mounts: dict[str, Path] | None = None,
    ) -> int:
        """Start the pod's sshd; returns its port. `mounts` maps a mount path to the
        directory the pod sees there."""
        sandbox = self._root / pod_id
        for folder in _FOLDERS:
            (sandbox / folder).mkdir(parents=True, exist_ok=True)
        tops = {_mount(sandbox, path, directory) for path, directory in (mounts or {}).items()}
        pod = _Pod(
            _key_blobs(public_keys),
            dict(env),
            is_running,
            sandbox,
            asyncssh.generate_private_key("ssh-ed25519"),
            folders=tuple(sorted({*_FOLDERS, *tops})),
        )
        pod.network = PodNetwork(sandbox, pod_id)
        self._pods[pod_id] = pod
        self._run(self._listen(pod))
        return pod.port

    def set_running(self, pod_id: str, running: bool, *, new_host_key: bool = False) -> None:
        pod = self._pods[pod_id]
        self._run(self._close(pod))
        if new_host_key:
            pod.host_key = asyncssh.generate_private_key("ssh-ed25519")
        if running:
            self._run(self._listen(pod))

    def serve(self, pod_id: str, port: int, body: str) -> None:
        """The pod answers HTTP GET on its loopback `port` with `body`."""
        self._pods[pod_id].served[port] = body.encode()

    def serve_count(self, pod_id: str, port: int) -> None:
        """The pod's `port` reads until its client ends input, then answers "N bytes"."""
        self._pods[pod_id].counting.add(port)

    def set_gateway_ports(self, pod_id: str, value: str) -> None:
        """The pod's sshd_config `GatewayPorts` (new forwards follow it)."""
        self._pods[pod_id].gateway_ports = value

    def hosts_file(self, pod_id: str) -> Path:
        """The file the pod sees as `/etc/hosts`."""
        network = self._pods[pod_id].network
        assert network is not None
        return network.hosts

    def host_key(self, pod_id: str) -> str:
        """The pod's public host key, as a known_hosts line's key part."""
        return self._pods[pod_id].host_key.export_public_key().decode().strip()

    @property
    def pods(self) -> frozenset[str]:
        return frozenset(self._pods)

    def sandbox(self, pod_id: str) -> Path:
        return self._pods[pod_id].sandbox

    def stop_pod(self, pod_id: str) -> None:
        pod = self._pods.pop(pod_id, None)
        if pod is not None:
            self._run(self._close(pod))
            self.drop_connections(pod)
            if pod.network is not None:
                pod.network.close()
            shutil.rmtree(pod.sandbox, ignore_errors=True)

    def drop_connections(self, pod: _Pod | str) -> None:
        """Every SSH connection to the pod ends at once, with no exit status sent, as
        when its machine or the network to it goes."""
        pod = self._pods[pod] if isinstance(pod, str) else pod
        for conn in list(pod.connections):
            self._loop.call_soon_threadsafe(conn.abort)

    def close(self) -> None:
        for pod_id in list(self._pods):
            self.stop_pod(pod_id)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_TIMEOUT)
        shutil.rmtree(self._root, ignore_errors=True)

    def _run(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(_TIMEOUT)

    async def _listen(self, pod: _Pod) -> None:
        pod.server = await asyncssh.create_server(
            lambda: _Server(pod),
            "127.0.0.1",
            pod.port,
            server_host_keys=[pod.host_key],
            encoding=None,
            reuse_address=True,
        )
        pod.port = pod.server.sockets[0].getsockname()[1]

    async def _close(self, pod: _Pod) -> None:
        if pod.server is not None:
            pod.server.close()
            await pod.server.wait_closed()
            pod.server = None


class _Server(asyncssh.SSHServer):
    def __init__(self, pod: _Pod) -> None:
        self._pod = pod
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        if not self._pod.is_running():
            conn.abort()
            return
        self._conn = conn
        self._pod.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._pod.connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return username == "root" and key.public_data in self._pod.keys

    def session_requested(self) -> asyncssh.SSHServerSession[bytes]:
        return _Session(self._pod)

    def server_requested(self, listen_host: str, listen_port: int) -> Any:
        if self._conn is None or self._pod.network is None:
            return False
        return open_forward(
            self._conn, self._pod.network, self._pod.gateway_ports, listen_host, listen_port
        )

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> Any:
        body = self._pod.served.get(dest_port)
        if dest_host in ("localhost", "127.0.0.1") and dest_port in self._pod.counting:
            return _count_until_eof
        if dest_host not in ("localhost", "127.0.0.1") or body is None:
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_CONNECT_FAILED, f"connect to {dest_host}:{dest_port}: refused"
            )
        return _http_answer(body)


def _http_answer(body: bytes) -> Callable[[Any, Any], Any]:
    async def answer(reader: Any, writer: Any) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = await reader.read(_READ)
            if not chunk:
                break
            request += chunk
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode() + body)
        writer.write_eof()
        writer.close()

    return answer


async def _count_until_eof(reader: Any, writer: Any) -> None:
    count = 0
    while chunk := await reader.read(_READ):
        count += len(chunk)
    writer.write(f"{count} bytes".encode())
    writer.write_eof()
    writer.close()


class _Session(asyncssh.SSHServerSession[bytes]):
    """One exec or shell: a `sh` in the sandbox, piped or on a pty."""

    def __init__(self, pod: _Pod) -> None:
        self._pod = pod
        self._command = "exec sh -i"
        self._size: tuple[int, int] | None = None
        self._master: int | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._early: list[bytes] = []
        self._pty_input = bytearray()
        self._paused = False
        self._draining: asyncio.Future[None] | None = None
        self._eof = False
        self._task: asyncio.Task[None] | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._gone = False
        self._pty_reader: Callable[[], None] | None = None

    def connection_made(self, chan: Any) -> None:
        self._chan = chan
        chan.set_write_buffer_limits(high=_OUTPUT_HELD)

    def pause_writing(self) -> None:
        """The channel holds `_OUTPUT_HELD` bytes the client's window has no room for:
        the command's output is left unread until it drains."""
        self._writable.clear()
        if self._pty_reader is not None and self._master is not None:
            asyncio.get_running_loop().remove_reader(self._master)

    def resume_writing(self) -> None:
        self._writable.set()
        if self._pty_reader is not None and self._master is not None:
            asyncio.get_running_loop().add_reader(self._master, self._pty_reader)

    def connection_lost(self, exc: Exception | None) -> None:
        # The channel or the connection gone before the command ended: sshd hangs it up,
        # and what it still prints is read and dropped until it ends.
        self._gone = True
        if not self._writable.is_set():
            self.resume_writing()
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGHUP)

    def pty_requested(
        self, term_type: str, term_size: tuple[int, int, int, int], term_modes: Any
    ) -> bool:
        self._size = ((term_size[0] & 0xFFFF) or 80, (term_size[1] & 0xFFFF) or 24)
        return True

    def exec_requested(self, command: str) -> bool:
        self._command = sandboxed(command, self._pod.folders)
        return True

    def shell_requested(self) -> bool:
        return True

    def session_started(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def data_received(self, data: bytes, datatype: Any) -> None:
        if self._process is None:
            self._early.append(data)
            self._held_back(sum(map(len, self._early)))
        else:
            self._write(data)

    def eof_received(self) -> bool:
        self._eof = True
        if self._process is not None:
            self._end_input()
        return True

    def terminal_size_changed(self, width: int, height: int, pixwidth: int, pixheight: int) -> None:
        # The wire carries 32 bits, a terminal 16: OpenSSH's sshd keeps the low bits.
        width, height = width & 0xFFFF, height & 0xFFFF
        self._size = (width, height)
        if self._master is not None:
            _set_size(self._master, width, height)

    async def _run(self) -> None:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            **self._pod.env,
            "HOME": str(self._pod.sandbox / "root"),
        }
        argv: tuple[str, ...] = ("sh", "-c", self._command)
        if self._pod.network is not None:
            argv = self._pod.network.command(argv, self._pod.sandbox)
        if self._size is not None:
            master, slave = os.openpty()
            _set_size(master, *self._size)
            self._master = master
            self._process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=self._pod.sandbox,
                env=env,
                start_new_session=True,
                preexec_fn=_take_terminal,
            )
            os.close(slave)
            os.set_blocking(master, False)  # input the command does not read waits here
            pumps = [self._pump_pty(master)]
        else:
            self._process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self._pod.sandbox,
                env=env,
                start_new_session=True,  # its own group, hung up whole (connection_lost)
            )
            assert self._process.stdout is not None and self._process.stderr is not None
            pumps = [
                self._pump(self._process.stdout, self._chan.write),
                self._pump(self._process.stderr, self._chan.write_stderr),
            ]
        early, self._early = self._early, []
        self._taking_again()
        for data in early:
            self._write(data)
        if self._eof:
            self._end_input()
        await asyncio.gather(*pumps)
        code = await self._process.wait()
        if self._master is not None:
            os.close(self._master)
        self._chan.exit(code if code >= 0 else 128 - code)

    async def _pump(self, stream: asyncio.StreamReader, write: Callable[[bytes], None]) -> None:
        while True:
            # Left unread, the pipe's transport stops reading: the command blocks writing.
            await self._writable.wait()
            data = await stream.read(_READ)
            if not data:
                return
            if not self._gone:
                write(data)

    async def _pump_pty(self, master: int) -> None:
        loop, done = asyncio.get_running_loop(), asyncio.Event()

        def readable() -> None:
            try:
                data = os.read(master, _READ)
            except BlockingIOError:
                return
            except OSError:  # EIO: the last process holding the terminal ended
                data = b""
            if data:
                if not self._gone:
                    self._chan.write(data)  # may pause: see pause_writing
            else:
                self._pty_reader = None
                loop.remove_reader(master)
                done.set()

        self._pty_reader = readable
        if self._writable.is_set():
            loop.add_reader(master, readable)
        await done.wait()

    def _write(self, data: bytes) -> None:
        """Input for the command. As a real sshd, input the command does not read stops
        being taken in (the channel's window closes) once `_HELD` bytes wait."""
        if self._master is not None:
            self._pty_input += data
            self._flush_pty()
        elif self._process is not None and self._process.stdin is not None:
            with contextlib.suppress(OSError):  # the command is gone: its input too
                self._process.stdin.write(data)
            transport = self._process.stdin.transport
            if self._held_back(transport.get_write_buffer_size()):
                self._draining = asyncio.ensure_future(self._drained(self._process.stdin))

    def _held_back(self, held: int) -> bool:
        """Stops taking input in while `held` bytes wait; True when it did."""
        if held <= _HELD or self._paused:
            return False
        self._paused = True
        self._chan.pause_reading()
        return True

    def _taking_again(self) -> None:
        if self._paused:
            self._paused = False
            self._chan.resume_reading()

    async def _drained(self, stdin: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            await stdin.drain()
        self._taking_again()

    def _flush_pty(self) -> None:
        assert self._master is not None
        loop = asyncio.get_running_loop()
        try:
            written = os.write(self._master, self._pty_input) if self._pty_input else 0
        except BlockingIOError:
            written = 0
        except OSError:  # the terminal is gone: so is what was typed into it
            written = len(self._pty_input)
        del self._pty_input[:written]
        loop.remove_writer(self._master)
        if self._pty_input:
            loop.add_writer(self._master, self._flush_pty)
            self._held_back(len(self._pty_input))
        else:
            self._taking_again()

    def _end_input(self) -> None:
        if self._master is not None:
            self._pty_input += b"\x04"  # a terminal's end of input is ^D
            self._flush_pty()
        elif self._process is not None and self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()


def _mount(sandbox: Path, path: str, directory: Path) -> str:
    """Link `path` inside the sandbox to `directory`; returns the path's first folder."""
    inside = sandbox / path.strip("/")
    inside.parent.mkdir(parents=True, exist_ok=True)
    if inside.is_dir() and not inside.is_symlink():
        inside.rmdir()  # an empty folder of the image, such as /workspace, is covered
    inside.symlink_to(directory, target_is_directory=True)
    return path.strip("/").split("/")[0]


# An authorized_keys line is `[options] keytype base64 [comment]`; options such as
# command="..." may hold spaces and quotes, so the key is found by its type (sshd(8)).
_KEY = re.compile(r'(?:^|[\s,"])((?:ssh|ecdsa|sk)-[\w@.-]+)\s+([A-Za-z0-9+/]+={0,2})(?:\s|$)')


def _key_blobs(public_keys: str) -> frozenset[bytes]:
    """The keys of authorized_keys lines; a line that holds none is skipped, as sshd
    skips it. Options are accepted, not enforced."""
    blobs = set()
    for line in public_keys.splitlines():
        line = line.strip()
        found = _KEY.findall(line) if line and not line.startswith("#") else []
        for kind, data in found[-1:]:  # an option's text may look like a key: the last one is
            with contextlib.suppress(asyncssh.KeyImportError, ValueError):
                blobs.add(asyncssh.import_public_key(f"{kind} {data}").public_data)
    return frozenset(blobs)


def _set_size(fd: int, width: int, height: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


def _take_terminal() -> None:
    """In the child: make the pty the controlling terminal of its new session."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
