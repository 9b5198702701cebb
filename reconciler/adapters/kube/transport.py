"""The one road to the API server that every resource module of the Kubernetes adapter
takes (`reconciler.adapters.kube.client` puts them together).

It rides on the official client's `ApiClient` (kubeconfig or in-cluster config, token
refresh, TLS, connection pool) but not on its models: thousands of pods per tick are
far cheaper as `json.loads` dicts, and sending our own dicts keeps timestamps in the
exact formats the API server parses (the models would re-serialise them). Every
request goes through `KubeTransport.request`, the one place where client and urllib3
errors become `reconciler.adapters.kube.errors`.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import kubernetes
import urllib3

from reconciler.adapters.kube.errors import (
    KubeError,
    KubeNotFound,
    KubeTransportError,
    error_for,
)
from reconciler.adapters.kube.kubeconfig import merge as merge_kubeconfig
from reconciler.adapters.kube.stream import WatchStream
from reconciler.core.domain import KubeObject

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# (connect, read) seconds: a hung API server must fail one tick, not hang the loop.
DEFAULT_TIMEOUT = (5.0, 30.0)
_HOME_KUBECONFIG = "~/.kube/config"
WATCH_READ_SLACK_SECONDS = 30
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def utc_now() -> datetime:
    return datetime.now(UTC)


class KubeTransport:
    """Requests to the API server as JSON, with errors mapped, and the clock that stamps
    what the adapter writes."""

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        now: Callable[[], datetime] = utc_now,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        """`now` stamps events and leases (a SimClock's `now` in tests)."""
        self.api_client = api_client
        self.now = now
        self._timeout = timeout

    def close(self) -> None:
        self.api_client.close()

    def list_all(
        self,
        path: str,
        field_selector: str,
        page_size: int,
        keep: Callable[[KubeObject], KubeObject] | None = None,
    ) -> list[KubeObject]:
        """Every page's items; each through `keep` as its page comes, so that what it
        drops never piles up over the pages."""
        items: list[KubeObject] = []
        token = ""
        while True:
            query = [("fieldSelector", field_selector), ("limit", str(page_size))]
            if token:
                query.append(("continue", token))
            page = self.request("GET", path, query=query)
            listed = page.get("items") or []
            items.extend(listed if keep is None else map(keep, listed))
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    def get_optional(self, path: str) -> KubeObject | None:
        try:
            return self.request("GET", path)
        except KubeNotFound:
            return None

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        with _translated_errors():
            method, url, headers, _none, post = self.api_client.param_serialize(
                method=method,
                resource_path=path,
                query_params=query or [],
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            # The body goes past param_serialize: it is plain JSON already, and walking
            # it to turn models into JSON cost a tenth of a churn tick's CPU (docs, Performance).
            response = self.api_client.call_api(
                method, url, headers, body, post, _request_timeout=self._timeout
            )
            data = response.read()
        if not 200 <= response.status < 300:
            raise error_for(response.status, data)
        return json.loads(data) if data else None

    def watch(self, path: str, query: list[tuple[str, str]], timeout_seconds: int) -> WatchStream:
        """A watch's stream of changes, until the server ends it after `timeout_seconds`."""
        # The read timeout outlasts the server's own end of the watch: a quiet watch is
        # not a broken one.
        timeout = (self._timeout[0], timeout_seconds + WATCH_READ_SLACK_SECONDS)
        headers = {"Accept": "application/json"}
        with _translated_errors():
            request = self.api_client.param_serialize(
                method="GET",
                resource_path=path,
                query_params=query,
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(*request, _request_timeout=timeout)
            if not 200 <= response.status < 300:
                raise error_for(response.status, response.read())
        return WatchStream(response.response)


def api_client_from_config(kubeconfig: str | None, context: str | None) -> Any:
    """A kubeconfig path (or several, `:`-separated, merged as kubectl merges them),
    else $KUBECONFIG or ~/.kube/config, else in-cluster config; `context` picks one
    of the kubeconfig's contexts instead of its current-context."""
    source = kubeconfig or os.environ.get("KUBECONFIG") or ""
    if not source and (context or Path(_HOME_KUBECONFIG).expanduser().exists()):
        source = _HOME_KUBECONFIG
    try:
        if source:
            return kubernetes.config.new_client_from_config_dict(
                merge_kubeconfig(source), context=context, persist_config=False
            )
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=configuration)
        return kubernetes.client.ApiClient(configuration)
    except Exception as error:
        # The loader raises ConfigException, KubeconfigError, YAML parse errors,
        # OSError (unreadable file) and TypeError (odd shapes) alike: each is a
        # configuration to fix.
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise KubeError(
            f"no usable Kubernetes configuration ({source or 'in-cluster'}): {first_line}"
        ) from error


@contextmanager
def _translated_errors() -> Iterator[None]:
    try:
        yield
    except kubernetes.client.ApiException as error:
        if not error.status:
            raise KubeTransportError(str(error.reason or error)) from error
        raise error_for(error.status, error.body, str(error.reason or "")) from error
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise KubeTransportError(f"no answer from the Kubernetes API: {error}") from error


def q(segment: str) -> str:
    """A path segment, quoted."""
    return quote(segment, safe="")


def field_value(value: str) -> str:
    """A value for a field selector, escaped as apimachinery's fields.EscapeValue does:
    unescaped, a comma in a name would start a second term."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def rfc3339(moment: datetime) -> str:
    """metav1.Time: RFC 3339 in whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime: the API server insists on exactly six fractional digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def b64_text(value: str) -> str:
    # Binary values cannot become env vars anyway; replace rather than fail the pod.
    return base64.b64decode(value).decode("utf-8", errors="replace")


def lease_object(namespace: str, name: str, spec: dict[str, Any]) -> KubeObject:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
