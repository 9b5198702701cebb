"""Image references checked by the registry's own grammar before anything is created.

The grammar is distribution's (github.com/distribution/reference, the one Docker,
containerd and the kubelet parse with): `[domain[:port]/]path[:tag][@digest]`, where
path components are lower-case alphanumerics joined by `.`, `_`, `__` or dashes, a tag
is at most 128 word characters, dots and dashes (not starting with either), and the
name is at most 255 characters. A reference with spaces, shell metacharacters or
non-ASCII is refused here, with the pod's reason `InvalidImageName` (the kubelet's),
instead of being sent to RunPod.
"""

from __future__ import annotations

import re

from reconciler.core.reasons import PodReason
from reconciler.core.translate.errors import TranslationError

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6})"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
NAME_MAX_LENGTH = 255


def check_image(image: str) -> None:
    """Raise TranslationError(InvalidImageName) unless `image` is a valid reference.

    Not permanent: a pod's image may be changed on the live pod, as with the kubelet.
    """
    match = _REFERENCE.fullmatch(image)
    if match is None:
        raise _invalid(
            image,
            "it does not follow [registry/]name[:tag][@digest] with a "
            "lower-case name and no spaces or special characters",
        )
    if len(match.group("name")) > NAME_MAX_LENGTH:
        raise _invalid(image, f"its name is longer than {NAME_MAX_LENGTH} characters")


def _invalid(image: str, why: str) -> TranslationError:
    shown = image if len(image) <= 200 else image[:200] + "..."
    return TranslationError(
        PodReason.INVALID_IMAGE_NAME,
        f"image {shown!r} is not a valid image reference: {why}",
        permanent=False,
    )
