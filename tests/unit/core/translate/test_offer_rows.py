"""The rows `reconciler offers` shows (`core.translate.offers.offer_rows`): each offer once
per data center it would be tried in, and an offer the catalog names no data center for
still shown once, as "anywhere" (RunPod picks), never dropped."""

from __future__ import annotations

from reconciler.core.config import Settings
from reconciler.core.domain import Availability
from reconciler.core.translate.offers import offer_rows, ranked_offers

from ...conftest import build_gpu, build_pod


def test_an_offer_with_no_data_center_is_one_row_for_anywhere() -> None:
    placed = build_gpu("NVIDIA RTX A5000", price=0.27, datacenters={"EU-RO-1": Availability.HIGH})
    anywhere = build_gpu("NVIDIA GeForce RTX 4090", price=0.69)
    pod = build_pod(resources={"limits": {"nvidia.com/gpu": "1"}})
    settings = Settings.of(datacenter_ids=())
    offers = ranked_offers(pod, None, [placed, anywhere], [], settings)
    rows = offer_rows(offers, [placed, anywhere], [])
    shown = [(r.offer.offer_id, r.datacenter) for r in rows]
    assert ("NVIDIA GeForce RTX 4090", None) in shown
    assert ("NVIDIA RTX A5000", "EU-RO-1") in shown
    assert {o.offer_id for o in offers} == {r.offer.offer_id for r in rows}
