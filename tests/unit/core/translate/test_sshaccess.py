"""SSH access as decided in the core: the create asks for startSsh, our key in
PUBLIC_KEY (a pod's own key kept) and 22/tcp (a template's ports left alone); where
22/tcp is published, read from RunPod's record of the instance (never a pod's
annotation), and which instances may be a pod's by their tags; an argv quoted so a
shell splits it back exactly."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.runpod.body import create_pod_body
from reconciler.core.config import Settings
from reconciler.core.contract import OWNER_ENV, POD_UID_ENV
from reconciler.core.domain import Instance, InstanceStatus, PortMapping, Runtime
from reconciler.core.translate.env import EnvSources
from reconciler.core.translate.request import create_requests
from reconciler.core.translate.ssh import (
    SshAddress,
    SshAddresses,
    remote_command,
    runs_for,
    ssh_address,
    ssh_env,
    ssh_ports,
)

from ...conftest import build_pod

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOurs runpod-reconciler"


def test_our_key_joins_the_pods_own():
    assert ssh_env({"A": "1"}, KEY) == {"A": "1", "PUBLIC_KEY": KEY}
    theirs = "ssh-rsa AAAAB3theirs me@laptop"
    assert ssh_env({"PUBLIC_KEY": theirs}, KEY)["PUBLIC_KEY"] == f"{theirs}\n{KEY}"
    assert ssh_env({"PUBLIC_KEY": KEY}, KEY)["PUBLIC_KEY"] == KEY


def test_22_is_published_once():
    assert ssh_ports(("8888/http",)) == ("8888/http", "22/tcp")
    assert ssh_ports(("22/tcp",)) == ("22/tcp",)


def _instance(env: dict[str, str], *ports: PortMapping) -> Instance:
    return Instance(
        "i1", "n", InstanceStatus.RUNNING, env=env, runtime=Runtime(uptime_seconds=5, ports=ports)
    )


SSH = PortMapping(22, "tcp", "203.0.113.7", 30022)
HTTP = PortMapping(8888, "http", None, None)


def test_where_sshd_is_published():
    assert ssh_address(_instance({}, HTTP, SSH)) == SshAddress("i1", "203.0.113.7", 30022)
    assert ssh_address(_instance({}, HTTP)) is None
    assert ssh_address(_instance({}, PortMapping(22, "tcp", None, None))) is None


def test_an_instance_tagged_for_another_pod_or_owner_is_not_this_pods():
    ours = {OWNER_ENV: "c/n", POD_UID_ENV: "uid-a"}
    assert runs_for(_instance(ours), "uid-a", "c/n")
    assert runs_for(_instance({}), "uid-a", "c/n")  # tags lost: the row's id decides
    assert not runs_for(_instance(ours), "uid-b", "c/n")
    assert not runs_for(_instance(ours), "uid-a", "other/n")
    assert runs_for(_instance(ours), "uid-a", None)


def test_the_address_book_keeps_running_instances_only():
    book = SshAddresses()
    stopped = Instance("i2", "n", InstanceStatus.EXITED, runtime=Runtime(5, (SSH,)))
    book.observe({"uid-a": [_instance({}, SSH)], "uid-b": [stopped]})
    assert book.of("uid-a") == SshAddress("i1", "203.0.113.7", 30022)
    assert book.of("uid-b") is None
    book.observe({})
    assert book.of("uid-a") is None


@given(st.lists(st.text(st.characters(exclude_characters="\x00")), min_size=1, max_size=6))
def test_the_remote_command_splits_back_into_the_argv(argv):
    assert shlex.split(remote_command(argv)) == argv


# A pod without a GPU would get a CPU instance, from the CPU catalog these tests lack.
ONE_GPU = {"limits": {"nvidia.com/gpu": "1"}}


def test_a_create_with_a_key_asks_for_ssh(catalog):
    settings = Settings.of(ssh_public_key=KEY)
    pod = build_pod(ports=[{"containerPort": 8888}], resources=ONE_GPU)
    request = create_requests(pod, None, _sources(), catalog, settings, "c/n")[0]
    body = create_pod_body(request)
    assert body["startSsh"] is True
    assert body["env"]["PUBLIC_KEY"] == KEY
    assert "22/tcp" in body["ports"]


def test_without_a_key_nothing_changes(catalog):
    pod = build_pod(resources=ONE_GPU)
    body = create_pod_body(create_requests(pod, None, _sources(), catalog, Settings(), "c/n")[0])
    assert "startSsh" not in body and "PUBLIC_KEY" not in body["env"]


def test_a_templates_ports_are_left_alone(catalog):
    pod = build_pod(annotations={"runpod.io/template-id": "tpl-1"}, resources=ONE_GPU)
    request = create_requests(
        pod, None, _sources(), catalog, Settings.of(ssh_public_key=KEY), "c/n"
    )
    assert request[0].start_ssh and not any("22/tcp" in r.ports for r in request)


def _sources() -> EnvSources:
    return EnvSources({}, {})


@given(
    st.lists(st.text(st.characters(exclude_characters="\x00")), min_size=1, max_size=6),
    st.text(st.characters(exclude_characters="\x00"), min_size=1),
)
def test_a_working_dir_comes_first_and_exactly(argv, workdir):
    assert shlex.split(remote_command(argv, workdir)) == ["cd", "--", workdir, "&&", *argv]
