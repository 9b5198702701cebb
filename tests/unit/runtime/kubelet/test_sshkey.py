"""The reconciler's own key file: made on first use (ed25519, OpenSSH format, mode 0600),
read as it is afterwards (the same public key across restarts), and refused with a
one-line error naming the file, never its contents, when it is not an ed25519 key."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from reconciler.runtime.kubelet.sshkey import SshKeyError, load_identity


def test_made_on_first_use_and_read_after(tmp_path: Path):
    path = tmp_path / "key"
    first = load_identity(str(path))
    assert path.stat().st_mode & 0o777 == 0o600
    assert first.public_line.startswith("ssh-ed25519 ")
    assert first.public_line.endswith(" runpod-reconciler")
    assert load_identity(str(path)).public_line == first.public_line
    assert "PRIVATE" not in repr(first)


def test_unusable_files_are_refused_without_their_contents(tmp_path: Path):
    path = tmp_path / "key"
    path.write_text("not a key, and a secret-looking line")
    with pytest.raises(SshKeyError) as caught:
        load_identity(str(path))
    assert str(path) in str(caught.value) and "secret" not in str(caught.value)
    rsa_pem = rsa.generate_private_key(65537, 2048).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    path.write_bytes(rsa_pem)
    with pytest.raises(SshKeyError, match="ed25519"):
        load_identity(str(path))
