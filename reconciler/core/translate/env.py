"""The environment of the instance, resolved the way the kubelet resolves a container's.

Order and precedence follow the kubelet: `envFrom` sources first, in order, then `env`
entries, each overriding what came before; `$(VAR)` in an `env` value refers to the
variables defined before it, while values read from Secrets, ConfigMaps and fields are
taken as they are. Secrets and ConfigMaps arrive as `EnvSources` (the engine fetches
just `referenced_objects`), so nothing here does I/O.

`resourceFieldRef` variables are left out: they would report the container's limits,
while the process on RunPod gets the whole machine of the chosen GPU type, so any value
taken from the spec would be wrong there. The service-link variables come from
`service_links` (the Services reach the instance through the reconciler), under the
kubelet's rule: they rank below the container's own variables, and a `$(VAR)` in an
`env` value may refer to them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.domain import KubeObject
from reconciler.core.reasons import PodReason
from reconciler.core.translate.errors import TranslationError
from reconciler.core.translate.expansion import expand

# The kubelet skips envFrom keys that are not valid variable names; so do we.
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_SUBSCRIPT = re.compile(r"metadata\.(labels|annotations)\['(.*)'\]")


@dataclass(frozen=True, repr=False)
class EnvSources:
    """Decoded Secrets and ConfigMaps of the pod's namespace; absent means not found."""

    secrets: Mapping[str, Mapping[str, str]]
    config_maps: Mapping[str, Mapping[str, str]]
    service_links: Mapping[str, str] = field(default_factory=dict)
    """The service-link variables (`service_links.link_variables`)."""

    def __repr__(self) -> str:
        # Values may be secret: only names ever leave this object in text.
        return f"EnvSources(secrets={sorted(self.secrets)}, config_maps={sorted(self.config_maps)})"


@dataclass(frozen=True)
class _Kind:
    """What differs between reading a Secret and reading a ConfigMap."""

    field: str  # the key of its *KeyRef / *Ref in the pod spec
    singular: str  # as the kubelet names it in "... not found"
    title: str  # as the kubelet names it in "couldn't find key ..."
    objects: Callable[[EnvSources], Mapping[str, Mapping[str, str]]]


_SECRET = _Kind("secret", "secret", "Secret", lambda sources: sources.secrets)
_CONFIG_MAP = _Kind("configMap", "configmap", "ConfigMap", lambda sources: sources.config_maps)


def referenced_objects(
    pod: KubeObject, container: KubeObject
) -> tuple[frozenset[str], frozenset[str]]:
    """(Secret names, ConfigMap names) that the container's environment reads."""
    names: dict[_Kind, set[str]] = {_SECRET: set(), _CONFIG_MAP: set()}
    for kind, ref in _references(container):
        names[kind].add(str(ref.get("name") or ""))
    return frozenset(names[_SECRET]), frozenset(names[_CONFIG_MAP])


def _references(container: KubeObject) -> Iterator[tuple[_Kind, dict[str, Any]]]:
    for kind in (_SECRET, _CONFIG_MAP):
        for source in container.get("envFrom") or []:
            if source.get(f"{kind.field}Ref"):
                yield kind, source[f"{kind.field}Ref"]
        for var in container.get("env") or []:
            ref = (var.get("valueFrom") or {}).get(f"{kind.field}KeyRef")
            if ref:
                yield kind, ref


def container_env(pod: KubeObject, container: KubeObject, sources: EnvSources) -> dict[str, str]:
    """The container's variables, in the kubelet's order of precedence."""
    env: dict[str, str] = {}
    links = sources.service_links
    for source in container.get("envFrom") or []:
        env.update(_from_source(source, sources))
    for index, var in enumerate(container.get("env") or []):
        name = var.get("name") if isinstance(var, dict) else None
        if not isinstance(name, str) or not name:
            # The API server admits no such entry, and env cannot be edited: permanent.
            raise TranslationError(
                PodReason.INVALID_POD_SPEC,
                f"env[{index}] of the container has no name",
                permanent=True,
            )
        if "valueFrom" in var:
            value = _value_from(pod, var["valueFrom"], sources)
            if value is not None:
                env[name] = value
        else:
            env[name] = expand(str(var.get("value") or ""), {**links, **env})
    return {**links, **env}


def _from_source(source: KubeObject, sources: EnvSources) -> dict[str, str]:
    for kind in (_SECRET, _CONFIG_MAP):
        ref = source.get(f"{kind.field}Ref")
        if ref is None:
            continue
        data = _lookup(kind, ref, sources)
        prefix = str(source.get("prefix") or "")
        return {
            prefix + key: value
            for key, value in (data or {}).items()
            if _ENV_NAME.fullmatch(prefix + key)
        }
    return {}


def _value_from(pod: KubeObject, value_from: KubeObject, sources: EnvSources) -> str | None:
    """The variable's value; None when an optional source is missing (variable unset)."""
    if "fieldRef" in value_from:
        return field_value(pod, str(value_from["fieldRef"]["fieldPath"]))
    for kind in (_SECRET, _CONFIG_MAP):
        ref = value_from.get(f"{kind.field}KeyRef")
        if ref is not None:
            return _key_value(kind, ref, sources)
    return None


def _lookup(kind: _Kind, ref: KubeObject, sources: EnvSources) -> Mapping[str, str] | None:
    name = str(ref.get("name") or "")
    data = kind.objects(sources).get(name)
    if data is None and not ref.get("optional"):
        raise _config_error(f'{kind.singular} "{name}" not found')
    return data


def _key_value(kind: _Kind, ref: KubeObject, sources: EnvSources) -> str | None:
    data = _lookup(kind, ref, sources)
    if data is None:
        return None
    key = str(ref.get("key") or "")
    if key not in data and not ref.get("optional"):
        name = str(ref.get("name") or "")
        raise _config_error(f"couldn't find key {key} in {kind.title} {name}")
    return data.get(key)


def field_value(pod: KubeObject, path: str) -> str:
    """A downward-API field; status fields are empty until the instance has an address."""
    subscript = _SUBSCRIPT.fullmatch(path)
    if subscript:
        section = (pod.get("metadata") or {}).get(subscript.group(1)) or {}
        return str(section.get(subscript.group(2), ""))
    if path not in _FIELDS:
        # The API server admits only known paths, and env cannot be edited: permanent.
        raise TranslationError(
            PodReason.CREATE_CONTAINER_CONFIG_ERROR, f"unsupported fieldRef {path}", permanent=True
        )
    section_name, key = _FIELDS[path]
    return str((pod.get(section_name) or {}).get(key) or "")


# fieldPath -> (pod section, key). One address per instance, so the plural IP fields
# carry the single one.
_FIELDS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "metadata.uid": ("metadata", "uid"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.podIP": ("status", "podIP"),
    "status.podIPs": ("status", "podIP"),
    "status.hostIP": ("status", "hostIP"),
    "status.hostIPs": ("status", "hostIP"),
}


def _config_error(message: str) -> TranslationError:
    # The Secret or ConfigMap can still be created: the pod waits, as with the kubelet.
    return TranslationError(PodReason.CREATE_CONTAINER_CONFIG_ERROR, message, permanent=False)
