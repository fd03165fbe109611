"""Rooms: codes, metadata, the public listing, results."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from solrace.rooms.node import ROOM_TTL_S
from solrace.store import CodeTaken, Listing, Store
from solrace.store.errors import StoreUnavailable


async def test_create_and_load(store: Store) -> None:
    await store.create_room("r1", "ABCD", b"\x81\xa1m\x01", listed=True, now_ms=1000)
    assert await store.load_meta("r1") == b"\x81\xa1m\x01"
    assert await store.room_for_code("ABCD") == "r1"
    assert await store.room_for_code("ZZZZ") is None
    assert await store.load_meta("nope") is None
    await store.save_meta("r1", b"v2")
    assert await store.load_meta("r1") == b"v2"


async def test_code_collision_writes_nothing(store: Store) -> None:
    await store.create_room("r1", "ABCD", b"one", listed=True, now_ms=1)
    with pytest.raises(CodeTaken) as info:
        await store.create_room("r2", "ABCD", b"two", listed=True, now_ms=2)
    assert info.value.code == "ABCD"
    assert await store.room_for_code("ABCD") == "r1"
    assert await store.load_meta("r2") is None
    assert await store.listed_rooms() == ["r1"]


async def test_concurrent_code_claims_from_two_nodes(store: Store, node2: Store) -> None:
    nodes = [store, node2]
    results = await asyncio.gather(
        *(nodes[i % 2].create_room(f"r{i}", "SAME", b"m", False, i) for i in range(10)),
        return_exceptions=True,
    )
    winners = [i for i, r in enumerate(results) if r is None]
    assert len(winners) == 1
    assert all(isinstance(r, CodeTaken) for r in results if r is not None)
    assert await store.room_for_code("SAME") == f"r{winners[0]}"


def _room_writes_fail(store: Store, monkeypatch: pytest.MonkeyPatch, *, gone: bool) -> None:
    """Redis fails create_room's second round trip (the room's own writes, one pipeline)
    after its code is claimed; ``gone``: the best-effort release of the code too (Redis
    vanished, or the node died there: nothing more is written)."""
    raw = store._redis
    pipeline = raw.pipeline
    made: list[Any] = []

    async def fails(*_args: Any, **_kwargs: Any) -> Any:
        raise ConnectionError("injected: Redis went away after the code's claim")

    def failing(*args: Any, **kwargs: Any) -> Any:
        pipe = pipeline(*args, **kwargs)
        if not made:  # the create's own (a cluster client's DEL makes one too)
            made.append(pipe)
            pipe.execute = fails
        return pipe

    monkeypatch.setattr(raw, "pipeline", failing)
    if gone:
        monkeypatch.setattr(raw, "delete", fails)


async def test_a_create_whose_room_write_fails_lets_its_code_go(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create is two round trips: the code's claim (SET NX), then the room's meta,
    code copy and listing. Redis fails the second: the create fails, its code is let go
    (drawn again, it is free) and nothing of the room is stored or listed."""
    _room_writes_fail(store, monkeypatch, gone=False)
    with pytest.raises(StoreUnavailable):
        await store.create_room("r1", "ABCD", b"m", True, 1, ROOM_TTL_S, quick="yukon")
    monkeypatch.undo()
    assert await store.room_for_code("ABCD") is None
    assert await store.load_meta("r1") is None
    assert await store.listed_rooms() == [] and await store.quick_lobbies("yukon") == []
    await store.create_room("r2", "ABCD", b"m", True, 2, ROOM_TTL_S, quick="yukon")
    assert await store.room_for_code("ABCD") == "r2"


async def test_a_code_claimed_by_a_create_cut_short_names_no_room_and_expires(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis vanishes (or the node dies) right after a create's code is claimed: the
    code key stays, naming a room with no meta (a join by it is ``unknown_room``), and
    it carries the room's lifetime cap from its own write, so it goes by itself —
    nothing else of the room was written, nothing is listed."""
    _room_writes_fail(store, monkeypatch, gone=True)
    with pytest.raises(StoreUnavailable):
        await store.create_room("r1", "ABCD", b"m", True, 1, ROOM_TTL_S, quick="yukon")
    monkeypatch.undo()
    assert await store.room_for_code("ABCD") == "r1"
    assert await store.load_meta("r1") is None
    assert await store.listed_rooms() == [] and await store.quick_lobbies("yukon") == []
    ttl_ms = int(await store._redis.pttl(store.keys.code("ABCD")))
    assert (ROOM_TTL_S - 60) * 1000 < ttl_ms <= ROOM_TTL_S * 1000, ttl_ms


async def test_listing_newest_first_limit_and_unlist(store: Store) -> None:
    await store.create_room("old", "C1", b"", listed=True, now_ms=1000)
    await store.create_room("new", "C2", b"", listed=True, now_ms=3000)
    await store.create_room("mid", "C3", b"", listed=True, now_ms=2000)
    await store.create_room("private", "C4", b"", listed=False, now_ms=4000)
    assert await store.listed_rooms() == ["new", "mid", "old"]
    assert await store.listed_rooms(limit=2) == ["new", "mid"]
    assert await store.listed_rooms(limit=0) == []
    await store.unlist("mid")
    await store.unlist("never-listed")
    assert await store.listed_rooms() == ["new", "old"]


async def test_races_under_way_are_listed_behind_every_lobby(store: Store) -> None:
    for room, at in (("a", 1000), ("b", 2000), ("c", 3000), ("d", 4000)):
        await store.create_room(room, f"C{room}", b"", listed=True, now_ms=at)
    await store.list_behind_lobbies("d", 4000)
    await store.list_behind_lobbies("b", 2000)
    assert await store.listed_rooms() == ["c", "a", "d", "b"]  # lobbies, then races
    assert await store.listed_lobbies() == ["c", "a"]
    assert await store.listed_lobbies(limit=1) == ["c"]
    await store.unlist("c")
    await store.list_behind_lobbies("c", 3000)  # unlisted meanwhile: stays unlisted
    assert await store.listed_rooms() == ["a", "d", "b"]


async def test_lobbies_nobody_is_in_are_listed_behind_every_race(store: Store) -> None:
    """A lobby whose racers all hung up sorts behind the races (out of the lobbies
    ``quick`` reads), and back among the lobbies when one returns; a move never lists
    a room that is not listed (``XX``)."""
    for room, at in (("a", 1000), ("b", 2000), ("c", 3000), ("d", 4000), ("e", 5000)):
        await store.create_room(room, f"C{room}", b"", listed=True, now_ms=at)
    await store.move_listing("e", 5000, Listing.IDLE)
    await store.move_listing("c", 3000, Listing.IDLE)
    await store.move_listing("b", 2000, Listing.RACE)
    assert await store.listed_rooms() == ["d", "a", "b", "e", "c"]  # lobbies, races, idle
    assert await store.listed_lobbies() == ["d", "a"]
    assert await store.idle_lobbies() == ["e", "c"]
    assert await store.idle_lobbies(limit=1) == ["e"]
    assert await store.idle_lobbies(limit=0) == []
    await store.move_listing("c", 3000, Listing.LOBBY)  # its racer is back
    assert await store.listed_lobbies() == ["d", "c", "a"]
    assert await store.idle_lobbies() == ["e"]
    await store.unlist("e")
    await store.move_listing("e", 5000, Listing.LOBBY)  # unlisted meanwhile: stays so
    assert "e" not in await store.listed_rooms()


async def test_a_variants_quick_lobbies_follow_the_listing(store: Store) -> None:
    """``quick`` reads its variant's quick lobbies, oldest first: a listed quick room
    joins them when created, leaves them when it sorts as a race or a lobby nobody is
    in, and joins them again as a lobby only while it is still listed."""
    await store.create_room("a", "CA", b"", listed=True, now_ms=1000, quick="yukon")
    await store.create_room("b", "CB", b"", listed=True, now_ms=2000, quick="yukon")
    await store.create_room("k", "CK", b"", listed=True, now_ms=3000, quick="klondike")
    await store.create_room("p", "CP", b"", listed=False, now_ms=4000, quick="yukon")
    await store.create_room("c", "CC", b"", listed=True, now_ms=5000)
    assert await store.quick_lobbies("yukon") == ["a", "b"]
    assert await store.quick_lobbies("yukon", limit=1) == ["a"]
    assert await store.quick_lobbies("klondike") == ["k"]
    await store.move_listing("a", 1000, Listing.IDLE, quick="yukon")
    assert await store.quick_lobbies("yukon") == ["b"]
    await store.move_listing("a", 1000, Listing.LOBBY, quick="yukon")
    assert await store.quick_lobbies("yukon") == ["a", "b"]
    await store.list_behind_lobbies("b", 2000, quick="yukon")
    assert await store.quick_lobbies("yukon") == ["a"]
    await store.unlist("b")
    await store.move_listing("b", 2000, Listing.LOBBY, quick="yukon")  # unlisted: stays out
    assert await store.quick_lobbies("yukon") == ["a"]
    assert await store.is_listed("a") and not await store.is_listed("b")
    await store.drop_quick("yukon", "a")
    assert await store.quick_lobbies("yukon") == []


async def test_a_private_room_is_noted_among_the_unlisted_lobbies_not_listed(
    store: Store,
) -> None:
    """A room created unlisted (private) is noted for the orphan sweep in the create's
    own writes (no listing names it); a listed one is not. A rematch notes a room
    itself; a note goes when the sweep forgets it."""
    await store.create_room("p", "CP", b"", listed=False, now_ms=1000)
    await store.create_room("l", "CL", b"", listed=True, now_ms=2000)
    assert await store.unlisted_lobbies() == ["p"]
    assert await store.listed_rooms() == ["l"]
    await store.note_unlisted("l", 2)
    assert await store.unlisted_lobbies() == ["l", "p"]
    assert len(await store.unlisted_lobbies(limit=1)) == 1
    await store.forget_unlisted("p", 1)
    assert await store.unlisted_lobbies() == ["l"]


async def test_an_unlisted_lobbys_note_of_a_later_round_outlives_a_forget_of_an_earlier(
    store: Store,
) -> None:
    """A rematch notes its room with the round its reset begins, before the reset: a
    sweep that read the room as the finished race of the round before forgets the
    note only through that round, in one step (a check of the room's version, then
    the forget, lost a note written between the two: a review). The highest round
    noted stands; None forgets whatever the note says."""
    await store.create_room("p", "CP", b"", listed=False, now_ms=1000)
    await store.note_unlisted("p", 2)
    await store.forget_unlisted("p", 1)
    assert await store.unlisted_lobbies() == ["p"]
    await store.note_unlisted("p", 1)  # a stale rematch's note: round 2 stands
    await store.forget_unlisted("p", 1)
    assert await store.unlisted_lobbies() == ["p"]
    await store.forget_unlisted("p", 2)
    assert await store.unlisted_lobbies() == []
    await store.note_unlisted("p", 3)
    await store.forget_unlisted("p")
    assert await store.unlisted_lobbies() == []


async def test_results(store: Store) -> None:
    assert await store.load_result("race-1") is None
    await store.save_result("race-1", b"\x00result\xff")
    assert await store.load_result("race-1") == b"\x00result\xff"
    assert await store._redis.pttl(store.keys.result("race-1")) == -1  # never expires


async def test_a_rooms_archive_note_is_cleared_only_through_the_round_archived(
    store: Store,
) -> None:
    """A note keeps the highest round noted (a stale decision's lower round does not
    lower it); clearing the races through round 1 leaves a note of round 2 — a
    countdown that noted the room for its new race before storing itself — and
    clearing through round 2 forgets it. A room whose keys are gone loses its note
    whatever round it notes."""
    await store.mark_unarchived("r1", 1)
    await store.mark_unarchived("r1", 2)
    await store.mark_unarchived("r1", 1)  # a stale decision's
    await store.mark_unarchived("r2", 5)
    assert await store.unarchived_rooms() == ["r1", "r2"]
    await store.clear_unarchived("r1", 1)
    assert await store.unarchived_rooms() == ["r1", "r2"]
    await store.clear_unarchived("r1", 2)
    await store.clear_unarchived("r3", 2)  # no note: nothing to clear
    assert await store.unarchived_rooms() == ["r2"]
    await store.clear_unarchived("r2")
    assert await store.unarchived_rooms() == []


async def test_an_earlier_releases_notes_are_read_and_cleared(store: Store) -> None:
    """Rooms an earlier release noted (a set of room ids, Keys.unarchived) are read with
    this release's notes — a rolling upgrade loses none — each up to the limit, and cleared
    apart (Store.clear_legacy_note), or with a room whose keys are gone."""
    await store._redis.sadd(store.keys.unarchived, "r_old", "r_gone", "r_both")
    await store.mark_unarchived("r_both", 1)
    await store.mark_unarchived("r_new", 1)
    assert await store.unarchived_rooms() == ["r_both", "r_gone", "r_new", "r_old"]
    # Up to the limit of each kind: both of this release's, and two of the earlier's
    # three (one of them may be r_both, which this release noted too).
    some = set(await store.unarchived_rooms(limit=2))
    assert {"r_both", "r_new"} <= some
    assert len(some - {"r_both", "r_new"}) in (1, 2)
    await store.clear_unarchived("r_both", 1)
    assert "r_both" in await store.unarchived_rooms()  # the earlier release's note stays
    await store.clear_legacy_note("r_both")
    await store.clear_legacy_note("r_old")
    await store.clear_unarchived("r_gone")
    assert await store.unarchived_rooms() == ["r_new"]


async def test_an_earlier_releases_notes_are_read_however_many_notes_this_release_has(
    store: Store,
) -> None:
    """Every running race holds a note of this release, so a deployment with as many
    races as the sweep reads at once has that many notes at every sweep: an earlier
    release's notes, read only to make up a short count, were then never read — a
    race an old node noted, its nodes dead in a rolling upgrade, never adopted or
    archived. Each kind is read up to the limit."""
    limit = 3
    for n in range(limit + 1):
        await store.mark_unarchived(f"r_new{n}", 1)
    await store._redis.sadd(store.keys.unarchived, "r_old")
    assert "r_old" in await store.unarchived_rooms(limit=limit)


async def test_the_nodes_that_served_a_room_are_joined_one_at_a_time_and_read(
    store: Store, node2: Store
) -> None:
    await store.create_room("r1", "ABCD", b"m", listed=False, now_ms=1)
    assert await store.room_nodes("r1") == set()
    assert await store.join_room_nodes("r1", "node-a") == set()
    assert await node2.join_room_nodes("r1", "node-b") == {"node-a"}
    assert await node2.room_nodes("r1") == {"node-a", "node-b"}
    assert await store.room_nodes("nope") == set()


async def test_the_sets_of_many_rooms_are_read_and_left_in_one_go(store: Store) -> None:
    """A draining node reads the sets of its shared rooms and leaves those another live
    node serves (Node._leave_shared_rooms): pipelined, over rooms of any slot."""
    rooms = [f"r{i}" for i in range(8)]  # on a cluster, on several masters
    for i, room_id in enumerate(rooms):
        await store.create_room(room_id, f"C{i:03d}", b"m", listed=False, now_ms=1)
        await store.join_room_nodes(room_id, "node-a")
        if i % 2:
            await store.join_room_nodes(room_id, "node-b")
    read = await store.rooms_nodes([*rooms, "nope"])
    assert read == {
        **{r: {"node-a", "node-b"} if i % 2 else {"node-a"} for i, r in enumerate(rooms)},
        "nope": set(),
    }
    assert await store.rooms_nodes([]) == {}
    left = await store.leave_rooms({r: {"node-a"} for r in rooms[1::2]})
    assert left == set(rooms[1::2])
    assert await store.leave_rooms({}) == set()
    assert await store.leave_rooms({rooms[0]: set()}) == set()  # nobody to take out
    assert await store.rooms_nodes(rooms) == {
        r: {"node-b"} if i % 2 else {"node-a"} for i, r in enumerate(rooms)
    }
    await store.leave_rooms({rooms[1]: {"node-b", "node-c"}})  # several at once
    assert await store.rooms_nodes(rooms[1:2]) == {rooms[1]: set()}


async def test_one_rooms_failing_set_leaves_the_others_read_and_left(store: Store) -> None:
    """A drain reads and leaves its shared rooms' sets in one pipeline. One room's
    command failing (its Cluster slot left open; here a key of the wrong type, which
    fails that command alone) failed the whole pipeline, and the drain left no room's
    set — as the room checks once did (Store.heads). That room is left out now."""
    rooms = ["r1", "r2", "r3"]
    for i, room_id in enumerate(rooms):
        await store.create_room(room_id, f"C{i:03d}", b"m", listed=False, now_ms=1)
        await store.join_room_nodes(room_id, "node-a")
    bad = store.keys.room("r2").nodes
    await store._redis.delete(bad)
    await store._redis.set(bad, "not a set")  # WRONGTYPE for SMEMBERS and SREM
    assert await store.rooms_nodes(rooms) == {"r1": {"node-a"}, "r3": {"node-a"}}
    assert await store.leave_rooms({r: {"node-a"} for r in rooms}) == {"r1", "r3"}
    assert await store.rooms_nodes(["r1", "r3"]) == {"r1": set(), "r3": set()}
    await store._redis.delete(bad)
