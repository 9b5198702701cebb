"""Both simulators in one process, on one clock that follows the wall clock.

Why not two `python -m reconciler.sim.*` processes: the reconciler under test is a real
subprocess that reads `datetime.now(UTC)`, while each simulator process keeps its own
`SimClock` starting at 2026-01-01 and the Kubernetes simulator offers no HTTP hook to
move (or fault) it in process mode. Here both simulators share a `WallClock`: real time
plus an offset that only `advance` grows, so pod creation times, instance creation
times, listing lag, boot delays, rate-limit windows and the reconciler's own grace
periods all run on one time line. The campaign never advances it, so the offset stays 0.

The RunPod simulator keeps its own HTTP admin API (`/_sim/...`). The Kubernetes side
gets a small control server acting as the cluster's users and as the fault injector:

    POST   /pods                      a pod manifest -> the created pod
    DELETE /pods/{ns}/{name}?grace=N  a user's delete (N=0 is `kubectl delete --force`; 404 if gone)
    GET    /pods                      every pod
    PUT    /objects/{plural}          create or overwrite any object (namespaces)
    GET    /objects/{plural}          every object of a kind (claims, PVs)
    GET    /objects/{plural}/{ns}/{name}  one object (404 when there is none)
    PATCH  /objects/{plural}/{ns}/{name}  a user's merge patch, through validation and
                                      admission (a claim's storage request grown)
    DELETE /objects/{plural}/{ns}/{name}  a user's delete, finalizers honoured (404 if gone)
    POST   /faults                    {"method", "path" (glob), "status", "count"}
    GET    /pod-uids/NAMESPACE         {name: uid} of every pod a top-level write touched
    GET    /requests                  [[method, path, query, status], ...]
    GET    /requests/count            how many so far (to mark where a tick began)
    POST   /clock/advance             {"seconds": 5}

Run: `python tests/chaos/simhost.py --kubeconfig-out kc.yaml` prints one JSON line with
the `runpod`, `kube` and `control` URLs, then serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reconciler.sim.clock import SimClock
from reconciler.sim.kube.resources import BY_PLURAL, JOBS
from reconciler.sim.kube.simulator import KubeSimulator
from reconciler.sim.kube.status import ApiError
from reconciler.sim.kube.volumes import MERGE_PATCH
from reconciler.sim.runpod.simulator import RunPodSimulator

# Boot delays short enough that an instance is RUNNING by the reconciler's next tick.
PROVISIONING_SECONDS = 0.2
STARTING_SECONDS = 0.2
# Generous enough that our own tick rate never exhausts it: 429s come from faults.
QUOTA = (1200, 60_000, 1_000_000)


class WallClock(SimClock):
    """Real UTC time plus an offset: the simulators agree with the reconciler's clock."""

    def __init__(self) -> None:
        super().__init__(datetime.now(UTC))
        self._offset = timedelta()
        self._offset_lock = threading.Lock()

    def now(self) -> datetime:
        with self._offset_lock:
            return datetime.now(UTC) + self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._offset_lock:
            self._offset += timedelta(seconds=seconds)


class _Control(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ControlServer

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        parts = [p for p in url.path.split("/") if p]
        try:
            status, answer = self.server.route(method, parts, parse_qs(url.query), body)
        except Exception as exc:  # the campaign reads the message; the host keeps serving
            status, answer = 500, {"error": f"{type(exc).__name__}: {exc}"}
        payload = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class PodUids:
    """Each pod's UID by namespace/name, from every write of a pod that reached the store
    at the top (a controller's own writes wake no hook, but every write of the reconciler
    does): the journal check must name pods the workload never saw, such as those an
    Indexed Job made again after its gang failed, and gone by the next look."""

    def __init__(self, kube: KubeSimulator) -> None:
        self.by_name: dict[str, str] = {}
        self._lock = threading.Lock()
        kube.store.add_controller(_admit_all, self._saw, removed=self._saw)

    def _saw(self, resource: Any, obj: dict[str, Any]) -> None:
        if resource.plural != "pods":
            return
        meta = obj["metadata"]
        with self._lock:
            self.by_name[f"{meta.get('namespace', '')}/{meta['name']}"] = meta["uid"]

    def in_namespace(self, namespace: str) -> dict[str, str]:
        with self._lock:
            return {
                key.partition("/")[2]: uid
                for key, uid in self.by_name.items()
                if key.partition("/")[0] == namespace
            }


def _admit_all(_resource: Any, _obj: dict[str, Any]) -> None:
    """Nothing to change on create."""


class _ControlServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, kube: KubeSimulator, clock: WallClock) -> None:
        super().__init__(("127.0.0.1", 0), _Control)
        self.kube, self.clock = kube, clock
        self.pod_uids = PodUids(kube)

    def route(
        self, method: str, parts: list[str], query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        match method, parts:
            case "POST", ["pods"]:
                return 201, self.kube.create_pod(body)
            case "DELETE", ["pods", namespace, name]:
                try:
                    self.kube.delete_pod(namespace, name, int(query.get("grace", ["30"])[0]))
                except ApiError as exc:
                    return exc.code, {"error": exc.message}
                return 200, {}
            case "GET", ["pods"]:
                return 200, self.kube.list("pods")
            case "GET", ["pod-uids", namespace]:
                return 200, self.pod_uids.in_namespace(namespace)
            case "DELETE", ["jobs", namespace, name]:
                # kubectl delete job: propagationPolicy Background, the pods go too.
                job = self.kube.store.delete(JOBS, namespace, name)
                self.kube.jobs.delete_dependents(job)
                return 200, {}
            case "PUT", ["objects", plural]:
                return 200, self.kube.put(plural, body)
            case "GET", ["objects", plural]:
                return 200, self.kube.list(plural)
            case "GET", ["objects", plural, namespace, name]:
                found = self.kube.get(plural, namespace, name)
                return (200, found) if found is not None else (404, {"error": "not found"})
            case "PATCH", ["objects", plural, namespace, name]:
                try:
                    patched = self.kube.store.patch(
                        BY_PLURAL[plural], namespace, name, MERGE_PATCH, body
                    )
                except ApiError as exc:
                    return exc.code, {"error": exc.message}
                return 200, patched
            case "DELETE", ["objects", plural, namespace, name]:
                try:
                    self.kube.store.delete(BY_PLURAL[plural], namespace, name)
                except ApiError as exc:
                    return exc.code, {"error": exc.message}
                return 200, {}
            case "POST", ["faults"]:
                self.kube.inject_fault(
                    body["method"], body["path"], int(body["status"]), int(body.get("count", 1))
                )
                return 200, {}
            case "GET", ["requests"]:
                return 200, list(self.kube.requests)
            case "GET", ["requests", "count"]:
                return 200, len(self.kube.requests)
            case "POST", ["clock", "advance"]:
                self.clock.advance(float(body["seconds"]))
                return 200, {"now": self.clock.now().isoformat()}
        return 404, {"error": f"no route {method} /{'/'.join(parts)}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runpod-key", default="chaos-key")
    parser.add_argument("--kube-token", default="chaos-token")
    parser.add_argument("--kubeconfig-out", required=True)
    args = parser.parse_args(argv)
    clock = WallClock()
    runpod = RunPodSimulator(
        args.runpod_key,
        clock=clock,
        quota=QUOTA,
        provisioning_seconds=PROVISIONING_SECONDS,
        starting_seconds=STARTING_SECONDS,
    )
    kube = KubeSimulator(args.kube_token, clock=clock)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with runpod, kube:
        kube.write_kubeconfig(args.kubeconfig_out)
        control = _ControlServer(kube, clock)
        threading.Thread(target=control.serve_forever, args=(0.05,), daemon=True).start()
        host, port = control.server_address[:2]
        print(
            json.dumps(
                {
                    "runpod": runpod.base_url,
                    "kube": kube.base_url,
                    "control": f"http://{host!s}:{port}",
                }
            ),
            flush=True,
        )
        stop.wait()
        control.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
