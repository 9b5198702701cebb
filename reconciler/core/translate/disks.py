"""Disk and volumes of the instance, from the pod's storage annotations.

v2 mounts one kind of volume at most: a persistent volume on the host
(`runpod.io/volume-gb`, at least 10 GB) or an existing network volume
(`runpod.io/network-volume-id`), each at `runpod.io/volume-mount-path`.

A network volume must be in the account's list (read only on ticks that create such a
pod), and pins the pod to its data center: RunPod refuses a create elsewhere, and
refuses an unknown volume, with a 400 that reads like want of stock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.core.config import MAX_DISK_GB, Settings
from reconciler.core.domain import KubeObject, NetworkVolume, PersistentVolume, RunPodVolume
from reconciler.core.printable import quoted
from reconciler.core.reasons import PodReason
from reconciler.core.translate.annotations import (
    CONTAINER_DISK_GB,
    NETWORK_VOLUME_ID,
    VOLUME_GB,
    VOLUME_MOUNT_PATH,
    read,
    read_id,
    read_int,
)
from reconciler.core.translate.claims import ClaimMount
from reconciler.core.translate.errors import TranslationError, invalid_annotation

DEFAULT_MOUNT_PATH = "/workspace"
MIN_PERSISTENT_GB = 10
MAX_PATH = 4096  # PATH_MAX on Linux


@dataclass(frozen=True)
class Disks:
    container_disk_gb: int
    persistent_volume: PersistentVolume | None = None
    network_volume: NetworkVolume | None = None
    datacenter: str | None = None
    """The network volume's data center, where the instance must be."""


def names_network_volume(pod: KubeObject, job: KubeObject | None) -> bool:
    """Whether a create of this pod needs the account's network volumes listed."""
    return read(pod, job, NETWORK_VOLUME_ID) is not None


def disks_for(
    pod: KubeObject,
    job: KubeObject | None,
    settings: Settings,
    volumes: Sequence[RunPodVolume] | None = None,
    claim: ClaimMount | None = None,
) -> Disks:
    """`volumes`: the account's network volumes; None when they could not be listed.
    `claim`: the network volume the pod's claims give it."""
    disk = read_int(pod, job, CONTAINER_DISK_GB, maximum=MAX_DISK_GB)
    size = read_int(pod, job, VOLUME_GB, minimum=MIN_PERSISTENT_GB, maximum=MAX_DISK_GB)
    volume_id = read_id(pod, job, NETWORK_VOLUME_ID)
    if size is not None and volume_id is not None:
        raise invalid_annotation(
            NETWORK_VOLUME_ID, volume_id, f"allowed together with {VOLUME_GB} (one mount kind)"
        )
    if claim is not None:
        return _claimed(
            claim, size, volume_id, settings.placement.container_disk_gb if disk is None else disk
        )
    path = _mount_path(pod, job)
    return Disks(
        container_disk_gb=settings.placement.container_disk_gb if disk is None else disk,
        persistent_volume=None if size is None else PersistentVolume(size, path),
        network_volume=None if volume_id is None else NetworkVolume(volume_id, path),
        datacenter=None if volume_id is None else _listed(volume_id, volumes).datacenter,
    )


def _claimed(claim: ClaimMount, size: int | None, volume_id: str | None, disk: int) -> Disks:
    if volume_id is not None or size is not None:
        named = NETWORK_VOLUME_ID if volume_id is not None else VOLUME_GB
        raise invalid_annotation(
            named,
            volume_id or str(size),
            f"allowed beside the network-volume claim {claim.claim} (one mount per instance)",
        )
    return Disks(disk, network_volume=claim.volume, datacenter=claim.datacenter or None)


def _listed(volume_id: str, volumes: Sequence[RunPodVolume] | None) -> RunPodVolume:
    if volumes is None:
        raise TranslationError(
            PodReason.NETWORK_VOLUME_UNAVAILABLE,
            "RunPod's network volumes could not be listed; the pod waits",
            permanent=False,
        )
    for volume in volumes:
        if volume.id == volume_id:
            return volume
    raise TranslationError(
        PodReason.NETWORK_VOLUME_UNAVAILABLE,
        f"annotation {NETWORK_VOLUME_ID}: RunPod has no network volume {quoted(volume_id)} "
        "in this account",
        permanent=False,
    )


def _mount_path(pod: KubeObject, job: KubeObject | None) -> str:
    path = read(pod, job, VOLUME_MOUNT_PATH)
    if path is None:
        return DEFAULT_MOUNT_PATH
    if not path.startswith("/") or len(path) > MAX_PATH or not path.isprintable():
        raise invalid_annotation(
            VOLUME_MOUNT_PATH,
            path[:200],
            f"an absolute path of at most {MAX_PATH} printable characters",
        )
    return path
