"""The built image does what the manifests count on: it answers --version, runs the demo
as its own non-root user (the uid the manifests run as), runs `sync --once` hardened as
the Deployment runs it (read-only root filesystem, the database on the declared volume)
against the simulators on this host and creates the instance, keeps the database across
containers on one volume (a second container's `state show` reads it, its `sync --once`
creates nothing twice), and its shipped migrations upgrade an old database."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.store import db, migrate
from reconciler.demo.sandbox import API_KEY, Sandbox
from tests.deploy.test_manifests import image_uid

from .engine import DATA, HARDENED, ROOT, Image, distributions_only_for_tests, normalized

pytestmark = pytest.mark.image


def test_version_is_the_projects(image: Image) -> None:
    done = image.run("--version")
    assert done.returncode == 0, done.stderr
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.stdout.strip() == f"reconciler, version {version}"


# Run in the image: every module of the reconciler imports (it prints those that need a
# module it lacks), every compiled extension of the libraries loads, a library's code
# names where it is (its tracebacks say which file), the data files read through
# importlib.resources are there, and a self-signed serving certificate is made
# (cryptography's compiled core at work). The image ships the libraries as bytecode
# without source, stripped of their tests and of their extensions' symbol tables: this
# is what would break first.
IMPORT_EVERYTHING = """
import importlib, json, pathlib, pkgutil, sysconfig
import certifi, kubernetes.client, psycopg, reconciler
from importlib import resources
from reconciler.runtime.kubelet import tls

missing = {}
# Not imported: __main__ runs the CLI, the migrations run only under Alembic.
for module in pkgutil.walk_packages(reconciler.__path__, "reconciler."):
    if not module.name.startswith(("reconciler.__main__", "reconciler.migrations.")):
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as error:
            missing[module.name] = error.name
site = pathlib.Path(sysconfig.get_path("purelib"))
# Named as CPython names its extension modules; other shared libraries (a wheel's vendored
# ones, those loaded with ctypes) are loaded by the modules that use them.
for path in [*site.rglob("*.cpython-*.so"), *site.rglob("*.abi3.so")]:
    parts = path.relative_to(site).parts
    importlib.import_module(".".join((*parts[:-1], path.name.split(".")[0])))
code = kubernetes.client.ApiClient.__init__.__code__
assert code.co_filename == str(site / "kubernetes/client/api_client.py"), code.co_filename
assert pathlib.Path(certifi.where()).is_file()
assert (resources.files("reconciler.migrations") / "script.py.mako").is_file()
assert psycopg.pq.__impl__ == "binary"
tls.server_context(*tls.self_signed("virtual-runpod", "127.0.0.1"), None)
print(json.dumps(missing))
"""


def test_every_module_and_compiled_extension_loads_in_the_image(image: Image) -> None:
    done = image.run("-c", IMPORT_EVERYTHING, entrypoint="python3")
    assert done.returncode == 0, done.stderr[-3000:]
    missing: dict[str, str] = json.loads(done.stdout)
    # Only the simulators' test-only parts may need what the image leaves out (the RunPod
    # simulator's sshd, the Kubernetes simulator's WebSocket side of exec): the demo
    # imports them only when a test asks for SSH or a WebSocket.
    assert {normalized(name.split(".")[0]) for name in missing.values()} <= (
        distributions_only_for_tests()
    ), missing
    assert all(name.startswith("reconciler.sim.") for name in missing), missing


def test_the_images_user_is_the_manifests_and_not_root(image: Image) -> None:
    assert image.inspect()["Config"]["User"] == str(image_uid())  # type: ignore[index]
    done = image.run("-c", "import os; print(os.getuid(), os.getgid())", entrypoint="python3")
    assert done.returncode == 0, done.stderr
    uid, gid = map(int, done.stdout.split())
    assert uid == image_uid() and uid != 0 and gid != 0


def test_the_demo_runs_as_the_images_user(image: Image) -> None:
    done = image.run("demo")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert API_KEY not in done.stdout + done.stderr


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        yield sandbox


def reconciler_in_container(
    image: Image, volume: str, config: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """The reconciler hardened on `volume`, reaching the simulators on this host's loopback
    (the container shares the host's network)."""
    options = [*HARDENED, "--network", "host", "--volume", f"{volume}:{DATA}"]
    options += ["--volume", f"{config}:/config:ro", "--env", f"RUNPOD_API_KEY={API_KEY}"]
    done = image.run(*args, options=options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert API_KEY not in done.stdout + done.stderr
    return done


def sync_once(image: Image, box: Sandbox, volume: str, config: Path) -> None:
    url = box.runpod_sim.base_url
    args = ["sync", "--once", "--kubeconfig", "/config/kubeconfig", "--runpod-url", url]
    reconciler_in_container(image, volume, config, *args)


@pytest.fixture
def config(box: Sandbox, tmp_path: Path) -> Path:
    """The sandbox's kubeconfig where the image's user may read it."""
    directory = tmp_path / "config"
    directory.mkdir(mode=0o755)
    shutil.copy(box.kubeconfig, directory / "kubeconfig")
    (directory / "kubeconfig").chmod(0o644)
    tmp_path.chmod(0o755)
    return directory


def test_sync_once_read_only_creates_the_instance_and_keeps_state_on_the_volume(
    image: Image, box: Sandbox, volume: str, config: Path
) -> None:
    box.add_pod("train")
    sync_once(image, box, volume, config)
    (instance,) = box.owned_instances()

    shown = reconciler_in_container(image, volume, config, "state", "show", "-o", "json")
    (row,) = json.loads(shown.stdout)
    assert (row["namespace"], row["name"], row["instance_id"]) == (
        "default",
        "train",
        instance["id"],
    )

    sync_once(image, box, volume, config)  # a restart, in a new container
    assert box.owned_instances() == [instance]


def test_the_images_migrations_upgrade_an_old_database(image: Image, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    url = f"sqlite:///{data / 'reconciler.db'}"
    migrate.upgrade(db.make_engine(url), "0001_initial")
    with sqlite3.connect(data / "reconciler.db") as connection:
        connection.execute(
            "INSERT INTO mappings (pod_uid, namespace, name, state, orphan_sightings, "
            "created_at, updated_at) VALUES ('uid-1', 'ml', 'train', 'pending', 0, "
            "'2026-11-21 00:00:00', '2026-11-21 00:00:00')"
        )
    # The image's user owns nothing of this host: it may write here all the same.
    for path in (tmp_path, data, *data.iterdir()):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    options = [*HARDENED, "--volume", f"{data}:{DATA}"]

    upgraded = image.run("db", "upgrade", options=options)
    assert upgraded.returncode == 0, upgraded.stderr
    assert migrate.current_revision(db.make_engine(url)) == migrate.head_revision()
    shown = image.run("state", "show", "-o", "json", options=options)
    assert shown.returncode == 0, shown.stderr
    assert [(r["namespace"], r["name"]) for r in json.loads(shown.stdout)] == [("ml", "train")]
