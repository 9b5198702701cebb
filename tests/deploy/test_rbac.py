"""The shipped RBAC is least privilege, proven against the Kubernetes simulator with RBAC
enforced from deploy/common/rbac.yaml (and from the Helm chart's rendering).

Sufficient: the reconciler, authenticated as the runpod-reconciler ServiceAccount, runs
a pod's whole life (created on RunPod, Running, deleted, gone) and makes every other
call KubeClient has (Job, Secret and ConfigMap reads, the SSH key's Secret made and
read, node repair after a restart, a
repeated Event, the pod watches, leader election, the node's writer Lease) and offloads
a Job's pod, without a single 403.
Necessary: with any one verb taken out of any rule, a call is refused with 403 for
exactly that verb and resource. No rule uses a wildcard.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.adapters.kube.cluster import default_namespace
from reconciler.adapters.kube.errors import KubeError, KubeForbidden
from reconciler.core.config import Settings
from reconciler.demo.sandbox import Sandbox
from reconciler.runtime.kubelet.sshkey import SshKeyError
from reconciler.runtime.process.leader import DEFAULT_LEASE_NAME
from reconciler.runtime.process.watch import PENDING_SELECTOR, node_selector
from reconciler.runtime.process.wiring import with_ssh_key
from reconciler.runtime.process.writer_lease import WriterHeld, WriterLease
from reconciler.sim.kube.resources import BY_PLURAL

from .manifests import DEPLOY, Obj, documents, render_chart

RBAC_FILE = DEPLOY / "common" / "rbac.yaml"
SUBJECT = "system:serviceaccount:runpod-system:runpod-reconciler"
FAST = Settings.of(create_grace_time=30, orphan_grace_time=60, max_pending_time=300)
# Each verb on the wire (`get` is a GET with a name, `list` one without).
METHODS = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
}


@dataclasses.dataclass
class Outcome:
    phase_after_boot: str | None = None
    pod_gone_after_delete: bool = False
    instance_gone_after_delete: bool = False


def sandbox(rbac_file: Path, settings: Settings = FAST) -> Sandbox:
    """Both simulators; the Kubernetes one authenticates the sandbox's token as SUBJECT and
    enforces the Roles and bindings of `rbac_file` that name SUBJECT."""
    return Sandbox(settings, rbac_files=(str(rbac_file),), rbac_subject=SUBJECT)


def lifecycle(box: Sandbox, outcome: Outcome) -> None:
    """A pod's whole life through the engine."""
    pod = box.add_pod("p", command=["python", "x.py"], ports=[8888])
    box.tick()
    box.advance(30)
    box.tick()
    outcome.phase_after_boot = (box.pod("p") or {}).get("status", {}).get("phase")
    box.kube_sim.delete_pod("default", "p")
    for _ in range(3):
        box.tick()
    outcome.pod_gone_after_delete = box.pod("p") is None
    outcome.instance_gone_after_delete = box.instance_for(pod) is None


def job_pod_with_env_sources(box: Sandbox) -> None:
    """A Job's pod whose env reads a Secret and a ConfigMap and that pulls with a Secret."""
    sim = box.kube_sim
    sim.put(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "default"},
            "data": {"TOKEN": base64.b64encode(b"value").decode()},
        },
    )
    sim.put(
        "configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "default"},
            "data": {"MODE": "fast"},
        },
    )
    job = sim.put(
        "jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": []}}},
        },
    )
    pod = box.add_pod(
        "train-x",
        restart_policy="Never",
        env=[
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "TOKEN"}}},
            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "MODE"}}},
        ],
        extra_spec={"imagePullSecrets": [{"name": "creds"}]},
    )
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train",
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
    ]
    sim.put("pods", pod)
    box.tick()


def node_repair_after_restart(box: Sandbox) -> None:
    """Someone strips the node's labels and conditions; a restarted reconciler restores them."""
    node = box.kube_sim.get("nodes", None, box.settings.node.name)
    if node is not None:  # None only when RBAC kept the first reconciler from creating it
        node["metadata"]["labels"] = {}
        node["status"]["conditions"] = []
        box.kube_sim.put("nodes", node)
    box.restart()
    box.tick()


def offload(box: Sandbox) -> None:
    """An unschedulable pod of a managed Job, bound to the virtual node by the engine."""
    box.add_job(
        "burst", labels={"runpod.io/managed": "true"}, command=["python", "x.py"], bound=False
    )
    [pod] = box.job_pods("burst")  # the Job controller's
    box.kube_sim.make_unschedulable("default", pod["metadata"]["name"])
    box.tick()


def client_only_calls(box: Sandbox) -> None:
    """KubeClient calls a single tick does not make: a repeated Event, an annotations
    patch on its own (a tick writes them with the status, and alone only when someone
    removed them since), the loop's pod watches and leader election."""
    pod = box.pod("p") or box.add_pod("p")
    for _ in range(2):  # the repeat patches the first one's count
        box.kube.events.record(pod, "Offloading", "moving to the virtual node")
    box.kube.pods.patch_annotations(
        "default", pod["metadata"]["name"], {"runpod.io/pod-id": "restored"}
    )
    for selector in (node_selector(box.settings.node.name), PENDING_SELECTOR):
        version = box.kube.pods.resource_version(selector)
        box.kube.pods.watch(selector, version, timeout_seconds=1).close()
    box.ensure_namespace("runpod-system")
    for _ in range(2):  # acquire (create), then renew (update)
        assert box.kube.leases.try_acquire(
            "runpod-system", DEFAULT_LEASE_NAME, "me", 15, box.clock.now()
        )
    box.kube.leases.release("runpod-system", DEFAULT_LEASE_NAME, "me")
    writer_lease = WriterLease(box.kube, box.settings.node.name, box.clock.now, box.clock.monotonic)
    for _ in range(2):  # the node's writer Lease: acquire (create), then renew (update)
        writer_lease.acquire()
    writer_lease.release()


def kubelet_endpoint_calls(box: Sandbox) -> None:
    """What the kubelet endpoint asks the API server: who a token is, what they may do,
    and the pod a log is asked for (through a list: there is no single-pod `get`)."""
    status = box.kube.reviews.token("sandbox-kube-token")
    assert status["authenticated"]
    allowed, _ = box.kube.reviews.access(
        "jane",
        ["system:authenticated"],
        "",
        {
            "verb": "get",
            "resource": "nodes",
            "subresource": "proxy",
            "name": box.settings.node.name,
        },
    )
    assert not allowed
    box.kube.pods.find("default", "p")


def network_volume(box: Sandbox) -> None:
    """A claim of a network-volume class used by a pod of the node: selected for the
    node, provisioned (a PV made), read for the pod's create, grown (the PV's capacity
    and the claim's status), then released (its PV deleted)."""
    sim = box.kube_sim
    sim.put(
        "storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "runpod"},
            "provisioner": "runpod.io/network-volume",
            "parameters": {"dataCenter": "EU-RO-1"},
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": True,
        },
    )
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt", "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "20Gi"}},
            "storageClassName": "runpod",
        },
    }
    sim.put("persistentvolumeclaims", claim)
    box.advance(box.settings.timing.catalog_ttl)  # the classes are read again after it
    pod = box.add_pod(
        "trainer",
        extra_spec={"volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]},
    )
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "ckpt", "mountPath": "/ckpt"}]
    sim.put("pods", pod)
    for _ in range(3):
        box.tick()
    grown = sim.get("persistentvolumeclaims", "default", "ckpt") or claim
    grown["spec"]["resources"]["requests"]["storage"] = "40Gi"
    sim.put("persistentvolumeclaims", grown)
    box.tick()
    sim.delete_pod("default", "trainer")
    for _ in range(3):
        box.tick()
    sim.store.delete(BY_PLURAL["persistentvolumeclaims"], "default", "ckpt")
    box.tick()


def ssh_key_secret(box: Sandbox) -> None:
    """The SSH key's Secret made in our namespace at start, then read at the next."""
    box.ensure_namespace(default_namespace())
    for _ in range(2):
        with_ssh_key(box.settings.with_values(ssh_key_secret="ssh-key"), box.kube)


def services_both_ways(box: Sandbox) -> None:
    """A pod of another namespace than `default` (so `default/kubernetes` is read by
    name) reaches its Services, and a Service selects it: the reconciler lists Services
    and EndpointSlices, makes its slice, changes it (new ports after a restart) and
    deletes it when the pod goes."""
    box.enable_ssh(str(box.workdir / "services-key"))
    box.configure(service_endpoint_address="192.0.2.10", service_listen_address="127.0.0.1")
    box.start_tunnels()
    box.ensure_namespace("shop")
    service = {
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
    }
    box.kube_sim.put(
        "services", {"metadata": {"name": "web", "namespace": "shop"}, "spec": service}
    )
    box.add_pod(
        "web", namespace="shop", command=["python", "x.py"], ports=[8080], labels={"app": "web"}
    )
    for _ in range(3):
        box.tick()
        box.advance(30)
    box.restart()
    box.tick()
    box.kube_sim.delete_pod("shop", "web", grace_seconds=0)
    box.tick()


def exercise(box: Sandbox) -> Outcome:
    """Every Kubernetes call the reconciler makes, each at least once."""
    outcome = Outcome()
    ssh_key_secret(box)
    lifecycle(box, outcome)
    network_volume(box)
    job_pod_with_env_sources(box)
    node_repair_after_restart(box)
    offload(box)
    client_only_calls(box)
    kubelet_endpoint_calls(box)
    services_both_ways(box)
    return outcome


def forbidden(box: Sandbox) -> list[tuple[str, str]]:
    return [(method, path) for method, path, _, status in box.kube_sim.requests if status == 403]


def requested(box: Sandbox) -> set[tuple[str, str]]:
    return {(method, path) for method, path, _, _ in box.kube_sim.requests}


def test_whole_lifecycle_and_every_call_pass_with_the_shipped_rbac() -> None:
    with sandbox(RBAC_FILE) as box:
        outcome = exercise(box)
        assert forbidden(box) == []
        assert outcome == Outcome(
            "Running", pod_gone_after_delete=True, instance_gone_after_delete=True
        )
        calls = requested(box)
        assert ("GET", "/apis/batch/v1/namespaces/default/jobs/train") in calls
        assert ("GET", "/api/v1/namespaces/default/secrets/creds") in calls
        assert ("GET", "/api/v1/namespaces/default/configmaps/settings") in calls
        assert ("PATCH", "/api/v1/nodes/virtual-runpod/status") in calls
        node = box.kube_sim.get("nodes", None, "virtual-runpod") or {}
        assert node["metadata"]["labels"]["type"] == "virtual-kubelet"
        assert ("GET", "/apis/batch/v1/namespaces/default/jobs/burst") in calls
        [pod] = box.job_pods("burst")
        assert pod["spec"]["nodeName"] == "virtual-runpod"


def test_rules_use_no_wildcards() -> None:
    rules = [rule for doc in documents(RBAC_FILE.read_text()) for rule in doc.get("rules", [])]
    assert rules
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), rule


def test_node_and_lease_rights_stop_at_our_own_node() -> None:
    with sandbox(RBAC_FILE) as box:
        box.tick()
        worker = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-worker-1"}}
        box.kube_sim.put("nodes", worker)
        with pytest.raises(KubeForbidden):
            box.kube.node.ensure(worker)
        with pytest.raises(KubeForbidden):
            box.kube.node.renew_lease("gpu-worker-1")


def every_granted_verb() -> Iterator[Any]:
    for d, doc in enumerate(documents(RBAC_FILE.read_text())):
        for r, rule in enumerate(doc.get("rules", [])):
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    where = doc["metadata"].get("namespace", "cluster")
                    names = ",".join(rule.get("resourceNames", []))
                    yield pytest.param(
                        d, r, resource, verb, id=f"{where}:{resource}[{names}]:{verb}"
                    )


@pytest.mark.parametrize(("document", "rule", "resource", "verb"), list(every_granted_verb()))
def test_every_granted_verb_is_needed(
    tmp_path: Path, document: int, rule: int, resource: str, verb: str
) -> None:
    rbac = documents(RBAC_FILE.read_text())
    rules = rbac[document]["rules"]
    original = rules.pop(rule)
    others = [r for r in original["resources"] if r != resource]
    rules.append(
        {**original, "resources": [resource], "verbs": [v for v in original["verbs"] if v != verb]}
    )
    if others:
        rules.append({**original, "resources": others})
    reduced = write(tmp_path, rbac)

    box = sandbox(reduced)
    try:
        # A refused call (even at start) ends the run; so does a writer Lease refused.
        with contextlib.suppress(KubeError, WriterHeld, SshKeyError):
            box.start()
            exercise(box)
        refused = forbidden(box)
    finally:
        box.stop()

    assert any(method == METHODS[verb] and addresses(path, resource) for method, path in refused), (
        refused
    )


def addresses(path: str, resource: str) -> bool:
    """Whether a request path is about `resource` ("pods", or a subresource "pods/status")."""
    plural, _, sub = resource.partition("/")
    parts = path.strip("/").split("/")
    if sub:
        return parts[-1] == sub and parts[-3] == plural
    return plural in parts[-2:] and parts[-1] not in ("status", "binding")


def test_without_the_pods_status_rule_the_pod_never_shows_running(tmp_path: Path) -> None:
    rbac = documents(RBAC_FILE.read_text())
    for doc in rbac:
        doc["rules"] = [r for r in doc.get("rules", []) if r["resources"] != ["pods/status"]]
    with sandbox(write(tmp_path, rbac)) as box:
        outcome = Outcome()
        lifecycle(box, outcome)
        refused = forbidden(box)
    assert outcome.phase_after_boot != "Running"
    assert ("PATCH", "/api/v1/namespaces/default/pods/p/status") in refused


@pytest.mark.parametrize("node_name", ["virtual-runpod", "burst-a100"])
def test_the_charts_rbac_is_sufficient_for_its_node_name(tmp_path: Path, node_name: str) -> None:
    rendered = render_chart({"nodeName": node_name})["runpod-reconciler/templates/rbac.yaml"]
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text(rendered)
    with sandbox(rbac, FAST.with_values(node_name=node_name)) as box:
        assert exercise(box).phase_after_boot == "Running"
        assert forbidden(box) == []


def write(directory: Path, rbac: list[Obj]) -> Path:
    path = directory / "rbac.yaml"
    path.write_text(yaml.safe_dump_all(copy.deepcopy(rbac)))
    return path
