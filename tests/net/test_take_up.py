"""Taking up a room no live node serves (Node.sweep_orphans, Node._adopt): what the
log says of it, and who stays in the room's set of serving nodes, across drains that
come one after another (a rolling restart) and across a lease that lapsed only
briefly. (A single drain and a crash are in test_faults.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.support.race import lobby

from .conftest import Cluster

_ADOPTING = "adopting a room no live node serves"
_TAKING_UP = "taking up a room its node handed off when it stopped"


def _said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.getMessage() in (_ADOPTING, _TAKING_UP)
    ]


async def test_a_rolling_restart_takes_up_a_shared_room_at_info(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Nodes A and B serve a room (Ann on A, Bob on B), and A serves another alone
    (Cid's). A rolling restart: A drains, C replaces it and takes Cid's room up (A's
    hand-off note then goes), then B drains, and C takes the shared room up. Every node
    that served it drained, so that is one INFO. It warned, as if a node had died: A
    was still in the room's set of serving nodes (B was live when C took A's rooms up,
    so nobody replaced A there), and A's note was gone by then — the room read as a
    dead node's. (An operator audit of a rolling restart.)"""
    caplog.set_level(logging.INFO, logger="solrace.node")
    a, b = await cluster.node(), await cluster.node()
    ann, bob = await lobby(a.url, b.url)
    cid = (await lobby(a.url, names=("Cid",)))[0]
    shared, alone = ann.room or "", cid.room or ""
    assert await a.node.store.room_nodes(shared) == {a.node.node_id, b.node.node_id}
    await a.drain()
    cluster.servers.remove(a)
    assert await b.node.store.room_nodes(shared) == {b.node.node_id}  # B serves it on
    c = await cluster.node()
    await c.node.sweep_orphans()  # its start's: Cid's room is A's alone
    assert c.node.rooms[alone].served()
    assert _said(caplog) == [("INFO", _TAKING_UP)]
    caplog.clear()
    await b.drain()
    cluster.servers.remove(b)
    await c.node.sweep_orphans()
    assert c.node.rooms[shared].served()
    assert _said(caplog) == [("INFO", _TAKING_UP)]
    for client in (ann, bob, cid):
        await client.close()


async def test_two_nodes_draining_at_once_leave_one_of_them_to_judge_by(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A draining node leaves the serving set of a room another live node serves
    (Node._leave_shared_rooms). Two nodes of a room draining at the same time must not
    both leave, each seeing the other still live: the set would be empty, and the room
    read as one nobody handed off. Each asks once its own lease is gone, so the later
    one stays; the room is taken up once, at INFO."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    a, b = await cluster.node(), await cluster.node()
    ann, bob = await lobby(a.url, b.url)
    shared = ann.room or ""
    await asyncio.gather(a.drain(), b.drain())
    cluster.servers.remove(a)
    cluster.servers.remove(b)
    c = await cluster.node()
    left = await c.node.store.room_nodes(shared)
    assert left and left <= {a.node.node_id, b.node.node_id}, left
    await c.node.sweep_orphans()
    assert c.node.rooms[shared].served()
    assert _said(caplog) == [("INFO", _TAKING_UP)]
    await ann.close()
    await bob.close()
