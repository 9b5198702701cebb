"""The Kubernetes adapter: the kubelet-like calls the reconciler makes, as raw JSON.

It rides on the official client's `ApiClient` (kubeconfig or in-cluster config, token
refresh, TLS, connection pool) but not on its models: thousands of pods per tick are
far cheaper as `json.loads` dicts, and sending our own dicts keeps timestamps in the
exact formats the API server parses (the models would re-serialise them). Every
request goes through `_request`, the one place where client and urllib3 errors become
`reconciler.adapters.kube.errors`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import kubernetes
import urllib3

from reconciler.adapters.kube.errors import (
    KubeConflict,
    KubeError,
    KubeNotFound,
    KubeTransportError,
    error_for,
)
from reconciler.adapters.kube.kubeconfig import merge as merge_kubeconfig
from reconciler.adapters.kube.stream import WatchStream
from reconciler.core.domain import KubeObject
from reconciler.core.pods import facts as podinfo
from reconciler.core.printable import escaped

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# (connect, read) seconds: a hung API server must fail one tick, not hang the loop.
DEFAULT_TIMEOUT = (5.0, 30.0)
NODE_LEASE_NAMESPACE = "kube-node-lease"
_HOME_KUBECONFIG = "~/.kube/config"
# Like the kubelet's nodeStatusReportFrequency: an unchanged node status is rewritten this
# often, so its heartbeat times stay meaningful; the Lease is the real liveness signal.
NODE_STATUS_REPORT_SECONDS = 300
DEFAULT_COMPONENT = "runpod-reconciler"
MAX_EVENT_MESSAGE = 1024
"""An Event's note is at most 1 kB (events.k8s.io validation); a longer message is cut."""
WATCH_READ_SLACK_SECONDS = 30
_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
CREATES_HELD_ANNOTATION = "runpod.io/creates-held-until"
"""On a writer Lease: no holder starts a create before this time. An earlier writer may
have made an instance that RunPod does not list yet and that no pod names: a dead
holder's last create (the hold lasts its term), or the creates a writer released the
Lease without recording on their pods. Kept in the Lease so that every successor
within the hold honours it, however many short runs follow each other."""


@dataclass(frozen=True)
class LeaseClaim:
    """The outcome of one try for a Lease; true when won."""

    won: bool
    taken_over_from: str | None = None
    """The holder whose lease had expired when we took it (it stopped renewing)."""
    holder: str | None = None
    """Who holds it when we did not win (None when even a read after a lost race found
    nobody: the winner released it at once)."""
    creates_held_until: datetime | None = None
    """Until when the holder may start no create (`CREATES_HELD_ANNOTATION`): the term of
    a holder taken over as dead, or a hold a writer before us passed on; None if none."""

    def __bool__(self) -> bool:
        return self.won


def _utc_now() -> datetime:
    return datetime.now(UTC)


class KubeClient:
    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        now: Callable[[], datetime] = _utc_now,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        """`now` stamps events and node leases (a SimClock's `now` in tests)."""
        self.api_client = api_client
        self._now = now
        self._timeout = timeout

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        now: Callable[[], datetime] = _utc_now,
    ) -> KubeClient:
        """A kubeconfig path (or several, `:`-separated, merged as kubectl merges them),
        else $KUBECONFIG or ~/.kube/config, else in-cluster config; `context` picks one
        of the kubeconfig's contexts instead of its current-context."""
        source = kubeconfig or os.environ.get("KUBECONFIG") or ""
        if not source and (context or Path(_HOME_KUBECONFIG).expanduser().exists()):
            source = _HOME_KUBECONFIG
        try:
            if source:
                api_client = kubernetes.config.new_client_from_config_dict(
                    merge_kubeconfig(source), context=context, persist_config=False
                )
            else:
                configuration = kubernetes.client.Configuration()
                kubernetes.config.load_incluster_config(client_configuration=configuration)
                api_client = kubernetes.client.ApiClient(configuration)
        except Exception as error:
            # The loader raises ConfigException, KubeconfigError, YAML parse errors,
            # OSError (unreadable file) and TypeError (odd shapes) alike: each is a
            # configuration to fix.
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise KubeError(
                f"no usable Kubernetes configuration ({source or 'in-cluster'}): {first_line}"
            ) from error
        return cls(api_client, now=now)

    def close(self) -> None:
        self.api_client.close()

    # pods -------------------------------------------------------------------------

    def list_node_pods(self, node_name: str, page_size: int = 500) -> list[KubeObject]:
        """The pods bound to the node, as the reconciler keeps them (`podinfo.kept`)."""
        selector = node_pods_selector(node_name)
        return self._list_all("/api/v1/pods", selector, page_size, podinfo.kept)

    def list_pending_managed_pods(self, page_size: int = 500) -> list[KubeObject]:
        """Unscheduled Pending pods in every namespace (offload candidates), as the
        reconciler keeps them (`podinfo.kept`)."""
        selector = "spec.nodeName=,status.phase=Pending"
        return self._list_all("/api/v1/pods", selector, page_size, podinfo.kept)

    def pods_resource_version(self, field_selector: str) -> str:
        """Where a watch of these pods can start: the resourceVersion of a one-item list
        (the whole list is the tick's business)."""
        page = self._request(
            "GET", "/api/v1/pods", query=[("fieldSelector", field_selector), ("limit", "1")]
        )
        return str((page.get("metadata") or {}).get("resourceVersion") or "")

    def find_pod(self, namespace: str, name: str) -> KubeObject | None:
        """One pod by name, through a list (the RBAC rules grant no single-pod `get`)."""
        page = self._request(
            "GET",
            f"/api/v1/namespaces/{_q(namespace)}/pods",
            query=[("fieldSelector", f"metadata.name={_field_value(name)}")],
        )
        items = page.get("items") or []
        return items[0] if items else None

    def watch_pods(
        self, field_selector: str, resource_version: str, timeout_seconds: int
    ) -> WatchStream:
        """The changes to these pods after `resource_version`, until the server ends the
        watch after `timeout_seconds` (or the caller closes the stream)."""
        query = [
            ("fieldSelector", field_selector),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        # The read timeout outlasts the server's own end of the watch: a quiet watch is
        # not a broken one.
        timeout = (self._timeout[0], timeout_seconds + WATCH_READ_SLACK_SECONDS)
        headers = {"Accept": "application/json"}
        with _translated_errors():
            request = self.api_client.param_serialize(
                method="GET",
                resource_path="/api/v1/pods",
                query_params=query,
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(*request, _request_timeout=timeout)
            if not 200 <= response.status < 300:
                raise error_for(response.status, response.read())
        return WatchStream(response.response)

    def patch_pod_status(
        self,
        namespace: str,
        name: str,
        status: dict[str, Any],
        annotations: dict[str, str | None] | None = None,
    ) -> None:
        """Make the pod show `status`, leaving what others set (their conditions) alone.

        A strategic merge patch, written for each list's patch strategy: conditions
        merge by type, so each of ours clears the reason and message it does not carry
        (a stale one would stay); podIPs and hostIPs merge by ip, so they are replaced
        whole (a merged old and new address is refused: hostIPs[0] must be hostIP, one
        address per family); containerStatuses is atomic and always sent whole.
        Annotations go in the same request when given: the pods/status subresource
        keeps metadata changes (it resets only spec, deletionTimestamp and
        ownerReferences).
        """
        body: dict[str, Any] = {"status": _status_patch(status)}
        if annotations:
            body["metadata"] = {"annotations": annotations}
        self._request(
            "PATCH",
            _pod_path(namespace, name, "status"),
            body=body,
            content_type=STRATEGIC_MERGE_PATCH,
        )

    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: dict[str, str | None],
    ) -> None:
        """Merge patch: other annotations stay; a None value removes that key."""
        self._request(
            "PATCH",
            _pod_path(namespace, name),
            body={"metadata": {"annotations": annotations}},
            content_type=MERGE_PATCH,
        )

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Finish a pod like the kubelet: grace 0, and only the pod with this UID.

        Already gone is success; a different pod under the same name raises KubeConflict.
        """
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": uid},
        }
        try:
            self._request("DELETE", _pod_path(namespace, name), body=options)
        except KubeNotFound:
            return

    def bind_pod(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        self._request("POST", _pod_path(namespace, name, "binding"), body=binding)

    # jobs, secrets, config maps, cluster identity ------------------------------------

    def get_job(self, namespace: str, name: str) -> KubeObject | None:
        return self._get_optional(f"/apis/batch/v1/namespaces/{_q(namespace)}/jobs/{_q(name)}")

    def owning_job(self, pod: KubeObject) -> KubeObject | None:
        """The Job controlling this pod; None if none, or if the name now holds another Job."""
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
                job = self.get_job(meta.get("namespace") or "default", ref["name"])
                if job is not None and job["metadata"].get("uid") == ref.get("uid"):
                    return job
        return None

    # storage: the network-volume provisioner's reads and writes ---------------------

    def list_storage_classes(self) -> list[KubeObject]:
        return self._list_all("/apis/storage.k8s.io/v1/storageclasses", "", 500)

    def list_claims(self) -> list[KubeObject]:
        return self._list_all("/api/v1/persistentvolumeclaims", "", 500)

    def list_persistent_volumes(self) -> list[KubeObject]:
        return self._list_all("/api/v1/persistentvolumes", "", 500)

    def read_claim(self, namespace: str, name: str) -> KubeObject | None:
        return self._get_optional(_claim_path(namespace, name))

    def read_persistent_volume(self, name: str) -> KubeObject | None:
        return self._get_optional(f"/api/v1/persistentvolumes/{_q(name)}")

    def create_persistent_volume(self, volume: KubeObject) -> None:
        """Made already (a retry after a lost answer) is success."""
        try:
            self._request("POST", "/api/v1/persistentvolumes", body=volume)
        except KubeConflict:
            return

    def delete_persistent_volume(self, name: str) -> None:
        try:
            self._request("DELETE", f"/api/v1/persistentvolumes/{_q(name)}")
        except KubeNotFound:
            return

    def patch_persistent_volume(self, name: str, patch: KubeObject) -> None:
        path = f"/api/v1/persistentvolumes/{_q(name)}"
        self._request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def patch_claim(
        self, namespace: str, name: str, patch: KubeObject, status: bool = False
    ) -> None:
        path = _claim_path(namespace, name) + ("/status" if status else "")
        self._request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        secret = self._get_optional(f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}")
        if secret is None:
            return None
        return {key: _b64_text(value) for key, value in (secret.get("data") or {}).items()}

    def read_secret_bytes(self, namespace: str, name: str) -> tuple[str, dict[str, bytes]] | None:
        """A Secret's type and its data as bytes; None if it does not exist."""
        secret = self._get_optional(f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}")
        if secret is None:
            return None
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        return str(secret.get("type") or "Opaque"), data

    def create_secret(
        self, namespace: str, name: str, secret_type: str, data: dict[str, bytes]
    ) -> None:
        """Create a Secret of ours; KubeConflict if the name is taken."""
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "runpod-reconciler"},
            },
            "type": secret_type,
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        }
        self._request("POST", f"/api/v1/namespaces/{_q(namespace)}/secrets", body=body)

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        config_map = self._get_optional(f"/api/v1/namespaces/{_q(namespace)}/configmaps/{_q(name)}")
        if config_map is None:
            return None
        values = {k: _b64_text(v) for k, v in (config_map.get("binaryData") or {}).items()}
        values.update(config_map.get("data") or {})
        return values

    def namespace_annotations(self, name: str) -> dict[str, str] | None:
        """The Namespace object's annotations (budget caps), None if it does not exist."""
        namespace = self._get_optional(f"/api/v1/namespaces/{_q(name)}")
        if namespace is None:
            return None
        return dict((namespace.get("metadata") or {}).get("annotations") or {})

    def cluster_uid(self) -> str:
        return str(self._request("GET", "/api/v1/namespaces/kube-system")["metadata"]["uid"])

    def server_version(self) -> str:
        """The API server's gitVersion (GET /version), e.g. v1.32.3-eks-4096722."""
        return str(self._request("GET", "/version").get("gitVersion") or "")

    # reviews: a kubelet's authentication and authorization ---------------------------

    def review_token(self, token: str) -> dict[str, Any]:
        """The TokenReview status for a bearer token: `authenticated`, `user`, `error`."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        review = self._request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body)
        return dict(review.get("status") or {})

    def review_access(
        self, user: str, groups: list[str], uid: str, attributes: dict[str, str]
    ) -> tuple[bool, str]:
        """SubjectAccessReview: may `user` do `attributes`? (allowed, reason)"""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "uid": uid, "resourceAttributes": attributes},
        }
        review = self._request(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body
        )
        status = review.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or "")

    # events -----------------------------------------------------------------------

    def record_event(
        self,
        pod: KubeObject,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = DEFAULT_COMPONENT,
        occurred_at: datetime | None = None,
    ) -> None:
        """Record an Event on `pod`; a repeat of the same one bumps its count instead.

        The event's name is derived from (object UID, reason, message, type, component),
        so repeats are found again after a restart, without any local cache. Most events
        are new: one POST; only a repeat (409 AlreadyExists) costs a GET and a PATCH more.

        `occurred_at` stamps the Event with when the thing happened elsewhere (a line of
        RunPod's log) and makes recording it again harmless: a repeat no later than the
        Event's last time is that occurrence seen twice, so it is not counted (the GET,
        no PATCH). Times have whole seconds: two such repeats within one second count once.
        """
        meta = pod["metadata"]
        namespace = meta.get("namespace") or "default"
        # Messages quote users' values: a newline or an escape sequence must not reach
        # whoever reads the Event in a terminal.
        message = escaped(message)[:MAX_EVENT_MESSAGE]
        name = _event_name(pod, reason, message, type, component)
        collection = f"/api/v1/namespaces/{_q(namespace)}/events"
        stamp = _time(occurred_at or self._now())
        event = _new_event(pod, name, reason, message, type, component, stamp)
        try:
            self._request("POST", collection, body=event)
            return
        except KubeConflict:  # recorded before: count this one on top of it
            existing = self._request("GET", f"{collection}/{_q(name)}")
        if occurred_at is not None and str(existing.get("lastTimestamp") or "") >= stamp:
            return  # this occurrence (or a later one) is counted already
        bump = {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": stamp}
        self._request("PATCH", f"{collection}/{_q(name)}", body=bump, content_type=MERGE_PATCH)

    # node and heartbeat ------------------------------------------------------------

    def read_node(self, name: str) -> KubeObject | None:
        """The live Node (cordon, taints), or None when it is not registered."""
        return self._get_optional(f"/api/v1/nodes/{_q(name)}")

    def ensure_node(self, node: KubeObject) -> None:
        """Create the Node or bring it to `node`; writes nothing when nothing changed."""
        path = f"/api/v1/nodes/{_q(node['metadata']['name'])}"
        current = self._get_optional(path)
        if current is None:
            current = self._request("POST", "/api/v1/nodes", body=node)
        metadata_patch = _node_metadata_patch(current, node)
        if metadata_patch:
            self._request("PATCH", path, body=metadata_patch, content_type=MERGE_PATCH)
        status = _node_status_update(current.get("status") or {}, node.get("status") or {})
        if status is not None:
            self._request(
                "PATCH",
                f"{path}/status",
                body={"status": status},
                content_type=STRATEGIC_MERGE_PATCH,
            )

    def renew_node_lease(self, node_name: str, duration_seconds: int = 40) -> datetime | None:
        """The node heartbeat: the Lease named after the node in kube-node-lease. Returns
        when it had last been renewed (None for a new Lease)."""
        collection = _LEASES.format(namespace=NODE_LEASE_NAMESPACE)
        lease = self._get_optional(f"{collection}/{_q(node_name)}")
        spec = {
            "holderIdentity": node_name,
            "leaseDurationSeconds": duration_seconds,
            "renewTime": _micro_time(self._now()),
        }
        if lease is None:
            self._request("POST", collection, body=_lease(NODE_LEASE_NAMESPACE, node_name, spec))
            return None
        previous = (lease.get("spec") or {}).get("renewTime")
        lease["spec"] = {**(lease.get("spec") or {}), **spec}
        self._request("PUT", f"{collection}/{_q(node_name)}", body=lease)
        return datetime.fromisoformat(previous) if previous else None

    def node_lease_renewed_at(self, node_name: str) -> datetime | None:
        """When the node's heartbeat Lease was last renewed; None if it has none."""
        collection = _LEASES.format(namespace=NODE_LEASE_NAMESPACE)
        lease = self._get_optional(f"{collection}/{_q(node_name)}")
        renewed = ((lease or {}).get("spec") or {}).get("renewTime")
        return datetime.fromisoformat(renewed) if renewed else None

    # leader election ---------------------------------------------------------------

    def try_acquire_lease(
        self,
        namespace: str,
        name: str,
        identity: str,
        duration_seconds: int,
        now: datetime,
        *,
        dead_holder: str | None = None,
    ) -> LeaseClaim:
        """Acquire (free, expired or ours) or renew the Lease; not won if someone else holds
        a valid one or won the race (a 409 on our resourceVersion-guarded write).

        `dead_holder` names a holder known to be dead (a process of this host that no
        longer runs): its Lease is taken as if it had expired."""
        collection = _LEASES.format(namespace=_q(namespace))
        lease = self._get_optional(f"{collection}/{_q(name)}")
        stamp = _micro_time(now)
        claim = {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration_seconds,
            "renewTime": stamp,
        }
        try:
            if lease is None:
                first = {**claim, "acquireTime": stamp, "leaseTransitions": 0}
                self._request("POST", collection, body=_lease(namespace, name, first))
                return LeaseClaim(won=True)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            if (
                holder
                and holder != identity
                and holder != dead_holder
                and not _lease_expired(spec, now)
            ):
                return LeaseClaim(won=False, holder=holder)
            held = _creates_held_until(lease, now)
            if holder != identity:
                claim.update(
                    acquireTime=stamp, leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1
                )
                if holder and not _lease_expired(spec, now):
                    # A dead holder's create may still land within its term.
                    held = _hold_creates(lease, _lease_term_end(spec), now)
            lease["spec"] = {**spec, **claim}
            self._request("PUT", f"{collection}/{_q(name)}", body=lease)
            return LeaseClaim(
                won=True,
                taken_over_from=holder if holder != identity else None,
                creates_held_until=held,
            )
        except KubeConflict:
            # Another writer wrote the Lease between our read and our write: one more
            # read names it, so a refused writer can say who acts.
            winner = self._get_optional(f"{collection}/{_q(name)}") or {}
            return LeaseClaim(won=False, holder=(winner.get("spec") or {}).get("holderIdentity"))

    def release_lease(
        self, namespace: str, name: str, identity: str, hold_creates_until: datetime | None = None
    ) -> None:
        """Give the Lease up at once (if still ours), so a successor need not wait it out.
        A hold on creates in it stays; `hold_creates_until` extends it."""
        path = f"{_LEASES.format(namespace=_q(namespace))}/{_q(name)}"
        lease = self._get_optional(path)
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != identity:
            return
        now = self._now()
        if hold_creates_until is not None:
            _hold_creates(lease, hold_creates_until, now)
        spec.pop("holderIdentity")
        spec.update(leaseDurationSeconds=1, renewTime=_micro_time(now))
        try:
            self._request("PUT", path, body=lease)
        except KubeConflict:
            return  # someone else wrote it meanwhile: it is no longer ours to release

    # plumbing ---------------------------------------------------------------------

    def _list_all(
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
            page = self._request("GET", path, query=query)
            listed = page.get("items") or []
            items.extend(listed if keep is None else map(keep, listed))
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    def _get_optional(self, path: str) -> KubeObject | None:
        try:
            return self._request("GET", path)
        except KubeNotFound:
            return None

    def _request(
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


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _field_value(value: str) -> str:
    """A value for a field selector, escaped as apimachinery's fields.EscapeValue does:
    unescaped, a comma in a name would start a second term."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def node_pods_selector(node_name: str) -> str:
    """The field selector of the pods bound to a node."""
    return f"spec.nodeName={_field_value(node_name)}"


def _claim_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{_q(namespace)}/persistentvolumeclaims/{_q(name)}"


def _pod_path(namespace: str, name: str, subresource: str = "") -> str:
    path = f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}"
    return f"{path}/{subresource}" if subresource else path


def _time(moment: datetime) -> str:
    """metav1.Time: RFC 3339 in whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_time(moment: datetime) -> str:
    """metav1.MicroTime: the API server insists on exactly six fractional digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _b64_text(value: str) -> str:
    # Binary values cannot become env vars anyway; replace rather than fail the pod.
    return base64.b64decode(value).decode("utf-8", errors="replace")


def _status_patch(status: dict[str, Any]) -> dict[str, Any]:
    patch = dict(status)
    if "conditions" in status:
        patch["conditions"] = [
            {"reason": None, "message": None, **condition} for condition in status["conditions"]
        ]
    for field in ("podIPs", "hostIPs"):
        if field in status:
            patch[field] = [{"$patch": "replace"}, *status[field]]
    return patch


def _lease(namespace: str, name: str, spec: dict[str, Any]) -> KubeObject:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _creates_held_until(lease: KubeObject, now: datetime) -> datetime | None:
    value = ((lease.get("metadata") or {}).get("annotations") or {}).get(CREATES_HELD_ANNOTATION)
    until = datetime.fromisoformat(value) if value else None
    return until if until is not None and until > now else None


def _hold_creates(lease: KubeObject, until: datetime | None, now: datetime) -> datetime | None:
    """Extend the Lease's hold on creates to `until` (a hold never shortens); the hold."""
    held = _creates_held_until(lease, now)
    if until is None or until <= now or (held is not None and held >= until):
        return held
    annotations = lease.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[CREATES_HELD_ANNOTATION] = _micro_time(until)
    return until


def _lease_expired(spec: dict[str, Any], now: datetime) -> bool:
    term_end = _lease_term_end(spec)
    return term_end is None or now >= term_end


def _lease_term_end(spec: dict[str, Any]) -> datetime | None:
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    if not renewed:
        return None
    duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
    return datetime.fromisoformat(renewed) + duration


def _event_name(
    obj: KubeObject,
    reason: str,
    message: str,
    type: str,
    component: str,
) -> str:
    meta = obj["metadata"]
    identity = "\0".join((meta.get("uid", ""), reason, message, type, component))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return f"{meta['name'][:236]}.{digest}"


def _new_event(
    obj: KubeObject,
    name: str,
    reason: str,
    message: str,
    type: str,
    component: str,
    stamp: str,
) -> KubeObject:
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            # List items carry no kind: what the reconciler reports on is a pod unless told.
            "kind": obj.get("kind", "Pod"),
            "apiVersion": obj.get("apiVersion", "v1"),
            "namespace": namespace,
            "name": meta["name"],
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _node_metadata_patch(current: KubeObject, desired: KubeObject) -> KubeObject:
    """Labels and taints we own that are missing or differ; others' are left alone."""
    patch: KubeObject = {}
    labels = current["metadata"].get("labels") or {}
    changed = {
        k: v for k, v in (desired["metadata"].get("labels") or {}).items() if labels.get(k) != v
    }
    if changed:
        patch["metadata"] = {"labels": changed}
    taints = (current.get("spec") or {}).get("taints") or []
    missing = [t for t in (desired.get("spec") or {}).get("taints") or [] if t not in taints]
    if missing:
        patch["spec"] = {"taints": taints + missing}
    return patch


def _node_status_update(current: dict[str, Any], desired: dict[str, Any]) -> dict | None:
    """The status to write, or None when only heartbeat times differ and none is due."""
    old_conditions = {c.get("type"): c for c in current.get("conditions") or []}
    conditions = []
    for condition in desired.get("conditions") or []:
        old = old_conditions.get(condition.get("type"))
        if old and old.get("status") == condition.get("status"):
            # A transition time marks a change of status, not a rewrite of the same one.
            condition = {**condition, "lastTransitionTime": old.get("lastTransitionTime")}
        conditions.append(condition)
    wanted = {**desired, "conditions": conditions}
    same = _without_heartbeats(wanted) == _without_heartbeats({k: current.get(k) for k in wanted})
    if same and not _heartbeat_due(old_conditions, conditions):
        return None
    return (
        {**wanted, "addresses": _addresses_patch(current, wanted)}
        if "addresses" in wanted
        else wanted
    )


def _addresses_patch(current: dict[str, Any], wanted: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's addresses as a strategic merge patch: merged by type, so an address of
    a type no longer listed (the IP of a kubelet endpoint given up) needs a delete
    directive to go, as a kubelet's own status patch carries."""
    kept = {address.get("type") for address in wanted["addresses"]}
    gone = {address.get("type") for address in current.get("addresses") or []} - kept - {None}
    return [*wanted["addresses"], *({"$patch": "delete", "type": kind} for kind in sorted(gone))]


def _without_heartbeats(status: dict[str, Any]) -> dict[str, Any]:
    conditions = sorted(
        (
            {k: v for k, v in c.items() if k != "lastHeartbeatTime"}
            for c in status.get("conditions") or []
        ),
        key=lambda c: str(c.get("type")),
    )
    return {**status, "conditions": conditions}


def _heartbeat_due(old: dict[str, dict[str, Any]], conditions: list[dict[str, Any]]) -> bool:
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    previous = (old.get("Ready") or {}).get("lastHeartbeatTime")
    if ready is None or not previous or not ready.get("lastHeartbeatTime"):
        return ready is not None
    elapsed = datetime.fromisoformat(ready["lastHeartbeatTime"]) - datetime.fromisoformat(previous)
    return elapsed >= timedelta(seconds=NODE_STATUS_REPORT_SECONDS)
