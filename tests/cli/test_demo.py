"""`reconciler demo` runs the whole scenario and ends in the state it promises."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from reconciler.app import main
from reconciler.demo.run import run_demo


def test_demo_ends_with_no_duplicate_and_no_leak() -> None:
    result = CliRunner().invoke(main, ["demo", "--output", "json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["duplicates"] == 0 and summary["leaked"] == []
    assert summary["pods"] == {"ml/finetune-0": "Succeeded", "ml/huge": "Failed",
                               "ml/notebook": "Running", "ml/serve": "Running",
                               "ml/train": "Succeeded"}
    assert summary["in_doubt"] == 1 and summary["created"] == 4
    assert summary["terminated"] == 4


def test_demo_narrates_every_step() -> None:
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0
    for line in ("OffloadedToRunPod", "CreatedInstance", "UnsatisfiableGPURequest", "Completed",
                 "TerminatingInstance", "TerminatedOrphan", "AdoptedInstance",
                 "duplicates:          0", "leaked instances:    0"):
        assert line in result.output


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kept_running_demo_answers_kubectl_logs() -> None:
    """The hint's `kubectl logs` works: the finished train pod's log was kept."""
    printed: list[str] = []
    answers: list[subprocess.CompletedProcess[str]] = []

    def try_the_hint() -> None:
        line = next(line for line in printed if "logs -n ml train" in line)
        command = shlex.split(line.split("(")[0])
        answers.append(subprocess.run(command, capture_output=True, text=True, timeout=60))

    run_demo(printed.append, keep_running=True, wait=try_the_hint)
    (answer,) = answers
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.endswith("epoch 3/3 loss 0.31\nsaved the model to /workspace/model.pt\n")
