"""Disk and volumes of the instance, from the pod's storage annotations.

v2 mounts one kind of volume at most: a persistent volume on the host
(`runpod.io/volume-gb`, at least 10 GB) or an existing network volume
(`runpod.io/network-volume-id`), each at `runpod.io/volume-mount-path`.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.core.config import MAX_DISK_GB, Settings
from reconciler.core.domain import KubeObject, NetworkVolume, PersistentVolume
from reconciler.core.translate.annotations import (
    CONTAINER_DISK_GB,
    NETWORK_VOLUME_ID,
    VOLUME_GB,
    VOLUME_MOUNT_PATH,
    read,
    read_id,
    read_int,
)
from reconciler.core.translate.errors import invalid_annotation

DEFAULT_MOUNT_PATH = "/workspace"
MIN_PERSISTENT_GB = 10
MAX_PATH = 4096  # PATH_MAX on Linux


@dataclass(frozen=True)
class Storage:
    container_disk_gb: int
    persistent_volume: PersistentVolume | None = None
    network_volume: NetworkVolume | None = None


def storage(pod: KubeObject, job: KubeObject | None, settings: Settings) -> Storage:
    disk = read_int(pod, job, CONTAINER_DISK_GB, maximum=MAX_DISK_GB)
    size = read_int(pod, job, VOLUME_GB, minimum=MIN_PERSISTENT_GB, maximum=MAX_DISK_GB)
    volume_id = read_id(pod, job, NETWORK_VOLUME_ID)
    if size is not None and volume_id is not None:
        raise invalid_annotation(
            NETWORK_VOLUME_ID, volume_id, f"allowed together with {VOLUME_GB} (one mount kind)"
        )
    path = _mount_path(pod, job)
    return Storage(
        container_disk_gb=settings.container_disk_gb if disk is None else disk,
        persistent_volume=None if size is None else PersistentVolume(size, path),
        network_volume=None if volume_id is None else NetworkVolume(volume_id, path),
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
