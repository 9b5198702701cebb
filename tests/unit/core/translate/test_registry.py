"""Private registry credentials from imagePullSecret data: image to registry host,
.dockerconfigjson and legacy .dockercfg, auth vs username/password, Docker Hub aliases."""

from __future__ import annotations

import base64
import json

import pytest

from reconciler.core.translate.pull_secrets import registry_credentials, registry_host


@pytest.mark.parametrize(
    ("image", "host"),
    [
        ("nginx", "docker.io"),
        ("acme/train:1", "docker.io"),
        ("docker.io/acme/train", "docker.io"),
        ("ghcr.io/acme/train@sha256:abc", "ghcr.io"),
        ("localhost/train", "localhost"),
        ("registry:5000/train", "registry:5000"),
        ("Quay.IO/acme/x", "quay.io"),
    ],
)
def test_registry_host(image: str, host: str) -> None:
    assert registry_host(image) == host


def _config(auths: dict[str, dict[str, str]]) -> dict[str, str]:
    return {".dockerconfigjson": json.dumps({"auths": auths})}


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_docker_hub_key_with_scheme_and_path() -> None:
    secrets = {
        "hub": _config({"https://index.docker.io/v1/": {"auth": _auth("me", "pw:with:colons")}})
    }
    assert registry_credentials("acme/train", secrets) == ("docker.io", "me", "pw:with:colons")


def test_username_and_password_fields() -> None:
    secrets = {"gh": _config({"ghcr.io": {"username": "bot", "password": "tok"}})}
    assert registry_credentials("ghcr.io/acme/train", secrets) == ("ghcr.io", "bot", "tok")


def test_legacy_dockercfg() -> None:
    secrets = {"old": {".dockercfg": json.dumps({"https://quay.io": {"auth": _auth("q", "p")}})}}
    assert registry_credentials("quay.io/acme/x", secrets) == ("quay.io", "q", "p")


def test_first_matching_secret_wins_and_broken_ones_are_skipped() -> None:
    secrets = {
        "broken": {".dockerconfigjson": "{not json"},
        "bad-auth": _config({"ghcr.io": {"auth": "***"}}),
        "other": _config({"quay.io": {"auth": _auth("q", "p")}}),
        "first": _config({"ghcr.io": {"auth": _auth("a", "1")}}),
        "second": _config({"ghcr.io": {"auth": _auth("b", "2")}}),
    }
    assert registry_credentials("ghcr.io/acme/x", secrets) == ("ghcr.io", "a", "1")


def test_no_entry_for_the_registry() -> None:
    assert (
        registry_credentials(
            "ghcr.io/acme/x", {"hub": _config({"docker.io": {"auth": _auth("a", "b")}})}
        )
        is None
    )
    assert registry_credentials("nginx", {}) is None
