"""The reconciler's own SSH key pair: in a file it alone reads (`--ssh-key-file`), or
in a Secret of its namespace (`--ssh-key-secret`).

Made on first use (ed25519, OpenSSH format) when missing: a file with mode 0600; a
Secret of type `kubernetes.io/ssh-auth` whose one key, `ssh-privatekey`, holds it (the
public half is derived from it). A mounted Secret's file, or a Secret someone made, is
used as it is. Only the public half leaves this module: it goes into the instances'
`PUBLIC_KEY`; the private half goes to the SSH client and nowhere else (not env,
annotations, Events, logs, the database, CLI output, nor a file of the Secret's).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from reconciler.adapters.kube.client import KubeClient
from reconciler.adapters.kube.errors import KubeConflict, KubeError
from reconciler.core.config import Settings

COMMENT = "runpod-reconciler"
SECRET_TYPE = "kubernetes.io/ssh-auth"
SECRET_KEY = "ssh-privatekey"  # the key that type requires


class SshKeyError(RuntimeError):
    """The key file cannot be read or made: a one-line start-up error."""


@dataclass(frozen=True)
class SshIdentity:
    source: str
    """Where the key is: the file's path, or `secret NAMESPACE/NAME`."""
    public_line: str
    private_pem: bytes = field(repr=False)


def ssh_identity(settings: Settings, kube: KubeClient, namespace: str) -> SshIdentity | None:
    """The key pair the settings name (the file first), or None: no SSH."""
    if settings.ssh.key_file:
        return load_identity(settings.ssh.key_file)
    if settings.ssh.key_secret:
        return secret_identity(kube, namespace, settings.ssh.key_secret)
    return None


def load_identity(path: str) -> SshIdentity:
    """The key pair at `path`, made there first if the file does not exist."""
    file = Path(path)
    try:
        if not file.exists():
            pem = _new_pem()
            descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as out:
                out.write(pem)
        pem = file.read_bytes()
    except OSError as exc:
        # The exception's text names the path and the problem, never the key's bytes.
        raise SshKeyError(f"the SSH key file {path} is not usable: {type(exc).__name__}") from None
    return _identity(pem, f"the SSH key file {path}", path)


def secret_identity(kube: KubeClient, namespace: str, name: str, make: bool = True) -> SshIdentity:
    """The key pair in the Secret `namespace/name`, which is made first if missing and
    `make` (by one replica: another's create conflicts and reads the winner's)."""
    where = f"the SSH key Secret {namespace}/{name}"
    try:
        found = kube.secrets.read_bytes(namespace, name)
        if found is None and make:
            with contextlib.suppress(KubeConflict):  # another replica made it first
                kube.secrets.create(namespace, name, SECRET_TYPE, {SECRET_KEY: _new_pem()})
            found = kube.secrets.read_bytes(namespace, name)
    except KubeError as exc:
        raise SshKeyError(f"{where} cannot be read or made: {exc}") from None
    if found is None:
        raise SshKeyError(f"{where} does not exist")
    if not found[1].get(SECRET_KEY):
        raise SshKeyError(f"{where} has no {SECRET_KEY} key")
    return _identity(found[1][SECRET_KEY], where, f"secret {namespace}/{name}")


def _identity(pem: bytes, where: str, source: str) -> SshIdentity:
    try:
        key = serialization.load_ssh_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise SshKeyError(f"{where} is not usable: {type(exc).__name__}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SshKeyError(f"{where} must hold an ed25519 key")
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return SshIdentity(source, f"{public.decode()} {COMMENT}", pem)


def _new_pem() -> bytes:
    return ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
