"""The reconciler's own SSH key pair, in a file it alone reads (`--ssh-key-file`).

Made on first use (ed25519, OpenSSH format, mode 0600) when the file does not exist; a
mounted Secret's file is used as it is. Only the public half leaves this module: it
goes into the instances' `PUBLIC_KEY`; the private half goes to the SSH client and
nowhere else (not env, annotations, Events, logs, the database or CLI output).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

COMMENT = "runpod-reconciler"


class SshKeyError(RuntimeError):
    """The key file cannot be read or made: a one-line start-up error."""


@dataclass(frozen=True)
class SshIdentity:
    path: Path
    public_line: str
    private_pem: bytes = field(repr=False)


def load_identity(path: str) -> SshIdentity:
    """The key pair at `path`, made there first if the file does not exist."""
    file = Path(path)
    try:
        if not file.exists():
            _create(file)
        pem = file.read_bytes()
        key = serialization.load_ssh_private_key(pem, password=None)
    except (OSError, ValueError, TypeError) as exc:
        # The exception's text names the path and the problem, never the key's bytes.
        raise SshKeyError(f"the SSH key file {path} is not usable: {type(exc).__name__}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SshKeyError(f"the SSH key file {path} must hold an ed25519 key")
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return SshIdentity(file, f"{public.decode()} {COMMENT}", pem)


def _create(file: Path) -> None:
    pem = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(pem)
