"""SSH into a pod's instance, as far as it is a decision: what a create asks of RunPod so
that the instance runs sshd with our key, where the tick's annotations say that sshd
is, and the one command line an argv becomes.

RunPod's images start sshd when the env carries `PUBLIC_KEY` (authorized_keys lines);
`startSsh` puts the account's keys there unless the request sets it, and `ssh.direct`
needs `22/tcp` published. We set `PUBLIC_KEY` ourselves (the pod's own lines kept, ours
added) and never touch the account's key set.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

SSH_PORT = "22/tcp"
PUBLIC_KEY_ENV = "PUBLIC_KEY"


def ssh_env(env: Mapping[str, str], public_key: str) -> dict[str, str]:
    """The env with our key among the authorized ones (a pod's own key stays)."""
    theirs = [line for line in env.get(PUBLIC_KEY_ENV, "").splitlines() if line.strip()]
    lines = theirs if public_key in theirs else [*theirs, public_key]
    return {**env, PUBLIC_KEY_ENV: "\n".join(lines)}


def ssh_ports(ports: Sequence[str]) -> tuple[str, ...]:
    return tuple(ports) if SSH_PORT in ports else (*ports, SSH_PORT)


def direct_address(port_mappings: str) -> tuple[str, int] | None:
    """Where 22/tcp is published, from the pod's `runpod.io/port-mappings`
    ("22/tcp->203.0.113.7:30022, 8888/http->https://..."); None when it is not."""
    for entry in port_mappings.split(","):
        port, _, target = entry.strip().partition("->")
        host, _, number = target.rpartition(":")
        if port == SSH_PORT and host and number.isdigit():
            return host, int(number)
    return None


def remote_command(argv: Sequence[str], workdir: str = "") -> str:
    """The command line sshd hands to the user's shell: each argument quoted, so the
    shell splits it back into exactly this argv (no joining with spaces); run in
    `workdir` (the container's `workingDir`) when one is given, else where sshd starts
    it (root's home). A `workingDir` the instance lacks fails the command with the
    shell's words: the container's own process did not make it."""
    command = shlex.join(argv)
    return f"cd -- {shlex.quote(workdir)} && {command}" if workdir else command
