"""Store benchmark: the cost of a move append written alone vs. in a group commit, on
real Redis, on the embedded engine and on the fakeredis test double.

Appends run against real Redis (``--redis-url``, default redis://127.0.0.1:6379/0)
under a throw-away key prefix, the run's (bench/runkeys.py), deleted afterwards, then
against the embedded engine (a private valkey-server in a throw-away data directory,
AOF fsynced on every write, as ``solrace-server`` runs it without a URL), then against
fakeredis when it is installed (the test extra). ``sequential`` awaits each append
before the next (one round trip per move); ``grouped_50`` keeps 50 racers' appends in
flight at once, which the store's group commit sends as shared pipelines.

CPU time per move is measured with ``process_time`` so a noisy machine matters less;
wall time is reported too. On fakeredis the Lua runs in this process, so its CPU is all
of the cost; on the embedded engine the engine's own CPU (``engine_cpu_us_per_move``,
from ``/proc/<pid>/stat``) is added to give ``total_cpu_us_per_move``, the figure to
compare with fakeredis. Redis's own CPU is not measured (a shared Redis).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import tempfile
import time
import uuid
from typing import Any

from solrace.store import Store

from .runkeys import BENCH_FAMILY, part, run_prefix

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


async def _run(store: Store, moves: int, concurrency: int) -> dict[str, float]:
    room = f"bench-{uuid.uuid4().hex[:8]}"
    await store.create_room(room, "BENCH" + uuid.uuid4().hex[:4], b"{}", False, 0)
    per_racer = moves // concurrency

    async def racer(r: int) -> None:
        for seq in range(per_racer):
            await store.append_move(
                room, f"1:{r}", seq, b"\x92\xa3D\x00", b"\x81\xa1t\xa1p", round_no=1
            )

    engine = store.engine.pid if store.engine is not None else None
    flushes_before = store.flushes
    engine0 = _cpu_s(engine) if engine is not None else 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(racer(r) for r in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    done = per_racer * concurrency
    flushes = store.flushes - flushes_before
    figures = {
        "moves": done,
        "cpu_us_per_move": round(cpu / done * 1e6, 1),
        "wall_us_per_move": round(wall / done * 1e6, 1),
        "moves_per_flush": round(done / max(1, flushes), 1),
    }
    if engine is not None:
        engine_cpu = _cpu_s(engine) - engine0
        figures["engine_cpu_us_per_move"] = round(engine_cpu / done * 1e6, 1)
        figures["total_cpu_us_per_move"] = round((cpu + engine_cpu) / done * 1e6, 1)
    return figures


async def _both(store: Store, moves: int) -> dict[str, Any]:
    return {
        "sequential": await _run(store, moves // 5, 1),
        "grouped_50": await _run(store, moves, 50),
    }


def run(url: str, moves: int = 5000, prefix: str | None = None) -> dict[str, Any]:
    """Redis figures at the top level (as before), then ``embedded`` and ``fake``.
    ``prefix``: the run's key prefix (default a new one, bench/runkeys.py)."""
    on_redis = part(prefix or run_prefix(BENCH_FAMILY), "store")

    async def every() -> dict[str, Any]:
        result: dict[str, Any] = {"benchmark": "store"}
        store = await Store.connect(url, prefix=on_redis)
        try:
            result.update(await _both(store, moves))
        finally:
            await store.delete_all()
            await store.close()
        with tempfile.TemporaryDirectory(prefix="solrace-bench-") as data:
            store = await Store.start_embedded(data)
            assert store.engine is not None
            result["embedded_start_ms"] = round(store.engine.start_ms, 1)
            try:
                result["embedded"] = await _both(store, moves)
            finally:
                await store.close()
        if importlib.util.find_spec("fakeredis") is not None:
            store = Store.fake()
            try:
                result["fake"] = await _both(store, moves)
            finally:
                await store.close()
        return result

    return asyncio.run(every())
