"""Room mechanics: listing, quick races, the lobby, leaving, the disconnect grace,
room options (undo, spectator delay) and expiry of finished rooms."""

from __future__ import annotations

import asyncio

import pytest
from solrace.net.server import RaceServer
from solrace.protocol import race_id
from solrace_client import RaceClient, ServerError

from tests.support.faults import Clock
from tests.support.race import (
    archived_result,
    fair_match,
    lobby,
    play_until_done,
    racing,
    winning_moves,
)

from .conftest import SOLVABLE_SECRET, Cluster


def _advance(server: RaceServer, ms: int) -> None:
    """Move a node's clock forward instead of sleeping through a timer."""
    real = server.node.clock
    server.node.clock = lambda: real() + ms


async def test_list_shows_public_rooms_only(cluster: Cluster) -> None:
    server = await cluster.node()
    public = await RaceClient.connect(server.url)
    private = await RaceClient.connect(server.url)
    looker = await RaceClient.connect(server.url)
    await public.create("klondike", "Ann", options={"draw": 3})
    await private.create("yukon", "Bob", private=True)
    rooms = await looker.list_rooms()
    codes = {r["code"] for r in rooms}
    assert public.code in codes and private.code not in codes
    summary = next(r for r in rooms if r["code"] == public.code)
    assert (summary["variant"], summary["phase"], summary["racers"], summary["host"]) == (
        "klondike",
        "lobby",
        1,
        "Ann",
    )
    assert summary["options"]["draw"] == 3
    assert await looker.list_rooms("russian") == []
    for client in (public, private, looker):
        await client.close()


async def test_quick_joins_the_waiting_room_and_starts_when_all_are_ready(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    first = await ann.quick("yukon", "Ann")
    second = await bob.quick("yukon", "Bob")
    assert first["room"] == second["room"]
    assert first["snapshot"]["settings"]["quick"] is True
    await ann.ready()
    await bob.ready()  # everyone ready: the countdown starts by itself, no host needed
    for client in (ann, bob):
        await client.next_event("started", timeout=10)
    cy = await RaceClient.connect(server.url)
    third = await cy.quick("yukon", "Cy")  # the first room is racing: a new one opens
    assert third["room"] != first["room"]
    for client in (ann, bob, cy):
        await client.close()


async def test_a_quick_rooms_lobby_timer_starts_it_without_everyone_ready(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.quick("alaska", "Ann")
    await bob.quick("alaska", "Bob")
    assert not [e for e in ann.received if e.t == "countdown"]
    _advance(server, 21_000)
    await server.node.tick(server.node.rooms[ann.room or ""])
    countdown = await ann.next_event("countdown", timeout=10)
    assert countdown.d["commitment"]
    for client in (ann, bob):
        await client.close()


async def test_leaving_the_lobby_removes_the_racer_and_passes_the_host_on(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann")
    await bob.join(ann.code or "", "Bob")
    await ann.leave()
    left = await bob.next_event("racer_left", timeout=10)
    assert left.d == {"racer": ann.racer, "host": bob.racer, "reason": "left"}
    await ann.close()
    cy = await RaceClient.connect(server.url)
    joined = await cy.join(bob.code or "", "Cy")
    assert joined["snapshot"]["host"] == bob.racer
    assert [r["name"] for r in joined["snapshot"]["racers"]] == ["Bob", "Cy"]
    for client in (bob, cy):
        await client.close()


async def test_leaving_mid_race_is_a_forfeit_and_the_race_goes_on(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    await bob.leave()
    left = await ann.next_event("racer_left", timeout=10)
    assert left.d["racer"] == bob.racer
    with pytest.raises(ServerError) as gone:
        await bob.resume(room=ann.room, token=bob.token, since=0)
    assert gone.value.code == "bad_token"  # a forfeit cannot be taken back
    assert (await play_until_done(ann, winning_moves(SOLVABLE_SECRET)))["status"] == "finished"
    over = await ann.next_event("race_over", timeout=10)
    assert [(s["name"], s["status"]) for s in over.d["standings"]] == [
        ("Ann", "finished"),
        ("Bob", "left"),
    ]
    for client in (ann, bob):
        await client.close()


async def test_a_racer_gone_past_the_grace_period_forfeits(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    await bob.close()
    await ann.wait_for(lambda e: e.t == "presence" and not e.d["online"])
    _advance(server, 31_000)
    await server.node.tick(server.node.rooms[ann.room or ""])
    left = await ann.next_event("racer_left", timeout=10)
    assert left.d["racer"] == bob.racer
    await ann.close()


async def test_undo_follows_the_rooms_options(cluster: Cluster) -> None:
    server = await cluster.node()
    for undo in (True, False):
        ann, bob = await racing(server.url, options={"undo": undo})
        before = ann.board
        await ann.move(winning_moves(SOLVABLE_SECRET)[0])
        if undo:
            undone = await ann.undo()
            assert undone["board"] == before and undone["moves"] == 2  # undo counts
        else:
            with pytest.raises(ServerError) as refused:
                await ann.undo()
            assert refused.value.code == "illegal_move" and "undo is off" in refused.value.message
        for client in (ann, bob):
            await client.close()


async def test_spectators_see_boards_only_after_the_rooms_delay(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await lobby(server.url, spectator_delay_s=1)
    watcher = await RaceClient.connect(server.url)
    watching = await watcher.watch(code=ann.code)
    assert watching["snapshot"]["settings"]["spectator_delay_s"] == 1
    await ann.start()
    await watcher.next_event("started", timeout=10)
    await ann.move(winning_moves(SOLVABLE_SECRET)[0])
    moved_at = asyncio.get_running_loop().time()
    assert ann.board is not None
    seen = ann.board
    board = await watcher.wait_for(
        lambda e: e.t == "board" and e.d["racer"] == ann.racer and fair_match(e.d["view"], seen)
    )
    assert board is not None
    assert asyncio.get_running_loop().time() - moved_at >= 0.9
    for client in (ann, bob, watcher):
        await client.close()


async def test_a_finished_rooms_keys_expire_and_its_result_is_kept(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    await ann.resign()
    await bob.resign()
    over = await ann.next_event("race_over", timeout=10)
    store = server.node.store
    # The node archives after it has sent the race_over (expiry first, then result).
    assert await archived_result(store, race_id(ann.room or "", over.d["commitment"]))
    raw = store._redis  # the test inspects the real keys
    pattern = store.keys.room(ann.room or "").base.replace("{", "\\{").replace("}", "\\}") + "*"
    ttls = [await raw.pttl(key) async for key in raw.scan_iter(match=pattern)]
    assert ttls and all(0 < ttl <= 3_600_000 for ttl in ttls)
    assert ann.room not in await store.listed_rooms()
    assert over.d["reason"] == "all_done"
    for client in (ann, bob):
        await client.close()


async def test_only_long_idle_rooms_without_connections_are_forgotten(cluster: Cluster) -> None:
    """A request may hold a room object across awaits; forgetting a room the moment
    its last connection goes would strand a session on an object nobody folds into.
    Rooms are forgotten only after long idleness, and reload from the store."""
    server = await cluster.node()
    node = server.node
    ann, bob = await lobby(server.url)
    looker = await RaceClient.connect(server.url)
    await looker.list_rooms()
    room_id = ann.room or ""
    await ann.close()
    await bob.close()
    await asyncio.sleep(0.2)
    node._sweep()
    assert room_id in node.rooms  # idle, but not for long
    _advance(server, 11 * 60 * 1000)
    node._sweep()
    # Not while a decision of its is due: its racers' grace has ended, and forgotten
    # now the room would keep them for ever (the soak audit's ghost lobbies).
    assert room_id in node.rooms
    room = node.rooms[room_id]
    for _ in range(3):  # they leave, one decision a tick; then nothing more is due
        await node.tick(room)
    assert not room.state.racers
    # Out of the room's set of serving nodes first (its room check does it every
    # second): forgotten while in it, the room was read as served by every other node.
    async with asyncio.timeout(10):  # (its own check may be leaving it at this instant)
        while room.joined or room.maybe_joined:
            await node.leave_unserved()
            await asyncio.sleep(0.05)
    assert node.node_id not in await node.store.room_nodes(room_id)
    node._sweep()
    assert room_id not in node.rooms
    rooms = await looker.list_rooms()  # nobody is in it: it is not offered
    assert not any(r["room"] == room_id for r in rooms)
    assert (await node.room(room_id)).room_id == room_id  # reloads from the store
    assert room_id in node.rooms
    await looker.close()


async def test_gauges_match_the_store_after_races_end(cluster: Cluster) -> None:
    """solrace_rooms, _races_running and _connections are read from what the node
    holds: after two races end and everyone leaves, they are 0, as the store says."""
    server = await cluster.node()
    metrics = server.metrics
    pairs = [await racing(server.url) for _ in range(2)]
    page = metrics.render().decode()
    assert "solrace_races_running 2.0" in page and "solrace_connections 4.0" in page
    assert "solrace_rooms 2.0" in page
    for ann, bob in pairs:
        await ann.resign()
        await bob.resign()
        await ann.next_event("race_over", timeout=10)
    page = metrics.render().decode()
    assert "solrace_races_running 0.0" in page
    for ann, bob in pairs:
        await ann.close()
        await bob.close()
    for _ in range(50):
        if not server.node.peers:
            break
        await asyncio.sleep(0.05)
    page = metrics.render().decode()
    assert "solrace_connections 0.0" in page and "solrace_rooms 0.0" in page
    store = server.node.store
    for ann, _ in pairs:  # the store agrees: both races are over and unlisted
        over = next(e for e in ann.received if e.t == "race_over")
        assert await archived_result(store, race_id(ann.room or "", over.d["commitment"]))
        assert ann.room not in await store.listed_rooms()


async def test_an_abandoned_lobby_leaves_the_list_and_expires(cluster: Cluster) -> None:
    """Everyone's connection drops in the lobby: after the grace the racers are gone,
    the room is unlisted and its keys expire within ten minutes."""
    clock = Clock()
    server = await cluster.node(clock=clock)
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann")
    await bob.join(ann.code or "", "Bob")
    room_id = ann.room or ""
    store = server.node.store
    assert room_id in await store.listed_rooms()
    await ann.close()
    await bob.close()
    for _ in range(50):
        state = server.node.rooms[room_id].state
        if all(not r.online for r in state.racers.values()):
            break
        await asyncio.sleep(0.05)
    clock.advance(31, server.node)
    for _ in range(100):
        if room_id not in await store.listed_rooms():
            break
        await asyncio.sleep(0.05)
    assert room_id not in await store.listed_rooms()
    assert not server.node.rooms[room_id].state.racers
    ttl = await store._redis.pttl(store.keys.room(room_id).meta)  # the test reads the TTL
    assert 0 < ttl <= 600_000
    lister = await RaceClient.connect(server.url)
    assert room_id not in [r["room"] for r in await lister.list_rooms()]
    await lister.close()
