"""limits.py: the constants the docs promise, and the token bucket with time passed in."""

from __future__ import annotations

import pytest
from solrace.protocol import limits
from solrace.protocol.errors import RateLimited
from solrace.protocol.limits import TokenBucket


def test_documented_values() -> None:
    assert limits.MAX_FRAME_BYTES == 16 * 1024 == limits.CLIENT_FRAME_LIMITS.max_frame_bytes
    assert limits.SUBPROTOCOL == "solrace.v1"
    assert limits.SUPPORTED_SUBPROTOCOLS[0] == limits.SUBPROTOCOL
    assert (limits.RATE_PER_S, limits.RATE_BURST) == (20.0, 40.0)
    assert (limits.MIN_RACERS, limits.MAX_RACERS, limits.DEFAULT_MAX_RACERS) == (2, 8, 4)
    assert limits.DEFAULT_TIME_LIMIT_S == 900
    assert limits.DEFAULT_SPECTATOR_DELAY_S == 0
    assert len(set(limits.ROOM_CODE_ALPHABET)) == len(limits.ROOM_CODE_ALPHABET)
    assert not set("01IO") & set(limits.ROOM_CODE_ALPHABET)


def test_server_frames_may_be_bigger_than_client_frames() -> None:
    c, s = limits.CLIENT_FRAME_LIMITS, limits.SERVER_FRAME_LIMITS
    assert s.max_frame_bytes == limits.MAX_SERVER_FRAME_BYTES > c.max_frame_bytes
    assert s.max_depth > c.max_depth and s.max_array_len > c.max_array_len


def test_a_full_bucket_allows_the_burst_then_refuses() -> None:
    bucket = TokenBucket(now=100.0)
    assert all(bucket.take(100.0) for _ in range(40))
    assert not bucket.take(100.0)


def test_the_bucket_refills_at_the_rate() -> None:
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    for _ in range(40):
        bucket.take(0.0)
    assert not bucket.take(0.0)
    assert bucket.take(0.05)  # 0.05 s × 20/s = one token
    assert not bucket.take(0.05)
    assert bucket.tokens(1.05) == pytest.approx(20.0)


def test_sustained_rate_is_allowed_forever() -> None:
    bucket = TokenBucket(now=0.0)
    assert all(bucket.take(i / 20) for i in range(10_000))


def test_the_bucket_never_holds_more_than_the_burst() -> None:
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    assert bucket.tokens(3600.0) == 40
    assert sum(bucket.take(3600.0) for _ in range(100)) == 40


def test_a_refused_message_costs_nothing() -> None:
    bucket = TokenBucket(now=0.0, rate=1, burst=1)
    assert bucket.take(0.0)
    for _ in range(100):
        assert not bucket.take(0.5)
    assert bucket.take(1.0)


def test_a_clock_stepping_back_refills_nothing() -> None:
    bucket = TokenBucket(now=10.0, rate=20, burst=2)
    bucket.take(10.0)
    bucket.take(10.0)
    assert not bucket.take(5.0)
    assert not bucket.take(10.0)  # and going back then forth gains nothing either
    assert bucket.take(10.05)


def test_cost_is_taken_whole_or_not_at_all() -> None:
    bucket = TokenBucket(now=0.0, rate=1, burst=5)
    assert bucket.take(0.0, cost=4)
    assert not bucket.take(0.0, cost=2)
    assert bucket.tokens(0.0) == 1


def test_require_raises_rate_limited() -> None:
    bucket = TokenBucket(now=0.0, rate=1, burst=1)
    bucket.require(0.0)
    with pytest.raises(RateLimited) as info:
        bucket.require(0.0)
    assert info.value.close_code == 1008


@pytest.mark.parametrize(("rate", "burst"), [(0, 10), (-1, 10), (10, 0.5)])
def test_nonsense_buckets_are_refused(rate: float, burst: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(now=0.0, rate=rate, burst=burst)


# ------------------------------------------------------------------ stalls (busy/idle)
def _pipelined(bucket: TokenBucket, start: float, seconds: float, pace: float) -> int:
    """Frames sent at ``pace``/s from ``start`` for ``seconds`` while the server is
    busy (not reading), then read at once: how many the bucket lets through."""
    bucket.busy(start)
    bucket.idle(start + seconds)
    sent = round(seconds * pace)
    return sum(bucket.take(start + seconds) for _ in range(sent))


def test_frames_queued_at_a_legal_pace_during_a_stall_are_not_a_burst() -> None:
    """A 3 s stall of a racer pipelining at 15/s: 45 frames read at once. Before, the
    bucket held at most the burst (40) and the racer was closed."""
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    assert _pipelined(bucket, 0.0, 3.0, 15) == 45


def test_a_flood_during_a_stall_is_still_refused() -> None:
    """What the stall earned (3 s × 20/s) on top of the burst, and not one more."""
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    bucket.busy(0.0)
    bucket.idle(3.0)
    assert sum(bucket.take(3.0) for _ in range(500)) == 40 + 60


def test_a_long_stall_keeps_at_most_stall_s_worth() -> None:
    bucket = TokenBucket(now=0.0, rate=20, burst=40, stall_s=5)
    bucket.busy(0.0)
    bucket.idle(3600.0)
    assert bucket.tokens(3600.0) == 40 + 5 * 20


def test_tokens_kept_past_the_burst_expire_after_keep_s() -> None:
    bucket = TokenBucket(now=0.0, rate=20, burst=40, keep_s=2)
    bucket.busy(0.0)
    bucket.idle(3.0)
    assert bucket.tokens(4.9) == 100
    assert bucket.tokens(5.1) == 40


def test_idle_time_earns_nothing_past_the_burst() -> None:
    """Only time the server spends not reading counts: a client that waits does not
    bank a burst."""
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    bucket.busy(0.0)
    bucket.idle(1.0)  # 60 held until 3.0
    assert bucket.tokens(2.9) == 60
    assert bucket.tokens(3600.0) == 40


def test_short_busy_periods_do_not_add_up_to_a_burst() -> None:
    """Each busy period may take the bucket past the burst by what it earned, not by
    what the ones before it earned too: a client whose requests each keep the server
    busy for 0.5 s never holds more than the burst plus one period's worth."""
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    now = 0.0
    for _ in range(100):
        bucket.busy(now)
        now += 0.5
        bucket.idle(now)
        now += 0.01
    assert bucket.tokens(now) <= 40 + 0.5 * 20 + 1


def test_busy_time_refills_a_spent_bucket() -> None:
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    for _ in range(40):
        bucket.take(0.0)
    bucket.busy(0.0)
    bucket.idle(1.0)
    assert bucket.tokens(1.0) == 20


# ---------------------------------------------------------------------- work (debt)
def test_charged_work_goes_into_debt_and_says_how_long_to_wait() -> None:
    bucket = TokenBucket(now=0.0, rate=10, burst=40)
    bucket.charge(0.0, 30)
    assert bucket.wait_s(0.0) == 0
    bucket.charge(0.0, 30)
    assert bucket.tokens(0.0) == -20
    assert bucket.wait_s(0.0) == pytest.approx(2.0)
    assert bucket.wait_s(2.0) == 0
    assert not bucket.take(1.0)  # in debt, nothing is taken


def test_replay_costs() -> None:
    """A full replay costs 20 units: 20× a ping, as measured; a resume with a full
    replay fits in a fresh connection's work burst, so an honest reconnect never
    waits."""
    assert limits.replay_cost(limits.MAX_REPLAY_EVENTS) == 20
    assert limits.replay_cost(0) == 0
    full_resume = limits.RESUME_COST + limits.replay_cost(limits.MAX_REPLAY_EVENTS)
    assert full_resume <= limits.WORK_BURST
    assert limits.LISTING_COST > 1


def test_a_stall_of_the_event_loop_counts_as_busy_time() -> None:
    """A session waiting for a frame while the whole loop stalled (net/stalls.py)."""
    bucket = TokenBucket(now=0.0, rate=20, burst=40)
    assert bucket.take(0.5)
    bucket.stalled(1.0, 4.0)
    assert sum(bucket.take(4.0) for _ in range(200)) == 40 + 60  # full again at 1.0
    bucket.stalled(1.0, 4.0)  # the same stall again: already counted
    assert not bucket.take(4.0)
