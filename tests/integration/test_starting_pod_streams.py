"""A pod whose RunPod instance is still starting says so: exec (and with it `kubectl cp`),
port-forward and `logs -f` on the kubelet endpoint answer that the container is not
running yet and what its instance waits for, as a kubelet answers for a container
that is creating; never that SSH is missing nor that the pod should be deleted (on
RunPod, following that advice costs a fresh boot). The SSH-missing answer stays for an
instance really created without 22/tcp."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from reconciler.demo.sandbox import Sandbox

from .spdy_client import ApiServerClient, _response

pytestmark = [
    pytest.mark.skipif(shutil.which("sh") is None, reason="no sh"),
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]

IMAGE = "ghcr.io/acme/big-image:1"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.enable_ssh(str(tmp_path / "reconciler-ssh-key"))
        sandbox.start_kubelet()
        yield sandbox


@pytest.fixture
def apiserver(box: Sandbox) -> ApiServerClient:
    return ApiServerClient(box.settings.kubelet.port, box.kube_sim.kubelet_client_files())


def _starting(box: Sandbox, seconds: float = 10) -> str:
    """A pod whose instance pulls its image for ten minutes, `seconds` after its create."""
    box.runpod_sim.account.set_image_pull_seconds(IMAGE, 600)
    box.add_pod("train", image=IMAGE, command=["python", "train.py"])
    box.tick()
    box.advance(seconds)
    box.tick()
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    return str(instance["id"])


def _says_starting(body: str, instance_id: str, status: str) -> None:
    assert "not running yet" in body and "ContainerCreating" in body
    assert f"RunPod instance {instance_id} is {status}" in body
    assert "publishes no" not in body and "delete the pod" not in body


@pytest.mark.parametrize(("seconds", "status"), [(1, "PROVISIONING"), (30, "STARTING")])
def test_exec_on_a_starting_pod_says_it_is_starting(box, apiserver, seconds, status):
    instance_id = _starting(box, seconds)
    done = apiserver.exec("/exec/default/train/main", ["tar", "cf", "-", "/tmp"])  # kubectl cp
    assert done.status == 400
    _says_starting(done.body, instance_id, status)


def test_port_forward_on_a_starting_pod_says_it_is_starting(box, apiserver):
    instance_id = _starting(box, 30)
    sock = apiserver._connect()
    request = [
        "POST /portForward/default/train HTTP/1.1",
        "Host: kubelet",
        "Connection: Upgrade",
        "Upgrade: SPDY/3.1",
        "X-Stream-Protocol-Version: portforward.k8s.io",
        "Content-Length: 0",
    ]
    sock.sendall(("\r\n".join(request) + "\r\n\r\n").encode())
    status, body, _ = _response(sock)
    sock.close()
    assert status == 400
    _says_starting(body, instance_id, "STARTING")


def test_logs_follow_on_a_starting_pod_says_it_is_waiting_to_start(box, tmp_path):
    instance_id = _starting(box, 30)
    cert = box.kube_sim.client_ca.issue_client("ops", ("system:masters",)).write(tmp_path, "ops")
    answer = requests.get(
        f"https://127.0.0.1:{box.settings.kubelet.port}/containerLogs/default/train/main",
        params={"follow": "true"},
        verify=False,
        timeout=10,
        cert=cert,
    )
    assert answer.status_code == 400
    assert "is waiting to start: ContainerCreating" in answer.text
    assert f"RunPod instance {instance_id} is STARTING" in answer.text


def test_once_it_runs_exec_works(box, apiserver):
    _starting(box, 30)
    box.advance(600)
    box.tick()
    done = apiserver.exec("/exec/default/train/main", ["true"])
    assert done.exit_status["status"] == "Success"


def test_an_instance_created_without_ssh_still_says_so(box, apiserver):
    box.add_pod("train", command=["python", "train.py"])
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None
    box.runpod_sim.set_instance_fields(instance["id"], {"ports": [], "runtime": {"ports": []}})
    box.configure()  # a new engine: no tick's list says where sshd is
    done = apiserver.exec("/exec/default/train/main", ["true"])
    assert done.status == 400
    assert "publishes no 22/tcp (created without SSH access)" in done.body
