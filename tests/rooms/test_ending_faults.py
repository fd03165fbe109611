"""A race's outcome across a fault between the writes that decide it.

A race ends in several writes: the event that ends its last racer's race (a finish, a
forfeit when the grace runs out, or at the time limit one ``timeout`` per racer still
playing, each its own compare-and-append), then the ``race_over``, then its archive.
It begins in several too: the note, the countdown, the start instant. Redis failing
between two of them, or the node dying there (the only node: nobody will ask for the
room again), must still give the outcome the rules give — the race ends once, every
racer's end stored once, the first finisher first, the result archived and accepted
by ``solrace verify`` — not a race that hangs until its keys expire, or one decided
twice. (docs/design.md, "Faults"; the resign's own window is in test_fault_windows.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from solrace.protocol import race_id
from solrace.protocol.views import EventType, RacerStatus
from solrace.race.events import RoomEvent
from solrace.rooms import lobby
from solrace.rooms.node import Node
from solrace.rooms.records import unpack, unpack_event
from solrace.rooms.room import LiveRoom
from solrace.store.errors import StoreUnavailable
from solrace_client.results import SavedResult
from solrace_client.verify import verify_result

from tests.net.conftest import SOLVABLE_SECRET
from tests.support.faults import Clock, Crashed, StoreFaults
from tests.support.race import archived_result, winning_moves

from .conftest import Backend, FakePeer, lobby_of_two
from .test_core import _Race, _race_on
from .test_fault_windows import GRACE_S, _poll, _stored

#: The races here are private: a node dead, nothing but the note written before the
#: countdown and the race_over (Store.mark_unarchived) leads the next node to them — a
#: listed room its sweep would find by the listing too.
_PRIVATE = True
#: Where the fault strikes: Redis fails the write (nothing written, the node lives), or
#: the node dies at it (it writes nothing more; the next node must find the room).
FAULTS = ["redis fails", "node dies"]


def _cut_at(node: Node, when: Callable[[RoomEvent], bool], *, dies: bool) -> list[list[RoomEvent]]:
    """At the node's first append of an event ``when`` accepts, note what Redis holds
    of the room then, and fail the append as an unreachable Redis would (nothing
    written) — or, ``dies``, kill the node there (that call raises Crashed and the node's
    store answers nothing more, as a dead process's). The list holds the room's
    stored events once the cut has happened: the test checks where it struck."""
    faults = StoreFaults(node.store) if dies else None
    store = node.store
    real = store.append_event
    held: list[list[RoomEvent]] = []

    async def cut(room_id: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if held or not when(unpack_event(data)):
            return await real(room_id, data, *args, **kwargs)
        held.append([unpack_event(e.data) for e in await store.events_since(room_id, 0)])
        if faults is not None:
            faults.down = True
            raise Crashed()
        raise StoreUnavailable("append_event: Redis is down (injected)")

    setattr(store, "append_event", cut)  # noqa: B010 (a method of the instance)
    return held


def _timeout_of(racer: int) -> Callable[[RoomEvent], bool]:
    return lambda ev: (
        ev.t == EventType.PROGRESS
        and ev.d["status"] == RacerStatus.TIMEOUT
        and ev.d["racer"] == racer
    )


def _of_type(kind: str) -> Callable[[RoomEvent], bool]:
    return lambda ev: ev.t == kind


def _ends(events: list[RoomEvent]) -> list[tuple[int, str]]:
    """(racer, how) of every stored event that ends a racer's race."""
    ended = []
    for ev in events:
        if ev.t == EventType.PROGRESS and ev.d["status"] != RacerStatus.PLAYING:
            ended.append((int(ev.d["racer"]), str(ev.d["status"])))
        elif ev.t == EventType.RACER_LEFT:
            ended.append((int(ev.d["racer"]), "left"))
    return ended


async def _held(held: list[list[RoomEvent]]) -> list[list[RoomEvent]]:
    return held


async def _next_node_ends(
    backend: Backend, clock: Clock, dead: Node, room: LiveRoom, race: _Race
) -> dict[str, Any]:
    """``dead`` was killed and nobody asks for the room again: the next node must find
    it by itself (its sweep, once the dead node's lease has lapsed), end the race if it
    is not ended, and archive it. Returns the archived result."""
    await dead.stop()
    nxt = await backend.node(clock=clock)
    await nxt.store.drop_lease(dead.node_id)  # what 5 s without renewal does
    await nxt.sweep_orphans()
    kept = await archived_result(nxt.store, race_id(room.room_id, race.commitment), timeout=10)
    return dict(unpack(kept)["result"])


async def _ended_once(node: Node, room: LiveRoom, race: _Race, result: dict[str, Any]) -> None:
    """What Redis holds agrees with ``result``: one race_over (its data), every racer's
    race ended exactly once, nothing but presence after the race_over; and the result
    is one ``solrace verify`` accepts."""
    stored = await _stored(node, room)
    kinds = [e.t for e in stored]
    assert kinds.count(EventType.RACE_OVER) == 1, kinds
    over_at = kinds.index(EventType.RACE_OVER)
    assert dict(stored[over_at].d) == result
    assert all(e.t == EventType.PRESENCE for e in stored[over_at + 1 :]), kinds[over_at:]
    ended = [racer for racer, _how in _ends(stored)]
    assert sorted(ended) == sorted(room.state.racers), _ends(stored)
    saved = SavedResult(
        race=race_id(room.room_id, race.commitment),
        room=room.room_id,
        settings=race.settings,
        result=result,
        published_commitment=race.commitment,
    )
    report = verify_result(saved)
    assert report.ok, report


def _statuses(result: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(s["name"], s["place"], s["status"]) for s in result["standings"]]


async def _ended_after(
    fault: str, backend: Backend, clock: Clock, node: Node, room: LiveRoom, race: _Race
) -> tuple[dict[str, Any], Node]:
    """The race's result once its cut is over, and a node to read the store with: the
    race_over Bob got from this node once Redis answered again, or, the node killed,
    the next node's archived result (_next_node_ends)."""
    if fault == "redis fails":
        over = await race.bob.until(lambda f: f.t == "race_over")
        return dict(over.d), node
    result = await _next_node_ends(backend, clock, node, room, race)
    return result, await backend.node()


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_time_limit_cut_between_its_timeouts_ends_the_race_once(
    backend: Backend, fault: str
) -> None:
    """At the time limit every racer still playing times out: one ``progress`` per
    racer, each its own compare-and-append, then the race_over. The fault strikes
    after Ann's timeout is stored, before Bob's. The race must still end — Bob timed out
    once, Ann once, one race_over — by this node once Redis answers, or by the next
    node, which finds the race (noted before its countdown) when nobody comes back."""
    clock = Clock()
    node = await backend.node(clock=clock)
    race = await _race_on(node, node, private=_PRIVATE)
    ann, bob = race.ann, race.bob
    room, bob_id = ann.room, bob.racer
    assert room is not None and bob_id is not None
    line = winning_moves(SOLVABLE_SECRET)
    assert (await ann.ask("move", seq=0, move=line[0])).t == "moved"
    held = _cut_at(node, _timeout_of(bob_id), dies=fault == "node dies")

    clock.advance(int(race.settings["time_limit_s"]) + 1, node)  # its timer fires now
    [before] = await _poll(lambda: _held(held), bool, "the timeouts were not cut")
    assert _ends(before) == [(ann.racer, RacerStatus.TIMEOUT)], _ends(before)  # between them

    result, reader = await _ended_after(fault, backend, clock, node, room, race)
    assert result["reason"] == "time_limit", result["reason"]
    statuses = {s["name"]: s["status"] for s in result["standings"]}
    assert statuses == {"Ann": RacerStatus.TIMEOUT, "Bob": RacerStatus.TIMEOUT}
    await _ended_once(reader, room, race, result)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("ending", ["finish", "forfeit", "resign"])
async def test_a_race_cut_between_its_last_racers_end_and_its_race_over_ends_once(
    backend: Backend, fault: str, ending: str
) -> None:
    """Bob resigned; Ann, the last racer playing, ends her race — she finishes (the
    move, its place and ``finished`` in one script), her grace runs out (a
    ``racer_left`` on the store's timer), or she resigns too (a ``progress``, its
    ``ok`` sent before the race_over) — and the race_over that follows is cut. The
    race ends once, with Ann's end as stored: her win stands (place 1), her forfeit
    or her resignation does; a finish's ``moved`` was sent and is in the result."""
    clock = Clock()
    node = await backend.node(clock=clock)
    race = await _race_on(node, node, private=_PRIVATE)
    ann, bob = race.ann, race.bob
    room, ann_id = ann.room, ann.racer
    assert room is not None and ann_id is not None
    line = winning_moves(SOLVABLE_SECRET)
    assert (await bob.ask("resign")).t == "ok"
    for seq, move in enumerate(line[:-1]):
        assert (await ann.ask("move", seq=seq, move=move)).t == "moved"
    held = _cut_at(node, _of_type(EventType.RACE_OVER), dies=fault == "node dies")

    if ending == "finish":
        with contextlib.suppress(Crashed):  # the node may die in the move's own tick
            await ann.ask("move", seq=len(line) - 1, move=line[-1])
        acked = [f for f in ann.frames if f.t == "moved" and f.d["seq"] == len(line) - 1]
        assert [f.d["status"] for f in acked] == ["finished"]  # sent before the race_over
    elif ending == "resign":
        with contextlib.suppress(Crashed):  # the node may die in the resign's own tick
            assert (await ann.ask("resign")).t == "ok"  # stored: the race_over follows it
    else:
        ann.closed = True  # her connection drops; the node records her offline
        await lobby.disconnected(node, ann)
        clock.advance(GRACE_S + 1, node)  # her grace runs out: the timer forfeits her
    [before] = await _poll(lambda: _held(held), bool, "the race_over was not cut")
    ann_end = {"finish": RacerStatus.FINISHED, "resign": RacerStatus.RESIGNED}.get(ending, "left")
    assert _ends(before)[-1] == (ann_id, ann_end), _ends(before)
    assert not any(e.t == EventType.RACE_OVER for e in before)

    result, reader = await _ended_after(fault, backend, clock, node, room, race)
    if ending == "finish":
        assert _statuses(result) == [("Ann", 1, "finished"), ("Bob", 2, "resigned")]
        assert result["standings"][0]["log"] == line
    else:
        assert {s["name"]: s["status"] for s in result["standings"]} == {
            "Ann": RacerStatus.LEFT if ending == "forfeit" else RacerStatus.RESIGNED,
            "Bob": RacerStatus.RESIGNED,
        }
    await _ended_once(reader, room, race, result)


@pytest.mark.parametrize("dies", ["after its countdown", "at its start instant"])
async def test_a_race_whose_lone_node_dies_as_it_begins_begins_on_the_next_one(
    backend: Backend, dies: str
) -> None:
    """A start is the note, the countdown, then what follows it (the room's expiry
    and listing); the race begins at its start instant, another write. The only node
    dies after the countdown is stored, before it begins. Its racers reconnect to the
    next node and resume: the race must begin there (not wait in its countdown for
    ever), each racer gets its board, and it is raced and ends once."""
    clock = Clock()
    node = await backend.node(clock=clock)
    ready = await lobby_of_two(node)
    ann, created, joined, room = ready.ann, ready.created, ready.joined, ready.room
    settings = dict(created.d["snapshot"]["settings"])  # type: ignore[index]
    faults = StoreFaults(node.store)
    crashed: list[str] = []
    if dies == "after its countdown":
        real = node.store.settle_expiry  # the countdown's first write after its own

        async def dying(*args: Any, **kwargs: Any) -> Any:
            if not crashed:
                crashed.append("settle_expiry")
                faults.down = True
                raise Crashed()
            return await real(*args, **kwargs)

        setattr(node.store, "settle_expiry", dying)  # noqa: B010
        with contextlib.suppress(Crashed):
            await ann.ask("start")
    else:
        held = _cut_at(node, _of_type(EventType.STARTED), dies=True)
        assert (await ann.ask("start")).t == "ok"
        await _poll(lambda: _held(held), bool, "the start instant was not cut")
        crashed.append("started")
    assert crashed
    stored = [e.t for e in await _stored(await backend.node(clock=clock), room)]
    assert EventType.COUNTDOWN in stored and EventType.STARTED not in stored, stored
    await node.stop()

    nxt = await backend.node(clock=clock)
    clock.advance(1, nxt)  # past the start instant (a countdown of 0.1 s)
    ann2, bob2 = FakePeer(nxt), FakePeer(nxt)
    for peer, entry in ((ann2, created), (bob2, joined)):
        resumed = await peer.ask("resume", room=room.room_id, token=str(entry.d["token"]))
        assert resumed.t == "joined", resumed.d
        assert resumed.d["snapshot"]["phase"] == "racing", resumed.d["snapshot"]  # type: ignore[index]
        assert resumed.d["snapshot"]["you"]["board"], resumed.d["snapshot"]  # type: ignore[index]
    countdown = next(e for e in await _stored(nxt, room) if e.t == EventType.COUNTDOWN)
    commitment = str(countdown.d["commitment"])
    line = winning_moves(SOLVABLE_SECRET)
    for seq, move in enumerate(line):
        assert (await ann2.ask("move", seq=seq, move=move)).t == "moved"
    assert (await bob2.ask("resign")).t == "ok"
    over = await bob2.until(lambda f: f.t == "race_over")
    assert _statuses(dict(over.d)) == [("Ann", 1, "finished"), ("Bob", 2, "resigned")]
    race = _Race(ann2, bob2, settings, commitment)
    await _ended_once(nxt, nxt.rooms[room.room_id], race, dict(over.d))
    kept = await archived_result(nxt.store, race_id(room.room_id, commitment))
    assert unpack(kept)["result"] == over.d
