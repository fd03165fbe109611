"""Requests answered outside any room: ``result``, the archive of a finished race
(docs/protocol.md §5), on every store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from solrace.protocol import race_id
from solrace.protocol.envelope import Envelope
from solrace.protocol.limits import RESULT_COST
from solrace.protocol.views import Phase
from solrace.rooms.counters import Tally
from solrace.rooms.node import Node
from solrace.rooms.room import LiveRoom
from solrace.store.errors import StoreUnavailable

from tests.support.faults import StoreFaults
from tests.support.race import archived_result, restore_room, snapshot_room

from .conftest import Backend, FakePeer
from .test_core import _ann_wins, _race_on


async def test_result_answers_what_the_race_over_said_to_any_connection(backend: Backend) -> None:
    """A connection in no room (a newcomer who never saw the race), one on another
    node, and one still in the room all get the archive: the race_over's result,
    the room's settings and its deal, never its code."""
    node = await backend.node()
    other = await backend.node()
    race = await _race_on(node, node)
    over = await _ann_wins(race.ann, race.bob)
    room = race.ann.room
    assert room is not None
    race_key = race_id(room.room_id, race.commitment)
    await archived_result(node.store, race_key)
    for asker in (FakePeer(node), FakePeer(other), race.bob):
        reply = await asker.ask("result", race=race_key)
        assert reply.t == "archived", reply.d
        assert reply.d["race"] == race_key and reply.d["room"] == room.room_id
        assert reply.d["result"] == over.d
        settings: Any = reply.d["settings"]
        assert settings["variant"] == race.settings["variant"]
        deal: Any = reply.d["deal"]
        assert deal == {"certified": True, "moves": None, "difficulty": None}
        assert "code" not in reply.d and room.meta.code not in str(reply.d)


async def test_result_of_a_race_nobody_archived_is_unknown_race(backend: Backend) -> None:
    """Not archived (made up, still running, expired): ``unknown_race`` naming the
    field; a request that is no race id at all is ``bad_message``. Either way the
    connection carries on, and each answer is charged to its work bucket."""
    node = await backend.node()
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    asker = FakePeer(node)
    running = race_id(room.room_id, race.commitment)  # started, not over: not archived
    for unknown in (running, "r_000000000000.0123abcd", "r_x.nocommit"):
        reply = await asker.ask("result", race=unknown)
        assert reply.t == "error", reply.d
        assert reply.d["code"] == "unknown_race" and reply.d["field"] == "race"
    for bad in ("r_x", "r_x.0123ABCD", "../x.0123abcd", "r_x.0123abcd.json", 42):
        reply = await asker.ask("result", race=bad)
        assert reply.t == "error" and reply.d["code"] == "bad_message", reply.d
    assert asker.take_work() == 3 * RESULT_COST
    counted = node.metrics
    assert isinstance(counted, Tally)
    assert counted.requests_refused_by_code() == {"unknown_race": 3, "bad_message": 5}
    assert (await asker.ask("ping")).t == "pong"


def _carries(value: object, seed: int) -> bool:
    """Whether ``seed`` is anywhere in a frame's fields (nested)."""
    if isinstance(value, dict):
        return any(_carries(v, seed) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_carries(v, seed) for v in value)
    return value == seed or (isinstance(value, str) and str(seed) in value)


async def _two_rounds_then_rewound_to_the_first(
    node: Node,
) -> tuple[LiveRoom, list[Envelope], list[str]]:
    """Ann and Bob race round 1 and round 2 (both resign each), both archived; then
    the room's keys are rewound to round 1 under way (its archives kept: on a
    Cluster they live in other slots), and the node's memory of the room is gone.
    Returns the room as it was, the two race_overs and the two race ids."""
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    snapshot = await snapshot_room(node, room.room_id)  # round 1 under way
    overs, races = [], []
    for round_no in (1, 2):
        if round_no == 2:
            assert (await race.ann.ask("rematch")).t == "ok"
            assert (await race.bob.ask("ready", ready=True)).t == "ok"
            await race.ann.until(lambda f: f.t == "deal_chosen" and (f.v or 0) > overs[0].v)
            assert (await race.ann.ask("start")).t == "ok"
            await race.ann.until(lambda _: room.state.phase == Phase.RACING)
        for peer in (race.ann, race.bob):
            assert (await peer.ask("resign")).t == "ok"
        await race.ann.until(lambda _: room.state.phase == Phase.FINISHED)
        overs.append([f for f in race.ann.frames if f.t == "race_over"][-1])
        races.append(race_id(room.room_id, str(overs[-1].d["commitment"])))
        await archived_result(node.store, races[-1])
    await restore_room(node, room.room_id, snapshot)
    node.rooms.pop(room.room_id).cancel_timers()
    return room, overs, races


async def test_a_later_rounds_proof_whose_ending_failed_does_not_send_an_earlier_rounds_seed(
    backend: Backend,
) -> None:
    """The store rewound to round 1 under way; a ``result`` for round 2 (its archived
    result, the proof a resume would bring: Store.reveal_round) raises ``over`` to 2,
    but Redis fails the ticks that would end round 1, so it is refused. A ``result``
    for round 1 then read ``over`` at 2 as round 1 over and sent round 1's seed with
    round 1 under way in the store. Now it is refused too, no frame carrying either
    seed, and once Redis takes the writes the race ends first and the result goes."""
    node = await backend.node()
    room, overs, races = await _two_rounds_then_rewound_to_the_first(node)
    seeds = [int(str(over.d["seed"])) for over in overs]
    faults = StoreFaults(node.store)
    failing = True

    async def refuse(call: Callable[[], Awaitable[Any]]) -> Any:
        if not failing:
            return await call()
        faults.on_call("mark_unarchived", refuse)
        raise StoreUnavailable("mark_unarchived: Redis is down (injected)")

    faults.on_call("mark_unarchived", refuse)
    asker = FakePeer(node)
    for race in (races[1], races[0]):
        reply = await asker.ask("result", race=race)
        assert reply.t == "error" and reply.d["code"] == "unavailable", (race, reply.d)
    held = node.rooms[room.room_id].state
    assert (held.round, held.phase) == (1, Phase.RACING)
    assert await node.store.round_over(room.room_id) == 2
    leaked = [f for f in asker.frames if any(_carries(f.d, seed) for seed in seeds)]
    assert not leaked, leaked
    failing = False
    reply = await asker.ask("result", race=races[0])
    assert reply.t == "archived" and _carries(reply.d, seeds[0]), reply.d
    assert node.rooms[room.room_id].state.phase == Phase.FINISHED


async def test_an_earlier_rounds_result_goes_while_a_proved_round_cannot_end(
    backend: Backend,
) -> None:
    """Rounds 1 and 2 raced and archived, round 3 under way; a proof of round 3 (a
    take-up finding its archive after a rewind, on a node that then died) raises
    ``over`` to 3, and Redis fails the writes that would end it. Round 2's race_over
    is stored, so round 1's result reveals nothing under way: another node sends it
    at once. Read as "no race_over known", the node took the room up and refused the
    result ``unavailable`` for as long as round 3 could not end."""
    node, other = await backend.node(), await backend.node()
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    races: list[str] = []
    for round_no in (1, 2, 3):
        if round_no > 1:
            version = room.state.version
            assert (await race.ann.ask("rematch")).t == "ok"
            assert (await race.bob.ask("ready", ready=True)).t == "ok"
            await race.ann.until(lambda f, v=version: f.t == "deal_chosen" and (f.v or 0) > v)
            assert (await race.ann.ask("start")).t == "ok"
            await race.ann.until(lambda _: room.state.phase == Phase.RACING)
        if round_no == 3:
            break
        for peer in (race.ann, race.bob):
            assert (await peer.ask("resign")).t == "ok"
        await race.ann.until(lambda _: room.state.phase == Phase.FINISHED)
        over = [f for f in race.ann.frames if f.t == "race_over"][-1]
        races.append(race_id(room.room_id, str(over.d["commitment"])))
        await archived_result(node.store, races[-1])
    assert await other.store.reveal_round(room.room_id, 3) == 2
    faults = StoreFaults(other.store)

    async def refuse(_call: Callable[[], Awaitable[Any]]) -> Any:
        faults.on_call("mark_unarchived", refuse)
        raise StoreUnavailable("mark_unarchived: Redis is down (injected)")

    faults.on_call("mark_unarchived", refuse)
    # The request itself takes nothing up (one read). Not ``room_id not in
    # other.rooms``: the node's own sweep may load the room meanwhile (a CI run
    # under load: node's lease late, the room noted unarchived since round 3's
    # countdown), which is no business of the request's.
    request, taken_up = asyncio.current_task(), []
    load = other.room

    async def loaded(room_id: str) -> LiveRoom:
        if asyncio.current_task() is request:
            taken_up.append(room_id)
        return await load(room_id)

    other.room = loaded  # type: ignore[method-assign]
    reply = await FakePeer(other).ask("result", race=races[0])
    assert reply.t == "archived", reply.d
    assert taken_up == []
