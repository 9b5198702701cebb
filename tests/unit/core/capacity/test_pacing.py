"""Quota pacing's pure decisions (`reconciler.core.capacity.pacing`) and the client-side state that
feeds them: the gap between early ticks in each window (fast while ample, stretched as
a window runs low, the hour and day windows as binding as the minute one), the spacing
of requests in a window's last quarter, and the share of the quota a reconciler claims
when other reconcilers spend the same key; and that a tick which used every create slot
asks for the next tick at once (the gap still applies)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from reconciler.adapters.runpod.ratelimit import RateLimiter
from reconciler.core.capacity import pacing
from reconciler.core.capacity.pacing import (
    Company,
    DropSample,
    Window,
    next_request_delay,
    our_budget,
    request_delay,
    sharers,
    tick_gap,
)
from reconciler.core.config import Settings
from reconciler.core.planner import CreateInputs, Observation
from reconciler.runtime.process.debounce import Debouncer
from reconciler.runtime.process.service import creates_capped
from reconciler.runtime.tick.tick_report import TickReport

POLICY = '"minute";q=60;w=60, "hour";q=3000;w=3600, "day";q=50000;w=86400'


def _state(
    minute: tuple[int, int],
    hour: tuple[int, int] = (3000, 3600),
    day: tuple[int, int] = (50000, 86400),
) -> str:
    return ", ".join(
        f'"{name}";r={r};t={t}'
        for name, (r, t) in (("minute", minute), ("hour", hour), ("day", day))
    )


# --- the gap between ticks -------------------------------------------------------------

BUSY = 5.0  # requests per second: above what any window here sustains


def test_an_ample_quota_ticks_at_the_watch_floor() -> None:
    windows = [Window("minute", 600, 30, 600), Window("hour", 30000, 1800, 30000)]
    assert tick_gap(windows, rate=BUSY) == pacing.MIN_TICK_GAP


def test_spending_slower_than_the_windows_sustain_ticks_at_the_floor() -> None:
    # The contract's quotas at the start of a day: the day sustains 0.58 a second.
    windows = [
        Window("minute", 58, 57, 60),
        Window("hour", 2998, 3597, 3000),
        Window("day", 49998, 86397, 50000),
    ]
    assert tick_gap(windows, rate=0.2) == pacing.MIN_TICK_GAP
    # A trickle of a pod every 2 s with a tick each spends a request a second: stretch.
    assert tick_gap(windows, rate=1.0) == pytest.approx(86397 / (49998 * pacing.LIST_SHARE))


def test_no_header_yet_ticks_at_the_floor() -> None:
    assert tick_gap([], rate=BUSY) == pacing.MIN_TICK_GAP


def test_the_gap_keeps_lists_to_a_fifth_of_what_a_window_sustains() -> None:
    # 60 left for 60 s: one request a second is sustainable, lists get one in five.
    assert tick_gap([Window("minute", 60, 60, 60)], rate=BUSY) == pytest.approx(5)


def test_the_gap_stretches_as_a_window_runs_low() -> None:
    gaps = [tick_gap([Window("minute", left, 40, 60)], rate=BUSY) for left in (60, 30, 10, 4)]
    assert gaps == sorted(gaps) and gaps[0] < gaps[-1]


def test_a_spent_window_holds_ticks_until_it_resets() -> None:
    assert tick_gap([Window("minute", 0, 17, 60)]) == 17
    assert tick_gap([Window("minute", 1, 17, 60)], rate=BUSY) == 17  # never past the reset


def test_the_hour_and_day_windows_bind_too() -> None:
    minute = Window("minute", 60, 59, 60)
    hour_low = Window("hour", 100, 1800, 3000)
    assert tick_gap([minute], rate=BUSY) < 6
    assert tick_gap([minute, hour_low], rate=BUSY) == pytest.approx(1800 / 20)
    day_low = Window("day", 200, 40000, 50000)
    assert tick_gap([minute, day_low], rate=BUSY) == pytest.approx(40000 / 40)
    # A low window stretches the gap even at a modest pace: 0.1/s > 100/1800.
    assert tick_gap([minute, hour_low], rate=0.1) == pytest.approx(1800 / 20)


def test_recent_rate_counts_our_requests() -> None:
    times = [float(t) for t in range(100, 130)]  # one a second for 30 s
    assert pacing.recent_rate(times, now=130) == pytest.approx(1)
    assert pacing.recent_rate(times, now=200) == 0


def test_the_account_rate_is_read_off_the_counters_alike_by_every_sharer() -> None:
    # Three users, one request each a second: the counter fell by 3 between our answers.
    samples = [DropSample(float(t), 3, span=1.0) for t in range(101, 131)]
    assert pacing.account_rate(samples, now=130) == pytest.approx(3)
    # A drop over a long pause counts for the part of it inside the span.
    assert pacing.account_rate([DropSample(130, 60, span=60.0)], now=130) == pytest.approx(1)
    assert pacing.account_rate(samples, now=200) == 0


# --- spacing of requests -----------------------------------------------------------------


def test_plenty_left_sends_at_once() -> None:
    assert request_delay(Window("minute", 40, 30, 60)) == 0


def test_the_last_quarter_is_spread_from_the_last_answer() -> None:
    assert request_delay(Window("minute", 10, 30, 60)) == pytest.approx(3)
    assert request_delay(Window("minute", 10, 28, 60, age=2)) == pytest.approx(1)


def test_sharers_space_alike_in_the_last_quarter_and_keep_a_reserve() -> None:
    # The spacing depends only on the shared counter and reset, never on how many
    # sharers each one estimates: so all of them send at one pace.
    alone = request_delay(Window("minute", 14, 30, 60))
    shared = request_delay(Window("minute", 14, 30, 60), share_count=3)
    assert shared == alone == pytest.approx(30 / 14)
    # Down to the reserve three sharers keep: wait for the reset.
    assert request_delay(Window("minute", 6, 30, 60), share_count=3) == 30


# --- sharing one key ---------------------------------------------------------------------


def test_alone_the_counter_falls_by_our_own_requests() -> None:
    assert sharers([DropSample(0, 1), DropSample(1, 1)], now=2) == 1


def test_others_on_the_key_show_as_a_faster_fall() -> None:
    assert sharers([DropSample(0, 3), DropSample(1, 3), DropSample(2, 3)], now=3) == 3
    assert 2 < sharers([DropSample(0, 3), DropSample(1, 3), DropSample(2, 2)], now=3) < 3


def test_a_reconciler_a_burst_left_behind_does_not_think_it_has_dozens_of_sharers() -> None:
    # Two answers 1.5 s apart while another reconciler burst 16 requests in between.
    assert sharers([DropSample(0.5, 2), DropSample(2.0, 17, span=1.5)], now=3) < 6


def test_answers_far_apart_do_not_count_towards_the_sharers() -> None:
    assert sharers([DropSample(0, 3, span=15.0), DropSample(15, 4, span=15.0)], now=16) == 1


def test_one_burst_of_another_user_does_not_make_us_give_up_our_share() -> None:
    assert sharers([DropSample(0, 3), DropSample(1, 44), DropSample(2, 3)], now=3) == 3


def test_old_samples_are_forgotten() -> None:
    assert sharers([DropSample(0, 3)], now=pacing.SHARER_MEMORY_SECONDS + 1) == 1


def test_our_budget_is_the_tightest_window_less_the_sharers_reserve() -> None:
    windows = [Window("minute", 59, 60, 60), Window("hour", 30, 3600, 3000)]
    assert our_budget(windows) == 30
    # Not divided by the sharers: each one estimates them differently, and whoever
    # divided by more would plan fewer creates for good. Spacing shares the window.
    assert our_budget(windows, share_count=3) == 30 - 6
    assert our_budget([]) is None


def test_the_limiter_learns_of_other_users_from_the_headers() -> None:
    limiter = RateLimiter()
    for step, remaining in enumerate((57, 54, 51, 48)):  # three users, one request each
        limiter.observe(
            {"RateLimit": _state((remaining, 50 - step)), "RateLimit-Policy": POLICY},
            now=10.0 + step,
        )
    assert limiter.sharers(13.0) == pytest.approx(3)
    assert limiter.company(13.0) is Company.SHARED
    assert limiter.budget(13.0) == 48 - 6


def test_a_long_pause_says_nothing_about_other_users() -> None:
    limiter = RateLimiter()
    limiter.observe({"RateLimit": _state((59, 59)), "RateLimit-Policy": POLICY}, now=1.0)
    # 30 s later the counter fell by 20: could be anyone's requests over that time.
    limiter.observe({"RateLimit": _state((39, 29)), "RateLimit-Policy": POLICY}, now=31.0)
    assert limiter.sharers(31.0) == 1


def test_the_limiter_stretches_the_gap_once_requests_come_fast() -> None:
    limiter = RateLimiter()
    for step in range(20):  # 20 requests in 10 s: 2 a second, more than the day sustains
        limiter.observe(
            {"RateLimit": _state((59 - step, 60 - step // 2)), "RateLimit-Policy": POLICY},
            now=step / 2,
        )
    assert limiter.tick_gap(10.0) > 5
    assert limiter.tick_gap(100.0) == pacing.MIN_TICK_GAP  # quiet since: ample again


def test_a_window_that_reset_since_is_whole_again() -> None:
    limiter = RateLimiter()
    limiter.observe(
        {"RateLimit": _state((0, 10), day=(50000, 3600)), "RateLimit-Policy": POLICY}, now=0.0
    )
    assert limiter.tick_gap(5.0) == pytest.approx(5)  # the spent minute's reset
    assert limiter.windows(10.0)[0].remaining == 60
    assert limiter.windows(10.0)[0].reset_in == pytest.approx(60)


# --- the debouncer asks for the gap each time --------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_early_tick_is_held_while_the_gap_grew_since_it_was_scheduled() -> None:
    clock, gap = _Clock(), [1.0]
    debounce = Debouncer(clock, delay=0.5, min_gap=lambda: gap[0])
    debounce.started()
    assert debounce.poke() == pytest.approx(1.0)
    gap[0] = 6.0  # that tick spent most of the window
    clock.now += 1.0
    assert debounce.hold() == pytest.approx(5.0)
    clock.now += 5.0
    assert debounce.hold() == 0 and debounce.fire() is True


# --- a tick that used every create slot asks for the next one ------------------------------


def _report(creates: int, budget: int | None, waiting: int = 100, deferred: int = 0) -> TickReport:
    report = TickReport(started_at=datetime(2026, 1, 1, tzinfo=UTC))
    inputs = {f"uid-{n}": CreateInputs() for n in range(waiting)}
    report.observation = Observation(
        pods=[], instances=[], rows=[], rate_budget=budget, create_inputs=inputs
    )
    report.planned = Counter({"Create": creates} if creates else {})
    report.deferred_creates = deferred
    return report


def test_a_tick_that_filled_its_create_slots_asks_for_another() -> None:
    settings = Settings.of(max_creates_per_tick=50)
    assert creates_capped(_report(50, None), settings)
    assert creates_capped(_report(7, 10), settings)  # the rate budget's share: 10 - 3
    assert creates_capped(_report(0, 3), settings)  # no slot at all while pods wait
    assert creates_capped(_report(20, None, deferred=5), settings)  # stopped mid-tick
    assert not creates_capped(_report(12, None, waiting=12), settings)  # all got one
    assert not creates_capped(_report(0, None, waiting=0), settings)


# --- fair from the first tick: who else spends the key -------------------------------


def test_a_drop_of_more_than_our_request_however_long_ago_means_company() -> None:
    # 15 s between two idle lists of ours; the counter fell by 3: two were someone else's.
    assert pacing.company([DropSample(15, 3, span=15.0)], observed_for=15, now=16) is (
        Company.SHARED
    )
    assert pacing.company([DropSample(15, 1, span=15.0)], observed_for=15, now=16) is (
        Company.UNPROVEN
    )
    assert pacing.company([DropSample(15, 1, span=15.0)], observed_for=61, now=61) is (
        Company.ALONE
    )
    # Company seen over a minute ago is forgotten.
    late = 15 + pacing.SHARER_MEMORY_SECONDS + 1
    assert pacing.company([DropSample(15, 3, span=15.0)], observed_for=late, now=late) is (
        Company.ALONE
    )


def test_with_company_the_tightest_window_is_spaced_evenly_from_its_first_request() -> None:
    minute, hour = Window("minute", 60, 60, 60), Window("hour", 3000, 3600, 3000)
    assert next_request_delay([minute, hour], who=Company.ALONE) == 0
    assert next_request_delay([minute, hour], who=Company.UNPROVEN) == 0
    assert next_request_delay([minute, hour], who=Company.SHARED) == pytest.approx(1.0)
    # Spacing the hour or the day evenly would cap a burst at 50 or 35 a minute: only the
    # tightest window is spaced, the others in their last quarter as before.
    day = Window("day", 50000, 86400, 50000)
    assert next_request_delay([minute, hour, day], who=Company.SHARED) == pytest.approx(1.0)


def test_unproven_bursts_the_first_half_of_the_tightest_window() -> None:
    assert next_request_delay([Window("minute", 31, 40, 60)], who=Company.UNPROVEN) == 0
    assert next_request_delay([Window("minute", 30, 40, 60)], who=Company.UNPROVEN) == (
        pytest.approx(40 / 30)
    )
    assert next_request_delay([Window("minute", 30, 40, 60)], who=Company.ALONE) == 0


def test_the_limiter_sees_company_between_idle_lists_through_the_longer_windows() -> None:
    limiter = RateLimiter()
    # Two idle lists 15 s apart that straddle a minute's reset: the hour still tells.
    limiter.observe(
        {"RateLimit": _state((50, 5), hour=(2990, 3000)), "RateLimit-Policy": POLICY}, now=0.0
    )
    assert limiter.company(0.0) is Company.UNPROVEN
    limiter.observe(
        {"RateLimit": _state((57, 50), hour=(2987, 2985)), "RateLimit-Policy": POLICY},
        now=15.0,
    )
    assert limiter.company(15.0) is Company.SHARED
    assert limiter.sharers(15.0) == 1  # 15 s apart: no count of sharers from it
    assert limiter.delay(15.0) == pytest.approx(50 / 57)  # the minute, spaced


def test_the_limiter_calls_the_key_ours_after_a_minute_of_our_own_drops() -> None:
    limiter = RateLimiter()
    for step in range(5):
        limiter.observe(
            {"RateLimit": _state((59 - step, 60 - 15 * step)), "RateLimit-Policy": POLICY},
            now=15.0 * step,
        )
    assert limiter.company(60.0) is Company.ALONE


# --- the gap does not depend on the time of day --------------------------------------


def _contract_windows(minute_left: int, minute_reset: float, day_reset: float) -> list[Window]:
    return [
        Window("minute", minute_left, minute_reset, 60, 60),
        Window("hour", 2900, 1800, 3000, 3600),
        Window("day", 49000, day_reset, 50000, 86400),
    ]


def test_late_in_a_day_with_much_left_the_busy_gap_is_the_same_as_at_midnight() -> None:
    # A day with 49 000 left and an hour to go sustains 13 a second, but lists may still
    # take only a fifth of the day's quota rate: one every 86 400 / (50 000 x 0.2) s.
    day_floor = 86400 / (50000 * pacing.LIST_SHARE)
    for day_reset in (3600.0, 60.0):
        assert tick_gap(_contract_windows(50, 40, day_reset), rate=1.0) == pytest.approx(day_floor)


def test_lists_keep_to_a_fifth_of_our_requests_when_the_minute_sets_the_gap() -> None:
    # A key whose minute is its tightest window: its floor is 5 s, which for a trickle of
    # a create every 2 s would make lists 2 in 7 of the requests.
    windows = [Window("minute", 50, 40, 60, 60), Window("day", 10**6, 80000, 10**6, 86400)]
    assert tick_gap(windows, rate=1.0) == pytest.approx(60 / (60 * pacing.LIST_SHARE))
    gap = tick_gap(windows, rate=1.0, work_rate=0.5)
    lists_share = (1 / gap) / (1 / gap + 0.5)
    assert lists_share <= pacing.LIST_SHARE + 1e-9
    # A burst of work: the quota's floor, not the cap, sets the pace.
    assert tick_gap(windows, rate=1.0, work_rate=2.0) == pytest.approx(5.0)
    # Nothing but lists while busy: the cap, so that a new pod still gets a tick soon.
    assert tick_gap(windows, rate=1.0, work_rate=0.0) == pacing.BUSY_GAP_CAP


def test_an_ample_quota_ignores_the_work_rate() -> None:
    windows = [Window("minute", 600, 30, 600, 60), Window("day", 10**6, 80000, 10**6, 86400)]
    assert tick_gap(windows, rate=0.5, work_rate=0.0) == pacing.MIN_TICK_GAP


def test_the_limiter_counts_lists_apart_from_the_work() -> None:
    limiter = RateLimiter()
    minute_only = '"minute";q=60;w=60, "day";q=1000000;w=86400'
    for step in range(20):  # a list and a create every 2 s: 1 request a second
        limiter.observe(
            {
                "RateLimit": f'"minute";r={58 - step};t={58 - step}, "day";r=999000;t=80000',
                "RateLimit-Policy": minute_only,
            },
            now=float(step),
            tick_list=step % 2 == 0,
        )
    assert limiter.tick_gap(19.5) == pytest.approx(pacing.BUSY_GAP_CAP)


def test_no_tick_starts_while_its_list_would_be_held_back() -> None:
    assert pacing.gap_until_sendable(8.0, since_last_list=14.0, delay=0.0) == 8.0
    # The last tick began 14 s ago and the window resets in 10 s: 24 s from that start.
    assert pacing.gap_until_sendable(8.0, since_last_list=14.0, delay=10.0) == 24.0
    limiter = RateLimiter()
    limiter.observe(
        {"RateLimit": _state((0, 10)), "RateLimit-Policy": POLICY}, now=0.0, tick_list=True
    )
    assert limiter.tick_gap(4.0) == pytest.approx(10.0)


def test_a_tick_held_for_a_reset_may_start_soon_after_it_when_the_key_is_shared() -> None:
    # Sharers, and a minute spent down to the reserve at our last tick's list.
    limiter = RateLimiter()
    for step, remaining in enumerate((12, 9, 6)):
        limiter.observe(
            {"RateLimit": _state((remaining, 10 - step)), "RateLimit-Policy": POLICY},
            now=float(step),
            tick_list=step == 2,
        )
    assert limiter.company(2.0) is Company.SHARED
    # The earliest next start (from the last tick's start, about its list) is the reset,
    # then one spacing of the fresh window (a second); it does not move on as we ask.
    earliest = [2.0 + limiter.tick_gap(now) for now in (3.0, 10.5, 11.0, 14.0)]
    assert 10.0 <= earliest[0] <= 11.0
    assert earliest[1] == pytest.approx(11.0)
    assert earliest[2] <= 11.0 and earliest[3] <= 14.0


def test_a_key_that_is_ours_alone_is_spent_at_once() -> None:
    assert next_request_delay([Window("minute", 5, 40, 60)], who=Company.ALONE) == 0
    assert next_request_delay([Window("minute", 5, 40, 60)], who=Company.UNPROVEN) > 0


# --- a wait for a window's reset is counted from the last tick ------------------------------


def test_a_wait_for_the_reset_counts_from_the_last_tick_not_from_now() -> None:
    # The minute is spent and resets in 17 s; the last tick began 10 s ago: the next one
    # may start 27 s after it, at the reset, not 17 s after it (7 s before the reset).
    assert tick_gap([Window("minute", 0, 17, 60)], since_last_tick=10.0) == 27
    low = [Window("minute", 1, 17, 60, 60)]
    assert tick_gap(low, rate=BUSY, since_last_tick=10.0) == 27  # never past the reset
    # A spacing (not a reset) is an interval between ticks: the same however long ago.
    windows = [Window("minute", 60, 60, 60, 60)]
    assert tick_gap(windows, rate=BUSY, since_last_tick=3.0) == pytest.approx(5)


def test_a_tick_that_could_plan_nothing_does_not_list_before_the_reset() -> None:
    """Busy, with 3 requests left in a minute that resets 20 s after our last tick's list:
    asked 8 s later, the next tick may start at the reset (20 s after the last), not 12 s
    after it, when it would find the same 3 requests and spend one on its list."""
    minute_only = '"minute";q=60;w=60'
    limiter = RateLimiter()
    for step, remaining in enumerate((8, 7, 6, 5, 4, 3)):  # a request a second
        limiter.observe(
            {"RateLimit": f'"minute";r={remaining};t={25 - step}', "RateLimit-Policy": minute_only},
            now=float(step - 5),
            tick_list=remaining == 3,
        )
    assert limiter.delay(8.0) == 0  # the list itself would not be held
    assert limiter.tick_gap(8.0) == pytest.approx(20.0)
    clock = _Clock()
    clock.now = 0.0
    debounce = Debouncer(clock, delay=0.5, min_gap=lambda: limiter.tick_gap(clock.now))
    debounce.started()
    clock.now = 8.0
    assert debounce.poke() == pytest.approx(12.0)  # at the reset
