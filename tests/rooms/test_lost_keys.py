"""A key of a live room that Redis lost alone, its event stream whole.

A Redis whose ``maxmemory-policy`` evicts keys (or an operator's ``DEL``) can take one
key of a room and leave the rest: the version key or the chain key, which only cache
the stream's last entry for the next append (docs/store.md, "Lost writes"). Without
its chain key, the next event was stored with no link to the one before, and the
rebuild that found it re-checked that stored link against its own state, found it
broken again and rebuilt again, without end: RecursionError, some 20,000 log lines
in 5 s, moves refused ``wrong_phase``, no resync sent. Without its version key every
append tried id ``0-1`` on a stream at 12: every move ``internal``, a resync a second,
for ever (an audit, both reproduced on a real server). A lost key is a lost write: it
is announced once (logged, counted, a ``resync`` to the room's clients), the key is
restored from the stream, and the race goes on to its one winner.
"""

from __future__ import annotations

import logging

import pytest
from solrace.rooms.counters import Tally
from solrace.rooms.node import Node

from tests.support.race import winning_moves

from .conftest import SOLVABLE_SECRET, Backend
from .test_core import _race_on

LOST = "Redis lost acknowledged writes: resynchronising clients"


async def _lose(node: Node, room_id: str, key: str) -> None:
    """What eviction does to one of the room's keys (``overwritten``: a chain key that
    names another event, so the next event is stored with a broken link)."""
    keys = node.store.keys.room(room_id)
    redis = node.store._redis  # the keys as Redis itself could leave them
    if key == "ver":
        assert await redis.delete(keys.ver) == 1
    elif key == "chain":
        assert await redis.delete(keys.chain) == 1
    else:
        await redis.set(keys.chain, "overwritten")


@pytest.mark.parametrize("first", ["move", "decision"])
@pytest.mark.parametrize("key", ["ver", "chain", "overwritten"])
async def test_a_room_key_lost_alone_is_one_resync_and_the_race_goes_on(
    backend: Backend, caplog: pytest.LogCaptureFixture, key: str, first: str
) -> None:
    """Ann and Bob race; one key of the room is lost; the next write is a move of
    Ann's (``append_move``) or Bob resigning (a decision: ``append_event``). It is
    accepted, each racer gets one ``resync``, the loss is logged and counted once with
    no log storm, Ann's moves after it are accepted, and she alone wins."""
    caplog.set_level(logging.INFO)
    node = await backend.node()
    race = await _race_on(node, node)
    ann, bob, room = race.ann, race.bob, race.room
    moves = winning_moves(SOLVABLE_SECRET)
    for seq in range(3):
        assert (await ann.ask("move", seq=seq, move=moves[seq])).t == "moved"
    caplog.clear()
    await _lose(node, room.room_id, key)

    if first == "decision":
        assert (await bob.ask("resign")).t == "ok"
    for seq in range(3, len(moves)):
        reply = await ann.ask("move", seq=seq, move=moves[seq])
        assert reply.t == "moved", (seq, reply.d)
    assert reply.d["status"] == "finished"
    if first == "move":
        assert (await bob.ask("resign")).t == "ok"
    over = await bob.until(lambda f: f.t == "race_over")

    standings = over.d["standings"]
    assert [s["name"] for s in standings] == ["Ann", "Bob"]  # type: ignore[index]
    assert [s.get("place") for s in standings].count(1) == 1  # type: ignore[union-attr]
    for peer in (ann, bob):
        assert len([f for f in peer.frames if f.t == "resync"]) == 1, peer.frames
    assert isinstance(node.metrics, Tally)
    assert node.metrics.lost_writes.value == 1
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count(LOST) == 1, messages
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert len(caplog.records) < 50, f"{len(caplog.records)} log records: {messages[:20]}"
    # The keys cache the stream's last entry again.
    head = (await node.store.events_since(room.room_id, room.state.version - 1))[-1]
    assert await node.store.version(room.room_id) == head.version == room.state.version
    assert room.chain == head.chain
