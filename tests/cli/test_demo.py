"""`reconciler demo` runs the whole scenario and ends in the state it promises, with
summary counts that agree with each other and with the narration."""

from __future__ import annotations

import json

from click.testing import CliRunner

from reconciler.app import main


def test_demo_ends_with_no_duplicate_and_no_leak() -> None:
    result = CliRunner().invoke(main, ["demo", "--output", "json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["duplicates"] == 0 and summary["leaked"] == []
    assert summary["pods"] == {
        "ml/finetune-0": "Succeeded",
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
