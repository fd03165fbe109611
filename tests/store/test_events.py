"""Room event streams: gap-free versions, optimistic appends, resume, cross-node tail."""

from __future__ import annotations

import asyncio
import time

import pytest
from solrace.store import Finish, HeadLost, Store, Trim, VersionConflict

from .conftest import pairs, triples, with_rooms


@pytest.fixture
async def store(store: Store) -> Store:
    """The conftest's store, with the rooms these tests write to made."""
    return await with_rooms(store)


async def test_versions_are_gap_free_across_nodes(store: Store, node2: Store) -> None:
    nodes = [store, node2]
    versions = await asyncio.gather(
        *(nodes[i % 2].append_event("r", f"e{i}".encode()) for i in range(50))
    )
    assert sorted(versions) == list(range(1, 51))
    assert await store.version("r") == 50
    events = pairs(await node2.events_since("r", 0))
    assert [v for v, _ in events] == list(range(1, 51))
    # each version carries the event whose append returned that version
    by_version = dict(events)
    for i, v in enumerate(versions):
        assert by_version[v] == f"e{i}".encode()


async def test_version_starts_at_zero(store: Store) -> None:
    assert await store.version("empty") == 0
    assert pairs(await store.events_since("empty", 0)) == []


async def test_expected_version_conflict(store: Store) -> None:
    assert await store.append_event("r", b"join", expected_version=0) == 1
    with pytest.raises(VersionConflict) as info:
        await store.append_event("r", b"stale decision", expected_version=0)
    assert info.value.current_version == 1
    assert pairs(await store.events_since("r", 0)) == [(1, b"join")]
    assert await store.append_event("r", b"start", expected_version=1) == 2


async def test_only_one_of_racing_decisions_wins(store: Store, node2: Store) -> None:
    await store.append_event("r", b"ready")
    nodes = [store, node2]
    results = await asyncio.gather(
        *(nodes[i % 2].append_event("r", b"countdown", expected_version=1) for i in range(10)),
        return_exceptions=True,
    )
    assert results.count(2) == 1
    conflicts = [r for r in results if isinstance(r, VersionConflict)]
    assert len(conflicts) == 9
    assert await store.version("r") == 2


async def test_events_since_resume_and_limit(store: Store) -> None:
    for i in range(1, 8):
        await store.append_event("r", bytes([i]))
    assert pairs(await store.events_since("r", 3, limit=2)) == [(4, b"\x04"), (5, b"\x05")]
    assert pairs(await store.events_since("r", 5)) == [(6, b"\x06"), (7, b"\x07")]
    assert pairs(await store.events_since("r", 7)) == []
    assert pairs(await store.events_since("r", 100)) == []


async def test_moves_and_events_share_one_version_sequence(store: Store) -> None:
    assert await store.append_event("r", b"start") == 1
    move = await store.append_move("r", "alice", 0, b"m0", b"progress", round_no=1)
    assert move.version == 2
    assert await store.append_event("r", b"chat") == 3
    assert [v for v, _ in pairs(await store.events_since("r", 0))] == [1, 2, 3]


async def test_tail_sees_events_from_another_node(store: Store, node2: Store) -> None:
    await store.append_event("a", b"a1")
    waiter = asyncio.create_task(node2.tail({"a": 1, "b": 0}, block_ms=3000))
    await asyncio.sleep(0.05)
    assert not waiter.done()  # blocked: nothing after a:1, nothing in b
    await store.append_event("b", b"b1")
    got = await asyncio.wait_for(waiter, 2)
    assert triples(got) == [("b", 1, b"b1")]


async def test_tail_returns_backlog_at_once(store: Store) -> None:
    for i in range(3):
        await store.append_event("a", bytes([i]))
    await store.append_event("b", b"x")
    got = triples(await store.tail({"a": 1, "b": 0}, block_ms=1000))
    assert sorted(got) == [("a", 2, b"\x01"), ("a", 3, b"\x02"), ("b", 1, b"x")]
    assert triples(await store.tail({"a": 0}, block_ms=1000, count=1)) == [("a", 1, b"\x00")]


async def test_tail_times_out_empty_and_does_not_block_commands(store: Store) -> None:
    start = time.monotonic()
    waiter = asyncio.create_task(store.tail({"quiet": 0}, block_ms=300))
    await asyncio.sleep(0.02)
    # the blocking read is on its own connection: commands still go through meanwhile
    assert await store.append_event("other", b"x") == 1
    assert not waiter.done()
    assert (await waiter).entries == []
    assert 0.25 <= time.monotonic() - start < 2
    assert triples(await store.tail({"quiet": 0}, block_ms=0)) == []
    assert triples(await store.tail({}, block_ms=10)) == []


async def test_cancelled_tail_leaves_no_stale_reply(store: Store, node2: Store) -> None:
    """A fan-out loop cancels its tail when its room set changes; the next must be clean."""
    waiter = asyncio.create_task(node2.tail({"q": 0}, block_ms=5000))
    await asyncio.sleep(0.05)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await store.append_event("q", b"for the cancelled read")
    await store.append_event("r", b"for the new read")
    assert triples(await node2.tail({"r": 0}, block_ms=1000)) == [("r", 1, b"for the new read")]


async def test_events_are_linked_each_to_the_one_before(store: Store, node2: Store) -> None:
    """Every event names the id of the event before it, whichever node and script
    appended it, so a reader can tell when Redis lost events it had read."""
    await store.append_event("r", b"join")
    await node2.append_move("r", "a", 0, b"m", b"progress", round_no=1)
    await store.append_event("r", b"leave", expected_version=2)
    events = await store.events_since("r", 0)
    assert [e.prev for e in events] == ["", events[0].chain, events[1].chain]
    assert len({e.chain for e in events}) == 3 and all(events[i].chain for i in range(3))
    assert await store.heads(["r", "none"]) == {"r": (3, events[2].chain), "none": (0, "")}


async def test_heads_leaves_out_a_room_whose_keys_redis_refuses_to_read(store: Store) -> None:
    """One room whose keys Redis refuses to read (on a Cluster: its slot left open by
    an interrupted reshard) failed the node's check of every room it served, which
    the node took for an outage each turn: every offline racer's grace was re-armed
    for ever (an audit). A room read wrong here: its version key of another type."""
    await store.append_event("r", b"join")
    await store.append_event("broken", b"join")
    redis = store._redis  # the keys as another program could leave them
    await redis.delete(store.keys.room("broken").events)
    await redis.rpush(store.keys.room("broken").events, "not a stream")
    chain = (await store.events_since("r", 0))[0].chain
    assert await store.heads(["r", "broken"]) == {"r": (1, chain)}
    assert await store.heads(["broken"]) == {}


@pytest.mark.parametrize("lost", ["ver", "chain", "both", "ver behind"])
async def test_a_version_or_chain_key_lost_alone_is_restored_by_the_next_move(
    store: Store, lost: str
) -> None:
    """Redis can lose the version or the chain key alone, the stream whole (a
    maxmemory-policy that evicts keys). Without its version, every append tried id
    0-1 on a stream at 3 and failed, for ever; without its chain, the next event was
    stored with no link. The move is stored at the next version, linked to the last
    event, the keys are restored, and the reply says what was lost (an announced
    loss); the move after it says nothing."""
    for i in range(3):
        await store.append_move("r", "a", i, b"m", b"progress", round_no=1)
    before = await store.events_since("r", 0)
    rk = store.keys.room("r")
    raw = store._redis
    if lost in ("ver", "both"):
        await raw.delete(rk.ver)
    if lost in ("chain", "both"):
        await raw.delete(rk.chain)
    if lost == "ver behind":
        await raw.set(rk.ver, 1)
    assert await store.heads(["r"]) == {"r": (3, before[-1].chain)}  # read from the stream
    moved = await store.append_move("r", "a", 3, b"m", b"progress", round_no=1)
    assert moved.accepted and moved.version == 4
    said = {"ver": ["version"], "chain": ["chain"], "both": ["version", "chain"]}
    for key in said.get(lost, ["version"]):
        assert f"its {key} key" in moved.head_lost, moved.head_lost
    (event,) = await store.events_since("r", 3)
    assert (event.version, event.prev) == (4, before[-1].chain)
    assert await store.version("r") == 4
    assert await store.heads(["r"]) == {"r": (4, event.chain)}
    again = await store.append_move("r", "a", 4, b"m", b"progress", round_no=1)
    assert again.accepted and again.version == 5 and again.head_lost == ""


async def test_a_decision_on_a_lost_version_key_restores_it_and_appends_nothing(
    store: Store,
) -> None:
    """Read as version 0, a lost version key conflicted with every decision, for ever.
    The append restores it from the stream and says so (HeadLost, a VersionConflict
    at the right version), writing no event: the caller announces the loss, then
    decides again, and that append is stored."""
    for i in range(3):
        await store.append_event("r", f"e{i}".encode())
    await store._redis.set(store.keys.room("r").meta, b"meta")
    await store.expire_room("r", 3600, unlist=False)
    await store._redis.delete(store.keys.room("r").ver)
    with pytest.raises(HeadLost) as lost:
        await store.append_event("r", b"decision", expected_version=3)
    assert lost.value.current_version == 3 and "version key" in lost.value.what
    assert len(await store.events_since("r", 0)) == 3
    assert 0 < await store._redis.pttl(store.keys.room("r").ver) <= 3600 * 1000
    assert await store.append_event("r", b"decision", expected_version=3) == 4


async def test_a_rewound_stream_breaks_the_link(store: Store) -> None:
    """What a Redis that lost its last write looks like to a reader: the version it
    had read comes back as another event, which does not link to what it read."""
    await store.append_event("r", b"one")
    await store.append_event("r", b"two")
    read = await store.events_since("r", 0)
    rk = store.keys.room("r")
    raw = store._redis  # the test plays the lost write
    await raw.delete(rk.events)
    await raw.xadd(rk.events, {b"e": b"one", b"p": b"", b"c": read[0].chain.encode()}, id="0-1")
    await raw.set(rk.ver, 1)
    await raw.set(rk.chain, read[0].chain)
    await store.append_event("r", b"another two")
    (again,) = await store.events_since("r", 1)
    assert again.version == 2 and again.prev == read[0].chain  # links to what survived
    assert again.chain != read[1].chain  # ...but is not the event that was read


async def test_a_rematch_trims_the_rounds_before_the_last_in_one_step(
    store: Store, node2: Store
) -> None:
    """A rematch's reset (version 9, round 3) trims the stream before the reset that
    began round 2 (version 5) and deletes round 1's logs, place counter, finish time
    and closed marks (that of a log never written too: its racer resigned before a
    move), and the tokens of the racers it does not keep, in the same atomic step as
    its append: round 2's keys and every event from version 5 stay; a move of round 1
    is still refused (its race is over) and writes nothing back; the next events follow
    on (docs/store.md, "A room's history"). A trim in a conflicting append writes
    nothing."""
    room = "r"
    rk = store.keys.room(room)
    digest = {racer: f"{racer}" * 64 for racer in (1, 2, 3)}

    async def play_round(round_no: int) -> None:
        for racer in ("1", "2"):
            name = f"{round_no}:{racer}"
            await store.append_move(room, name, 0, b"m", b"progress", round_no=round_no)
        name = f"{round_no}:1"
        finish = Finish(str(round_no), (b"finished 1", b"finished 2"), 100)
        await store.append_move(room, name, 1, b"m", b"fin", finish, round_no=round_no)
        await store.append_event(room, b"resigned", closes_log=f"{round_no}:2")

    await store.append_event(room, b"join")  # 1
    await play_round(1)  # 2-4 moves and finish, 5 resign... versions below
    for racer in (1, 2, 3):
        await store.append_event(room, b"joined", token=(str(racer), digest[racer]))
    await store.append_event(room, b"resigned before a move", closes_log="1:3")
    await store.append_event(room, b"race_over 1", ends_round=1)
    round2 = await store.append_event(room, b"reset 2")
    await play_round(2)
    await store.append_event(room, b"race_over 2", ends_round=2)
    before = await store.version(room)
    with pytest.raises(VersionConflict):
        await node2.append_event(room, b"stale", before - 1, trim=Trim(round2, 2, (1, 3)))
    assert (await store.events_since(room, 0))[0].version == 1
    assert len(await store._redis.hkeys(rk.tokens)) == 3
    reset3 = await node2.append_event(room, b"reset 3", before, trim=Trim(round2, 2, (1, 3)))
    assert reset3 == before + 1
    kept = await store.events_since(room, 0)
    assert [e.version for e in kept] == list(range(round2, reset3 + 1))
    assert kept[0].data == b"reset 2" and kept[-1].data == b"reset 3"
    # round 1's keys are gone, round 2's stay
    members = {
        m.decode() if isinstance(m, bytes) else m for m in await store._redis.smembers(rk.keyset)
    }
    assert members == {rk.log("2:1"), rk.log("2:2"), rk.places("2"), rk.finish_time("2")}
    for gone in (rk.log("1:1"), rk.log("1:2"), rk.places("1"), rk.finish_time("1")):
        assert not await store._redis.exists(gone), gone
    closed = {
        k.decode() if isinstance(k, bytes) else k for k in await store._redis.hkeys(rk.closed)
    }
    assert closed == {rk.log("2:1"), rk.log("2:2")}  # round 2's finish and resign
    assert await store.racer_for_token(room, digest[1]) == "1"
    assert await store.racer_for_token(room, digest[2]) is None  # not kept: gone
    assert await store.racer_for_token(room, digest[3]) == "3"
    assert await store.log_length(room, "2:1") == 2
    late = await store.append_move(room, "1:2", 1, b"late", b"progress", round_no=1)
    assert not late.accepted and late.race_over
    assert not await store._redis.exists(rk.log("1:2"))
    assert await store.append_event(room, b"joined") == reset3 + 1
    assert [e.version for e in await store.events_since(room, reset3)] == [reset3 + 1]


async def test_a_round_proved_revealed_takes_no_more_moves_and_is_never_lowered(
    store: Store, node2: Store
) -> None:
    """``reveal_round`` (a client proved a round's seed went out: docs/store.md, "Key
    layout", ``over``) closes that round and every one before it to moves on every
    node in one atomic step, is read back by ``round_over``, never lowers ``over`` (a
    race_over's, or an earlier proof's), and keeps the room's expiry."""
    room = "r"
    await store.create_room(room, "ABCD", b"meta", listed=False, now_ms=1)
    await store.append_event(room, b"countdown 1")
    assert (await store.append_move(room, "1:1", 0, b"m", b"progress", round_no=1)).accepted
    assert await store.round_over(room) == 0
    assert await store.reveal_round(room, 1) == 0  # over before: nothing went out
    assert await node2.round_over(room) == 1
    for s, seq in ((store, 1), (node2, 1)):
        late = await s.append_move(room, "1:1", seq, b"m", b"progress", round_no=1)
        assert not late.accepted and late.race_over
    assert await node2.reveal_round(room, 3) == 1  # a later round's proof
    assert await store.reveal_round(room, 2) == 3  # an earlier one lowers nothing
    await store.append_event(room, b"race_over 1", ends_round=1)  # nor a race_over
    assert await store.round_over(room) == 3
    assert await store.round_over("nope") == 0
    await store.expire_room(room, 60)
    await store.reveal_round(room, 4)
    assert 0 < await store._redis.pttl(store.keys.room(room).over) <= 60_000
    with pytest.raises(ValueError):
        await store.reveal_round(room, 0)
    # a room gone (expired) meanwhile is not brought back as an `over` with no expiry
    assert await store.reveal_round("gone", 1) == 0
    assert not await store._redis.exists(store.keys.room("gone").over)


async def test_a_round_ended_is_a_race_overs_never_a_proofs(store: Store, node2: Store) -> None:
    """``round_ended`` tells ``over`` raised by a race_over from ``over`` raised by a
    proof (``reveal_round``: a later round's proof raises it past the round the store
    holds under way, whose race_over may never come): from the proof on, on every
    node, the last race_over's round before it (round 1's, not 0: a result of a round
    before it reveals nothing under way), until a later round's race_over; the
    proof's marks keep the room's expiry and close no log."""
    room = "r"
    await store.create_room(room, "ABCD", b"meta", listed=False, now_ms=1)
    assert await store.round_ended(room) == 0
    await store.append_event(room, b"race_over 1", ends_round=1)
    assert await node2.round_ended(room) == 1
    await store.expire_room(room, 60)
    assert await store.reveal_round(room, 3) == 1  # round 2 under way, round 3 proved
    assert (await store.round_over(room), await node2.round_ended(room)) == (3, 1)
    closed = store.keys.room(room).closed
    assert 0 < await store._redis.pttl(closed) <= 60_000
    await store.append_event(room, b"race_over 2", ends_round=2)
    await store.append_event(room, b"race_over 3", ends_round=3)
    assert await store.reveal_round(room, 5) == 3  # a proof past a proof
    assert await store.round_ended(room) == 1  # over a proof's all along: still 1
    for round_no in (4, 5, 6):
        await store.append_event(room, f"race_over {round_no}".encode(), ends_round=round_no)
    assert await node2.round_ended(room) == 6
    assert await store.reveal_round(room, 8) == 6  # after a race_over past the proof
    assert await store.round_ended(room) == 6
    assert await store.round_ended("nope") == 0


async def test_a_result_is_saved_once_and_the_first_stands(store: Store, node2: Store) -> None:
    """A race id's first result stands: a store rewound to before a race_over ends the
    round again under the same race id, and its second result replaced the true one."""
    assert await store.save_result("race-1", b"first")
    assert not await node2.save_result("race-1", b"second")
    assert not await store.save_result("race-1", b"first")  # a retry: the same bytes
    assert await store.load_result("race-1") == b"first"
