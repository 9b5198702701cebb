"""`reconciler drain`, the step before uninstalling: it terminates every instance with
our owner tag (and nothing else), waits until RunPod lists none of them, retries what
failed, says what is left when the timeout runs out, and refuses while a reconciler
still serves the node. Against both simulators over HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from click.testing import CliRunner

from reconciler.cli.commands import main
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.runtime.process.drain import drain


def run_drain(box: Sandbox, *args: str) -> tuple[int, str]:
    """Exit code and standard output, or the error line when it failed."""
    result = CliRunner().invoke(
        main,
        ["drain", "--kubeconfig", box.kubeconfig, "--runpod-url", box.runpod_sim.base_url, *args],
        env={"RUNPOD_API_KEY": API_KEY},
    )
    assert API_KEY not in result.output
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def test_drain_ends_every_owned_instance_and_nothing_else(box: Sandbox) -> None:
    box.add_pod("train")
    box.add_pod("serve")
    box.tick()
    foreign = box.runpod_sim.add_foreign_instance()
    owned = sorted(i["id"] for i in box.owned_instances())
    assert len(owned) == 2
    before = len(box.runpod_sim.requests)
    # The sandbox's clock is months behind the real one: the heartbeat looks stale.
    code, output = run_drain(box, "--output", "json")
    assert code == 0, output
    record = json.loads(output)
    assert sorted(record["terminated"]) == owned and record["remaining"] == []
    assert record["owner"] == box.settings.owner_id
    assert box.owned_instances() == []
    assert foreign in box.runpod_sim.instances
    calls = [(r.method, r.path) for r in box.runpod_sim.requests[before:]]
    # One list, one DELETE each, one list that shows none: four RunPod requests.
    assert sorted(calls) == sorted(
        [("GET", "/v2/pods"), ("GET", "/v2/pods"), *[("DELETE", f"/v2/pods/{i}") for i in owned]]
    )


def test_drain_refuses_while_a_reconciler_serves_the_node(box: Sandbox) -> None:
    box.advance((datetime.now(UTC) - box.clock.now()).total_seconds())
    box.add_pod("train")
    box.tick()  # renews the node's heartbeat Lease, as a running reconciler does
    code, output = run_drain(box)
    assert code == 1
    assert "still serves node virtual-runpod" in output and "--force" in output
    assert len(box.owned_instances()) == 1
    code, output = run_drain(box, "--force")
    assert code == 0, output
    assert "nothing of ours is billing" in output
    assert box.owned_instances() == []


def test_drain_retries_a_failed_delete_until_the_list_is_empty(box: Sandbox) -> None:
    box.add_pod("train")
    box.tick()
    # More 503s than the client's own attempts: the first poll cannot terminate it.
    box.runpod_sim.faults.inject("DELETE", "/v2/pods/*", 503, count=4)
    report = drain(
        box.runpod,
        box.settings.owner_id,
        timeout=120,
        poll=5,
        sleep=box.clock.sleep,
        monotonic=box.clock.monotonic,
    )
    assert report.ok and len(report.terminated) == 1
    assert report.errors and "503" in report.errors[0]
    assert box.owned_instances() == []


def test_drain_reports_what_is_left_when_time_runs_out(box: Sandbox) -> None:
    box.add_pod("train")
    box.tick()
    box.runpod_sim.faults.inject("DELETE", "/v2/pods/*", 503, count=1000)
    report = drain(
        box.runpod,
        box.settings.owner_id,
        timeout=30,
        poll=5,
        sleep=box.clock.sleep,
        monotonic=box.clock.monotonic,
    )
    assert not report.ok
    assert report.remaining == [i["id"] for i in box.owned_instances()]
