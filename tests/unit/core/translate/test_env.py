"""Environment resolution as the kubelet does it: literals, secretKeyRef / configMapKeyRef
(optional or not), fieldRef, envFrom with prefix, precedence of later entries, `$(VAR)`
in values; missing sources as CreateContainerConfigError; Secret values kept out of
every message and repr; and the names the engine must fetch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.reasons import PodReason
from reconciler.core.translate.env import EnvSources, container_env, referenced_objects
from reconciler.core.translate.errors import TranslationError

from ...conftest import build_pod

SECRET_VALUE = "s3cr3t-hunter2"
SOURCES = EnvSources(
    secrets={"db": {"password": SECRET_VALUE, "user": "app"}},
    config_maps={"settings": {"MODE": "fast", "THREADS": "8", "bad key": "x"}},
)


def _env(
    *entries: dict[str, object],
    env_from: list[dict[str, object]] | None = None,
    sources: EnvSources = SOURCES,
) -> dict[str, str]:
    pod = build_pod(env=list(entries), envFrom=env_from or [])
    return container_env(pod, pod["spec"]["containers"][0], sources)


def _secret(name: str, key: str, optional: bool | None = None) -> dict[str, object]:
    ref: dict[str, object] = {"name": name, "key": key}
    if optional is not None:
        ref["optional"] = optional
    return {"secretKeyRef": ref}


def test_literals_and_references_to_earlier_variables() -> None:
    env = _env(
        {"name": "BASE", "value": "/data"},
        {"name": "OUT", "value": "$(BASE)/out"},
        {"name": "LATER", "value": "$(NEXT)"},
        {"name": "NEXT", "value": "x"},
        {"name": "ESCAPED", "value": "$$(BASE)"},
        {"name": "EMPTY"},
    )
    assert env == {
        "BASE": "/data",
        "OUT": "/data/out",
        "LATER": "$(NEXT)",
        "NEXT": "x",
        "ESCAPED": "$(BASE)",
        "EMPTY": "",
    }


def test_secret_and_config_map_keys() -> None:
    env = _env(
        {"name": "PASSWORD", "valueFrom": _secret("db", "password")},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "MODE"}}},
    )
    assert env == {"PASSWORD": SECRET_VALUE, "MODE": "fast"}


def test_values_from_sources_are_not_expanded() -> None:
    sources = EnvSources(secrets={"s": {"k": "$(HOME)"}}, config_maps={})
    env = _env(
        {"name": "HOME", "value": "/root"},
        {"name": "V", "valueFrom": _secret("s", "k")},
        sources=sources,
    )
    assert env["V"] == "$(HOME)"


def test_optional_missing_sources_leave_the_variable_unset() -> None:
    env = _env(
        {"name": "A", "valueFrom": _secret("absent", "k", optional=True)},
        {"name": "B", "valueFrom": _secret("db", "absent", optional=True)},
        {
            "name": "C",
            "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}},
        },
        env_from=[{"configMapRef": {"name": "nope", "optional": True}}],
    )
    assert env == {}


@pytest.mark.parametrize(
    ("entry", "env_from", "message"),
    [
        ({"name": "A", "valueFrom": _secret("absent", "k")}, [], 'secret "absent" not found'),
        (
            {"name": "A", "valueFrom": _secret("db", "token")},
            [],
            "couldn't find key token in Secret db",
        ),
        (
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}},
            [],
            'configmap "nope" not found',
        ),
        ({"name": "A", "value": "x"}, [{"secretRef": {"name": "gone"}}], 'secret "gone" not found'),
    ],
)
def test_missing_required_source_waits_with_kubelet_message(
    entry: dict[str, object], env_from: list[dict[str, object]], message: str
) -> None:
    with pytest.raises(TranslationError) as caught:
        _env(entry, env_from=env_from)
    assert caught.value.reason == PodReason.CREATE_CONTAINER_CONFIG_ERROR
    assert not caught.value.permanent
    assert caught.value.message == message


def test_secret_values_never_reach_messages_or_reprs() -> None:
    with pytest.raises(TranslationError) as caught:
        _env(
            {"name": "P", "valueFrom": _secret("db", "password")},
            {"name": "Q", "valueFrom": _secret("db", "nope")},
        )
    for text in (str(caught.value), repr(caught.value), caught.value.message, repr(SOURCES)):
        assert SECRET_VALUE not in text


def test_field_refs() -> None:
    pod = build_pod(annotations={"team": "vision"})
    fields = {
        "NAME": "metadata.name",
        "NS": "metadata.namespace",
        "UID": "metadata.uid",
        "APP": "metadata.labels['app']",
        "TEAM": "metadata.annotations['team']",
        "NODE": "spec.nodeName",
        "SA": "spec.serviceAccountName",
        "IP": "status.podIP",
    }
    pod["spec"]["containers"][0]["env"] = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in fields.items()
    ]
    env = container_env(pod, pod["spec"]["containers"][0], SOURCES)
    assert env == {
        "NAME": "train",
        "NS": "ml",
        "UID": pod["metadata"]["uid"],
        "APP": "train",
        "TEAM": "vision",
        "NODE": "virtual-runpod",
        "SA": "trainer",
        "IP": "",
    }


def test_unknown_field_ref_is_permanent() -> None:
    with pytest.raises(TranslationError) as caught:
        _env({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}})
    assert caught.value.permanent


def test_resource_field_refs_are_left_out() -> None:
    entry = {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}
    assert _env(entry) == {}


def test_env_from_with_prefix_and_precedence() -> None:
    env = _env(
        {"name": "APP_MODE", "value": "slow"},
        env_from=[
            {"configMapRef": {"name": "settings"}, "prefix": "APP_"},
            {"secretRef": {"name": "db"}, "prefix": "DB_"},
            {"configMapRef": {"name": "settings"}},
        ],
    )
    assert env == {
        "APP_MODE": "slow",  # env entries override envFrom
        "APP_THREADS": "8",
        "DB_password": SECRET_VALUE,
        "DB_user": "app",
        "MODE": "fast",
        "THREADS": "8",
    }  # "bad key" is not a variable name and is skipped


def test_later_entries_override_earlier_ones() -> None:
    env = _env({"name": "A", "value": "1"}, {"name": "A", "value": "2$(A)"})
    assert env == {"A": "21"}


def test_referenced_objects_lists_what_to_fetch() -> None:
    pod = build_pod(
        env=[
            {"name": "P", "valueFrom": _secret("db", "password")},
            {"name": "M", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "MODE"}}},
            {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        envFrom=[{"secretRef": {"name": "tokens"}}, {"configMapRef": {"name": "defaults"}}],
    )
    assert referenced_objects(pod, pod["spec"]["containers"][0]) == (
        frozenset({"db", "tokens"}),
        frozenset({"settings", "defaults"}),
    )


@given(
    st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), st.text(), max_size=8)
)
def test_literal_values_without_references_pass_through(values: dict[str, str]) -> None:
    literal = {name: value.replace("$", "") for name, value in values.items()}
    entries = [{"name": name, "value": value} for name, value in literal.items()]
    assert _env(*entries) == literal
