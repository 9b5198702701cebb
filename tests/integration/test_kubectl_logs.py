"""`kubectl logs` for pods on RunPod, end to end: the real kubectl asks the Kubernetes
simulator (TLS), which calls the virtual node's kubelet endpoint with its client
certificate at the node's InternalIP and daemonEndpoints port, which reads the RunPod
simulator's log stream. Covered: a plain read (ending where RunPod's backfill ends, even
while the pod goes on printing), --tail, --since, --timestamps, -f seeing a line printed
after it started, -f across a RunPod stream cut mid-way (no line lost or repeated), a
finished Job pod's log after its instance is gone, clear errors for other containers,
--previous and exec, and 401/403 for callers without credentials or rights. RunPod
requests are counted per read."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from reconciler.core.contract import STOP_ON_EXIT_ENV, exit_nonce
from reconciler.demo.sandbox import Sandbox
from reconciler.sim.kube.pki import ClientCA

pytestmark = [
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
    # The callers below play the API server, which does not verify a kubelet's serving
    # certificate unless started with --kubelet-certificate-authority (self-signed here).
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.start_kubelet()
        yield sandbox


def kubectl(box: Sandbox, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", box.kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def running_pod(box: Sandbox, name: str = "train", **options: object) -> str:
    """A pod whose instance runs; returns the instance id."""
    box.add_pod(name, command=["python", "train.py"], **options)  # type: ignore[arg-type]
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod(name) or {})
    assert instance is not None
    return str(instance["id"])


def log_requests(box: Sandbox) -> int:
    return sum(1 for r in box.runpod_sim.requests if r.path.endswith("/logs"))


def test_the_node_advertises_the_endpoint(box: Sandbox) -> None:
    box.tick()
    node = box.kube_sim.get("nodes", None, box.settings.node.name) or {}
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"}]
    assert node["status"]["daemonEndpoints"] == {
        "kubeletEndpoint": {"Port": box.settings.kubelet.port}
    }


def test_logs_tail_since_and_timestamps(box: Sandbox) -> None:
    instance_id = running_pod(box)
    box.runpod_sim.logs.write_container(instance_id, ["epoch 1", "epoch 2", "epoch 3"])
    before = log_requests(box)
    out = kubectl(box, "logs", "train").stdout
    assert out.endswith("epoch 1\nepoch 2\nepoch 3\n")
    assert log_requests(box) - before == 1  # one RunPod request per plain read
    assert kubectl(box, "logs", "train", "--tail=2").stdout == "epoch 2\nepoch 3\n"
    box.advance(120)
    box.runpod_sim.logs.write_container(instance_id, ["epoch 4"])
    assert kubectl(box, "logs", "train", "--since=1m").stdout == "epoch 4\n"
    stamped = kubectl(box, "logs", "train", "--tail=1", "--timestamps").stdout
    assert stamped.endswith(" epoch 4\n") and stamped.startswith("2026-01-01T00:02:30")


def test_a_plain_read_ends_at_the_end_of_the_backfill(box: Sandbox) -> None:
    """A chatty pod is never silent: without -f the read ends at the first line printed
    after it began (stamped after the RunPod stream's Date), not after a silence."""
    instance_id = running_pod(box)
    box.runpod_sim.logs.write_container(instance_id, ["epoch 1", "epoch 2"])
    box.kubelet.logs.backfill_idle = 600  # silence alone would not end the read in time
    before = log_requests(box)
    reader = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "logs", "train"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: log_requests(box) > before)
        box.advance(2)
        box.runpod_sim.logs.write_container(instance_id, ["epoch 3", "epoch 4"])
        out, _ = reader.communicate(timeout=20)
    finally:
        reader.kill()
    assert reader.returncode == 0
    assert out.endswith("epoch 1\nepoch 2\n")
    assert log_requests(box) - before == 1


def eventually(check: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_follow_sees_new_lines_across_a_cut_stream(box: Sandbox) -> None:
    instance_id = running_pod(box)
    box.runpod_sim.logs.write_container(instance_id, ["one"])
    before = log_requests(box)
    follower = subprocess.Popen(
        ["kubectl", "--kubeconfig", box.kubeconfig, "logs", "-f", "train", "--tail=1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "one\n"
        box.runpod_sim.logs.write_container(instance_id, ["two"])
        assert follower.stdout.readline() == "two\n"
        # (the backfill's stream may still count as open: a server sees a hang-up only
        # when it next writes)
        assert box.runpod_sim.logs.drop_streams(instance_id, after=1) >= 1
        box.runpod_sim.logs.write_container(instance_id, ["three", "four", "five"])
        assert [follower.stdout.readline() for _ in range(3)] == ["three\n", "four\n", "five\n"]
        box.runpod_sim.exit_process(instance_id, 0)  # not a batch pod: RunPod restarts it
        box.runpod_sim.logs.write_container(instance_id, ["six"])
        assert follower.stdout.readline() == "six\n"
        # backfill + follow + one resume after the cut
        assert log_requests(box) - before == 3
    finally:
        follower.kill()
        follower.wait()


def test_a_finished_job_pod_keeps_its_log_after_the_instance_is_gone(box: Sandbox) -> None:
    instance_id = running_pod(box, "job-pod", restart_policy="Never")
    uid = (box.pod("job-pod") or {})["metadata"]["uid"]
    assert box.runpod_sim.instances[instance_id]["env"][STOP_ON_EXIT_ENV] == exit_nonce(uid)
    box.runpod_sim.logs.write_container(instance_id, ["loss 0.3", "done"])
    box.runpod_sim.exit_process(instance_id, 0)
    at_exit = log_requests(box)
    box.tick()
    box.advance(30)
    box.tick()
    assert instance_id not in box.runpod_sim.instances
    assert (box.pod("job-pod") or {})["status"]["phase"] == "Succeeded"
    # One read gave the exit code, the kept lines and the system lines.
    assert log_requests(box) == at_exit + 1
    before = log_requests(box)
    out = kubectl(box, "logs", "job-pod").stdout
    assert out.endswith("loss 0.3\ndone\n") and "RUNPOD_RECONCILER_EXIT_CODE" not in out
    assert log_requests(box) == before  # served from the store
    events = [
        e
        for e in box.kube_sim.list("events", "default")
        if e["involvedObject"]["name"] == "job-pod" and e["reason"] == "RunPodSystem"
    ]
    assert "pod stopped by its own container" in {e["message"] for e in events}


def test_clear_errors(box: Sandbox) -> None:
    running_pod(box, extra_spec={"initContainers": [{"name": "setup", "image": "busybox"}]})
    other = kubectl(box, "logs", "train", "-c", "setup", ok=False)
    assert other.returncode != 0 and 'only "main" runs on RunPod' in other.stderr
    previous = kubectl(box, "logs", "train", "--previous", ok=False)
    assert "previous logs are not available" in previous.stderr
    box.add_pod("waiting", command=["python", "x.py"])
    waiting = kubectl(box, "logs", "waiting", ok=False)
    assert "is waiting to start" in waiting.stderr


def test_callers_without_credentials_or_rights(box: Sandbox) -> None:
    running_pod(box)
    base = f"https://127.0.0.1:{box.settings.kubelet.port}/containerLogs/default/train/main"
    anonymous = requests.get(base, verify=False, timeout=5)
    assert anonymous.status_code == 401
    box.kube_sim.add_user("jane-token", "jane")
    denied = requests.get(
        base, verify=False, timeout=5, headers={"Authorization": "Bearer jane-token"}
    )
    assert denied.status_code == 403
    assert "user=jane, verb=get, resource=nodes, subresource=proxy" in denied.text
    box.kube_sim.add_user("ops-token", "ops")
    box.kube_sim.add_rbac(
        [
            {
                "kind": "ClusterRole",
                "metadata": {"name": "node-proxy"},
                "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}],
            },
            {
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "ops-node-proxy"},
                "roleRef": {"kind": "ClusterRole", "name": "node-proxy"},
                "subjects": [{"kind": "User", "name": "ops"}],
            },
        ]
    )
    allowed = requests.get(
        base, verify=False, timeout=5, headers={"Authorization": "Bearer ops-token"}
    )
    assert allowed.status_code == 200, allowed.text
    exec_call = requests.post(
        base.replace("containerLogs", "exec"),
        verify=False,
        timeout=5,
        headers={"Authorization": "Bearer ops-token"},
    )
    assert exec_call.status_code == 403  # exec is `create` on nodes/proxy: not granted
    box.kube_sim.add_rbac(
        [
            {
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "ops-admin"},
                "roleRef": {"kind": "ClusterRole", "name": "system:kubelet-api-admin"},
                "subjects": [{"kind": "User", "name": "ops2"}],
            }
        ]
    )
    box.kube_sim.add_user("ops2-token", "ops2")
    exec_allowed = requests.post(
        base.replace("containerLogs", "exec"),
        verify=False,
        timeout=5,
        headers={"Authorization": "Bearer ops2-token"},
    )
    # allowed; this reconciler has no SSH key, so exec says so
    assert exec_allowed.status_code == 501 and "--ssh-key-file" in exec_allowed.text


def test_client_certificates_must_come_from_the_clusters_ca(box: Sandbox, tmp_path: Path) -> None:
    running_pod(box)
    base = f"https://127.0.0.1:{box.settings.kubelet.port}/containerLogs/default/train/main"
    ours = box.kube_sim.client_ca.issue_client("ops", ("system:masters",))
    answer = requests.get(base, verify=False, timeout=5, cert=ours.write(tmp_path, "ours"))
    assert answer.status_code == 200, answer.text
    foreign = ClientCA("someone-elses-ca").issue_client("ops", ("system:masters",))
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(base, verify=False, timeout=5, cert=foreign.write(tmp_path, "foreign"))
