"""`kubectl top` for pods on RunPod, end to end: the real kubectl asks the Kubernetes
simulator's metrics.k8s.io API, which scrapes the virtual node's kubelet endpoint
(`/metrics/resource`, with the API server's client certificate, at the node's InternalIP
and daemonEndpoints port) as metrics-server does; the endpoint's figures come from the
`runtime` block of the tick's RunPod list. Covered: a CPU pod at 50 % of 4 vCPUs shows
about 2000m and its memory (utilization x RAM); the CPU counter integrates the rate seen
at each tick; `kubectl top node`; a GPU pod is left out, its GPU utilization shown by
`reconciler state show` instead (the metric: test_metrics.py); `/stats/summary`; and no
RunPod request for any of it."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from reconciler.cli.commands import main
from reconciler.demo.sandbox import Sandbox

pytestmark = [
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
    # The callers below play the API server (and metrics-server), which do not verify a
    # kubelet's serving certificate unless told its CA (self-signed here).
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.start_kubelet()
        yield sandbox


def kubectl(box: Sandbox, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", box.kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def cpu_pod(box: Sandbox, name: str = "prep") -> str:
    """A running 3-CPU, 6 GiB pod (a 4-vCPU cpu3c instance with 8 GB); its instance id."""
    container = {
        "name": "main",
        "image": "python:3.11",
        "resources": {"requests": {"cpu": "3", "memory": "6Gi"}},
    }
    box.add_pod(name, extra_spec={"containers": [container]})
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod(name) or {})
    assert instance is not None and instance["status"] == "RUNNING"
    return str(instance["id"])


def set_utilization(box: Sandbox, instance_id: str, cpu: int, memory: int) -> None:
    box.runpod_sim.set_instance_fields(
        instance_id, {"runtime": {"cpu": {"util": cpu}, "memory": {"util": memory}}}
    )


def kubelet(box: Sandbox, path: str) -> requests.Response:
    """The endpoint as the API server calls it (its kubelet client certificate)."""
    assert box.kubelet is not None
    return requests.get(
        f"https://127.0.0.1:{box.kubelet.port}{path}",
        cert=box.kube_sim.kubelet_client_files(),
        verify=False,
        timeout=5,
    )


def top_pods(box: Sandbox) -> dict[str, list[str]]:
    lines = kubectl(box, "top", "pod", "-n", "default").splitlines()
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def test_kubectl_top_pod_shows_a_cpu_pods_use(box: Sandbox) -> None:
    instance = cpu_pod(box)
    set_utilization(box, instance, cpu=50, memory=25)
    box.tick()
    box.kube_sim.metrics.scrape()
    box.advance(15)
    box.tick()
    before = len(box.runpod_sim.requests)
    # 50 % of 4 vCPUs is 2 cores; 25 % of 8 GB is 2 GB = 1907 MiB.
    assert top_pods(box) == {"prep": ["2000m", "1907Mi"]}
    node = kubectl(box, "top", "node", box.settings.node.name).splitlines()[1].split()
    assert node[:2] == [box.settings.node.name, "2000m"]
    assert len(box.runpod_sim.requests) == before  # none of it costs a RunPod request


def test_the_cpu_counter_integrates_the_rate_over_time(box: Sandbox) -> None:
    instance = cpu_pod(box)
    set_utilization(box, instance, cpu=50, memory=25)
    box.tick()
    first = counter(box)
    box.advance(10)
    assert counter(box) == pytest.approx(first + 20)  # 2 cores for 10 s, between ticks
    set_utilization(box, instance, cpu=100, memory=25)
    box.tick()
    box.advance(10)
    assert counter(box) == pytest.approx(first + 20 + 40)  # then 4 cores for 10 s


def test_the_rate_between_two_samples_is_the_pods_use(box: Sandbox) -> None:
    # metrics-server divides the counter's rise by the interval of the samples'
    # millisecond timestamps: a clock between two milliseconds must not skew it.
    instance = cpu_pod(box)
    set_utilization(box, instance, cpu=50, memory=25)
    box.tick()
    box.advance(0.0009)
    first = sample(box)
    box.advance(10.0002)
    second = sample(box)
    rate = (second[0] - first[0]) / ((second[1] - first[1]) / 1000)
    assert rate == pytest.approx(2, abs=1e-9)


def sample(box: Sandbox) -> tuple[float, int]:
    """The container's CPU counter and its timestamp (ms)."""
    for line in kubelet(box, "/metrics/resource").text.splitlines():
        if line.startswith("container_cpu_usage_seconds_total{"):
            return float(line.split()[1]), int(line.split()[2])
    raise AssertionError("no container_cpu_usage_seconds_total")


def counter(box: Sandbox) -> float:
    for line in kubelet(box, "/metrics/resource").text.splitlines():
        if line.startswith("container_cpu_usage_seconds_total{"):
            return float(line.split()[1])
    raise AssertionError("no container_cpu_usage_seconds_total")


def test_resource_metrics_text(box: Sandbox) -> None:
    instance = cpu_pod(box)
    set_utilization(box, instance, cpu=50, memory=25)
    box.tick()
    answer = kubelet(box, "/metrics/resource")
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/plain")
    samples = {
        line.split(" ")[0]: line.split(" ")[1:]
        for line in answer.text.splitlines()
        if not line.startswith("#")
    }
    labels = '{container="main",namespace="default",pod="prep"}'
    assert samples[f"container_memory_working_set_bytes{labels}"][0] == "2000000000"
    assert f"container_start_time_seconds{labels}" in samples
    assert samples["node_memory_working_set_bytes"][0] == "2000000000"
    assert samples["scrape_error"] == ["0"]
    stamp = int(box.clock.now().timestamp() * 1000)
    assert samples[f"container_cpu_usage_seconds_total{labels}"][1] == str(stamp)


def test_stats_summary(box: Sandbox) -> None:
    instance = cpu_pod(box)
    set_utilization(box, instance, cpu=50, memory=25)
    box.tick()
    summary: dict[str, Any] = kubelet(box, "/stats/summary").json()
    assert summary["node"]["nodeName"] == box.settings.node.name
    assert summary["node"]["memory"]["workingSetBytes"] == 2_000_000_000
    [pod] = summary["pods"]
    assert pod["podRef"]["name"] == "prep" and pod["containers"][0]["name"] == "main"
    assert pod["memory"]["workingSetBytes"] == 2_000_000_000


def test_a_gpu_pod_is_left_out(box: Sandbox) -> None:
    box.add_pod("trainer")
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("trainer") or {})
    assert instance is not None
    set_utilization(box, instance["id"], cpu=50, memory=25)
    box.tick()
    text = kubelet(box, "/metrics/resource").text
    assert 'pod="trainer"' not in text


def test_a_gpu_pods_utilization_shows_in_state_show(box: Sandbox) -> None:
    box.add_pod("trainer", gpus=2)
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("trainer") or {})
    assert instance is not None
    box.runpod_sim.set_instance_fields(
        instance["id"], {"runtime": {"gpus": [{"util": 90}, {"util": 35}]}}
    )
    box.tick()
    url = ["--database-url", box.database_url, "state", "show"]
    table = CliRunner().invoke(main, url)
    assert table.exit_code == 0, table.output
    assert "gpu utilization default/trainer: GPU 0 90%, GPU 1 35%" in table.output
    records = json.loads(CliRunner().invoke(main, [*url, "-o", "json"]).output)
    assert [r["gpu_utilization"] for r in records if r["name"] == "trainer"] == [[0.9, 0.35]]


def test_a_pod_at_zero_cpu_is_dropped_as_metrics_server_drops_it(box: Sandbox) -> None:
    instance = cpu_pod(box)
    set_utilization(box, instance, cpu=0, memory=25)
    box.tick()
    box.kube_sim.metrics.scrape()
    box.advance(15)
    box.tick()
    raw = kubectl(box, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
    assert json.loads(raw)["items"] == []
    set_utilization(box, instance, cpu=25, memory=25)
    box.tick()
    box.advance(15)
    box.tick()
    raw = kubectl(box, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
    [item] = json.loads(raw)["items"]
    assert item["containers"] == [
        {"name": "main", "usage": {"cpu": "1000000000n", "memory": "1953125Ki"}}
    ]
    assert item["window"] == "15s"
