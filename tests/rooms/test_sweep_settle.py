"""The orphan sweep, and a drain, right after the node's own outage, or a lapse of its own
lease (docs/store.md, "Node leases").

The sweep takes a room up when no node in its set of serving nodes holds a lease
(Node._orphan), and takes the nodes read dead out of that set (Node._adopt). Right
after an outage of Redis (or a stall that let this node's lease lapse), every other
node's lease may have lapsed too, and they renew only once their own calls see Redis
again: a node alive, its renewal held in the same stall, was read dead. The room
checks wait for that to settle before they mark anyone offline (Node._outage_settled);
the sweep did not, and took up a live node's rooms; nor did a draining node taking the
nodes read dead out of its shared rooms' sets (Node._replace_dead_co_servers).
"""

from __future__ import annotations

import logging

import pytest
from solrace.rooms import lobby
from solrace.rooms.node import DRAIN_REPLACEMENT_SKIPPED, Node

from tests.support.faults import Clock, StoreFaults

from .conftest import Backend
from .test_check_faults import _down
from .test_core import _race_on
from .test_fault_windows import _poll
from .test_take_up_faults import _ADOPTING, _node, _sweep, _taken


async def _unsettled(node: Node, trouble: str) -> None:
    """Leave ``node`` just after an ``outage`` of Redis for it (down, then back) or a
    ``lapse`` of its own lease that its renewal found (what a stall does): the time in
    which it may not take a missing lease for a death (Node._outage_settle_ms)."""
    if trouble == "outage":
        faults = StoreFaults(node.store)
        faults.down = True
        await _poll(_down(node), bool, "the node never found Redis down")
        faults.down = False
        await _poll(_down(node), lambda down: not down, "Redis back")
    else:

        async def lapse_found() -> bool:
            return bool(node._lapse_found_ms)

        await node.store.drop_lease(node.node_id)  # what the stall did
        await _poll(lapse_found, bool, "the node never found its lease lapsed")


@pytest.mark.parametrize("trouble", ["outage", "lapse"])
async def test_a_sweep_right_after_the_nodes_outage_takes_no_room_up_until_it_settled(
    backend: Backend, caplog: pytest.LogCaptureFixture, trouble: str
) -> None:
    """Node B races a room alone; Redis goes down for node A and comes back
    (``outage``, the lease loop finds both), or A's renewal finds its lease lapsed
    (``lapse``: a stall of Redis every lease lapsed in). B's lease is gone too, its
    renewal held in the same stall, when A's sweep reads it. That sweep must not take
    B's room up: it did — "adopting a room no live node serves", the room served by A
    beside B, and B taken out of the room's set of serving nodes. Once A's trouble has
    settled (Node._outage_settle_ms) a node whose lease is still gone is dead, and its
    room is taken up then."""
    clock = Clock()
    sweeper = await _node(backend, clock)  # sweeps left to the test
    owner = await backend.node(clock)
    race = await _race_on(owner, owner)
    room = race.ann.room
    assert room is not None
    await _unsettled(sweeper, trouble)
    assert owner._watch_task is not None
    owner._watch_task.cancel()  # B's renewal, held in the stall, comes after the sweep
    await sweeper.store.drop_lease(owner.node_id)
    with caplog.at_level(logging.INFO, logger="solrace"):
        await _sweep(sweeper)
        taken = sweeper.rooms.get(room.room_id)
        assert taken is None or not taken.served(), "a live node's room taken up"
        assert _taken(caplog) == [], _taken(caplog)
        assert owner.node_id in await sweeper.store.room_nodes(room.room_id)
        clock.advance(sweeper._outage_settle_ms() / 1000 + 1, sweeper)
        await _sweep(sweeper)  # B's lease still gone once it settled: B is dead
        assert [line for _level, line in _taken(caplog)] == [_ADOPTING], _taken(caplog)
    assert sweeper.rooms[room.room_id].served()


@pytest.mark.parametrize("trouble", ["outage", "lapse"])
async def test_a_drain_right_after_the_nodes_outage_takes_no_live_node_out_of_its_rooms(
    backend: Backend, caplog: pytest.LogCaptureFixture, trouble: str
) -> None:
    """Ann races on node A, Bob on node B. Redis goes down for A and comes back
    (``outage``), or A's renewal finds its lease lapsed (``lapse``: a stall every
    lease lapsed in), and B's renewal, held in the same stall, has not come yet: B's
    lease reads gone. A drains then. Before handing off it takes the nodes whose lease
    is gone out of its shared rooms' sets (Node._replace_dead_co_servers), and it read
    the leases directly, without the settle the checks and the sweep wait for
    (Node._live_if_settled): B, alive and serving the race, was taken out of its
    room's set — until its own renewal found its lease lapsed and it joined again
    (Node._lapsed); meanwhile the room read as A's alone, handed off, and a node
    joining it woke nobody. Unsettled, nobody is taken out (the replacement only
    makes a later take-up's log line right): B stays in the set. A node dead beside
    a settled one is still taken out (test_take_up_faults). The skip is said in the
    node's log (it was silent: an operator could not tell why a later take-up warned)."""
    clock = Clock()
    draining, other = await _node(backend, clock), await _node(backend, clock)
    race = await _race_on(draining, other)
    room = race.ann.room
    assert room is not None
    await _unsettled(draining, trouble)
    assert other._watch_task is not None
    other._watch_task.cancel()  # B's renewal, held in the stall, comes after the drain
    await draining.store.drop_lease(other.node_id)
    await lobby.disconnected(draining, race.ann)  # the drain closes its connections
    await draining.stop()
    with caplog.at_level(logging.INFO, logger="solrace"):
        await draining.hand_off()
    nodes = await other.store.room_nodes(room.room_id)
    assert other.node_id in nodes, "a live node taken out of the set of a room it serves"
    assert other.rooms[room.room_id].served()
    said = [r.getMessage() for r in caplog.records if "handed off" in r.getMessage()]
    assert said == [DRAIN_REPLACEMENT_SKIPPED], said


async def test_a_drain_right_after_the_nodes_outage_with_no_room_shared_says_nothing(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """A node that shares no room has no other node to judge: its drain right after an
    outage logs no skipped replacement (the line is for rooms it leaves others in)."""
    node = await _node(backend, Clock())
    await _race_on(node, node)
    await _unsettled(node, "outage")
    await node.stop()
    with caplog.at_level(logging.INFO, logger="solrace"):
        await node.hand_off()
    assert [r for r in caplog.records if r.getMessage() == DRAIN_REPLACEMENT_SKIPPED] == []
