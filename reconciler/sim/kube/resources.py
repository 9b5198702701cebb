"""The resource types the simulated API server serves, and its discovery documents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# Subresources that only take a POST, with the kind (and group) of their body. kubectl
# drain finds pods/eviction here and uses the group/version it names, else it deletes.
CREATE_ONLY_SUBRESOURCES: dict[str, dict[str, str]] = {
    "binding": {"kind": "Binding"},
    "eviction": {"kind": "Eviction", "group": "policy", "version": "v1"},
}
_ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
_META_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    field_labels: tuple[str, ...] = _META_FIELDS
    verbs: tuple[str, ...] = _ALL_VERBS

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def discovery_entries(self) -> list[dict[str, Any]]:
        main = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        entries = [main]
        for sub in self.subresources:
            entry: dict[str, Any] = {
                "name": f"{self.plural}/{sub}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }
            if sub in CREATE_ONLY_SUBRESOURCES:
                entry.update(CREATE_ONLY_SUBRESOURCES[sub], verbs=["create"])
            elif sub == "log":
                entry["verbs"] = ["get"]
            elif sub in ("exec", "portforward"):
                kind = "PodExecOptions" if sub == "exec" else "PodPortForwardOptions"
                entry.update(kind=kind, verbs=["create", "get"])
            entries.append(entry)
        return entries


NAMESPACES = Resource(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    False,
    ("status",),
    ("ns",),
    (*_META_FIELDS, "status.phase"),
)
PODS = Resource(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    True,
    ("status", "binding", "eviction", "log", "exec", "portforward"),
    ("po",),
    (
        *_META_FIELDS,
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
)
NODES = Resource(
    "",
    "v1",
    "nodes",
    "node",
    "Node",
    False,
    ("status",),
    ("no",),
    (*_META_FIELDS, "spec.unschedulable"),
)
EVENTS = Resource(
    "",
    "v1",
    "events",
    "event",
    "Event",
    True,
    (),
    ("ev",),
    (
        *_META_FIELDS,
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
)
SECRETS = Resource(
    "", "v1", "secrets", "secret", "Secret", True, field_labels=(*_META_FIELDS, "type")
)
CONFIG_MAPS = Resource("", "v1", "configmaps", "configmap", "ConfigMap", True, short_names=("cm",))
JOBS = Resource(
    "batch",
    "v1",
    "jobs",
    "job",
    "Job",
    True,
    ("status",),
    field_labels=(*_META_FIELDS, "status.successful"),
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "lease", "Lease", True)
# Stored only (no controller): `kubectl drain --ignore-daemonsets` reads a pod's DaemonSet.
DAEMON_SETS = Resource(
    "apps", "v1", "daemonsets", "daemonset", "DaemonSet", True, ("status",), ("ds",)
)
# Reviews are answered, never stored: a kubelet authenticates and authorizes with them.
TOKEN_REVIEWS = Resource(
    "authentication.k8s.io",
    "v1",
    "tokenreviews",
    "tokenreview",
    "TokenReview",
    False,
    verbs=("create",),
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io",
    "v1",
    "subjectaccessreviews",
    "subjectaccessreview",
    "SubjectAccessReview",
    False,
    verbs=("create",),
)
REVIEWS = (TOKEN_REVIEWS, SUBJECT_ACCESS_REVIEWS)
# Storage: their rules in `storage`, the controllers that bind them in `volumes`.
STORAGE_CLASSES = Resource(
    "storage.k8s.io",
    "v1",
    "storageclasses",
    "storageclass",
    "StorageClass",
    False,
    short_names=("sc",),
)
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", False)
PERSISTENT_VOLUMES = Resource(
    "",
    "v1",
    "persistentvolumes",
    "persistentvolume",
    "PersistentVolume",
    False,
    ("status",),
    ("pv",),
)
PERSISTENT_VOLUME_CLAIMS = Resource(
    "",
    "v1",
    "persistentvolumeclaims",
    "persistentvolumeclaim",
    "PersistentVolumeClaim",
    True,
    ("status",),
    ("pvc",),
)
# Networking: their rules in `services`, the IP allocator and EndpointSlice
# controller in `service_controllers`.
SERVICES = Resource(
    "",
    "v1",
    "services",
    "service",
    "Service",
    True,
    ("status",),
    ("svc",),
)
ENDPOINT_SLICES = Resource(
    "discovery.k8s.io",
    "v1",
    "endpointslices",
    "endpointslice",
    "EndpointSlice",
    True,
    field_labels=(*_META_FIELDS, "addressType"),
)

RESOURCES: tuple[Resource, ...] = (
    NAMESPACES,
    PODS,
    NODES,
    EVENTS,
    SECRETS,
    CONFIG_MAPS,
    JOBS,
    LEASES,
    DAEMON_SETS,
    STORAGE_CLASSES,
    CSI_DRIVERS,
    PERSISTENT_VOLUMES,
    PERSISTENT_VOLUME_CLAIMS,
    SERVICES,
    ENDPOINT_SLICES,
    *REVIEWS,
)
BY_PLURAL: dict[str, Resource] = {r.plural: r for r in RESOURCES}


def find_resource(group: str, version: str, plural: str) -> Resource | None:
    resource = BY_PLURAL.get(plural)
    if resource is None or (resource.group, resource.version) != (group, version):
        return None
    return resource


def group_versions() -> dict[str, list[str]]:
    """API groups other than core, each with its versions."""
    groups: dict[str, list[str]] = {}
    for resource in RESOURCES:
        if resource.group and resource.version not in groups.setdefault(resource.group, []):
            groups[resource.group].append(resource.version)
    return groups


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group_list() -> dict[str, Any]:
    groups = [api_group(name) for name in group_versions()]
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {k: v for k, v in g.items() if k not in ("kind", "apiVersion")} for g in groups if g
        ],
    }


def api_group(name: str) -> dict[str, Any] | None:
    versions = group_versions().get(name)
    if versions is None:
        return None
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    resources = [r for r in RESOURCES if (r.group, r.version) == (group, version)]
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for r in resources for entry in r.discovery_entries()],
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_index() -> dict[str, Any]:
    """The OpenAPI v3 index: one document per group-version."""
    gvs = {(r.group, r.version) for r in RESOURCES}
    return {
        "paths": {
            _gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash=sim"}
            for g, v in sorted(gvs)
        }
    }


def openapi_v3_document(gv_path: str) -> dict[str, Any] | None:
    """Just enough OpenAPI for kubectl: each kind's PATCH accepts `fieldValidation`.

    kubectl then validates server-side (our server ignores unknown fields, as with
    fieldValidation=Ignore) instead of demanding full schemas for client-side validation.
    """
    resources = [r for r in RESOURCES if _gv_path(r.group, r.version) == gv_path]
    if not resources:
        return None
    paths = {}
    for r in resources:
        prefix = f"/{gv_path}/namespaces/{{namespace}}" if r.namespaced else f"/{gv_path}"
        paths[f"{prefix}/{r.plural}/{{name}}"] = {
            "patch": {
                "x-kubernetes-group-version-kind": {
                    "group": r.group,
                    "version": r.version,
                    "kind": r.kind,
                },
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
    }
