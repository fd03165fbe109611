"""expire_room: every room key gets the TTL, late writes inherit it, results stay."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from solrace.store import Finish, Store, StoreUnavailable, VersionConflict, token_digest
from solrace.store._lua import EXPIRE_CODE

from .conftest import delete_room_keys, make_rooms, room_keys


async def _populate(store: Store, room_id: str, code: str) -> None:
    await store.create_room(room_id, code, b"meta", listed=True, now_ms=1)
    await store.append_event(room_id, b"join", token=("a", token_digest("ta")))
    await store.append_move(room_id, "a", 0, b"m", b"e", round_no=1)
    await store.append_move(
        room_id, "b", 0, b"m", b"e", Finish("race", (b"fin",), 1000), round_no=1
    )
    await store.append_event(room_id, b"a resigned", closes_log="a")


async def test_every_room_key_gets_the_ttl(store: Store) -> None:
    await _populate(store, "r", "CODE")
    rk = store.keys.room("r")
    before = await room_keys(store, "r")
    assert set(before) == {
        rk.meta,
        rk.code,
        rk.ver,
        rk.chain,
        rk.events,
        rk.tokens,
        rk.closed,
        rk.keyset,
        rk.log("a"),
        rk.log("b"),
        rk.places("race"),
        rk.finish_time("race"),
    }
    assert all(ttl == -1 for ttl in before.values())

    await store.expire_room("r", 100)
    after = await room_keys(store, "r")
    assert set(after) == set(before)
    assert all(0 < ttl <= 100_000 for ttl in after.values()), after
    assert 0 < await store._redis.pttl(store.keys.code("CODE")) <= 100_000
    assert await store.listed_rooms() == []
    assert await store.room_for_code("CODE") == "r"  # still joinable until it expires


async def test_a_lifetime_cap_can_keep_the_room_listed(store: Store) -> None:
    await _populate(store, "r", "CODE")
    await store.expire_room("r", 100, unlist=False)
    after = await room_keys(store, "r")
    assert after and all(0 < ttl <= 100_000 for ttl in after.values()), after
    assert await store.listed_rooms() == ["r"]


async def test_writes_after_expiry_inherit_the_ttl(store: Store) -> None:
    await store.create_room("r", "CODE", b"meta", listed=False, now_ms=1)
    await store.expire_room("r", 100)  # before any event, log or token exists
    await store.append_event("r", b"late event")
    await store.append_move("r", "late", 0, b"m", b"e", Finish("race", (b"fin",), 1000), round_no=1)
    await store.append_event("r", b"late race_over", ends_round=1)
    await store.append_event("r", b"late join", token=("late", token_digest("t")))
    await store.append_event("r", b"late resign", closes_log="late")
    await store.save_meta("r", b"meta v2")
    ttls = await room_keys(store, "r")
    rk = store.keys.room("r")
    late = [rk.ver, rk.chain, rk.events, rk.log("late"), rk.places("race"), rk.tokens]
    assert {*late, rk.finish_time("race"), rk.over, rk.closed} <= set(ttls)
    assert all(0 < ttl <= 100_000 for ttl in ttls.values()), ttls


async def test_room_is_gone_after_ttl_but_result_stays(store: Store) -> None:
    await _populate(store, "r", "CODE")
    await store.save_result("race-r", b"standings")
    await store.expire_room("r", 0.2)
    await asyncio.sleep(0.35)
    assert await store.load_meta("r") is None
    assert await store.room_for_code("CODE") is None
    assert await store.version("r") == 0
    assert await store.move_log("r", "a") == []
    assert await store.racer_for_token("r", token_digest("ta")) is None
    assert await room_keys(store, "r") == {}
    assert await store.load_result("race-r") == b"standings"
    # the code is free again
    await store.create_room("r2", "CODE", b"m", listed=False, now_ms=2)


async def test_a_settle_gives_the_code_a_longer_expiry_never_a_shorter_one(
    store: Store,
) -> None:
    """The code is in another slot than its room: a settle reads the room's expiry and
    writes the code's in two steps. Run late (its node paused between them, another
    node's rematch in between), it put a finished round's hour on the code of a round
    that had a day again (an audit of this change, reproduced). It only extends now;
    expire_room still sets exactly what it is told."""
    await store.create_room("r", "CODE", b"m", listed=True, now_ms=1, ttl_s=86_400)
    raw, code_key = store._redis, store.keys.code("CODE")
    await store.append_event("r", b"race over", ttl_s=3600)
    await store.settle_expiry("r", unlist=True)
    assert 86_300_000 < await raw.pttl(code_key) <= 86_400_000  # not cut to the hour
    assert await raw.pttl(store.keys.room("r").meta) <= 3_600_000
    await store.append_event("r", b"rematch", ttl_s=2 * 86_400)
    await store.settle_expiry("r")
    assert await raw.pttl(code_key) > 2 * 86_400_000 - 100_000  # extended with the room
    await store.expire_room("r", 100)
    assert 0 < await raw.pttl(code_key) <= 100_000


async def test_a_final_settle_gives_the_code_the_rooms_expiry_even_shorter(
    store: Store,
) -> None:
    """Everyone left the room: nothing can give it a longer expiry again, so its code
    follows it down (it kept its 24 hours: every room left a key behind a day, a soak
    audit) — and only if it still names the room."""
    await store.create_room("r", "CODE", b"m", listed=True, now_ms=1, ttl_s=86_400)
    raw, code_key = store._redis, store.keys.code("CODE")
    await store.append_event("r", b"everyone left", ttl_s=600)
    await store.settle_expiry("r", unlist=True, final=True)
    assert 0 < await raw.pttl(code_key) <= 600_000
    assert "r" not in await store.listed_rooms()
    await store.create_room("s", "OTHER", b"m", listed=False, now_ms=1, ttl_s=86_400)
    await raw.set(store.keys.room("r").code, "OTHER")  # a code another room holds now
    await store.settle_expiry("r", final=True)
    assert await raw.pttl(store.keys.code("OTHER")) > 86_300_000


async def test_a_settle_cut_short_between_its_room_and_its_code_leaves_no_room_unsettled(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A settle is three steps (the room's logs, the code in its own slot, the
    listing). Redis failing it after the logs: the logs have the room's expiry, the
    code keeps the longer one it had, the room stays listed; the next settle ends it."""
    await store.create_room("r", "CODE", b"m", listed=True, now_ms=1, ttl_s=86_400)
    await store.append_move("r", "log", 0, b"m", b"e", round_no=1)  # a key set member
    await store.append_event("r", b"race over", ttl_s=3600)
    real = store._eval

    async def fails_at_the_code(script: Any, *args: Any) -> Any:
        if script is EXPIRE_CODE:
            raise StoreUnavailable("the code's master is down (injected)")
        return await real(script, *args)

    monkeypatch.setattr(store, "_eval", fails_at_the_code)
    with pytest.raises(StoreUnavailable):
        await store.settle_expiry("r", unlist=True)
    raw, code_key = store._redis, store.keys.code("CODE")
    ttls = await room_keys(store, "r")
    assert ttls and all(0 < ms <= 3_600_000 for ms in ttls.values()), ttls
    assert await raw.pttl(code_key) > 86_000_000
    assert "r" in await store.listed_rooms()
    monkeypatch.setattr(store, "_eval", real)
    await store.settle_expiry("r", unlist=True)
    assert "r" not in await store.listed_rooms()


async def test_a_result_is_kept_for_ever_unless_the_operator_says_how_long(
    store: Store,
) -> None:
    await store.save_result("race-kept", b"standings")
    await store.save_result("race-dated", b"standings", ttl_s=3 * 86_400)
    raw = store._redis
    assert await raw.ttl(store.keys.result("race-kept")) == -1  # no expiry
    assert 3 * 86_400 - 5 <= await raw.ttl(store.keys.result("race-dated")) <= 3 * 86_400


async def test_delete_all_removes_only_this_prefixs_keys(store: Store) -> None:
    raw = store._redis  # the test writes a key outside the prefix
    outsider = f"not-{store.keys.prefix}key"
    await raw.set(outsider, b"someone else's")
    try:
        await make_rooms(store, "r")
        await store.append_event("r", b"mine")
        assert await store.delete_all() >= 4  # meta, ver, chain, events
        assert await store.version("r") == 0
        assert await store.delete_all() == 0
        assert await raw.get(outsider) == b"someone else's"
    finally:
        await raw.delete(outsider)


async def test_a_room_redis_lost_whole_is_not_written_again(store: Store) -> None:
    """Every key of a room gone (a restart without persistence, an operator's DEL):
    a join or an append on it wrote the room's version, stream, chain and a move log back, with
    no meta key to take a TTL from, and they stayed in Redis for ever. A move of
    sequence 0 found its missing log at length 0 and was stored."""
    await store.create_room("r", "CODE", b"meta", listed=False, now_ms=1)
    await store.append_event("r", b"joined", 0)
    await store.append_move("r", "ann", 0, b"m0", b"p0", round_no=1)
    await delete_room_keys(store, "r")
    moved = await store.append_move("r", "ann", 0, b"m0", b"p0", round_no=1)
    assert not moved.accepted and moved.room_gone, moved
    finish = Finish("1", (b"first",), 1000)
    moved = await store.append_move("r", "bob", 0, b"m0", b"p0", finish, round_no=1)
    assert not moved.accepted and moved.room_gone, moved
    for expected in (0, 2, None):
        with pytest.raises(VersionConflict) as conflict:
            await store.append_event("r", b"left", expected, token=("ann", "a" * 64))
        assert conflict.value.current_version == 0
    # A node's first join of it (before a decision: Node.join_room) writes no set.
    assert await store.join_room_nodes("r", "node-a") == set()
    assert await store.room_nodes("r") == set()
    assert await room_keys(store, "r") == {}


async def test_a_room_whose_meta_key_is_gone_is_not_written_again(store: Store) -> None:
    """The meta key alone gone (an eviction, an operator's DEL) from an expiring room:
    its other keys keep their TTL, and an append writes nothing, not even a key that
    would then have no TTL (a move's first log, its place counter)."""
    await store.create_room("r", "CODE", b"meta", listed=False, now_ms=1, ttl_s=60)
    await store.append_event("r", b"joined", 0)
    await store.append_move("r", "ann", 0, b"m0", b"p0", round_no=1)
    before = await room_keys(store, "r")
    await store._redis.delete(store.keys.room("r").meta)
    moved = await store.append_move("r", "bob", 0, b"m0", b"p0", round_no=1)
    assert not moved.accepted and moved.room_gone, moved
    with pytest.raises(VersionConflict) as conflict:
        await store.append_event("r", b"left", 2)
    assert conflict.value.current_version == 0
    after = await room_keys(store, "r")
    assert set(after) == set(before) - {store.keys.room("r").meta}
    assert all(ttl > 0 for ttl in after.values()), after
    assert await store.version("r") == 2
    assert await store.move_log("r", "bob") == []
