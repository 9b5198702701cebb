"""Starting the kubelet endpoint for `reconciler sync`, from the settings."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.cluster import default_namespace
from reconciler.adapters.runpod.client import RunPodClient
from reconciler.adapters.ssh.client import HostKeys, SshConnector
from reconciler.adapters.store.repository import Store
from reconciler.core.config import Settings
from reconciler.core.kubelet_settings import KubeletSettings
from reconciler.core.pods.usage import ContainerUsage
from reconciler.core.translate.ssh import SshAddress
from reconciler.runtime.kubelet.auth import Authenticator
from reconciler.runtime.kubelet.exec import SshTargets
from reconciler.runtime.kubelet.server import EndpointLimits, ExecBackend, KubeletServer
from reconciler.runtime.kubelet.sshkey import ssh_identity
from reconciler.runtime.kubelet.tls import client_ca, server_context, serving_pair
from reconciler.runtime.logs.follows import LogGate
from reconciler.runtime.logs.sources import KeepLimits, PodLogs

log = logging.getLogger(__name__)


def stored_host_keys(store: Store, clock: Callable[[], datetime]) -> HostKeys:
    """Host keys kept in the state store: a changed one is refused after a restart too."""
    return HostKeys(lambda instance_id, key: store.host_keys.remember(instance_id, key, clock()))


def limits_of(kubelet: KubeletSettings) -> EndpointLimits:
    return EndpointLimits(
        idle_timeout=kubelet.idle_timeout,
        header_timeout=kubelet.request_header_timeout,
        max_connections=kubelet.max_connections,
        max_unauthenticated=kubelet.max_unauthenticated,
        max_headers=kubelet.max_headers,
        max_header_bytes=kubelet.max_header_bytes,
        max_follows=kubelet.max_follows,
        max_follows_per_namespace=kubelet.max_follows_per_namespace,
        max_streaming_per_namespace=kubelet.max_streaming_per_namespace,
        streaming_idle_timeout=kubelet.streaming_connection_idle_timeout,
    )


def start_endpoint(
    settings: Settings,
    kube: KubeClient,
    store: Store,
    runpod: RunPodClient,
    clock: Callable[[], datetime],
    is_leader: Callable[[], bool],
    namespace: str,
    host: str = "0.0.0.0",
    port: int | None = None,
    usage: Callable[[datetime], list[ContainerUsage]] | None = None,
    listed: Callable[[str], SshAddress | None] = lambda _uid: None,
) -> KubeletServer | None:
    """Serve on `settings.kubelet.port` (None when it is 0). `runpod` is the endpoint's
    own client: requests' sessions are not shared across threads. `listed`: where a
    pod's instance runs sshd, as the engine's last list said."""
    if settings.kubelet.port == 0:
        return None
    cert, key = serving_pair(
        kube,
        settings.kubelet.tls_secret,
        namespace,
        settings.node.name,
        settings.kubelet.address,
    )
    context = server_context(cert, key, client_ca(kube))
    logs = PodLogs(
        settings.node.name,
        runpod,
        kube,
        store,
        clock,
        limits=KeepLimits(settings.logs.keep_lines, settings.logs.keep_bytes),
        gate=LogGate(settings.logs.read_share, runpod.rate_windows, clock),
    )
    server = KubeletServer(
        (host, settings.kubelet.port if port is None else port),
        context,
        Authenticator(kube, settings.node.name),
        logs,
        is_leader,
        clock,
        limits_of(settings.kubelet),
        usage,
    )
    identity = ssh_identity(settings, kube, default_namespace())
    if identity is not None:
        server.exec = ExecBackend(
            SshTargets(settings.node.name, kube, store, runpod, settings.owner_id, listed),
            SshConnector(
                identity.private_pem, stored_host_keys(store, clock), settings.ssh.proxy_command
            ),
        )
    server.start()
    log.info(
        "serving the kubelet endpoint (kubectl logs) on port %d; the node advertises %s",
        server.port,
        settings.kubelet.address or "no address (set --kubelet-address)",
    )
    return server
