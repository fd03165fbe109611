"""Fixtures for the client's non-UI tests: the real server cluster of tests/net (real
Redis and the embedded store), an isolated config directory, and finished races — a
real one played by two bots, and a synthetic one built with the engine (deterministic,
no server) for the tests that only need the data."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from solrace.protocol import commitment
from solrace.race.fairness import round_salt, round_seed
from solrace.rules import deal
from solrace.rules.log import apply_entry
from solrace_client.bot import BotHooks, run_bot
from solrace_client.results import finished_race, write_result

from tests.net.conftest import SOLVABLE_SECRET, Cluster, cluster_on
from tests.support.frames import clients_keep_every_frame  # noqa: F401  (fixture)
from tests.support.race import winning_moves

#: The deal of round 1 of the cluster's fixed room secret (the greedy bot wins it).
SEED = round_seed(SOLVABLE_SECRET, 1)
SALT = round_salt(SOLVABLE_SECRET, 1)
YUKON: dict[str, Any] = {
    "variant": "yukon",
    "options": {},
    "max_racers": 4,
    "time_limit_s": 900,
    "private": False,
    "spectator_delay_s": 0,
    "quick": False,
}


@pytest.fixture(params=["embedded"])
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    """The servers of tests/net, on the embedded store only: the store a user's server
    runs on unless told otherwise. A client cannot tell one store from another (the
    protocol is the same over each); the server's behaviour on every store is tested in
    tests/net and tests/rooms. Every store here tripled the client tests' CPU, on a
    suite CPU-bound on CI's two cores."""
    async with cluster_on(request.param, tmp_path) as c:
        yield c


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test saves races, tokens and names in its own directory."""
    path = tmp_path / "config"
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", str(path))
    monkeypatch.delenv("SOLRACE_SERVER", raising=False)
    yield path


def _standing(place: int, racer: int, name: str, log: list[str], status: str) -> dict[str, Any]:
    """A racer's standing whose moves came a second apart, from 1 s after the start."""
    board = deal("yukon", SEED)
    times, reached = [], None
    for i, entry in enumerate(log):
        before = board.foundation_count()
        apply_entry(board, entry)
        times.append(1_000 * (i + 1))
        if board.foundation_count() != before:
            reached = times[-1]
    return {
        "place": place,
        "racer": racer,
        "name": name,
        "status": status,
        "foundation": board.foundation_count(),
        "moves": board.move_count,
        "score": board.score,
        "elapsed_ms": times[-1] if status == "finished" else None,
        "reached_ms": reached,
        "log": log,
        "times": times,
    }


def synthetic_result() -> dict[str, Any]:
    """A finished two-racer Yukon race built with the engine: Ann wins with the test
    solver's moves, Bob resigns after ten of them (with an undo in between)."""
    moves = winning_moves(SOLVABLE_SECRET)
    bob = [*moves[:6], "undo", moves[5], *moves[6:10]]
    return {
        "reason": "all_done",
        "seed": SEED,
        "salt": SALT,
        "commitment": commitment(SEED, SALT),
        "standings": [
            _standing(1, 1, "Ann", moves, "finished"),
            _standing(2, 2, "Bob", bob, "resigned"),
        ],
    }


@pytest.fixture
def synthetic_race(config_dir: Path) -> Path:
    """The synthetic race, saved as the bot and the UI save races."""
    result = synthetic_result()
    return write_result(
        finished_race("r_synthetic", result, YUKON, "SYN123", published_commitment=None)
    )


async def bot_entered(
    url: str | list[str], hooks: BotHooks | None = None, **bot_args: Any
) -> tuple[asyncio.Task[dict[str, Any]], dict[str, Any]]:
    """``run_bot(url, **bot_args)`` (with ``hooks``) as a task, once it is in its room:
    the task, whose result is the race's, and the ``joined`` reply of its entry (the
    room's code for another racer, its racer id and room)."""
    joined: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    hooks = dataclasses.replace(hooks or BotHooks(), joined=joined.set_result)
    task = asyncio.create_task(run_bot(url, hooks=hooks, **bot_args))
    return task, await asyncio.wait_for(joined, 10)


async def bot_race(url: str, **bot_args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two bots quick-race on ``url`` (the second joins the first's quick room, which
    starts when both are ready). Returns the first bot's race_over and joined reply."""
    first, reply = await bot_entered(url, quick_variant="yukon", name="Ann", rng_seed=1, **bot_args)
    second = asyncio.create_task(
        run_bot(url, quick_variant="yukon", name="Bob", strategy="random", rng_seed=2, **bot_args)
    )
    async with asyncio.timeout(30):
        result, other = await asyncio.gather(first, second)
    assert result == other
    return result, reply
