"""Whether an hourly spend stays within a cap: the one comparison every spending cap
makes (the global `--max-hourly-spend`, a namespace's `runpod.io/max-hourly-spend`, and
both for storage), so no two caps disagree at the boundary."""

from __future__ import annotations

TOLERANCE_USD = 1e-9
"""USD/h a spend may pass its cap by and still be within it. Spends are sums of hourly
prices in binary floats: prices that add up to the cap in decimal may sum to a hair
above it (0.1 + 0.2 is 0.30000000000000004), so `<=` alone would refuse a pod that fits
exactly. A sum of n prices totalling S is off by at most about n·S·1.1e-16, far below
a billionth of a dollar for any cap a cluster runs under (a thousand instances at
$9,000/h), and a billionth is far below any price RunPod lists."""


def within_cap(hourly_spend: float, cap: float) -> bool:
    """True when `hourly_spend` (USD/h, what would run) does not pass `cap` (USD/h)."""
    return hourly_spend <= cap + TOLERANCE_USD
