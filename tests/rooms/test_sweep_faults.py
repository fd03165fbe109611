"""The orphan sweep's own writes cut by a fault (docs/design.md, "Faults").

A node's sweep (Node.sweep_orphans) finishes what a dead node left half done: a listed
lobby everyone left, its node killed after the last leave, is settled — its logs and
join code given the room's ten minutes (Store.settle_expiry: the logs, then the code
in its own slot) and then unlisted: three writes. A race whose node died right after
its ``race_over`` is archived, unlisted and its logs given the room's hour. Redis
failing between those writes, or the sweeping node dying there, must leave the room
for the next sweep to finish — the listing (or the note the room awaits its archive)
goes last, so a room is never left listed with nobody to finish it — and nothing is
applied twice: the room's events stay as the dead node left them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from typing import Any, cast

import pytest
from solrace.protocol import race_id
from solrace.protocol.views import EventType
from solrace.race import decisions as d
from solrace.rooms import lobby
from solrace.rooms import node as node_module
from solrace.rooms.counters import Defect
from solrace.rooms.node import (
    EMPTY_ROOM_TTL_S,
    FINISHED_ROOM_TTL_S,
    ROOM_TTL_S,
    SWEEP_OUTAGE_ROOMS,
    Node,
    _last_race,
    _SweepFailures,
)
from solrace.rooms.records import pack_event, unpack, unpack_event
from solrace.rooms.room import LiveRoom
from solrace.store._lua import EXPIRE_CODE, SETTLE_EXPIRY, LuaScript
from solrace.store.errors import StoreClosed, StoreUnavailable

from tests.store.conftest import delete_room_keys, room_keys
from tests.support.faults import Clock, Crashed, StoreFaults
from tests.support.race import archived_result, winning_moves

from .conftest import SOLVABLE_SECRET, Backend, FakePeer, lobby_of_two
from .test_core import _Race, _race_on
from .test_fault_windows import GRACE_S, _all_between, _always, _dies_at, _poll, _ttls, _value
from .test_take_up_faults import FAULTS, _cut, _dead, _forfeited_once, _node, _sweep

#: A settle's writes in order (Store.settle_expiry); a cut strikes at one of them,
#: after those before it were made.
STEPS = ["its logs", "its code", "its unlisting"]
_SCRIPTS: dict[str, LuaScript] = {"its logs": SETTLE_EXPIRY, "its code": EXPIRE_CODE}


def _cut_settle(node: Node, step: str, fault: str) -> list[str]:
    """Cut ``node``'s next settle at ``step``: Redis fails that write (nothing written,
    the node lives), or the node dies there (it writes nothing more)."""
    if step == "its unlisting":
        return _cut(node, "unlist", fault)
    store, script = node.store, _SCRIPTS[step]
    faults = StoreFaults(store) if fault == "node dies" else None
    real = store._eval
    cut: list[str] = []

    async def cutting(called: LuaScript, *args: Any) -> Any:
        if called is script and not cut:
            cut.append(step)
            if faults is not None:
                faults.down = True  # killed: it writes nothing more
                raise Crashed()
            raise StoreUnavailable(f"{script.name}: Redis is down (injected)")
        return await real(called, *args)

    setattr(store, "_eval", cutting)  # noqa: B010 (a method of the instance)
    return cut


async def _events(node: Node, room: LiveRoom) -> list[tuple[int, bytes]]:
    """The room's stored events, as (version, bytes): what nothing may add to."""
    return [(e.version, e.data) for e in await node.store.events_since(room.room_id, 0)]


async def _ghost_lobby(
    backend: Backend, clock: Clock, name: str = "Bob", **settings: object
) -> LiveRoom:
    """A lobby (public unless ``settings`` say otherwise) its only racer left, its node
    killed right after the leave was stored and before what follows it (unlisted, its
    logs and code settled): a ghost that only a sweep can finish. Its node, the
    backend's newest, has a lease still current."""
    node = await _node(backend, clock)
    peer = FakePeer(node)
    created = await peer.ask("create", variant="yukon", name=name, **settings)
    assert created.t == "joined", created.d
    room = peer.room
    assert room is not None
    crashed = _dies_at(node, {"settle_expiry": _always})
    with contextlib.suppress(Crashed):
        await peer.ask("leave")
    assert crashed == ["settle_expiry"], crashed
    return room


async def _ghosts_and_sweeper(
    backend: Backend, clock: Clock, *names: str
) -> tuple[list[LiveRoom], Node]:
    """A :func:`_ghost_lobby` of each racer in ``names``, each on its own node, and the
    next node, every dead one's lease gone."""
    ghosts = [await _ghost_lobby(backend, clock, name) for name in names]
    sweeper = await _node(backend, clock)
    for dead in backend.nodes[: len(names)]:
        await _dead(dead, by=sweeper)
    return ghosts, sweeper


async def _after_ghost(backend: Backend, clock: Clock) -> tuple[Node, LiveRoom]:
    """:func:`_ghost_lobby`, and the next node, the dead one's lease gone."""
    room = await _ghost_lobby(backend, clock)
    sweeper = await _node(backend, clock)
    await _dead(backend.nodes[0], by=sweeper)
    assert room.room_id in await sweeper.store.listed_rooms()
    return sweeper, room


async def test_a_lobby_its_last_racer_left_as_its_node_died_is_unlisted_and_expires(
    backend: Backend,
) -> None:
    """Bob, alone in his public lobby, leaves: the ``racer_left`` sets the room's ten
    minutes in its own write, and its node is killed before the write that follows
    (unlisted, its logs and join code given the room's expiry). Nobody asks for the
    room again: the next node's sweep must finish it — no ghost lobby in the list, no
    join code kept for the day of its cap."""
    sweeper, room = await _after_ghost(backend, Clock())
    assert EventType.RACER_LEFT in [unpack_event(d).t for _v, d in await _events(sweeper, room)]
    await _sweep(sweeper)
    assert room.room_id not in await sweeper.store.listed_rooms()
    assert _all_between(await _ttls(sweeper, room), 0, EMPTY_ROOM_TTL_S)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("step", STEPS)
async def test_a_ghost_lobbys_settle_cut_by_a_fault_is_finished_by_the_next_sweep(
    backend: Backend, step: str, fault: str
) -> None:
    """The sweep settling a ghost lobby is cut before one of its three writes. The
    lobby stays listed (the listing goes last: what the next sweep goes by), and the
    next sweep — the same node's once Redis answers, or another node's once the
    sweeping node's lease is gone — finishes it: unlisted, its logs and join code on
    the room's ten minutes, no event added, the room not adopted."""
    clock = Clock()
    sweeper, room = await _after_ghost(backend, clock)
    events = await _events(sweeper, room)
    cut = _cut_settle(sweeper, step, fault)
    await _sweep(sweeper)
    assert cut, "the settle was not cut"
    finisher = sweeper
    if fault == "node dies":
        finisher = await _node(backend, clock)
        await _dead(sweeper, by=finisher)
    assert room.room_id in await finisher.store.listed_rooms(), "unlisted, yet unsettled"
    code_ms = (await _ttls(finisher, room))[finisher.store.keys.code(room.meta.code)]
    assert (code_ms > EMPTY_ROOM_TTL_S * 1000) is (step != "its unlisting"), code_ms

    await _sweep(finisher)
    assert room.room_id not in await finisher.store.listed_rooms()
    ttls = await _ttls(finisher, room)
    assert _all_between(ttls, 0, EMPTY_ROOM_TTL_S), ttls
    assert await _events(finisher, room) == events
    adopted = finisher.rooms.get(room.room_id)
    assert adopted is None or not adopted.served(), "a room everyone left was adopted"


async def test_a_ghost_lobby_whose_keys_expired_after_a_cut_leaves_the_listing(
    backend: Backend,
) -> None:
    """A sweep settled a ghost lobby's logs and code, then Redis failed its unlisting,
    and stayed down past the room's ten minutes: the room's keys are gone, its entry in
    the listing is not. The next sweep reads that entry: it must take it out, not skip
    it for ever (only a ``list`` took it out: with nobody listing, a room listed for
    good, and read by every sweep every minute)."""
    clock = Clock()
    sweeper, room = await _after_ghost(backend, clock)
    cut = _cut_settle(sweeper, "its unlisting", "redis fails")
    await _sweep(sweeper)
    assert cut and room.room_id in await sweeper.store.listed_rooms()
    await delete_room_keys(sweeper.store, room.room_id)  # what its ten minutes do
    sweeper.rooms.pop(room.room_id, None)  # forgotten idle, as a node does
    await _sweep(sweeper)
    assert room.room_id not in await sweeper.store.listed_rooms()


async def _race_over_then_killed(
    backend: Backend, clock: Clock, private: bool
) -> tuple[Node, Any, LiveRoom]:
    """A race (private or public) whose only node is killed right after it stored the
    race_over, before what follows it (the room unlisted and its logs given the
    room's hour, its result archived, its note cleared). Returns the node, the race,
    its room."""
    node = await _node(backend, clock)
    race = await _race_on(node, node, private=private)
    room = race.ann.room
    assert room is not None
    first = winning_moves(SOLVABLE_SECRET)[0]  # her log is a key of the room's set
    assert (await race.ann.ask("move", seq=0, move=first)).t == "moved"
    assert (await race.ann.ask("resign")).t == "ok"
    crashed = _dies_at(node, {"settle_expiry": _always, "save_result": _always})
    with contextlib.suppress(Crashed):
        await race.bob.ask("resign")
    assert crashed == ["settle_expiry"], crashed
    return node, race, room


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
async def test_a_race_whose_node_died_right_after_its_race_over_is_settled_by_the_next_sweep(
    backend: Backend, private: bool
) -> None:
    """The race_over is stored (with the room's hour), then the only node is killed
    before the writes that follow. The next node's sweep archived the race, but left
    the public race listed (behind the lobbies, until its keys expired an hour later
    and a ``list`` found it gone) and every room's logs on the day they had. The sweep
    that loads it finishes it: unlisted, its logs on the room's hour, its note cleared
    only then — the join code keeps its day (docs/store.md: a finished room its racers
    never left may still have a rematch)."""
    clock = Clock()
    dead, race, room = await _race_over_then_killed(backend, clock, private)
    nxt = await _node(backend, clock)
    await _dead(dead, by=nxt)
    stored = [unpack_event(e.data).t for e in await nxt.store.events_since(room.room_id, 0)]
    assert EventType.RACE_OVER in stored, stored
    assert (room.room_id in await nxt.store.listed_rooms()) is not private

    await _sweep(nxt)
    await archived_result(nxt.store, race_id(room.room_id, race.commitment), timeout=5)
    await _poll(nxt.store.unarchived_rooms, lambda ids: room.room_id not in ids, "the note")
    assert room.room_id not in await nxt.store.listed_rooms()
    code_key = nxt.store.keys.code(room.meta.code)
    ttls = await _ttls(nxt, room)
    code_ms = ttls.pop(code_key)
    assert _all_between(ttls, 0, FINISHED_ROOM_TTL_S), ttls
    assert FINISHED_ROOM_TTL_S * 1000 < code_ms <= ROOM_TTL_S * 1000, code_ms
    assert await room_keys(nxt.store, room.room_id)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("call", ["unlist", "clear_unarchived"])
async def test_a_sweep_settling_a_dead_nodes_race_over_cut_leaves_its_note_for_the_next(
    backend: Backend, call: str, fault: str
) -> None:
    """The sweep that finishes a race whose node died right after its race_over makes
    the race_over's writes — the room settled (its last write the unlisting), then the
    note cleared — and a fault cuts it at one of them. The note
    stands until all are made, so the next sweep (the same node's once Redis answers,
    or another's once this one's lease is gone) finishes the room: unlisted, its logs
    on the hour, the note cleared, the one race_over and its one result as they were."""
    clock = Clock()
    dead, race, room = await _race_over_then_killed(backend, clock, private=False)
    sweeper = await _node(backend, clock)
    await _dead(dead, by=sweeper)
    events = await _events(sweeper, room)
    cut = _cut(sweeper, call, fault)
    await _sweep(sweeper)
    await _poll(_value(cut), bool, f"the sweep never reached {call}")
    finisher = sweeper
    if fault == "node dies":
        finisher = await _node(backend, clock)
        await _dead(sweeper, by=finisher)
    assert room.room_id in await finisher.store.unarchived_rooms()

    await _sweep(finisher)
    await _poll(finisher.store.unarchived_rooms, lambda ids: room.room_id not in ids, "the note")
    assert room.room_id not in await finisher.store.listed_rooms()
    ttls = await _ttls(finisher, room)
    ttls.pop(finisher.store.keys.code(room.meta.code))
    assert _all_between(ttls, 0, FINISHED_ROOM_TTL_S), ttls
    assert await _events(finisher, room) == events
    kept = unpack(await archived_result(finisher.store, race_id(room.room_id, race.commitment)))
    assert kept["result"]["commitment"] == race.commitment


async def test_a_sweep_archiving_a_race_keeps_the_note_of_a_rematch_begun_meanwhile(
    backend: Backend,
) -> None:
    """The sweep finishing a dead node's race_over settles the room (three writes)
    before it clears the room's note. A rematch whose countdown another node decided
    in between (the countdown notes the room again: Store.mark_unarchived) is the
    note's now: cleared with it, the new race was no longer noted, and a node dying in
    it left it to run unarchived, adopted by no sweep, until its keys expired."""
    clock = Clock()
    dead, _race, room = await _race_over_then_killed(backend, clock, private=True)
    sweeper = await _node(backend, clock)
    other = await _node(backend, clock)
    await _dead(dead, by=sweeper)
    real = sweeper.store.settle_expiry
    rematched: list[str] = []

    async def settle_then_rematch(room_id: str, **kwargs: Any) -> None:
        await real(room_id, **kwargs)
        if room_id == room.room_id and kwargs.get("unlist") and not rematched:
            rematched.append(room_id)
            theirs = await other.room(room_id)
            await other.decide(theirs, lambda: d.rematch(theirs.state, 1))
            countdown = [d.countdown(other.clock(), theirs.commitment())]
            assert await other.decide(theirs, lambda: countdown) == countdown
            assert room_id in await other.store.unarchived_rooms()

    setattr(sweeper.store, "settle_expiry", settle_then_rematch)  # noqa: B010
    finish = sweeper._archived_last
    finished: list[str] = []

    async def archived_last(*args: Any) -> None:
        try:
            await finish(*args)
        finally:
            finished.append("done")

    setattr(sweeper, "_archived_last", archived_last)  # noqa: B010
    await _sweep(sweeper)
    await _poll(_value(finished), bool, "the sweep never finished the room")
    assert rematched, "the sweep never settled the room"
    assert room.room_id in await sweeper.store.unarchived_rooms(), "the rematch's note is gone"


class _ListingAnswersFirst:
    """A create's pipeline on a Redis Cluster: each master applies its commands on
    its own (redis-py runs a task a node), so the listing's may answer before the
    room's. This one makes the listing's writes (``zadd``) first, then runs
    ``between``, then the rest. Any other call goes to the real pipeline."""

    def __init__(self, redis: Any, pipeline: Any, between: Any) -> None:
        self._redis, self._pipeline, self._between = redis, pipeline, between
        self._calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def queue(*args: Any, **kwargs: Any) -> _ListingAnswersFirst:
            self._calls.append((name, args, kwargs))
            return self

        return queue

    async def execute(self) -> list[Any]:
        first = [c for c in self._calls if c[0] == "zadd"]
        for name, args, kwargs in first:
            await getattr(self._redis, name)(*args, **kwargs)
        if first:
            await self._between()
        pipe = self._pipeline(transaction=False)
        for name, args, kwargs in self._calls:
            if (name, args, kwargs) not in first:
                getattr(pipe, name)(*args, **kwargs)
        return await pipe.execute()


async def test_a_sweep_reading_a_room_being_created_leaves_it_listed(
    backend: Backend,
) -> None:
    """A sweep reads a listed room whose meta it cannot find: its keys expired (a
    ghost: unlisted, as ``list`` does) — or its create's writes are still landing: on
    a Cluster the listing and the meta are on other masters, written at once, and the
    listing's may land first. A sweep there unlisted the new public room for good (a
    later sort keeps a room unlisted): nobody could find it to join. The create now
    writes the listing once the room's keys are written."""
    clock = Clock()
    node = await _node(backend, clock)
    sweeper = await _node(backend, clock)
    store, redis = node.store, node.store._redis
    real_pipeline, real_create = redis.pipeline, store.create_room
    swept: list[str] = []

    async def sweep() -> None:
        swept.append("swept")
        await _sweep(sweeper)

    async def create_room(*args: Any, **kwargs: Any) -> None:
        # Every pipeline of the create: a sweep right after each listing write.
        redis.pipeline = lambda *a, **k: _ListingAnswersFirst(redis, real_pipeline, sweep)
        try:
            await real_create(*args, **kwargs)
        finally:
            redis.pipeline = real_pipeline

    setattr(store, "create_room", create_room)  # noqa: B010 (a method of the instance)
    peer = FakePeer(node)
    assert (await peer.ask("create", variant="yukon", name="Ann")).t == "joined"
    room = peer.room
    assert room is not None and swept == ["swept"]
    assert room.room_id in await store.listed_rooms(), "a room being created was unlisted"


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_race_its_own_node_archives_cut_between_its_settle_and_its_note_is_finished(
    backend: Backend, fault: str
) -> None:
    """The node that ends a public race fails to clear its note at once (Redis fails
    the clear): its archive task makes the race_over's writes again
    (Node._archived_last) — the room settled (unlisted, its logs on the hour), then
    the note cleared — and a fault cuts it at that clear, after the settle. Redis
    failing: the task retries and clears the note. The node dying: the note stands,
    and the next node's sweep clears it. Either way the room ends unlisted, its logs
    on the hour, its note gone — none left for ever."""
    clock = Clock()
    node = await _node(backend, clock)
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    # The node's own clear fails (hands the race to the archive task); the archive
    # task's clear, the next, is cut by ``fault``.
    cut = _cut(node, "clear_unarchived", fault)
    first = _cut(node, "clear_unarchived", "redis fails")  # wraps the other: the first
    assert (await race.ann.ask("resign")).t == "ok"
    with contextlib.suppress(Crashed):
        await race.bob.ask("resign")
    await _poll(_value(cut), bool, "the archive never cleared the note")
    assert first
    finisher = node
    if fault == "node dies":
        finisher = await _node(backend, clock)
        await _dead(node, by=finisher)
        assert room.room_id in await finisher.store.unarchived_rooms()
        assert room.room_id not in await finisher.store.listed_rooms()  # settled first
        await _sweep(finisher)
    await _poll(finisher.store.unarchived_rooms, lambda ids: room.room_id not in ids, "the note")
    assert room.room_id not in await finisher.store.listed_rooms()
    ttls = await _ttls(finisher, room)
    ttls.pop(finisher.store.keys.code(room.meta.code))
    assert _all_between(ttls, 0, FINISHED_ROOM_TTL_S), ttls
    kept = unpack(await archived_result(finisher.store, race_id(room.room_id, race.commitment)))
    assert kept["result"]["commitment"] == race.commitment


@pytest.mark.parametrize("fault", ["redis fails", "a defect"])
async def test_a_room_the_sweep_cannot_read_does_not_stop_it_for_the_others(
    backend: Backend, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Two ghost lobbies, their nodes dead: the sweep's read of the first it comes to
    fails — Redis failing for that room alone (a Cluster master down), or a defect in
    it. The sweep goes on past it: the other lobby is finished by this sweep, not left
    listed behind a room that may fail every minute; the failure is said once, as a
    warning, and the next sweep finishes the first."""
    clock = Clock()
    ghosts, sweeper = await _ghosts_and_sweeper(backend, clock, "Bob", "Cy")
    real = sweeper.store.room_nodes
    failed: list[str] = []

    async def failing(room_id: str) -> Any:
        if not failed:
            failed.append(room_id)
            if fault == "redis fails":
                raise StoreUnavailable("room_nodes: Redis is down (injected)")
            raise RuntimeError("a defect (injected)")
        return await real(room_id)

    setattr(sweeper.store, "room_nodes", failing)  # noqa: B010 (a method of the instance)
    with caplog.at_level(logging.WARNING, logger="solrace"):
        await _sweep(sweeper)
    assert failed, "no room was read"
    listed = await sweeper.store.listed_rooms()
    assert listed == failed, f"listed after the sweep: {listed}, failed: {failed}"
    # Not the dead ghost node's own tick of its room, which may fire before the node
    # is stopped, its store down ("tick failed; retrying": a loaded run, on main too).
    warned = [
        r
        for r in caplog.records
        if failed[0] in str(getattr(r, "room", "")) and r.funcName != "tick"
    ]
    assert [r.levelname for r in warned] == ["WARNING"], warned
    await _sweep(sweeper)
    assert not set(await sweeper.store.listed_rooms()) & {g.room_id for g in ghosts}


async def test_a_sweep_passes_over_rooms_redis_fails_but_stops_at_an_outage() -> None:
    """A room Redis fails is passed over (0 adopted), the count of such rooms in a row
    starting again at one that answers; SWEEP_OUTAGE_ROOMS in a row are Redis down, and
    stop the sweep rather than wait for every room's timeout in turn; a closed store
    stops it at once."""

    async def fails(error: StoreUnavailable) -> int:
        raise error

    async def adopts() -> int:
        return 1

    down = StoreUnavailable("Redis is down (injected)")
    passing = _SweepFailures(cast(Node, None))  # no defect: the node is not asked
    for _ in range(SWEEP_OUTAGE_ROOMS - 1):
        assert await passing.over("r_down", fails(down)) == 0
    assert await passing.over("r_up", adopts()) == 1
    for _ in range(SWEEP_OUTAGE_ROOMS - 1):
        assert await passing.over("r_down", fails(down)) == 0
    with pytest.raises(StoreUnavailable):
        await passing.over("r_down", fails(down))
    with pytest.raises(StoreClosed):
        await _SweepFailures(cast(Node, None)).over("r_closed", fails(StoreClosed()))


async def test_a_room_that_times_out_every_sweep_goes_last_in_the_next(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A room where the sweep stopped — Redis failing SWEEP_OUTAGE_ROOMS rooms in a row
    (an outage), the last of them this one — goes last in the next sweep: one that
    fails every sweep (a Cluster master down for its slot) stopped every sweep before
    the rooms after it, as before any room was passed over. The other ghost lobby is
    finished by the next sweep."""
    # Here one room failed is an outage (SWEEP_OUTAGE_ROOMS in a row, where it takes 3).
    monkeypatch.setattr(node_module, "SWEEP_OUTAGE_ROOMS", 1)
    clock = Clock()
    ghosts, sweeper = await _ghosts_and_sweeper(backend, clock, "Bob", "Cy")
    real = sweeper.store.room_nodes
    failing: list[str] = []

    async def times_out(room_id: str) -> Any:
        if not failing:
            failing.append(room_id)  # the first room the sweep reads, every time
        if room_id == failing[0]:
            raise StoreUnavailable("room_nodes: timed out (injected)")
        return await real(room_id)

    setattr(sweeper.store, "room_nodes", times_out)  # noqa: B010 (a method of the instance)
    await _sweep(sweeper)
    assert set(await sweeper.store.listed_rooms()) == {g.room_id for g in ghosts}
    await _sweep(sweeper)
    assert await sweeper.store.listed_rooms() == failing


async def _private_race_and_another_node(
    backend: Backend,
) -> tuple[Clock, Node, Node, _Race, LiveRoom]:
    """Two nodes on one clock, and a private race on the first: the deciding node, the
    one a rematch is decided on, the race and its room."""
    clock = Clock()
    node = await _node(backend, clock)
    other = await _node(backend, clock)
    race = await _race_on(node, node, private=True)
    room = race.ann.room
    assert room is not None
    return clock, node, other, race, room


async def _adopted_once_both_die(
    backend: Backend, clock: Clock, room: LiveRoom, node: Node, other: Node
) -> Node:
    """Both nodes dead in the room's new race: the next node, whose sweep must have
    adopted it."""
    sweeper = await _node(backend, clock)
    await _dead(node, by=sweeper)
    await _dead(other, by=sweeper)
    await _sweep(sweeper)
    assert room.room_id in sweeper.rooms, "no sweep adopted the new race"
    return sweeper


async def test_the_deciding_node_keeps_the_note_of_a_rematch_begun_before_its_clear(
    backend: Backend,
) -> None:
    """The node that decides a race_over makes the writes that follow it
    (Node._after_decision): the room settled, the result saved, then the room's note
    cleared. A rematch whose countdown another node decided in between (the countdown
    notes the room again: Store.mark_unarchived) is the note's now: cleared with it,
    the new race was no longer noted, and its node dying in it left it unarchived,
    adopted by no sweep. Here the deciding node then dies mid new race: the next
    node's sweep must find the room, end the new race and archive it."""
    clock, node, other, race, room = await _private_race_and_another_node(backend)
    real = node.store.save_result
    rematched: list[str] = []

    async def save_then_rematch(race_key: str, data: bytes, ttl_s: int) -> bool:
        saved = await real(race_key, data, ttl_s)
        if not rematched:
            rematched.append(race_key)
            theirs = await other.room(room.room_id)
            await other.decide(theirs, lambda: d.rematch(theirs.state, 1))
            countdown = [d.countdown(other.clock(), theirs.commitment())]
            assert await other.decide(theirs, lambda: countdown) == countdown
            assert room.room_id in await other.store.unarchived_rooms()
        return saved

    setattr(node.store, "save_result", save_then_rematch)  # noqa: B010
    assert (await race.ann.ask("resign")).t == "ok"
    assert (await race.bob.ask("resign")).t == "ok"
    await _poll(_value(rematched), bool, "the deciding node never saved the result")
    assert room.room_id in await node.store.unarchived_rooms(), "the rematch's note is gone"

    # The deciding node dies in the new race; the next node's sweep adopts it.
    sweeper = await _adopted_once_both_die(backend, clock, room, node, other)
    clock.advance(GRACE_S + 1, sweeper)  # its racers' grace over: the race ends
    await sweeper.tick(sweeper.rooms[room.room_id])
    await _poll(sweeper.store.unarchived_rooms, lambda ids: room.room_id not in ids, "the note")
    kinds = [unpack_event(data).t for _v, data in await _events(sweeper, room)]
    assert kinds.count(EventType.RACE_OVER) == 2, kinds


async def test_the_deciding_node_keeps_the_note_a_countdown_made_just_before_its_clear(
    backend: Backend,
) -> None:
    """The node deciding a race_over reads the room back, and another node's rematch
    is folded with it: the room the clear goes by is that rematch's lobby. Another
    node then decides the new round's countdown, which notes the room for the new race
    (Store.mark_unarchived) before it stores the countdown: one round trip in which
    the stream has not moved. The deciding node's clear fell in it here — held after
    it looked and before it cleared, released once the countdown's note was made —
    and cleared the new race's note: both nodes then dying in the new race, no sweep
    found it, and it ran on unarchived until its keys expired. A node's sweep must
    find it, end it and archive its result."""
    clock, node, other, race, room = await _private_race_and_another_node(backend)
    theirs: list[LiveRoom] = []
    real_append = node.store.append_event

    async def append_then_rematch(room_id: str, data: bytes, *args: Any, **kwargs: Any) -> int:
        version = await real_append(room_id, data, *args, **kwargs)
        if unpack_event(data).t == EventType.RACE_OVER and not theirs:
            # Stored between the race_over and its read-back: folded with it.
            theirs.append(await other.room(room_id))
            await other.decide(theirs[0], lambda: d.rematch(theirs[0].state, 1))
        return version

    noted, stored = asyncio.Event(), asyncio.Event()
    real_mark, their_append = other.store.mark_unarchived, other.store.append_event

    async def mark(*args: Any, **kwargs: Any) -> None:
        await real_mark(*args, **kwargs)
        noted.set()

    async def append_once_cleared(room_id: str, data: bytes, *args: Any, **kwargs: Any) -> int:
        if unpack_event(data).t == EventType.COUNTDOWN:
            await stored.wait()  # the countdown noted, not stored, until the clear
        return await their_append(room_id, data, *args, **kwargs)

    real_clear = node.store.clear_unarchived
    countdowns: list[asyncio.Future[list[Any]]] = []

    async def clear_as_a_countdown_is_noted(*args: Any, **kwargs: Any) -> None:
        if theirs and not countdowns:
            lobby = theirs[0]
            countdown = [d.countdown(other.clock(), lobby.commitment())]
            countdowns.append(asyncio.ensure_future(other.decide(lobby, lambda: countdown)))
            await asyncio.wait_for(noted.wait(), 5)
        try:
            await real_clear(*args, **kwargs)
        finally:
            stored.set()

    setattr(node.store, "append_event", append_then_rematch)  # noqa: B010
    setattr(other.store, "mark_unarchived", mark)  # noqa: B010
    setattr(other.store, "append_event", append_once_cleared)  # noqa: B010
    setattr(node.store, "clear_unarchived", clear_as_a_countdown_is_noted)  # noqa: B010
    assert (await race.ann.ask("resign")).t == "ok"
    assert (await race.bob.ask("resign")).t == "ok"

    async def cleared() -> int:
        return len(countdowns)

    await _poll(cleared, bool, "the deciding node never cleared")
    (countdown,) = await asyncio.wait_for(countdowns[0], 5)
    assert countdown.t == EventType.COUNTDOWN
    assert room.room_id in await other.store.unarchived_rooms(), "the new race's note is gone"

    # Both nodes die in the new race; the next node's sweep must adopt it.
    sweeper = await _adopted_once_both_die(backend, clock, room, node, other)
    clock.advance(GRACE_S + 1, sweeper)  # its start is due, its racers' grace over
    race_key = race_id(room.room_id, str(countdown.d["commitment"]))
    kept = unpack(await archived_result(sweeper.store, race_key, timeout=10))
    assert kept["round"] == 2, kept


async def test_two_rooms_that_time_out_every_sweep_do_not_stop_the_rooms_after_them(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rooms that fail every sweep (a Cluster master down for both their slots),
    each where a sweep stops (an outage: one room here, as in the test above), and the
    one the last sweep reached goes last. Only the rooms the last sweep failed went
    last, not those it never reached, so the two took turns first and stopped every
    sweep before the third ghost lobby, for good."""
    monkeypatch.setattr(node_module, "SWEEP_OUTAGE_ROOMS", 1)
    clock = Clock()
    ghosts, sweeper = await _ghosts_and_sweeper(backend, clock, "Bob", "Cy", "Di")
    real = sweeper.store.room_nodes
    failing: list[str] = []

    async def times_out(room_id: str) -> Any:
        if len(failing) < 2 and room_id not in failing:
            failing.append(room_id)  # the first room each of the first two sweeps reads
        if room_id in failing:
            raise StoreUnavailable("room_nodes: timed out (injected)")
        return await real(room_id)

    setattr(sweeper.store, "room_nodes", times_out)  # noqa: B010 (a method of the instance)
    for _ in range(3):
        await _sweep(sweeper)
    assert len(failing) == 2
    assert set(await sweeper.store.listed_rooms()) == set(failing)
    assert {g.room_id for g in ghosts} > set(failing)


async def test_a_race_that_times_out_every_sweep_does_not_stop_the_lobbies(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A race noted as awaiting its archive where every sweep stops (an outage: one room
    here, as in the tests above) went last among the noted races only: their loop runs
    before the lobbies', so it stopped every sweep before every lobby. It goes last in
    the whole next sweep."""
    monkeypatch.setattr(node_module, "SWEEP_OUTAGE_ROOMS", 1)
    clock = Clock()
    ghost = await _ghost_lobby(backend, clock)
    sweeper = await _node(backend, clock)
    await _dead(backend.nodes[0], by=sweeper)
    noted, real = sweeper.store.unarchived_rooms, sweeper.store.room_nodes

    async def with_stuck() -> Any:
        return ["r_stuck", *await noted()]

    async def times_out(room_id: str) -> Any:
        if room_id == "r_stuck":
            raise StoreUnavailable("room_nodes: timed out (injected)")
        return await real(room_id)

    setattr(sweeper.store, "unarchived_rooms", with_stuck)  # noqa: B010
    setattr(sweeper.store, "room_nodes", times_out)  # noqa: B010
    await _sweep(sweeper)
    assert await sweeper.store.listed_rooms() == [ghost.room_id]
    await _sweep(sweeper)
    assert await sweeper.store.listed_rooms() == []


async def test_a_sweep_keeps_last_only_the_rooms_still_unfinished() -> None:
    """What the next sweep takes last: the rooms this one failed, and those of the
    last it held back and did not reach; a room held back and finished, or no longer
    in its listings, all read, is dropped (the set never outgrows the listings)."""

    async def done(room_id: str) -> int:
        return 0

    async def fails(room_id: str) -> int:
        raise StoreUnavailable(f"{room_id}: timed out (injected)")

    last = {"r_finished", "r_gone"}
    passing = _SweepFailures(cast(Node, None), last=last)
    assert passing.first(["r_new", "r_finished"], done) == ["r_new"]
    assert passing.unfinished() == last  # stopped here: its lobbies were never read
    assert passing.first(["r_lobby"], fails) == ["r_lobby"]
    assert await passing.over("r_lobby", fails("r_lobby")) == 0
    assert passing.unfinished() == {"r_lobby", *last}
    await passing.then()
    assert passing.unfinished() == {"r_lobby"}


async def test_a_sweep_that_passed_over_a_room_waits_its_turn(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep that passed over a room Redis failed — at its command timeout, every
    sweep (a Cluster master down for its slot) — went through: the next sweep comes in
    its turn, not at the next turn of the node's loops. Swept again at once, a room
    that times out every sweep held the loop for its timeout again and again (when
    the sweep ran in the loop that renews the lease: every renewal came too late), and
    the node said the store down each time."""
    monkeypatch.setattr(node_module, "LEASE_RENEW_S", 0.01)  # the loops' turns
    node = await backend.node()  # its loops have not run yet
    listings: list[str] = []
    renewed = _count_renewals(node)

    async def stuck() -> list[str]:
        listings.append("r_stuck")
        return ["r_stuck"]

    async def times_out(room_id: str) -> Any:
        raise StoreUnavailable("room_nodes: Timeout reading from Redis (injected)")

    async def renewals() -> int:
        return len(renewed)

    setattr(node.store, "unarchived_rooms", stuck)  # noqa: B010 (a method of the instance)
    setattr(node.store, "room_nodes", times_out)  # noqa: B010

    async def passed_over() -> set[str]:
        return node._sweep_failed

    await _poll(passed_over, lambda ids: ids == {"r_stuck"}, "the loop's first sweep")
    await _poll(renewals, lambda n: n >= 30, "thirty turns of the loops")
    assert listings == ["r_stuck"]


@pytest.mark.parametrize("stalled", ["unarchived_rooms", "room_nodes"], ids=["listing", "room"])
async def test_a_sweep_whose_read_stalls_holds_up_no_renewal_of_the_lease(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, stalled: str
) -> None:
    """A sweep's read that hangs until its command timeout (Redis slow for the sweep's
    keys — the listing of noted races, or a room's set of serving nodes —, while the
    lease's own renewals go through): the sweep ran in the loop that renews the lease,
    so one timeout (COMMAND_TIMEOUT_S, the lease's own length) held a renewal past the
    lease's lapse, the node found its lease lapsed (Node._lapsed) and other nodes could
    take its rooms up meanwhile. The renewals must keep their turn while the read hangs,
    and once it times out the node has never found its lease lapsed."""
    monkeypatch.setattr(node_module, "LEASE_RENEW_S", 0.05)  # the renewals' turns
    node = await backend.node()  # its loops have not run yet
    store = node.store
    renewed: list[bool] = []
    real_renew = store.renew_lease

    async def renew(node_id: str, ttl_ms: int) -> bool:
        current = await real_renew(node_id, ttl_ms)
        renewed.append(current)  # reached Redis, and answered
        return current

    lapses: list[int] = []
    real_lapsed = node._lapsed

    def lapsed() -> None:
        lapses.append(len(renewed))
        real_lapsed()

    hangs: list[int] = []  # the renewals counted when the read began to hang
    timed_out: list[str] = []
    release = asyncio.Event()
    real_read = getattr(store, stalled)

    async def hangs_until_its_timeout(*args: Any) -> Any:
        if hangs or (stalled == "room_nodes" and args != ("r_stuck",)):
            return await real_read(*args)
        hangs.append(len(renewed))
        await release.wait()  # the command's timeout, ended by the test
        timed_out.append(stalled)
        raise StoreUnavailable(f"{stalled}: Timeout reading from Redis (injected)")

    async def noted() -> list[str]:
        return ["r_stuck"]  # a room whose set of serving nodes is read first

    setattr(store, "renew_lease", renew)  # noqa: B010 (a method of the instance)
    setattr(node, "_lapsed", lapsed)  # noqa: B010
    setattr(store, stalled, hangs_until_its_timeout)
    if stalled == "room_nodes":
        setattr(store, "unarchived_rooms", noted)  # noqa: B010

    async def renewals() -> int:
        return len(renewed)

    try:
        await _poll(renewals, lambda _: bool(hangs), "the sweep never read")
        await _poll(
            renewals,
            lambda n: n >= hangs[0] + 5,
            "renewals that reached Redis while the sweep's read hung",
        )
    finally:
        release.set()
    await _poll(_value(timed_out), bool, "the read never timed out")
    after = len(renewed)
    await _poll(renewals, lambda n: n >= after + 2, "renewals after it")
    assert lapses == [], f"the node found its lease lapsed at renewal {lapses}"
    assert all(renewed[1:]), renewed  # every renewal found the lease current


async def test_the_sweep_loop_sweeps_once_at_a_time_survives_failures_and_stops_with_the_node(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The node's sweeps run in a loop of their own (Node._sweep_loop). A sweep the
    store failed while the lease's renewals go through is said as the sweep's trouble,
    not the node's outage (the lease loop says that), and the next comes in its turn
    (an outage's are below); one that ended on
    a defect is logged with its traceback and counted (``sweep``), and the next comes
    in its turn; a sweep that hangs is never joined by a second; and stopping the node
    cancels the hanging sweep — nothing of the node left running."""
    monkeypatch.setattr(node_module, "LEASE_RENEW_S", 0.01)
    monkeypatch.setattr(node_module, "ORPHAN_SWEEP_S", 0.01)
    monkeypatch.setattr(node_module, "LEASE_MS", 200)  # the second sweep waits a lease
    node = await backend.node()  # its loops have not run yet
    began: list[int] = []
    running: list[int] = []
    most_at_once: list[int] = [0]
    cancelled: list[int] = []
    renewed = _count_renewals(node)

    async def sweep() -> None:
        began.append(len(began) + 1)
        running.append(began[-1])
        most_at_once[0] = max(most_at_once[0], len(running))
        try:
            if began[-1] == 1:
                raise StoreUnavailable("unarchived_rooms: Redis is down (injected)")
            if began[-1] == 2:
                raise RuntimeError("a defect (injected)")
            if began[-1] == 4:
                await asyncio.Event().wait()  # hangs: nothing ends it but the stop
        except asyncio.CancelledError:
            cancelled.append(began[-1])
            raise
        finally:
            running.remove(began[-1])

    async def sweeps() -> int:
        return len(began)

    async def renewals() -> int:
        return len(renewed)

    setattr(node, "sweep_orphans", sweep)  # noqa: B010 (what the loop calls)
    with caplog.at_level(logging.WARNING, logger="solrace"):
        await _poll(sweeps, lambda n: n == 4, "the fourth sweep")
        seen = len(renewed)
        await _poll(renewals, lambda n: n >= seen + 30, "thirty renewals")
    assert began == [1, 2, 3, 4] and most_at_once == [1], (began, most_at_once)
    said = [(r.getMessage(), getattr(r, "error", None)) for r in caplog.records]
    assert (node_module._SWEEP_STOPPED, "unarchived_rooms: Redis is down (injected)") in said
    assert "store unavailable" not in [line for line, _error in said], said
    failed = [r for r in caplog.records if r.getMessage() == "orphan sweep failed"]
    assert len(failed) == 1 and failed[0].exc_info is not None, failed
    assert node.metrics.defects.labels(Defect.SWEEP).value == 1
    await node.stop()
    assert cancelled == [4] and running == []
    assert node._sweep_task is not None and node._sweep_task.done()


async def test_rooms_redis_fails_every_sweep_are_no_outage_of_the_node(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """SWEEP_OUTAGE_ROOMS noted rooms whose reads Redis fails every time (a Cluster
    master down for their slots), while the rest of Redis — the node's lease, its own
    race — answers: every sweep stops at them (taken last, they are the end of every
    sweep). The sweep's loop said the node's store down for it, the lease's next
    renewal a moment later said it back, and each such "outage" re-armed every offline
    racer's grace: a race whose racers left never ended. The node's grace floor must
    not move, no outage be said, the sweep's trouble be said once, and the race end by
    its racers' grace."""
    monkeypatch.setattr(node_module, "LEASE_RENEW_S", 0.01)  # the loops' turns
    monkeypatch.setattr(node_module, "ORPHAN_SWEEP_S", 0.01)
    clock = Clock()
    node = await backend.node(clock=clock)  # its loops have not run yet
    stuck = [f"r_stuck{i}" for i in range(SWEEP_OUTAGE_ROOMS)]
    noted, real_nodes = node.store.unarchived_rooms, node.store.room_nodes
    failed: list[str] = []
    renewed = _count_renewals(node)

    async def with_stuck() -> list[str]:
        return [*stuck, *await noted()]

    async def times_out(room_id: str) -> Any:
        if room_id in stuck:
            failed.append(room_id)
            raise StoreUnavailable("room_nodes: Timeout reading from Redis (injected)")
        return await real_nodes(room_id)

    async def renewals() -> int:
        return len(renewed)

    setattr(node.store, "unarchived_rooms", with_stuck)  # noqa: B010 (a method of the instance)
    setattr(node.store, "room_nodes", times_out)  # noqa: B010
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    with caplog.at_level(logging.WARNING, logger="solrace"):
        for peer in (race.ann, race.bob):
            await lobby.disconnected(node, peer)  # their grace runs from here
        floor, seen = node.grace_floor_ms, len(failed)
        await _poll(
            _value(failed),
            lambda ids: len(ids) >= seen + 3 * SWEEP_OUTAGE_ROOMS,
            "three more sweeps stopped by the stuck rooms",
            timeout=20,  # the second sweep waits a lease (a predecessor's lapse)
        )
        after = len(renewed)
        await _poll(renewals, lambda n: n >= after + 3, "renewals after them")
    said = [r.getMessage() for r in caplog.records]
    assert "store unavailable" not in said and not node.store_down, said
    assert node.grace_floor_ms == floor, "the node's grace was re-armed"
    assert said.count(node_module._SWEEP_STOPPED) == 1, said
    await _forfeited_once(clock, node, room, race)


async def test_a_sweep_an_outage_stopped_comes_again_once_redis_is_back(
    backend: Backend,
) -> None:
    """Redis goes down for the whole node as its sweep begins: the lease's loop finds
    the store down, and once Redis answers again the next sweep comes at once — not in
    its turn, a minute later (ORPHAN_SWEEP_S). It takes no node for dead while the
    outage settles (every lease may have lapsed in it: tests/rooms/test_sweep_settle.py)
    and comes again once it has, not a minute later, and finishes the ghost lobby a
    dead node left: the orphans of an outage are looked after as soon as that can be
    judged."""
    clock = Clock()
    room = await _ghost_lobby(backend, clock)
    other = await _node(backend, clock)  # no sweeps of its own
    await _dead(backend.nodes[0], by=other)
    sweeper = await backend.node(clock=clock)  # its loops have not run yet
    faults = StoreFaults(sweeper.store)
    real = sweeper.store.unarchived_rooms
    stopped: list[str] = []

    async def outage_begins() -> list[str]:
        if not stopped:
            stopped.append("unarchived_rooms")
            faults.down = True
        return await real()

    async def store_down() -> bool:
        return sweeper.store_down

    setattr(sweeper.store, "unarchived_rooms", outage_begins)  # noqa: B010
    await _poll(store_down, bool, "the lease's loop never found the store down")
    assert stopped and room.room_id in await other.store.listed_rooms()
    faults.down = False

    async def deferred() -> bool:
        return sweeper._sweep_deferred

    await _poll(deferred, bool, "no sweep came once Redis was back")
    assert room.room_id in await other.store.listed_rooms(), "judged in the settle"
    clock.advance(sweeper._outage_settle_ms() / 1000 + 1, sweeper)
    await _poll(
        other.store.listed_rooms,
        lambda ids: room.room_id not in ids,
        "the ghost lobby, once the outage settled",
    )


async def test_a_race_over_whose_read_back_finds_a_rematch_still_archives_its_race(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """The node deciding a race_over stores it, reads the room back, then makes the
    writes that follow from what it folded (Node._after_decision). A rematch stored
    between the write and the read-back (by a node that died at once: nothing else
    archives it, nobody else folds) is folded with it, and clears the room's result:
    the writes that follow skip the archive, and a sweep looks only at the room's last
    race. The race is archived all the same, from the race_over event itself (its
    fold, Node._fold_locked), with that round's record; the request is answered."""
    clock = Clock()
    node = await _node(backend, clock)
    race = await _race_on(node, node, private=True)
    room = race.ann.room
    assert room is not None
    real = node.store.append_event
    injected: list[int] = []

    async def append_then_rematch(room_id: str, data: bytes, *args: Any, **kwargs: Any) -> int:
        version = await real(room_id, data, *args, **kwargs)
        event = unpack_event(data)
        if event.t == EventType.RACE_OVER and not injected:
            ended = copy.deepcopy(room.state)  # the room as the dead node folded it
            ended.apply(version, event)
            (reset,) = d.rematch(ended, 1)
            ttl = node_module.expiry_set_by(ended, reset)
            stamped = reset.but(at=clock())
            injected.append(await real(room_id, pack_event(stamped), version, ttl_s=ttl))
        return version

    setattr(node.store, "append_event", append_then_rematch)  # noqa: B010
    assert (await race.ann.ask("resign")).t == "ok"
    with caplog.at_level(logging.INFO, logger="solrace"):
        assert (await race.bob.ask("resign")).t == "ok"
        assert injected, "the race_over was never stored"
        assert room.state.version == injected[0] and room.state.result is None  # rematched
        race_key = race_id(room.room_id, race.commitment)
        kept = unpack(await archived_result(node.store, race_key, 5))
    assert (kept["round"], kept["result"]["commitment"]) == (1, race.commitment), kept
    assert {s["status"] for s in kept["result"]["standings"]} == {"resigned"}, kept
    races = [r for r in caplog.records if r.getMessage() == "race over"]
    assert len(races) == 1, "the deciding node never logged the race's end"
    # The decision's record and the fold's are the same bytes: no second result.
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.records


@pytest.mark.parametrize("release", ["this", "earlier"])
async def test_a_note_kept_for_a_rematch_that_stayed_in_its_lobby_is_cleared_by_a_sweep(
    backend: Backend, release: str
) -> None:
    """A room back in its lobby (a rematch), its node dead with no countdown, still
    noted for the race before: a fault cut its node's clear, or (``earlier``) a node
    of an earlier release kept it, whose notes name no round and which kept one when
    the room's stream moved before its clear. The note belongs to no race that may
    run (the next countdown notes the room for its own round); kept, every sweep
    loaded the private lobby (no listing adopts one) and left the note, once a minute
    until the room's keys expired a day later. The kept note is made here as that
    window leaves it (the race's result saved, the note standing)."""
    clock = Clock()
    node = await _node(backend, clock)
    race = await _race_on(node, node, private=True)
    room = race.ann.room
    assert room is not None
    assert (await race.ann.ask("resign")).t == "ok"
    assert (await race.bob.ask("resign")).t == "ok"
    ended = await node.room(room.room_id)
    over = _last_race(ended)
    assert over is not None
    await _poll(lambda: node.store.load_result(over), bool, "the race's result")
    assert (await race.ann.ask("rematch")).t == "ok"
    if release == "this":
        await node.store.mark_unarchived(room.room_id, 1)  # the race before's
    else:  # as an earlier release notes a room (Keys.unarchived)
        await node.store._redis.sadd(node.store.keys.unarchived, room.room_id)
    assert room.room_id in await node.store.unarchived_rooms()

    sweeper = await _node(backend, clock)
    await _dead(node, by=sweeper)
    await _sweep(sweeper)
    assert room.room_id not in await sweeper.store.unarchived_rooms(), "the lobby's note"


def _is_countdown(_room: str, data: bytes, *_a: Any, **_kw: Any) -> bool:
    return unpack_event(data).t == EventType.COUNTDOWN


async def test_a_lobby_noted_by_a_countdown_its_node_died_before_storing_is_left_to_expire(
    backend: Backend,
) -> None:
    """A countdown notes the room for its round before it stores itself; its only
    node killed in between left a private lobby noted for its own round, a note no
    sweep clears (a countdown may be storing itself: a node paused past its lease
    stores it when it wakes). Not adopted either (no listing adopts a private lobby),
    its racers stayed in it, online on the dead node, and its keys kept their day:
    every node's sweep loaded the room once a minute for that day. Adopted, its
    racers' graces run out, they leave, the room takes its ten minutes, and the note
    goes with its keys."""
    clock = Clock()
    node = await _node(backend, clock)
    ready = await lobby_of_two(node, private=True)
    ann, room = ready.ann, ready.room
    crashed = _dies_at(node, {"append_event": _is_countdown})
    with contextlib.suppress(Crashed):
        await ann.ask("start")
    assert crashed == ["append_event"], crashed

    sweeper = await _node(backend, clock)
    assert room.room_id in await sweeper.store.unarchived_rooms()  # noted, never stored
    await _dead(node, by=sweeper)
    await _sweep(sweeper)
    clock.advance(GRACE_S + 1, sweeper)  # the dead node's racers' graces are over
    await _poll(
        lambda: _ttls(sweeper, room),
        lambda ttls: _all_between(ttls, 0, EMPTY_ROOM_TTL_S),
        "the lobby's keys keep their day: every sweep loads it until then",
    )
    await delete_room_keys(sweeper.store, room.room_id)  # its ten minutes are over
    sweeper.rooms.pop(room.room_id, None)  # forgotten idle, as a node does
    await _sweep(sweeper)
    assert room.room_id not in await sweeper.store.unarchived_rooms(), "the lobby's note"


def _count_renewals(node: Node) -> list[bool]:
    """What Redis answered to each renewal of ``node``'s lease from now on, in order:
    the lease loop's turns, which the sweep's own loop must never hold up."""
    renewed: list[bool] = []
    real_renew = node.store.renew_lease

    async def renew(node_id: str, ttl_ms: int) -> bool:
        renewed.append(await real_renew(node_id, ttl_ms))
        return renewed[-1]

    setattr(node.store, "renew_lease", renew)  # noqa: B010 (a method of the instance)
    return renewed


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_note_in_both_sets_of_a_room_gone_cut_between_its_clears_is_cleared_next(
    backend: Backend, fault: str
) -> None:
    """A room whose keys are gone leaves both its notes (Store.clear_unarchived with
    no round): this release's, then an earlier release's (Keys.unarchived), two
    writes. Redis failing between them, or the sweeping node dying there, leaves the
    earlier release's note; the next sweep finds the room gone again and clears it."""
    clock = Clock()
    node = await _node(backend, clock)
    race = await _race_on(node, node, private=True)
    room = race.ann.room
    assert room is not None
    await node.store._redis.sadd(node.store.keys.unarchived, room.room_id)
    assert await node.store.archive_note(room.room_id) is not None  # noted by its countdown
    sweeper = await _node(backend, clock)
    await _dead(node, by=sweeper)
    await delete_room_keys(sweeper.store, room.room_id)  # its keys expired
    cut = _cut(sweeper, "clear_legacy_note", fault)
    await _sweep(sweeper)
    assert cut == ["clear_legacy_note"], cut
    nxt = sweeper
    if fault == "node dies":
        nxt = await _node(backend, clock)
        await _dead(sweeper, by=nxt)
    assert await nxt.store.archive_note(room.room_id) is None, "the first write was made"
    assert room.room_id in await nxt.store.unarchived_rooms(), "the second was not"
    await _sweep(nxt)
    assert room.room_id not in await nxt.store.unarchived_rooms(), "the earlier release's note"
