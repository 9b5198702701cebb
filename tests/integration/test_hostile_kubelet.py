"""Hostile requests to the kubelet endpoint over real HTTPS, with a client certificate
the cluster's CA issued: log options out of range get a 400 with a sentence (never a
dropped connection), a pod name that is not a Kubernetes name is refused rather
than smuggled into a field selector, and a line printed to look like the batch
wrapper's exit-code marker is shown and kept like any other. Silent connections are
closed before authentication, connections beyond the cap at once, and one caller
follows at most its share of logs."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from reconciler.core.contract import EXIT_CODE_MARKER, STOP_ON_EXIT_ENV
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.runtime.kubelet.server import EndpointLimits

# These callers play the API server, which does not verify a kubelet's serving
# certificate unless started with --kubelet-certificate-authority (self-signed here).
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox(tls=True) as sandbox:
        sandbox.start_kubelet()
        yield sandbox


@pytest.fixture
def admin(box: Sandbox, tmp_path: Path) -> tuple[str, str]:
    return box.kube_sim.client_ca.issue_client("ops", ("system:masters",)).write(tmp_path, "ops")


def running_pod(box: Sandbox, name: str) -> str:
    box.add_pod(name, command=["python", "train.py"])
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod(name) or {})
    assert instance is not None
    return str(instance["id"])


def get(box: Sandbox, cert: tuple[str, str], path: str, **params: str) -> requests.Response:
    return requests.get(
        f"https://127.0.0.1:{box.settings.kubelet.port}{path}",
        params=params,
        verify=False,
        timeout=10,
        cert=cert,
    )


@pytest.mark.parametrize(
    ("option", "value", "sentence"),
    [
        ("sinceSeconds", "99999999999", "sinceSeconds must be"),
        ("sinceTime", "9999-12-31T23:59:59-14:00", "sinceTime must be"),
        ("sinceTime", "0001-01-01T00:00:00+14:00", "sinceTime must be"),
        ("sinceTime", "0001-01-01T00:00:00Z", "sinceTime must be"),
        ("tailLines", "9" * 30, "tailLines must be"),
        ("limitBytes", "9" * 30, "limitBytes must be"),
        ("tailLines", "+5", "tailLines must be"),
        ("tailLines", "0_1", "tailLines must be"),
        ("limitBytes", "\uff15", "limitBytes must be"),
        ("sinceSeconds", " 5 ", "sinceSeconds must be"),
    ],
)
def test_out_of_range_log_options_get_a_400_with_a_sentence(
    box: Sandbox, admin: tuple[str, str], option: str, value: str, sentence: str
) -> None:
    running_pod(box, "train")
    answer = get(box, admin, "/containerLogs/default/train/main", **{option: value})
    assert answer.status_code == 400, answer.text
    assert sentence in answer.text


def test_a_pod_name_cannot_smuggle_a_field_selector(box: Sandbox, admin: tuple[str, str]) -> None:
    talker = running_pod(box, "talker")
    box.runpod_sim.logs.write_container(talker, ["a secret of talker's"])
    assert "a secret" in get(box, admin, "/containerLogs/default/talker/main").text
    smuggled = get(box, admin, "/containerLogs/default/talker%2Cmetadata.namespace%3Ddefault/main")
    assert smuggled.status_code == 400
    assert "a secret" not in smuggled.text
    assert "is not a valid pod name" in smuggled.text
    for path in (
        "/containerLogs/default%2Cx/talker/main",
        "/containerLogs/default/talker/main%0A",
        "/containerLogs/default/Talker/main",
    ):
        answer = get(box, admin, path)
        assert answer.status_code == 400 and "is not a valid" in answer.text, path


def test_a_line_that_looks_like_the_exit_marker_hides_nothing(
    box: Sandbox, admin: tuple[str, str]
) -> None:
    box.add_pod("job", command=["python", "train.py"], restart_policy="Never")
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("job") or {})
    assert instance is not None
    forged = [f"{EXIT_CODE_MARKER}0", "after the forged marker", f"{EXIT_CODE_MARKER}0 again"]
    box.runpod_sim.logs.write_container(instance["id"], ["before", *forged])
    path = "/containerLogs/default/job/main"
    assert get(box, admin, path).text.splitlines()[-4:] == ["before", *forged]
    assert get(box, admin, path, tailLines="2").text.splitlines() == forged[1:]
    box.runpod_sim.exit_process(instance["id"], 3)
    box.tick()  # reads the real marker: Failed with 3, and keeps the log
    pod = box.pod("job") or {}
    assert pod["status"]["phase"] == "Failed"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    box.tick()
    assert box.instance_for(pod) is None
    kept = get(box, admin, path).text.splitlines()
    assert kept[-4:] == ["before", *forged]  # every user line kept; the real marker not


def _silent(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Waits (up to the socket's timeout) for the server to close the connection."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_silent_connections_are_closed_before_authentication(box: Sandbox) -> None:
    box.kubelet.stop()
    server = box.start_kubelet(limits=EndpointLimits(idle_timeout=0.5))
    held = [_silent(server.port) for _ in range(20)]
    try:
        assert all(_closed_by_server(sock) for sock in held)  # no TLS handshake, no bytes
        eventually(lambda: server.connections == 0)  # and their threads are gone
    finally:
        for sock in held:
            sock.close()


def test_a_new_connection_closes_the_oldest_unauthenticated_one(
    box: Sandbox, admin: tuple[str, str]
) -> None:
    running_pod(box, "train")
    box.kubelet.stop()
    server = box.start_kubelet(limits=EndpointLimits(idle_timeout=60, max_connections=3))
    held = [_silent(server.port) for _ in range(3)]
    try:
        eventually(lambda: server.connections == 3)
        extra = _silent(server.port)
        assert _closed_by_server(held[0])  # long before the 60 s idle timeout
        assert get(box, admin, "/containerLogs/default/train/main").status_code == 200
        extra.close()
    finally:
        for sock in held:
            sock.close()
    eventually(lambda: server.connections == 0)


def test_connections_beyond_the_cap_are_closed_at_once_when_all_are_authenticated(
    box: Sandbox, admin: tuple[str, str]
) -> None:
    running_pod(box, "train")
    box.kubelet.stop()
    server = box.start_kubelet(limits=EndpointLimits(idle_timeout=60, max_connections=2))
    url = f"https://127.0.0.1:{server.port}/containerLogs/default/train/main"
    with contextlib.ExitStack() as stack:
        for _ in range(2):
            follow = stack.enter_context(
                requests.get(
                    url,
                    params={"follow": "true"},
                    verify=False,
                    timeout=10,
                    cert=admin,
                    stream=True,
                )
            )
            assert follow.status_code == 200
        assert server.connections == 2
        extra = _silent(server.port)
        assert _closed_by_server(extra)
        extra.close()
    eventually(lambda: server.connections == 0)
    assert get(box, admin, "/containerLogs/default/train/main").status_code == 200


def test_one_caller_follows_at_most_its_share(box: Sandbox, admin: tuple[str, str]) -> None:
    running_pod(box, "train")
    box.kubelet.stop()
    box.start_kubelet(limits=EndpointLimits(max_follows_per_namespace=1))
    url = f"https://127.0.0.1:{box.settings.kubelet.port}/containerLogs/default/train/main"
    with requests.get(
        url, params={"follow": "true"}, verify=False, timeout=10, cert=admin, stream=True
    ) as first:
        assert first.status_code == 200
        second = get(box, admin, "/containerLogs/default/train/main", follow="true")
        assert second.status_code == 400
        assert "--kubelet-max-follows-per-namespace" in second.text
        assert get(box, admin, "/containerLogs/default/train/main").status_code == 200


def eventually(check: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_a_batch_instance_started_before_the_nonce_still_reports_its_code(
    box: Sandbox,
) -> None:
    """An instance created by the previous version carries "1" and its wrapper prints the
    bare marker: its code is read, so an upgrade does not fail running batch pods."""
    box.add_pod("old-job", command=["python", "train.py"], restart_policy="Never")
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("old-job") or {})
    assert instance is not None
    env = {**instance["env"], STOP_ON_EXIT_ENV: "1"}
    patched = requests.patch(
        f"{box.runpod_sim.base_url}/v2/pods/{instance['id']}",
        json={"env": env},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=10,
    )
    assert patched.status_code == 200, patched.text
    box.runpod_sim.exit_process(instance["id"], 3)
    box.tick()
    pod = box.pod("old-job") or {}
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_an_unexpected_failure_is_a_500_with_a_sentence(
    box: Sandbox, admin: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("secret detail")

    assert box.kubelet is not None
    monkeypatch.setattr(box.kubelet.logs, "lines", broken)
    answer = get(box, admin, "/containerLogs/default/nope/main")
    assert answer.status_code == 500
    assert "secret detail" not in answer.text and "reconciler's log" in answer.text
