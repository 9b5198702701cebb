"""Credentials for a private image, found in the pod's imagePullSecrets.

RunPod pulls the image itself, so it needs a registry credential of its own; the engine
registers the one found here with `/v2/registries` and passes its id to the create.
Matching is by registry host, as Docker does; the kubelet's finer matching (paths and
wildcards in keys) is not reproduced, since a pull secret per registry host is the norm.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


def registry_host(image: str) -> str:
    """The registry of an image reference; Docker Hub when the first part is no host."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return _normalise(first)
    return DOCKER_HUB


def _normalise(key: str) -> str:
    """A config key such as "https://index.docker.io/v1/" reduced to its host."""
    host = key.strip().lower().removeprefix("https://").removeprefix("http://")
    host = host.split("/", 1)[0]
    return DOCKER_HUB if host in _DOCKER_HUB_ALIASES else host


def registry_credentials(
    image: str, pull_secret_data: Mapping[str, Mapping[str, str]]
) -> tuple[str, str, str] | None:
    """(host, username, password) for the image's registry from the first secret that has it.

    `pull_secret_data` maps each imagePullSecret's name to its decoded data, in the
    pod's order. Secrets that do not parse are skipped, as the kubelet skips them.
    """
    host = registry_host(image)
    for data in pull_secret_data.values():
        for key, entry in _auths(data).items():
            if _normalise(key) == host and isinstance(entry, dict):
                login = _login(entry)
                if login is not None:
                    return host, *login
    return None


def all_credentials(
    pull_secret_data: Mapping[str, Mapping[str, str]],
) -> list[tuple[str, str, str]]:
    """Every (host, username, password) the pod's imagePullSecrets hold, whatever the
    image: the credentials made from them are the only ones of ours the pod may name."""
    found = []
    for data in pull_secret_data.values():
        for key, entry in _auths(data).items():
            login = _login(entry) if isinstance(entry, dict) else None
            if login is not None:
                found.append((_normalise(key), *login))
    return found


def _auths(data: Mapping[str, str]) -> dict[str, Any]:
    try:
        if ".dockerconfigjson" in data:
            config = json.loads(data[".dockerconfigjson"])
            auths = config.get("auths") if isinstance(config, dict) else None
        else:
            auths = json.loads(data.get(".dockercfg", "{}"))
    except json.JSONDecodeError:
        return {}
    return auths if isinstance(auths, dict) else {}


def _login(entry: dict[str, Any]) -> tuple[str, str] | None:
    if entry.get("username") and entry.get("password"):
        return str(entry["username"]), str(entry["password"])
    try:
        decoded = base64.b64decode(str(entry.get("auth") or ""), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    username, colon, password = decoded.partition(":")
    return (username, password) if colon and username else None
