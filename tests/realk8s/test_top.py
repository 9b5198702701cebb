"""`kubectl top` through the real path: kubectl asks kube-apiserver for
`metrics.k8s.io`, its aggregation layer proxies to a real metrics-server (built from its
Go module, `metrics_server.py`), which scrapes our kubelet endpoint's
`/metrics/resource` with its ServiceAccount token; the endpoint checks that token with a
real TokenReview and a SubjectAccessReview for `nodes/metrics`. The figures are the
RunPod simulator's utilization of the pod's CPU instance."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.realk8s.test_pods import gpu_pod
from tests.realk8s.world import NODE, World


def cpu_pod(name: str) -> dict[str, Any]:
    """3 CPUs and 6 GiB: a 4-vCPU, 8 GB CPU instance (only CPU instances have usage)."""
    pod: dict[str, Any] = gpu_pod(name)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3", "memory": "6Gi"}}
    return pod


@pytest.fixture
def busy(world: World) -> Iterator[tuple[World, dict[str, Any]]]:
    world.apply(cpu_pod("prep"))
    pod = world.wait_for(
        "the pod to run",
        lambda: (p := world.get("pod", "prep")) and p["status"].get("phase") == "Running" and p,
    )
    instance = world.instance_for(pod)
    assert instance is not None
    world.runpod.set_instance_fields(
        instance["id"], {"runtime": {"cpu": {"util": 50}, "memory": {"util": 25}}}
    )
    yield world, instance
    world.kubectl("delete", "pod", "prep", "--timeout=90s", check=False)


def top(world: World, *what: str) -> dict[str, list[str]]:
    """`kubectl top ...`'s rows by name; none while metrics-server has no figures yet."""
    done = world.kubectl("top", *what, check=False)
    if done.returncode != 0:
        return {}
    return {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:]}


def test_kubectl_top_shows_the_instances_use_through_the_real_metrics_server(
    busy: tuple[World, dict[str, Any]],
) -> None:
    world, instance = busy
    assert (instance["cpu"]["vcpuCount"], instance["cpu"]["memory"]) == (4, 8)
    # 50 % of 4 vCPUs is 2 cores; 25 % of 8 GB is 2 GB, 1907 MiB. metrics-server takes
    # the CPU rate between two scrapes 10 s apart, by the samples' millisecond
    # timestamps, and kubectl rounds nanocores up to millicores: exact figures show
    # 2000m, not 2001m.
    shown = world.wait_for(
        "kubectl top pod to show the pod",
        lambda: top(world, "pod", "prep").get("prep"),
        timeout=90,
    )
    assert shown == ["2000m", "1907Mi"]
    node = world.wait_for(
        "kubectl top node to show the virtual node",
        lambda: top(world, "node", NODE).get(NODE),
        timeout=60,
    )
    assert (node[0], node[2]) == ("2000m", "1907Mi"), node


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_the_scrape_is_refused_without_nodes_metrics(world: World) -> None:
    # What metrics-server is allowed, the real authorizer decides: a ServiceAccount that
    # may not get nodes/metrics is refused (403) and an anonymous caller is not let in.
    world.kubectl("create", "serviceaccount", "no-metrics", "-n", "default", check=False)
    token = world.kubectl("create", "token", "no-metrics", "-n", "default").stdout.strip()
    # Where metrics-server connects: the node's InternalIP and daemonEndpoints port, once
    # this test's reconciler advertises its own.
    node = world.wait_for(
        "the node to advertise this kubelet port",
        lambda: (
            (n := world.get("node", NODE, namespace=""))
            and n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == world.kubelet_port
            and n
        ),
    )
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    port = world.kubelet_port
    url = f"https://{address}:{port}/metrics/resource"
    refused = requests.get(
        url, headers={"Authorization": f"Bearer {token}"}, verify=False, timeout=30
    )
    assert refused.status_code == 403, refused.text
    assert requests.get(url, verify=False, timeout=30).status_code == 401
