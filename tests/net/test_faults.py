"""Faults between the writes of a decision (docs/design.md, "Faults"): a node killed and
Redis failing at each point of a finishing move; a crashed node's racers; outages
longer than the disconnect grace; a late "offline" after a resume; a Redis that comes
back without acknowledged writes. Each test states the outcome the rules give and
checks it on both stores."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from solrace.net.server import RaceServer
from solrace.protocol import Envelope
from solrace.protocol.fairness import race_id
from solrace.protocol.views import EventType
from solrace.race import RacerGame
from solrace.race.decisions import DISCONNECT_GRACE_MS
from solrace.race.fairness import round_salt, round_seed
from solrace.rooms.node import HAND_OFF_KEEP_MS, LEASE_MS, LEASE_RENEW_S, ROOM_CHECK_S
from solrace.rooms.records import unpack, unpack_entries, unpack_event
from solrace.rooms.room import PROOF_ROUNDS_AHEAD
from solrace.rules import deal
from solrace.store.errors import StoreUnavailable
from solrace_client import RaceClient, ServerError

from tests.support.faults import Clock, Crashed, StoreFaults, crash, rewind
from tests.support.race import (
    archived_result,
    check_no_leaks,
    close_all,
    lobby,
    play_until_done,
    play_until_refused,
    racing,
    restore_room,
    restore_store,
    snapshot_room,
    winning_moves,
)
from tests.support.solver import solve

from .conftest import SOLVABLE_SECRET, Cluster

GRACE_S = DISCONNECT_GRACE_MS / 1000


def _finishing_line() -> tuple[list[str], int]:
    """The winning moves and the index of the one that completes the foundations."""
    moves = winning_moves(SOLVABLE_SECRET)
    game = RacerGame("yukon", round_seed(SOLVABLE_SECRET, 1), {})
    for i, move in enumerate(moves):
        game.apply(move, i)
        if game.status() == "finished":
            return moves, i
    raise AssertionError("the winning line does not finish")


def _replies(client: RaceClient, seq: int) -> list[str]:
    """Every reply this client got to a move with ``seq``."""
    return [e.t for e in client.received if e.t in ("moved", "error") and e.d.get("seq") == seq]


async def _standings(client: RaceClient) -> list[tuple[str, int, str]]:
    over = await client.next_event("race_over", timeout=20)
    return [(s["name"], s["place"], s["status"]) for s in over.d["standings"]]


def _crashed(cluster: Cluster, server: RaceServer, faults: StoreFaults) -> None:
    crash(server, faults)
    cluster.servers.remove(server)


# ------------------------------------------------------------ a finishing move
@pytest.mark.parametrize("point", ["before_script", "reply_lost", "after_reply"])
async def test_redis_failing_at_each_point_of_a_finishing_move(
    cluster: Cluster, point: str
) -> None:
    """The first finisher is first and every request gets exactly one reply."""
    server = await cluster.node()
    faults = StoreFaults(server.node.store)
    ann, bob = await racing(server.url)
    moves, last = _finishing_line()
    await play_until_done(ann, moves[:last])

    async def fail(append: Callable[[], Awaitable[Any]]) -> Any:
        if point == "before_script":
            raise StoreUnavailable("Redis unreachable (injected): the script never ran")
        result = await append()  # the script ran: place and finished event are stored
        if point == "reply_lost":
            raise StoreUnavailable("reply lost (injected)")
        faults.down = True  # Redis fails right after the acknowledgement
        asyncio.get_running_loop().call_later(1.0, setattr, faults, "down", False)
        return result

    faults.on_append_move(fail)
    if point == "after_reply":
        reply = await ann.move(moves[last])
        assert reply["status"] == "finished"
    else:
        with pytest.raises(ServerError, match="unavailable"):
            await ann.move(moves[last])
        reply = await ann.move(moves[last])  # the same seq, the same move: a retry
        assert reply["status"] == "finished"
    assert _replies(ann, last) == (["moved"] if point == "after_reply" else ["error", "moved"])
    # Bob finishes later, once Redis is back: second.
    await asyncio.sleep(1.2)
    assert (await play_until_done(bob, moves))["status"] == "finished"
    assert await _standings(bob) == [("Ann", 1, "finished"), ("Bob", 2, "finished")]
    places = [e.d for e in bob.received if e.t == "finished"]
    assert [(p["racer"], p["place"]) for p in places] == [(ann.racer, 1), (bob.racer, 2)]
    await ann.close()
    await bob.close()


async def test_a_retry_with_another_move_under_a_used_seq_is_refused(cluster: Cluster) -> None:
    server = await cluster.node()
    faults = StoreFaults(server.node.store)
    ann, bob = await racing(server.url)
    moves = winning_moves(SOLVABLE_SECRET)

    async def lose_reply(append: Callable[[], Awaitable[Any]]) -> Any:
        await append()
        raise StoreUnavailable("reply lost (injected)")

    faults.on_append_move(lose_reply)
    with pytest.raises(ServerError, match="unavailable"):
        await ann.move(moves[0])
    with pytest.raises(ServerError, match="bad_seq"):
        await ann.move(moves[1])  # seq 0 again, but not the stored move
    reply = await ann.move(moves[0])  # the stored move: its outcome
    assert reply["seq"] == 0 and reply["moves"] == 1
    assert (await ann.move(moves[1]))["seq"] == 1
    await ann.close()
    await bob.close()


@pytest.mark.parametrize("point", ["before_script", "after_script", "after_reply"])
async def test_a_node_killed_at_each_point_of_a_finishing_move(
    cluster: Cluster, point: str
) -> None:
    """Ann's node dies in her finishing move; she resumes on another node and (re)plays
    it; Bob finishes later on that node: Ann is first whatever the point."""
    one, two = await cluster.node(), await cluster.node()
    faults = StoreFaults(one.node.store)
    ann, bob = await racing(one.url, two.url)
    moves, last = _finishing_line()
    await play_until_done(ann, moves[:last])

    async def die(append: Callable[[], Awaitable[Any]]) -> Any:
        if point == "before_script":
            _crashed(cluster, one, faults)
            raise Crashed
        result = await append()
        if point == "after_script":
            _crashed(cluster, one, faults)
            raise Crashed
        # after the reply: the node dies as soon as it has answered
        asyncio.get_running_loop().call_soon(_crashed, cluster, one, faults)
        return result

    faults.on_append_move(die)
    with contextlib.suppress(ServerError, ConnectionError):
        await ann.move(moves[last])
    await ann.closed
    assert len(_replies(ann, last)) <= 1
    again = await RaceClient.connect(two.url)
    joined = await again.resume(room=ann.room, token=ann.token, since=ann.version)
    stored = point != "before_script"
    assert joined["snapshot"]["you"]["next_seq"] == last + (1 if stored else 0)
    again.seq = last  # the client retries its unanswered move
    reply = await again.move(moves[last])
    assert reply["status"] == "finished"
    assert _replies(again, last) == ["moved"]
    assert (await play_until_done(bob, moves))["status"] == "finished"
    assert await _standings(bob) == [("Ann", 1, "finished"), ("Bob", 2, "finished")]
    await again.close()
    await bob.close()


# ------------------------------------------------------- presence and dropouts
async def test_a_crashed_nodes_racers_go_offline_and_the_race_ends(cluster: Cluster) -> None:
    """Nobody marks Ann offline when her node dies, except the lease: another node
    serving the room does it within a lease and a room check, the grace runs, the race
    ends."""
    clock = Clock()
    one, two = await cluster.node(clock=clock), await cluster.node(clock=clock)
    faults = StoreFaults(one.node.store)
    ann, bob = await racing(one.url, two.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:5])
    await bob.resign()
    _crashed(cluster, one, faults)
    loop = asyncio.get_running_loop()
    crashed_at = loop.time()
    offline = await bob.wait_for(
        lambda e: e.t == "presence" and e.d == {"racer": ann.racer, "online": False},
        timeout=LEASE_MS / 1000 + 3 * ROOM_CHECK_S + 2,
    )
    assert offline is not None
    assert loop.time() - crashed_at <= LEASE_MS / 1000 + 2 * ROOM_CHECK_S + 1
    clock.advance(GRACE_S, two.node)
    left = await bob.wait_for(lambda e: e.t == "racer_left", timeout=5)
    assert left.d["reason"] == "grace"
    assert await _standings(bob) == [("Ann", 1, "left"), ("Bob", 2, "resigned")]
    await bob.close()


async def test_the_race_ends_when_its_last_racer_drops_out(cluster: Cluster) -> None:
    """Bob resigned; Ann's client dies: the race ends once her grace is over, not at
    the time limit — even with nobody left connected to the node."""
    clock = Clock()
    server = await cluster.node(clock=clock)
    ann, bob = await racing(server.url)
    watcher = await RaceClient.connect(server.url)
    await watcher.watch(code=ann.code)
    await bob.resign()
    await bob.close()
    transport = ann.ws.transport
    assert transport is not None
    transport.abort()  # killed client: no closing handshake
    await watcher.wait_for(
        lambda e: e.t == "presence" and e.d == {"racer": ann.racer, "online": False}, timeout=10
    )
    clock.advance(GRACE_S, server.node)
    assert await _standings(watcher) == [("Ann", 1, "left"), ("Bob", 2, "resigned")]
    await watcher.close()


async def test_a_late_offline_never_overrides_a_newer_resume(cluster: Cluster) -> None:
    """Ann resumes on node two; node one (draining) records her old connection
    offline afterwards. She stays online and is never forfeited."""
    clock = Clock()
    one, two = await cluster.node(clock=clock), await cluster.node(clock=clock)
    ann, bob = await racing(one.url, two.url)
    room = one.node.rooms[ann.room or ""]
    old_conn = room.racers[ann.racer or 0].conn_id
    again = await RaceClient.connect(two.url)
    await again.resume(room=ann.room, token=ann.token)
    await ann.closed  # replaced
    await bob.wait_for(lambda e: e.t == "presence" and e.d["online"], timeout=5)
    await one.node.presence(room, ann.racer or 0, False, old_conn)  # the late disconnect
    await one.drain()
    cluster.servers.remove(one)
    clock.advance(GRACE_S + 1, two.node)
    await asyncio.sleep(0.5)
    assert not [e for e in bob.received if e.t in ("racer_left", "race_over")]
    assert (await again.move(winning_moves(SOLVABLE_SECRET)[0]))["seq"] == 0
    await again.close()
    await bob.close()


async def test_a_join_whose_outcome_redis_hides_is_that_seat_through_the_client(
    cluster: Cluster,
) -> None:
    """Redis goes down right after storing Bob's racer_joined, for 2.5 s: the server
    cannot read it back, refuses the join ``unavailable`` and names the seat.
    ``RaceClient.join`` resumes it (refused ``unavailable`` again while Redis is down)
    and returns it: Bob is racer 2, the room has two seats, not three, and the offline
    the server wrote about the refused join once Redis was back leaves him online:
    he readies, the race starts, he plays."""
    server = await cluster.node()
    faults = StoreFaults(server.node.store)
    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann")
    append = server.node.store.append_event

    async def down_after_a_join(*args: Any, **kwargs: Any) -> Any:
        version = await append(*args, **kwargs)
        if unpack_event(args[1]).t == EventType.RACER_JOINED and not faults.down:
            faults.down = True
            asyncio.get_running_loop().call_later(2.5, setattr, faults, "down", False)
        return version

    setattr(server.node.store, "append_event", down_after_a_join)  # noqa: B010
    bob = await RaceClient.connect(server.url)
    joined = await bob.join(ann.code or "", "Bob")
    refusals = [e.d for e in bob.received if e.t == "error"]
    assert [r["code"] for r in refusals][:2] == ["unavailable", "unavailable"], refusals
    assert refusals[0]["token"] == joined["token"] and refusals[0]["room"] == ann.room
    assert joined["racer"] == 2
    assert sorted(int(r) for r in bob.view.racers) == [1, 2]
    await asyncio.sleep(1.0)  # the offline about the refused join has been written
    await bob.ready()
    await ann.wait_for(lambda e: e.t == "ready_changed", timeout=10)
    await ann.start()
    await bob.wait_started()
    assert (await bob.move(winning_moves(SOLVABLE_SECRET)[0]))["seq"] == 0
    assert sorted(int(r) for r in ann.view.racers) == [1, 2]
    assert all(info.get("online", True) for info in ann.view.racers.values())
    await ann.close()
    await bob.close()


@pytest.mark.parametrize("entry", ["create", "quick"])
async def test_an_entry_refused_before_anything_was_stored_is_sent_again(
    cluster: Cluster, entry: str
) -> None:
    """Redis is down for 2.5 s when the request arrives: refused ``unavailable`` with no
    seat named (nothing of the racer was stored), the client library sent nothing
    again and the bot gave up in 0.2 s, though docs/client.md says such a request is
    sent again. Now it is, after ``retry_after_ms``, until Redis is back: one room,
    one racer."""
    server = await cluster.node()
    faults = StoreFaults(server.node.store)
    faults.down = True
    asyncio.get_running_loop().call_later(2.5, setattr, faults, "down", False)
    ann = await RaceClient.connect(server.url)
    if entry == "create":
        joined = await ann.create("yukon", "Ann")
    else:
        joined = await ann.quick("yukon", "Ann")
    refusals = [e.d for e in ann.received if e.t == "error"]
    assert refusals and {r["code"] for r in refusals} == {"unavailable"}, refusals
    assert all("token" not in r for r in refusals)  # no seat: sent again, not resumed
    assert joined["racer"] == 1 and [int(r) for r in ann.view.racers] == [1]
    await ann.close()


async def test_a_drained_node_closes_with_draining(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    await server.drain()
    cluster.servers.remove(server)
    await ann.closed
    assert (ann.ws.close_code, ann.ws.close_reason) == (1001, "draining")
    await bob.close()


_ADOPTING = "adopting a room no live node serves"
_TAKING_UP = "taking up a room its node handed off when it stopped"


async def _dies(cluster: Cluster, server: RaceServer) -> None:
    """``server`` dies: killed, no drain and no hand-off, and its lease gone (what 5 s
    without a renewal does)."""
    await cluster.kill(server)
    await server.node.store.drop_lease(server.node.node_id)


async def _swept_by_a_new_node(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> tuple[RaceServer, list[tuple[str, str]]]:
    """A node started on the cluster's store, its sweep run (a restart's): the node and
    the lines logged so far, as (level, message)."""
    server = await cluster.node()
    await server.node.sweep_orphans()
    return server, [(r.levelname, r.getMessage()) for r in caplog.records]


async def _drained_lobby(cluster: Cluster) -> tuple[RaceServer, RaceClient]:
    """A node with Ann alone in its room's lobby, drained (a SIGTERM: its rooms handed
    off, its lease deleted) and out of the cluster, Ann's connection closed by the
    drain: the node and Ann. What a clean restart leaves the next node to take up."""
    first = await cluster.node()
    ann = (await lobby(first.url, names=("Ann",)))[0]
    await first.drain()
    cluster.servers.remove(first)
    await ann.closed
    return first, ann


async def test_a_clean_restart_takes_up_its_drained_rooms_without_a_warning(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGTERM then a start on the same store (a clean restart): the new node adopts
    the lobby the old one drained, and said so as a dead node's room, a warning (an
    operator audit: ``adopting a room no live node serves`` on every restart). A
    drained node hands its rooms off (Store.hand_off), so that is one INFO; a node
    that died without a drain (its lease gone, no hand-off) still warns."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    _, ann = await _drained_lobby(cluster)
    second, said = await _swept_by_a_new_node(cluster, caplog)
    assert ("INFO", _TAKING_UP) in said and ("WARNING", _ADOPTING) not in said, said
    assert second.node.rooms[ann.room or ""].served()
    # A node that dies instead: its lease lapses, nothing says it handed off.
    caplog.clear()
    bob = (await lobby(second.url, names=("Bob",)))[0]
    await _dies(cluster, second)
    _, said = await _swept_by_a_new_node(cluster, caplog)
    assert ("WARNING", _ADOPTING) in said and ("INFO", _TAKING_UP) not in said, said
    await bob.close()


async def test_a_clean_restart_leaves_no_hand_off_note_behind(cluster: Cluster) -> None:
    """A drain's hand-off note (``handoff:<id>``) is read when the node's rooms are
    taken up, and never after: it goes as soon as they are, and otherwise lapses within
    HAND_OFF_KEEP_MS, not a day (ROOM_TTL_S) as it did — each drain left a key for a
    day (an operator audit)."""
    first, ann = await _drained_lobby(cluster)
    store = await cluster.store()
    note = store.keys.handed_off(first.node.node_id)
    # Read before a node starts: its start's own sweep takes the room up and deletes
    # the note (-2 once in CI, read after the start).
    assert 0 < await store._redis.pttl(note) <= HAND_OFF_KEEP_MS
    second = await cluster.node()
    await second.node.sweep_orphans()
    assert second.node.rooms[ann.room or ""].served()  # taken up: the note did its work
    assert await store._redis.exists(note) == 0
    pattern = re.sub(r"([*?\[\]\\])", r"\\\1", store.keys.prefix) + "handoff:*"
    assert [k async for k in store._redis.scan_iter(match=pattern)] == []


async def test_a_room_whose_last_node_drained_is_taken_up_at_info_after_an_earlier_crash(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A room served by a node that crashed, then by the node that took it up (which
    warned: a death), then drained: the next take-up is a clean restart's, one INFO.
    It warned again (an operator audit): the crashed node stayed in the room's set of
    serving nodes, without a hand-off note, so the room read as a dead node's."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    first = await cluster.node()
    ann = (await lobby(first.url, names=("Ann",)))[0]
    await _dies(cluster, first)
    second, said = await _swept_by_a_new_node(cluster, caplog)
    assert ("WARNING", _ADOPTING) in said, said  # the crash: warned once
    caplog.clear()
    await second.drain()
    cluster.servers.remove(second)
    third, said = await _swept_by_a_new_node(cluster, caplog)
    assert ("INFO", _TAKING_UP) in said and ("WARNING", _ADOPTING) not in said, said
    assert third.node.rooms[ann.room or ""].served()
    await ann.close()


@pytest.mark.parametrize("fails", ["between its writes", "before its first write"])
async def test_a_hand_off_cut_by_a_fault_still_lets_the_room_be_adopted_once(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, fails: str
) -> None:
    """A drain's last word takes two writes (Store.hand_off: the hand-off note, then the
    lease dropped). Redis failing between them leaves the note and the lease, which
    lapses: the room is taken up once, at INFO (the node did drain). Failing before the
    first leaves neither: the drain still ends, and the room is adopted once as a dead
    node's, with the warning — a hand-off is only ever what the log says, never a
    room left unserved or served twice."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    first = await cluster.node()
    ann = (await lobby(first.url, names=("Ann",)))[0]
    store = first.node.store
    lease = store.keys.lease(first.node.node_id)
    real_set, real_delete = store._redis.set, store._redis.delete

    async def fails_set(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("hand-off note: Redis is down (injected)")

    async def fails_at_lease(*keys: Any) -> Any:
        if lease in keys:
            raise StoreUnavailable("lease: Redis failed (injected)")
        return await real_delete(*keys)

    if fails == "between its writes":
        store._redis.delete = fails_at_lease
    else:
        store._redis.set = fails_set
    try:
        await first.drain()  # ends all the same
    finally:
        store._redis.set, store._redis.delete = real_set, real_delete
    cluster.servers.remove(first)
    await ann.closed
    second = await cluster.node()
    gone = {first.node.node_id}
    between = fails == "between its writes"
    assert await second.node.store.handed_off(gone) == (gone if between else set())
    assert await second.node.store.live_nodes(gone) == gone  # it lapses only later
    await second.node.store.drop_lease(first.node.node_id)  # what 5 s without renewal does
    await second.node.sweep_orphans()
    await second.node.sweep_orphans()  # a second sweep adopts nothing more
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    taken = [m for level, m in said if m in (_TAKING_UP, _ADOPTING)]
    expected = ("INFO", _TAKING_UP) if between else ("WARNING", _ADOPTING)
    assert expected in said and len(taken) == 1, said
    assert second.node.rooms[ann.room or ""].served()


@pytest.mark.parametrize("held", ["at its append", "at its engine read"])
async def test_a_move_in_flight_across_a_drain_is_stored_once(
    cluster: Cluster, held: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A drain lets the moves between their check and their store append reach the
    store (Node.drained), then closes every connection 1001 and the racers resume on
    another node. Ann's move is in flight as node one drains: at its append (Redis
    slow), or before it, at the read that rebuilds her engine (an ``unavailable``
    dropped it). It is stored exactly once at its seq, and nothing acknowledged is
    lost: answered ``moved`` before the close when it was at its append; else her
    client, closed with no reply, resumes on node two and sends it again (its
    snapshot says it is not stored yet), and that one is the move stored. Node one
    logs no error: its late move finds the one stored, as a retry does."""
    caplog.set_level(logging.WARNING)
    one, two = await cluster.node(), await cluster.node()
    ann, bob = await racing(one.url, two.url)
    assert ann.room is not None and ann.racer is not None
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:3])
    reached, gate = asyncio.Event(), asyncio.Event()
    store = one.node.store
    if held == "at its append":

        async def hold(append: Callable[[], Awaitable[Any]]) -> Any:
            reached.set()
            await gate.wait()
            return await append()

        StoreFaults(store).on_append_move(hold)
    else:
        one.node.rooms[ann.room].games.pop(ann.racer)
        read = store.move_log

        async def read_held(*args: Any, **kwargs: Any) -> Any:
            raw = await read(*args, **kwargs)
            if not reached.is_set():
                reached.set()
                await gate.wait()
            return raw

        setattr(store, "move_log", read_held)  # noqa: B010 (a method of the instance)
    in_flight = asyncio.ensure_future(ann.move(moves[3]))
    await asyncio.wait_for(reached.wait(), 5)
    drain = asyncio.ensure_future(one.drain())
    cluster.servers.remove(one)
    if held == "at its append":
        await asyncio.sleep(0.3)
        assert not drain.done() and not ann.closed.done(), "the drain did not wait for it"
        gate.set()
        assert (await in_flight)["seq"] == 3
        await ann.closed
    else:
        await ann.closed  # at once: nothing counted it in flight yet
        with pytest.raises(ConnectionError):
            await in_flight
    assert (ann.ws.close_code, ann.ws.close_reason) == (1001, "draining")
    again = await RaceClient.connect(two.url)
    joined = await again.resume(room=ann.room, token=ann.token, since=ann.version)
    stored = 4 if held == "at its append" else 3
    assert joined["snapshot"]["you"]["next_seq"] == stored
    if held == "at its engine read":
        again.seq = 3
        assert (await again.move(moves[3]))["seq"] == 3  # sent again, as the client does
        gate.set()  # node one's move goes on now, after the one stored
    await drain
    log = await two.node.store.move_log(ann.room, one.node.rooms[ann.room].log_name(ann.racer))
    assert [e for e, _at in unpack_entries(log)] == moves[:4]
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert (await play_until_done(again, moves[4:]))["status"] == "finished"
    await bob.resign()
    assert await _standings(bob) == [("Ann", 1, "finished"), ("Bob", 2, "resigned")]
    await again.close()
    await bob.close()


# --------------------------------------------------------------------- outages
async def _bob_gone_offline(url: str) -> tuple[RaceClient, RaceClient]:
    """Ann and Bob racing on ``url``; Bob has hung up, and Ann has seen him offline."""
    ann, bob = await racing(url)
    await bob.close()
    await ann.wait_for(lambda e: e.t == "presence" and not e.d["online"], timeout=5)
    return ann, bob


async def test_a_server_down_longer_than_the_grace_forfeits_nobody(cluster: Cluster) -> None:
    clock = Clock()
    first = await cluster.node(clock=clock)
    ann, bob = await racing(first.url)
    await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:3])
    await first.drain()  # the operator stops the only node: both racers go offline
    cluster.servers.remove(first)
    clock.advance(60)  # a 60 s outage
    second = await cluster.node(clock=clock)
    ann2, bob2 = await RaceClient.connect(second.url), await RaceClient.connect(second.url)
    joined = await ann2.resume(room=ann.room, token=ann.token, since=ann.version)
    assert joined["snapshot"]["you"]["status"] == "playing"
    await bob2.resume(room=bob.room, token=bob.token, since=bob.version)
    assert (await ann2.move(winning_moves(SOLVABLE_SECRET)[3]))["seq"] == 3
    assert not [e for e in ann2.received if e.t == "racer_left"]
    await ann2.close()
    await bob2.close()


async def test_a_redis_outage_longer_than_the_grace_rearms_it(cluster: Cluster) -> None:
    """Bob dropped just before Redis went down for 60 s. After Redis is back he has a
    whole grace to return; if he does not, he is forfeited a grace after the outage."""
    clock = Clock()
    server = await cluster.node(clock=clock)
    faults = StoreFaults(server.node.store)
    ann, bob = await _bob_gone_offline(server.url)
    faults.down = True
    await asyncio.sleep(2 * LEASE_RENEW_S)  # the node notices the outage
    clock.advance(60, server.node)
    await asyncio.sleep(0.2)
    faults.down = False
    await asyncio.sleep(2 * LEASE_RENEW_S)  # ... and that Redis is back
    await asyncio.sleep(0.2)
    assert not [e for e in ann.received if e.t == "racer_left"]
    clock.advance(GRACE_S - 5, server.node)
    await asyncio.sleep(0.3)
    assert not [e for e in ann.received if e.t == "racer_left"]
    clock.advance(6, server.node)
    left = await ann.wait_for(lambda e: e.t == "racer_left", timeout=5)
    assert left.d == {"racer": bob.racer, "host": ann.racer, "reason": "grace"}
    await ann.close()


async def test_a_connected_racer_marked_offline_is_back_online_even_if_redis_hiccups(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis came back from an outage longer than the lease: another node marks Ann,
    still connected to node one, offline. Node one must say she is there again — and
    keep trying when its first attempt fails (its first command after the outage may),
    or she is forfeited while racing. Found by tests/deploy/test_chaos.py."""
    clock = Clock()
    one, two = await cluster.node(clock=clock), await cluster.node(clock=clock)
    ann, bob = await racing(one.url, two.url)
    store = one.node.store
    append_event = store.append_event
    failures = [StoreUnavailable("Redis connection reset (injected)")]

    async def flaky(*args: Any, **kwargs: Any) -> int:
        if failures:
            raise failures.pop()
        return await append_event(*args, **kwargs)

    monkeypatch.setattr(store, "append_event", flaky)
    room = two.node.rooms[ann.room or ""]
    member = room.state.racers[ann.racer or 0]
    await two.node.presence(room, member.racer, False, member.conn)  # her lease "expired"
    await bob.wait_for(lambda e: e.t == "presence" and e.d["online"] is False, timeout=5)
    back = await bob.wait_for(lambda e: e.t == "presence" and e.d["online"] is True, timeout=5)
    assert back.d == {"racer": ann.racer, "online": True}
    assert not failures  # node one's first attempt did fail
    clock.advance(GRACE_S + 1, one.node, two.node)
    await asyncio.sleep(0.3)
    assert not [e for e in bob.received if e.t in ("racer_left", "race_over")]
    assert (await ann.move(winning_moves(SOLVABLE_SECRET)[0]))["seq"] == 0
    await ann.close()
    await bob.close()


async def test_a_resume_refused_says_why(cluster: Cluster) -> None:
    clock = Clock()
    server = await cluster.node(clock=clock)
    ann, bob = await _bob_gone_offline(server.url)
    clock.advance(GRACE_S + 1, server.node)
    await ann.wait_for(lambda e: e.t == "racer_left", timeout=5)
    late = await RaceClient.connect(server.url)
    with pytest.raises(
        ServerError, match=r"away longer than the 30 s grace.*room " + (ann.code or "")
    ):
        await late.resume(room=bob.room, token=bob.token)
    late.code = "ZZZZZZ"
    with pytest.raises(ServerError, match="room ZZZZZZ no longer exists"):
        await late.resume(room="r_000000000000", token=bob.token)
    await late.close()
    await ann.close()


# --------------------------------------------------------------------- rewinds
async def test_a_redis_rewind_is_detected_and_announced(cluster: Cluster) -> None:
    one, two = await cluster.node(), await cluster.node()
    ann, bob = await racing(one.url, one.url)
    watcher = await RaceClient.connect(two.url)
    await watcher.watch(code=ann.code)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:6])
    await watcher.wait_for(lambda e: e.t == "progress" and e.d["moves"] >= 6, timeout=5)
    acked = ann.version
    await rewind(one.node.store, ann.room or "", f"1:{ann.racer}", 3)
    notice = await ann.wait_for(lambda e: e.t == "resync", timeout=3 * ROOM_CHECK_S + 2)
    assert "lost" in notice.d["reason"] and notice.d["lost_events"] == 3
    assert notice.d["snapshot"]["version"] == acked - 3
    assert notice.d["snapshot"]["you"]["next_seq"] == 3
    assert ann.seq == 3 and ann.version == acked - 3
    seen = await watcher.wait_for(lambda e: e.t == "resync", timeout=3 * ROOM_CHECK_S + 2)
    assert seen.d["lost_events"] == 3
    for server in (one, two):
        metrics = server.metrics.render().decode()
        assert "solrace_lost_writes_total 1.0" in metrics
    # The race goes on from what Redis holds: Ann replays her lost moves.
    resynced = await bob.wait_for(lambda e: e.t == "resync", timeout=5)
    assert bob.version == acked - 3
    assert (await ann.move(moves[3]))["seq"] == 3
    event = await bob.wait_for(lambda e: e.t == "progress" and e.d["racer"] == ann.racer)
    # The versions after the resync: no gap, no reuse unseen. (Not only the move's: a
    # machine stalled for seconds under load expires a node's lease, and its racers'
    # offline and online come in between, as they should.)
    since = bob.received[bob.received.index(resynced) + 1 : bob.received.index(event) + 1]
    versions = [e.v for e in since if e.v is not None]
    assert versions == list(range(acked - 2, acked - 2 + len(versions))), versions
    await ann.resign()
    await bob.resign()
    over = await watcher.next_event("race_over", timeout=10)
    # Boards from before the resync showed moves Redis has since lost: the revealed
    # logs cannot vouch for them, so the check starts at the resync.
    start = watcher.received.index(seen)
    settings = watcher.snapshot["settings"]  # type: ignore[index]
    assert check_no_leaks(watcher.received[start:], over.d, settings) > 3
    for client in (ann, bob, watcher):
        await client.close()


async def test_a_rewind_to_before_the_race_over_is_detected_and_announced(
    cluster: Cluster,
) -> None:
    """Redis restarts from a snapshot taken mid-race, after the race_over reached the
    racers (still on the standings screen). The node checked only rooms whose race is
    not over: nothing was said, and a later node archived another result under the
    race's id (an audit, reproduced)."""
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:4])
    await bob.wait_for(lambda e: e.t == "progress" and e.d["moves"] >= 4, timeout=5)
    room_id = ann.room or ""
    snapshot = await snapshot_room(one, room_id)
    acked = ann.version
    await ann.resign()
    await bob.resign()
    await ann.next_event("race_over", timeout=10)
    lost = ann.version - acked  # two resignations and the race_over
    assert lost == 3
    await restore_room(one, room_id, snapshot)
    notice = await ann.wait_for(lambda e: e.t == "resync", timeout=3 * ROOM_CHECK_S + 2)
    assert "lost" in notice.d["reason"] and notice.d["lost_events"] == lost
    assert notice.d["snapshot"]["phase"] == "racing"
    seen = await bob.wait_for(lambda e: e.t == "resync", timeout=5)
    assert seen.d["lost_events"] == lost
    assert "solrace_lost_writes_total 1.0" in one.metrics.render().decode()
    # What Redis holds is a race whose seed the racers have seen: it ends again at
    # once, as at its time limit (the next test: no move of it is taken).
    over = await ann.wait_for(lambda e: e.t == "race_over" and e.v > acked, timeout=10)
    assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
    for client in (ann, bob):
        await client.close()


async def test_a_race_whose_seed_was_revealed_does_not_go_on_after_a_rewind(
    cluster: Cluster,
) -> None:
    """Redis restarts from a snapshot taken mid-race after the race_over, seed and all,
    reached the racers. The room came back racing that same deal: a racer, holding the
    seed, replayed the whole deal face up and won it in seconds (an audit: Ann played
    the revealed seed's winning line after the resync and was placed 1st). The node
    remembers the round it revealed: the rebuilt race ends at once, as at its time
    limit, and no move of it is taken."""
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    room_id = ann.room or ""
    await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:4])
    await bob.wait_for(lambda e: e.t == "progress" and e.d["moves"] >= 4, timeout=5)
    snapshot = await snapshot_room(one, room_id)
    acked = ann.version
    await ann.resign()
    await bob.resign()
    revealed = await ann.next_event("race_over", timeout=10)
    await restore_room(one, room_id, snapshot)
    notice = await ann.wait_for(lambda e: e.t == "resync", timeout=3 * ROOM_CHECK_S + 2)
    assert notice.d["snapshot"]["phase"] == "racing"
    # What Ann knows now: every card of the deal, from the revealed seed.
    played, refused = await _replay_certificate(ann, revealed.d["seed"])
    assert (refused, played[-1:]) == (["wrong_phase"], []), (refused, len(played), played[-1:])
    over = await ann.wait_for(lambda e: e.t == "race_over" and e.v > acked, timeout=10)
    assert over.d["reason"] == "time_limit"
    assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
    assert [s["moves"] for s in over.d["standings"]] == [4, 0]
    for client in (ann, bob):
        await client.close()


async def test_a_resume_from_a_version_its_own_presence_now_holds_is_a_loss(
    cluster: Cluster,
) -> None:
    """A node that did not see the lost events (restarted on a restored store) learns
    of the loss from the racer's ``since`` only. Its own events after the restore
    (here Bob's two resumes; after a restart, the offlines of racers whose node's lease
    lapsed) and the resume's own ``presence`` brought the room back to the version the
    racer had seen: no resync, no error, the racer rewound from the results screen to
    a race whose seed it holds (an audit of the embedded store's restore). The resume's
    own event is one its client cannot have seen: a ``since`` at or past it is a loss."""
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    room_id = ann.room or ""
    snapshot = await snapshot_room(one, room_id)
    acked = ann.version
    await ann.resign()
    await bob.resign()
    over = await ann.next_event("race_over", timeout=10)
    seen = ann.version
    assert seen == acked + 3
    for client in (ann, bob):
        await client.close()
    await restore_store(one, room_id, snapshot, race_id(room_id, over.d["commitment"]))
    # The node no longer holds the room (restarted, or it went idle): no memory of it.
    one.node.rooms.pop(room_id).cancel_timers()
    for _ in range(2):
        again = await RaceClient.connect(one.url)
        await again.resume(room=room_id, token=bob.token, since=None)
    back = await RaceClient.connect(one.url)
    joined = await back.resume(room=room_id, token=ann.token, since=seen)
    assert joined["snapshot"]["version"] == seen  # the version Ann saw, other events
    notice = await back.wait_for(lambda e: e.t == "resync", timeout=5)
    assert f"you had seen version {seen}" in notice.d["reason"], notice.d
    assert notice.d["snapshot"]["phase"] == "racing"
    assert "solrace_lost_writes_total 1.0" in one.metrics.render().decode()
    await back.close()
    await again.close()


async def _snapshot_then_both_resign(
    one: RaceServer, ann: RaceClient, bob: RaceClient
) -> tuple[dict[str, bytes], Envelope]:
    """Ann's room's keys as they are now (to restore later), then both racers resign:
    the snapshot and the race_over Ann got (its seed and salt revealed)."""
    snapshot = await snapshot_room(one, ann.room or "")
    await ann.resign()
    await bob.resign()
    return snapshot, await ann.next_event("race_over", timeout=10)


async def _revealed_then_forgotten(
    cluster: Cluster, keep_archive: bool = False
) -> tuple[RaceServer, RaceClient, Envelope]:
    """A race that ended (both resigned; Ann holds its race_over: seed and salt), then
    the store restored to just after its start, and the node's memory of the room gone
    (restarted on the restored store, or it had dropped the room idle): the state in
    which the node races the revealed deal on. Returns the node, Ann's view on a new
    connection not yet resumed, and the race_over. ``keep_archive``: only the room's
    keys were restored (restore_room), the race's archived result kept."""
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    room_id = ann.room or ""
    snapshot, over = await _snapshot_then_both_resign(one, ann, bob)
    assert ann.view.revealed == {"seed": over.d["seed"], "salt": over.d["salt"]}
    for client in (ann, bob):
        await client.close()
    if keep_archive:
        await restore_room(one, room_id, snapshot)
    else:
        await restore_store(one, room_id, snapshot, race_id(room_id, over.d["commitment"]))
    one.node.rooms.pop(room_id).cancel_timers()
    back = await RaceClient.connect(one.url, view=ann.view)
    back.room, back.code, back.token = room_id, ann.code, ann.token
    return one, back, over


async def _replay_certificate(client: RaceClient, seed: int) -> tuple[list[str], list[str]]:
    """Play the revealed deal's winning line (what a racer who saw its seed can do):
    the statuses of the moves taken, the codes of those refused (it stops at one)."""
    line = [str(m) for m in solve(deal("yukon", seed)) or []]
    assert line, "the revealed deal is not solvable by the test solver"
    return await play_until_refused(client, line)


async def test_a_racer_proving_the_seed_revealed_ends_a_race_its_node_forgot(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A node with no memory of the race_over (restarted on a restored store, or
    holding the room afresh) cannot know the seed went out, and raced the revealed
    deal on: Ann, who saw the race_over, replayed its winning line and was placed 1st.
    Her client sends back the race_over's seed and salt with its resume (``revealed``),
    which only a client that saw it can make: the race ends at once, as at its time
    limit, takes none of her moves, and the node says so once, as a warning."""
    caplog.set_level(logging.INFO, logger="solrace.lobby")
    _, back, revealed = await _revealed_then_forgotten(cluster)
    room_id = back.room or ""
    joined = await back.resume()
    assert joined["snapshot"]["phase"] == "racing"
    played, refused = await _replay_certificate(back, revealed.d["seed"])
    assert (refused, played) == (["wrong_phase"], []), (refused, len(played), played[-1:])
    over = await back.wait_for(
        lambda e: e.t == "race_over" and e.v > joined["snapshot"]["version"], timeout=10
    )
    assert over.d["reason"] == "time_limit"
    assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
    assert over.d["seed"] == revealed.d["seed"]
    warned = [
        r
        for r in caplog.records
        if r.levelname == "WARNING" and "seed was already revealed" in r.getMessage()
    ]
    assert len(warned) == 1 and getattr(warned[0], "room", None) == room_id, warned
    assert "a resumed racer proved" in warned[0].getMessage()
    settings = joined["snapshot"]["settings"]
    assert check_no_leaks(back.received, over.d, settings, racer=back.racer) > 2
    await back.close()


async def test_a_node_taking_up_a_round_whose_result_is_archived_ends_it(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The store rewound the room's keys to mid-race but kept the race's archived
    result (on a Cluster it lives in another slot), and the node forgot the room. A
    racer who saw the race_over and sends no proof back played the revealed deal on
    (an audit: 528 moves, finished). The node taking the room up finds the round's
    result archived: the proof is the store's own, and the race ends at once, as at
    its time limit, taking no move."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    one, back, revealed = await _revealed_then_forgotten(cluster, keep_archive=True)
    cheat = await RaceClient.connect(one.url)  # Ann, sending no proof back
    cheat.room, cheat.code, cheat.token = back.room, back.code, back.token
    joined = await cheat.resume(revealed=None)
    played, refused = await _replay_certificate(cheat, revealed.d["seed"])
    assert (refused, played) == (["wrong_phase"], []), (refused, len(played), played[-1:])
    over = await cheat.wait_for(
        lambda e: e.t == "race_over" and e.v > joined["snapshot"]["version"], timeout=10
    )
    assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
    settings = joined["snapshot"]["settings"]
    assert check_no_leaks(cheat.received, over.d, settings, racer=cheat.racer) > 1
    warned = [r for r in caplog.records if "result is archived" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING", warned
    for client in (cheat, back):
        await client.close()


async def test_a_result_request_that_takes_up_a_round_raced_again_ends_it_first(
    cluster: Cluster,
) -> None:
    """As above, the result asked of a node that does not hold the room: taking it up
    finds the round's result archived, and the race is over (its race_over stored)
    before the reply carries the seed."""
    one, back, revealed = await _revealed_then_forgotten(cluster, keep_archive=True)
    room_id = back.room or ""
    asker = await RaceClient.connect(one.url)
    fetched = await asker.fetch_result(race_id(room_id, revealed.d["commitment"]))
    assert fetched["result"]["seed"] == revealed.d["seed"]
    assert one.node.rooms[room_id].state.phase == "finished"
    await close_all(asker, back)


def _ending_ticks_failing(server: RaceServer) -> asyncio.Event:
    """Redis fails every tick that would end ``server``'s races (their note that the
    race awaits its archive, Store.mark_unarchived) until the event returned is
    cleared."""
    faults = StoreFaults(server.node.store)
    failing = asyncio.Event()
    failing.set()

    async def refuse(call: Callable[[], Awaitable[Any]]) -> Any:
        if not failing.is_set():
            return await call()
        faults.on_call("mark_unarchived", refuse)
        raise StoreUnavailable("mark_unarchived: Redis is down (injected)")

    faults.on_call("mark_unarchived", refuse)
    return failing


async def test_a_result_whose_round_redis_will_not_end_is_refused_not_sent(
    cluster: Cluster,
) -> None:
    """As above, but Redis fails the ending tick's writes (the note that the race
    awaits its archive): the round is closed to moves, not over, and its racers have
    seen no race_over. The request is refused ``unavailable`` and the seed stays in:
    before, the ticks' failures (each swallowed, retried later) left the loop, and the
    reply carried the seed of a race still under way. Asked again once Redis takes the
    writes, the race ends first and the result goes."""
    one, back, revealed = await _revealed_then_forgotten(cluster, keep_archive=True)
    room_id = back.room or ""
    failing = _ending_ticks_failing(one)
    asker = await RaceClient.connect(one.url)
    race = race_id(room_id, revealed.d["commitment"])
    with pytest.raises(ServerError, match="unavailable"):
        await asker.fetch_result(race)
    assert not [e for e in asker.received if e.t == "archived"], asker.received
    assert one.node.rooms[room_id].state.phase == "racing"
    failing.clear()
    fetched = await asker.fetch_result(race)
    assert fetched["result"]["seed"] == revealed.d["seed"]
    assert one.node.rooms[room_id].state.phase == "finished"
    await close_all(asker, back)


async def test_a_result_asked_of_another_node_while_the_round_is_closed_ends_it_first(
    cluster: Cluster,
) -> None:
    """The node a racer resumed on found the round's result archived and closed the
    round (``over`` at its number, Store.reveal_round), but Redis fails its ending
    tick's writes: the race is under way, its race_over to come. Another node asked
    for the result read ``over`` at the round as the race over and sent the seed at
    once. Now it takes the room up and ends the race (its race_over stored) first."""
    one, back, revealed = await _revealed_then_forgotten(cluster, keep_archive=True)
    room_id = back.room or ""
    _ending_ticks_failing(one)
    cheat = await RaceClient.connect(one.url)  # Ann, sending no proof back
    cheat.room, cheat.code, cheat.token = back.room, back.code, back.token
    await cheat.resume(revealed=None)
    state = one.node.rooms[room_id].state
    assert (state.phase, await one.node.store.round_over(room_id)) == ("racing", state.round)
    two = await cluster.node()
    asker = await RaceClient.connect(two.url)
    fetched = await asker.fetch_result(race_id(room_id, revealed.d["commitment"]))
    assert fetched["result"]["seed"] == revealed.d["seed"]
    taken = two.node.rooms.get(room_id)  # not taken up: the seed went out at once
    assert taken is not None and taken.state.phase == "finished"
    await close_all(asker, cheat, back)


async def test_an_archived_result_of_a_round_raced_again_ends_it_before_it_is_sent(
    cluster: Cluster,
) -> None:
    """The store rewound the room to mid-race (its keys only: on a Cluster the archive
    lives in another slot, and another shard's failover need not lose it) and its node
    forgot the room. A racer whose client sends no proof resumes the race; anyone who
    saw the countdown knows the race id (room and commitment), and ``result`` sent the
    archived seed of the round under way (an audit: the racer fetched it and replayed
    the deal's winning line). The archive is the proof a client would send: the round
    ends, as at its time limit, before the seed goes out, and takes no move."""
    one, back, revealed = await _revealed_then_forgotten(cluster, keep_archive=True)
    store = one.node.store
    race = race_id(back.room or "", revealed.d["commitment"])
    # Archived after the node took the room up again (an archive retried while Redis
    # failed it): the node's own look at the archive, on taking the room up, found none.
    kept = await archived_result(store, race)
    await store._redis.delete(store.keys.result(race))
    cheat = await RaceClient.connect(one.url)  # Ann, sending no proof back
    cheat.room, cheat.code, cheat.token = back.room, back.code, back.token
    joined = await cheat.resume(revealed=None)
    assert joined["snapshot"]["phase"] == "racing"
    assert await store.save_result(race, kept)
    fetched = (await cheat.fetch_result(race))["result"]
    assert fetched["seed"] == revealed.d["seed"]
    played, refused = await _replay_certificate(cheat, fetched["seed"])
    assert (refused, played) == (["wrong_phase"], []), (refused, len(played), played[-1:])
    over = await cheat.wait_for(
        lambda e: e.t == "race_over" and e.v > joined["snapshot"]["version"], timeout=10
    )
    assert over.d["reason"] == "time_limit"
    assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
    # The race ended before its result went: no frame before it carries the seed.
    kinds = [e.t for e in cheat.received]
    assert kinds.index("race_over") < kinds.index("archived"), kinds
    settings = joined["snapshot"]["settings"]
    assert check_no_leaks(cheat.received, over.d, settings, racer=cheat.racer) > 1
    for client in (cheat, back):
        await client.close()


async def _round_two_over_after_a_snapshot(
    one: RaceServer,
) -> tuple[str, list[RaceClient], dict[str, bytes], Envelope]:
    """Ann and Bob race round 1 and resign; the room's keys are snapshotted on its
    results screen (no race under way); they race round 2 and resign, and close. The
    room, its racers (closed), the snapshot and round 2's race_over."""
    ann, bob = await racing(one.url, one.url)
    room_id = ann.room or ""
    for client in (ann, bob):
        await client.resign()
    await ann.next_event("race_over", timeout=10)
    snapshot = await snapshot_room(one, room_id)  # round 1 over: no race under way
    await _rematch_started(ann, bob)
    for client in (ann, bob):
        await client.wait_started()
    for client in (ann, bob):
        await client.resign()
    second = await ann.wait_for(lambda e: e.t == "race_over", timeout=10)
    for client in (ann, bob):
        await client.close()
    return room_id, [ann, bob], snapshot, second


async def _rematch_started(host: RaceClient, other: RaceClient) -> None:
    """The next round asked for by ``host``, ``other`` ready, and started."""
    await host.rematch()
    await other.wait_for(lambda e: e.t == "room_reset", timeout=10)
    await other.ready(True)
    await host.wait_for(lambda e: e.t == "ready_changed", timeout=10)
    await host.start()


async def test_a_round_re_dealt_after_a_rewind_to_before_it_ends_by_its_archive(
    cluster: Cluster,
) -> None:
    """The room's keys rewound to round 1's results screen after round 2 raced and
    ended (its result archived, kept: on a Cluster it lives in another slot), and the
    node forgot the room. A round's seed and salt are its number's, so the rematch
    deals round 2's revealed seed again. Taken up on round 1's screen, the room has no
    round under way to look for (Node._archived_already looked only then): a racer
    whose client sends no proof raced the deal whose every card it held. The archive
    of the round the countdown commits to is the store's proof: it ends as soon as it
    starts, taking no move."""
    one = await cluster.node()
    room_id, racers, snapshot, second = await _round_two_over_after_a_snapshot(one)
    await archived_result(one.node.store, race_id(room_id, second.d["commitment"]))
    await restore_room(one, room_id, snapshot)  # the archive kept
    one.node.rooms.pop(room_id).cancel_timers()
    clients = []
    for was in racers:
        again = await RaceClient.connect(one.url)  # no proof sent back
        again.room, again.code, again.token = room_id, was.code, was.token
        assert (await again.resume(revealed=None))["snapshot"]["phase"] == "finished"
        clients.append(again)
    cheat, bob2 = clients
    await _rematch_started(cheat, bob2)
    began = await cheat.wait_for(lambda e: e.t in ("started", "race_over"), timeout=10)
    if began.t == "started":  # a move of the deal it holds: not one taken
        with pytest.raises(ServerError) as refused:
            await cheat.move(str(deal("yukon", second.d["seed"]).legal_moves()[0]))
        assert refused.value.code == "wrong_phase"
    over = await cheat.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert over.d["seed"] == second.d["seed"]
    assert over.d["reason"] == "time_limit"
    assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
    await close_all(cheat, bob2)


async def test_a_later_rounds_proof_ends_that_round_after_a_restore_between_rounds(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A review: a copy taken on round 1's results screen (no race under way, as
    docs/server.md advised), restored after round 2 raced and ended. A round's seed and
    salt are its number's, so the rematch dealt round 2's revealed seed again; the
    proof checked only the store's round (1, finished), and the resync's snapshot of
    round 1 replaced the view's round-2 pair. Now the view keeps the later pair, a
    proof may name a later round (its salt), and that round ends as soon as it
    starts, taking no move."""
    caplog.set_level(logging.INFO, logger="solrace.lobby")
    one = await cluster.node()
    room_id, racers, snapshot, second = await _round_two_over_after_a_snapshot(one)
    pair = {"seed": second.d["seed"], "salt": second.d["salt"]}
    await restore_room(one, room_id, snapshot)
    one.node.rooms.pop(room_id).cancel_timers()
    clients = []
    for was in racers:
        again = await RaceClient.connect(one.url, view=was.view)
        again.room, again.code, again.token = room_id, was.code, was.token
        assert (await again.resume())["snapshot"]["phase"] == "finished"
        clients.append(again)
    back, bob2 = clients
    assert back.view.revealed == pair  # round 1's snapshot did not replace it
    assert one.node.rooms[room_id].revealed_round == 2
    await _rematch_started(back, bob2)
    over = await back.wait_for(
        lambda e: e.t == "race_over" and e.d["seed"] == pair["seed"], timeout=10
    )
    assert over.d["reason"] == "time_limit"
    with pytest.raises(ServerError) as refused:
        await back.move(str(deal("yukon", pair["seed"]).legal_moves()[0]))
    assert refused.value.code == "wrong_phase"
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [m for m in warned if "round 2's seed was already revealed" in m], warned
    reset = next(i for i, e in enumerate(back.received) if e.t == "room_reset")
    round_two = back.received[reset:]  # before it, round 1's (revealed) board and result
    assert check_no_leaks(round_two, over.d, back.view.settings, racer=back.racer) > 0
    await close_all(back, bob2)


async def test_a_proof_in_the_rounds_lobby_ends_its_race_as_soon_as_it_starts(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The store rewound to the lobby of a round whose race then ran and ended: the
    round's countdown would deal the revealed seed again. The racer's proof, given in
    that lobby, is remembered: the race ends as soon as it starts, none of its moves
    taken."""
    caplog.set_level(logging.INFO, logger="solrace.lobby")
    _, _, back, revealed = await _revealed_in_a_lobby(cluster, hang_up=False)
    await back.start()
    over = await back.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert over.d["reason"] == "time_limit"
    assert over.d["seed"] == revealed.d["seed"]
    played, refused = await _replay_certificate(back, revealed.d["seed"])
    assert refused and not played, (refused, len(played), played[-1:])
    said = [r.getMessage() for r in caplog.records if "already revealed" in r.getMessage()]
    assert len(said) == 1 and "as soon as it starts" in said[0], said
    assert check_no_leaks(back.received, over.d, back.view.settings, racer=back.racer) > 1
    await back.close()


async def test_a_spectator_proving_the_seed_revealed_ends_a_race_its_node_forgot(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A spectator saw the race_over too: its watch sends the proof back, and the race a
    forgetful node would have raced on ends at once; Ann, resuming with no proof of
    her own, cannot replay the revealed deal."""
    caplog.set_level(logging.INFO, logger="solrace.lobby")
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    room_id, code = ann.room or "", ann.code or ""
    eve = await RaceClient.connect(one.url)
    await eve.watch(code=code)
    snapshot = await snapshot_room(one, room_id)
    await ann.resign()
    await bob.resign()
    revealed = await eve.next_event("race_over", timeout=10)
    for client in (ann, bob, eve):
        await client.close()
    await restore_store(one, room_id, snapshot, race_id(room_id, revealed.d["commitment"]))
    one.node.rooms.pop(room_id).cancel_timers()
    again = await RaceClient.connect(one.url, view=eve.view)
    watching = await again.watch(code=code)
    assert watching["snapshot"]["phase"] == "racing"
    over = await again.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert over.d["reason"] == "time_limit"
    back = await RaceClient.connect(one.url)
    await back.resume(room=room_id, token=ann.token, since=None, revealed=None)
    played, refused = await _replay_certificate(back, revealed.d["seed"])
    assert refused and not played, (refused, len(played), played[-1:])
    said = [r.getMessage() for r in caplog.records if "already revealed" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("a returning spectator proved"), said
    settings = watching["snapshot"]["settings"]
    assert check_no_leaks(again.received, over.d, settings) > 1
    await close_all(again, back)


@pytest.mark.parametrize(
    "forged",
    [
        {"seed": round_seed(SOLVABLE_SECRET, 1), "salt": round_salt(bytes(32), 1)},
        {"seed": 12345, "salt": round_salt(SOLVABLE_SECRET, 1)},
        # a later round's salt proves a rewind (test above), but not past the bound
        {"seed": 1, "salt": round_salt(SOLVABLE_SECRET, 2 + PROOF_ROUNDS_AHEAD)},
    ],
    ids=["salt-of-another-room", "wrong-seed", "a-round-too-far-ahead"],
)
async def test_a_proof_that_is_not_the_rounds_changes_nothing(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, forged: dict[str, object]
) -> None:
    """A ``revealed`` that does not match the round under way — another room's salt, the
    right seed (which a racer may guess) with the wrong salt, the salt of a round
    further ahead than any restored copy (PROOF_ROUNDS_AHEAD) — proves nothing: the
    race goes on, the racer's moves are taken, and nothing is logged. Else any racer
    could end everyone's race with a made-up proof."""
    caplog.set_level(logging.INFO, logger="solrace.lobby")
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    room_id = ann.room or ""
    await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:2])
    await ann.close()
    back = await RaceClient.connect(one.url, view=ann.view)
    back.room, back.code, back.token = room_id, ann.code, ann.token
    joined = await back.resume(revealed=forged)
    assert joined["snapshot"]["phase"] == "racing"
    for move in winning_moves(SOLVABLE_SECRET)[2:6]:
        assert (await back.move(move))["status"] == "playing"
    await asyncio.sleep(0.3)
    assert not [e for e in back.received if e.t == "race_over"]
    assert one.node.rooms[room_id].state.phase == "racing"
    assert not [r for r in caplog.records if "already revealed" in r.getMessage()]
    await back.resign()
    await bob.resign()
    over = await back.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert over.d["reason"] != "time_limit"
    settings = joined["snapshot"]["settings"]
    assert check_no_leaks(back.received, over.d, settings, racer=back.racer) > 2
    await close_all(back, bob)


async def _revealed_in_a_lobby(
    cluster: Cluster, *, hang_up: bool = True
) -> tuple[RaceServer, str, RaceClient, Envelope]:
    """A round that raced and ended (Ann holds its race_over), then the store restored
    to its lobby and the node's memory of the room gone; Ann, back with her proof, is
    in that lobby, then hangs up (unless not ``hang_up``). Returns the node, the room,
    Ann's client (closed if she hung up) and the race_over."""
    one = await cluster.node()
    ann, bob = await lobby(one.url, one.url)
    room_id = ann.room or ""
    snapshot = await snapshot_room(one, room_id)
    await ann.start()
    for client in (ann, bob):
        await client.wait_started()
    await ann.resign()
    await bob.resign()
    revealed = await ann.next_event("race_over", timeout=10)
    await close_all(ann, bob)
    await restore_room(one, room_id, snapshot)
    one.node.rooms.pop(room_id).cancel_timers()
    back = await RaceClient.connect(one.url, view=ann.view)
    back.room, back.code, back.token = room_id, ann.code, ann.token
    assert (await back.resume())["snapshot"]["phase"] == "lobby"
    assert one.node.rooms[room_id].revealed_round == 1  # the proof, taken
    if hang_up:
        await back.close()
    return one, room_id, back, revealed


@pytest.mark.parametrize("where", ["same node, room dropped", "another node"])
async def test_a_proof_outlives_the_memory_of_the_node_given_it(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """The proof, given in the lobby of a round whose race already ran, was kept in the
    memory of the node given it only: that node dropping the idle room (its sweep), or
    another node serving it, raced the revealed deal again — Ann, back without a proof,
    replayed its winning line (72 moves) and won. The proof is written to the store
    (its ``over``): any node taking the room up reads it, and the race ends as soon as
    it starts."""
    caplog.set_level(logging.INFO, logger="solrace.lobby")
    one, room_id, ann, revealed = await _revealed_in_a_lobby(cluster)
    if where == "another node":
        node = await cluster.node()
    else:
        node = one
        one.node.rooms.pop(room_id).cancel_timers()  # idle: the sweep forgets it
    again = await RaceClient.connect(node.url)
    joined = await again.resume(room=room_id, token=ann.token, since=None, revealed=None)
    assert joined["snapshot"]["phase"] == "lobby"
    await again.start()
    await again.wait_started()
    played, refused = await _replay_certificate(again, revealed.d["seed"])
    assert (refused, played) == (["wrong_phase"], []), (refused, len(played), played[-1:])
    over = await again.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert over.d["reason"] == "time_limit"
    assert over.d["seed"] == revealed.d["seed"]
    said = [r.getMessage() for r in caplog.records if "already revealed" in r.getMessage()]
    assert len(said) == 1, said  # the proof's, once: the node taking the room up knew
    settings = joined["snapshot"]["settings"]
    assert check_no_leaks(again.received, over.d, settings, racer=again.racer) > 0
    await again.close()


async def _racing_again_on(
    cluster: Cluster,
) -> tuple[RaceServer, RaceClient, RaceClient, Envelope]:
    """Two nodes. A race on node two ended (Eve watched its race_over), the store was
    restored to mid-race and node two forgot the room; Ann is back racing on node two
    with no proof. Returns node one, Ann, Eve's view on a new connection to node one
    (not yet watching) and the race_over."""
    one, two = await cluster.node(), await cluster.node()
    ann, bob = await racing(two.url, two.url)
    room_id = ann.room or ""
    eve = await RaceClient.connect(two.url)
    await eve.watch(code=ann.code)
    snapshot = await snapshot_room(two, room_id)
    await ann.resign()
    await bob.resign()
    revealed = await eve.next_event("race_over", timeout=10)
    await close_all(ann, bob, eve)
    await restore_store(two, room_id, snapshot, race_id(room_id, revealed.d["commitment"]))
    two.node.rooms.pop(room_id).cancel_timers()
    back = await RaceClient.connect(two.url)
    joined = await back.resume(room=room_id, token=ann.token, since=None, revealed=None)
    assert joined["snapshot"]["phase"] == "racing"
    watcher = await RaceClient.connect(one.url, view=eve.view)
    return one, back, watcher, revealed


async def test_a_proof_whose_node_dies_before_ending_the_race_still_ends_it(
    cluster: Cluster,
) -> None:
    """The fault window between the proof and the race's end: Eve's proof reaches node
    one, which dies before it ends the race (its timer never runs). Kept in that node's
    memory only, the proof died with it: Ann, racing on node two, replayed the revealed
    deal's winning line (72 moves) and won — and with node one alive, node two took
    her moves until it folded the end. Written to the store first, it closes the round
    to moves on every node at once; node two, refused a move of a round the store says
    is over with no race_over to fold, ends the race itself."""
    one, ann, eve, revealed = await _racing_again_on(cluster)
    faults = StoreFaults(one.node.store)

    async def never() -> None:
        return None

    one.node.schedule = lambda room: None  # type: ignore[method-assign]  # it dies first
    one.node.tick = lambda room: never()  # type: ignore[method-assign]
    assert (await eve.watch(code=ann.code))["snapshot"]["phase"] == "racing"
    _crashed(cluster, one, faults)
    played, refused = await _replay_certificate(ann, revealed.d["seed"])
    assert (refused, played) == (["wrong_phase"], []), (refused, len(played), played[-1:])
    over = await ann.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert over.d["reason"] == "time_limit"
    assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
    assert over.d["seed"] == revealed.d["seed"]
    await close_all(ann, eve)


async def test_a_proof_redis_fails_to_write_is_refused_and_taken_when_sent_again(
    cluster: Cluster,
) -> None:
    """Redis fails the proof's write: the watch is refused ``unavailable`` with nothing
    known (the node acted on no proof it could not keep: its memory and the store
    unchanged, Ann's race on), and the same watch sent again ends the race."""
    one, ann, eve, _ = await _racing_again_on(cluster)
    room_id = ann.room or ""
    faults = StoreFaults(one.node.store)

    async def fails(write: Callable[[], Awaitable[Any]]) -> Any:
        raise StoreUnavailable("reveal_round: Redis is down (injected)")

    faults.on_call("reveal_round", fails)
    with pytest.raises(ServerError) as refused:
        await eve.watch(code=ann.code)
    assert refused.value.code == "unavailable"
    assert one.node.rooms[room_id].revealed_round == 0
    assert await one.node.store.round_over(room_id) == 0
    assert (await ann.move(winning_moves(SOLVABLE_SECRET)[0]))["status"] == "playing"
    await eve.watch(code=ann.code)
    over = await ann.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert over.d["reason"] == "time_limit"
    assert await one.node.store.round_over(room_id) == 1
    await close_all(ann, eve)


async def test_a_race_ended_again_after_a_rewind_keeps_its_first_archived_result(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A round's race id is its commitment's: the store restored to mid-race, the race
    ended again (everyone timed out, as the revealed seed requires), and that second
    result replaced the first — the true one, Ann and Bob resigned — in the archive
    under the same id. The archive keeps the first, and the node says so."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    room_id = ann.room or ""
    snapshot, first = await _snapshot_then_both_resign(one, ann, bob)
    race = race_id(room_id, first.d["commitment"])
    kept = await archived_result(one.node.store, race)
    await restore_room(one, room_id, snapshot)
    await ann.wait_for(lambda e: e.t == "resync", timeout=3 * ROOM_CHECK_S + 2)
    again = await ann.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert race_id(room_id, again.d["commitment"]) == race
    assert [s["status"] for s in again.d["standings"]] == ["timeout", "timeout"]
    store = one.node.store

    def warned() -> list[str]:
        return [r.getMessage() for r in caplog.records if "ended again" in r.getMessage()]

    async with asyncio.timeout(10):  # the second end's archive: written, or refused
        while not warned() and await store.load_result(race) == kept:
            await asyncio.sleep(0.02)
    assert await store.load_result(race) == kept
    assert len(warned()) == 1, warned()
    archived = unpack(kept)
    assert [s["status"] for s in archived["result"]["standings"]] == ["resigned", "resigned"]
    await close_all(ann, bob)


async def test_a_rewind_followed_by_new_events_is_still_detected(cluster: Cluster) -> None:
    """Redis lost Ann's last 3 moves, then Bob (on another node) appended 4 events:
    the version is higher than Ann's node delivered, but the events differ."""
    one, two = await cluster.node(), await cluster.node()
    ann, bob = await racing(one.url, two.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:6])
    await bob.wait_for(lambda e: e.t == "progress" and e.d["moves"] >= 6, timeout=5)
    one.node._check_task.cancel()  # type: ignore[union-attr]  # hold its check back
    await rewind(two.node.store, ann.room or "", f"1:{ann.racer}", 3)
    two.node.rooms[ann.room or ""].reset()  # node two "restarted" with the rewound Redis
    await two.node.sync(two.node.rooms[ann.room or ""])
    await play_until_done(bob, moves[:4])
    await one.node.check_rooms()
    notice = await ann.wait_for(lambda e: e.t == "resync", timeout=5)
    assert "not the one delivered" in notice.d["reason"]
    assert ann.seq == 3
    for client in (ann, bob):
        await client.close()
