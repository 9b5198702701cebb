"""RunPod's lists lag behind creates: a resource just made is answered by id at once
but shows in its list only from `listed_from` on (the simulator's listing lag, one
setting for pods, clusters and network volumes). A client that takes a resource
missing from a list for gone makes it twice, or loses it; only a 404 by id is proof."""

from __future__ import annotations

from datetime import datetime


class Listing:
    """Mixed into each listed resource of the simulator, which declares the field
    `listed_from: datetime | None = None` (None: listed, as once its lag passed)."""

    listed_from: datetime | None

    def listed(self, now: datetime) -> bool:
        return self.listed_from is None or now >= self.listed_from
