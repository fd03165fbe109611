"""A room its racers keep rematching in lives as long as they do (each rematch gives it
its day back), so whatever it keeps per round must be dropped with the rounds its
rematches trim (docs/store.md, "A room's history": the room keeps its last two rounds,
"however many it runs"). A resource audit: two of the room's hashes kept something
of every round it had ever run.

- ``closed``: a racer whose race ends before it moved (it resigned at once, timed
  out, left, or was gone past its grace) has its log closed by name, but the log was
  never written, so it is not in the room's key set — and the trim deletes only the
  closed marks of the key set's members (append_event.lua). Two marks a round here.
- ``tokens``: every racer who ever joined the room keeps its token digest, long after
  it left and its rounds were trimmed; each ``join`` and ``resume`` reads the whole
  hash (Store.racer_for_token: HGETALL and a compare per entry, written for "a
  handful of racers").
"""

from __future__ import annotations

from typing import Any

import pytest
from solrace.rooms.node import Node

from .conftest import Backend, FakePeer

#: Rounds the room runs: each with a newcomer who leaves once it is over. Kept whole,
#: the room would hold 2 × ROUNDS closed marks and ROUNDS + 1 tokens.
ROUNDS = 8


async def _hash(node: Node, key: str) -> dict[str, str]:
    raw: Any = node.store._redis
    table: dict[Any, Any] = await raw.hgetall(key)
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode() if isinstance(v, bytes) else str(v)
        )
        for k, v in table.items()
    }


async def _rounds_with_a_newcomer_each(node: Node, rounds: int) -> str:
    """The host's room runs ``rounds`` races: in each a new guest joins, both resign
    before moving, the guest leaves and the host rematches. Returns the room id."""
    host = FakePeer(node)
    created = await host.ask("create", variant="yukon", name="Host", deals="random")
    assert created.t == "joined", created.d
    code, room_id = str(created.d["code"]), str(created.d["room"])
    for n in range(rounds):
        guest = FakePeer(node)
        joined = await guest.ask("join", code=code, name=f"Guest{n}")
        assert joined.t == "joined", joined.d
        assert (await guest.ask("ready", ready=True)).t == "ok"
        assert (await host.ask("start")).t == "ok"
        await guest.until(lambda f: f.t == "started")
        assert (await guest.ask("resign")).t == "ok"
        assert (await host.ask("resign")).t == "ok"
        await host.until(lambda f: f.t == "race_over")
        assert (await guest.ask("leave")).t == "ok"
        host.frames.clear()
        assert (await host.ask("rematch")).t == "ok"
        await host.until(lambda f: f.t == "room_reset")
    return room_id


@pytest.mark.parametrize("backend", ["redis", "embedded"], indirect=True)
async def test_a_room_rematched_round_after_round_keeps_only_its_last_rounds_marks_and_tokens(
    backend: Backend,
) -> None:
    node = await backend.node()
    room_id = await _rounds_with_a_newcomer_each(node, ROUNDS)
    room = node.rooms[room_id]
    keys = node.store.keys.room(room_id)
    closed = await _hash(node, keys.closed)
    logs = {field: keys.round_of(field) for field in closed if field not in ("revealed", "ended")}
    # The rematches trimmed every round before the last two (the current one is
    # room.state.round, its lobby): none of their logs may still be marked closed.
    stale = sorted(f for f, r in logs.items() if r is None or r < room.state.round - 1)
    assert not stale, (
        f"after {ROUNDS} rounds the room's closed hash holds {len(closed)} fields,"
        f" {len(stale)} of them marks of trimmed rounds' logs (e.g. {stale[:3]})"
    )
    # The host's, and the last round's guest's (gone as the rematch was decided: the
    # next rematch deletes it). Not one token per racer the room ever had.
    tokens = await _hash(node, keys.tokens)
    assert len(tokens) <= 2, (
        f"after {ROUNDS} rounds with one racer each joining and leaving, the room's"
        f" tokens hash holds {len(tokens)} digests (one per racer it ever had)"
    )
