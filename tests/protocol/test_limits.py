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
