"""A closed store refuses every write (``StoreClosed``, a ``StoreError``), and every
read, on every backend, and writes nothing: before, only moves were refused, and every other write
opened a new connection (redis-py reconnects a closed client) and ran."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import pytest
from solrace.store import Finish, Listing, Store, StoreClosed, StoreError, Trim

#: Every write of the store, as a call on a closed store ``s`` (room r1 exists).
WRITES: dict[str, Callable[[Store], Awaitable[object]]] = {
    "create_room": lambda s: s.create_room("r2", "WXYZ", b"m", True, 2),
    "save_meta": lambda s: s.save_meta("r1", b"changed"),
    "move_listing": lambda s: s.move_listing("r1", 1, Listing.IDLE),
    "list_behind_lobbies": lambda s: s.list_behind_lobbies("r1", 1),
    "drop_quick": lambda s: s.drop_quick("yukon", "r1"),
    "unlist": lambda s: s.unlist("r1"),
    "expire_room": lambda s: s.expire_room("r1", 60),
    "settle_expiry": lambda s: s.settle_expiry("r1", unlist=True),
    "append_event": lambda s: s.append_event("r1", b"e", trim=Trim(1, 1, ())),
    "append_move": lambda s: s.append_move(
        "r1", "0", 0, b"m", b"e", Finish("1", (b"f",), 5), round_no=1
    ),
    "join_room_nodes": lambda s: s.join_room_nodes("r1", "n1"),
    "reveal_round": lambda s: s.reveal_round("r1", 1),
    "leave_room_nodes": lambda s: s.leave_room_nodes("r1", {"n1"}),
    "leave_rooms": lambda s: s.leave_rooms({"r1": {"n1"}}),
    "wake": lambda s: s.wake({"n1"}, "r1"),
    "delete_all": lambda s: s.delete_all(),
    "renew_lease": lambda s: s.renew_lease("n1", 10_000),
    "drop_lease": lambda s: s.drop_lease("n0"),
    "hand_off": lambda s: s.hand_off("n0", 60_000),
    "forget_hand_offs": lambda s: s.forget_hand_offs({"n0"}),
    "claim_seat": lambda s: s.claim_seat("ab" * 32, "r1", 1, 60),
    "release_seat_claim": lambda s: s.release_seat_claim("cd" * 32),
    "save_result": lambda s: s.save_result("race1", b"result"),
    "mark_unarchived": lambda s: s.mark_unarchived("r9", 1),
    "clear_unarchived": lambda s: s.clear_unarchived("r1", 1),
    "clear_legacy_note": lambda s: s.clear_legacy_note("r1"),
    "note_unlisted": lambda s: s.note_unlisted("r9", 2),
    "forget_unlisted": lambda s: s.forget_unlisted("r1", 1),
    "refused_access": lambda s: s.refused_access(),
}

#: The store's other coroutine methods: they read (or open, or close) a store.
READS = {
    "connect", "start_embedded", "sibling", "close", "ping", "durability", "eviction",
    "replica", "load_meta", "room_for_code", "listed_rooms", "listed_lobbies",
    "quick_lobbies", "is_listed", "idle_lobbies", "events_since", "version", "tail",
    "room_nodes", "rooms_nodes", "wakes", "move_log", "log_length", "time_ms", "older_nodes",
    "live_nodes", "handed_off", "heads", "racer_for_token", "claimed_seat", "load_result",
    "unarchived_rooms", "archive_note", "unlisted_lobbies", "round_over", "round_ended",
}  # fmt: skip


def test_every_coroutine_method_of_the_store_is_a_write_or_a_read() -> None:
    """A new method is classified here, so that a new write is tested closed."""
    methods = {
        name
        for name, member in inspect.getmembers(Store)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }
    assert methods == set(WRITES) | READS


async def _contents(store: Store) -> dict[str, object]:
    """Every key under the store's prefix, with its value (DUMP: whatever its type)."""
    raw = store._redis
    pattern = store.keys.prefix.replace("{", "\\{").replace("}", "\\}") + "*"
    return {k: await raw.dump(k) async for k in raw.scan_iter(match=pattern, count=1000)}


@pytest.mark.parametrize("write", list(WRITES))
async def test_a_closed_store_refuses_the_write_and_writes_nothing(
    store: Store, write: str
) -> None:
    await store.create_room("r1", "ABCD", b"m", True, 1, quick="yukon")
    await store.renew_lease("n0", 60_000)
    await store.mark_unarchived("r1", 1)
    await store._redis.sadd(store.keys.unarchived, "r1")  # an earlier release's note
    before = await _contents(store)
    closed = await store.sibling()  # the embedded engine runs on: the first one holds it
    await closed.close()
    with pytest.raises(StoreClosed) as refused:
        await WRITES[write](closed)
    assert isinstance(refused.value, StoreError)
    assert await _contents(store) == before


async def test_a_closed_store_refuses_reads_too_at_once(store: Store) -> None:
    """A read on a closed store is refused at once: redis-py reconnects a closed
    client, so a read ran (the reads here answered). The likely cause of
    tests/rooms/test_stop.py's one failure in CI, on the cluster: a certified deal's
    write retried after ``Node.stop`` (its decision reads first) still running 0.1 s
    after the store closed, reconnecting to every master."""
    await store.create_room("r1", "ABCD", b"m", True, 1)
    closed = await store.sibling()
    await closed.close()
    reads = (closed.version("r1"), closed.load_meta("r1"), closed.round_over("r1"))
    for read in (*reads, closed.round_ended("r1")):
        with pytest.raises(StoreClosed):
            await read
    assert not await closed.ping()
