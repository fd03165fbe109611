"""A Redis that stalls between two racers' finishes (docs/deploy.md, "A Redis far
away, and a Redis that stalls"): Ann's node reaches Redis through a proxy
(tests/support/flaky_link.py) that stalls, Bob's directly."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from solrace.rooms.counters import Tally
from solrace.rooms.node import Node
from solrace.store import Store

from tests.net.conftest import SOLVABLE_SECRET
from tests.rooms.conftest import Backend
from tests.rooms.test_core import _race_on, _verified
from tests.support.flaky_link import FlakyLink
from tests.support.race import winning_moves
from tests.support.redis import REDIS_URL


@pytest.fixture
async def redis_backend(tmp_path: Path) -> AsyncIterator[Backend]:
    b = Backend("redis", tmp_path / "engine")
    try:
        yield b
    finally:
        await b.close()


async def _far_node(backend: Backend, proxy: FlakyLink) -> Node:
    """A node on the backend's prefix whose store is reached through ``proxy``."""
    url = urllib.parse.urlsplit(REDIS_URL)
    far = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
    node = Node(
        await Store.connect(far, prefix=backend.prefix),
        room_secret=lambda: SOLVABLE_SECRET,
        candidates_in_flight=1,
        countdown_ms=100,
    )
    node.start()
    backend.nodes.append(node)  # stopped and closed with the backend
    return node


async def test_a_stall_between_two_finishes_leaves_one_winner(redis_backend: Backend) -> None:
    """Ann's finishing move is checked first, then held 1.5 s by a stall of her node's
    Redis link (every connection, new ones too); meanwhile Bob finishes on the other
    node. Bob is stored first: he wins, and Ann, stored after him, is second at his
    time (a later place never shows a faster time), and `solrace verify` passes."""
    url = urllib.parse.urlsplit(REDIS_URL)
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        ann_node = await _far_node(redis_backend, proxy)
        race = await _race_on(ann_node, await redis_backend.node())
        ann, bob = race.ann, race.bob
        moves = winning_moves(SOLVABLE_SECRET)
        for peer in (ann, bob):
            for seq, move in enumerate(moves[:-1]):
                assert (await peer.ask("move", seq=seq, move=move)).d["status"] == "playing"
        proxy.stall(seconds=1.5, new_too=True)
        ann_last = asyncio.create_task(ann.ask("move", seq=len(moves) - 1, move=moves[-1]))
        await asyncio.sleep(0.2)  # Ann's finish checked, its script held by the stall
        assert not ann_last.done()
        bob_last = await bob.ask("move", seq=len(moves) - 1, move=moves[-1])
        assert bob_last.t == "moved" and bob_last.d["status"] == "finished", bob_last.d
        last = await asyncio.wait_for(ann_last, 10)
        assert last.t == "moved" and last.d["status"] == "finished", last.d
        over = await ann.until(lambda f: f.t == "race_over", timeout=10)
    standings = over.d["standings"]
    assert isinstance(standings, list)
    assert [(s["name"], s["place"]) for s in standings] == [("Bob", 1), ("Ann", 2)]
    assert standings[1]["elapsed_ms"] == standings[0]["elapsed_ms"], standings
    assert [len(s["log"]) for s in standings] == [len(moves), len(moves)]
    counted = ann_node.metrics
    assert isinstance(counted, Tally) and counted.finishes_floored.value == 1
    report = _verified(race, over)
    assert report.ok, report.failures
