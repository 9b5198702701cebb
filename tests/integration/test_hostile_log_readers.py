"""Log readers against the reconciler's quota, over real HTTPS through both simulators:
thirty `kubectl logs -f` on one pod share one RunPod stream (a plain read while it is
followed costs nothing), log reads beyond `--log-read-share` are refused with a
sentence, RunPod never answers 429, and the reconciler's next create is not held up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from reconciler.demo.sandbox import Sandbox

# These callers play the API server, which does not verify a kubelet's serving
# certificate unless started with --kubelet-certificate-authority (self-signed here).
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

FOLLOWERS = 30


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


def log_requests(box: Sandbox) -> list[int]:
    """The status of each log request RunPod saw."""
    return [r.status for r in box.runpod_sim.requests if r.path.endswith("/logs")]


def url(box: Sandbox, pod: str) -> str:
    return f"https://127.0.0.1:{box.settings.kubelet.port}/containerLogs/default/{pod}/main"


def test_thirty_followers_share_one_runpod_stream(box: Sandbox, admin: tuple[str, str]) -> None:
    instance_id = running_pod(box, "train")
    box.runpod_sim.logs.write_container(instance_id, ["epoch 1"])
    before = len(log_requests(box))
    seen: list[list[str]] = [[] for _ in range(FOLLOWERS)]
    opened = threading.Barrier(FOLLOWERS + 1, timeout=30)

    def follow(index: int) -> None:
        with requests.get(
            url(box, "train"),
            params={"follow": "true", "tailLines": "1"},
            verify=False,
            timeout=30,
            cert=admin,
            stream=True,
        ) as answer:
            assert answer.status_code == 200, answer.text
            lines = answer.iter_lines(decode_unicode=True)
            seen[index].append(next(lines))
            opened.wait()
            seen[index].append(next(lines))

    threads = [threading.Thread(target=follow, args=(i,)) for i in range(FOLLOWERS)]
    for thread in threads:
        thread.start()
    opened.wait()
    plain = requests.get(url(box, "train"), verify=False, timeout=10, cert=admin)
    assert plain.text.endswith("epoch 1\n")
    box.runpod_sim.logs.write_container(instance_id, ["epoch 2"])
    for thread in threads:
        thread.join(30)
    assert seen == [["epoch 1", "epoch 2"]] * FOLLOWERS
    # One backfill and one live stream for all thirty; the plain read costs nothing.
    assert log_requests(box)[before:] == [200, 200]
    box.add_pod("next")
    box.tick()
    assert box.instance_for(box.pod("next") or {}) is not None


def test_log_reads_beyond_their_share_are_refused_with_a_sentence(
    box: Sandbox, admin: tuple[str, str]
) -> None:
    box.kubelet.stop()
    box.configure(log_read_share=0.1)  # of the simulator's 60 a minute: 6
    box.start_kubelet()
    instance_id = running_pod(box, "train")
    box.runpod_sim.logs.write_container(instance_id, ["epoch 1"])
    answers = [
        requests.get(url(box, "train"), verify=False, timeout=10, cert=admin) for _ in range(10)
    ]
    assert [a.status_code for a in answers] == [200] * 6 + [503] * 4
    assert "--log-read-share" in answers[-1].text and "try again in" in answers[-1].text
    assert 429 not in log_requests(box)
    box.add_pod("next")
    box.tick()  # the reconciler's own requests were left their share
    assert box.instance_for(box.pod("next") or {}) is not None
    box.advance(60)
    again = requests.get(url(box, "train"), verify=False, timeout=10, cert=admin)
    assert again.status_code == 200
