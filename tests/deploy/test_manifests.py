"""The plain manifests in deploy/: every file and both kustomize builds (base = Deployment
mode, cronjob/ = CronJob mode) validate strictly against the Kubernetes 1.30 schemas;
the Deployment and CronJob run hardened, as the image's uid, with the database on the
volume; they only set variables the reconciler reads; the RBAC names the node the
workloads configure; and the example Secret can never overwrite a real key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.cli.commands import main
from reconciler.cli.sync_command import sync
from reconciler.runtime.process.leader import DEFAULT_LEASE_NAME
from reconciler.runtime.process.writer_lease import writer_lease_name

from .manifests import (
    DEPLOY,
    Obj,
    documents,
    env,
    find,
    kinds,
    kustomize,
    manifest_files,
    pod_spec,
    validate,
)

SHARED = {
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSIDriver",
}


def load(relative: str) -> list[Obj]:
    return documents((DEPLOY / relative).read_text())


def deployment() -> Obj:
    return find(load("deployment.yaml"), "Deployment")


def cronjob() -> Obj:
    return find(load("cronjob/cronjob.yaml"), "CronJob")


def variables_the_reconciler_reads() -> set[str]:
    """`reconciler sync`'s explicit env vars, and the group's RECONCILER_* options."""
    names = {"RUNPOD_API_KEY"}
    for param in sync.params:
        envvar = getattr(param, "envvar", None)
        names.update([envvar] if isinstance(envvar, str) else envvar or [])
    names.update(f"RECONCILER_{param.name.upper()}" for param in main.params if param.name)
    return names


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_manifest_file_validates(path: Path) -> None:
    objects = documents(path.read_text())
    assert objects
    for obj in objects:
        validate(obj)


@pytest.mark.parametrize(
    ("directory", "workloads"),
    [
        ("", {"Deployment", "Service"}),
        ("cronjob", {"CronJob"}),
    ],
)
def test_kustomize_build_validates_and_installs_one_mode(
    directory: str, workloads: set[str]
) -> None:
    objects = kustomize(DEPLOY / directory)
    for obj in objects:
        validate(obj)
    assert kinds(objects) == SHARED | workloads
    assert "Secret" not in kinds(objects)


def test_kustomizations_cover_every_manifest_but_the_example_secret() -> None:
    listed: set[Path] = set()
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        if "helm" in kustomization.parts:
            continue
        for entry in documents(kustomization.read_text())[0]["resources"]:
            target = (kustomization.parent / entry).resolve()
            if target.is_file():
                listed.add(target)
    assert set(manifest_files()) - listed == {DEPLOY / "secret.example.yaml"}


def test_deployment_is_one_hardened_replica_with_probes_and_the_database_volume() -> None:
    workload = deployment()
    spec = pod_spec(workload)
    (container,) = spec["containers"]
    assert workload["spec"]["replicas"] == 1
    assert workload["spec"]["strategy"] == {"type": "Recreate"}
    assert container["args"] == ["sync"]
    assert container["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "kubelet", "containerPort": 10250, "protocol": "TCP"},
    ]
    pod_ip = next(e for e in container["env"] if e["name"] == "POD_IP")
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    _assert_hardened_with_database_volume(spec)


def test_cronjob_runs_one_tick_a_minute_never_overlapping_on_the_same_volume() -> None:
    job = cronjob()
    spec = pod_spec(job)
    (container,) = spec["containers"]
    assert job["spec"]["schedule"] == "*/1 * * * *"
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    assert 0 < job["spec"]["startingDeadlineSeconds"] < 60
    assert container["args"] == ["sync", "--once", "--stay", "40"]
    assert spec["restartPolicy"] == "Never"
    _assert_hardened_with_database_volume(spec)
    assert spec["volumes"] == pod_spec(deployment())["volumes"]
    assert spec["securityContext"] == pod_spec(deployment())["securityContext"]
    loop_only = {"RECONCILER_INTERVAL", "RECONCILER_LEADER_ELECT"}
    assert env(job) == {k: v for k, v in env(deployment()).items() if k not in loop_only}


def _assert_hardened_with_database_volume(spec: Obj) -> None:
    (container,) = spec["containers"]
    assert spec["serviceAccountName"] == "runpod-reconciler"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == image_uid()
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    data = volumes[mounts["/var/lib/reconciler"]]
    assert (
        data["persistentVolumeClaim"]["claimName"]
        == find(load("common/pvc.yaml"), "PersistentVolumeClaim")["metadata"]["name"]
    )
    workload_env = {v["name"]: v for v in container["env"]}
    assert workload_env["RECONCILER_DATABASE_URL"]["value"] == image_database_url()


def image_uid() -> int:
    dockerfile = (DEPLOY.parent / "Dockerfile").read_text()
    match = re.search(r"^USER (\d+)$", dockerfile, re.MULTILINE)
    assert match, "the Dockerfile names no numeric USER"
    return int(match.group(1))


def image_database_url() -> str:
    match = re.search(r"RECONCILER_DATABASE_URL=(\S+)", (DEPLOY.parent / "Dockerfile").read_text())
    assert match
    return match.group(1)


@pytest.mark.parametrize("workload", [deployment, cronjob], ids=["deployment", "cronjob"])
def test_workloads_set_only_variables_the_reconciler_reads(workload: object) -> None:
    assert callable(workload)
    names = set(env(workload()))
    assert names <= variables_the_reconciler_reads()
    assert {"RUNPOD_API_KEY", "RECONCILER_DATABASE_URL", "RECONCILER_NODE_NAME"} <= names


def test_api_key_comes_from_the_example_secrets_name_and_key() -> None:
    secret = find(load("secret.example.yaml"), "Secret")
    (key,) = secret["stringData"]
    assert "REPLACE" in secret["stringData"][key]
    for workload in (deployment(), cronjob()):
        assert env(workload)["RUNPOD_API_KEY"] == {
            "secretKeyRef": {"name": secret["metadata"]["name"], "key": key}
        }
        assert workload["metadata"]["namespace"] == secret["metadata"]["namespace"]


def test_rbac_names_the_node_the_workloads_run_as() -> None:
    rbac = load("common/rbac.yaml")
    named = {
        name
        for doc in rbac
        if doc["kind"] in ("ClusterRole", "Role")
        if doc["metadata"]["name"] != "runpod-reconciler-leader-election"
        for rule in doc["rules"]
        if set(rule["resources"]) & {"nodes", "nodes/status", "leases"}
        for name in rule.get("resourceNames", [])
    }
    node = env(deployment())["RECONCILER_NODE_NAME"]
    assert node == env(cronjob())["RECONCILER_NODE_NAME"]
    assert named == {node, writer_lease_name(node)}
    subjects = [s for doc in rbac if "Binding" in doc["kind"] for s in doc["subjects"]]
    account = find(load("common/serviceaccount.yaml"), "ServiceAccount")["metadata"]
    assert subjects and all(
        s == {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        for s in subjects
    )


def test_metrics_service_targets_the_deployments_http_port() -> None:
    service = find(load("service.yaml"), "Service")
    labels = deployment()["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http", "protocol": "TCP"}
    ]


def test_the_deployment_elects_a_leader_on_the_lease_the_rbac_names() -> None:
    assert env(deployment())["RECONCILER_LEADER_ELECT"] == "true"
    role = find(load("common/rbac.yaml"), "Role", "runpod-reconciler-leader-election")
    assert role["metadata"]["namespace"] == deployment()["metadata"]["namespace"]
    assert [r["resourceNames"] for r in role["rules"] if "resourceNames" in r] == [
        [DEFAULT_LEASE_NAME]
    ]
