"""A pod's CUDA floor: the oldest CUDA version its image can start on.

An image built for CUDA 12.6 carries `NVIDIA_REQUIRE_CUDA=cuda>=12.6`, and on a host whose
driver reports an older CUDA, nvidia-container-cli refuses to start it: the instance bills
and never runs. RunPod's create takes `gpu.allowedCudaVersions` (exact versions, as its
GPU catalog's `cudaVersions` lists them), so the floor becomes every version the catalog
knows at or above it, and only GPU types with such hosts are offered.

The floor is, first found:
1. the annotation `runpod.io/min-cuda-version`, `major.minor` (`12.4`); anything else is
   an InvalidAnnotation;
2. the image's tag (never its name or registry), lower-cased:
   - `cuda` then the version, optionally after `-` or `_`: `2.5.1-cuda12.4-cudnn9`,
     `cuda-12.1`, `cuda12.4.1` give 12.4, 12.1, 12.4;
   - `cu` then three or four digits, not inside a word: two for the major, one for the
     minor, a fourth for the patch (ignored): `cu118`, `cu124`, `cu1281` give 11.8, 12.4,
     12.8 (PyTorch's wheels and RunPod's own images are tagged so);
   - for an image named `cuda` (`nvidia/cuda`), the tag's leading version:
     `nvidia/cuda:12.4.1-devel-ubuntu22.04` gives 12.4;
3. else none: the pod takes any host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reconciler.core.domain import GpuType, KubeObject
from reconciler.core.translate.annotations import MIN_CUDA_VERSION, read
from reconciler.core.translate.container import choose_container
from reconciler.core.translate.errors import invalid_annotation

_VERSION = re.compile(r"([0-9]{1,2})\.([0-9]{1,2})")
_CUDA_WORD = re.compile(r"cuda[-_]?([0-9]{1,2})\.([0-9]{1,2})")
_CU_DIGITS = re.compile(r"(?<![a-z0-9])cu([0-9]{2})([0-9])[0-9]?(?![0-9])")
_LEADING = re.compile(r"([0-9]{1,2})\.([0-9]{1,2})(?![0-9])")

Version = tuple[int, int]


@dataclass(frozen=True)
class CudaFloor:
    version: Version
    source: str
    """Where it was read: the annotation, or the image's tag."""

    @property
    def text(self) -> str:
        return version_text(self.version)


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def parse_version(text: str) -> Version | None:
    """`major.minor` as numbers; None for anything else (a bare major, a patch, junk)."""
    match = _VERSION.fullmatch(text)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def pod_floor(pod: KubeObject, job: KubeObject | None) -> CudaFloor | None:
    """The pod's floor by the rules above; TranslationError(InvalidAnnotation) for an
    annotation that is not `major.minor`."""
    given = read(pod, job, MIN_CUDA_VERSION)
    if given is not None:
        version = parse_version(given.strip())
        if version is None:
            raise invalid_annotation(
                MIN_CUDA_VERSION, given, "a CUDA version as major.minor, like 12.4"
            )
        return CudaFloor(version, f"annotation {MIN_CUDA_VERSION}")
    image = str(choose_container(pod).get("image") or "")
    version = image_floor(image)
    return None if version is None else CudaFloor(version, f"image tag of {image}")


def image_floor(image: str) -> Version | None:
    """The CUDA version an image's tag names, by the rules above; None if it names none."""
    reference = image.split("@", 1)[0]
    last = reference.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    name, tag = last.split(":", 1)
    tag = tag.lower()
    for pattern in (_CUDA_WORD, _CU_DIGITS):
        match = pattern.search(tag)
        if match is not None:
            return int(match.group(1)), int(match.group(2))
    if name.lower() == "cuda":
        match = _LEADING.match(tag)
        if match is not None:
            return int(match.group(1)), int(match.group(2))
    return None


def _at_or_above(versions: Iterable[str], floor: CudaFloor) -> list[Version]:
    parsed = (parse_version(text) for text in versions)
    return [version for version in parsed if version is not None and version >= floor.version]


def serves(gpu: GpuType, floor: CudaFloor | None) -> bool:
    """Whether the type has hosts at or above the floor (any type, without one)."""
    return floor is None or bool(_at_or_above(gpu.cuda_versions, floor))


def stocked(gpu: GpuType, floor: CudaFloor | None) -> bool:
    """Whether such hosts have room now, by the catalog."""
    return floor is None or bool(_at_or_above(gpu.cuda_available, floor))


def allowed_versions(floor: CudaFloor | None, catalog: Sequence[GpuType]) -> tuple[str, ...]:
    """Every version the catalog knows at or above the floor, newest first: what a
    create sends as `gpu.allowedCudaVersions` (nothing without a floor)."""
    if floor is None:
        return ()
    known = {v for gpu in catalog for v in _at_or_above(gpu.cuda_versions, floor)}
    return tuple(version_text(v) for v in sorted(known, reverse=True))


def newest(catalog: Sequence[GpuType]) -> str | None:
    """The newest CUDA version any host in the catalog reports."""
    known = [v for gpu in catalog for text in gpu.cuda_versions if (v := parse_version(text))]
    return version_text(max(known)) if known else None
