"""Kubeconfig handling like kubectl's: several files in KUBECONFIG (or --kubeconfig)
merged with the first file winning, names defined in one file usable from another,
--context choosing a context, relative certificate paths resolved against their file,
and one clear error for a missing or broken kubeconfig. Checked against the real kubectl
where it has an opinion, and over HTTPS against the simulator."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import KubeError
from reconciler.cli.commands import main
from reconciler.demo.sandbox import API_KEY, Sandbox
from reconciler.sim.clock import SimClock
from reconciler.sim.kube.simulator import KubeSimulator


def write(path: Path, document: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(document))
    return str(path)


@pytest.fixture
def tls_sim(clock: SimClock) -> Any:
    with KubeSimulator("right-token", clock=clock, tls=True) as simulator:
        yield simulator


@pytest.fixture
def two_files(tmp_path: Path, tls_sim: KubeSimulator) -> tuple[str, str]:
    """`good` holds the cluster, a working user and current-context good; `other` holds
    a user with a wrong token, context `bad` (its current-context) and context `good2`,
    which uses the cluster and user of the first file. The CA is a relative path."""
    assert tls_sim.ca_cert_path is not None
    shutil.copy(tls_sim.ca_cert_path, tmp_path / "ca.pem")
    good = write(
        tmp_path / "good.yaml",
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "good",
            "clusters": [
                {
                    "name": "sim",
                    "cluster": {"server": tls_sim.base_url, "certificate-authority": "ca.pem"},
                }
            ],
            "users": [{"name": "me", "user": {"token": "right-token"}}],
            "contexts": [{"name": "good", "context": {"cluster": "sim", "user": "me"}}],
        },
    )
    other = write(
        tmp_path / "other.yaml",
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "bad",
            "users": [
                {"name": "intruder", "user": {"token": "wrong-token"}},
                {"name": "me", "user": {"token": "also-wrong"}},
            ],
            "contexts": [
                {"name": "bad", "context": {"cluster": "sim", "user": "intruder"}},
                {"name": "good2", "context": {"cluster": "sim", "user": "me"}},
            ],
        },
    )
    return good, other


def uid_through(kubeconfig: str | None, context: str | None = None) -> str:
    client = KubeClient.from_config(kubeconfig, context)
    try:
        return client.cluster.uid()
    finally:
        client.close()


def test_the_first_file_wins_as_with_kubectl(
    two_files: tuple[str, str], tls_sim: KubeSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, other = two_files
    assert uid_through(f"{good}:{other}")
    with pytest.raises(KubeError):
        uid_through(f"{other}:{good}")  # now `bad` is the current context: refused
    # The same list in the environment; a file that does not exist is skipped.
    monkeypatch.setenv("KUBECONFIG", f"/no/such/file:{good}:{other}")
    assert uid_through(None)
    if shutil.which("kubectl"):
        done = subprocess.run(
            ["kubectl", "config", "current-context"], capture_output=True, text=True, timeout=30
        )
        assert done.stdout.strip() == "good"


def test_context_picks_another_context_across_files(two_files: tuple[str, str]) -> None:
    good, other = two_files
    # good2 is defined in the second file; its user `me` resolves to the first file's
    # entry, because the first definition of a name wins.
    assert uid_through(f"{good}:{other}", context="good2")
    with pytest.raises(KubeError):
        uid_through(f"{good}:{other}", context="bad")
    with pytest.raises(KubeError, match="nope"):
        uid_through(good, context="nope")


def test_relative_certificate_paths_resolve_against_their_file(
    two_files: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert uid_through(two_files[0])


def test_a_missing_or_broken_kubeconfig_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        KubeError,
        match=r"no kubeconfig file exists among: /no/such/a, "
        r"/no/such/b",
    ):
        uid_through("/no/such/a:/no/such/b")
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters:\n  - name: x\n   bad indent: [\n")
    with pytest.raises(KubeError, match=rf"kubeconfig {broken} is not valid YAML \(line \d+\)"):
        uid_through(str(broken))
    listed = tmp_path / "list.yaml"
    listed.write_text("- just\n- a list\n")
    with pytest.raises(KubeError, match="not a kubeconfig"):
        uid_through(str(listed))


def test_sync_takes_context_and_a_kubeconfig_list(tmp_path: Path) -> None:
    with Sandbox() as box:
        other = write(
            tmp_path / "other.yaml",
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "bad",
                "users": [{"name": "intruder", "user": {"token": "wrong"}}],
                "contexts": [{"name": "bad", "context": {"cluster": "sim", "user": "intruder"}}],
            },
        )
        box.add_pod("train")
        env = {"RUNPOD_API_KEY": API_KEY, "KUBECONFIG": f"{other}:{box.kubeconfig}"}
        base = [
            "--database-url",
            box.database_url,
            "sync",
            "--once",
            "--dry-run",
            "--runpod-url",
            box.runpod_sim.base_url,
        ]
        refused = CliRunner().invoke(main, base, env=env)
        assert refused.exit_code == 1  # the first file's current-context: a wrong token
        chosen = CliRunner().invoke(main, [*base, "--context", "sim"], env=env)
        assert chosen.exit_code == 0, chosen.output
        assert "Create" in chosen.stdout
