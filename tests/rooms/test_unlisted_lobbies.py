"""Lobbies no listing holds, whose every node died (docs/server.md, "Room lifecycle").

A private room is never listed, and a rematch's lobby is for its racers (unlisted):
the orphan sweep, which found dead nodes' lobbies through the listing, never reached
them, and their dead racers held them for the day their keys are given. Each is noted
(Store.note_unlisted: a private room with its create's writes, a rematch before its
reset), so the sweep takes one up like a listed lobby — its racers go offline, leave
when their grace ends, and the emptied lobby expires on its ten minutes — and forgets
the note once the room is no such lobby. A fault between the note and the reset
(Redis failing it, the node dying there) leaves a finished room noted: the sweep
forgets that note, and the rematch's retry notes the room again.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from solrace.protocol.views import EventType, Phase
from solrace.race.decisions import rematch
from solrace.rooms.node import EMPTY_ROOM_TTL_S, FINISHED_ROOM_TTL_S, Node
from solrace.rooms.records import unpack_event
from solrace.rooms.room import LiveRoom

from tests.store.conftest import room_keys
from tests.support.faults import Clock, Crashed

from .conftest import Backend, FakePeer, lobby_of_two
from .test_core import _race_on, _room_ttl_ms
from .test_fault_windows import (
    GRACE_S,
    _all_between,
    _always,
    _dies_at,
    _fail_once,
    _poll,
    _storing,
    _ttls,
    _until_all_between,
)
from .test_sweep_faults import _cut_settle, _ghost_lobby
from .test_take_up_faults import FAULTS, _cut, _dead, _node, _sweep


async def _taken_up_and_left(survivor: Node, clock: Clock, room: LiveRoom) -> None:
    """``survivor``'s sweep takes ``room`` up: its racers go offline, leave when their
    grace ends, and the emptied lobby's keys and code expire on its ten minutes; the
    next sweep forgets its note."""
    await _sweep(survivor)
    taken = survivor.rooms.get(room.room_id)
    assert taken is not None and taken.served(), "nobody took the lobby up"

    async def online() -> list[str]:  # the sweep's own check marks them
        return [r.name for r in taken.state.racers.values() if r.online]

    await _poll(online, lambda names: not names, "the dead node's racers are not offline")
    clock.advance(GRACE_S + 1, survivor)

    async def racers() -> list[str]:  # its timer, re-armed for the new time, decides
        return [r.name for r in taken.state.racers.values()]

    await _poll(racers, lambda names: not names, "the dead node's racers have not left")
    await _until_all_between(survivor, room, 0, EMPTY_ROOM_TTL_S)
    await _sweep(survivor)
    assert room.room_id not in await survivor.store.unlisted_lobbies()


async def test_a_private_lobby_whose_only_node_died_is_taken_up_and_expires(
    backend: Backend,
) -> None:
    """Ann and Bob wait in Ann's private lobby; their node dies and neither comes
    back. The next node's sweep takes the lobby up (its note, written with the
    create), and the lobby expires on its ten minutes once their grace is over —
    before, no sweep found it, and it lived its day."""
    clock = Clock()
    node = await _node(backend, clock)
    room = (await lobby_of_two(node, ready=False, private=True)).room
    assert room.room_id not in await node.store.listed_rooms()
    survivor = await _node(backend, clock)
    await _dead(node, by=survivor)
    await _taken_up_and_left(survivor, clock, room)


async def _finished(node: Node, private: bool) -> tuple[FakePeer, LiveRoom]:
    """A race on ``node`` both racers resigned, its result saved: Ann's peer, the room."""
    race = await _race_on(node, node, private=private)
    room = race.ann.room
    assert room is not None
    assert (await race.ann.ask("resign")).t == "ok"
    assert (await race.bob.ask("resign")).t == "ok"
    await _poll(lambda: node.store.unarchived_rooms(), lambda ids: not ids, "the archive")
    return race.ann, room


@pytest.mark.parametrize("private", [False, True])
async def test_a_rematch_lobby_whose_only_node_died_is_taken_up_and_expires(
    backend: Backend, private: bool
) -> None:
    """Ann asks for a rematch after a race; her node dies right after the reset (at
    the settle that follows it) and nobody comes back. The lobby, public or not, is
    in no listing: the next node's sweep takes it up by the note written before the
    reset, and it expires on its ten minutes once the racers' grace is over."""
    clock = Clock()
    node = await _node(backend, clock)
    ann, room = await _finished(node, private)
    died = _dies_at(node, {"settle_expiry": _always})
    with contextlib.suppress(Crashed):
        await ann.ask("rematch")
    assert died, "the node did not die after the reset"
    survivor = await _node(backend, clock)
    assert room.room_id not in await survivor.store.listed_rooms()
    await _dead(node, by=survivor)
    await _taken_up_and_left(survivor, clock, room)


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_rematch_cut_between_its_note_and_its_reset_leaves_no_note_for_long(
    backend: Backend, fault: str
) -> None:
    """A rematch is two writes: the room's note, then the reset. Cut between them,
    the room is still a finished race, noted. Redis failing the reset, the rematch is
    refused ``unavailable`` and its retry makes both writes: the room is a lobby,
    noted. The node dying there, the next sweep takes nothing up and keeps the note,
    of a round the room has not reached (a rematch noted before its reset may be
    storing itself): it goes with the finished room's keys, within their hour."""
    clock = Clock()
    node = await _node(backend, clock)
    ann, room = await _finished(node, private=True)
    if fault == "node dies":
        cut = _dies_at(node, {"append_event": _storing(EventType.ROOM_RESET)})
    else:
        cut = _fail_once(node.store, "append_event", _storing(EventType.ROOM_RESET))
    reply = None
    with contextlib.suppress(Crashed):
        reply = await ann.ask("rematch")
    assert cut, "the reset was not cut"
    sweeper = await _node(backend, clock)
    assert room.room_id in await sweeper.store.unlisted_lobbies()  # the first write
    if fault == "redis fails":
        assert reply is not None and (reply.t, reply.d.get("code")) == ("error", "unavailable")
        assert (await ann.ask("rematch")).t == "ok"
        assert (await node.room(room.room_id)).state.phase == Phase.LOBBY
        assert room.room_id in await sweeper.store.unlisted_lobbies()
        return
    await _dead(node, by=sweeper)
    await _sweep(sweeper)
    assert not [r for r in sweeper.rooms.values() if r.served()], "a finished room taken up"
    assert 0 < await _room_ttl_ms(sweeper, room.room_id) <= FINISHED_ROOM_TTL_S * 1000
    await sweeper.store._redis.delete(*await room_keys(sweeper.store, room.room_id))  # expired
    later = await _node(backend, clock)  # one that never loaded the room
    await _sweep(later)
    assert room.room_id not in await later.store.unlisted_lobbies(), "a gone room's note"


async def test_a_rematch_decided_while_the_sweep_forgets_a_finished_rooms_note_keeps_it(
    backend: Backend,
) -> None:
    """A rematch cut between its note and its reset (its node dead) leaves a finished
    room noted, whose note the sweep forgets once it has checked that the room's
    stream has not moved. Ann's retry, on another node, decided right after that
    check — its note (already there), then its reset — lost its note to the sweep's
    forget that followed: its lobby in no listing and no note, held by its racers for
    its day if its node died too (a review: the check and the forget are two steps).
    The rematch's note names its round, and a sweep forgets only a note of a round it
    read as no lobby."""
    clock = Clock()
    node = await _node(backend, clock)
    ann, room = await _finished(node, private=True)
    cut = _dies_at(node, {"append_event": _storing(EventType.ROOM_RESET)})
    with contextlib.suppress(Crashed):
        await ann.ask("rematch")
    assert cut, "the reset was not cut"
    sweeper, retrier = await _node(backend, clock), await _node(backend, clock)
    await _dead(node, by=sweeper)
    forget = sweeper.store.forget_unlisted
    retried: list[int] = []

    async def after_a_rematch(room_id: str, *args: Any) -> None:
        # The sweep has read the room (a finished race) and judged it no lobby.
        if room_id == room.room_id and not retried:
            again = await retrier.room(room_id)
            retried[:] = [len(await retrier.decide(again, lambda: rematch(again.state, 1)))]
        await forget(room_id, *args)

    setattr(sweeper.store, "forget_unlisted", after_a_rematch)  # noqa: B010 (of the instance)
    await _sweep(sweeper)
    assert retried == [1], "no rematch was decided at the sweep's forget"
    assert (await retrier.room(room.room_id)).state.phase == Phase.LOBBY
    assert room.room_id in await sweeper.store.unlisted_lobbies(), "the rematch's note"


async def test_a_private_room_being_created_is_not_taken_up_by_a_sweep(
    backend: Backend,
) -> None:
    """A private room is noted with its create's writes, before its creator's join
    (and before its node joins the room's nodes). Another node's sweep between the
    two found a lobby no live node served and took it up, nobody in it yet: warned
    "adopting a room no live node serves" of a room being opened, and served it
    beside its node from then on (a listed one it leaves alone: nobody in it,
    nothing to take up). Now it keeps the note and leaves the room to its node."""
    clock = Clock()
    node, sweeper = await _node(backend, clock), await _node(backend, clock)
    create_room = node.store.create_room
    swept: list[bool] = []

    async def then_a_sweep(*args: Any, **kwargs: Any) -> None:
        await create_room(*args, **kwargs)
        await _sweep(sweeper)
        swept.append(True)

    setattr(node.store, "create_room", then_a_sweep)  # noqa: B010 (of the instance)
    ann = FakePeer(node)
    assert (await ann.ask("create", variant="yukon", name="Ann", private=True)).t == "joined"
    assert swept and ann.room is not None
    room_id = ann.room.room_id
    assert await node.store.room_nodes(room_id) == {node.node_id}, "taken up by the sweep"
    assert room_id in await sweeper.store.unlisted_lobbies()


#: Where the sweep of a private lobby everyone left is cut (Node._sweep_unlisted), and
#: how (FAULTS): nowhere, at the join code's settle (Store.settle_expiry's write in the
#: code's own slot), or at the forgetting of the room's note, last.
_GHOST_CUTS = [("none", ""), *((cut, f) for cut in ("its code", "its note") for f in FAULTS)]


@pytest.mark.parametrize(("cut", "fault"), _GHOST_CUTS)
async def test_a_private_lobby_its_last_racer_left_as_its_node_died_is_settled_by_a_sweep(
    backend: Backend, cut: str, fault: str
) -> None:
    """Bob, alone in his private lobby, leaves: the ``racer_left`` gives the room its
    ten minutes in its own write, and his node is killed before the write that follows
    (its logs and join code given that expiry). No listing holds the room: only its
    note (written with its create) leads a sweep to it, which settles it and then
    forgets the note. That sweep cut too — Redis failing its code's settle or its
    forget, or the sweeping node dying there — the note stays for the next sweep:
    the code goes with the room's ten minutes (not its day), the note goes, and the
    room's events stay as Bob's node left them (nobody is taken up)."""
    clock = Clock()
    room = await _ghost_lobby(backend, clock, private=True)
    node = backend.nodes[-1]
    sweeper = await _node(backend, clock)
    await _dead(node, by=sweeper)
    events = await sweeper.store.events_since(room.room_id, 0)
    assert unpack_event(events[-1].data).t == EventType.RACER_LEFT
    code_key = sweeper.store.keys.code(room.meta.code)
    assert await sweeper.store._redis.pttl(code_key) > EMPTY_ROOM_TTL_S * 1000  # its day
    assert room.room_id in await sweeper.store.unlisted_lobbies()
    if cut != "none":
        hit = (
            _cut_settle(sweeper, "its code", fault)
            if cut == "its code"
            else _cut(sweeper, "forget_unlisted", fault)
        )
        await _sweep(sweeper)
        assert hit, f"the sweep was not cut at {cut}"
        if fault == "node dies":
            nxt = await _node(backend, clock)
            await _dead(sweeper, by=nxt)
            sweeper = nxt
        assert room.room_id in await sweeper.store.unlisted_lobbies(), "the note went first"
    await _sweep(sweeper)
    assert room.room_id not in await sweeper.store.unlisted_lobbies(), "its note"
    assert _all_between(await _ttls(sweeper, room), 0, EMPTY_ROOM_TTL_S)
    assert await sweeper.store.events_since(room.room_id, 0) == events
    assert not [r for r in sweeper.rooms.values() if r.served()], "an empty lobby taken up"
