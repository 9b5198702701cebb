"""Container choice (default-container annotation, sidecars), `$(VAR)` expansion with the
kubelet's rules, the v2 args string, and the batch wrapper, executed for real with
/bin/sh and fake curl / wget / sleep programs on PATH."""

from __future__ import annotations

import http.server
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.contract import exit_code_marker, exit_nonce
from reconciler.core.reasons import PodReason
from reconciler.core.translate.container import (
    choose_container,
    instance_args,
    start_command,
    wrap_for_batch,
)
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.expansion import expand

from ...conftest import build_pod

SIDECAR = {"name": "istio-proxy", "image": "istio/proxyv2"}
WORKER = {"name": "worker", "image": "acme/worker"}
OTHER = {"name": "other", "image": "acme/other"}


def test_single_container_is_chosen() -> None:
    assert choose_container(build_pod(containers=[WORKER])) is not None
    assert choose_container(build_pod(containers=[WORKER]))["name"] == "worker"


def test_first_non_sidecar_is_chosen() -> None:
    assert choose_container(build_pod(containers=[SIDECAR, WORKER, OTHER]))["name"] == "worker"


def test_default_container_annotation_wins() -> None:
    pod = build_pod(
        containers=[WORKER, OTHER],
        annotations={"kubectl.kubernetes.io/default-container": "other"},
    )
    assert choose_container(pod)["name"] == "other"


def test_default_container_naming_nothing_is_a_fixable_error() -> None:
    pod = build_pod(
        containers=[WORKER], annotations={"kubectl.kubernetes.io/default-container": "ghost"}
    )
    with pytest.raises(TranslationError) as caught:
        choose_container(pod)
    assert caught.value.reason == PodReason.INVALID_ANNOTATION
    assert not caught.value.permanent
    assert '"ghost"' in caught.value.message


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(MODEL)", "llama"),
        ("--model=$(MODEL) --out=$(OUT)", "--model=llama --out=/data"),
        ("$$(MODEL)", "$(MODEL)"),
        ("$$$(MODEL)", "$llama"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$(MODEL", "$(MODEL"),
        ("$MODEL ${MODEL} $", "$MODEL ${MODEL} $"),
        ("$$", "$"),
        ("$()", "$()"),
    ],
)
def test_expansion_follows_the_kubelet(text: str, expanded: str) -> None:
    assert expand(text, {"MODEL": "llama", "OUT": "/data"}) == expanded


@given(st.text(alphabet=st.characters(blacklist_characters="$")))
def test_text_without_references_is_unchanged(text: str) -> None:
    assert expand(text, {"A": "b"}) == text


def test_start_command_joins_command_and_args_shell_quoted() -> None:
    container = {"command": ["python", "train.py"], "args": ["--name", "$(RUN) x", "it's"]}
    command = start_command(container, {"RUN": "r1"})
    assert command is not None
    assert shlex.split(command) == ["python", "train.py", "--name", "r1 x", "it's"]


def test_no_command_leaves_the_image_default() -> None:
    assert instance_args(build_pod(), build_pod()["spec"]["containers"][0], {}) is None


def test_batch_pod_without_command_is_rejected_permanently() -> None:
    pod = build_pod(restart_policy="Never")
    with pytest.raises(TranslationError) as caught:
        instance_args(pod, pod["spec"]["containers"][0], {})
    assert caught.value.reason == PodReason.BATCH_COMMAND_REQUIRED
    assert caught.value.permanent


def test_batch_pod_command_is_wrapped() -> None:
    pod = build_pod(restart_policy="OnFailure", command=["python", "train.py"])
    args = instance_args(pod, pod["spec"]["containers"][0], {})
    assert args == wrap_for_batch("python train.py", exit_nonce(pod["metadata"]["uid"]))
    assert args is not None and shlex.split(args)[:2] == ["sh", "-c"]


# --- the wrapper, executed ---------------------------------------------------------

# Each fake records its arguments, then plays RunPod stopping the instance: it kills
# the wrapper (its parent), which is what a successful stop does to the container.
NONCE = "0123456789abcdef0123"
MARKER = exit_code_marker(NONCE)

FAKE = """#!/bin/sh
printf '%s\\n' "$@" > "{record}"
kill -TERM $PPID
"""


def _fake(bin_dir: Path, name: str, record: Path) -> None:
    program = bin_dir / name
    program.write_text(FAKE.format(record=record))
    program.chmod(0o755)


def _run(
    wrapped: str, path: str, api_url: str = "http://runpod.test"
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": path,
        "RUNPOD_POD_ID": "pod123",
        "RUNPOD_API_KEY": "key456",
        "RUNPOD_API_URL": api_url,
    }
    argv = shlex.split(wrapped)
    assert argv[0] == "sh"
    return subprocess.run(
        ["/bin/sh", *argv[1:]], env=env, capture_output=True, text=True, timeout=10
    )


def test_wrapper_reports_exit_code_and_stops_with_curl(tmp_path: Path) -> None:
    record = tmp_path / "curl.args"
    _fake(tmp_path, "curl", record)
    command = shlex.join(["sh", "-c", "echo working; exit 3"])
    result = _run(wrap_for_batch(command, NONCE), f"{tmp_path}:{os.environ['PATH']}")
    assert result.stdout.splitlines() == ["working", f"{MARKER}3"]
    args = record.read_text().splitlines()
    assert args[args.index("-X") + 1] == "POST"
    assert "Authorization: Bearer key456" in args
    assert json.loads(args[args.index("-d") + 1]) == {"action": "stop"}
    assert args[-1] == "http://runpod.test/v2/pods/pod123/action"


def test_wrapper_runs_argv_not_shell_syntax(tmp_path: Path) -> None:
    _fake(tmp_path, "curl", tmp_path / "curl.args")
    result = _run(wrap_for_batch("exit 3", NONCE), f"{tmp_path}:{os.environ['PATH']}")
    # "exit" is no program: the exec fails (127) and the wrapper still reports and stops.
    assert result.stdout.splitlines() == [f"{MARKER}127"]


def test_wrapper_runs_the_quoted_command_verbatim(tmp_path: Path) -> None:
    _fake(tmp_path, "curl", tmp_path / "curl.args")
    command = shlex.join(["printf", "%s|", "a b", "$(NOT_EXPANDED)", "it's"])
    result = _run(wrap_for_batch(command, NONCE), f"{tmp_path}:{os.environ['PATH']}")
    assert result.stdout.splitlines() == ["a b|$(NOT_EXPANDED)|it's|" + MARKER + "0"]


def _bin_with(tmp_path: Path, *tools: str) -> Path:
    """A PATH directory holding only the named system tools (so no curl)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def test_wrapper_falls_back_to_wget(tmp_path: Path) -> None:
    bin_dir = _bin_with(tmp_path, "true")
    record = tmp_path / "wget.args"
    _fake(bin_dir, "wget", record)
    result = _run(wrap_for_batch("true", NONCE), str(bin_dir))
    assert result.stdout.splitlines() == [f"{MARKER}0"]
    args = record.read_text().splitlines()
    assert '--post-data={"action":"stop"}' in args
    assert "--header=Authorization: Bearer key456" in args


def test_wrapper_without_any_client_says_so_and_waits(tmp_path: Path) -> None:
    bin_dir = _bin_with(tmp_path, "false")
    record = tmp_path / "sleep.args"
    _fake(bin_dir, "sleep", record)  # stands in for the wait, and ends it
    result = _run(wrap_for_batch("false", NONCE), str(bin_dir))
    assert result.stdout.splitlines() == [f"{MARKER}1"]
    assert "no curl, wget or python3" in result.stderr
    assert record.read_text().split() == ["60"]


def test_a_members_wrapper_never_calls_stop_and_prints_its_marker_again(tmp_path: Path) -> None:
    """A cluster member cannot be stopped: its wrapper waits (no stop call to be refused
    with 409), printing the marker again after each wait so it stays the last line."""
    bin_dir = _bin_with(tmp_path, "sh", "wc")
    _fake(bin_dir, "curl", tmp_path / "curl.args")
    sleeps = tmp_path / "sleep.args"
    (bin_dir / "sleep").write_text(
        f'#!/bin/sh\necho "$@" >> "{sleeps}"\n'
        f'[ "$(wc -l < "{sleeps}")" -ge 2 ] && kill -TERM $PPID\nexit 0\n'
    )
    (bin_dir / "sleep").chmod(0o755)
    command = shlex.join(["sh", "-c", "echo working; echo late; exit 2"])
    result = _run(wrap_for_batch(command, NONCE, member=True), str(bin_dir))
    assert result.stdout.splitlines() == ["working", "late", f"{MARKER}2", f"{MARKER}2"]
    assert not (tmp_path / "curl.args").exists()
    assert sleeps.read_text().split() == ["60", "60"]


def test_wrapper_falls_back_to_python3(tmp_path: Path) -> None:
    received: list[tuple[str, str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Authorization"], body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    server.timeout = 10  # handle_request gives up then, so a missed call cannot hang the run
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # The interpreter itself, not a launcher such as a pyenv shim: a shim needs its own
    # environment (PYENV_ROOT, HOME), which the wrapper's bare PATH does not give it.
    (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    _fake(bin_dir, "sleep", tmp_path / "sleep.args")
    env_url = f"http://127.0.0.1:{server.server_address[1]}"
    result = _run(wrap_for_batch("python3 -c 'raise SystemExit(4)'", NONCE), str(bin_dir), env_url)
    thread.join(timeout=10)
    server.server_close()
    assert result.stdout.splitlines() == [f"{MARKER}4"]
    assert received == [("/v2/pods/pod123/action", "Bearer key456", b'{"action":"stop"}')]
