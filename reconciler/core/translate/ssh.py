"""SSH into a pod's instance, as far as it is a decision: what a create asks of RunPod so
that the instance runs sshd with our key, where that sshd is (RunPod's record of the
instance, never the pod's annotations: anyone who may edit the pod writes those), and
the one command line an argv becomes.

RunPod's images start sshd when the env carries `PUBLIC_KEY` (authorized_keys lines);
`startSsh` puts the account's keys there unless the request sets it, and `ssh.direct`
needs `22/tcp` published. We set `PUBLIC_KEY` ourselves (the pod's own lines kept, ours
added) and never touch the account's key set.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.domain import Instance, InstanceStatus

SSH_PORT = "22/tcp"
PUBLIC_KEY_ENV = "PUBLIC_KEY"


def ssh_env(env: Mapping[str, str], public_key: str) -> dict[str, str]:
    """The env with our key among the authorized ones (a pod's own key stays)."""
    theirs = [line for line in env.get(PUBLIC_KEY_ENV, "").splitlines() if line.strip()]
    lines = theirs if public_key in theirs else [*theirs, public_key]
    return {**env, PUBLIC_KEY_ENV: "\n".join(lines)}


def ssh_ports(ports: Sequence[str]) -> tuple[str, ...]:
    return tuple(ports) if SSH_PORT in ports else (*ports, SSH_PORT)


@dataclass(frozen=True)
class SshAddress:
    """Where an instance's sshd listens, as RunPod reports it."""

    instance_id: str
    host: str
    port: int


def ssh_address(instance: Instance) -> SshAddress | None:
    """Where RunPod publishes the instance's 22/tcp; None when it does not (yet)."""
    for port in instance.runtime.ports if instance.runtime else ():
        if port.private_port == 22 and port.public_ip and port.public_port:
            return SshAddress(instance.id, port.public_ip, port.public_port)
    return None


def runs_for(instance: Instance, pod_uid: str, owner_id: str | None) -> bool:
    """Whether RunPod's record lets the instance be this pod's: no tag of another pod or
    of another owner (`owner_id` None: any owner). An instance without tags is taken
    only by the id our own row holds (its tags lost to an env PATCH)."""
    return instance.pod_uid in (None, pod_uid) and (
        owner_id is None or instance.owner in (None, owner_id)
    )


class SshAddresses:
    """Where each pod's instance runs sshd, from the tick's list of the instances it
    found ours (by pod UID): the kubelet endpoint's first source, so an exec costs no
    RunPod request. Each tick hands over its mapping whole (nothing is worked out then:
    a tick pays nothing for it); read from any thread."""

    def __init__(self) -> None:
        self._owned: Mapping[str, Sequence[Instance]] = {}

    def observe(self, owned: Mapping[str, Sequence[Instance]]) -> None:
        self._owned = owned

    def of(self, pod_uid: str) -> SshAddress | None:
        for instance in self._owned.get(pod_uid, ()):
            address = ssh_address(instance)
            if instance.status is InstanceStatus.RUNNING and address is not None:
                return address
        return None


def remote_command(argv: Sequence[str], workdir: str = "") -> str:
    """The command line sshd hands to the user's shell: each argument quoted, so the
    shell splits it back into exactly this argv (no joining with spaces); run in
    `workdir` (the container's `workingDir`) when one is given, else where sshd starts
    it (root's home). A `workingDir` the instance lacks fails the command with the
    shell's words: the container's own process did not make it."""
    command = shlex.join(argv)
    return f"cd -- {shlex.quote(workdir)} && {command}" if workdir else command
