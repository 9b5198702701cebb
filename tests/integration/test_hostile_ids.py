"""Ids a tenant writes, through both simulators over real HTTP: `runpod.io/pod-id` names an
instance only if RunPod's record carries our owner tag and that pod's UID tag
(`core.tenancy`). Naming another owner's instance, another namespace's, or a cluster
member is refused with an Event: no row is rebuilt, nothing of it is touched, and one
such pod never stops the tick for the others (one row per instance id)."""

from __future__ import annotations

import base64
import json
import sqlite3

import pytest
import requests

from reconciler.adapters.kube.errors import KubeServerError
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.core.resources.volume_objects import volume_name
from reconciler.demo.sandbox import Sandbox

pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


def _running(box: Sandbox, name: str, namespace: str = "default") -> str:
    box.add_pod(name, namespace=namespace)
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod(name, namespace) or {})
    assert instance is not None
    return str(instance["id"])


def _uid(box: Sandbox, name: str, namespace: str = "default") -> str:
    return str((box.pod(name, namespace) or {})["metadata"]["uid"])


def _refusals(box: Sandbox, name: str, namespace: str = "default") -> list[str]:
    return [e["message"] for e in box.events(name, namespace) if e["reason"] == "ForeignIdRefused"]


def _rows_naming(box: Sandbox, instance_id: str) -> list[str]:
    return [r.pod_uid for r in box.store.load_rows() if r.instance_id == instance_id]


def test_another_owners_instance_is_refused_and_never_read() -> None:
    with Sandbox(tls=True) as box:
        box.start_kubelet()
        theirs = box.runpod_sim.add_instance(
            "elsewhere", env={OWNER_ENV: "other-cluster/node", POD_UID_ENV: "u-1"}
        )
        box.runpod_sim.logs.write_container(theirs, ["another cluster's secret"])
        box.add_pod("hostile", namespace="team-a", annotations={"runpod.io/pod-id": theirs})
        assert not box.tick().errors
        assert _rows_naming(box, theirs) == []
        told = _refusals(box, "hostile", "team-a")
        assert told and "not this reconciler's" in told[0]
        box.advance(30)
        box.tick()
        # Run as a new pod: its own instance, whose id replaces the forged one.
        own = box.instance_for(box.pod("hostile", "team-a") or {})
        assert own is not None and own["id"] != theirs
        assert box.kubelet is not None
        answer = requests.get(
            f"https://127.0.0.1:{box.kubelet.port}/containerLogs/team-a/hostile/main",
            cert=box.kube_sim.kubelet_client_files(),
            verify=False,
            timeout=10,
        )
        assert "secret" not in answer.text
        touched = [r.method for r in box.runpod_sim.requests if theirs in r.path]
        assert touched == []
        assert box.runpod_sim.instances[theirs]["env"][OWNER_ENV] == "other-cluster/node"


def test_another_namespaces_instance_is_refused_after_the_rows_are_lost(box: Sandbox) -> None:
    """With the database lost, the rows come back from the pods' annotations: a pod of
    team-a naming team-b's instance took it (and team-b's own row then broke every
    commit); now only team-b's pod, whose UID the instance's tag carries, names it."""
    theirs = _running(box, "b", "team-b")
    box.add_pod("a", namespace="team-a", annotations={"runpod.io/pod-id": theirs})
    for row in box.store.load_rows():
        box.store.delete_row(row.pod_uid)
    assert not box.tick().errors
    assert _rows_naming(box, theirs) == [_uid(box, "b", "team-b")]
    assert _refusals(box, "a", "team-a")
    box.advance(30)
    assert not box.tick().errors
    assert box.runpod_sim.instances[theirs]["status"] == "RUNNING"
    assert (box.pod("b", "team-b") or {})["status"]["phase"] == "Running"


@pytest.mark.parametrize("namespace", ["default", "team-a"])
def test_a_cluster_members_id_is_refused_and_stops_no_tick(box: Sandbox, namespace: str) -> None:
    """A member's id (of the pod's own namespace's gang, or another's) on a plain pod
    rebuilt a row for it, then a second row with the same instance id: every commit of
    every tick failed, and no pod of any namespace was created."""
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    box.tick()
    member = box.job_pods("train")[0]["metadata"]["annotations"]["runpod.io/pod-id"]
    box.add_pod("hostile", namespace=namespace, annotations={"runpod.io/pod-id": member})
    for _ in range(3):
        assert not box.tick().errors
        box.advance(box.settings.timing.create_grace_time)
    assert _rows_naming(box, member) == []
    assert _refusals(box, "hostile", namespace)
    box.add_pod("other", namespace="team-b")
    assert not box.tick().errors
    assert box.instance_for(box.pod("other", "team-b") or {}) is not None
    assert all(p["status"]["phase"] == "Running" for p in box.job_pods("train"))


def _claim(box: Sandbox, name: str, namespace: str) -> str:
    """A claim of a class no provisioner serves: the volume made for it is seeded."""
    box.ensure_namespace(namespace)
    made = box.kube_sim.put(
        "persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "20Gi"}},
                "storageClassName": "elsewhere",
            },
        },
    )
    return str(made["metadata"]["uid"])


def _posts(box: Sandbox) -> list[dict]:
    return [r.body for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/pods")]


def test_a_volume_made_for_another_namespaces_claim_is_not_mounted(box: Sandbox) -> None:
    """team-a named team-b's claim's volume and read its files; only a volume made for
    one of the pod's own namespace's claims may be named (RunPod's record: its name)."""
    theirs = box.runpod_sim.add_volume(
        volume_name(box.settings.owner_id, _claim(box, "data", "team-b")), 20, "US-KS-2"
    )
    box.add_pod("a", namespace="team-a", annotations={"runpod.io/network-volume-id": theirs.id})
    assert not box.tick().errors
    assert _posts(box) == []
    told = _refusals(box, "a", "team-a")
    assert told and "not made for this namespace's claims" in told[0]
    assert (box.pod("a", "team-a") or {})["status"]["containerStatuses"][0]["state"]["waiting"][
        "reason"
    ] == "ForeignIdRefused"
    # Its own namespace's pod mounts it.
    box.add_pod("b", namespace="team-b", annotations={"runpod.io/network-volume-id": theirs.id})
    box.advance(60)
    assert not box.tick().errors
    [body] = _posts(box)
    assert body["mounts"]["network"][0]["volumeId"] == theirs.id
    assert body["env"][POD_UID_ENV] == _uid(box, "b", "team-b")


def test_a_volume_the_reconciler_did_not_make_is_mounted_only_through_a_pv(box: Sandbox) -> None:
    _claim(box, "data", "team-a")
    console = box.runpod_sim.add_volume("datasets", 50, "US-KS-2")
    box.add_pod("a", namespace="team-a", annotations={"runpod.io/network-volume-id": console.id})
    assert not box.tick().errors
    assert _posts(box) == []
    told = _refusals(box, "a", "team-a")
    assert told and "not this reconciler's" in told[0] and "PersistentVolume" in told[0]


def _pull_secret(box: Sandbox, namespace: str) -> None:
    auths = {"ghcr.io": {"username": "robot", "password": f"{namespace}-only"}}
    data = {".dockerconfigjson": base64.b64encode(json.dumps({"auths": auths}).encode()).decode()}
    box.ensure_namespace(namespace)
    box.kube_sim.put(
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "pull", "namespace": namespace},
            "data": data,
        },
    )


def test_a_credential_made_from_another_namespaces_pull_secret_is_refused(box: Sandbox) -> None:
    """team-a named the credential made from team-b's imagePullSecret and its instance
    pulled with it; a pod names only one made from its own pull secrets, or one the
    administrator allows (`--registry-auth-ids`)."""
    _pull_secret(box, "team-b")
    box.add_pod(
        "b",
        namespace="team-b",
        image="ghcr.io/b/private:1",
        extra_spec={"imagePullSecrets": [{"name": "pull"}]},
    )
    box.tick()
    [theirs] = [b["registry"] for b in _posts(box)]
    box.add_pod(
        "a",
        namespace="team-a",
        image="ghcr.io/b/private:1",
        annotations={"runpod.io/container-registry-auth-id": theirs},
    )
    assert not box.tick().errors
    assert len(_posts(box)) == 1
    told = _refusals(box, "a", "team-a")
    assert told and "not made for this namespace's pull secrets" in told[0]
    # Its own namespace's pod may name it.
    box.add_pod(
        "b2",
        namespace="team-b",
        image="docker.io/b/public:1",
        annotations={"runpod.io/container-registry-auth-id": theirs},
        extra_spec={"imagePullSecrets": [{"name": "pull"}]},
    )
    box.advance(60)
    assert not box.tick().errors
    assert [b.get("registry") for b in _posts(box)][1:] == [theirs]
    # And any pod, once the administrator allows it.
    box.configure(registry_auth_ids=(theirs,))
    box.advance(60)
    assert not box.tick().errors
    assert [b.get("registry") for b in _posts(box)][2:] == [theirs]
    assert box.instance_for(box.pod("a", "team-a") or {}) is not None


def _forged_member_pod(box: Sandbox, job: dict, member: str, cluster_id: str) -> str:
    """A pod of team-a whose ownerReference names team-b's Job UID, as its index 0."""
    box.ensure_namespace("team-a")
    made = box.kube_sim.create_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "intruder",
                "namespace": "team-a",
                "annotations": {
                    "runpod.io/cluster": "true",
                    "batch.kubernetes.io/job-completion-index": "0",
                    "runpod.io/pod-id": member,
                    "runpod.io/cluster-id": cluster_id,
                },
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job["metadata"]["name"],
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "restartPolicy": "Never",
                "nodeName": box.settings.node.name,
                "containers": [{"name": "main", "image": "python:3.11", "command": ["sh"]}],
            },
        }
    )
    return str(made["metadata"]["name"])


def test_a_pod_naming_another_namespaces_job_joins_no_gang() -> None:
    """A pod of team-a whose ownerReference named team-b's Indexed Job UID joined its
    gang: team-b's cluster was deleted and its pods failed. Gangs are keyed by namespace
    and Job UID, and a pod joins one only if its Job is its own namespace's; its forged
    member id reads no log."""
    with Sandbox(tls=True) as box:
        box.start_kubelet()
        job = box.add_indexed_job("train", 2, namespace="team-b")
        box.tick()
        box.advance(30)
        box.tick()
        pods = box.job_pods("train", "team-b")
        assert all(p["status"]["phase"] == "Running" for p in pods)
        shown = pods[0]["metadata"]["annotations"]
        member, cluster_id = shown["runpod.io/pod-id"], shown["runpod.io/cluster-id"]
        box.runpod_sim.logs.write_container(member, ["team-b's secret"])
        name = _forged_member_pod(box, job, member, cluster_id)
        deletes = [r for r in box.runpod_sim.requests if r.method == "DELETE"]
        for _ in range(3):
            assert not box.tick().errors
            box.advance(box.settings.timing.orphan_grace_time)
        assert [r for r in box.runpod_sim.requests if r.method == "DELETE"] == deletes
        assert all(p["status"]["phase"] == "Running" for p in box.job_pods("train", "team-b"))
        intruder = box.pod(name, "team-a") or {}
        assert intruder["status"]["phase"] == "Pending"
        assert _refusals(box, name, "team-a")
        assert box.kubelet is not None
        answer = requests.get(
            f"https://127.0.0.1:{box.kubelet.port}/containerLogs/team-a/{name}/main",
            cert=box.kube_sim.kubelet_client_files(),
            verify=False,
            timeout=10,
        )
        assert "secret" not in answer.text, answer.text


def test_the_checks_add_no_request_to_a_steady_tick(box: Sandbox) -> None:
    """Ownership is judged on what the tick lists anyway: once every pod runs, a tick
    sends RunPod its one list, whatever the pods' annotations name (the gang's result
    reads, a request of their own, are off here)."""
    box.configure(gang_result_interval=0)
    theirs = box.runpod_sim.add_instance(
        "elsewhere", env={OWNER_ENV: "other-cluster/node", POD_UID_ENV: "u-1"}
    )
    box.add_pod("a", namespace="team-a", annotations={"runpod.io/pod-id": theirs})
    box.add_indexed_job("train", 2, namespace="team-b")
    for _ in range(3):
        assert not box.tick().errors
        box.advance(30)
    assert (box.pod("a", "team-a") or {})["status"]["phase"] == "Running"
    seen = len(box.runpod_sim.requests)
    box.tick()
    box.tick()
    sent = [(r.method, r.path) for r in box.runpod_sim.requests[seen:]]
    assert sent == [("GET", "/v2/pods")] * 2


def test_a_gang_whose_job_cannot_be_read_is_not_collected_on_a_guess(
    box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its row lost, a running gang's pods are proven their Job's by reading the
    Job; while that read fails, nothing is decided of the gang: its cluster is not taken
    for an orphan (deleted), its pods are not failed."""
    box.add_indexed_job("train", 2)
    box.tick()
    box.advance(30)
    box.tick()
    assert all(p["status"]["phase"] == "Running" for p in box.job_pods("train"))
    with sqlite3.connect(box.database_url.removeprefix("sqlite:///")) as db:
        db.execute("DELETE FROM clusters")
    box.restart()

    def unreadable(namespace: str, name: str) -> None:
        raise KubeServerError("etcd is unwell", 503)

    monkeypatch.setattr(box.kube.jobs, "get", unreadable)
    deletes = [r for r in box.runpod_sim.requests if r.method == "DELETE"]
    for _ in range(3):
        box.tick()
        box.advance(box.settings.timing.orphan_grace_time)
    assert [r for r in box.runpod_sim.requests if r.method == "DELETE"] == deletes
    assert all(p["status"]["phase"] == "Running" for p in box.job_pods("train"))
    monkeypatch.undo()
    assert not box.tick().errors
    assert [r.gang for r in box.store.load_clusters()]  # proven by the read: its row again
    assert all(p["status"]["phase"] == "Running" for p in box.job_pods("train"))
