"""Move logs: sequence numbers, finishing places, group commit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from solrace.store import Finish, MoveAppend, Store, StoreError, StoreUnavailable
from solrace.store._commit import GroupCommit
from solrace.store._lua import SCRIPT_LOADS

from tests.support.redis import new_prefix

from .conftest import make_rooms, pairs, with_rooms


@pytest.fixture
async def store(store: Store) -> Store:
    """The conftest's store, with the rooms these tests write to made."""
    return await with_rooms(store)


async def test_accepted_then_stale_then_duplicate(store: Store) -> None:
    first = await store.append_move("r", "alice", 0, b"m0", b"ev0", round_no=1)
    assert first == MoveAppend(True, 1, 1, None, ("", first.links[1], ""))
    assert first.links[1]
    # the same move again (client retry): refused, nothing written
    dup = await store.append_move("r", "alice", 0, b"m0", b"ev0", round_no=1)
    assert dup == MoveAppend(False, 1, None, None)
    # a move from the future: refused too, the reply says where the log is
    ahead = await store.append_move("r", "alice", 5, b"m5", b"ev5", round_no=1)
    assert ahead == MoveAppend(False, 1, None, None)
    second = await store.append_move("r", "alice", 1, b"m1", b"ev1", round_no=1)
    assert second == MoveAppend(True, 2, 2, None, (first.links[1], second.links[1], ""))
    assert await store.move_log("r", "alice") == [b"m0", b"m1"]
    assert await store.move_log("r", "alice", 1) == [b"m1"]  # from an index on
    assert await store.move_log("r", "alice", 2) == []
    assert await store.log_length("r", "alice") == 2
    assert pairs(await store.events_since("r", 0)) == [(1, b"ev0"), (2, b"ev1")]
    assert await store.log_length("r", "bob") == 0
    assert await store.move_log("r", "bob") == []


async def test_concurrent_duplicates_apply_once(store: Store, node2: Store) -> None:
    nodes = [store, node2]
    results = await asyncio.gather(
        *(
            nodes[i % 2].append_move("r", "alice", 0, f"m{i}".encode(), b"e", round_no=1)
            for i in range(10)
        )
    )
    accepted = [i for i, r in enumerate(results) if r.accepted]
    assert len(accepted) == 1
    assert all(r.log_length == 1 for r in results)
    assert await store.move_log("r", "alice") == [f"m{accepted[0]}".encode()]
    assert await store.version("r") == 1  # refused moves appended no event either


async def test_places_are_handed_out_exactly_once(store: Store, node2: Store) -> None:
    """20 racers finish "at the same time" on two nodes: places are exactly 1..20."""
    nodes = [store, node2]
    for i in range(20):  # everybody has made some moves already
        await nodes[i % 2].append_move("r", f"racer{i}", 0, b"m", b"e", round_no=1)
    results = await asyncio.gather(
        *(
            nodes[i % 2].append_move(
                "r", f"racer{i}", 1, b"last", b"fin", _finish("race", 21), round_no=1
            )
            for i in range(20)
        )
    )
    assert all(r.accepted for r in results)
    assert sorted(r.place for r in results if r.place is not None) == list(range(1, 21))
    # a finisher that retries its last move is refused and gets no second place
    again = await store.append_move(
        "r", "racer0", 1, b"last", b"fin", _finish("race", 21), round_no=1
    )
    assert again == MoveAppend(False, 2, None, None)
    nxt = await store.append_move("r", "late", 0, b"m", b"fin", _finish("race", 21), round_no=1)
    assert nxt.place == 21
    # separate counters are independent (e.g. one per race in a best-of series)
    other = await store.append_move("r", "late2", 0, b"m", b"fin", _finish("race2", 1), round_no=1)
    assert other.place == 1


async def test_a_finish_with_no_replica_to_ask_claims_none(store: Store) -> None:
    """One Redis, the embedded engine, and a cluster whose masters have no replica (the
    test cluster): no replica is asked, and the answer claims none — ``None``, not 0,
    which would make the node warn that a place stands before any replica holds it
    (docs/deploy.md; the replicated cases are in tests/deploy/test_cluster_failover.py)."""
    await store.append_move("r", "alice", 0, b"m0", b"e", round_no=1)
    done = await store.append_move("r", "alice", 1, b"m1", b"fin", _finish("race", 2), round_no=1)
    assert done.accepted and done.place == 1 and done.replicas is None, done


def _finish(counter: str, places: int, at_ms: int = 0) -> Finish:
    return Finish(counter, tuple(f"finished {p}".encode() for p in range(1, places + 1)), at_ms)


async def test_a_finish_earlier_than_the_one_stored_before_it_is_refused_with_a_floor(
    store: Store, node2: Store
) -> None:
    """Places agree with finish times: node 2 stores a finish at 5,000 ms; node 1's
    finish, checked at 4,990 ms on its own clock but stored second, is refused with the
    floor 5,000 and nothing written; offered again at the floor it takes place 2."""
    first = await node2.append_move(
        "r", "b", 0, b"m", b"progress b", _finish("race", 3, 5000), round_no=1
    )
    assert first.place == 1
    early = await store.append_move(
        "r", "a", 0, b"m@4990", b"progress a", _finish("race", 3, 4990), round_no=1
    )
    assert early == MoveAppend(False, 0, None, None, finish_floor=5000)
    assert await store.log_length("r", "a") == 0 and await store.version("r") == 2
    again = await store.append_move(
        "r", "a", 0, b"m@5000", b"progress a", _finish("race", 3, 5000), round_no=1
    )
    assert (again.accepted, again.place) == (True, 2)  # a tie keeps the stored order
    later = await node2.append_move(
        "r", "c", 0, b"m", b"progress c", _finish("race", 3, 7000), round_no=1
    )
    assert later.place == 3
    assert await store.move_log("r", "a") == [b"m@5000"]
    # the floor is per counter (a best-of series counts each round from its own start)
    other = await store.append_move("r", "d", 0, b"m", b"e", _finish("race2", 1, 10), round_no=1)
    assert other.place == 1
    # a stale sequence number is refused as before, with no floor
    stale = await store.append_move("r", "a", 0, b"m", b"e", _finish("race", 3, 1), round_no=1)
    assert stale == MoveAppend(False, 1, None, None)


async def test_the_finished_event_is_written_with_the_move(store: Store) -> None:
    """The place, the progress event and that place's finished event are one write."""
    await store.append_move("r", "a", 0, b"m", b"progress a", round_no=1)
    first = await store.append_move(
        "r", "b", 0, b"m", b"progress b", _finish("race", 3), round_no=1
    )
    second = await store.append_move(
        "r", "a", 1, b"m", b"progress a2", _finish("race", 3), round_no=1
    )
    assert (first.place, first.version, first.finished_version) == (1, 2, 3)
    assert (second.place, second.version, second.finished_version) == (2, 4, 5)
    assert pairs(await store.events_since("r", 0)) == [
        (1, b"progress a"),
        (2, b"progress b"),
        (3, b"finished 1"),
        (4, b"progress a2"),
        (5, b"finished 2"),
    ]


async def test_a_finish_with_no_event_for_its_place_writes_nothing(store: Store) -> None:
    """Offered events for place 1 only, the second finisher's move is refused whole:
    the script checks before its first write (Redis does not roll scripts back)."""
    await store.append_move("r", "a", 0, b"m", b"e", _finish("race", 1), round_no=1)
    with pytest.raises(StoreError):
        await store.append_move("r", "b", 0, b"m", b"e", _finish("race", 1), round_no=1)
    assert await store.log_length("r", "b") == 0
    assert await store.version("r") == 2
    assert (
        await store.append_move("r", "b", 0, b"m", b"e", _finish("race", 2), round_no=1)
    ).place == 2


async def test_group_commit_batches(store: Store) -> None:
    results = await asyncio.gather(
        *(
            store.append_move("r", f"racer{i}", 0, b"m", f"e{i}".encode(), round_no=1)
            for i in range(100)
        )
    )
    assert all(r.accepted and r.log_length == 1 for r in results)
    assert sorted(r.version for r in results if r.version) == list(range(1, 101))
    assert store.flushed_moves == 100
    assert store.flushes <= 3, store.flushes  # in practice 1
    events = dict(pairs(await store.events_since("r", 0)))
    for i, r in enumerate(results):
        assert r.version is not None
        assert events[r.version] == f"e{i}".encode()


async def test_group_commit_keeps_submission_order(store: Store) -> None:
    """One racer's pipelined moves in one batch all apply, in order."""
    results = await asyncio.gather(
        *(store.append_move("r", "alice", i, bytes([i]), b"e", round_no=1) for i in range(10))
    )
    assert [r.accepted for r in results] == [True] * 10
    assert await store.move_log("r", "alice") == [bytes([i]) for i in range(10)]
    assert store.flushes == 1


async def test_calls_during_a_flush_queue_for_the_next(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = asyncio.Event()
    in_flight = asyncio.Event()
    real_execute = GroupCommit._execute
    sizes: list[int] = []

    async def slow_execute(self: GroupCommit, batch: list[Any], *args: Any) -> list[Any]:
        sizes.append(len(batch))
        in_flight.set()
        await gate.wait()
        return await real_execute(self, batch, *args)

    monkeypatch.setattr(GroupCommit, "_execute", slow_execute)
    first = [
        asyncio.create_task(store.append_move("r", f"a{i}", 0, b"m", b"e", round_no=1))
        for i in range(5)
    ]
    await in_flight.wait()
    second = [
        asyncio.create_task(store.append_move("r", f"b{i}", 0, b"m", b"e", round_no=1))
        for i in range(30)
    ]
    await asyncio.sleep(0.01)
    assert not any(t.done() for t in first + second)
    gate.set()
    results = await asyncio.gather(*first, *second)
    assert all(r.accepted for r in results)
    assert sizes == [5, 30]
    assert store.flushes == 2


async def test_each_caller_gets_its_own_error(store: Store) -> None:
    # corrupt one racer's log key: its script fails with WRONGTYPE, the others must not
    await store._redis.set(store.keys.room("r").log("broken"), b"not a list")
    results = await asyncio.gather(
        store.append_move("r", "ok1", 0, b"m", b"e", round_no=1),
        store.append_move("r", "broken", 0, b"m", b"e", round_no=1),
        store.append_move("r", "ok2", 0, b"m", b"e", round_no=1),
        return_exceptions=True,
    )
    assert isinstance(results[0], MoveAppend) and results[0].accepted
    assert isinstance(results[1], StoreError)
    assert not isinstance(results[1], StoreUnavailable)
    assert isinstance(results[2], MoveAppend) and results[2].accepted
    assert store.flushes == 1


async def test_scripts_reload_after_script_flush(private_redis: Callable[..., str]) -> None:
    """On a private Redis: flushing the shared one's scripts failed other tests' moves
    (a CI run: a move answered ``internal``, NOSCRIPT on its resend)."""
    store = await Store.connect(private_redis(), prefix=new_prefix())
    try:
        await make_rooms(store, "r")
        assert (await store.append_move("r", "a", 0, b"m", b"e", round_no=1)).accepted
        await store.append_event("r", b"x")
        await store._redis.script_flush()
        results = await asyncio.gather(
            *(store.append_move("r", f"p{i}", 0, b"m", b"e", round_no=1) for i in range(5))
        )
        assert all(r.accepted for r in results)
        await store._redis.script_flush()
        assert await store.append_event("r", b"y") == 8
        assert await store.version("r") == 8  # nothing ran twice
    finally:
        await store.delete_all()
        await store.close()


async def test_scripts_gone_again_before_the_resend_are_loaded_again(
    private_redis: Callable[..., str],
) -> None:
    """The scripts go again between a NOSCRIPT's load and the resend (a failover, a
    restart, another SCRIPT FLUSH): the call was answered NOSCRIPT a second time and
    failed (``internal`` for a move, seen in a CI run). It is loaded and sent again, at
    most SCRIPT_LOADS times; each NOSCRIPT means it did not run, so nothing runs twice."""
    store = await Store.connect(private_redis(), prefix=new_prefix())
    client: Any = store._commit._client
    real_loads = (client.script_load, store._redis.script_load)
    flushes_left = SCRIPT_LOADS - 1

    async def load_then_lose(source: str) -> Any:
        nonlocal flushes_left
        sha = await real_loads[0](source)
        if flushes_left > 0:
            flushes_left -= 1
            await store._redis.script_flush()  # gone again before the resend
        return sha

    try:
        await make_rooms(store, "r")
        assert (await store.append_move("r", "a", 0, b"m", b"e", round_no=1)).accepted
        client.script_load = store._redis.script_load = load_then_lose
        await store._redis.script_flush()
        moved = await store.append_move("r", "b", 0, b"m", b"e", round_no=1)
        assert moved.accepted and moved.version == 2
        flushes_left = SCRIPT_LOADS - 1
        await store._redis.script_flush()
        assert await store.append_event("r", b"x") == 3  # the other way (EVALSHA) too
        assert await store.version("r") == 3  # nothing ran twice
    finally:
        client.script_load, store._redis.script_load = real_loads
        await store.delete_all()
        await store.close()


async def test_cancelled_caller_before_flush_is_never_sent(store: Store) -> None:
    task = asyncio.create_task(store.append_move("r", "alice", 0, b"m", b"e", round_no=1))
    await asyncio.sleep(0)  # queued, flush scheduled but not run
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.01)
    assert await store.log_length("r", "alice") == 0
    assert store.flushes == 0


async def test_close_drains_queue_then_refuses(store: Store) -> None:
    other = await store.sibling()
    tasks = [
        asyncio.create_task(other.append_move("r", f"p{i}", 0, b"m", b"e", round_no=1))
        for i in range(5)
    ]
    await asyncio.sleep(0)
    await other.close()
    assert all(r.accepted for r in await asyncio.gather(*tasks))
    with pytest.raises(StoreUnavailable):
        await other.append_move("r", "late", 0, b"m", b"e", round_no=1)
    assert await store.version("r") == 5


async def test_bad_arguments_are_value_errors(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.append_move("r", "a", -1, b"m", b"e", round_no=1)
    with pytest.raises(ValueError):
        await store.append_move("r{x}", "a", 0, b"m", b"e", round_no=1)
    with pytest.raises(ValueError):
        await store.append_event("r", b"e", expected_version=-1)


async def test_a_round_whose_race_is_over_takes_no_more_moves(store: Store, node2: Store) -> None:
    """The race_over event closes its round in the same write: a move still in flight
    on another node when the race ended is refused whole, finishing or not, and never
    stored after the result. The next round is not closed."""
    assert (await store.append_move("r", "a", 0, b"m0", b"p", round_no=1)).accepted
    over = await node2.append_event("r", b"race_over", 1, ends_round=1)
    assert over == 2
    late = await store.append_move("r", "a", 1, b"m1", b"p", round_no=1)
    assert late == MoveAppend(False, 1, None, None, race_over=True)
    finishing = await store.append_move("r", "b", 0, b"m", b"p", _finish("race", 2, 10), round_no=1)
    assert finishing == MoveAppend(False, 0, None, None, race_over=True)
    assert await store.version("r") == 2 and await store.move_log("r", "a") == [b"m0"]
    # the rematch's round plays on; closing an earlier round again changes nothing
    assert (await store.append_move("r", "a.2", 0, b"m", b"p", round_no=2)).accepted
    await store.append_event("r", b"stale race_over", ends_round=1)
    assert (await store.append_move("r", "a.2", 1, b"m", b"p", round_no=2)).accepted
    await store.append_event("r", b"race_over 2", ends_round=2)
    assert (await store.append_move("r", "a.2", 2, b"m", b"p", round_no=2)).race_over
    with pytest.raises(ValueError):
        await store.append_move("r", "a", 1, b"m", b"p", round_no=0)


async def test_a_closed_log_takes_no_more_moves_and_its_stored_ones_stay_stored(
    store: Store, node2: Store
) -> None:
    """The event that ends a racer's race closes its log in the same write: a move of
    that racer checked on a stale copy of the room (another node) is refused whole,
    finishing or not; other racers' logs play on. A retry of a move stored before the
    close is told where the log is, as any duplicate (not that the race is over)."""
    assert (await store.append_move("r", "a", 0, b"m0", b"p", round_no=1)).accepted
    assert await node2.append_event("r", b"resigned a", 1, closes_log="a") == 2
    late = await store.append_move("r", "a", 1, b"m1", b"p", round_no=1)
    assert late == MoveAppend(False, 1, None, None, log_closed=True)
    finishing = await store.append_move("r", "a", 1, b"m", b"p", _finish("race", 2, 10), round_no=1)
    assert finishing == MoveAppend(False, 1, None, None, log_closed=True)
    retry = await store.append_move("r", "a", 0, b"m0", b"p", round_no=1)
    assert retry == MoveAppend(False, 1, None, None)  # stored: a duplicate, said so
    assert await store.version("r") == 2 and await store.move_log("r", "a") == [b"m0"]
    assert (await store.append_move("r", "b", 0, b"m", b"p", round_no=1)).accepted


async def test_a_finish_closes_its_own_log_in_its_write(store: Store, node2: Store) -> None:
    """Nothing follows a finish in its log: the finish's own script closes the log, so
    a move checked on a copy of the room that has not folded the finish (an undo, with
    undo on) is refused ``log_closed``, nothing written, and a retry of the finish
    itself is still told it is stored (docs/store.md, "Closed logs")."""
    done = await store.append_move("r", "a", 0, b"win", b"p", _finish("race", 2, 10), round_no=1)
    assert done.accepted and done.place == 1
    undo = await node2.append_move("r", "a", 1, b"undo", b"p", round_no=1)
    assert undo == MoveAppend(False, 1, None, None, log_closed=True)
    again = await node2.append_move("r", "a", 1, b"win", b"p", _finish("race", 2, 20), round_no=1)
    assert again == MoveAppend(False, 1, None, None, log_closed=True)
    retry = await node2.append_move("r", "a", 0, b"win", b"p", _finish("race", 2, 10), round_no=1)
    assert retry == MoveAppend(False, 1, None, None)  # stored: a duplicate, said so
    assert await store.move_log("r", "a") == [b"win"] and await store.version("r") == 2
    other = await node2.append_move("r", "b", 0, b"win", b"p", _finish("race", 2, 30), round_no=1)
    assert other.accepted and other.place == 2


async def test_calls_past_a_full_batch_go_in_the_next_one(store: Store) -> None:
    """More calls queued at once than a batch takes (max_batch, here 2): the rest go
    in the batches after it, each answered. Each batch is its own task on the link,
    so the one that takes a full batch must start the next (else the rest wait for
    ever: the 5 s bound below)."""
    store._commit._max_batch = 2
    flushes = store.flushes
    moves = [store.append_move("r", f"c{i}", 0, b"m", b"e", round_no=1) for i in range(5)]
    results = await asyncio.wait_for(asyncio.gather(*moves), 5)
    assert all(r.accepted for r in results)
    assert store.flushes - flushes == 3
