"""Fixtures: every store test runs against real Redis, a real Redis Cluster AND the
embedded engine.

The embedded engine is the real one ``solrace-server`` runs without a Redis URL (a
private valkey-server, AOF on), started per test on the test's own data directory
(about 20 ms to start and stop).

Real Redis comes from ``SOLRACE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``),
the cluster from ``SOLRACE_TEST_CLUSTER_URL`` (default
``redis+cluster://127.0.0.1:7101``, three masters started by ``.ci/run`` with
``deploy/redis-cluster.sh``). Both are shared with other people's runs, so each test
gets a random key prefix and deletes exactly that prefix's keys afterwards, on every
master (never FLUSHDB). If Redis or the cluster is not there the tests on it fail
loudly: a green run must mean the Lua ran on a real server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from solrace.store import Store, StoredEvent, TailRead

from tests.support.redis import BACKEND_URLS, connect_or_fail, new_prefix
from tests.support.redis import delete_prefix as _delete_prefix


@pytest.fixture(params=["redis", "cluster", "embedded"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store: on real Redis or Redis Cluster under a random prefix, or on an
    embedded engine."""
    if request.param == "embedded":
        s = await Store.start_embedded(tmp_path / "engine", prefix="test:")
        try:
            yield s
        finally:
            await s.close()
        return
    prefix = new_prefix()
    s = await connect_or_fail(request.param, prefix)
    try:
        yield s
    finally:
        await s.close()
        await _delete_prefix(prefix, BACKEND_URLS[request.param])


@pytest.fixture
async def node2(store: Store) -> AsyncIterator[Store]:
    """A second "node": another Store on the same backend and prefix."""
    s = await store.sibling()
    try:
        yield s
    finally:
        await s.close()


#: The rooms the event and move tests write to without creating them in full.
ROOMS = ("r", "r1", "a", "b", "q", "broken", "other")


async def make_rooms(store: Store, *room_ids: str) -> None:
    """Store each room's meta key, as Store.create_room does: the scripts write nothing
    to a room whose meta key is gone (docs/store.md, "A room gone whole")."""
    for room_id in room_ids:
        await store.save_meta(room_id, b"meta")


async def with_rooms(store: Store) -> Store:
    """``store`` with :data:`ROOMS` made (their meta keys): the scripts write nothing to
    a room whose meta key is gone. The ``store`` of the modules that write to them."""
    await make_rooms(store, *ROOMS)
    return store


async def room_keys(store: Store, room_id: str) -> dict[str, int]:
    """Every existing key of a room -> its PTTL (ms; -1 = no TTL)."""
    raw = store._redis
    pattern = store.keys.room(room_id).base.replace("{", "\\{").replace("}", "\\}") + "*"
    out: dict[str, int] = {}
    async for key in raw.scan_iter(match=pattern, count=1000):
        out[key.decode()] = int(await raw.pttl(key))
    return out


async def delete_room_keys(store: Store, room_id: str) -> None:
    """Every key of a room gone from Redis: what its expiry, or a restart without
    persistence, leaves of it. One DEL (the room's keys share a slot), as a restart
    loses them at once: deleted one by one, a write of the room's node between two
    (a lobby's deal_chosen) restored its version and chain from the stream left."""
    keys = await room_keys(store, room_id)
    if keys:
        await store._redis.delete(*keys)


def pairs(events: list[StoredEvent]) -> list[tuple[int, bytes]]:
    """``(version, data)`` of stored events, for comparisons."""
    return [(e.version, e.data) for e in events]


def triples(read: TailRead) -> list[tuple[str, int, bytes]]:
    """``(room, version, data)`` of tailed events, for comparisons."""
    return [(room, e.version, e.data) for room, e in read.entries]
