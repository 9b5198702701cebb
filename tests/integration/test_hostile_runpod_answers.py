"""No single answer from RunPod destroys anything, through both simulators over real HTTP:
a list that repeats its entries, a list that swaps or drops our tags, entries whose ids
would leave their URL path segment, an answer trickled past the tick's deadline, one
larger than the cap. The simulator's faults (`sim.faults`) send each as it would look
on the wire; a read by id tells the truth."""

from __future__ import annotations

import re
import tracemalloc
from collections import Counter
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from reconciler.adapters.runpod import errors
from reconciler.cli.commands import main
from reconciler.core.contract import GANG_ENV, OWNER_ENV, POD_UID_ENV
from reconciler.demo.sandbox import Sandbox


def _running(box: Sandbox, *names: str) -> None:
    for name in names:
        box.add_pod(name)
    box.tick()
    box.advance(30)
    box.tick()
    for name in names:
        assert (box.pod(name) or {})["status"]["phase"] == "Running", name


def _phase(box: Sandbox, name: str) -> str:
    return str((box.pod(name) or {}).get("status", {}).get("phase"))


def _deletes(box: Sandbox) -> list[str]:
    return [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]


def _gets_by_id(box: Sandbox) -> list[str]:
    return [
        r.path
        for r in box.runpod_sim.requests
        if r.method == "GET" and r.path.startswith("/v2/pods/") and not r.path.endswith("/logs")
    ]


def test_a_list_that_repeats_its_entries_is_read_once_per_id(box: Sandbox) -> None:
    _running(box, "a", "b")
    box.runpod_sim.faults.repeat_entries("/v2/pods", times=3, count=2)
    box.tick()
    box.advance(60)
    box.tick()
    assert _deletes(box) == []
    assert _phase(box, "a") == "Running" and _phase(box, "b") == "Running"
    assert len(box.owned_instances()) == 2


def test_a_volume_list_that_repeats_its_entries_is_read_once_per_id(box: Sandbox) -> None:
    made = box.runpod_sim.add_volume("data", 20, "US-TX-3")
    box.runpod_sim.faults.repeat_entries("/v2/network-volumes", times=2)
    listed = box.runpod.volumes.list()
    assert [v.id for v in listed] == [made.id]


def test_one_list_with_the_owner_tag_swapped_fails_and_terminates_nothing(box: Sandbox) -> None:
    _running(box, "a", "b")
    before = len(box.runpod_sim.requests)
    box.runpod_sim.faults.list_env({OWNER_ENV: "someone-else/virtual-runpod"})
    box.tick()
    assert _phase(box, "a") == "Running" and _phase(box, "b") == "Running"
    # Each instance the list showed with another owner was read by id, once.
    asked = [
        r.path
        for r in box.runpod_sim.requests[before:]
        if r.method == "GET" and r.path.startswith("/v2/pods/")
    ]
    assert len(asked) == 2
    box.advance(60)
    box.tick()  # the list is right again
    box.tick()
    assert _deletes(box) == []
    assert _phase(box, "a") == "Running" and _phase(box, "b") == "Running"
    assert len(box.owned_instances()) == 2


@pytest.mark.parametrize("status", ["ERROR", "TERMINATED"])
def test_one_list_showing_a_terminal_status_fails_and_terminates_nothing(
    box: Sandbox, status: str
) -> None:
    _running(box, "a", "b")
    box.runpod_sim.faults.list_fields({"status": status})
    box.tick()
    box.advance(60)
    box.tick()
    box.tick()
    assert _deletes(box) == []
    assert _phase(box, "a") == "Running" and _phase(box, "b") == "Running"


def test_an_owner_tag_changed_in_the_record_too_is_foreign_and_left_alone(box: Sandbox) -> None:
    _running(box, "a", "b")
    instance = box.instance_for(box.pod("a") or {})
    assert instance is not None
    env = {**instance["env"], OWNER_ENV: "someone-else/virtual-runpod"}
    box.runpod_sim.set_instance_fields(instance["id"], {"env": env})
    for _ in range(3):
        box.tick()
        box.advance(120)
    assert f"/v2/pods/{instance['id']}" not in _deletes(box)
    assert instance["id"] in box.runpod_sim.instances
    assert _phase(box, "b") == "Running"
    status = (box.pod("a") or {})["status"]
    assert status["reason"] == "InstanceLost" and "another owner" in status["message"], status


def test_a_steady_tick_reads_nothing_by_id(box: Sandbox) -> None:
    _running(box, "a", "b")
    before = len(_gets_by_id(box))
    box.tick()
    box.tick()
    assert len(_gets_by_id(box)) == before


@pytest.mark.parametrize(
    "shown",
    [{GANG_ENV: None}, {OWNER_ENV: "someone-else/virtual-runpod"}],
    ids=["gang-tag-missing", "owner-tag-swapped"],
)
def test_a_gang_tag_missing_from_one_list_deletes_no_cluster(
    box: Sandbox, shown: dict[str, str | None]
) -> None:
    box.add_indexed_job("train", 2)
    for _ in range(3):
        box.tick()
        box.advance(30)
    pods = box.job_pods("train")
    assert pods and all(p["status"]["phase"] == "Running" for p in pods), pods
    box.runpod_sim.faults.list_env(shown)
    box.tick()
    box.advance(120)
    box.tick()
    box.advance(120)
    box.tick()
    deleted = [r.path for r in box.runpod_sim.requests if r.method == "DELETE"]
    assert not any(p.startswith("/v2/clusters/") for p in deleted), deleted
    assert all(p["status"]["phase"] == "Running" for p in box.job_pods("train"))


def test_ids_that_would_leave_their_path_segment_never_reach_a_url(box: Sandbox) -> None:
    _running(box, "a")
    real = box.instance_for(box.pod("a") or {})
    assert real is not None
    # Ours by their tags, their pod long gone: orphans the reconciler would terminate.
    env = {**real["env"], POD_UID_ENV: "a-pod-long-gone"}
    odd = [{**real, "id": odd_id, "env": env} for odd_id in (".", "..", "a/b", "%2e")]
    box.runpod_sim.faults.extra_entries(odd, count=10)
    for _ in range(4):
        box.tick()
        box.advance(120)
    route = re.compile(r"/v2/[a-z-]+(/[A-Za-z0-9_-]+(/[a-z]+)?)?")
    sent = [f"{r.method} {r.path}" for r in box.runpod_sim.requests]
    assert [s for s in sent if not route.fullmatch(s.split(" ")[1])] == []
    assert [r.path for r in box.runpod_sim.requests if r.method == "DELETE"] == []
    assert _phase(box, "a") == "Running"


def test_a_create_answered_with_an_odd_id_is_in_doubt_and_adopted(box: Sandbox) -> None:
    box.runpod_sim.faults.create_answers({"id": ".."})
    box.add_pod("a")
    report = box.tick()
    assert report.observed
    box.advance(31)  # the create grace: the instance it made is adopted by its tags
    box.tick()
    box.tick()
    assert _phase(box, "a") == "Running"
    assert len(box.owned_instances()) == 1
    assert [r for r in box.runpod_sim.requests if ".." in r.path] == []


def test_the_adapter_refuses_an_id_not_of_runpods_form(box: Sandbox) -> None:
    before = len(box.runpod_sim.requests)
    for odd_id in (".", "..", "a/b", "", "x" * 65, "é"):
        with pytest.raises(errors.RunPodError, match="is not a RunPod id"):
            box.runpod.instances.delete(odd_id)
        with pytest.raises(errors.RunPodError, match="is not a RunPod id"):
            box.runpod.volumes.get(odd_id)
    assert len(box.runpod_sim.requests) == before


def test_a_list_trickled_past_the_deadline_is_given_up_at_the_deadline(box: Sandbox) -> None:
    _running(box, "a")
    deadline = box.settings.timing.tick_deadline
    box.runpod_sim.faults.trickle("/v2/pods", seconds_per_byte=2.0)
    started = box.clock.monotonic()
    report = box.tick()
    assert not report.observed
    assert any("deadline" in error for error in report.errors), report.errors
    # It was given up within a byte of the deadline, not read to its end.
    wire = box.runpod_sim.faults.wires_sent[-1]
    assert wire.sent <= deadline / 2.0 + 2, wire.sent
    assert box.clock.monotonic() - started <= deadline + 4
    box.tick()
    assert _phase(box, "a") == "Running"


def test_a_log_read_trickled_past_the_deadline_is_given_up_at_the_deadline(
    box: Sandbox,
) -> None:
    box.add_pod("job", command=["python", "train.py"], restart_policy="Never")
    box.tick()
    box.advance(30)
    box.tick()
    instance = box.instance_for(box.pod("job") or {})
    assert instance is not None
    box.runpod_sim.exit_process(instance["id"], 0)
    box.runpod_sim.faults.trickle(f"/v2/pods/{instance['id']}/logs", seconds_per_byte=2.0)
    started = box.clock.monotonic()
    box.tick()
    assert box.clock.monotonic() - started <= box.settings.timing.tick_deadline + 4
    assert _phase(box, "job") == "Running"  # its exit code not read yet: nothing decided
    box.tick()
    assert _phase(box, "job") == "Succeeded"


def test_an_answer_above_the_cap_is_refused_without_holding_it(box: Sandbox) -> None:
    _running(box, "a")
    box.configure(runpod_max_answer_mib=1)
    box.restart()
    for chunked in (False, True):
        box.runpod_sim.faults.pad(8 * 1024 * 1024, "/v2/pods", chunked=chunked)
        tracemalloc.start()
        report = box.tick()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert not report.observed
        assert any("runpod-max-answer-mib" in error for error in report.errors), report.errors
        assert peak < 4 * 1024 * 1024, peak
    box.tick()
    assert _phase(box, "a") == "Running"
    assert Counter(r.method for r in box.runpod_sim.requests).get("DELETE") is None


FORGED = "A100\x1b[2J\x07\nrunpod.io/forged: yes\u202e"


def _texts(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def _raw(text: str) -> bool:
    return any(c in text for c in ("\x1b", "\x07", "\n", "\u202e"))


def test_runpods_text_is_escaped_where_it_is_shown(box: Sandbox) -> None:
    _running(box, "a")
    instance = box.instance_for(box.pod("a") or {})
    assert instance is not None
    forged = {"gpu": {**instance["gpu"], "id": FORGED}, "dataCenterId": FORGED, "name": FORGED}
    box.runpod_sim.set_instance_fields(instance["id"], forged)
    box.tick()
    annotations = (box.pod("a") or {})["metadata"]["annotations"]
    for key in ("runpod.io/gpu-type", "runpod.io/datacenter"):
        assert not _raw(annotations[key]) and "\\x1b[2J" in annotations[key], annotations
    shown = CliRunner().invoke(main, ["--database-url", box.database_url, "state", "show"])
    assert shown.exit_code == 0 and not _raw(shown.output.replace("\n", "")), shown.output


def test_runpods_error_text_is_escaped_on_the_pod(box: Sandbox) -> None:
    box.runpod_sim.faults.inject("POST", "/v2/pods", 418, count=20, detail=FORGED)
    box.runpod_sim.faults.inject("POST", "/v2/pods", 422, count=20, detail=FORGED)
    box.add_pod("waits")
    box.tick()
    box.runpod_sim.faults.reset()
    box.runpod_sim.faults.inject("POST", "/v2/pods", 422, count=20, detail=FORGED)
    box.add_pod("fails")
    box.tick()
    box.tick()
    for name in ("waits", "fails"):
        status = (box.pod(name) or {}).get("status") or {}
        told = list(_texts(status))
        assert any("\\x1b[2J" in text for text in told), status  # told, escaped
        assert not any(_raw(text) for text in told), status
        for event in box.events(name):
            assert not _raw(event["message"]), event
