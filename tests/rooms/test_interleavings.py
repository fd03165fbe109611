"""Two coroutines interleaved at an ``await`` — of one node, or two nodes deciding about
one room at once: what one read before a store call must still hold when it acts after
it, or be checked again (the store's compare-and-append sends a decision made on a
stale room back to decide again). Each test holds one store call at a chosen point,
runs the other coroutine meanwhile (a timer, another racer's request, a rematch, the
other node's decision), then lets the first go on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import pytest
from solrace.protocol import race_id
from solrace.protocol.envelope import Envelope
from solrace.protocol.limits import MIN_TIME_LIMIT_S
from solrace.protocol.views import EventType, Phase, RacerStatus
from solrace.rooms import lobby, requests
from solrace.rooms.node import Node
from solrace.rooms.records import unpack, unpack_event
from solrace.rooms.room import LiveRoom
from solrace.store import Store
from solrace.store.errors import StoreUnavailable

from tests.net.conftest import SOLVABLE_SECRET
from tests.support.faults import Clock
from tests.support.race import archived_result, winning_moves

from .conftest import Backend, FakePeer
from .test_core import _race_on
from .test_fault_windows import GRACE_S, _poll, _replies, _stored, _storing_on, _value


class _Racing(NamedTuple):
    """A Klondike race of Ann and Bob on one node, Ann's first move (a draw from the
    stock) stored and her engine dropped, as a resume or an ``unavailable`` drops it:
    her next move rebuilds it from the store."""

    node: Node
    ann: FakePeer
    bob: FakePeer
    room: LiveRoom
    ann_id: int
    token: str


async def _racing_with_a_dropped_engine(
    backend: Backend, clock: Clock | None = None, **options: Any
) -> _Racing:
    node = await backend.node(clock)
    ann, bob = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="klondike", name="Ann", deals="random", **options)
    assert (await bob.ask("join", code=str(created.d["code"]), name="Bob")).t == "joined"
    room, ann_id = ann.room, ann.racer
    assert room is not None and ann_id is not None
    assert (await bob.ask("ready", ready=True)).t == "ok"
    assert (await ann.ask("start")).t == "ok"
    await ann.until(lambda _: room.state.phase == Phase.RACING)
    assert (await ann.ask("move", seq=0, move="D")).t == "moved"
    room.games.pop(ann_id)
    return _Racing(node, ann, bob, room, ann_id, str(created.d["token"]))


def _hold_the_first_log_read(node: Node) -> tuple[list[str], asyncio.Event]:
    """Hold the node's first move-log read, once it has read, until the gate opens;
    the list gets the number of entries it read."""
    move_log, gate = node.store.move_log, asyncio.Event()
    reads: list[str] = []

    async def held(*args: Any, **kwargs: Any) -> Any:
        raw = await move_log(*args, **kwargs)
        if not reads:
            reads.append(str(len(raw)))
            await gate.wait()
        return raw

    setattr(node.store, "move_log", held)  # noqa: B010 (a method of the instance)
    return reads, gate


async def test_an_engine_read_for_a_move_across_a_rematch_is_not_the_new_rounds(
    backend: Backend,
) -> None:
    """Ann's engine is rebuilt for her move (a resume, or an ``unavailable``, dropped
    it): its log is read, and before the read returns the time limit ends the race
    and Bob's rematch begins round 2. The move is refused (``wrong_phase``); the
    engine built from the read — round 1's log replayed on round 2's deal — must not
    be kept as round 2's. It was: round 2's start board showed a card drawn in round
    1, and her first move of round 2 was answered ``moved`` as the "retry" of that
    entry, which no log held (acknowledged, never stored: 4 of 4 runs)."""
    clock = Clock()
    race = await _racing_with_a_dropped_engine(backend, clock, time_limit_s=MIN_TIME_LIMIT_S)
    node, ann, bob, room, ann_id = race.node, race.ann, race.bob, race.room, race.ann_id
    move_log = node.store.move_log
    reads, gate = _hold_the_first_log_read(node)
    move = asyncio.ensure_future(ann.ask("move", seq=1, move="D"))
    await _poll(_value(reads), lambda got: got == ["1"], "Ann's engine read")
    setattr(node.store, "move_log", move_log)  # noqa: B010
    clock.advance(MIN_TIME_LIMIT_S + 1, node)  # the time limit: the timer ends the race
    await node.tick(room)  # both racers time out,
    await node.tick(room)  # then the race is over
    assert room.state.phase == Phase.FINISHED
    assert (await bob.ask("rematch")).t == "ok"
    assert room.state.round == 2
    gate.set()
    refused = await move
    assert (refused.t, refused.d.get("code")) == ("error", "wrong_phase"), refused.d

    assert (await bob.ask("ready", ready=True)).t == "ok"
    assert (await ann.ask("ready", ready=True)).t == "ok"
    assert (await ann.ask("start")).t == "ok"
    await ann.until(lambda _: room.state.phase == Phase.RACING and room.state.round == 2)
    assert await node.store.log_length(room.room_id, room.log_name(ann_id)) == 0
    first = await ann.ask("move", seq=0, move="D")
    assert (first.t, first.d.get("seq")) == ("moved", 0), first.d
    assert await node.store.log_length(room.room_id, room.log_name(ann_id)) == 1
    second = await ann.ask("move", seq=1, move="D")
    assert (second.t, second.d.get("seq")) == ("moved", 1), second.d
    assert not [f for f in ann.frames if f.t == "resync"]


async def test_a_move_resent_after_a_resume_is_not_acknowledged_from_a_move_in_flight(
    backend: Backend,
) -> None:
    """Ann's move 1 on her connection rebuilds her engine (an ``unavailable`` dropped
    it); before its log read returns she resumes on a new connection of the same node
    (her old one looks dead to her), whose snapshot rebuilds the engine too. The old
    move then goes on on that engine, and its append waits for Redis. Her client sends
    the move again on the new connection, as the protocol asks (its snapshot says
    ``next_seq`` 1). Redis then fails the old append (nothing stored). The new move's
    ``moved`` must mean stored: it was answered from the engine holding the old
    move in flight, as the "retry" of a stored move, and the log ended with 1 entry
    (4 of 4 runs). Now it waits for the old move's answer, then is checked and stored."""
    race = await _racing_with_a_dropped_engine(backend)
    node, ann, room, ann_id, token = race.node, race.ann, race.room, race.ann_id, race.token
    move_log, append_move = node.store.move_log, node.store.append_move
    read_gate, append_gate = asyncio.Event(), asyncio.Event()
    held: list[str] = []

    async def read_held(*args: Any, **kwargs: Any) -> Any:
        raw = await move_log(*args, **kwargs)
        if "read" not in held:
            held.append("read")
            await read_gate.wait()
        return raw

    async def append_failing(*args: Any, **kwargs: Any) -> Any:
        if "append" not in held:
            held.append("append")
            await append_gate.wait()
            raise StoreUnavailable("append_move: Redis is down (injected)")
        return await append_move(*args, **kwargs)

    setattr(node.store, "move_log", read_held)  # noqa: B010 (a method of the instance)
    setattr(node.store, "append_move", append_failing)  # noqa: B010
    old_move = asyncio.ensure_future(
        requests.handle(node, ann, Envelope("move", id=99, d={"seq": 1, "move": "D"}))
    )
    await _poll(_value(held), lambda got: got == ["read"], "the old move's engine read")
    again = FakePeer(node)
    resumed = await again.ask("resume", room=room.room_id, token=token)
    assert resumed.t == "joined", resumed.d
    assert resumed.d["snapshot"]["you"]["next_seq"] == 1  # type: ignore[index]
    read_gate.set()
    await _poll(_value(held), lambda got: got == ["read", "append"], "the old move's append")
    new_move = asyncio.ensure_future(again.ask("move", seq=1, move="D"))
    for _ in range(20):
        await asyncio.sleep(0)  # the new move runs as far as it can
    append_gate.set()
    await old_move
    reply = await new_move
    assert (reply.t, reply.d.get("seq")) == ("moved", 1), reply.d
    stored = await node.store.log_length(room.room_id, room.log_name(ann_id))
    assert stored == 2, f"'moved' answered, {stored} entries stored"


async def test_a_move_held_across_a_rematch_and_the_next_start_is_refused_quietly(
    backend: Backend,
) -> None:
    """As above, but the old move's read returns later still: Ann has resumed on a new
    connection meanwhile, and round 2's race has begun. The move, sent in round 1, is
    refused: it is judged on the racer as it was when it came (timed out, round 1's),
    never appended to round 2's log under round 1's sequence number, which the store
    would refuse as a log shorter than acknowledged: "lost writes", a resync for the
    whole room. (A guard: this interleaving was found safe.)"""
    clock = Clock()
    race = await _racing_with_a_dropped_engine(backend, clock, time_limit_s=MIN_TIME_LIMIT_S)
    node, ann, bob, room, ann_id = race.node, race.ann, race.bob, race.room, race.ann_id
    reads, gate = _hold_the_first_log_read(node)
    old_move = asyncio.ensure_future(
        requests.handle(node, ann, Envelope("move", id=99, d={"seq": 1, "move": "D"}))
    )
    await _poll(_value(reads), lambda got: got == ["1"], "Ann's engine read")
    clock.advance(MIN_TIME_LIMIT_S + 1, node)  # the time limit: the timer ends the race
    await node.tick(room)  # both racers time out,
    await node.tick(room)  # then the race is over
    assert room.state.phase == Phase.FINISHED
    assert (await bob.ask("rematch")).t == "ok"
    again = FakePeer(node)
    assert (await again.ask("resume", room=room.room_id, token=race.token)).t == "joined"
    assert (await bob.ask("ready", ready=True)).t == "ok"
    assert (await again.ask("ready", ready=True)).t == "ok"
    assert (await again.ask("start")).t == "ok"
    await again.until(lambda _: room.state.phase == Phase.RACING and room.state.round == 2)
    gate.set()
    ann.closed = False  # replaced: reopened to read the old move's one reply
    await old_move
    replies = [(f.t, f.d.get("code")) for f in ann.frames if f.id == 99]
    assert replies == [("error", "wrong_phase")], replies
    assert node.metrics.lost_writes.value == 0
    assert not [f for f in bob.frames + again.frames if f.t == "resync"]
    first = await again.ask("move", seq=0, move="D")
    assert (first.t, first.d.get("seq")) == ("moved", 0), first.d
    assert await node.store.log_length(room.room_id, room.log_name(ann_id)) == 1


async def test_two_rematches_decided_at_once_on_two_nodes_make_one_round(
    backend: Backend,
) -> None:
    """Ann (node A) and Bob (node B) ask for the rematch at once: B's reset is decided
    on the finished room and its write held until A's reset is stored. Both are
    answered ``ok``, and the room has one reset, one round 2, both racers in it
    (a guard: the store's compare-and-append sends B's decision back to the room as
    A left it, where the rematch is done)."""
    a, b = await backend.node(), await backend.node()
    race = await _race_on(a, b)
    ann, bob = race.ann, race.bob
    room_a, room_b = ann.room, bob.room
    assert room_a is not None and room_b is not None
    for peer in (ann, bob):
        assert (await peer.ask("resign")).t == "ok"
    await bob.until(lambda f: f.t == "race_over")
    replies: list[str] = []

    async def ann_rematch() -> None:
        replies.append((await ann.ask("rematch")).t)

    paused = _storing_on(b.store, EventType.ROOM_RESET, ann_rematch)
    replies.append((await bob.ask("rematch")).t)
    assert paused, "the rematches did not interleave"
    assert replies == ["ok", "ok"], replies
    stored = [e.t for e in await _stored(a, room_a)]
    assert stored.count(EventType.ROOM_RESET) == 1, stored
    await bob.until(lambda _: room_b.state.version == room_a.state.version)
    for room in (room_a, room_b):
        assert room.state.round == 2 and room.state.phase == Phase.LOBBY
        assert (
            sorted(room.state.racers) == sorted(room_a.state.racers) and len(room.state.racers) == 2
        )


def _versions(*rooms: LiveRoom) -> Callable[[], Awaitable[list[int]]]:
    """A probe of the versions the nodes have folded of one room."""

    async def probe() -> list[int]:
        return [room.state.version for room in rooms]

    return probe


def _race_over_held(store: Store, arrived: asyncio.Event, go: asyncio.Event) -> None:
    """Hold ``store``'s append of a race_over, once decided: say it ``arrived``, then
    wait for ``go`` before writing it."""
    append = store.append_event

    async def held(*args: Any, **kwargs: Any) -> Any:
        if unpack_event(args[1]).t == EventType.RACE_OVER and not arrived.is_set():
            arrived.set()
            await go.wait()
        return await append(*args, **kwargs)

    setattr(store, "append_event", held)  # noqa: B010 (a method of the instance)


async def test_two_nodes_ending_one_race_at_once_store_one_race_over(backend: Backend) -> None:
    """Ann (node A) and Bob (node B) have resigned; each node decides the race_over on
    the room as it was before the other's, and B's is stored first. A's compare-and-
    append must find the race ended: one race_over, the one both racers get once, its
    result archived and the room's note cleared — not a second end, nor one that
    differs from node to node."""
    a, b = await backend.node(), await backend.node()
    race = await _race_on(a, b)
    ann, bob = race.ann, race.bob
    room_a, room_b = ann.room, bob.room
    assert room_a is not None and room_b is not None
    a_decided, b_decided, b_stored = asyncio.Event(), asyncio.Event(), asyncio.Event()
    _race_over_held(a.store, a_decided, b_stored)  # A's waits until B's is stored
    _race_over_held(b.store, b_decided, a_decided)  # B's waits until A has decided its own
    assert (await ann.ask("resign")).t == "ok"
    assert (await bob.ask("resign")).t == "ok"  # B's tick decides the end; so does A's
    await asyncio.wait_for(b_decided.wait(), 10)
    await asyncio.wait_for(a_decided.wait(), 10)  # both decided before either is stored

    async def b_over() -> list[str]:
        return [e.t for e in await _stored(b, room_b) if e.t == EventType.RACE_OVER]

    await _poll(b_over, bool, "B's race_over")
    b_stored.set()
    over = await ann.until(lambda f: f.t == "race_over")
    await bob.until(lambda f: f.t == "race_over")
    await _poll(_versions(room_a, room_b), lambda v: v[0] == v[1], "the folds")
    stored = await _stored(a, room_a)
    assert [e.t for e in stored].count(EventType.RACE_OVER) == 1, [e.t for e in stored]
    assert [e.t for e in stored][-1] == EventType.RACE_OVER
    for peer in (ann, bob):
        assert [f.d for f in peer.frames if f.t == "race_over"] == [over.d]
    assert room_a.state.result == room_b.state.result == over.d
    kept = await archived_result(a.store, race_id(room_a.room_id, race.commitment))
    assert unpack(kept)["result"] == over.d
    await _poll(a.store.unarchived_rooms, lambda rooms: room_a.room_id not in rooms, "the note")


@pytest.mark.parametrize("first", ["resume first", "forfeit first"])
async def test_a_resume_racing_its_forfeit_on_another_node_is_one_or_the_other(
    backend: Backend, first: str
) -> None:
    """Bob's connection to node B dropped. Node A, whose clock says his grace is over,
    decides his forfeit while he resumes on B, whose clock (a moment behind) says it is
    not: each decided on the room as it was before the other. Whichever is stored
    first, the outcome is one of the rules': he is back, online, racing, and never
    forfeited by A's late decision; or he is gone from the race (``left``, his log
    closed) and his resume is refused ``bad_token`` saying why — never both, never a
    racer online on a connection the room does not hold."""
    clock_a, clock_b = Clock(), Clock()
    a, b = await backend.node(clock_a), await backend.node(clock_b)
    race = await _race_on(a, b)
    ann, bob = race.ann, race.bob
    room_a, room_b, bob_id = ann.room, bob.room, bob.racer
    assert room_a is not None and room_b is not None and bob_id is not None
    token = str((await bob.until(lambda f: f.t == "joined")).d["token"])
    line = winning_moves(SOLVABLE_SECRET)
    assert (await bob.ask("move", seq=0, move=line[0])).t == "moved"
    bob.closed = True
    await lobby.disconnected(b, bob)
    await ann.until(lambda f: f.t == "presence" and f.d == {"racer": bob_id, "online": False})
    clock_a.advance(GRACE_S + 1)  # A only: B's clock is behind A's, inside the grace
    again = FakePeer(b)
    replies: list[Envelope] = []

    async def resume() -> None:
        replies.extend(await _replies(again, "resume", room=room_b.room_id, token=token))

    async def forfeit() -> None:
        await a.tick(room_a)

    if first == "resume first":
        paused = _storing_on(a.store, EventType.RACER_LEFT, resume)
        await forfeit()
    else:
        paused = _storing_on(b.store, EventType.PRESENCE, forfeit)
        await resume()
    assert paused, "the decisions did not interleave"
    assert len(replies) == 1, [(f.t, dict(f.d)) for f in replies]
    await _poll(_versions(room_a, room_b), lambda v: v[0] == v[1], "the folds")
    stored = await _stored(a, room_a)
    left = [e for e in stored if e.t == EventType.RACER_LEFT]
    member = room_a.state.racers[bob_id]
    if first == "resume first":
        assert replies[0].t == "joined", replies[0].d
        assert not left, left
        assert member.online and member.conn == again.conn_id and room_b.racers[bob_id] is again
        await a.tick(room_a)  # A's clock stays past the old grace: Bob is online now
        assert not [e for e in await _stored(a, room_a) if e.t == EventType.RACER_LEFT]
        assert (await again.ask("move", seq=1, move=line[1])).t == "moved"
    else:
        assert (replies[0].t, replies[0].d["code"]) == ("error", "bad_token"), replies[0].d
        assert "grace" in str(replies[0].d["message"]), replies[0].d
        assert [e.d["reason"] for e in left] == ["grace"] and member.status == RacerStatus.LEFT
        assert not member.online and again.room is None and bob_id not in room_b.racers
        for seq, move in enumerate(line):  # Ann, the last racer racing, wins
            assert (await ann.ask("move", seq=seq, move=move)).t == "moved"
        over = await ann.until(lambda f: f.t == "race_over")
        standings = over.d["standings"]
        assert isinstance(standings, list)
        ends = [(s["name"], s["status"]) for s in standings]
        assert ends == [("Ann", "finished"), ("Bob", "left")], ends
