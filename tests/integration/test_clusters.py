"""An Indexed Job run as one RunPod Instant Cluster, end to end through both simulators:
one POST /v2/clusters once all the Job's pods are on the node (its body closed, tagged
with our owner and the gang, without a pod UID or the per-pod index), index i mirrors
the member of rank i (status, overlay IP, `runpod.io/rank`), a steady tick lists once
and nothing more, deleting the Job deletes the cluster and finishes every pod, a member
failure fails the gang and the Job's retry gets a new cluster, a Job that cannot be a
cluster says why on its pods, and a crash or a lost answer around the create leaves one
cluster, not two."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from click.testing import CliRunner

from reconciler.cli.commands import main
from reconciler.core.contract import GANG_ENV, OWNER_ENV, POD_UID_ENV
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.sim.runpod.http import SimRequest

from .crashing import crash_in


def cluster_posts(box: Sandbox) -> list[SimRequest]:
    return [r for r in box.runpod_sim.requests if (r.method, r.path) == ("POST", "/v2/clusters")]


def members(box: Sandbox) -> list[dict[str, Any]]:
    return [pod for pod in box.runpod_sim.instances.values() if "cluster" in pod]


def running_gang(box: Sandbox, size: int = 2) -> list[dict[str, Any]]:
    box.add_indexed_job("train", size)
    box.tick()
    box.advance(30)
    box.tick()
    return box.job_pods("train")


def test_an_indexed_job_becomes_one_cluster(box: Sandbox) -> None:
    box.add_indexed_job("train", 2)
    box.tick()
    [post] = cluster_posts(box)
    assert post.status == 201
    body = post.body
    assert body["compute"] == {
        "gpuTypeId": body["compute"]["gpuTypeId"],
        "gpuCountPerPod": 1,
        "podCount": 2,
    }
    assert body["type"] == "TRAINING" and "registry" not in body
    assert body["env"][OWNER_ENV] == box.settings.owner_id and GANG_ENV in body["env"]
    assert POD_UID_ENV not in body["env"] and "JOB_COMPLETION_INDEX" not in body["env"]
    pods = box.job_pods("train")
    assert all(p["status"].get("phase") == "Pending" for p in pods)
    box.advance(30)
    box.tick()
    by_rank = {m["cluster"]["rank"]: m for m in members(box)}
    for index, pod in enumerate(box.job_pods("train")):
        member = by_rank[index]
        assert pod["status"]["phase"] == "Running"
        assert "podIP" not in pod["status"]  # the overlay address leads nowhere from the cluster
        annotations = pod["metadata"]["annotations"]
        assert annotations["runpod.io/rank"] == str(index)
        assert annotations["runpod.io/pod-id"] == member["id"]
        assert annotations["runpod.io/cluster-id"] == member["cluster"]["id"]
    assert len(cluster_posts(box)) == 1


def test_a_steady_tick_lists_once_and_writes_nothing(box: Sandbox) -> None:
    running_gang(box)
    box.tick()  # the last status writes settle
    seen = len(box.runpod_sim.requests)
    writes = len(box.kube_sim.requests)
    box.tick()
    new = box.runpod_sim.requests[seen:]
    assert [(r.method, r.path, r.query) for r in new] == [
        ("GET", "/v2/pods", {"includeClusterPods": "true"})
    ]
    pod_writes = [r for r in box.kube_sim.requests[writes:] if r[0] != "GET" and "/pods" in r[1]]
    assert pod_writes == []


def test_deleting_the_job_deletes_the_cluster_and_finishes_its_pods(box: Sandbox) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    batch = box.kube_sim.api_client()
    import kubernetes

    kubernetes.client.BatchV1Api(batch).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    box.tick()
    deletes = [r for r in box.runpod_sim.requests if r.method == "DELETE"]
    assert [r.path for r in deletes] == [f"/v2/clusters/{cluster_id}"]
    assert members(box) == [] and box.runpod_sim.clusters == {}
    box.tick()
    assert box.job_pods("train") == []


def test_a_member_failure_fails_the_gang_and_the_retry_gets_a_new_cluster(box: Sandbox) -> None:
    running_gang(box)
    first = members(box)
    box.runpod_sim.fail_instance(first[0]["id"])
    box.tick()
    assert box.runpod_sim.clusters == {}
    failed = [p for p in box.kube_sim.list("pods", "default") if p["status"]["phase"] == "Failed"]
    assert len(failed) == 2
    assert {p["status"]["reason"] for p in failed} == {"ClusterMemberFailed"}
    replacements = box.job_pods("train")
    live = [p for p in replacements if p["status"].get("phase") != "Failed"]
    assert len(live) == 2
    box.tick()
    posts = cluster_posts(box)
    assert len(posts) == 2
    assert posts[0].body["env"][GANG_ENV] != posts[1].body["env"][GANG_ENV]


def test_a_job_that_cannot_be_a_cluster_says_why(box: Sandbox) -> None:
    box.add_indexed_job("train", 3, parallelism=2)
    box.tick()
    assert cluster_posts(box) == []
    for pod in box.job_pods("train"):
        waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
        assert waiting["reason"] == "InvalidClusterJob"
        assert "parallelism (2) must equal its completions (3)" in waiting["message"]


@pytest.mark.parametrize("point", ["after-cluster-intent", "after-cluster-create"])
def test_a_crash_around_the_create_leaves_one_cluster(box: Sandbox, point: str) -> None:
    box.add_indexed_job("train", 2)
    crash_in(box, point)
    for _ in range(4):
        box.tick()
        box.advance(20)
    assert len(box.runpod_sim.clusters) == 1
    assert all(p["status"]["phase"] == "Running" for p in box.job_pods("train"))


def test_a_lost_answer_is_not_retried_blindly(box: Sandbox) -> None:
    box.add_indexed_job("train", 2)
    box.runpod_sim.account.set_listing_lag(20)  # shorter than the create grace (30 s)
    box.runpod_sim.faults.create_then_fail(1, 500)
    box.tick()
    box.tick()
    box.advance(25)
    box.tick()
    box.advance(30)
    box.tick()
    assert len(box.runpod_sim.clusters) == 1
    assert len(cluster_posts(box)) == 1


def test_a_second_cluster_for_one_gang_is_deleted(box: Sandbox) -> None:
    """A lost answer while the list lags past the create grace: the create is made again
    (as for instances, architecture §4), and once both are listed one goes."""
    box.add_indexed_job("train", 2)
    box.runpod_sim.account.set_listing_lag(90)
    box.runpod_sim.faults.create_then_fail(1, 500)
    box.tick()
    box.advance(31)
    box.tick()
    assert len(cluster_posts(box)) == 2 and len(box.runpod_sim.clusters) == 2
    box.runpod_sim.account.catch_up_listing()
    box.runpod_sim.account.set_listing_lag(0)
    box.tick()
    box.advance(31)
    box.tick()
    box.tick()
    [kept] = box.runpod_sim.clusters
    for pod in box.job_pods("train"):
        assert pod["metadata"]["annotations"]["runpod.io/cluster-id"] == kept
        assert pod["status"]["phase"] == "Running"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_kubectl_logs_reads_each_pods_member() -> None:
    with Sandbox(tls=True) as box:
        box.start_kubelet()
        pods = running_gang(box)
        by_rank = {m["cluster"]["rank"]: m for m in members(box)}
        for index in (0, 1):
            box.runpod_sim.logs.write_container(by_rank[index]["id"], [f"rank {index} says hi"])
        for index, pod in enumerate(pods):
            done = subprocess.run(
                ["kubectl", "--kubeconfig", box.kubeconfig, "logs", pod["metadata"]["name"]],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            assert f"rank {index} says hi" in done.stdout
            assert f"rank {1 - index} says hi" not in done.stdout


def test_the_readme_torchrun_job_runs_as_one_cluster(box: Sandbox) -> None:
    """The README's example, placed on the virtual node as its nodeSelector asks."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    (text,) = re.findall(r"<!-- example: torchrun-job.yaml -->\n```yaml\n(.*?)```", readme, re.S)
    job = yaml.safe_load(text)
    spec = job["spec"]["template"]["spec"]
    spec["nodeName"] = box.settings.node.name
    del spec["nodeSelector"]
    job["metadata"]["namespace"] = "default"
    box.kube_sim.put("jobs", job)
    box.tick()
    [post] = cluster_posts(box)
    assert post.body["compute"]["podCount"] == 2
    assert '--node_rank="$NODE_RANK"' in post.body["args"]
    box.advance(30)
    box.tick()
    pods = box.job_pods("torchrun")
    assert [p["metadata"]["annotations"]["runpod.io/rank"] for p in pods] == ["0", "1"]
    assert all(p["status"]["phase"] == "Running" for p in pods)


def test_state_show_lists_the_gangs_clusters(box: Sandbox) -> None:
    running_gang(box)
    cluster_id = members(box)[0]["cluster"]["id"]
    url = box.database_url
    text = CliRunner().invoke(main, ["--database-url", url, "state", "show"])
    assert text.exit_code == 0, text.output
    assert f"cluster {cluster_id} of Job default/train: running, 2 x " in text.output
    shown = CliRunner().invoke(main, ["--database-url", url, "state", "show", "-o", "json"])
    [record] = [r for r in json.loads(shown.output) if r["state"].startswith("cluster-")]
    assert (record["instance_id"], record["pod_count"]) == (cluster_id, 2)


def test_a_crash_before_the_delete_is_sent_is_healed_once_the_list_could_have_caught_up(
    box: Sandbox,
) -> None:
    box.configure(create_grace_time=5)
    running_gang(box)
    import kubernetes

    kubernetes.client.BatchV1Api(box.kube_sim.api_client()).delete_namespaced_job(
        "train", "default", propagation_policy="Background"
    )
    crash_in(box, "after-cluster-deleting")  # the row says deleting; the DELETE was never sent
    box.advance(6)  # longer than the list may lag, far less than a minute
    box.tick()
    assert members(box) == [] and box.runpod_sim.clusters == {}


def test_another_reconcilers_cluster_of_the_same_gang_is_never_ours(box: Sandbox) -> None:
    """Another reconciler on the same RunPod account made a cluster tagged with the same
    gang (its owner tag is its own): it is neither adopted, nor healed away as a
    duplicate, nor collected as an orphan, however long it runs."""
    box.add_indexed_job("train", 2)
    box.tick()
    [ours] = cluster_posts(box)
    body = {**ours.body, "env": {**ours.body["env"], OWNER_ENV: "another-cluster/another-node"}}
    made = requests.post(
        f"{box.runpod_sim.base_url}/v2/clusters",
        json=body,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=10,
    )
    assert made.status_code == 201, made.text
    foreign = made.json()["id"]
    for _ in range(8):  # past the create grace (30 s) and the orphan grace (60 s)
        box.advance(30)
        box.tick()
    assert foreign in box.runpod_sim.clusters
    touched = [r for r in box.runpod_sim.requests if foreign in r.path and r.method != "GET"]
    assert touched == []
    (mine,) = [c for c in box.runpod_sim.clusters if c != foreign]
    pods = box.job_pods("train")
    assert {p["metadata"]["annotations"]["runpod.io/cluster-id"] for p in pods} == {mine}


def test_a_gang_of_exactly_the_instance_cap_starts(box: Sandbox) -> None:
    box.configure(max_instances=2)
    box.add_indexed_job("train", 2)
    box.tick()
    assert len(cluster_posts(box)) == 1


def test_a_cluster_in_doubt_holds_the_room_of_all_its_pods(box: Sandbox) -> None:
    """Its create's answer was lost and the list lags: until it is listed or the grace
    ends it counts as its 2 pods, so a second gang of 2 waits under a cap of 3."""
    box.configure(max_instances=3)
    box.add_indexed_job("train", 2)
    box.runpod_sim.account.set_listing_lag(20)  # shorter than the create grace (30 s)
    box.runpod_sim.faults.create_then_fail(1, 500)
    box.tick()
    box.add_indexed_job("other", 2)
    box.tick()
    assert len(cluster_posts(box)) == 1
    [waiting] = {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
        for p in box.job_pods("other")
    }
    assert "would pass --max-instances (3; 2 running)" in waiting


def test_with_no_record_of_either_the_heal_keeps_the_oldest_cluster(box: Sandbox) -> None:
    """Two clusters for one gang, the database lost and no pod recording either: the
    first made stays (its members may have started the work), the later one goes."""
    box.add_indexed_job("train", 2)
    box.tick()
    [first] = box.runpod_sim.clusters
    [ours] = cluster_posts(box)
    box.advance(10)
    made = requests.post(
        f"{box.runpod_sim.base_url}/v2/clusters",
        json=ours.body,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=10,
    )
    assert made.status_code == 201, made.text
    second = made.json()["id"]
    for suffix in ("", "-wal", "-shm"):
        Path(str(box.workdir / "reconciler.db") + suffix).unlink(missing_ok=True)
    box.restart()
    for pod in box.job_pods("train"):
        annotations = pod["metadata"]["annotations"]
        for key in ("runpod.io/cluster-id", "runpod.io/pod-id", "runpod.io/rank"):
            annotations.pop(key, None)
        box.kube_sim.put("pods", pod)
    box.advance(31)
    for _ in range(3):
        box.tick()
    assert list(box.runpod_sim.clusters) == [first]
    assert second != first
