"""The demo's Services, both ways (`reconciler demo --keep-running`): a selector-less
Service `backend` whose EndpointSlice names an HTTP server the demo runs on loopback
(an FQDN slice naming `localhost`: the API server admits no loopback IP in a slice), a
pod `client` made after it that reaches it by its variables and its names, and a
Service `web` selecting the pod `web` on RunPod, which the reconciler's own
EndpointSlice leads to. The reconciler advertises a documentation address (TEST-NET-1)
as its pod IP and listens on 127.0.0.1, where the printed commands dial it."""

from __future__ import annotations

import http.server
import threading
from typing import Any

from reconciler.demo.sandbox import Sandbox

ADVERTISED = "192.0.2.10"
CPU = {"requests": {"cpu": "2", "memory": "4Gi"}}


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"the in-cluster backend answers\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def start_services(box: Sandbox) -> http.server.ThreadingHTTPServer:
    """The backend's server, the two Services and their pods; tunnels from the next tick."""
    box.configure(service_endpoint_address=ADVERTISED, service_listen_address="127.0.0.1")
    box.start_tunnels()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, name="demo-backend", daemon=True).start()
    box.kube_sim.put("services", _service("backend", {"ports": [{"name": "http", "port": 80}]}))
    box.kube_sim.put(
        "endpointslices",
        {
            "metadata": {
                "name": "backend-loopback",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "backend"},
            },
            "addressType": "FQDN",
            "endpoints": [{"addresses": ["localhost"], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": server.server_address[1], "protocol": "TCP"}],
        },
    )
    selecting = {
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 8000, "targetPort": 8000}],
    }
    box.kube_sim.put("services", _service("web", selecting))
    container: dict[str, Any] = {"name": "main", "image": "python:3.11", "resources": CPU}
    box.add_pod("client", extra_spec={"containers": [container]})
    web: dict[str, Any] = {
        **container,
        "command": ["python", "-m", "http.server", "8000"],
        "ports": [{"containerPort": 8000, "protocol": "TCP"}],
    }
    box.add_pod("web", labels={"app": "web"}, extra_spec={"containers": [web]})
    return server


def service_commands(kubectl: str) -> list[str]:
    ours = "endpointslice.kubernetes.io/managed-by=runpod-reconciler.runpod.io"
    port = (
        f"$({kubectl} get endpointslices -l kubernetes.io/service-name=web,{ours} "
        "-o jsonpath='{.items[0].ports[0].port}')"
    )
    return [
        # From the pod to the cluster: the kubelet's variables, then the Service's names.
        f"{kubectl} exec client -- sh -c 'curl -s http://$BACKEND_SERVICE_HOST:$BACKEND_SERVICE_PORT/'",
        f"{kubectl} exec client -- curl -s http://backend.default.svc.cluster.local/",
        f"{kubectl} exec client -- cat /etc/hosts",
        # From the cluster to the pod: the reconciler's EndpointSlice, and what it leads to.
        f"{kubectl} get endpointslices -l kubernetes.io/service-name=web -o wide",
        f"curl -s http://127.0.0.1:{port}/",
    ]


def _service(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
