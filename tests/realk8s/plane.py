"""A real Kubernetes control plane on loopback: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and metrics-server, built from their Go modules
(`build`).

Started as controller-runtime's envtest starts its plane, plus the processes a virtual
node lives among: etcd without fsync, the API server with Node,RBAC authorization, a
token file, service-account keys and the aggregation layer's front-proxy certificates,
the controller-manager (node lifecycle with a short grace, Job, PV binder, garbage
collector, namespace, service accounts), the scheduler, and metrics-server behind its
APIService (`metrics_server`, for `kubectl top`), each on a free loopback port, all in
a temporary directory.

    python -m tests.realk8s.plane --kubeconfig-out k

builds if needed, starts the plane, writes an admin kubeconfig to `k`, prints `ready` once
`/readyz` answers, and stops everything on SIGTERM or Ctrl-C. The `realk8s` tests'
fixture uses the same `Plane`.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tests.realk8s import build, metrics_server

# The node lifecycle controller marks a node whose Lease lapsed NotReady after this grace
# (40 s by default; short here so the tests see it without waiting).
NODE_MONITOR_GRACE = "8s"
CONTROLLERS = (
    "nodelifecycle,job,persistentvolume-binder,persistentvolume-expander,garbagecollector,"
    "namespace,serviceaccount,serviceaccount-token,podgc,replicaset,deployment,"
    "endpointslice,ttl-after-finished,root-ca-cert-publisher,taint-eviction-controller"
)
STARTUP_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


class Certificates:
    """A CA, and the serving and client certificates it signs (`ca`: the cluster's, for
    the API server and its clients; `front-proxy-ca`: the aggregation layer's, which
    vouches for the API server when it proxies a request to metrics-server)."""

    def __init__(self, directory: Path, name: str = "ca") -> None:
        self.directory = directory
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"realk8s-{name}")])
        self._ca = (
            self._builder(subject, subject, self._ca_key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = directory / f"{name}.crt"
        self.ca.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))

    @staticmethod
    def _builder(
        subject: x509.Name, issuer: x509.Name, public_key: object
    ) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
        )

    def issue(
        self,
        name: str,
        user: str,
        groups: tuple[str, ...] = (),
        server: bool = False,
        dns_names: tuple[str, ...] = (),
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
            + [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        )
        builder = self._builder(subject, self._ca.subject, key.public_key())
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        *(x509.DNSName(dns) for dns in ("localhost", *dns_names)),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(
                            ipaddress.ip_address("10.0.0.1")
                        ),  # the `kubernetes` Service
                    ]
                ),
                critical=False,
            )
        pair = KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        pair.cert.write_bytes(
            builder.sign(self._ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        )
        pair.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return pair


def _service_account_keys(directory: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def kubeconfig(server: str, ca: Path, token: str, user: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "realk8s", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "realk8s", "context": {"cluster": "realk8s", "user": user}}],
        "current-context": "realk8s",
    }


class Plane:
    """The five processes, started in order, stopped together."""

    def __init__(self, workdir: Path | None = None, binaries: Path | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="realk8s-") if workdir is None else None
        self.workdir = Path(self._tmp.name) if self._tmp else workdir  # type: ignore[assignment]
        self.binaries = binaries
        self.processes: list[subprocess.Popen[bytes]] = []
        self.admin_token = secrets.token_hex(16)
        self.url = ""

    # --- starting ------------------------------------------------------------------------

    def start(self) -> Plane:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        binaries = self.binaries or build.build()
        certs = Certificates(self.workdir)
        self.ca = certs.ca
        serving = certs.issue("apiserver", "kube-apiserver", server=True)
        kubelet_client = certs.issue(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
        )
        front_proxy = Certificates(self.workdir, "front-proxy-ca")
        proxy_client = front_proxy.issue("front-proxy-client", "front-proxy-client")
        sa_private, sa_public = _service_account_keys(self.workdir)
        tokens = {
            "admin": (self.admin_token, "system:masters"),
            "system:kube-controller-manager": (secrets.token_hex(16), ""),
            "system:kube-scheduler": (secrets.token_hex(16), ""),
        }
        token_file = self.workdir / "tokens.csv"
        token_file.write_text(
            "".join(
                f'{token},{user},{user},"{groups}"\n' for user, (token, groups) in tokens.items()
            )
        )

        etcd_port, etcd_peer = free_port(), free_port()
        self._run(
            binaries / "etcd",
            "etcd",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync",
        )
        api_port = free_port()
        self.url = f"https://127.0.0.1:{api_port}"
        self._run(
            binaries / "kube-apiserver",
            "kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # No `kubernetes` Service endpoints: a loopback address may not be one.
            "--endpoint-reconciler-type=none",
            f"--secure-port={api_port}",
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={certs.ca}",
            f"--token-auth-file={token_file}",
            "--authorization-mode=Node,RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={sa_public}",
            f"--service-account-signing-key-file={sa_private}",
            # The API server reaches the kubelet endpoint (logs, exec, port-forward) as a
            # client of the cluster CA, at the address the node advertises.
            f"--kubelet-client-certificate={kubelet_client.cert}",
            f"--kubelet-client-key={kubelet_client.key}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--allow-privileged=true",
            # The aggregation layer: the client certificate it proxies with (to
            # metrics-server), and the CA and headers an extension API server trusts.
            f"--requestheader-client-ca-file={front_proxy.ca}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={proxy_client.cert}",
            f"--proxy-client-key-file={proxy_client.key}",
        )
        self._wait_ready(f"{self.url}/readyz", self.admin_token)
        for user in ("system:kube-controller-manager", "system:kube-scheduler"):
            self._write_kubeconfig(
                self.workdir / f"{user.split(':')[-1]}.kubeconfig", tokens[user][0], user
            )
        self._run(
            binaries / "kube-controller-manager",
            "kube-controller-manager",
            f"--kubeconfig={self.workdir / 'kube-controller-manager.kubeconfig'}",
            f"--service-account-private-key-file={sa_private}",
            f"--root-ca-file={certs.ca}",
            "--use-service-account-credentials",
            "--leader-elect=false",
            f"--controllers={CONTROLLERS}",
            f"--node-monitor-grace-period={NODE_MONITOR_GRACE}",
            "--node-monitor-period=2s",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--cluster-name=realk8s",
        )
        config = self.workdir / "scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {
                        "kubeconfig": str(self.workdir / "kube-scheduler.kubeconfig")
                    },
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        self._run(
            binaries / "kube-scheduler",
            "kube-scheduler",
            f"--config={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
        )
        self._start_metrics_server(binaries, certs)

    def _start_metrics_server(self, binaries: Path, certs: Certificates) -> None:
        port = free_port()
        self.kubectl("apply", "-f", "-", input=metrics_server.manifest(port, certs.ca))
        token = self.kubectl(
            "create",
            "token",
            metrics_server.NAME,
            f"--namespace={metrics_server.NAMESPACE}",
            "--duration=48h",  # as long as the plane's certificates
        ).stdout.strip()
        config = self._write_kubeconfig(
            self.workdir / "metrics-server.kubeconfig", token, metrics_server.NAME
        )
        serving = certs.issue(
            "metrics-server", "metrics-server", server=True, dns_names=(metrics_server.SERVICE_DNS,)
        )
        self._run(
            binaries / "metrics-server",
            "metrics-server",
            *metrics_server.arguments(port, config, serving.cert, serving.key),
        )
        self._wait_ready(
            f"{self.url}/apis/apiregistration.k8s.io/v1/apiservices/{metrics_server.APISERVICE}",
            self.admin_token,
            lambda answer: any(
                c["type"] == "Available" and c["status"] == "True"
                for c in json.loads(answer).get("status", {}).get("conditions", [])
            ),
        )

    def _run(self, binary: Path, name: str, *args: str) -> None:
        log = (self.workdir / f"{name}.log").open("wb")
        # Its own process group, so that stopping the plane leaves no child behind.
        process = subprocess.Popen(
            [str(binary), *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.processes.append(process)

    def _wait_ready(
        self, url: str, token: str, ready: Callable[[bytes], bool] = lambda _: True
    ) -> None:
        context = ssl.create_default_context(cafile=str(self.ca))
        deadline = time.monotonic() + STARTUP_TIMEOUT
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        while True:
            self._check_alive()
            try:
                with urllib.request.urlopen(request, context=context, timeout=5) as answer:
                    if answer.status == 200 and ready(answer.read()):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{url} not ready after {STARTUP_TIMEOUT:.0f}s; logs in {self.workdir}"
                )
            time.sleep(0.5)

    def _check_alive(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                name = Path(str(process.args[0])).name
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")

    # --- using -----------------------------------------------------------------------------

    def _write_kubeconfig(self, path: Path, token: str, user: str) -> Path:
        path.write_text(yaml.safe_dump(kubeconfig(self.url, self.ca, token, user)))
        path.chmod(0o600)
        return path

    def write_admin_kubeconfig(self, path: Path) -> Path:
        return self._write_kubeconfig(path, self.admin_token, "admin")

    def kubectl(
        self, *args: str, kubeconfig: Path | None = None, check: bool = True, **kw: object
    ) -> subprocess.CompletedProcess[str]:
        config = kubeconfig or self.write_admin_kubeconfig(self.workdir / "admin.kubeconfig")
        done: subprocess.CompletedProcess[str] = subprocess.run(  # type: ignore[call-overload]
            ["kubectl", f"--kubeconfig={config}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            **kw,
        )
        if check and done.returncode != 0:
            # Its own words (the verb only: an argument may be a token).
            raise RuntimeError(f"kubectl {args[0]} failed ({done.returncode}): {done.stderr}")
        return done

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each process (from /proc)."""
        sizes = {}
        for process in self.processes:
            status = Path(f"/proc/{process.pid}/status")
            if process.poll() is None and status.exists():
                for line in status.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes[Path(str(process.args[0])).name] = int(line.split()[1]) * 1024
        return sizes

    # --- stopping ------------------------------------------------------------------------

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Plane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None, out: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.realk8s.plane", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--kubeconfig-out", required=True, type=Path, help="where to write the admin kubeconfig"
    )
    args = parser.parse_args(argv)
    stopping = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stopping.set())
    with Plane() as plane:
        plane.write_admin_kubeconfig(args.kubeconfig_out.resolve())
        print("ready", file=out, flush=True)
        while not stopping.wait(1):
            plane._check_alive()
    return 0


if __name__ == "__main__":
    sys.exit(main())
