"""The observability pack in the chart: a ServiceMonitor, a PrometheusRule with the
alerts an operator needs and a Grafana dashboard (importable JSON, also a ConfigMap for
the dashboard sidecar), all off by default. Every metric a dashboard query or an alert
names is exported by a running `reconciler sync` (checked against its /metrics), with the
label names the queries use. And the values schema refuses unknown keys and bad ranges."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import helm_python as helm
import pytest
import requests

from reconciler.demo.sandbox import API_KEY, Sandbox

from .manifests import CHART, NAMESPACE, Obj, chart_objects, find, kinds, validate

DASHBOARD = CHART / "dashboards" / "runpod-reconciler.json"
ALL_ON = {
    "monitoring": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
    }
}
# Metrics of other exporters a rule may use, and why.
EXTERNAL = {"kube_node_status_condition"}  # kube-state-metrics: the node's Ready condition
# Labels Prometheus adds to every scraped series (target labels), not the exporter.
TARGET_LABELS = {"namespace", "job", "instance", "pod", "service", "le"}
PROMQL_WORDS = {
    "sum",
    "max",
    "min",
    "by",
    "rate",
    "increase",
    "histogram_quantile",
    "absent",
    "and",
    "or",
    "unless",
    "without",
    "humanize",
    "label_values",
}


def dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def rule_exprs() -> list[str]:
    rule = find(chart_objects(ALL_ON), "PrometheusRule")
    return [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric, label names) for every series selector in a PromQL expression."""
    found = []
    for match in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?", expr):
        name, braces = match.group(1), match.group(2) or ""
        if name in PROMQL_WORDS or not (name.startswith(("reconciler_", "kube_"))):
            continue
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!=|!~|=)", braces))
        found.append((name, labels))
    return found


def test_everything_is_off_by_default() -> None:
    assert not {"ServiceMonitor", "PrometheusRule"} & kinds(chart_objects())
    assert not [o for o in chart_objects() if o["kind"] == "ConfigMap"]


def test_the_pack_renders_when_enabled() -> None:
    objects = chart_objects(ALL_ON)
    monitor = find(objects, "ServiceMonitor")
    service = find(objects, "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    board = find(objects, "ConfigMap")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["runpod-reconciler.json"]) == json.loads(DASHBOARD.read_text())
    validate(board)
    alerts = {
        r["alert"] for g in find(objects, "PrometheusRule")["spec"]["groups"] for r in g["rules"]
    }
    assert alerts == {
        "RunPodInstancesWithoutPods",
        "RunPodSpendHigh",
        "RunPodChargeDiffersFromListPrice",
        "RunPodReconcilerTicksFailing",
        "RunPodRateLimited",
        "RunPodReconcilerLeaderMissing",
        "RunPodVirtualNodeNotReady",
        "RunPodNodeHeartbeatFailing",
    }
    for expr in rule_exprs():
        assert f'namespace="{NAMESPACE}"' in expr or "kube_node_status_condition" in expr
    report = helm.lint(CHART, ALL_ON, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []


def test_the_spend_threshold_reaches_its_alert() -> None:
    values: Obj = {
        "monitoring": {"prometheusRule": {"enabled": True, "spendPerHourThreshold": 42.5}}
    }
    rules = find(chart_objects(values), "PrometheusRule")["spec"]["groups"][0]["rules"]
    (spend,) = [r for r in rules if r["alert"] == "RunPodSpendHigh"]
    assert spend["expr"].endswith("> 42.5")


def test_the_dashboard_is_importable() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 30
    assert "id" not in board  # an id would clash with the importing Grafana's own
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"maxInstance": 5}, "maxInstance"),  # a typo of maxInstances
        ({"persistence": {"sise": "1Gi"}}, "sise"),
        ({"monitoring": {"prometheusRule": {"enabld": True}}}, "enabld"),
        ({"maxInstances": -5}, "maxInstances"),
        ({"maxGpuPrice": -1}, "maxGpuPrice"),
        ({"interval": 0}, "interval"),
        ({"replicaCount": 0}, "replicaCount"),
        ({"nodeName": "Virtual_RunPod"}, "nodeName"),
        ({"persistence": {"size": "lots"}}, "size"),
        ({"monitoring": {"prometheusRule": {"spendPerHourThreshold": 0}}}, "spendPerHourThreshold"),
    ],
)
def test_the_values_schema_refuses_unknown_keys_and_bad_ranges(values: Obj, reason: str) -> None:
    with pytest.raises(helm.HelmError, match=reason):
        chart_objects(values)


def test_monitoring_needs_the_loop_and_its_service() -> None:
    with pytest.raises(helm.HelmError, match="only the loop serves /metrics"):
        chart_objects({"mode": "cronjob", **ALL_ON})


# --- against a running loop ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def exported(tmp_path: Path) -> Iterator[dict[str, set[str]]]:
    """Metric name -> label names, from a `reconciler sync` that made and healed things."""
    with Sandbox() as box:
        box.ensure_namespace("runpod-system")
        box.add_pod("train")
        port = free_port()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler",
                "--database-url",
                f"sqlite:///{tmp_path / 'loop.db'}",
                "sync",
                "--health-address",
                f"127.0.0.1:{port}",
                "--kubeconfig",
                box.kubeconfig,
                "--runpod-url",
                box.runpod_sim.base_url,
                "--leader-elect",
                "--leader-elect-namespace",
                "runpod-system",
                "--interval",
                "1",
            ],
            env={**os.environ, "RUNPOD_API_KEY": API_KEY},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            text = ""
            deadline = time.monotonic() + 30
            while (
                "reconciler_actions_total{" not in text
                or "reconciler_runpod_requests_total{" not in text
                or "reconciler_pod_gpu_utilization_ratio{" not in text
            ):
                assert time.monotonic() < deadline, "the loop exported no actions in time"
                time.sleep(0.2)
                box.advance(10)  # the instance boots and runs: its GPU utilization shows
                try:
                    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
                except requests.ConnectionError:
                    continue
            yield parse_exposition(text)
        finally:
            process.terminate()
            process.wait(timeout=30)


def parse_exposition(text: str) -> dict[str, set[str]]:
    metrics: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition("{")
        name = name.split()[0]
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", rest)) if rest else set()
        metrics.setdefault(name, set()).update(labels)
    return metrics


@pytest.mark.slow
def test_every_metric_a_query_names_is_exported(exported: dict[str, set[str]]) -> None:
    used = [s for expr in dashboard_exprs() + rule_exprs() for s in selectors(expr)]
    assert len({name for name, _ in used}) >= 10
    for name, labels in used:
        if name in EXTERNAL:
            continue
        assert name in exported, f"{name} is not in /metrics"
        assert labels - TARGET_LABELS <= exported[name], (name, labels, exported[name])
