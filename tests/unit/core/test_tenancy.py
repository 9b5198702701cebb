"""The one rule for ids a tenant writes (`core.tenancy`) as each resource reads its marks
(a registry credential's name), and a pod's disks priced with its GPU
(`storage_prices.within_max_price`): a persistent volume counts as a container disk does."""

from __future__ import annotations

from reconciler.core.domain import CreateRequest, PersistentVolume
from reconciler.core.resources import registries, storage_prices
from reconciler.core.tenancy import Marks, refusal

OWNER = "cluster/node"


def test_a_record_names_a_resource_only_when_ours_and_made_for_what_the_namespace_owns() -> None:
    assert refusal("instance", "i-1", Marks(True, "uid-a"), {"uid-a"}) is None
    assert "RunPod has no instance" in (refusal("instance", "i-1", None, {"uid-a"}) or "")
    assert "not this reconciler's" in (
        refusal("instance", "i-1", Marks(False, "uid-a"), {"uid-a"}) or ""
    )
    assert "not made for" in (refusal("instance", "i-1", Marks(True, "uid-b"), {"uid-a"}) or "")
    assert "not made for" in (refusal("instance", "i-1", Marks(True, None), {"uid-a"}) or "")


def test_a_credential_is_named_only_if_allowed_or_made_from_the_pods_own_pull_secrets() -> None:
    own = registries.registry_name(OWNER, "ghcr.io", "robot", "mine")
    theirs = registries.registry_name(OWNER, "ghcr.io", "robot", "theirs")
    foreign = registries.registry_name("other/node", "ghcr.io", "robot", "mine")
    listed = {own: "c-own", theirs: "c-theirs", foreign: "c-foreign", "by-hand": "c-hand"}
    naming = registries.Naming(OWNER, ("c-hand",))
    assert naming.refusal("c-own", listed, {own}) is None
    assert naming.refusal("c-hand", listed, set()) is None  # the administrator's
    assert "not made for" in (naming.refusal("c-theirs", listed, {own}) or "")
    assert "not this reconciler's" in (naming.refusal("c-foreign", listed, {own}) or "")
    assert "RunPod has no" in (naming.refusal("c-none", listed, {own}) or "")


def test_a_persistent_volume_is_priced_with_the_gpu_against_the_max_price() -> None:
    gpu = CreateRequest("p", "img", "gpu", container_disk_gb=50, hourly_price=0.49)
    big = CreateRequest(
        "p",
        "img",
        "gpu",
        container_disk_gb=50,
        persistent_volume=PersistentVolume(10_000, "/workspace"),
        hourly_price=0.49,
    )
    [kept], over = storage_prices.within_max_price([gpu], 1.0)
    assert over is None and kept.hourly_price == round(0.49 + 50 * 0.10 / 730, 6)
    none, over = storage_prices.within_max_price([big], 1.0)
    assert none == [] and over is not None and "10000 GB volume" in over
