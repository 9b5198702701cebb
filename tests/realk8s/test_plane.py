"""`python -m tests.realk8s.plane`: a plane anyone can start, that the real kubectl uses,
and that SIGTERM stops whole (no process of it left behind)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.realk8s import build


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line
            )
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


def test_the_plane_command_gives_a_plane_kubectl_uses_and_sigterm_stops_it(tmp_path: Path) -> None:
    build.build()  # the command builds too; here its time is not the test's
    config = tmp_path / "k"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.realk8s.plane", "--kubeconfig-out", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        components = _children(process.pid)
        assert len(components) == 5
        listed = subprocess.run(
            ["kubectl", f"--kubeconfig={config}", "get", "namespaces", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "namespace/kube-system" in listed.stdout.split()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    for pid in components:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"{pid} outlived the plane"


def _zombie(pid: int) -> bool:
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
