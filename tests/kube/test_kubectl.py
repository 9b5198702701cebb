"""The simulator is faithful enough for the real kubectl (over TLS, since kubectl sends
its token only there), and runs as a process: `python -m reconciler.sim.kube` prints
its URL first, writes a kubeconfig the official client can use, keeps a clock that starts
at the real time, and stops on SIGTERM."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.adapters.kube.client import KubeClient
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.simulator import KubeSimulator

POD_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: from-kubectl
  labels: {app: demo}
spec:
  containers:
    - name: main
      image: nginx:1.27
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_create_and_delete(tmp_path: Path, clock: SimClock) -> None:
    with KubeSimulator(clock=clock, tls=True) as sim:
        kubeconfig = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
        manifest = tmp_path / "pod.yaml"
        manifest.write_text(POD_MANIFEST)
        sim.create_pod(
            {
                "metadata": {"name": "existing", "namespace": "kube-public"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            }
        )

        def kubectl(*args: str) -> str:
            done = subprocess.run(
                ["kubectl", "--kubeconfig", kubeconfig, *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        listing = kubectl("get", "pods", "-A")
        assert "kube-public" in listing and "existing" in listing and "Pending" in listing
        assert kubectl("create", "-f", str(manifest)).strip() == "pod/from-kubectl created"
        pod = json.loads(kubectl("get", "pod", "from-kubectl", "-o", "json"))
        assert pod["metadata"]["labels"] == {"app": "demo"}
        assert pod["spec"]["containers"][0]["image"] == "nginx:1.27"
        assert pod["status"]["phase"] == "Pending"
        assert 'pod "from-kubectl" deleted' in kubectl("delete", "pod", "from-kubectl")
        assert sim.get("pods", "default", "from-kubectl") is None


def test_process_mode_serves_until_terminated(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler.sim.kube",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--token",
            "t0ken",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")

        kube = KubeClient.from_config(str(kubeconfig))
        assert kube.cluster.uid()
        # Run on its own, its clock starts at the real time, not at the tests' fixed start.
        kube_system = kube.transport.request("GET", "/api/v1/namespaces/kube-system")
        created = datetime.fromisoformat(kube_system["metadata"]["creationTimestamp"])
        assert abs((created - datetime.now(UTC)).total_seconds()) < 60
        assert kube.pods.list_on_node("virtual-runpod") == []
        kube.close()
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
