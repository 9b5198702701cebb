"""Instance names: `<namespace>-<pod name>` cut to fit 63 characters with the uid suffix."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.translate.names import MAX_NAME_LENGTH, instance_name

from ...conftest import build_pod


def test_short_name_is_kept_whole() -> None:
    assert (
        instance_name(build_pod(namespace="ml", name="train", uid="abcdef12-3456"))
        == "ml-train-abcdef12"
    )


def test_long_name_is_cut_and_keeps_the_uid() -> None:
    name = instance_name(build_pod(namespace="research", name="x" * 100, uid="0123456789"))
    assert len(name) == MAX_NAME_LENGTH
    assert name.startswith("research-xxx")
    assert name.endswith("-01234567")


def test_cut_never_leaves_a_dangling_separator() -> None:
    # 54 characters before the suffix: the cut falls right after a "-".
    pod = build_pod(namespace="n" * 52, name="a-b", uid="0123456789")
    assert instance_name(pod) == "n" * 52 + "-a-01234567"


_DNS = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,100}[a-z0-9])?", fullmatch=True)


@given(_DNS, _DNS, st.uuids())
def test_name_always_fits_and_ends_with_uid(namespace: str, pod_name: str, uid: object) -> None:
    name = instance_name(build_pod(namespace=namespace[:63], name=pod_name, uid=str(uid)))
    suffix = "-" + str(uid)[:8]
    assert len(name) <= MAX_NAME_LENGTH
    assert name.endswith(suffix)
    assert not name.removesuffix(suffix).endswith(("-", "."))
