"""The whole system on loopback: both simulators, the real clients, a store and an engine,
all on one simulated clock. The demo, the end-to-end tests and the benchmarks use it.

Only the clock is shared in-process; every call between the reconciler and the two
worlds is real HTTP through the official `kubernetes` client and `requests`.
"""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.cluster import default_namespace
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.runpod.transport import MIB
from reconciler.adapters.store.repository import Store
from reconciler.core.config import Settings
from reconciler.core.service_settings import ServiceBackends
from reconciler.runtime.kubelet.endpoint import start_endpoint
from reconciler.runtime.kubelet.server import EndpointLimits, KubeletServer
from reconciler.runtime.kubelet.sshkey import load_identity
from reconciler.runtime.process.wiring import (
    RunMode,
    compose,
    open_store,
    resolve_owner,
    with_ssh_key,
)
from reconciler.runtime.services.manager import ServiceTunnels, attach_tunnels
from reconciler.runtime.tick.engine import Engine, TickReport
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.controllers import ControllerSettings
from reconciler.sim.kube.simulator import KubeSimulator
from reconciler.sim.runpod.net import PROXY_COMMAND
from reconciler.sim.runpod.simulator import RunPodSimulator

API_KEY = "sandbox-runpod-key"
TOKEN = "sandbox-kube-token"


class Sandbox:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        database_url: str | None = None,
        workdir: str | None = None,
        runpod_options: dict[str, Any] | None = None,
        rbac_files: tuple[str, ...] = (),
        rbac_subject: str | None = None,
        tls: bool = False,
        controllers: ControllerSettings | None = None,
        startup_lines: str | None = None,
    ) -> None:
        """`tls` for the real kubectl (it sends a token only over TLS); `controllers` runs
        the node lifecycle, cloud node and pod GC controllers on the shared clock;
        `startup_lines` shows starting instances' system lines as Events: "read" in the
        tick as `sync --once` does, "stream" in the background as the Deployment does
        (None: only when an instance ends, and no request for them before)."""
        self.clock = SimClock()
        self._wall_step = timedelta()
        self._tmp = tempfile.TemporaryDirectory(prefix="reconciler-sandbox-")
        self.workdir = Path(workdir or self._tmp.name)
        self.database_url = database_url or f"sqlite:///{self.workdir / 'reconciler.db'}"
        self.runpod_sim = RunPodSimulator(API_KEY, clock=self.clock, **(runpod_options or {}))
        self.kube_sim = KubeSimulator(
            TOKEN,
            clock=self.clock,
            rbac_files=rbac_files,
            rbac_subject=rbac_subject,
            tls=tls,
            controllers=controllers,
        )
        self.kubelet: KubeletServer | None = None
        self._kubelet_runpod: RunPodClient | None = None
        # The simulator's public IPs are not routed here: its network is the relay,
        # whichever way the reconciler gets its SSH key (a file or a Secret).
        base = settings or Settings()
        self._base_settings = base.with_values(
            ssh_proxy_command=base.ssh.proxy_command or PROXY_COMMAND
        )
        self.startup_lines = startup_lines
        self.engine: Engine
        self.tunnels: ServiceTunnels | None = None
        self._tunnels_wanted = False

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Sandbox:
        self.runpod_sim.start()
        self.kube_sim.start()
        self.kubeconfig = self.kube_sim.write_kubeconfig(str(self.workdir / "kubeconfig"))
        self.restart()
        return self

    def stop(self) -> None:
        self._stop_startup_lines()
        if self.tunnels is not None:
            self.tunnels.close()
        if self.kubelet is not None:
            self.kubelet.stop()
        if self._kubelet_runpod is not None:
            self._kubelet_runpod.close()
        self.runpod.close()
        self.kube_sim.stop()
        self.runpod_sim.stop()
        self._tmp.cleanup()

    def restart(self) -> None:
        """A new reconciler process: fresh clients, fresh engine, same database."""
        self.kube = KubeClient(self.kube_sim.api_client(), now=self.clock.now)
        self.runpod = RunPodClient(
            API_KEY,
            self.runpod_sim.base_url,
            sleep=self.clock.sleep,
            monotonic=self.clock.monotonic,
            read_timeout=5,
            max_answer_bytes=self._base_settings.caps.runpod_max_answer_mib * MIB,
        )
        self.store: Store = open_store(
            self.database_url, upgrade=True, node=self._base_settings.node.name
        )
        if self._base_settings.ssh.key_secret:  # it lives in the reconciler's namespace
            self.ensure_namespace(default_namespace())
        self.settings = with_ssh_key(resolve_owner(self._base_settings, self.kube), self.kube)
        self._compose()

    def start_kubelet(self, port: int = 0, limits: EndpointLimits | None = None) -> KubeletServer:
        """Serve the kubelet endpoint on 127.0.0.1 (a free port by default) and advertise
        it on the node at the next tick, so that `kubectl logs` reaches it; `limits`
        replaces the settings' connection limits."""
        self._kubelet_runpod = RunPodClient(API_KEY, self.runpod_sim.base_url, read_timeout=5)
        changes: dict[str, Any] = {"kubelet_address": "127.0.0.1", "kubelet_port": port or 10250}
        if limits is not None:
            changes.update(
                kubelet_idle_timeout=limits.idle_timeout,
                kubelet_request_header_timeout=limits.header_timeout,
                kubelet_max_connections=limits.max_connections,
                kubelet_max_unauthenticated=limits.max_unauthenticated,
                kubelet_max_headers=limits.max_headers,
                kubelet_max_header_bytes=limits.max_header_bytes,
                kubelet_max_follows=limits.max_follows,
                kubelet_max_follows_per_namespace=limits.max_follows_per_namespace,
                kubelet_max_streaming_per_namespace=limits.max_streaming_per_namespace,
                streaming_connection_idle_timeout=limits.streaming_idle_timeout,
            )
        self.configure(**changes)
        server = start_endpoint(
            self.settings,
            self.kube,
            self.store,
            self._kubelet_runpod,
            self.clock.now,
            lambda: True,
            "runpod-system",
            host="127.0.0.1",
            port=port,
            # The engine is composed again on each configure(): ask the current one.
            usage=lambda now: self.engine.usage.usage(now),
            listed=lambda uid: self.engine.ssh_addresses.of(uid),
        )
        assert server is not None
        self.kubelet = server
        self.configure(kubelet_port=server.port)
        return server

    def trust_kubelet(self) -> None:
        """Have the simulated API server verify the kubelet endpoint's certificate, as one
        started with --kubelet-certificate-authority does; by default it does not (as a
        real one), and urllib3 warns about each such call where the process prints."""
        assert self.kubelet is not None, "start_kubelet first"
        pem = ssl.get_server_certificate(("127.0.0.1", self.kubelet.port))
        path = self.workdir / "kubelet-ca.crt"
        path.write_text(pem)
        self.kube_sim.kubelet_ca_file = str(path)

    def enable_ssh(self, key_file: str) -> None:
        """Give the reconciler an SSH key (made at `key_file`), as `--ssh-key-file`
        does: instances created from now on run sshd with it; call before
        `start_kubelet` for exec."""
        identity = load_identity(key_file)
        self.configure(
            ssh_key_file=key_file,
            ssh_public_key=identity.public_line,
        )

    def start_tunnels(self) -> ServiceTunnels:
        """Keep the pods' Service tunnels after each tick, as `reconciler sync` does;
        backends may be on loopback (the tests' and the demo's are)."""
        self._tunnels_wanted = True
        self.configure(service_backends=ServiceBackends.ANY)
        self._attach_tunnels()
        assert self.tunnels is not None
        return self.tunnels

    def _attach_tunnels(self) -> None:
        if self.tunnels is not None:
            self.tunnels.close()
        self.tunnels = attach_tunnels(self.engine)

    def configure(self, **changes: Any) -> None:
        """New settings for the ticks to come: the engine is composed again (an engine's
        settings never change), with the same clients and store."""
        self._base_settings = self._base_settings.with_values(**changes)
        self.settings = self.settings.with_values(**changes)
        self._compose()

    def _compose(self) -> None:
        # One tick at a time with no heartbeat schedule, like `sync --once`, but without
        # the writer lock: the tests count every database write of a tick.
        self._stop_startup_lines()  # the old engine's streams end with it
        stream_client = partial(RunPodClient, API_KEY, self.runpod_sim.base_url, read_timeout=5)
        self.engine, self.heartbeat = compose(
            self.settings,
            self.runpod,
            self.kube,
            self.store,
            self.wall_clock,
            RunMode.ONCE,
            startup_client=stream_client if self.startup_lines == "stream" else None,
            startup_lines=self.startup_lines is not None,
            services=self._tunnels_wanted,
        )
        if getattr(self, "tunnels", None) is not None:
            self._attach_tunnels()

    def _stop_startup_lines(self) -> None:
        engine = getattr(self, "engine", None)  # none yet when starting failed early
        if engine is not None and engine.hooks.startup is not None:
            engine.hooks.startup.stop()

    # --- acting as the cluster ---------------------------------------------------------

    def tick(self, dry_run: bool = False) -> TickReport:
        return self.engine.tick(dry_run=dry_run)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def wall_clock(self) -> datetime:
        """The reconciler's host clock: the simulated time, unless it was stepped."""
        return self.clock.now() + self._wall_step

    def step_wall_clock(self, seconds: float) -> None:
        """The reconciler's host clock steps by `seconds` (an NTP correction, a resumed
        VM): the simulators' clocks and the monotonic clock do not move."""
        self._wall_step += timedelta(seconds=seconds)

    def add_pod(
        self,
        name: str,
        *,
        namespace: str = "default",
        image: str = "python:3.11",
        command: list[str] | None = None,
        gpus: int = 1,
        ports: Sequence[int] = (),
        annotations: dict[str, str] | None = None,
        restart_policy: str = "Always",
        env: list[dict[str, Any]] | None = None,
        extra_spec: dict[str, Any] | None = None,
        bound: bool = True,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pod on the virtual node; with `bound=False` one the scheduler has yet to place."""
        self.ensure_namespace(namespace)
        spec = self._pod_spec(image, command, gpus, ports, restart_policy, env, bound)
        metadata = {
            "name": name,
            "namespace": namespace,
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        }
        return self.kube_sim.create_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": {**spec, **(extra_spec or {})},
            }
        )

    def _pod_spec(
        self,
        image: str,
        command: Sequence[str] | None,
        gpus: int,
        ports: Sequence[int],
        restart_policy: str,
        env: list[dict[str, Any]] | None,
        bound: bool,
    ) -> dict[str, Any]:
        container: dict[str, Any] = {
            "name": "main",
            "image": image,
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            "ports": [{"containerPort": p, "protocol": "TCP"} for p in ports],
        }
        if command:
            container["command"] = list(command)
        if env:
            container["env"] = env
        spec: dict[str, Any] = {"restartPolicy": restart_policy, "containers": [container]}
        if bound:
            spec["nodeName"] = self.settings.node.name
            spec["tolerations"] = [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}]
        return spec

    def add_job(
        self,
        name: str,
        *,
        namespace: str = "default",
        annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        completions: int = 1,
        parallelism: int = 1,
        command: Sequence[str] = ("python", "run.py"),
        bound: bool = True,
        **spec: Any,
    ) -> dict[str, Any]:
        """A NonIndexed Job whose pods the Kubernetes simulator's Job controller makes (at
        once, and again as they end): each one GPU container running `command`, with
        restartPolicy Never, on the virtual node unless `bound=False`. `spec`: more
        JobSpec fields (backoffLimit 6 unless given). Find its pods with `job_pods`."""
        self.ensure_namespace(namespace)
        template = {"spec": self._pod_spec("python:3.11", command, 1, (), "Never", None, bound)}
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "annotations": dict(annotations or {}),
                "labels": dict(labels or {}),
            },
            "spec": {
                "completions": completions,
                "parallelism": parallelism,
                "backoffLimit": 6,
                "template": template,
                **spec,
            },
        }
        self.kube_sim.put("jobs", job)
        return self.kube_sim.get("jobs", namespace, name) or {}

    def add_indexed_job(
        self,
        name: str,
        size: int = 2,
        *,
        namespace: str = "default",
        command: Sequence[str] = ("torchrun", "train.py"),
        gpus: int = 1,
        cluster: bool = True,
        parallelism: int | None = None,
        backoff_limit: int = 6,
        active_deadline_seconds: int | None = None,
        claim: tuple[str, str] | None = None,
    ) -> dict[str, Any]:
        """An Indexed Job whose pods land on the virtual node; the Kubernetes simulator's
        Job controller makes its pods. With `cluster`, they ask to run as one Instant
        Cluster (`runpod.io/cluster`); `active_deadline_seconds` goes on its pods;
        `claim` (a claim's name, a mount path) is mounted in every pod."""
        self.ensure_namespace(namespace)
        container: dict[str, Any] = {
            "name": "main",
            "image": "python:3.11",
            "command": list(command),
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
        }
        annotations = {"runpod.io/cluster": "true"} if cluster else {}
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "nodeName": self.settings.node.name,
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
            "containers": [container],
        }
        if active_deadline_seconds is not None:
            pod_spec["activeDeadlineSeconds"] = active_deadline_seconds
        if claim is not None:
            container["volumeMounts"] = [{"name": "data", "mountPath": claim[1]}]
            pod_spec["volumes"] = [
                {"name": "data", "persistentVolumeClaim": {"claimName": claim[0]}}
            ]
        template = {"metadata": {"annotations": annotations}, "spec": pod_spec}
        spec = {
            "completionMode": "Indexed",
            "completions": size,
            "parallelism": size if parallelism is None else parallelism,
            "backoffLimit": backoff_limit,
            "template": template,
        }
        return self.kube_sim.put(
            "jobs",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            },
        )

    def job_pods(self, job: str, namespace: str = "default") -> list[dict[str, Any]]:
        """The Job's pods: an Indexed Job's by completion index, a NonIndexed Job's by
        creation time."""
        pods = [
            p
            for p in self.kube_sim.list("pods", namespace)
            if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job
        ]
        index = "batch.kubernetes.io/job-completion-index"
        return sorted(
            pods,
            key=lambda p: (
                int((p["metadata"].get("annotations") or {}).get(index, -1)),
                p["metadata"]["creationTimestamp"],
            ),
        )

    def ensure_namespace(self, namespace: str) -> None:
        if self.kube_sim.get("namespaces", None, namespace) is None:
            self.kube_sim.put(
                "namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.kube_sim.get("pods", namespace, name)

    def owned_instances(self) -> list[dict[str, Any]]:
        """Our instances as the RunPod simulator holds them (not through the client)."""
        owner = self.settings.owner_id
        return [
            i
            for i in self.runpod_sim.instances.values()
            if (i.get("env") or {}).get("RUNPOD_RECONCILER_OWNER") == owner
        ]

    def instance_for(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        uid = pod["metadata"]["uid"]
        found = [
            i for i in self.owned_instances() if i["env"].get("RUNPOD_RECONCILER_POD_UID") == uid
        ]
        return found[0] if found else None

    def events(self, name: str, namespace: str = "default") -> list[dict[str, Any]]:
        return [
            e
            for e in self.kube_sim.list("events", namespace)
            if e.get("involvedObject", {}).get("name") == name
        ]
