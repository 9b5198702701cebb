"""exec on the kubelet endpoint, over SSH to the RunPod simulator's sshd: what the API
server sends (TLS with its client certificate, SPDY/3.1, v4 streams) reaches the
instance with the argv quoted exactly; stdout, stderr and the exit status come back as
a kubelet writes them; stdin's end is passed on; `-t` gets a pty sized by the resize
stream. The instance is created with startSsh, our public key in PUBLIC_KEY and 22/tcp;
the private key is nowhere else. No RunPod request per exec (the tick's list said where
sshd is; before any list, one GET of the row's instance). A pod whose image runs no
sshd, a changed host key, attach and callers without credentials get clear answers."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.demo.sandbox import Sandbox

from .spdy_client import ApiServerClient

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.enable_ssh(str(tmp_path / "reconciler-ssh-key"))
        sandbox.start_kubelet()
        yield sandbox


@pytest.fixture
def instance_id(box: Sandbox) -> str:
    box.add_pod("train", command=["python", "train.py"])
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("train") or {})
    assert instance is not None and instance["status"] == "RUNNING"
    return str(instance["id"])


@pytest.fixture
def apiserver(box: Sandbox) -> ApiServerClient:
    return ApiServerClient(box.settings.kubelet.port, box.kube_sim.kubelet_client_files())


EXEC = "/exec/default/train/main"


def test_streams_and_the_exit_status_as_a_kubelet_writes_them(box, instance_id, apiserver):
    done = apiserver.exec(EXEC, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert done.status == 101
    assert (done.stdout, done.stderr) == (b"out\n", b"err\n")
    assert done.exit_status["reason"] == "NonZeroExitCode"
    assert done.exit_status["details"] == {"causes": [{"reason": "ExitCode", "message": "3"}]}
    ok = apiserver.exec(EXEC, ["true"])
    assert ok.exit_status == {"metadata": {}, "status": "Success"}


def test_the_argv_is_quoted_exactly(box, instance_id, apiserver):
    argv = ["printf", "%s|", "a  b", "$HOME", "'q'", "x;y", ""]
    assert apiserver.exec(EXEC, argv).stdout == b"a  b|$HOME|'q'|x;y||"


def test_stdin_and_its_end_reach_the_command(box, instance_id, apiserver):
    done = apiserver.exec(EXEC, ["sh", "-c", "cat; echo '[end]'"], stdin=b"data\n")
    assert done.stdout == b"data\n[end]\n"


def test_a_tty_is_sized_by_the_resize_stream(box, instance_id, apiserver):
    # the command waits for a line, sent after the size, so it reads the size given
    done = apiserver.exec(
        EXEC,
        ["sh", "-c", "read line; stty size; test -t 0 && echo tty"],
        stdin=b"go\n",
        tty=True,
        resize=[(100, 30)],
    )
    assert done.stdout.replace(b"\r", b"").endswith(b"30 100\ntty\n")


def test_the_instance_is_created_for_ssh_and_the_private_key_stays_home(box, instance_id):
    create = next(r for r in box.runpod_sim.requests if r.method == "POST")
    assert create.body["startSsh"] is True
    assert "22/tcp" in create.body["ports"]
    public = box.settings.ssh.public_key
    assert create.body["env"]["PUBLIC_KEY"] == public
    private = Path(box.settings.ssh.key_file).read_text()
    secret = private.splitlines()[1]  # a line of the key's body
    seen = json.dumps(
        [r.body for r in box.runpod_sim.requests]
        + [box.pod("train"), box.events("train"), box.runpod_sim.instances]
    )
    assert public.split()[1] in seen and secret not in seen


def test_no_runpod_request_per_exec(box, instance_id, apiserver):
    before = len(box.runpod_sim.requests)
    apiserver.exec(EXEC, ["true"])
    apiserver.exec(EXEC, ["true"])
    assert len(box.runpod_sim.requests) == before


def test_one_get_when_no_list_said_where_sshd_is(box, instance_id, apiserver):
    box.configure()  # a new engine, as after a restart: no tick has listed yet
    before = len(box.runpod_sim.requests)
    assert apiserver.exec(EXEC, ["true"]).exit_status["status"] == "Success"
    asked = box.runpod_sim.requests[before:]
    assert [(r.method, r.path) for r in asked] == [("GET", f"/v2/pods/{instance_id}")]


def test_a_pod_without_sshd_gets_a_clear_error(box, instance_id, apiserver):
    box.runpod_sim.ssh.set_running(instance_id, False)
    done = apiserver.exec(EXEC, ["true"])
    assert done.status == 500
    assert "no SSH server answers" in done.body and "PUBLIC_KEY" in done.body


def test_a_changed_host_key_is_refused(box, instance_id, apiserver):
    assert apiserver.exec(EXEC, ["true"]).exit_status["status"] == "Success"
    box.runpod_sim.ssh.set_running(instance_id, True, new_host_key=True)
    done = apiserver.exec(EXEC, ["true"])
    assert done.status == 500 and "host key" in done.body and "changed" in done.body


def test_a_changed_host_key_is_still_refused_after_a_restart(box, instance_id):
    first = ApiServerClient(box.settings.kubelet.port, box.kube_sim.kubelet_client_files())
    assert first.exec(EXEC, ["true"]).exit_status["status"] == "Success"
    assert box.kubelet is not None
    box.kubelet.stop()  # a new process: nothing of the first contact in memory
    box.start_kubelet()
    box.runpod_sim.ssh.set_running(instance_id, True, new_host_key=True)
    again = ApiServerClient(box.settings.kubelet.port, box.kube_sim.kubelet_client_files())
    done = again.exec(EXEC, ["true"])
    assert done.status == 500 and "host key" in done.body and "changed" in done.body


def test_commands_run_in_the_containers_working_dir(box, apiserver):
    container = {
        "name": "main",
        "image": "python:3.11",
        "command": ["python", "serve.py"],
        "workingDir": "/workspace",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    box.add_pod("wd", extra_spec={"containers": [container]})
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("wd") or {})
    assert instance is not None
    (box.runpod_sim.ssh.sandbox(instance["id"]) / "workspace").mkdir(exist_ok=True)
    wrote = apiserver.exec("/exec/default/wd/main", ["sh", "-c", "echo kept > note"])
    assert wrote.exit_status["status"] == "Success", wrote.stderr
    note = box.runpod_sim.ssh.sandbox(instance["id"]) / "workspace" / "note"
    assert note.read_text() == "kept\n"
    assert apiserver.exec("/exec/default/wd/main", ["cat", "note"]).stdout == b"kept\n"


def test_attach_answers_with_a_sentence(box, instance_id, apiserver):
    done = apiserver.exec("/attach/default/train/main", ["ignored"])
    assert done.status == 400 and "PID 1" in done.body


def test_callers_without_credentials_get_401(box, instance_id):
    anonymous = ApiServerClient(box.settings.kubelet.port, None)
    assert anonymous.exec(EXEC, ["true"]).status == 401


def test_bad_requests_are_refused_before_the_upgrade(box, instance_id, apiserver):
    assert apiserver.exec(EXEC, []).status == 400
    old = apiserver.exec(EXEC, ["true"], protocols=("v5.channel.k8s.io",))
    assert old.status == 403 and "unable to negotiate protocol" in old.body
    other = apiserver.exec("/exec/default/nothing/main", ["true"])
    assert other.status == 404
    hostile = apiserver.exec("/exec/default/a,b=c/main", ["true"])
    assert hostile.status == 400 and "not a valid pod name" in hostile.body


# Waits (up to 5 s) for the pty to show 40 rows of 120 columns, then says what it shows.
AWAIT_40X120 = (
    'read line; for i in $(seq 50); do s=$(stty size); [ "$s" = "40 120" ] && break; '
    'sleep 0.1; done; echo "$s"'
)


def test_a_resize_after_the_command_started_reaches_its_pty(box, instance_id, apiserver):
    # The first size opens the pty; the second goes through the resize pump, in order:
    # width is columns, height rows.
    done = apiserver.exec(
        EXEC, ["sh", "-c", AWAIT_40X120], stdin=b"go\n", tty=True, resize=[(100, 30), (120, 40)]
    )
    assert done.stdout.replace(b"\r", b"").endswith(b"40 120\n"), done
