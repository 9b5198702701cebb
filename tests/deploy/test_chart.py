"""The Helm chart deploy/helm/runpod-reconciler, rendered and linted offline with the Helm
SDK (helm-python-sdk): it lints clean in strict mode; every rendering (default values,
cronjob mode, an existing Secret, an inline key, PostgreSQL from a Secret) validates
strictly against the Kubernetes 1.30 schemas; its values reach the container as
RECONCILER_* variables that the real `reconciler sync` options parse into the expected
Settings; configurations that cannot work are refused with a reason; and its RBAC is
rule for rule the one the plain manifests ship (proven least privilege in test_rbac)."""

from __future__ import annotations

import base64
import os
import tomllib
from typing import Any

import helm_python as helm
import pytest

from reconciler.cli.options import settings_from
from reconciler.cli.sync_command import sync
from reconciler.core.config import Settings

from .manifests import (
    CHART,
    DEPLOY,
    KUBE_VERSION,
    NAMESPACE,
    Obj,
    chart_objects,
    documents,
    env,
    find,
    kinds,
    pod_spec,
    validate,
)

EXISTING = {"runpod": {"existingSecret": "my-runpod"}}
CRONJOB = {"mode": "cronjob"}
INLINE_KEY = {"runpod": {"apiKey": "rp_test_123"}}
POSTGRES = {
    "replicaCount": 2,
    "database": {"existingSecret": "db", "existingSecretKey": "url"},
    "persistence": {"enabled": False},
}
RENDERINGS = {
    "default": {},
    "cronjob": CRONJOB,
    "existing-secret": EXISTING,
    "inline-key": INLINE_KEY,
    "postgres": POSTGRES,
}


@pytest.mark.parametrize("values", RENDERINGS.values(), ids=RENDERINGS.keys())
def test_chart_lints_clean_in_strict_mode(values: Obj) -> None:
    report = helm.lint(
        CHART, values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == []


@pytest.mark.parametrize("values", RENDERINGS.values(), ids=RENDERINGS.keys())
def test_every_rendering_validates(values: Obj) -> None:
    objects = chart_objects(values)
    assert objects
    for obj in objects:
        validate(obj)


def test_default_values_install_the_deployment_mode() -> None:
    objects = chart_objects()
    assert kinds(objects) == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "PersistentVolumeClaim",
        "StorageClass",
        "CSIDriver",
        "Deployment",
        "Service",
    }
    workload = find(objects, "Deployment")
    (container,) = pod_spec(workload)["containers"]
    assert workload["spec"]["replicas"] == 1
    assert workload["spec"]["strategy"] == {"type": "Recreate"}
    assert container["args"] == ["sync"]
    assert env(workload)["RUNPOD_API_KEY"] == {
        "secretKeyRef": {"name": "runpod-reconciler", "key": "RUNPOD_API_KEY"}
    }
    assert env(workload)["RECONCILER_DATABASE_URL"] == "sqlite:////var/lib/reconciler/reconciler.db"


def test_cronjob_mode_installs_a_cronjob_and_no_deployment() -> None:
    objects = chart_objects(CRONJOB)
    assert "Deployment" not in kinds(objects) and "Service" not in kinds(objects)
    job = find(objects, "CronJob")
    (container,) = pod_spec(job)["containers"]
    assert job["spec"]["schedule"] == "*/1 * * * *"
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    # The run stays and beats until the next is due, so the node never turns NotReady.
    assert container["args"] == ["sync", "--once", "--stay", "40"]
    assert "livenessProbe" not in container and "ports" not in container
    env_names = {v["name"]: v for v in container["env"]}
    assert env_names["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    stay_zero = pod_spec(find(chart_objects({**CRONJOB, "cronjob": {"stay": 0}}), "CronJob"))
    assert stay_zero["containers"][0]["args"] == ["sync", "--once", "--stay", "0"]


def test_existing_secret_is_used_and_no_secret_is_created() -> None:
    objects = chart_objects(EXISTING)
    assert "Secret" not in kinds(objects)
    assert env(find(objects, "Deployment"))["RUNPOD_API_KEY"] == {
        "secretKeyRef": {"name": "my-runpod", "key": "RUNPOD_API_KEY"}
    }


def test_inline_key_is_stored_in_the_charts_secret() -> None:
    objects = chart_objects(INLINE_KEY)
    secret = find(objects, "Secret")
    assert base64.b64decode(secret["data"]["RUNPOD_API_KEY"]) == b"rp_test_123"
    assert env(find(objects, "Deployment"))["RUNPOD_API_KEY"] == {
        "secretKeyRef": {"name": secret["metadata"]["name"], "key": "RUNPOD_API_KEY"}
    }


def test_postgres_replicas_read_the_url_from_a_secret_and_mount_no_claim() -> None:
    objects = chart_objects(POSTGRES)
    workload = find(objects, "Deployment")
    assert workload["spec"]["replicas"] == 2
    assert "PersistentVolumeClaim" not in kinds(objects)
    assert env(workload)["RECONCILER_DATABASE_URL"] == {
        "secretKeyRef": {"name": "db", "key": "url"}
    }


SETTINGS_VALUES = {
    "nodeName": "burst-a100",
    "interval": 20,
    "heartbeatInterval": 5,
    "maxGpuPrice": 3.5,
    "maxInstances": 0,
    "maxHourlySpend": 1500,
    "datacenterIds": ["US-KS-2", "EU-RO-1"],
    "nodeCapacity": {"gpus": 2000000, "pods": 500, "cpu": "256", "memory": "2Ti"},
    "offload": {"maxPendingTimeBeforeOffload": 120, "pendingThreshold": 8},
    "extraEnv": [{"name": "RECONCILER_MAX_PENDING_TIME", "value": "600"}],
}


def parse_like_the_container(
    variables: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[Settings, Obj]:
    """Settings and the other `sync` options, read from these variables by the real CLI."""
    for name in [n for n in os.environ if n.startswith("RECONCILER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPOD_API_KEY", "from-the-secret")
    for name, value in variables.items():
        if isinstance(value, str):
            monkeypatch.setenv(name, value)
    with sync.make_context("sync", []) as context:
        params = dict(context.params)
    return settings_from(params), params


def test_values_reach_the_reconciler_as_the_settings_they_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workload = find(chart_objects(SETTINGS_VALUES), "Deployment")
    settings, options = parse_like_the_container(env(workload), monkeypatch)
    assert settings == Settings().with_values(
        node_name="burst-a100",
        max_gpu_price=3.5,
        max_instances=0,
        max_hourly_spend=1500.0,
        datacenter_ids=("US-KS-2", "EU-RO-1"),
        node_gpus=2000000,
        node_pods=500,
        node_cpu="256",
        node_memory="2Ti",
        max_pending_time=600.0,
        max_pending_time_before_offload=120.0,
        pending_threshold=8,
        ssh_key_secret="runpod-reconciler-ssh-key",
    )
    assert options["interval"] == 20.0
    assert options["heartbeat_interval"] == 5.0


def test_unset_values_leave_the_reconcilers_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    workload = find(chart_objects(), "Deployment")
    settings, options = parse_like_the_container(env(workload), monkeypatch)
    # SSH is on by default, with the key in a Secret named after the release.
    assert settings == Settings().with_values(ssh_key_secret="runpod-reconciler-ssh-key")
    assert options["interval"] == next(p.default for p in sync.params if p.name == "interval")
    # Deployment mode elects a leader, on a Lease the chart's RBAC names.
    assert options["leader_elect"] is True
    assert options["leader_elect_lease_name"] == "runpod-reconciler-leader"


def test_cronjob_mode_passes_no_loop_options() -> None:
    values = {**SETTINGS_VALUES, **CRONJOB}
    variables = env(find(chart_objects(values), "CronJob"))
    assert not {
        "RECONCILER_INTERVAL",
        "RECONCILER_HEARTBEAT_INTERVAL",
        "RECONCILER_LEADER_ELECT",
    } & set(variables)


def test_leader_lease_is_named_after_the_release_in_flag_and_rbac(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render({}, name="burst", namespace=NAMESPACE, is_install=True)
    objects = [
        doc for path, text in rendered.items() if path.endswith(".yaml") for doc in documents(text)
    ]
    _, options = parse_like_the_container(env(find(objects, "Deployment")), monkeypatch)
    role = find(objects, "Role", "burst-runpod-reconciler-leader-election")
    named = [rule["resourceNames"] for rule in role["rules"] if "resourceNames" in rule]
    assert named == [[options["leader_elect_lease_name"]]] == [["burst-runpod-reconciler-leader"]]


def test_without_leader_election_the_flag_is_not_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workload = find(chart_objects({"leaderElection": {"enabled": False}}), "Deployment")
    _, options = parse_like_the_container(env(workload), monkeypatch)
    assert options["leader_elect"] is False


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"replicaCount": 2}, "SQLite has one writer"),
        (
            {
                "replicaCount": 2,
                "database": {"url": "postgresql://db/r"},
                "leaderElection": {"enabled": False},
            },
            "needs leaderElection.enabled",
        ),
        ({"persistence": {"enabled": False}}, "the SQLite file must outlive the pod"),
        ({"mode": "daemonset"}, "mode"),
        ({"maxInstances": "many"}, "maxInstances"),
    ],
)
def test_values_that_cannot_work_are_refused_with_the_reason(values: Obj, reason: str) -> None:
    with pytest.raises(helm.HelmError, match=reason):
        chart_objects(values)


def test_leader_election_permissions_follow_the_value() -> None:
    def roles(values: Obj) -> set[str]:
        return {o["metadata"]["name"] for o in chart_objects(values) if o["kind"] == "Role"}

    assert roles({}) == {
        "runpod-reconciler-node-lease",
        "runpod-reconciler-leader-election",
        "runpod-reconciler-ssh-key",
    }
    assert roles({"leaderElection": {"enabled": False}, "ssh": {"enabled": False}}) == {
        "runpod-reconciler-node-lease"
    }


def test_without_ssh_no_key_secret_is_named_or_granted(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = chart_objects({"ssh": {"enabled": False}})
    settings, _ = parse_like_the_container(env(find(objects, "Deployment")), monkeypatch)
    assert settings.ssh.key_secret == ""
    rules = [r for o in objects if o["kind"] == "Role" for r in o["rules"]]
    assert all("secrets" not in r["resources"] for r in rules)


def test_chart_rbac_grants_exactly_the_plain_manifests_rules() -> None:
    def rules(objects: list[Obj]) -> dict[tuple[str, str, str], Any]:
        return {
            (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "")): o["rules"]
            for o in objects
            if o["kind"] in ("ClusterRole", "Role")
        }

    plain = documents((DEPLOY / "common" / "rbac.yaml").read_text())
    assert rules(chart_objects()) == rules(plain)


def test_chart_pods_are_hardened_like_the_plain_deployment() -> None:
    plain = find(documents((DEPLOY / "deployment.yaml").read_text()), "Deployment")
    for values in (None, CRONJOB):
        objects = chart_objects(values)
        workload = find(objects, "CronJob" if values else "Deployment")
        spec, plain_spec = pod_spec(workload), pod_spec(plain)
        assert spec["securityContext"] == plain_spec["securityContext"]
        assert (
            spec["containers"][0]["securityContext"]
            == plain_spec["containers"][0]["securityContext"]
        )
        assert spec["containers"][0]["volumeMounts"] == plain_spec["containers"][0]["volumeMounts"]


def _images(objects: list[Obj]) -> set[str]:
    specs = [pod_spec(o) for o in objects if o["kind"] in ("Deployment", "CronJob")]
    return {c["image"] for s in specs for c in s["containers"] + s.get("initContainers", [])}


@pytest.mark.parametrize("mode", [{}, CRONJOB], ids=["deployment", "cronjob"])
def test_every_container_runs_the_image_the_user_sets(mode: Obj) -> None:
    """As the README's `helm install --set image.repository=…`, with a tag or without."""
    repository = "registry.example/team/runpod-reconciler"
    tagged = {**mode, "image": {"repository": repository, "tag": "1.2.3-rc1"}}
    assert _images(chart_objects(tagged)) == {f"{repository}:1.2.3-rc1"}
    # Without a tag, the version `make image` tags by default (the project's).
    version = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]["version"]
    untagged = {**mode, "image": {"repository": repository}}
    assert _images(chart_objects(untagged)) == {f"{repository}:{version}"}
