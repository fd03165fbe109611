"""Fixtures: every store test runs against real Redis AND the embedded engine.

The embedded engine is the real one ``solrace-server`` runs without a Redis URL (a
private valkey-server, AOF on), started per test on the test's own data directory
(about 20 ms to start and stop).

Real Redis comes from ``SOLRACE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``).
It is shared with other people's runs, so each test gets a random key prefix and
deletes exactly that prefix's keys afterwards (never FLUSHDB). If Redis is not there
the real-Redis tests fail loudly: a green run must mean the Lua ran on a real server.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from solrace.store import Store, StoredEvent

from tests.support.redis import REDIS_URL
from tests.support.redis import delete_prefix as _delete_prefix


@pytest.fixture(params=["redis", "embedded"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store: on real Redis under a random prefix, or on an embedded engine."""
    if request.param == "embedded":
        s = await Store.start_embedded(tmp_path / "engine", prefix="test:")
        try:
            yield s
        finally:
            await s.close()
        return
    prefix = f"solrace-test:{uuid.uuid4().hex}:"
    s = await Store.connect(REDIS_URL, prefix=prefix)
    if not await s.ping():
        await s.close()
        pytest.fail(f"real Redis is not reachable at {REDIS_URL} (set SOLRACE_TEST_REDIS_URL)")
    try:
        yield s
    finally:
        await s.close()
        await _delete_prefix(prefix)


@pytest.fixture
async def node2(store: Store) -> AsyncIterator[Store]:
    """A second "node": another Store on the same backend and prefix."""
    s = await store.sibling()
    try:
        yield s
    finally:
        await s.close()


async def room_keys(store: Store, room_id: str) -> dict[str, int]:
    """Every existing key of a room -> its PTTL (ms; -1 = no TTL)."""
    raw = store._redis
    pattern = store.keys.room(room_id).base.replace("{", "\\{").replace("}", "\\}") + "*"
    out: dict[str, int] = {}
    async for key in raw.scan_iter(match=pattern, count=1000):
        out[key.decode()] = int(await raw.pttl(key))
    return out


def pairs(events: list[StoredEvent]) -> list[tuple[int, bytes]]:
    """``(version, data)`` of stored events, for comparisons."""
    return [(e.version, e.data) for e in events]


def triples(entries: list[tuple[str, StoredEvent]]) -> list[tuple[str, int, bytes]]:
    """``(room, version, data)`` of tailed events, for comparisons."""
    return [(room, e.version, e.data) for room, e in entries]
