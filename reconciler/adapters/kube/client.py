"""The Kubernetes adapter: the kubelet-like calls the reconciler makes, as raw JSON, one
module per resource over one transport (`reconciler.adapters.kube.transport`).

A caller names the resource, then the call: `kube.pods.patch_status(...)`,
`kube.leases.try_acquire(...)`, `kube.events.record(...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import kubernetes

from reconciler.adapters.kube.cluster import Cluster
from reconciler.adapters.kube.events import Events
from reconciler.adapters.kube.jobs import Jobs
from reconciler.adapters.kube.leases import Leases
from reconciler.adapters.kube.node import Node
from reconciler.adapters.kube.pods import Pods
from reconciler.adapters.kube.reviews import Reviews
from reconciler.adapters.kube.secrets import Secrets
from reconciler.adapters.kube.services import Services
from reconciler.adapters.kube.storage import Storage
from reconciler.adapters.kube.transport import (
    DEFAULT_TIMEOUT,
    KubeTransport,
    api_client_from_config,
    utc_now,
)


class KubeClient:
    """Every resource the reconciler reads or writes, sharing one `KubeTransport`."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        now: Callable[[], datetime] = utc_now,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        """`now` stamps events and leases (a SimClock's `now` in tests)."""
        self.transport = KubeTransport(api_client, now=now, timeout=timeout)
        self.pods = Pods(self.transport)
        self.jobs = Jobs(self.transport)
        self.storage = Storage(self.transport)
        self.secrets = Secrets(self.transport)
        self.cluster = Cluster(self.transport)
        self.reviews = Reviews(self.transport)
        self.events = Events(self.transport)
        self.node = Node(self.transport)
        self.leases = Leases(self.transport)
        self.services = Services(self.transport)

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        now: Callable[[], datetime] = utc_now,
    ) -> KubeClient:
        """From a kubeconfig, else in-cluster config (`api_client_from_config`)."""
        return cls(api_client_from_config(kubeconfig, context), now=now)

    def close(self) -> None:
        self.transport.close()
