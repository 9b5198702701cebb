"""The `runpod.io/...` annotations users put on a pod (or its Job), and typed readers.

Every reader looks at the pod first, then at its owning Job, so that a Job author can
annotate the Job once instead of its pod template. A value that does not parse raises
`TranslationError(InvalidAnnotation)` naming the annotation and the value: a typo never
silently turns into a default. Numbers are plain ASCII digits: Python's own parsers
also take "+5", " 5 ", "0_1" and other scripts' digits, which no user means. Annotations
hold no secrets, so echoing values is safe (escaped, `reconciler.core.printable`).
"""

from __future__ import annotations

import re

from reconciler.core.domain import KubeObject
from reconciler.core.translate.errors import invalid_annotation

# An id RunPod hands out (template, registry credential, network volume): printable,
# no spaces, of a sane length. The exact alphabet is RunPod's to choose.
_ID = re.compile(r"[!-~]{1,128}")
_WHOLE = re.compile(r"[0-9]{1,12}")
_DECIMAL = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?")
MAX_LIST_ITEMS = 64
MAX_ITEM_LENGTH = 128
MAX_PRICE_USD = 10_000.0
MAX_WHOLE = 1_000_000

MANAGED = "runpod.io/managed"
OFFLOAD = "runpod.io/offload"
MAX_PENDING_TIME_BEFORE_OFFLOAD = "runpod.io/max-pending-time-before-offload"
REQUIRED_GPU_MEMORY = "runpod.io/required-gpu-memory"
GPU_TYPES = "runpod.io/gpu-types"
CPU_FLAVORS = "runpod.io/cpu-flavors"
MAX_PRICE = "runpod.io/max-price"
CLOUD_TYPE = "runpod.io/cloud-type"
DATACENTER_IDS = "runpod.io/datacenter-ids"
PORTS = "runpod.io/ports"
CONTAINER_DISK_GB = "runpod.io/container-disk-gb"
VOLUME_GB = "runpod.io/volume-gb"
VOLUME_MOUNT_PATH = "runpod.io/volume-mount-path"
NETWORK_VOLUME_ID = "runpod.io/network-volume-id"
TEMPLATE_ID = "runpod.io/template-id"
TEMPLATE_ID_LEGACY = "runpod.io/templateId"
CONTAINER_REGISTRY_AUTH_ID = "runpod.io/container-registry-auth-id"
MIN_CUDA_VERSION = "runpod.io/min-cuda-version"
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"

# Written by the reconciler onto the pod's metadata once its instance exists.
POD_ID = "runpod.io/pod-id"
COST_PER_HR = "runpod.io/cost-per-hr"
GPU_TYPE = "runpod.io/gpu-type"
DATACENTER = "runpod.io/datacenter"
PUBLIC_IP = "runpod.io/public-ip"
# Not `runpod.io/ports`: that name is the user's port override, which must survive.
PORT_MAPPINGS = "runpod.io/port-mappings"
WRITTEN_ANNOTATIONS = frozenset(
    {POD_ID, COST_PER_HR, GPU_TYPE, DATACENTER, PUBLIC_IP, PORT_MAPPINGS}
)


def _metadata_map(obj: KubeObject | None, field: str) -> dict[str, str]:
    if obj is None:
        return {}
    return (obj.get("metadata") or {}).get(field) or {}


def read(pod: KubeObject, job: KubeObject | None, name: str) -> str | None:
    """The annotation's value on the pod, else on its Job, else None."""
    for obj in (pod, job):
        value = _metadata_map(obj, "annotations").get(name)
        if value is not None:
            return str(value)
    return None


def read_int(
    pod: KubeObject,
    job: KubeObject | None,
    name: str,
    *,
    minimum: int = 1,
    maximum: int = MAX_WHOLE,
) -> int | None:
    value = read(pod, job, name)
    if value is None:
        return None
    expected = f"a whole number from {minimum} to {maximum}"
    if not _WHOLE.fullmatch(value) or not minimum <= int(value) <= maximum:
        raise invalid_annotation(name, value, expected)
    return int(value)


def read_price(pod: KubeObject, job: KubeObject | None, name: str) -> float | None:
    value = read(pod, job, name)
    if value is None:
        return None
    expected = f"a price in USD per hour above 0 and at most {MAX_PRICE_USD:g}"
    if not _DECIMAL.fullmatch(value) or not 0 < float(value) <= MAX_PRICE_USD:
        raise invalid_annotation(name, value, expected)
    return float(value)


def read_id(pod: KubeObject, job: KubeObject | None, name: str) -> str | None:
    """A RunPod id: printable ASCII without spaces, at most 128 characters."""
    value = read(pod, job, name)
    if value is None:
        return None
    if not _ID.fullmatch(value.strip()):
        raise invalid_annotation(
            name, value, "a RunPod id (1 to 128 printable characters, no spaces)"
        )
    return value.strip()


def read_list(pod: KubeObject, job: KubeObject | None, name: str) -> tuple[str, ...] | None:
    """A comma-separated list; an empty item (as in "a,,b" or "") is a typo, not a wildcard."""
    value = read(pod, job, name)
    if value is None:
        return None
    items = tuple(item.strip() for item in value.split(","))
    if (
        not all(items)
        or len(items) > MAX_LIST_ITEMS
        or any(len(item) > MAX_ITEM_LENGTH or not item.isprintable() for item in items)
    ):
        raise invalid_annotation(
            name,
            value,
            f"a comma-separated list of at most "
            f"{MAX_LIST_ITEMS} items of 1 to {MAX_ITEM_LENGTH} printable characters",
        )
    return items


def read_choice(
    pod: KubeObject, job: KubeObject | None, name: str, choices: tuple[str, ...]
) -> str | None:
    value = read(pod, job, name)
    if value is None:
        return None
    if value.strip().upper() not in choices:
        raise invalid_annotation(name, value, "one of " + ", ".join(choices))
    return value.strip().upper()


def parse_flag(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise invalid_annotation(name, value, '"true" or "false"')
    return lowered == "true"


def check_offload(pod: KubeObject, job: KubeObject | None, longest_wait: int) -> None:
    """Raise for an unreadable offload annotation, even on a pod already bound (where
    they no longer matter): a typo is told, never silently ignored."""
    is_managed(pod, job)
    flag = read(pod, job, OFFLOAD)
    if flag is not None:
        parse_flag(OFFLOAD, flag)
    read_int(pod, job, MAX_PENDING_TIME_BEFORE_OFFLOAD, minimum=0, maximum=longest_wait)


def is_managed(pod: KubeObject, job: KubeObject | None) -> bool:
    """`runpod.io/managed` on the pod, the Job's annotations or the Job's labels.

    Labels count on the Job because the older Job controller selected Jobs by label.
    """
    value = read(pod, job, MANAGED)
    if value is None:
        value = _metadata_map(job, "labels").get(MANAGED)
    return value is not None and parse_flag(MANAGED, str(value))
