"""``Node.stop`` stops everything the node started, including what is started while it
stops: a cancelled task's handler that spawns a retry or arms a room's tick."""

from __future__ import annotations

import asyncio

from .conftest import Backend, FakePeer


async def test_a_task_armed_while_the_node_stops_does_not_outlive_it(backend: Backend) -> None:
    """Before, the stop cancelled the tasks there when it began: here the retry spawned
    by a task it cancelled was still running after it, and the tick armed then was
    still due (it would have started a tick of a stopped node)."""
    node = await backend.node()
    ann = FakePeer(node)
    assert (await ann.ask("create", variant="yukon", name="Ann")).t == "joined"
    [room] = node.rooms.values()
    before = asyncio.all_tasks()
    draining = asyncio.Event()

    async def drains() -> None:
        try:
            draining.set()
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            node.spawn(asyncio.sleep(3600))  # a retry, spawned while the node stops
            node._tick_later(room, 0.001)  # a room's tick, armed meanwhile
            raise

    node.spawn(drains())
    await draining.wait()
    await node.stop()
    left = [t for t in asyncio.all_tasks() if t not in before and not t.done()]
    assert left == []
    timers = [room.timer, room.boards_due, room.retry_due]
    assert [t for t in timers if t is not None and not t.cancelled()] == []


async def test_a_write_after_the_node_and_its_store_closed_is_not_retried(
    backend: Backend,
) -> None:
    """A review: ``StoreClosed`` is a ``StoreUnavailable``, so a write that must follow a
    decision (here a racer's offline), failing because the node's store was closed,
    spawned a retry that tried again every 2 s for ever — on the embedded engine also
    when the write's first call is a read (the engine's socket goes with the store).
    It is dropped, with one line."""
    node = await backend.node()
    ann = FakePeer(node)
    assert (await ann.ask("create", variant="yukon", name="Ann")).t == "joined"
    [room] = node.rooms.values()
    await node.stop()
    await node.store.close()
    await node.record_offline(room, 1, "a-connection")
    await asyncio.sleep(0.1)
    assert [t for t in node._tasks if not t.done()] == []


async def test_a_task_spawned_after_the_node_stopped_never_starts(backend: Backend) -> None:
    """CI, a core benchmark stopped by SIGTERM: a move still in flight once its node had
    stopped lost its store's reply and spawned its room's tick (a move whose reply is
    lost ticks at once, moves._store), which nobody cancelled: the loop closed with it
    pending ("Task was destroyed but it is pending!") and its handler's traceback went
    to the benchmark's standard error. A stopped node starts nothing."""
    node = await backend.node()
    ann = FakePeer(node)
    assert (await ann.ask("create", variant="yukon", name="Ann")).t == "joined"
    [room] = node.rooms.values()
    await node.stop()
    before = asyncio.all_tasks()
    spawned = node.spawn(node.tick(room))
    await asyncio.sleep(0)
    assert spawned.cancelled()
    assert [t for t in asyncio.all_tasks() if t not in before and not t.done()] == []
