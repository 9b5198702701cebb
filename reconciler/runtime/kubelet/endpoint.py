"""Starting the kubelet endpoint for `reconciler sync`, from the settings."""

from __future__ import annotations

import logging
from collections.abc import Callable

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.config import Settings
from reconciler.runtime.engine import Engine
from reconciler.runtime.kubelet.auth import Authenticator
from reconciler.runtime.kubelet.server import KubeletServer
from reconciler.runtime.kubelet.source import KeepLimits, PodLogs
from reconciler.runtime.kubelet.tls import client_ca, server_context, serving_pair

log = logging.getLogger(__name__)


def start_endpoint(settings: Settings, engine: Engine, runpod: RunPodClient,
                   is_leader: Callable[[], bool], namespace: str,
                   host: str = "0.0.0.0", port: int | None = None) -> KubeletServer | None:
    """Serve on `settings.kubelet_port` (None when it is 0). `runpod` is the endpoint's
    own client: requests' sessions are not shared across threads."""
    if settings.kubelet_port == 0:
        return None
    cert, key = serving_pair(engine.kube, settings.kubelet_tls_secret, namespace,
                             settings.node_name, settings.kubelet_address)
    context = server_context(cert, key, client_ca(engine.kube))
    logs = PodLogs(settings.node_name, runpod, engine.kube, engine.store, engine.clock,
                   limits=KeepLimits(settings.log_keep_lines, settings.log_keep_bytes))
    server = KubeletServer((host, settings.kubelet_port if port is None else port), context,
                           Authenticator(engine.kube, settings.node_name), logs, is_leader,
                           engine.clock).start()
    log.info("serving the kubelet endpoint (kubectl logs) on port %d; the node advertises "
             "%s", server.port, settings.kubelet_address or "no address (set --kubelet-address)")
    return server
