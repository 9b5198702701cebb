"""A hostile tenant and exec: what a pod's owner may edit never decides where the
kubelet endpoint connects. The tenant of namespace A points its own pod's
`runpod.io/port-mappings` at the SSH address of a pod of namespace B and runs exec: the
command runs in A's own instance only, B's host key is never pinned for A's instance,
and the tick writes the annotation back. A row naming an instance that RunPod tags for
another pod is refused. What answers at an instance's address (nothing, or something
that is not sshd) gets one sentence: the answer tells nothing of what listens where."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.sim.runpod.simulator import RunPodSimulator

from .spdy_client import ApiServerClient

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")

MINE = "/exec/tenant-a/mine/main"
PORT_MAPPINGS = "runpod.io/port-mappings"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.enable_ssh(str(tmp_path / "reconciler-ssh-key"))
        sandbox.start_kubelet()
        sandbox.add_pod("mine", namespace="tenant-a", command=["python", "serve.py"])
        sandbox.add_pod("theirs", namespace="tenant-b", command=["python", "serve.py"])
        sandbox.tick()
        sandbox.advance(30)
        sandbox.tick()
        yield sandbox


@pytest.fixture
def apiserver(box: Sandbox) -> ApiServerClient:
    return ApiServerClient(box.settings.kubelet.port, box.kube_sim.kubelet_client_files())


def _instance(box: Sandbox, namespace: str, name: str) -> str:
    instance = box.instance_for(box.kube.pods.find(namespace, name) or {})
    assert instance is not None and instance["status"] == "RUNNING"
    return str(instance["id"])


def _mappings(box: Sandbox, namespace: str, name: str) -> str:
    pod = box.kube.pods.find(namespace, name) or {}
    return str(pod["metadata"]["annotations"][PORT_MAPPINGS])


def test_a_forged_address_reaches_only_the_pods_own_instance(box, apiserver):
    mine, theirs = _instance(box, "tenant-a", "mine"), _instance(box, "tenant-b", "theirs")
    real = _mappings(box, "tenant-a", "mine")
    box.kube.pods.patch_annotations(
        "tenant-a", "mine", {PORT_MAPPINGS: _mappings(box, "tenant-b", "theirs")}
    )
    done = apiserver.exec(MINE, ["sh", "-c", "echo planted > /tmp/planted"])
    assert done.exit_status.get("status") == "Success", done
    assert (box.runpod_sim.ssh.sandbox(mine) / "tmp" / "planted").exists()
    assert not (box.runpod_sim.ssh.sandbox(theirs) / "tmp" / "planted").exists()
    # the host key pinned for my instance is my instance's, not theirs
    kept = box.store.host_keys.remember(mine, "-", box.clock.now())
    assert kept == box.runpod_sim.ssh.host_key(mine) != box.runpod_sim.ssh.host_key(theirs)
    box.tick()
    assert _mappings(box, "tenant-a", "mine") == real


def test_a_forged_address_changes_nothing_before_the_first_list(box, apiserver):
    """A restarted endpoint that no tick has told yet asks RunPod for the row's id."""
    mine, theirs = _instance(box, "tenant-a", "mine"), _instance(box, "tenant-b", "theirs")
    box.kube.pods.patch_annotations(
        "tenant-a", "mine", {PORT_MAPPINGS: _mappings(box, "tenant-b", "theirs")}
    )
    box.configure()  # a new engine: no list yet, as after a restart
    before = len(box.runpod_sim.requests)
    done = apiserver.exec(MINE, ["sh", "-c", "echo planted > /tmp/planted"])
    assert done.exit_status.get("status") == "Success", done
    assert [(r.method, r.path) for r in box.runpod_sim.requests[before:]] == [
        ("GET", f"/v2/pods/{mine}")
    ]
    assert not (box.runpod_sim.ssh.sandbox(theirs) / "tmp" / "planted").exists()


def test_an_instance_runpod_tags_for_another_pod_is_refused(box, apiserver):
    mine = _instance(box, "tenant-a", "mine")
    listed = box.runpod_sim.instances[mine]
    env = {**listed["env"], POD_UID_ENV: "another-pods-uid"}
    box.runpod_sim.set_instance_fields(mine, {"env": env})
    box.configure()  # a new engine: no list yet, as after a restart
    done = apiserver.exec(MINE, ["sh", "-c", "echo planted > /tmp/planted"])
    assert done.status == 400 and "does not run this pod" in done.body, done
    assert not (box.runpod_sim.ssh.sandbox(mine) / "tmp" / "planted").exists()


def _not_sshd() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def _publish_ssh_at(sim: RunPodSimulator, instance_id: str, port: int) -> None:
    sim.set_instance_fields(
        instance_id,
        {"runtime": {"ports": [{"ip": "127.0.0.1", "private": 22, "public": port, "type": "tcp"}]}},
    )


def test_refused_and_not_ssh_read_the_same(box, apiserver):
    mine = _instance(box, "tenant-a", "mine")
    closed = socket.create_server(("127.0.0.1", 0))
    refused_port = closed.getsockname()[1]
    closed.close()
    answers = []
    for port in (refused_port, next(_not_sshd())):
        _publish_ssh_at(box.runpod_sim, mine, port)
        box.tick()
        done = apiserver.exec(MINE, ["true"])
        answers.append((done.status, done.body))
    assert answers[0] == answers[1] and answers[0][0] == 500
    assert "refused" not in answers[0][1] and str(refused_port) not in answers[0][1]


def test_a_forged_pod_id_after_state_loss_claims_nothing(box, apiserver):
    """The rows are lost; the tenant of A names B's instance in A's `runpod.io/pod-id`
    (and sorts first): B's instance carries B's tags, so A's row is never rebuilt on it,
    and the tick writes A's own id back."""
    mine, theirs = _instance(box, "tenant-a", "mine"), _instance(box, "tenant-b", "theirs")
    uids = {
        name: str((box.kube.pods.find(ns, name) or {})["metadata"]["uid"])
        for ns, name in (("tenant-a", "mine"), ("tenant-b", "theirs"))
    }
    for uid in uids.values():
        box.store.delete_row(uid)
    box.kube.pods.patch_annotations("tenant-a", "mine", {"runpod.io/pod-id": theirs})
    box.tick()
    box.tick()
    rows = {uid: box.store.row(uid) for uid in uids.values()}
    assert rows[uids["theirs"]] is not None and rows[uids["theirs"]].instance_id == theirs
    assert rows[uids["mine"]] is None or rows[uids["mine"]].instance_id != theirs
    assert box.runpod_sim.instances[theirs]["status"] == "RUNNING"
    shown = (box.kube.pods.find("tenant-a", "mine") or {})["metadata"]["annotations"]
    assert shown["runpod.io/pod-id"] == mine
    done = apiserver.exec(MINE, ["sh", "-c", "echo planted > /tmp/planted"])
    assert not (box.runpod_sim.ssh.sandbox(theirs) / "tmp" / "planted").exists(), done


def test_an_instance_runpod_tags_for_another_owner_is_refused(box, apiserver):
    """Our row names it and its pod tag is right, but its owner tag is another
    reconciler's: exec is refused at the call, not only when the row was made."""
    mine = _instance(box, "tenant-a", "mine")
    listed = box.runpod_sim.instances[mine]
    box.runpod_sim.set_instance_fields(mine, {"env": {**listed["env"], OWNER_ENV: "another"}})
    box.configure()  # a new engine: no list yet, so the call asks RunPod by id
    done = apiserver.exec(MINE, ["sh", "-c", "echo planted > /tmp/planted"])
    assert done.status == 400 and "does not run this pod" in done.body, done
    assert not (box.runpod_sim.ssh.sandbox(mine) / "tmp" / "planted").exists()


def test_exec_reaches_the_rows_instance_never_a_duplicate_the_list_shows(box, apiserver):
    """A duplicate for the same pod (a create whose answer was lost) is listed before the
    row's instance: the list's address is used only when it is the row's instance."""
    mine = _instance(box, "tenant-a", "mine")
    [create] = [
        r.body
        for r in box.runpod_sim.requests
        if (r.method, r.path) == ("POST", "/v2/pods") and r.body["name"].startswith("tenant-a-mine")
    ]
    made = requests.post(
        f"{box.runpod_sim.base_url}/v2/pods",
        json=create,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=10,
    )
    duplicate = made.json()["id"]
    box.advance(30)
    pods = box.runpod_sim.account.pods
    pods[mine] = pods.pop(mine)  # RunPod's list has no order: the duplicate comes first
    box.tick()  # the list shows both for the pod
    done = apiserver.exec(MINE, ["sh", "-c", "echo here > /tmp/here"])
    assert done.exit_status.get("status") == "Success", done
    assert (box.runpod_sim.ssh.sandbox(mine) / "tmp" / "here").exists()
    assert not (box.runpod_sim.ssh.sandbox(duplicate) / "tmp" / "here").exists()


def test_exec_into_a_pod_whose_instance_is_terminating_is_refused(box, apiserver):
    mine = _instance(box, "tenant-a", "mine")
    box.kube_sim.delete_pod("tenant-a", "mine", grace_seconds=30)
    box.tick()  # its instance is being terminated
    done = apiserver.exec(MINE, ["sh", "-c", "echo late > /tmp/late"])
    assert done.status == 400 and "is not running" in done.body, done
    if mine in box.runpod_sim.instances:
        assert not (box.runpod_sim.ssh.sandbox(mine) / "tmp" / "late").exists()
