"""The RunPod REST v2 client: a module per resource over one rate-limited transport
(`reconciler.adapters.runpod.transport`, which owns retries, pacing and the tick's deadline).

A caller names the resource, then the call: `runpod.instances.create(...)`,
`runpod.volumes.get(...)`, `runpod.billing.clusters(...)`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from reconciler.adapters.runpod.billing import BillingApi
from reconciler.adapters.runpod.catalog import CatalogApi
from reconciler.adapters.runpod.clusters import ClustersApi
from reconciler.adapters.runpod.instances import InstancesApi
from reconciler.adapters.runpod.registries import RegistriesApi
from reconciler.adapters.runpod.transport import DEFAULT_MAX_ANSWER_BYTES, RunPodTransport
from reconciler.adapters.runpod.volumes import NetworkVolumesApi
from reconciler.core.capacity import pacing


class RunPodClient:
    """Every resource the reconciler reads or writes at RunPod, sharing one transport: one
    API key, one quota."""

    def __init__(
        self,
        api_key: str,
        base_url: str = "https://api.runpod.io",
        *,
        connect_timeout: float = 5,
        read_timeout: float = 30,
        max_attempts: int = 4,
        max_retry_time: float = 60,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        on_response: Callable[[str, int], None] | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.transport = RunPodTransport(
            api_key,
            base_url,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_attempts=max_attempts,
            max_retry_time=max_retry_time,
            sleep=sleep,
            monotonic=monotonic,
            on_response=on_response,
            max_answer_bytes=max_answer_bytes,
        )
        self.instances = InstancesApi(self.transport)
        self.clusters = ClustersApi(self.transport)
        self.volumes = NetworkVolumesApi(self.transport)
        self.registries = RegistriesApi(self.transport)
        self.catalog = CatalogApi(self.transport)
        self.billing = BillingApi(self.transport)

    def __repr__(self) -> str:
        return f"RunPodClient({self.transport!r})"

    def __enter__(self) -> RunPodClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()

    # The quota and the tick's deadline are the transport's: one per API key.

    @property
    def rate_budget(self) -> int | None:
        """Requests we may still send now: our share when others use the key too."""
        return self.transport.rate_budget

    def rate_windows(self) -> list[pacing.Window]:
        return self.transport.rate_windows()

    def deadline_in(self, seconds: float | None) -> None:
        self.transport.deadline_in(seconds)

    @property
    def past_deadline(self) -> bool:
        return self.transport.past_deadline

    def tick_gap(self) -> float:
        return self.transport.tick_gap()

    def quota_ample(self, extra: int = 1) -> bool:
        return self.transport.quota_ample(extra)

    def served_now(self) -> datetime | None:
        """RunPod's time now, by the Date of its last answers (None before the first):
        the time graces are measured on (`served_clock`)."""
        return self.transport.served.now()
