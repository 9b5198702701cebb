"""The HTTP side of the simulated API server: routing, auth, RBAC, lists and watches."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from reconciler.sim.kube import metrics as metrics_api
from reconciler.sim.kube import protobuf, resources
from reconciler.sim.kube.access import AccessModel
from reconciler.sim.kube.jobs import JobController
from reconciler.sim.kube.pod_exec import (
    kubelet_exec_request,
    kubelet_port_forward_request,
    serve_upgrade,
)
from reconciler.sim.kube.pod_log import open_pod_log
from reconciler.sim.kube.rbac import Attributes, Authorizer
from reconciler.sim.kube.resources import CREATE_ONLY_SUBRESOURCES, Resource, find_resource
from reconciler.sim.kube.select import Selector, SelectorError, parse_selector
from reconciler.sim.kube.status import ApiError, not_found, success
from reconciler.sim.kube.store import Page, Store, WatchEvent
from reconciler.sim.kube.table import table_for
from reconciler.sim.kube.upgrade import is_websocket

Query = dict[str, list[str]]
_PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})
# How long a watch waits for news before checking whether it should end.
_WATCH_POLL_SECONDS = 0.5
_DEFAULT_WATCH_SECONDS = 1800


class Backend(Protocol):
    """What the handler needs of the simulator that serves it (`KubeSimulator`)."""

    token: str
    subject: str
    authorizer: Authorizer | None
    store: Store
    stopping: threading.Event
    access: AccessModel
    kubelet_ca_file: str | None
    metrics: metrics_api.MetricsServer
    jobs: JobController

    @property
    def base_url(self) -> str: ...

    def take_fault(self, method: str, path: str) -> int | None: ...

    def kubelet_client_files(self) -> tuple[str, str]: ...

    def record(self, method: str, path: str, query: str, status: int) -> None: ...


@dataclass(frozen=True)
class Route:
    resource: Resource
    namespace: str | None
    name: str
    subresource: str


def parse_route(path: str) -> Route | None:
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and find_resource(group, version, rest[2]):
        namespace, rest = rest[1], rest[2:]
    resource = find_resource(group, version, rest[0]) if rest else None
    if resource is None or len(rest) > 3:
        return None
    name, subresource = [*rest[1:], "", ""][:2]
    if subresource and subresource not in resource.subresources:
        return None
    if resource.namespaced != (namespace is not None) and (namespace is not None or name):
        return None
    return Route(resource, namespace, name, subresource)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the official client reuses connections
    # Headers and body go out in separate writes; with Nagle's algorithm and delayed ACKs
    # each keep-alive request would stall ~40 ms.
    disable_nagle_algorithm = True
    server_version = "kube-sim"

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: `simulator.requests` is the request log."""

    @property
    def sim(self) -> Backend:
        return self.server.simulator  # type: ignore[attr-defined]

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        self._request_line = (method, url.path, url.query)
        length = int(self.headers.get("Content-Length") or 0)
        self._body = self.rfile.read(length) if length else b""
        try:
            # Clients ask for "/api/v1/" as often as for "/api/v1".
            self._serve(method, url.path.rstrip("/") or "/", parse_qs(url.query))
        except ApiError as error:
            self._send(error.code, error.status(), error.code == 429)

    def _record(self, status: int) -> None:
        """Log before answering, so a test that got its answer also sees the entry."""
        self.sim.record(*self._request_line, status)

    def _serve(self, method: str, path: str, query: Query) -> int:
        fault = self.sim.take_fault(method, path)
        if fault == 0:
            self._record(0)
            self.close_connection = True
            return 0
        if fault is not None:
            raise ApiError(fault, f"injected fault: {fault}")
        if path not in _PUBLIC_PATHS:
            self._authenticate()
        if method == "GET" and (document := self._discovery(path)) is not None:
            return self._send(200, document)
        if method == "GET" and path.startswith(f"/apis/{metrics_api.API_VERSION}/"):
            return self._metrics(path, query)
        route = parse_route(path)
        if route is None:
            raise ApiError(404, "the server could not find the requested resource")
        self._authorize(method, route, query)
        operation = {
            "GET": self._read,
            "POST": self._create,
            "PUT": self._update,
            "PATCH": self._patch,
            "DELETE": self._delete,
        }[method]
        return operation(route, query)

    def _metrics(self, path: str, query: Query) -> int:
        """metrics.k8s.io, authorized as the aggregated API's RBAC would be."""
        parts = [p for p in path.split("/") if p][3:]
        namespaced = len(parts) >= 3 and parts[0] == "namespaces"
        plural_name = parts[2:] if namespaced else parts
        authorizer = self.sim.authorizer
        if authorizer is not None and plural_name:
            name = plural_name[1] if len(plural_name) > 1 else ""
            attrs = Attributes(
                "get" if name else "list",
                metrics_api.GROUP,
                plural_name[0],
                "",
                parts[1] if namespaced else "",
                name,
            )
            if not authorizer.allows(attrs):
                raise ApiError(
                    403,
                    f'User "{self.sim.subject}" cannot {attrs.verb} resource '
                    f'"{plural_name[0]}" in API group "{metrics_api.GROUP}"',
                )
        return self._send(200, self.sim.metrics.answer(path))

    # auth -------------------------------------------------------------------------

    def _authenticate(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.sim.token}":
            raise ApiError(401, "Unauthorized")

    def _authorize(self, method: str, route: Route, query: Query) -> None:
        authorizer = self.sim.authorizer
        if authorizer is None:
            return
        verb = _verb(method, route, query)
        attrs = Attributes(
            verb,
            route.resource.group,
            route.resource.plural,
            route.subresource,
            route.namespace or "",
            route.name,
        )
        if authorizer.allows(attrs):
            return
        where = (
            f' in the namespace "{route.namespace}"' if route.namespace else " at the cluster scope"
        )
        plural = route.resource.plural + (f"/{route.subresource}" if route.subresource else "")
        subject = f'{plural} "{route.name}"' if route.name else plural
        raise ApiError(
            403,
            f'{subject} is forbidden: User "{self.sim.subject}" cannot {verb} '
            f'resource "{plural}" in API group "{route.resource.group}"{where}',
            details={"name": route.name, "kind": route.resource.plural},
        )

    # operations -------------------------------------------------------------------

    def _read(self, route: Route, query: Query) -> int:
        store = self.sim.store
        if route.resource in resources.REVIEWS:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if route.name:
            entry = store.find(route.resource, route.namespace, route.name)
            if entry is None:
                raise not_found(route.resource.plural, route.name)
            if route.subresource in CREATE_ONLY_SUBRESOURCES:
                raise ApiError(
                    405, f"the server does not allow this method on the {route.subresource}"
                )
            if route.subresource == "log":
                assert route.namespace is not None
                return self._relay(open_pod_log(self.sim, route.namespace, route.name, query))
            if route.subresource in ("exec", "portforward"):
                return self._exec(route, query)
            if _wants_table(self.headers.get("Accept", "")):
                return self._send(
                    200,
                    table_for(
                        route.resource,
                        [entry.obj],
                        store.clock.now(),
                        entry.obj["metadata"]["resourceVersion"],
                        include_object=_arg(query, "includeObject") or "Metadata",
                        listed=False,
                    ),
                )
            return self._send_raw(200, entry.json())
        try:
            selector = parse_selector(
                _arg(query, "labelSelector"),
                _arg(query, "fieldSelector"),
                route.resource.field_labels,
            )
        except SelectorError as error:
            raise ApiError(400, str(error)) from error
        if _arg(query, "watch") in ("1", "true"):
            return self._watch(route, query, selector)
        page = store.list_page(
            route.resource,
            route.namespace,
            selector,
            _int_arg(query, "limit"),
            _arg(query, "continue"),
        )
        if _wants_table(self.headers.get("Accept", "")):
            return self._send(
                200,
                table_for(
                    route.resource,
                    [entry.obj for entry in page.items],
                    store.clock.now(),
                    page.resource_version,
                    page.continue_token,
                    _arg(query, "includeObject") or "Metadata",
                ),
            )
        return self._send_raw(200, _list_json(route.resource, page))

    def _create(self, route: Route, query: Query) -> int:
        if route.subresource in ("exec", "portforward") and route.name:
            return self._exec(route, query)
        body = self._json_body()
        if route.resource is resources.TOKEN_REVIEWS:
            return self._send(201, self.sim.access.token_review(body))
        if route.resource is resources.SUBJECT_ACCESS_REVIEWS:
            return self._send(201, self.sim.access.subject_access_review(body))
        if route.subresource == "binding" and route.namespace:
            self.sim.store.bind(route.namespace, route.name, body)
            return self._send(201, success(201))
        if route.subresource == "eviction" and route.namespace:
            self.sim.store.evict(route.namespace, route.name, body)
            return self._send(201, success(201))
        if route.name:
            raise ApiError(405, "POST is only allowed on a collection or pods/binding")
        return self._send(201, self.sim.store.create(route.resource, route.namespace, body))

    def _update(self, route: Route, query: Query) -> int:
        self._require_name(route)
        obj = self.sim.store.update(
            route.resource, route.namespace, route.name, self._json_body(), route.subresource
        )
        return self._send(200, obj)

    def _patch(self, route: Route, query: Query) -> int:
        self._require_name(route)
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip()
        obj = self.sim.store.patch(
            route.resource,
            route.namespace,
            route.name,
            content_type,
            _decode(self._body),
            route.subresource,
        )
        return self._send(200, obj)

    def _delete(self, route: Route, query: Query) -> int:
        self._require_name(route)
        options = _decode(self._body) if self._body else {}
        grace = options.get("gracePeriodSeconds")
        if _arg(query, "gracePeriodSeconds"):
            grace = _int_arg(query, "gracePeriodSeconds")
        obj = self.sim.store.delete(
            route.resource, route.namespace, route.name, grace, options.get("preconditions")
        )
        policy = options.get("propagationPolicy") or _arg(query, "propagationPolicy")
        if route.resource is resources.JOBS and policy in ("Background", "Foreground"):
            self.sim.jobs.delete_dependents(obj)
        return self._send(200, obj)

    def _require_name(self, route: Route) -> None:
        if (
            not route.name
            or route.subresource in (*CREATE_ONLY_SUBRESOURCES, "log")
            or route.resource in resources.REVIEWS
        ):
            raise ApiError(405, "the server does not allow this method on the requested resource")

    # watch ------------------------------------------------------------------------

    def _watch(self, route: Route, query: Query, selector: Selector) -> int:
        """Stream events as chunked JSON lines until the timeout or the server stops."""
        store, since = self.sim.store, _arg(query, "resourceVersion")
        with store.lock:
            if since in ("", "0"):
                rv = store.resource_version
                page = store.list_page(route.resource, route.namespace, selector)
                initial = [("ADDED", entry) for entry in page.items]
            else:
                rv, initial = _int_arg(query, "resourceVersion"), []
                store.events_after(rv)  # 410 Expired before any byte is sent
        timeout = _int_arg(query, "timeoutSeconds") or _DEFAULT_WATCH_SECONDS
        self._start_stream()
        for kind, entry in initial:
            self._write_event(kind, entry.json())
        deadline = time.monotonic() + timeout
        try:
            while not self.sim.stopping.is_set() and time.monotonic() < deadline:
                rv = self._pump_events(route, selector, rv)
            self._end_stream()
        except (_WatchEnded, OSError):
            self.close_connection = True  # history gone or the client hung up
        return 200

    def _pump_events(self, route: Route, selector: Selector, rv: int) -> int:
        store = self.sim.store
        with store.changed:
            try:
                events = store.events_after(rv)
            except ApiError as error:
                self._write_event("ERROR", json.dumps(error.status()).encode())
                raise _WatchEnded from error
            if not events:
                store.changed.wait(_WATCH_POLL_SECONDS)
                return rv
        for event in events:
            kind = _visible_as(event, route, selector)
            if kind:
                self._write_event(kind, event.entry.json())
        return events[-1].rv

    def _start_stream(self) -> None:
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_event(self, kind: str, obj_json: bytes) -> None:
        line = b'{"type":"' + kind.encode() + b'","object":' + obj_json + b"}\n"
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()

    def _exec(self, route: Route, query: Query) -> int:
        """An exec or port-forward: checked, then served by the upgrade asked for (see
        `pod_exec`)."""
        assert route.namespace is not None
        if is_websocket(self.headers):
            # A WebSocket comes as a GET, authorized as `get`; kube-apiserver 1.35+
            # (AuthorizePodWebsocketUpgradeCreatePermission) also asks for `create`, as
            # SPDY's POST does: asking both keeps a role that passes here good everywhere.
            self._authorize("POST", route, query)
        elif "spdy/3.1" not in self.headers.get("Upgrade", "").lower():
            raise ApiError(400, "Upgrade request required")
        request = (
            kubelet_exec_request if route.subresource == "exec" else kubelet_port_forward_request
        )
        target = request(self.sim, route.namespace, route.name, query)
        self.close_connection = True
        serve_upgrade(self, self.sim, route.subresource, target, query, self._record)
        return 101

    def _relay(self, upstream: Any) -> int:
        """Pass a kubelet's log answer on as it comes, chunk by chunk."""
        with upstream:
            self._record(200)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            try:
                for data in upstream.iter_content(chunk_size=None):
                    if data:
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
            except OSError:  # our client hung up, or the kubelet's stream broke
                self.close_connection = True
                return 200
            self._end_stream()
        return 200

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # responses --------------------------------------------------------------------

    def _discovery(self, path: str) -> dict[str, Any] | None:
        if path == "/version":
            return resources.SERVER_VERSION
        if path in ("/healthz", "/livez", "/readyz"):
            return {"status": "ok"}
        if path == "/api":
            return resources.api_versions(urlsplit(self.sim.base_url).netloc)
        if path == "/apis":
            groups = resources.api_group_list()
            return {**groups, "groups": [*groups["groups"], metrics_api.group_entry()]}
        if (document := metrics_api.discovery(path)) is not None:
            return document
        if path == "/api/v1":
            return resources.api_resource_list("", "v1")
        if path == "/openapi/v3":
            return resources.openapi_v3_index()
        if path.startswith("/openapi/v3/"):
            return resources.openapi_v3_document(path.removeprefix("/openapi/v3/"))
        parts = [part for part in path.split("/") if part]
        if parts[0] == "apis" and len(parts) == 3:
            return resources.api_resource_list(parts[1], parts[2])
        if parts[0] == "apis" and len(parts) == 2:
            return resources.api_group(parts[1])
        return None

    def _json_body(self) -> dict[str, Any]:
        content_type = self.headers.get("Content-Type", "application/json")
        if content_type.split(";")[0].strip() == protobuf.CONTENT_TYPE:
            return protobuf.decode_object(self._body)
        if not content_type.startswith("application/json"):
            raise ApiError(415, f"the body of the request was in an unknown format: {content_type}")
        body = _decode(self._body)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return body

    def _send(self, code: int, body: dict[str, Any], retry_after: bool = False) -> int:
        return self._send_raw(code, json.dumps(body).encode(), retry_after)

    def _send_raw(self, code: int, payload: bytes, retry_after: bool = False) -> int:
        self._record(code)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        if retry_after:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(payload)
        return code


class _WatchEnded(Exception):
    """The watch could not continue (its history is gone); the stream is closed."""


def _visible_as(event: WatchEvent, route: Route, selector: Selector) -> str:
    """How a change looks through this watch's filter (empty: not at all), as the
    watch cache presents it: leaving the filter is a DELETED, entering it an ADDED."""
    obj = event.entry.obj
    if event.resource is not route.resource:
        return ""
    if route.namespace and obj["metadata"].get("namespace") != route.namespace:
        return ""
    now_matches = event.type != "DELETED" and selector.matches(obj)
    was_matching = event.previous is not None and selector.matches(event.previous)
    if now_matches:
        return "MODIFIED" if was_matching and event.type == "MODIFIED" else "ADDED"
    return "DELETED" if was_matching else ""


def _verb(method: str, route: Route, query: Query) -> str:
    if method == "GET":
        if route.name:
            return "get"
        return "watch" if _arg(query, "watch") in ("1", "true") else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]


def _wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _list_json(resource: Resource, page: Page) -> bytes:
    """The list response, assembled from each object's cached JSON."""
    metadata: dict[str, Any] = {"resourceVersion": page.resource_version}
    if page.continue_token:
        metadata["continue"] = page.continue_token
    head = json.dumps(
        {"kind": f"{resource.kind}List", "apiVersion": resource.api_version, "metadata": metadata}
    )
    items = b",".join(entry.json() for entry in page.items)
    return head[:-1].encode() + b',"items":[' + items + b"]}"


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}") from error


def _arg(query: Query, name: str) -> str:
    values = query.get(name)
    return values[0] if values else ""


def _int_arg(query: Query, name: str) -> int:
    try:
        return int(_arg(query, name) or 0)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None
