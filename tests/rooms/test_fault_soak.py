"""Whole races under random store faults: a seeded walk, so a failure replays.

The other fault tests each put one fault at one chosen point between the writes of a
decision. This one lets chance choose, many times over one race: two nodes on one
store, three racers (Ann and Cy on node A, Bob on node B) racing the known deal, each
playing its winning line at its own random pace, while every store call of either node
fails with probability FAULT_RATE — half of them before Redis runs the command (nothing
done), half after (done, the reply lost: the node cannot tell which). Racers do what
the protocol asks of a client: a move refused ``unavailable`` is sent again with the
same ``seq`` and move; now and then a racer's connection drops and it resumes on the
other node (again after ``unavailable``, and once the time a ``rate_limited`` refusal
names has passed: a racer resumes RESUME_BURST times in a row, then once every
RESUME_INTERVAL_S, and at about sixteen drops a racer in a second or two these racers
go past it; the shared clock jumps that far instead of the test waiting). Once every
racer has sent its last move the faults stop, and the race must end by itself.

Whatever the schedule, what must hold:

- every request gets exactly one reply (FakePeer.ask), and a move never gets anything
  but ``moved`` or ``unavailable``;
- each racer's stored move log is its winning line, each move once, and every move it
  was told ``moved`` for is in it at its ``seq``;
- the race ends with everyone finished (an outage shorter than the grace forfeits
  nobody), places 1..3, and the finishes are placed in the order they were stored: the
  first finisher is first;
- ``solrace verify`` accepts the result.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from solrace.protocol import race_id
from solrace.protocol.views import EventType, RacerStatus
from solrace.rooms import lobby
from solrace.rooms.node import Node
from solrace.rooms.records import log_name, unpack_entries, unpack_event
from solrace.store import Store
from solrace.store.errors import StoreUnavailable
from solrace_client.results import SavedResult
from solrace_client.verify import verify_result

from tests.support.faults import STORE_CALLS, Clock
from tests.support.race import winning_moves

from .conftest import (
    SOLVABLE_SECRET,
    Backend,
    FakePeer,
    SoakRacer,
    room_seen,
    seated_and_started,
    stored_seen,
)

#: The share of store calls that fail while the faults are on.
FAULT_RATE = 0.03
#: The chance that a racer's connection drops before one of its moves.
DROP_RATE = 0.03
#: Scenarios per backend and loop (each a seed of the walk); SOLRACE_SOAK_SEEDS=200
#: runs a longer soak.
SEEDS = range(int(os.environ.get("SOLRACE_SOAK_SEEDS", "3")))


class RandomFaults:
    """Makes ``store``'s calls fail at random while ``on``: before the command runs or
    after it (its reply lost). Counts what it did."""

    def __init__(self, store: Store, rng: random.Random) -> None:
        self.rng = rng
        self.on = False
        self.before = 0
        self.after = 0
        for name in STORE_CALLS:
            setattr(store, name, self._wrap(name, getattr(store, name)))

    def _wrap(self, name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        @functools.wraps(call)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.on or self.rng.random() >= FAULT_RATE:
                return await call(*args, **kwargs)
            if self.rng.random() < 0.5:
                self.before += 1
                raise StoreUnavailable(f"{name}: Redis unreachable (injected)")
            await call(*args, **kwargs)
            self.after += 1
            raise StoreUnavailable(f"{name}: reply lost (injected)")

        return wrapper


@dataclass
class Racer(SoakRacer):
    drops: int = 0


async def _ask_until_answered(peer: FakePeer, t: str, **d: Any) -> Any:
    """Send request ``t`` again while it is refused ``unavailable``."""
    while True:
        reply = await peer.ask(t, **d)
        if reply.t != "error" or reply.d["code"] != "unavailable":
            return reply
        await asyncio.sleep(0.01)


async def _drop_and_resume(
    racer: Racer, to: Node, room_id: str, clock: Clock, nodes: tuple[Node, Node]
) -> None:
    """The racer's connection drops (its node sees it close); it resumes on ``to`` —
    after the time a ``rate_limited`` refusal names, as a client waits it (the clock
    jumps it: the racer resumed too often)."""
    old = racer.peer
    await lobby.disconnected(old.node, old)
    old.closed = True
    racer.peer = FakePeer(to)
    while True:
        reply = await _ask_until_answered(racer.peer, "resume", room=room_id, token=racer.token)
        if reply.t != "error" or reply.d["code"] != "rate_limited":
            break
        clock.advance(int(reply.d["retry_after_ms"]) / 1000, *nodes)
    assert reply.t == "joined", f"{racer.name}'s resume: {reply.d}"
    racer.drops += 1


async def _play(
    racer: Racer,
    moves: list[str],
    nodes: tuple[Node, Node],
    room_id: str,
    rng: random.Random,
    clock: Clock,
) -> None:
    seq = 0
    while seq < len(moves):
        await asyncio.sleep(rng.uniform(0, 0.004))
        if rng.random() < DROP_RATE:
            other = nodes[1] if racer.peer.node is nodes[0] else nodes[0]
            await _drop_and_resume(racer, other, room_id, clock, nodes)
        reply = await racer.peer.ask("move", seq=seq, move=moves[seq])
        if reply.t == "moved":
            racer.acked.append((seq, moves[seq]))
            seq += 1
            continue
        assert reply.d["code"] == "unavailable", f"{racer.name}, move {seq}: {reply.d}"


async def _seen(a: Node, b: Node, room_id: str) -> str:
    """What each node and Redis hold of the room: for a failure's message."""
    lines = [room_seen(node, room_id) for node in (a, b)]
    lines.append(await stored_seen(a.store, room_id))
    return "; ".join(lines)


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_race_under_random_store_faults_ends_with_its_first_finisher_first(
    backend: Backend, seed: int
) -> None:
    rng = random.Random(seed)
    clock = Clock()
    a, b = await backend.node(clock), await backend.node(clock)
    faults = [RandomFaults(node.store, random.Random(rng.random())) for node in (a, b)]
    ann, bob, cy = (Racer("Ann", FakePeer(a)), Racer("Bob", FakePeer(b)), Racer("Cy", FakePeer(a)))
    room = await seated_and_started((ann, bob, cy))
    room_id, settings = room.room_id, room.settings
    moves = winning_moves(SOLVABLE_SECRET)

    for fault in faults:
        fault.on = True
    await asyncio.gather(
        *(
            _play(r, moves, (a, b), room_id, random.Random(rng.random()), clock)
            for r in (ann, bob, cy)
        )
    )
    for fault in faults:
        fault.on = False
    before, after = sum(f.before for f in faults), sum(f.after for f in faults)
    drops = sum(r.drops for r in (ann, bob, cy))
    print(f"seed {seed}: {before} calls failed before Redis, {after} after; {drops} drops")
    assert before + after > 0, "no fault was injected: the walk proves nothing"

    try:
        over = await ann.peer.until(lambda f: f.t == "race_over", timeout=20)
    except TimeoutError:
        seen = await _seen(a, b, room_id)
        raise AssertionError(f"seed {seed}: the race did not end: {seen}") from None
    standings = {s["name"]: s for s in over.d["standings"]}  # type: ignore[union-attr]
    assert {n: s["status"] for n, s in standings.items()} == dict.fromkeys(
        ("Ann", "Bob", "Cy"), RacerStatus.FINISHED
    ), f"seed {seed}: {over.d}"
    assert sorted(s["place"] for s in standings.values()) == [1, 2, 3]

    store = a.store
    stored = [unpack_event(e.data) for e in await store.events_since(room_id, 0)]
    finishes = [e for e in stored if e.t == EventType.FINISHED]
    assert [e.d["place"] for e in finishes] == [1, 2, 3], f"seed {seed}: {finishes}"
    by_racer = {r.racer: r.name for r in (ann, bob, cy)}
    for e in finishes:
        assert standings[by_racer[e.racer]]["place"] == e.d["place"]

    for racer in (ann, bob, cy):
        raw = await store.move_log(room_id, log_name(1, racer.racer))
        log = [move for move, _at in unpack_entries(raw)]
        assert log == moves, f"seed {seed}: {racer.name}'s log"
        for seq, move in racer.acked:
            assert log[seq] == move

    saved = SavedResult(
        race=race_id(room_id, room.commitment),
        room=room_id,
        settings=settings,
        result=dict(over.d),
        published_commitment=room.commitment,
    )
    report = verify_result(saved)
    assert report.ok, f"seed {seed}: {report}"
