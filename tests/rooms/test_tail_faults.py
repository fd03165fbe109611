"""The tail of other nodes' events, and the wake-ups, failed by Redis (docs/store.md,
"Node leases").

A node reads the streams of the rooms it serves with other nodes (Node._tail_loop), in
one read for them all. Redis may fail that read every time while the rest of it answers
the node: a Cluster master down for one shared room's slot (the poll's pipeline waits
out its timeout on it), reads that time out. The tail said the node's store down: the
lease's next renewal said it back, and each end of such an "outage" re-armed every
offline racer's disconnect grace in every room, so nobody was forfeited while the
trouble lasted. So did the loop that reads the node's wake-ups (one stream, on one
Cluster slot). The lease's loop judges outages; the tail reads again, and folds what it
missed once Redis answers it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster
from solrace.protocol import race_id
from solrace.rooms import lobby
from solrace.rooms import node as node_module
from solrace.rooms.node import Node
from solrace.rooms.records import unpack
from solrace.rooms.room import LiveRoom
from solrace.store.errors import StoreUnavailable

from tests.support.faults import Clock, StoreFaults, fault_tail_reads
from tests.support.race import archived_result, winning_moves

from .conftest import SOLVABLE_SECRET, Backend, FakePeer
from .test_check_faults import _count, _down, _fail_every, _fast_turns, _renews_meanwhile
from .test_core import _race_on
from .test_ending_faults import _ended_once
from .test_fault_windows import GRACE_S, _poll
from .test_sweep_faults import _count_renewals

#: The steps the race clock takes past the racers' grace, each a sixth of it: as time
#: passes, the node's turns (a failed tail read, a renewal) come between them.
STEPS = 7


async def _grace_runs_out(
    clock: Clock, node: Node, room: LiveRoom, race: Any, failed: list[int], renewed: list[bool]
) -> None:
    """The first race's racers, offline, forfeit once their grace has passed (the
    clock stepped past it, a failed tail read and a renewal after each step, as they
    come in real time): the race is over once, and archived. A grace re-armed at
    each failed read never ran out."""
    for _ in range(STEPS):
        clock.advance(GRACE_S / (STEPS - 1), node)
        reads, renewals = len(failed), len(renewed)
        await _poll(_count(failed), lambda n, seen=reads: n > seen, "a failed read")
        await _poll(_count(renewed), lambda n, seen=renewals: n > seen, "a renewal after it")
    race_key = race_id(room.room_id, race.commitment)
    kept = await archived_result(node.store, race_key, timeout=10)
    await _ended_once(node, room, race, dict(unpack(kept)["result"]))


async def _delivered_once(peer: FakePeer, mark: int, version: int) -> None:
    """``peer`` gets what another node's racer did, once each and in order: every event
    of the room from ``mark`` on, up to ``version``."""
    await peer.until(lambda f: f.v == version)
    versions = [f.v for f in peer.frames[mark:] if f.v is not None]
    assert versions == sorted(set(versions)) and versions[-1] == version, versions


@pytest.mark.parametrize("fault", ["room", "outage"])
async def test_a_shared_room_whose_tail_read_fails_every_time_is_no_outage_of_the_node(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    """A race on node A whose racers both left (their grace running), and another room
    served by A and B whose stream A's tail cannot read: Redis fails every read of it
    (``room``: its slot's master down, the node's lease and the first race's room
    answering), or Redis is down for A (``outage``: the lease loop finds it). For a
    room's trouble, A's grace floor must not move, no outage be said, the tail's
    trouble be said once, and the first race end by its racers' grace, archived once,
    while the tail still fails; in both, Bob's moves made on B meanwhile reach Ann on A
    once Redis answers the tail, once each and in order."""
    _fast_turns(monkeypatch)
    clock = Clock()
    node, other = await backend.node(clock), await backend.node(clock)
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    shared = await _race_on(node, other)
    shared_room = shared.ann.room
    assert shared_room is not None and shared_room.shared
    renewed = _count_renewals(node)
    failed: list[int] = []
    faults = StoreFaults(node.store)
    real_tail = node.store.tail  # down with the rest of the store in an outage

    async def tail(positions: Any, *args: Any, **kwargs: Any) -> Any:
        if fault == "room" and failing and shared_room.room_id in positions:
            failed.append(len(renewed))
            raise StoreUnavailable("tail: Timeout reading from Redis (injected)")
        return await real_tail(positions, *args, **kwargs)

    failing = True
    setattr(node.store, "tail", tail)  # noqa: B010 (a method of the instance)
    mark = len(shared.ann.frames)
    with caplog.at_level(logging.WARNING, logger="solrace"):
        for peer in (race.ann, race.bob):
            await lobby.disconnected(node, peer)  # their grace runs from here
        floor = node.grace_floor_ms
        if fault == "outage":
            faults.down = True
            await _poll(_down(node), bool, "the node never found Redis down")
        else:
            await _poll(_count(failed), lambda n: n >= 5, "five failed tail reads")
        for seq, move in enumerate(winning_moves(SOLVABLE_SECRET)[:2]):
            assert (await shared.bob.ask("move", seq=seq, move=move)).t == "moved"
        version = shared.bob.room.state.version if shared.bob.room is not None else 0
        if fault == "room":
            seen = len(failed)
            await _poll(_count(failed), lambda n: n >= seen + 5, "five more failed tail reads")
            await _renews_meanwhile(renewed, "after them")
        assert shared_room.state.version < version, "folded while the tail failed"
        if fault == "room":  # (an outage re-arms every grace: what the settle is for)
            said = [r.getMessage() for r in caplog.records]
            assert "store unavailable" not in said and not node.store_down, said
            assert node.grace_floor_ms == floor, "the node's grace was re-armed"
            assert said.count(node_module._TAIL_FAILED) == 1, said
            await _grace_runs_out(clock, node, room, race, failed, renewed)
        failing, faults.down = False, False
        await _delivered_once(shared.ann, mark, version)


async def test_wake_reads_redis_fails_every_time_are_no_outage_of_the_node(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A race on node A whose racers both left, and Redis fails every read of A's
    wake-ups (its stream's slot's master down), the rest of Redis answering. A's grace
    floor must not move, no outage be said, the wake loop's trouble be said once, and
    the race end by its racers' grace; a room another node joins meanwhile (Dan, on B,
    in Cy's lobby on A) is still shared: Cy gets Dan's join, once."""
    _fast_turns(monkeypatch)
    clock = Clock()
    node, other = await backend.node(clock), await backend.node(clock)
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    renewed = _count_renewals(node)
    real_wakes = node.store.wakes
    failed = _fail_every(node, "wakes", renewed)
    with caplog.at_level(logging.WARNING, logger="solrace"):
        for peer in (race.ann, race.bob):
            await lobby.disconnected(node, peer)  # their grace runs from here
        floor = node.grace_floor_ms
        await _poll(_count(failed), lambda n: n >= 5, "five failed reads of the wake-ups")
        cy, dan = FakePeer(node), FakePeer(other)
        created = await cy.ask("create", variant="yukon", name="Cy")
        assert created.t == "joined", created.d
        mark = len(cy.frames)
        assert (await dan.ask("join", code=str(created.d["code"]), name="Dan")).t == "joined"
        assert dan.room is not None
        await _renews_meanwhile(renewed, "after them")
        said = [r.getMessage() for r in caplog.records]
        assert "store unavailable" not in said and not node.store_down, said
        assert node.grace_floor_ms == floor, "the node's grace was re-armed"
        assert said.count(node_module._WAKE_FAILED) == 1, said
        await _grace_runs_out(clock, node, room, race, failed, renewed)
        setattr(node.store, "wakes", real_wakes)  # noqa: B010
        await _delivered_once(cy, mark, dan.room.state.version)


async def _races_on_two_masters(node: Node, other: Node) -> tuple[Any, Any, str]:
    """Two races of Ann's on ``node`` and Bob's on ``other`` (both nodes tail them),
    whose rooms live on different masters of the cluster; and the first's master."""
    rc = node.store._redis  # the test asks the cluster where a room lives
    assert isinstance(rc, RedisCluster)
    by_master: dict[str, Any] = {}
    while len(by_master) < 2:
        race = await _race_on(node, other)
        assert race.ann.room is not None and race.ann.room.shared
        master = rc.get_node_from_key(node.store.keys.room(race.ann.room.room_id).events)
        assert master is not None
        by_master.setdefault(master.name, race)
    (master, held), (_, healthy) = by_master.items()
    return held, healthy, master


async def _bob_moves(race: Any) -> int:
    """Bob plays his first two moves on his node; the room's version there after them."""
    for seq, move in enumerate(winning_moves(SOLVABLE_SECRET)[:2]):
        assert (await race.bob.ask("move", seq=seq, move=move)).t == "moved"
    assert race.bob.room is not None
    return int(race.bob.room.state.version)


@pytest.mark.parametrize("backend", ["cluster"], indirect=True)
@pytest.mark.parametrize("fault", ["hang", "fail"])
async def test_a_master_that_hangs_or_fails_holds_back_only_its_own_rooms(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    """Two races of Ann's on node A and Bob's on node B, on different masters, and A's
    reads of one master's streams hang (answer nothing until the command timeout) or
    fail (its connection lost). The tail read every room in one call: each hung call
    waited out the 5 s timeout and failed, each failed one failed at once, and Bob's
    moves in the race on the healthy master never reached Ann while it lasted. They
    reach her now, while the master still holds; his moves in the other race come once
    it answers, once each and in order. A failing master's trouble is said once, and
    is no outage of the node."""
    _fast_turns(monkeypatch)
    node, other = await backend.node(), await backend.node()
    held, healthy, master = await _races_on_two_masters(node, other)
    held_room = held.ann.room
    renewed = _count_renewals(node)
    with caplog.at_level(logging.WARNING, logger="solrace"):
        release, faulted = fault_tail_reads(monkeypatch, node.store, master, fault)
        await _poll(_count(faulted), bool, "a tail read of the master")
        marks = len(held.ann.frames), len(healthy.ann.frames)
        held_version = await _bob_moves(held)
        sent = time.monotonic()
        await _delivered_once(healthy.ann, marks[1], await _bob_moves(healthy))
        print(f"{fault}: Bob's moves reached Ann in {time.monotonic() - sent:.3f} s")
        assert held_room.state.version < held_version, "folded while the master held"
        if fault == "fail":  # said once, once the lease loop found the store up
            await _renews_meanwhile(renewed, "while the master fails")

            # A read that fails after its call ended (another master's events ended
            # it first) is said when the master's rest is over (Store.tail): up to
            # RETRY_AFTER_FAILURE_S and a lease turn later (CI, once: not yet said).
            async def tail_failed() -> int:
                return [r.getMessage() for r in caplog.records].count(node_module._TAIL_FAILED)

            await _poll(tail_failed, bool, "the tail's failure said")
        said = [r.getMessage() for r in caplog.records]
        assert "store unavailable" not in said and not node.store_down, said
        assert said.count(node_module._TAIL_FAILED) == (fault == "fail"), said
        release.set()
        await _delivered_once(held.ann, marks[0], held_version)
