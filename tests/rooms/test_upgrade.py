"""An upgrade (docs/deploy.md, "Upgrading"): every node of the previous release stops and
the new release starts on the same store. The previous release (b8023f9) stored its
rematches' ``room_reset`` without ``carried`` and never trimmed a stream; the new one
must fold such rooms as before and trim them only from a reset it wrote itself
(docs/store.md, "A room's history")."""

from __future__ import annotations

import asyncio

import pytest
from solrace.protocol import race_id
from solrace.protocol.views import Phase
from solrace.race import RoomState, decisions
from solrace.race.events import EventType, RoomEvent
from solrace.rooms import lobby
from solrace.rooms.node import Node
from solrace.rooms.records import unpack_event
from solrace.rooms.room import LiveRoom

from .conftest import Backend, FakePeer


async def _race(room: LiveRoom, host: FakePeer, racers: list[FakePeer]) -> str:
    """One round from its lobby: everyone ready, the host moves once, all resign."""
    for peer in racers:
        if peer is not host:
            assert (await peer.ask("ready", ready=True)).t == "ok"
    if room.state.phase == Phase.LOBBY:
        assert (await host.ask("start")).t == "ok"
    await host.until(lambda _: room.state.phase == Phase.RACING)
    assert (await host.ask("move", seq=0, move="D")).t == "moved"
    for peer in racers:
        assert (await peer.ask("resign")).t == "ok"
    await host.until(lambda _: room.state.phase == Phase.FINISHED)
    return race_id(room.room_id, room.state.commitment)


async def _rematch(room: LiveRoom, asker: FakePeer) -> None:
    next_round = room.state.round + 1
    assert (await asker.ask("rematch")).t == "ok"
    await asker.until(lambda _: room.state.round == next_round)


async def _stream(room: LiveRoom, node: Node) -> list[tuple[int, RoomEvent]]:
    stored = await node.store.events_since(room.room_id, 0)
    return [(e.version, unpack_event(e.data)) for e in stored]


async def test_a_room_the_previous_release_rematched_folds_and_is_trimmed_from_new_resets(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the previous release: three racers, a rematch with Cy away (Cy is dropped),
    a second rematch, and round 3 under way when every node stops. A node of the new
    release takes the room up to the state the old node held; Ann and Bob resume and
    end round 3; three rematches follow. The first new rematch trims nothing (the
    reset before it carries nothing), each later one trims to the new reset before
    it: an old reset is never the stream's first entry. The old rounds' logs go at the
    second, every round's result is archived, and a fresh node folds the room to the
    same state."""
    real_rematch = decisions.rematch

    def previous_release_rematch(state: RoomState, racer: int) -> list[RoomEvent]:
        return [ev.but(carried=None) for ev in real_rematch(state, racer)]

    monkeypatch.setattr(decisions, "rematch", previous_release_rematch)
    old = await backend.node()
    ann, bob, cy = FakePeer(old), FakePeer(old), FakePeer(old)
    created = await ann.ask("create", variant="klondike", name="Ann", deals="random")
    code = str(created.d["code"])
    joined = await bob.ask("join", code=code, name="Bob")
    cy_joined = await cy.ask("join", code=code, name="Cy")
    assert cy_joined.t == "joined"
    room = ann.room
    assert room is not None
    races = [await _race(room, ann, [ann, bob, cy])]
    await lobby.disconnected(old, cy)
    await _rematch(room, bob)
    assert sorted(room.state.racers) == [1, 2]
    races.append(await _race(room, ann, [ann, bob]))
    await _rematch(room, ann)
    assert (await bob.ask("ready", ready=True)).t == "ok"
    assert (await ann.ask("start")).t == "ok"
    await ann.until(lambda _: room.state.phase == Phase.RACING)
    assert (await ann.ask("move", seq=0, move="D")).t == "moved"
    resets = [e for _, e in await _stream(room, old) if e.t == EventType.ROOM_RESET]
    assert len(resets) == 2 and all(e.carried is None for e in resets)
    assert room.state.round == 3 and room.state.round_began == 0
    await old.stop()  # the upgrade: every node of the previous release stops
    monkeypatch.setattr(decisions, "rematch", real_rematch)

    new = await backend.node()
    taken = await new.room(room.room_id)
    assert taken.state == room.state
    ann, bob = FakePeer(new), FakePeer(new)
    for peer, token in ((ann, created.d["token"]), (bob, joined.d["token"])):
        assert (await peer.ask("resume", room=room.room_id, token=token, since=3)).t == "joined"
    dropped = await FakePeer(new).ask("resume", room=room.room_id, token=cy_joined.d["token"])
    assert dropped.t == "error" and dropped.d["code"] == "bad_token"
    room = taken
    assert ann.room is room
    for peer in (ann, bob):
        assert (await peer.ask("resign")).t == "ok"
    await ann.until(lambda _: room.state.phase == Phase.FINISHED)
    races.append(race_id(room.room_id, room.state.commitment))
    for rematch in range(1, 4):
        began = room.state.round_began
        await _rematch(room, ann)
        stream = await _stream(room, new)
        first_version, first = stream[0]
        assert stream[-1][1].carried is not None
        if rematch == 1:  # the reset before is the old release's: nothing trimmed
            assert began == 0 and first_version == 1
        else:  # trimmed to the new reset before this one
            assert first_version == began > 1
            assert first.t == EventType.ROOM_RESET and first.carried is not None
        if rematch >= 2:
            for log in ("1:1", "2:2", "3:1"):
                assert await new.store.log_length(room.room_id, log) == 0, (rematch, log)
        races.append(await _race(room, ann, [ann, bob]))
    assert room.state.round == 6 and len(set(races)) == 6
    for race in races:
        assert await new.store.load_result(race) is not None, race
    fresh = await backend.node()
    assert (await fresh.room(room.room_id)).state == room.state


async def _looked(node: Node) -> None:
    """Wait for the node's start-up look for older nodes (the lease loop's first turn)."""
    async with asyncio.timeout(10):
        while node.older_nodes is None:
            await asyncio.sleep(0.01)


async def _raced_once(node: Node) -> tuple[FakePeer, FakePeer, LiveRoom]:
    """Ann's and Bob's room on ``node``, after its first race."""
    ann, bob = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="klondike", name="Ann", deals="random")
    assert (await bob.ask("join", code=str(created.d["code"]), name="Bob")).t == "joined"
    room = ann.room
    assert room is not None
    await _race(room, ann, [ann, bob])
    return ann, bob, room


async def test_a_live_node_of_a_release_before_trims_holds_them(backend: Backend) -> None:
    """A rolling upgrade from a release before trims (094c8a7; its leases say 1): it
    folds a room only from version 1, so a node of it taking up a room this release
    had rematched twice refused every request for it ``internal`` (an audit: "event
    679 after 0"). A node of this release started while such a node holds its lease
    trims no room's history, and trims again at the first rematch after that lease is
    gone."""
    first = await backend.node()
    old_lease = first.store.keys.lease("old-0a1b2c3d")
    await first.store._redis.set(old_lease, b"1", px=60_000)
    node = await backend.node()
    await _looked(node)
    assert node.older_nodes == {"old-0a1b2c3d"}
    ann, bob, room = await _raced_once(node)
    for _ in range(3):
        await _rematch(room, ann)
        stream = await _stream(room, node)
        assert stream[0][0] == 1, "trimmed while a node of an earlier release runs"
        await _race(room, ann, [ann, bob])
    assert await node.store.log_length(room.room_id, "1:1") == 1
    await first.store._redis.delete(old_lease)
    began = room.state.round_began
    await _rematch(room, ann)
    stream = await _stream(room, node)
    assert stream[0][0] == began > 1 and stream[0][1].t == EventType.ROOM_RESET
    assert await node.store.log_length(room.room_id, "1:1") == 0
    assert node.older_nodes == set()


async def test_no_trim_before_the_look_for_older_nodes_has_answered(backend: Backend) -> None:
    """A review: a rematch before the start-up look (beside the lease loop) had
    answered — just after start, or while the store failed it — took "not asked yet"
    for "none" and trimmed a room a live older node could not take up."""
    node = await backend.node()
    await _looked(node)
    node.older_nodes, node._asking_older = None, True  # as while the look is in flight
    ann, bob, room = await _raced_once(node)
    for _ in range(3):
        await _rematch(room, ann)
        await _race(room, ann, [ann, bob])
    assert (await _stream(room, node))[0][0] == 1, "trimmed before the look answered"
