"""The room-core benchmark at a tiny scale: both stores and both regimes report every
figure, the run's keys are gone afterwards, and the instruction count is the difference
of two real callgrind runs. Shape and sanity, not a measurement (docs/performance.md has the
figures)."""

from __future__ import annotations

import asyncio
import logging
import random

import redis.asyncio as redis
from solrace.bench.core import REGIMES, ROOM_SIZE, instructions_per_move, random_line, run
from solrace.bench.runkeys import CORE_FAMILY, run_prefix
from solrace.net.main import AUTO, resolve_loop
from solrace.race import RacerGame

from tests.support.redis import REDIS_URL


async def _keys(prefix: str) -> int:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        return len([key async for key in client.scan_iter(match=f"{prefix}*")])
    finally:
        await client.aclose()


def test_a_tiny_run_reports_every_figure_on_both_stores_and_leaves_no_key() -> None:
    """The run's own keys are gone: those of its prefix. Every ``solrace-bench-core:``
    key was counted before, and another run's — a benchmark killed on the same Redis,
    or running meanwhile — failed this test (a CI run, 4,674 keys of a killed one)."""
    logging_before = logging.root.manager.disable
    prefix = run_prefix(CORE_FAMILY)
    result = run(REDIS_URL, rooms=1, moves=3, prefix=prefix)
    assert logging.root.manager.disable == logging_before  # the caller's logging is back
    assert result["benchmark"] == "core" and result["callgrind"] is False
    assert (result["rooms"], result["room_size"], result["moves_per_racer"]) == (1, ROOM_SIZE, 3)
    for store in ("redis", "embedded"):
        for regime in REGIMES:
            figures = result[store][regime]
            assert figures["moves"] == ROOM_SIZE * 3, (store, regime)  # every move accepted
            # each move: its reply, and its progress event to 4 racers and the spectator
            assert figures["frames_per_move"] >= 6, (store, regime)
            assert figures["cpu_us_per_move"] > 0 and figures["bytes_per_move"] > 0
            assert "instructions_per_move" not in figures  # only with --callgrind
    assert asyncio.run(_keys(prefix)) == 0


def test_instructions_per_move_is_the_difference_of_two_callgrind_runs() -> None:
    """Two child runs under valgrind (1 and 3 moves a racer): a count per move of the
    order of the core's (about a million instructions; the imports, tens of times
    that, cancel out)."""
    per_move = instructions_per_move(REDIS_URL, 1, 3, "sequential", resolve_loop(AUTO), short=1)
    assert 100_000 < per_move < 10_000_000


def test_a_shorter_run_plays_the_first_moves_of_the_longer_runs_lines() -> None:
    """Both callgrind runs of a setting work the lines out to the longer run's length
    (so that choosing moves cancels out of their difference): that only holds if a
    line's first moves do not depend on how long it is worked out."""
    short = random_line(RacerGame("yukon", 42, {}), 10, random.Random(7))
    long = random_line(RacerGame("yukon", 42, {}), 40, random.Random(7))
    assert len(short) == 10 and len(long) > 10
    assert long[:10] == short
