"""Which Services a pod on RunPod reaches and the kubelet's service-link variables for
them: the kubelet's exact names (`-` made `_`, upper case, the Service's port number in
the link names), its meaning (host and port reach that Service port: 127.0.0.1 and the
local port here), the first port's backward-compatible names, `enableServiceLinks`
false keeping only `kubernetes`'s, only the pod's own namespace plus consenting Services
the annotation names, no headless, ExternalName or UDP; local ports that stay the same
when Services come and go, and the hosts block's names."""

from __future__ import annotations

from typing import Any

from reconciler.core.translate import service_hosts
from reconciler.core.translate.env import EnvSources, container_env
from reconciler.core.translate.service_links import (
    LOCAL_PORTS,
    link_variables,
    reachable,
    service_ports,
)


def svc(
    name: str,
    ns: str = "ml",
    *ports: dict[str, Any],
    created: str = "2026-01-01T00:00:00Z",
    **spec: Any,
) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "creationTimestamp": created,
            "annotations": annotations,
        },
        "spec": {
            "clusterIP": "10.96.0.11",
            "ports": list(ports) or [{"port": 6379, "protocol": "TCP"}],
            **spec,
        },
    }


def pod(ns: str = "ml", **spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    return {"metadata": {"name": "p", "namespace": ns, "annotations": annotations}, "spec": spec}


def env_of(the_pod: dict[str, Any], services: list[dict[str, Any]]) -> dict[str, str]:
    chosen = reachable(the_pod, services)
    return link_variables(the_pod, chosen, service_ports(chosen, 32))


def test_the_kubelets_names_and_meanings():
    env = env_of(pod(), [svc("redis-primary")])
    (local,) = {v for k, v in env.items() if k == "REDIS_PRIMARY_SERVICE_PORT"}
    assert int(local) in LOCAL_PORTS
    assert env == {
        "REDIS_PRIMARY_SERVICE_HOST": "127.0.0.1",
        "REDIS_PRIMARY_SERVICE_PORT": local,
        "REDIS_PRIMARY_PORT": f"tcp://127.0.0.1:{local}",
        "REDIS_PRIMARY_PORT_6379_TCP": f"tcp://127.0.0.1:{local}",
        "REDIS_PRIMARY_PORT_6379_TCP_PROTO": "tcp",
        "REDIS_PRIMARY_PORT_6379_TCP_PORT": local,
        "REDIS_PRIMARY_PORT_6379_TCP_ADDR": "127.0.0.1",
    }


def test_named_ports_and_the_first_ports_names():
    web = svc(
        "web",
        "ml",
        {"name": "http", "port": 80, "protocol": "TCP"},
        {"name": "grpc-api", "port": 9090, "protocol": "TCP"},
    )
    env = env_of(pod(), [web])
    assert env["WEB_SERVICE_PORT"] == env["WEB_SERVICE_PORT_HTTP"]
    assert env["WEB_SERVICE_PORT_GRPC_API"] == env["WEB_PORT_9090_TCP_PORT"]
    assert env["WEB_PORT"] == env["WEB_PORT_80_TCP"]


def test_only_the_own_namespace_and_consenting_named_services():
    other = svc("db", "data")
    consenting = svc("store", "data", annotations={"runpod.io/reachable-from-namespaces": "ml"})
    named = pod(annotations={"runpod.io/services": "data/db, data/store"})
    chosen = {
        (s["metadata"]["namespace"], s["metadata"]["name"])
        for s in reachable(named, [other, consenting, svc("own")])
    }
    assert chosen == {("data", "store"), ("ml", "own")}
    # Named but not the pod's namespace: reachable by name, but no variables (as the kubelet).
    env = env_of(named, [consenting, svc("own")])
    assert "OWN_SERVICE_HOST" in env and "STORE_SERVICE_HOST" not in env


def test_enable_service_links_false_keeps_only_kubernetes():
    services = [
        svc("web"),
        svc("kubernetes", "default", {"name": "https", "port": 443, "protocol": "TCP"}),
    ]
    env = env_of(pod(enableServiceLinks=False), services)
    assert "WEB_SERVICE_HOST" not in env and env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert "WEB_SERVICE_HOST" in env_of(pod(), services)


def test_no_headless_external_name_or_udp():
    services = [
        svc("headless", clusterIP="None"),
        svc("external", type="ExternalName", externalName="example.com"),
        svc("dns", "ml", {"port": 53, "protocol": "UDP"}),
    ]
    assert env_of(pod(), services) == {}


def test_local_ports_stay_when_services_come_and_go():
    old, new = svc("a", created="2026-01-01T00:00:00Z"), svc("b", created="2026-01-02T00:00:00Z")
    before = {p.service: p.local_port for p in service_ports([old], 32)}
    after = {p.service: p.local_port for p in service_ports([old, new], 32)}
    assert before["a"] == after["a"] and after["a"] != after["b"]
    # Both on 6379: neither may take the Service's own port; alone, it is forwarded too.
    assert [p.alias for p in service_ports([old, new], 32)] == [False, False]
    assert [p.listen_ports for p in service_ports([old], 32)] == [(before["a"], 6379)]


def test_the_limit_keeps_the_oldest():
    old, new = svc("a", created="2026-01-01T00:00:00Z"), svc("b", created="2026-01-02T00:00:00Z")
    assert [p.service for p in service_ports([new, old], 1)] == ["a"]


def test_the_containers_own_variables_win_and_may_refer_to_links():
    container = {
        "env": [
            {"name": "URL", "value": "redis://$(REDIS_SERVICE_HOST):$(REDIS_SERVICE_PORT)"},
            {"name": "REDIS_SERVICE_HOST", "value": "mine"},
        ]
    }
    links = {"REDIS_SERVICE_HOST": "127.0.0.1", "REDIS_SERVICE_PORT": "20001"}
    env = container_env(pod(), container, EnvSources({}, {}, links))
    assert env["URL"] == "redis://127.0.0.1:20001"
    assert env["REDIS_SERVICE_HOST"] == "mine" and env["REDIS_SERVICE_PORT"] == "20001"


def test_the_hosts_block_names():
    ports = service_ports([svc("web"), svc("store", "data")], 32)
    block = service_hosts.hosts_block(ports, "ml", "cluster.local")
    assert block.splitlines() == [
        service_hosts.BEGIN,
        "127.0.0.1\tstore.data store.data.svc store.data.svc.cluster.local",
        "127.0.0.1\tweb web.ml web.ml.svc web.ml.svc.cluster.local",
        service_hosts.END,
    ]


def test_no_port_the_pod_declares():
    web = svc("web", "ml", {"port": 8080, "protocol": "TCP"})
    mine = pod()
    mine["spec"]["containers"] = [{"name": "c", "ports": [{"containerPort": 8080}]}]
    (port,) = service_ports([web], 32, mine)
    assert port.listen_ports == (port.local_port,) and port.local_port != 8080
    (port,) = service_ports([web], 32, pod())
    assert port.listen_ports == (port.local_port, 8080)
