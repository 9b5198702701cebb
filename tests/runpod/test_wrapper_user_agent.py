"""The batch wrapper's stop call, for real, against the RunPod simulator: each of its three
branches (curl, wget, python3) is run as the only tool on PATH and must stop the
instance with our User-Agent; the simulator, like RunPod's gateway, refuses urllib's
default one (403, error code 1010), so a branch without it would leave the instance
billing."""

from __future__ import annotations

import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from reconciler.adapters.runpod.client import RunPodClient
from reconciler.core.contract import STOP_ON_EXIT_ENV
from reconciler.core.domain import USER_AGENT, InstanceStatus
from reconciler.core.translate.container import wrap_for_batch
from reconciler.sim.runpod.simulator import RunPodSimulator
from tests import needs

from .helpers import API_KEY, OWNER, create_request

# Stands in for the wait between stop calls, and ends the wrapper (its parent) there.
FAKE_SLEEP = "#!/bin/sh\nkill -TERM $PPID\n"


def _tool(name: str) -> str:
    if name == "python3":
        return sys.executable  # the shim on PATH may be a script needing more tools
    return needs.program(name)


@pytest.mark.parametrize("tool", ["curl", "wget", "python3"])
def test_each_branch_stops_the_instance_with_our_user_agent(
    tool: str, sim: RunPodSimulator, client: RunPodClient, tmp_path: Path
) -> None:
    instance = client.instances.create(
        create_request(env={"RUNPOD_RECONCILER_OWNER": OWNER, STOP_ON_EXIT_ENV: "1"})
    )
    sim.advance(30)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / tool).symlink_to(_tool(tool))
    (bin_dir / "sleep").write_text(FAKE_SLEEP)
    (bin_dir / "sleep").chmod(0o755)
    argv = shlex.split(wrap_for_batch("true", "0123456789abcdef0123"))
    env = {
        "PATH": str(bin_dir),
        "RUNPOD_POD_ID": instance.id,
        "RUNPOD_API_KEY": API_KEY,
        "RUNPOD_API_URL": sim.base_url,
    }
    subprocess.run(
        ["/bin/sh", *argv[1:]], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    stops = [r for r in sim.requests if r.path == f"/v2/pods/{instance.id}/action"]
    assert [(r.status, r.headers.get("User-Agent"), r.body) for r in stops] == [
        (200, USER_AGENT, {"action": "stop"})
    ]
    assert client.instances.get(instance.id).status is InstanceStatus.EXITED


def test_urllibs_default_user_agent_is_refused_like_the_gateway_does(
    sim: RunPodSimulator,
) -> None:
    request = urllib.request.Request(
        f"{sim.base_url}/v2/pods", headers={"Authorization": f"Bearer {API_KEY}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
    assert "1010" in refused.value.read().decode()


def test_the_client_names_itself(sim: RunPodSimulator, client: RunPodClient) -> None:
    client.instances.list()
    assert [r.headers.get("User-Agent") for r in sim.requests] == [USER_AGENT]
