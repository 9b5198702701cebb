"""The sshd of the simulated account's pods, as the pod routes and tests reach it.

A pod created with `startSsh` and a `PUBLIC_KEY` in its env runs a real sshd
(`ssh`, started on first use: asyncssh is imported only when a test uses SSH);
its `22/tcp` mapping, when published, is that sshd's port. The controls let a test stop
a pod's sshd, break its network, serve HTTP inside it and look into its filesystem.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.sim.runpod.account import Account
from reconciler.sim.runpod.pods import SimPod

if TYPE_CHECKING:
    from reconciler.sim.runpod.ssh import SshHost


class PodSsh:
    def __init__(self, account: Account) -> None:
        self._account = account
        self._host: SshHost | None = None

    def start(self, pod: SimPod) -> None:
        """RunPod's images start sshd from `PUBLIC_KEY`, which reaches a pod with
        `startSsh` (this account registers no keys, so the request must set it)."""
        keys = pod.env.get("PUBLIC_KEY")
        if not (pod.start_ssh and keys):
            return
        if self._host is None:
            from reconciler.sim.runpod.ssh import SshHost  # asyncssh only when SSH is used

            self._host = SshHost()
        clock = self._account.clock
        port = self._host.start_pod(
            pod.id,
            keys,
            pod.env,
            lambda: pod.status(clock.now()) == "RUNNING",
            self._account.volumes.mounted_directories(pod.mounts),
        )
        if 22 in pod.public_ports:
            pod.public_ports[22] = port

    def stop(self, pod_id: str) -> None:
        if self._host is not None:
            self._host.stop_pod(pod_id)

    def close(self) -> None:
        """Every pod's sshd ends (the simulator stops or resets)."""
        if self._host is not None:
            self._host.close()
            self._host = None

    # Test controls

    def set_running(self, instance_id: str, running: bool, *, new_host_key: bool = False) -> None:
        """The pod's sshd stops (an image without one) or comes back, perhaps with a
        new host key."""
        with self._account.lock:
            self._of(instance_id).set_running(instance_id, running, new_host_key=new_host_key)

    def break_connections(self, instance_id: str) -> None:
        """The network to the pod breaks: its SSH connections end, no exit status sent."""
        with self._account.lock:
            self._of(instance_id).drop_connections(instance_id)

    def serve_http(self, instance_id: str, port: int, body: str) -> None:
        """The pod answers HTTP GET on its loopback `port` with `body`."""
        with self._account.lock:
            self._of(instance_id).serve(instance_id, port, body)

    def serve_count(self, instance_id: str, port: int) -> None:
        """The pod's loopback `port` reads until its client ends input (a half-close),
        then answers "N bytes" and closes."""
        with self._account.lock:
            self._of(instance_id).serve_count(instance_id, port)

    def sandbox(self, instance_id: str) -> Path:
        """The directory that stands for the pod's filesystem."""
        with self._account.lock:
            return self._of(instance_id).sandbox(instance_id)

    def set_gateway_ports(self, instance_id: str, value: str) -> None:
        """The pod's sshd_config `GatewayPorts`: "no" (the default), "yes",
        "clientspecified"."""
        with self._account.lock:
            self._of(instance_id).set_gateway_ports(instance_id, value)

    def hosts_file(self, instance_id: str) -> Path:
        """The file the pod sees as `/etc/hosts`."""
        with self._account.lock:
            return self._of(instance_id).hosts_file(instance_id)

    def host_key(self, instance_id: str) -> str:
        with self._account.lock:
            return self._of(instance_id).host_key(instance_id)

    def _of(self, pod_id: str) -> SshHost:
        self._account.pod(pod_id)
        if self._host is None or pod_id not in self._host.pods:
            raise ValueError(f"pod {pod_id} runs no sshd: it needs startSsh and a PUBLIC_KEY")
        return self._host
