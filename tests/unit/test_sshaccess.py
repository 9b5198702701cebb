"""SSH access as decided in the core: the create asks for startSsh, our key in
PUBLIC_KEY (a pod's own key kept) and 22/tcp (a template's ports left alone); where
22/tcp is published, read from the port-mappings annotation; an argv quoted so a
shell splits it back exactly."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.runpod.body import create_pod_body
from reconciler.core.config import Settings
from reconciler.core.sshaccess import direct_address, remote_command, ssh_env, ssh_ports
from reconciler.core.translate.env import EnvSources
from reconciler.core.translate.request import create_requests

from .conftest import build_pod

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOurs runpod-reconciler"


def test_our_key_joins_the_pods_own():
    assert ssh_env({"A": "1"}, KEY) == {"A": "1", "PUBLIC_KEY": KEY}
    theirs = "ssh-rsa AAAAB3theirs me@laptop"
    assert ssh_env({"PUBLIC_KEY": theirs}, KEY)["PUBLIC_KEY"] == f"{theirs}\n{KEY}"
    assert ssh_env({"PUBLIC_KEY": KEY}, KEY)["PUBLIC_KEY"] == KEY


def test_22_is_published_once():
    assert ssh_ports(("8888/http",)) == ("8888/http", "22/tcp")
    assert ssh_ports(("22/tcp",)) == ("22/tcp",)


def test_where_sshd_is_published():
    mappings = "8888/http->https://x-8888.proxy.runpod.net, 22/tcp->203.0.113.7:30022"
    assert direct_address(mappings) == ("203.0.113.7", 30022)
    assert direct_address("8888/http->https://x-8888.proxy.runpod.net") is None
    assert direct_address("") is None


@given(st.lists(st.text(st.characters(exclude_characters="\x00")), min_size=1, max_size=6))
def test_the_remote_command_splits_back_into_the_argv(argv):
    assert shlex.split(remote_command(argv)) == argv


# A pod without a GPU would get a CPU instance, from the CPU catalog these tests lack.
ONE_GPU = {"limits": {"nvidia.com/gpu": "1"}}


def test_a_create_with_a_key_asks_for_ssh(catalog):
    settings = Settings(ssh_public_key=KEY)
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
    request = create_requests(pod, None, _sources(), catalog, Settings(ssh_public_key=KEY), "c/n")
    assert request[0].start_ssh and not any("22/tcp" in r.ports for r in request)


def _sources() -> EnvSources:
    return EnvSources({}, {})


@given(
    st.lists(st.text(st.characters(exclude_characters="\x00")), min_size=1, max_size=6),
    st.text(st.characters(exclude_characters="\x00"), min_size=1),
)
def test_a_working_dir_comes_first_and_exactly(argv, workdir):
    assert shlex.split(remote_command(argv, workdir)) == ["cd", "--", workdir, "&&", *argv]
