"""The store's clock (Store.time_ms): what every node sharing a store steers its race
clock toward (solrace.rooms.clock). The test Redis, cluster and embedded engine run on
this machine, so their clock is this machine's."""

from __future__ import annotations

import time

from solrace.store import Store


async def test_the_stores_clock_is_its_servers_in_unix_milliseconds(store: Store) -> None:
    readings = []
    for _ in range(3):
        before = time.time_ns() // 1_000_000
        reading = await store.time_ms()
        after = time.time_ns() // 1_000_000
        assert before - 5 <= reading <= after + 5, (before, reading, after)
        readings.append(reading)
    assert readings == sorted(readings)


async def test_the_clock_writes_nothing(store: Store) -> None:
    """Its key only routes the script (one master on a cluster): it is never written."""
    await store.time_ms()
    assert await store._redis.exists(store.keys.clock) == 0
