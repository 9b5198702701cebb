"""Hostile requests to the kubelet endpoint over real HTTPS, with a client certificate
the cluster's CA issued: log options out of range get a 400 with a sentence (never a
dropped connection), a pod name that is not a Kubernetes name is refused rather
than smuggled into a field selector, and a line printed to look like the batch
wrapper's exit-code marker is shown and kept like any other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from reconciler.core.contract import EXIT_CODE_MARKER
from reconciler.demo.sandbox import Sandbox


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
        f"https://127.0.0.1:{box.settings.kubelet_port}{path}",
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
    box.runpod_sim.write_container_log(talker, ["a secret of talker's"])
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
    box.runpod_sim.write_container_log(instance["id"], ["before", *forged])
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
