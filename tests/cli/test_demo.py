"""`reconciler demo` runs the whole scenario and ends in the state it promises, with
summary counts that agree with each other and with the narration."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from reconciler.app import main


def test_demo_ends_with_no_duplicate_and_no_leak() -> None:
    result = CliRunner().invoke(main, ["demo", "--output", "json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["duplicates"] == 0 and summary["leaked"] == []
    # The Job controller named the Job's pod (generateName `finetune-`).
    [finetune] = [name for name in summary["pods"] if name.startswith("ml/finetune-")]
    assert re.fullmatch(r"ml/finetune-[a-z0-9]{5}", finetune)
    assert summary["pods"] == {
        finetune: "Succeeded",
        "ml/huge": "Failed",
        "ml/notebook": "Running",
        "ml/serve": "Running",
        "ml/train": "Succeeded",
    }
    assert summary["in_doubt"] == 1 and summary["created"] == 5
    assert summary["terminated"] == 4 and summary["running"] == 2
    # The counts agree: every instance that existed is terminated or still running.
    assert summary["created"] + summary["planted"] == summary["terminated"] + summary["running"]


def test_the_narration_and_the_summary_count_the_same_instances() -> None:
    output = CliRunner().invoke(main, ["demo"]).output
    made = output.count("CreatedInstance") + output.count("AdoptedInstance")
    assert f"instances created:   {made} " in output


def test_demo_narrates_every_step() -> None:
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0
    for line in (
        "OffloadedToRunPod",
        "CreatedInstance",
        "UnsatisfiableGPURequest",
        "Completed",
        "TerminatingInstance",
        "TerminatedOrphan",
        "AdoptedInstance",
        "duplicates:          0",
        "leaked instances:    0",
    ):
        assert line in result.output


def test_the_story_reads_in_the_order_things_happened() -> None:
    """RunPod's own lines about an instance are read after what followed them (a batch
    pod's come with its exit code), yet each pod's lines are told in the order they
    happened: the image pull before the stop, the stop before Completed."""
    output = CliRunner().invoke(main, ["demo"]).output
    told: dict[str, list[tuple[str, str]]] = {}
    for line in output.splitlines():
        match = re.match(r"\[t\+(\d\d:\d\d)\]  (ml/\S+)\s+([A-Z]\w+)\s", line)
        if match:
            stamp, pod, reason = match.groups()
            told.setdefault(pod, []).append((stamp, reason))
    for pod, events in told.items():
        assert [stamp for stamp, _ in events] == sorted(stamp for stamp, _ in events), pod
    train = [reason for _, reason in told["ml/train"]]
    assert train.index("RunPodSystem") < train.index("Completed")
    # Every instance the demo starts shows its image pull while it boots.
    assert all("RunPodSystem" in [r for _, r in told[p]] for p in ("ml/notebook", "ml/scratch"))


def test_the_story_has_no_advice_meant_for_a_cronjob() -> None:
    """Simulated time passes with the node's heartbeat going on, as in a deployed
    reconciler: no warning to raise `--stay`, which means nothing in the demo."""
    result = CliRunner().invoke(main, ["demo"])
    assert "--stay" not in result.output
    assert "heartbeat" not in result.output


def test_the_timeline_runs_forwards_and_no_warning_is_a_false_alarm() -> None:
    """A line RunPod logged earlier and the reconciler read later is told when it was
    read, with its own time beside it; the scripted HTTP 500 is told as the scripted
    fault it is, not as a WARNING."""
    output = CliRunner().invoke(main, ["demo"]).output
    stamps = re.findall(r"^\[t\+(\d\d:\d\d)\]", output, re.M)
    assert stamps == sorted(stamps)
    assert "(at [t+00:05])" in output  # the train pod's image pull, read at its exit
    assert "WARNING" not in output
    assert "(scripted fault) the reconciler logs: Create for ml/serve failed" in output


def test_the_orphans_row_says_it_has_no_pod() -> None:
    output = CliRunner().invoke(main, ["demo"]).output
    assert re.search(r"^\(no pod\)\s+ml-forgotten\s+terminated", output, re.M), output
