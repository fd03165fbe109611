"""Taking up a room no live node serves (Node.sweep_orphans, Node._adopt): what the
log says of it, and who stays in the room's set of serving nodes, across drains that
come one after another (a rolling restart) and across a lease that lapsed only
briefly. (A single drain and a crash are in test_faults.)"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from solrace.rooms.node import LEASE_RENEW_S, Node
from solrace.store import Store
from solrace.store.errors import StoreUnavailable

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
    dead node's (a review of a rolling restart)."""
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
    left = await (await cluster.store()).room_nodes(shared)  # before C's start sweep
    assert left and left <= {a.node.node_id, b.node.node_id}, left
    c = await cluster.node()
    await c.node.sweep_orphans()
    assert c.node.rooms[shared].served()
    assert _said(caplog) == [("INFO", _TAKING_UP)]
    await ann.close()
    await bob.close()


async def _poll_nodes(
    store: Store, room_id: str, wanted: Callable[[set[str]], bool] | set[str], timeout: float
) -> set[str]:
    """The room's serving set once it is ``wanted`` (or ``wanted`` accepts it), or as it
    is after ``timeout``."""
    done = wanted if callable(wanted) else wanted.__eq__
    deadline = asyncio.get_running_loop().time() + timeout
    while not done(nodes := await store.room_nodes(room_id)):
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.05)
    return nodes


async def _stalled(node: Node) -> asyncio.Event:
    """Hold ``node``'s lease renewals until the event returned is set: returns once its
    watch loop waits in one (a renewal already under way could otherwise renew the
    lease after the test drops it, and the lapse would not happen)."""
    release, waiting = asyncio.Event(), asyncio.Event()
    renew = node.store.renew_lease

    async def slow_renewal(*args: Any, **kwargs: Any) -> Any:
        waiting.set()
        await release.wait()
        return await renew(*args, **kwargs)

    node.store.renew_lease = slow_renewal  # type: ignore[method-assign]
    await asyncio.wait_for(waiting.wait(), LEASE_RENEW_S + 5)
    return release


async def test_a_node_whose_lease_lapsed_briefly_is_back_in_its_rooms_serving_sets(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A node stalls past its lease (5 s without a renewal) and renews it again. In
    between another node's sweep took its room up — rightly, as far as it could tell —
    and replaced it in the room's set of serving nodes (Store.leave_room_nodes). The
    stalled node still serves the room, but it was out of the set for good: when the
    other node drained, a third took the room up again, at INFO, while a live node
    served it. The node that finds its lease had lapsed joins its rooms' sets again."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    n = await cluster.node()
    ann = (await lobby(n.url, names=("Ann",)))[0]
    room_id = ann.room or ""
    stalled = await _stalled(n.node)
    await n.node.store.drop_lease(n.node.node_id)  # what 5 s without renewal does
    c = await cluster.node()
    await c.node.sweep_orphans()
    assert _said(caplog) == [("WARNING", _ADOPTING)]  # all C could tell: N was gone
    only_c = {c.node.node_id}  # once the take-up (the start's sweep's, perhaps) is done
    assert await _poll_nodes(c.node.store, room_id, only_c, timeout=5) == only_c
    stalled.set()  # N renews its lease
    both = {n.node.node_id, c.node.node_id}
    assert await _poll_nodes(c.node.store, room_id, both, timeout=5) == both
    caplog.clear()
    await c.drain()
    cluster.servers.remove(c)
    d = await cluster.node()
    await d.node.sweep_orphans()
    assert _said(caplog) == []  # N serves it: nothing to take up
    assert room_id not in d.node.rooms or not d.node.rooms[room_id].served()
    assert n.node.rooms[room_id].served()
    await ann.close()


async def test_a_take_up_that_removes_a_node_after_it_joined_again_is_undone(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The take-up reads the stalled node's lease as gone, then removes it from the
    room's set — a round trip later, which may come after that node renewed its lease
    and joined the set again (Node._rejoin_rooms). It joins once more when the store's
    command timeout has passed since: by then the removal is made, and the node is back
    in the set for good."""
    n = await cluster.node()
    ann = (await lobby(n.url, names=("Ann",)))[0]
    room_id, node_id = ann.room or "", n.node.node_id
    stalled = await _stalled(n.node)
    rejoin, rejoined = n.node._rejoin_rooms, asyncio.Event()

    async def rejoin_rooms(room_ids: list[str] | None = None) -> list[str]:
        failed = await rejoin(room_ids)
        rejoined.set()
        return failed

    n.node._rejoin_rooms = rejoin_rooms  # type: ignore[method-assign]
    leave = Store.leave_room_nodes
    late: list[set[str]] = []
    removed = asyncio.Event()

    async def late_removal(store: Store, room: str, node_ids: Any) -> None:
        if node_id in node_ids and not stalled.is_set():
            stalled.set()  # N renews, finds its lease had lapsed, and joins again
            await asyncio.wait_for(rejoined.wait(), 5)
            late.append(await store.room_nodes(room))
            await leave(store, room, node_ids)
            removed.set()
            return
        await leave(store, room, node_ids)

    monkeypatch.setattr(Store, "leave_room_nodes", late_removal)
    await n.node.store.drop_lease(node_id)  # what 5 s without renewal does
    c = await cluster.node()
    await c.node.sweep_orphans()  # or its start's, which may hold the removal
    await asyncio.wait_for(removed.wait(), 10)
    both = {node_id, c.node.node_id}
    assert late == [both]  # N had joined again before the removal
    assert node_id not in await c.node.store.room_nodes(room_id)  # removed all the same
    wait = n.node.store.timeout_s + LEASE_RENEW_S + 2
    assert await _poll_nodes(c.node.store, room_id, both, timeout=wait) == both
    await ann.close()


async def test_a_drain_whose_leaving_redis_fails_still_ends_and_its_room_is_taken_up_once(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A drain's last word is now three writes and more: the hand-off note, the lease
    dropped, then the draining node leaves the sets of the rooms a live node serves too
    (Node._leave_shared_rooms). Redis failing at that last step leaves the node in the
    set: the drain ends all the same, the other node serves the room on, and when it
    drains too the room is taken up once (both hand-off notes still there: at INFO)."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    a, b = await cluster.node(), await cluster.node()
    ann, bob = await lobby(a.url, b.url)
    shared = ann.room or ""

    async def fails(*_args: Any, **_kwargs: Any) -> None:
        raise StoreUnavailable("leave_rooms: Redis is down (injected)")

    a.node.store.leave_rooms = fails  # type: ignore[method-assign]
    await a.drain()  # ends all the same
    cluster.servers.remove(a)
    assert await b.node.store.room_nodes(shared) == {a.node.node_id, b.node.node_id}
    await b.drain()
    cluster.servers.remove(b)
    c = await cluster.node()
    await c.node.sweep_orphans()
    await c.node.sweep_orphans()
    assert _said(caplog) == [("INFO", _TAKING_UP)]
    assert c.node.rooms[shared].served()
    only_c = {c.node.node_id}  # once the take-up (the start's sweep's, perhaps) is done
    assert await _poll_nodes(c.node.store, shared, only_c, timeout=5) == only_c
    await ann.close()
    await bob.close()
