"""Instances' SSH host keys in the state store: the first one seen is kept, a later one
is answered with it (so the caller sees the change), and a new process on the same
database (a restart) still knows it. Also through `HostKeys`, the SSH client's check."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from reconciler.adapters.ssh.client import HostKeyChanged
from reconciler.runtime.kubelet.endpoint import stored_host_keys
from reconciler.runtime.process.wiring import open_store

T0 = datetime(2026, 5, 1, tzinfo=UTC)
FIRST, SECOND = "ssh-ed25519 AAAAfirst", "ssh-ed25519 AAAAsecond"


def test_the_first_key_is_kept_and_survives_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = open_store(url, upgrade=True)
    assert store.host_keys.remember("pod-1", FIRST, T0) == FIRST
    assert store.host_keys.remember("pod-1", SECOND, T0) == FIRST
    assert store.host_keys.remember("pod-2", SECOND, T0) == SECOND
    restarted = open_store(url, upgrade=False)
    assert restarted.host_keys.remember("pod-1", SECOND, T0) == FIRST


def test_a_new_process_refuses_a_key_that_changed_since_the_last_one_saw_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    key, other = new_key(), new_key()
    stored_host_keys(open_store(url, upgrade=True), lambda: T0).check("pod-1", key)
    after_restart = stored_host_keys(open_store(url, upgrade=False), lambda: T0)
    with pytest.raises(HostKeyChanged):  # its first contact, but not the instance's
        after_restart.check("pod-1", other)
    after_restart.check("pod-1", key)


def new_key() -> paramiko.PKey:
    pem = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    return paramiko.Ed25519Key.from_private_key(io.StringIO(pem.decode()))
