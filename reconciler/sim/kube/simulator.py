"""A loopback Kubernetes API server for tests, benchmarks and the demo.

It speaks the REST API (JSON) that the official client and `kubectl` use, for the
resources the reconciler touches, with the semantics a controller depends on:
resourceVersion conflicts, deletionTimestamp and finalizers, field and label selectors,
`limit`/`continue` paging, watch, bearer-token auth and RBAC from our own manifests;
`pods/log` and `pods/exec` (SPDY) are passed to the node's kubelet as an API server
passes them (`pod_log`, `pod_exec`).
Time comes from a `SimClock`, so tests move through grace periods without sleeping.

    with KubeSimulator() as sim:
        api = sim.api_client()   # an official-client ApiClient for this server

Run as a process: `python -m reconciler.sim.kube --port 0 --kubeconfig-out kc.yaml`
prints the server URL as its first line and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import base64
import copy
import fnmatch
import signal
import ssl
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import kubernetes
import yaml

from reconciler.sim.clock import SimClock, real_start
from reconciler.sim.kube.access import MASTERS, AccessModel
from reconciler.sim.kube.controllers import ControllerSettings, NodeControllers
from reconciler.sim.kube.http import Backend, Handler
from reconciler.sim.kube.jobs import JobController
from reconciler.sim.kube.metrics import MetricsServer
from reconciler.sim.kube.pki import APISERVER_KUBELET_CLIENT, ClientCA
from reconciler.sim.kube.rbac import Authorizer, load_documents
from reconciler.sim.kube.resources import BY_PLURAL, CONFIG_MAPS, PODS, SERVICES, Resource
from reconciler.sim.kube.select import Selector
from reconciler.sim.kube.service_controllers import ServiceControllers
from reconciler.sim.kube.store import Store, format_time
from reconciler.sim.kube.tls import make_certificate, server_context
from reconciler.sim.kube.volumes import VolumeControllers


@dataclass
class Fault:
    method: str
    path_pattern: str
    status: int
    remaining: int

    def matches(self, method: str, path: str) -> bool:
        return (
            self.remaining > 0
            and self.method in ("*", method)
            and fnmatch.fnmatchcase(path, self.path_pattern)
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    simulator: Backend

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (a closed pool, an abandoned watch) are normal here."""
        if not isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError):
            super().handle_error(request, client_address)


class KubeSimulator:
    """The simulated cluster: an HTTP front end over a `Store`, plus helpers for tests."""

    def __init__(
        self,
        token: str = "sim-token",
        *,
        clock: SimClock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        rbac_files: Sequence[str] = (),
        rbac_subject: str | None = None,
        tls: bool = False,
        controllers: ControllerSettings | None = None,
    ) -> None:
        """`controllers` runs the node lifecycle, (cloud node) and pod GC controllers on
        the clock; without it nothing acts on a node that stops reporting."""
        self.token = token
        self.tls = tls
        self.clock = clock or SimClock()
        self.store = Store(self.clock)
        self.metrics = MetricsServer(self)
        self.controllers = (
            NodeControllers(self.store, self.clock, controllers)
            if controllers is not None
            else None
        )
        self.jobs = JobController(self.store)
        self.store.add_controller(self.jobs.admit, self.jobs.react)
        self.volumes = VolumeControllers(self.store)
        self.store.add_controller(
            self.volumes.admit, self.volumes.react, self.volumes.admit_update, self.volumes.react
        )
        self.services = ServiceControllers(self.store)
        self.store.add_controller(
            self.services.admit, self.services.react, None, self.services.removed
        )
        self.subject = rbac_subject or "system:admin"
        self.authorizer = Authorizer.from_files(rbac_files, self.subject) if rbac_files else None
        # TokenReview and SubjectAccessReview answer from this, for kubelets to ask.
        self.access = AccessModel()
        self.access.add_rbac(load_documents(rbac_files))
        self.access.add_user(token, self.subject, () if rbac_files else (MASTERS,))
        self.client_ca = ClientCA()
        self._publish_client_ca()
        self.kubelet_ca_file: str | None = None
        """The CA to verify kubelets' serving certificates with; None: not verified."""
        self._pki_dir: tempfile.TemporaryDirectory[str] | None = None
        self._kubelet_client: tuple[str, str] | None = None
        self.requests: list[tuple[str, str, str, int]] = []
        self.stopping = threading.Event()
        self._faults: list[Fault] = []
        self._faults_lock = threading.Lock()
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._cert_dir: tempfile.TemporaryDirectory[str] | None = None

    # lifecycle --------------------------------------------------------------------

    def start(self) -> KubeSimulator:
        server = _Server(self._address, Handler)
        server.simulator = self
        if self.tls:
            self._cert_dir = tempfile.TemporaryDirectory(prefix="kube-sim-")
            cert, key = make_certificate(Path(self._cert_dir.name), self._address[0])
            # The handshake then runs in the request thread, not in the accept loop.
            server.socket = server_context(cert, key).wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
        self._server = server
        if self.store.find(SERVICES, "default", "kubernetes") is None:
            self.services.add_kubernetes_service(server.server_address[1])
        # A short poll keeps stop() (and so each test's teardown) quick.
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.02,), name="kube-sim", daemon=True
        )
        self._thread.start()
        if self.controllers is not None:
            self.controllers.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self.stopping.set()
        if self.controllers is not None:
            self.controllers.stop()
        with self.store.changed:
            self.store.changed.notify_all()  # ends open watches
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        if self._cert_dir is not None:
            self._cert_dir.cleanup()
            self._cert_dir = None
        if self._pki_dir is not None:
            self._pki_dir.cleanup()
            self._pki_dir, self._kubelet_client = None, None

    def __enter__(self) -> KubeSimulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the simulator is not running")
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"

    @property
    def ca_cert_path(self) -> str | None:
        """The certificate to trust when serving TLS."""
        return str(Path(self._cert_dir.name) / "cert.pem") if self._cert_dir else None

    # the API server's side of kubelets ------------------------------------------------

    def _publish_client_ca(self) -> None:
        self.store.put(
            CONFIG_MAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "extension-apiserver-authentication",
                    "namespace": "kube-system",
                },
                "data": {"client-ca-file": self.client_ca.cert_pem.decode()},
            },
        )

    def kubelet_client_files(self) -> tuple[str, str]:
        """The certificate and key this API server presents to kubelets."""
        if self._kubelet_client is None:
            self._pki_dir = tempfile.TemporaryDirectory(prefix="kube-sim-pki-")
            credential = self.client_ca.issue_client(APISERVER_KUBELET_CLIENT)
            self._kubelet_client = credential.write(Path(self._pki_dir.name), "kubelet-client")
        return self._kubelet_client

    def add_user(self, token: str, name: str, groups: Sequence[str] = ()) -> None:
        """A user TokenReview knows (the simulator's own API still serves only `token`)."""
        self.access.add_user(token, name, groups)

    def add_rbac(self, documents: Sequence[dict[str, Any]]) -> None:
        """Roles and bindings for SubjectAccessReview (not for this API's own requests)."""
        self.access.add_rbac(documents)

    # clients ----------------------------------------------------------------------

    def write_kubeconfig(self, path: str) -> str:
        cluster: dict[str, str] = {"server": self.base_url}
        if self.ca_cert_path:
            cluster["certificate-authority-data"] = base64.b64encode(
                Path(self.ca_cert_path).read_bytes()
            ).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": cluster}],
            "users": [{"name": "sim", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "sim",
                    "context": {"cluster": "sim", "user": "sim", "namespace": "default"},
                }
            ],
            "current-context": "sim",
        }
        Path(path).write_text(yaml.safe_dump(config))
        return path

    def api_client(self) -> kubernetes.client.ApiClient:
        configuration = kubernetes.client.Configuration(host=self.base_url)
        configuration.api_key = {"BearerToken": self.token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.ssl_ca_cert = self.ca_cert_path
        return kubernetes.client.ApiClient(configuration)

    # acting as the cluster in tests (no auth, no faults, not recorded) ------------------

    def create_pod(self, manifest: dict[str, Any]) -> dict[str, Any]:
        namespace = manifest.get("metadata", {}).get("namespace") or "default"
        return copy.deepcopy(self.store.create(PODS, namespace, manifest))

    def make_unschedulable(self, namespace: str, name: str) -> None:
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            "lastTransitionTime": format_time(self.clock.now()),
        }
        self.store.patch(
            PODS,
            namespace,
            name,
            "application/strategic-merge-patch+json",
            {"status": {"conditions": [condition]}},
            "status",
        )

    def delete_pod(self, namespace: str, name: str, grace_seconds: int = 30) -> None:
        self.store.delete(PODS, namespace, name, grace_seconds)

    def get(self, kind_plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        entry = self.store.find(_resource(kind_plural), namespace, name)
        return copy.deepcopy(entry.obj) if entry else None

    def list(self, kind_plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        page = self.store.list_page(_resource(kind_plural), namespace, Selector())
        return [copy.deepcopy(entry.obj) for entry in page.items]

    def put(self, kind_plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(self.store.put(_resource(kind_plural), obj))

    def inject_fault(self, method: str, path_pattern: str, status: int, count: int = 1) -> None:
        """Fail the next `count` requests whose method and path (a glob) match.

        `status` 0 drops the connection without an answer, as a crashed server would.
        """
        with self._faults_lock:
            self._faults.append(Fault(method.upper(), path_pattern, status, count))

    def take_fault(self, method: str, path: str) -> int | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.remaining -= 1
                    return fault.status
        return None

    def record(self, method: str, path: str, query: str, status: int) -> None:
        with self._faults_lock:
            self.requests.append((method, path, query, status))


def _resource(kind_plural: str) -> Resource:
    try:
        return BY_PLURAL[kind_plural]
    except KeyError:
        raise ValueError(f"the simulator does not serve {kind_plural!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler.sim.kube", description="Serve a simulated Kubernetes API."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default="sim-token")
    parser.add_argument("--kubeconfig-out", help="write a kubeconfig for this server here")
    parser.add_argument("--rbac", action="append", default=[], help="RBAC manifest file")
    parser.add_argument("--rbac-subject", help="whom the token authenticates as")
    parser.add_argument(
        "--tls", action="store_true", help="serve HTTPS (kubectl sends its token only over TLS)"
    )
    args = parser.parse_args(argv)
    simulator = KubeSimulator(
        args.token,
        host=args.host,
        port=args.port,
        tls=args.tls,
        clock=real_start(),
        rbac_files=args.rbac,
        rbac_subject=args.rbac_subject,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with simulator:
        if args.kubeconfig_out:
            simulator.write_kubeconfig(args.kubeconfig_out)
        print(simulator.base_url, flush=True)
        stop.wait()
    return 0
