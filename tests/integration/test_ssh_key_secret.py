"""`--ssh-key-secret`: the reconciler keeps its SSH key pair in a Secret of its own
namespace, made on first start (type kubernetes.io/ssh-auth, the key in ssh-privatekey)
and read on every later one; instances get its public half; kubectl exec reaches them
with its private half, which appears nowhere else (not in RunPod's requests, the pod,
its Events, the database or the log). Through the Kubernetes simulator, which enforces
the Secret type's rule."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.adapters.kube.cluster import default_namespace
from reconciler.adapters.kube.errors import KubeInvalid
from reconciler.core.config import Settings
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.runtime.kubelet import sshkey
from reconciler.runtime.kubelet.sshkey import SshKeyError, secret_identity
from reconciler.sim.runpod.net import PROXY_COMMAND

NAME = "runpod-reconciler-ssh"
SETTINGS = Settings.of(ssh_key_secret=NAME)


def the_secret(box: Sandbox) -> dict:
    secret = box.kube_sim.get("secrets", default_namespace(), NAME)
    assert secret is not None
    return secret


def private_key(box: Sandbox) -> bytes:
    return base64.b64decode(the_secret(box)["data"]["ssh-privatekey"])


def test_the_key_is_made_once_in_a_typed_secret_and_kept(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with Sandbox(SETTINGS) as box:
        secret = the_secret(box)
        assert secret["type"] == "kubernetes.io/ssh-auth"
        assert list(secret["data"]) == ["ssh-privatekey"]
        assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "runpod-reconciler"}
        public = box.settings.ssh.public_key
        assert public.startswith("ssh-ed25519 ")
        pod = box.add_pod("train", command=["python", "train.py"])
        box.tick()
        instance = box.instance_for(pod)
        assert instance is not None and instance["env"]["PUBLIC_KEY"] == public
        box.restart()  # a new process: the same key, read, not made again
        assert box.settings.ssh.public_key == public
        creates = [r for r in box.kube_sim.requests if r[0] == "POST" and r[1].endswith("/secrets")]
        assert len(creates) == 1
        body = private_key(box).decode().splitlines()[1]  # a line of the key's body
        seen = repr(
            [r.body for r in box.runpod_sim.requests]
            + [box.pod("train"), box.events("train"), box.runpod_sim.instances]
        )
        database = Path(box.database_url.removeprefix("sqlite:///")).read_bytes()
    assert body not in seen
    assert body.encode() not in database
    assert body not in caplog.text


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_exec_uses_the_key_from_the_secret() -> None:
    with Sandbox(SETTINGS, tls=True) as box:
        box.start_kubelet()
        box.add_pod("train", command=["python", "train.py"])
        box.tick()
        box.advance(30)
        box.tick()
        done = subprocess.run(
            ["kubectl", "--kubeconfig", box.kubeconfig, "exec", "train", "--", "echo", "hi"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert (done.returncode, done.stdout) == (0, "hi\n"), done.stderr


def test_a_replica_that_loses_the_race_to_make_it_uses_the_winners() -> None:
    with Sandbox() as box:
        box.ensure_namespace("runpod-system")
        winner = secret_identity(box.kube, "runpod-system", NAME)
        real_read = box.kube.secrets.read_bytes
        reads: list[str] = []

        def racing_read(namespace: str, name: str):  # type: ignore[no-untyped-def]
            reads.append(name)  # the first read happens before the winner's create lands
            return None if len(reads) == 1 else real_read(namespace, name)

        box.kube.secrets.read_bytes = racing_read  # type: ignore[method-assign]
        loser = secret_identity(box.kube, "runpod-system", NAME)
        statuses = [r[3] for r in box.kube_sim.requests if r[0] == "POST" and "secrets" in r[1]]
    assert loser.public_line == winner.public_line
    assert statuses == [201, 409]


def test_a_secret_without_the_key_is_a_one_line_error() -> None:
    with Sandbox() as box:
        box.ensure_namespace("runpod-system")
        box.kube_sim.put(
            "secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": NAME, "namespace": "runpod-system"},
                "data": {"id_ed25519": base64.b64encode(b"not this key").decode()},
            },
        )
        with pytest.raises(SshKeyError) as error:
            secret_identity(box.kube, "runpod-system", NAME)
    assert str(error.value) == (
        "the SSH key Secret runpod-system/runpod-reconciler-ssh has no ssh-privatekey key"
    )


def test_a_garbled_key_names_the_secret_not_its_bytes() -> None:
    with Sandbox() as box:
        box.ensure_namespace("runpod-system")
        box.kube.secrets.create("runpod-system", NAME, sshkey.SECRET_TYPE, {"ssh-privatekey": b"x"})
        with pytest.raises(SshKeyError) as error:
            secret_identity(box.kube, "runpod-system", NAME)
    assert "runpod-system/runpod-reconciler-ssh is not usable" in str(error.value)


def test_the_api_server_refuses_an_ssh_auth_secret_without_its_key() -> None:
    with Sandbox() as box:
        box.ensure_namespace("runpod-system")
        with pytest.raises(KubeInvalid) as refused:
            box.kube.secrets.create("runpod-system", NAME, sshkey.SECRET_TYPE, {"other": b"x"})
    assert "data[ssh-privatekey]: Required value" in str(refused.value)


def test_reconciler_exec_reads_the_key_from_the_secret_and_never_makes_it() -> None:
    with Sandbox(SETTINGS) as box:
        box.add_pod("train", command=["python", "train.py"])
        box.tick()
        box.advance(30)
        box.tick()
        done = reconciler_exec(box, NAME)
        missing = reconciler_exec(box, "no-such-secret")
        made = [r for r in box.kube_sim.requests if r[0] == "POST" and r[1].endswith("/secrets")]
    assert (done.returncode, done.stdout) == (0, "hi\n"), done.stderr
    assert missing.returncode == 1
    assert "the SSH key Secret runpod-system/no-such-secret does not exist" in missing.stderr
    assert len(made) == 1  # the reconciler's, at start


def reconciler_exec(box: Sandbox, secret: str) -> subprocess.CompletedProcess[str]:
    argv = [
        *(sys.executable, "-m", "reconciler", "--database-url", box.database_url, "exec"),
        *("--kubeconfig", box.kubeconfig, "--runpod-url", box.runpod_sim.base_url),
        *("--ssh-key-secret", secret, "default/train", "--", "echo", "hi"),
    ]
    # The simulator's public IPs are reached through its relay, as every exec test does.
    env = {
        **os.environ,
        "RUNPOD_API_KEY": API_KEY,
        "RECONCILER_SSH_PROXY_COMMAND": PROXY_COMMAND,
    }
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
