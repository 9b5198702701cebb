"""The simulated RunPod's public network: a ProxyCommand that reaches a pod's published
port.

The RunPod simulator gives each pod a public IP of its own in a documentation range
(203.0.113.0/24), as RunPod reports the address of the machine a pod runs on, and
serves every published port on 127.0.0.1 under the same port number. Nothing on this
machine routes those addresses, so a client reaches them the way it would reach a
network it cannot route to: through its SSH ProxyCommand (OpenSSH's `%h %p`; the
reconciler's `--ssh-proxy-command`). This is that command:

    python -m reconciler.sim.runpod.net HOST PORT

joins its stdin and stdout to 127.0.0.1:PORT, whatever HOST is (the simulator's public
ports are unique across its pods, so the port alone says which pod).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import sys
import threading
from collections.abc import Callable

PROXY_COMMAND = f"{shlex.quote(sys.executable)} -m reconciler.sim.runpod.net %h %p"
"""The `--ssh-proxy-command` that reaches the simulator's pods from this machine."""

_CHUNK = 32 * 1024


def _copy(
    read: Callable[[], bytes], write: Callable[[bytes], object], done: threading.Event
) -> None:
    with contextlib.suppress(OSError):
        while chunk := read():
            write(chunk)
    done.set()


def main(argv: list[str]) -> int:
    """Ends when either side ends: the client closing its end closes the connection,
    as OpenSSH ends its ProxyCommand when it is done."""
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m reconciler.sim.runpod.net HOST PORT", file=sys.stderr)
        return 2
    try:
        sock = socket.create_connection(("127.0.0.1", int(argv[1])), timeout=8)
    except OSError as exc:
        print(f"{argv[0]}:{argv[1]}: {exc}", file=sys.stderr)
        return 1
    sock.settimeout(None)
    done = threading.Event()
    for read, write in (
        (lambda: os.read(0, _CHUNK), sock.sendall),
        (lambda: sock.recv(_CHUNK), lambda chunk: os.write(1, chunk)),
    ):
        threading.Thread(target=_copy, args=(read, write, done), daemon=True).start()
    done.wait()
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
