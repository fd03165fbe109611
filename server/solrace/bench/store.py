"""Store benchmark: the cost of a move append written alone vs. in a group commit.

Appends run against real Redis (``--redis-url``, default redis://127.0.0.1:6379/0)
under a throw-away key prefix that is deleted afterwards. ``sequential`` awaits each
append before the next (one round trip per move); ``grouped_50`` keeps 50 racers'
appends in flight at once, which the store's group commit sends as shared pipelines.
CPU time per move is measured with ``process_time`` so a noisy machine matters less;
wall time is reported too.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import redis.asyncio

from solrace.store import Store


async def _run(url: str, moves: int, concurrency: int) -> dict[str, float]:
    prefix = f"solrace-bench:{uuid.uuid4().hex}:"
    store = await Store.connect(url, prefix=prefix)
    room = "bench"
    await store.create_room(room, "BENCH" + uuid.uuid4().hex[:4], b"{}", False, 0)
    per_racer = moves // concurrency

    async def racer(r: int) -> None:
        for seq in range(per_racer):
            await store.append_move(room, f"1:{r}", seq, b"\x92\xa3D\x00", b"\x81\xa1t\xa1p")

    flushes_before = store.flushes
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(racer(r) for r in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    done = per_racer * concurrency
    flushes = store.flushes - flushes_before
    await store.close()
    client = redis.asyncio.from_url(url)
    keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()
    return {
        "moves": done,
        "cpu_us_per_move": round(cpu / done * 1e6, 1),
        "wall_us_per_move": round(wall / done * 1e6, 1),
        "moves_per_flush": round(done / max(1, flushes), 1),
    }


def run(url: str, moves: int = 5000) -> dict[str, Any]:
    async def both() -> dict[str, Any]:
        return {
            "benchmark": "store",
            "sequential": await _run(url, moves // 5, 1),
            "grouped_50": await _run(url, moves, 50),
        }

    return asyncio.run(both())
