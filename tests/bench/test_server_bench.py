"""The server benchmark's load loop at a tiny scale: it starts its processes, races on
the embedded store, cleans up, and prints every figure docs/performance.md reports.

A smoke test, not a measurement: it checks the shape and sanity of the JSON (so a
refactor of the node cannot silently break the benchmark), not the numbers."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from solrace.bench import server as server_bench
from solrace.bench.server import FIND_MAX_STEPS, Window, _local_redis_pid, _paced, run

from tests.support.redis import REDIS_URL

SERVER_KEYS = {
    "server_cpu_us_per_move",
    "ratio",
    "moves_per_s",
    "p50_ms",
    "p99_ms",
    "max_moves_per_s",
    "rss_mb",
    "load_cpu_pct",
    "other_cpu_pct",
    "steal_pct",
    "server_wakeups_per_move",
}


def test_a_tiny_run_on_the_embedded_store_reports_every_figure() -> None:
    affinity = os.sched_getaffinity(0)
    began = time.monotonic()
    result = run(None, racers=4, rate=5.0, seconds=2.0, warmup=0.5)
    assert time.monotonic() - began < 30
    assert os.sched_getaffinity(0) == affinity  # the load's pinning is undone
    assert result["benchmark"] == "server"
    assert result["loop"] == "uvloop"  # auto, as solrace-server: the echo's loop is the node's
    assert result["echo_cpu_us_per_rt"] is None or result["echo_cpu_us_per_rt"] >= 0
    assert result["echo"]["ops_per_s"] > 5  # 4 connections at 5/s for 2 s
    assert result["echo"]["after_cpu_us_per_rt"] > 0  # the echo again, after the servers
    embedded = result["embedded"]
    assert embedded.keys() >= SERVER_KEYS | {"engine_cpu_us_per_move"}
    assert embedded["engine_cpu_us_per_move"] > 0  # the valkey-server child's own CPU
    assert embedded["moves_per_s"] > 5
    assert 0 < embedded["p50_ms"] <= embedded["p99_ms"] < 1000
    assert embedded["max_moves_per_s"] is None  # --find-max was not asked for
    assert 10 < embedded["rss_mb"] < 2000
    assert 0 <= embedded["load_cpu_pct"] < 100
    # what else the machine ran: together with the node, its engine and the load, no
    # more than every core can give (a share computed twice or unsubtracted exceeds it)
    cores = 100 * (os.cpu_count() or 1)
    assert -5 <= embedded["other_cpu_pct"] <= cores + 5
    assert 0 <= embedded["steal_pct"] <= cores  # the host's share (0 on bare metal)
    # a node and an echo that wait for their input sleep (and wake) at least now and then
    assert embedded["server_wakeups_per_move"] > 0 and result["echo"]["wakeups_per_op"] > 0
    assert 0 <= result["echo"]["steal_pct"] <= cores
    engine_pct = embedded["engine_cpu_us_per_move"] * embedded["moves_per_s"] / 1e4
    used = embedded["server_cpu_pct"] + embedded["load_cpu_pct"] + embedded["other_cpu_pct"]
    assert used + engine_pct + embedded["steal_pct"] <= cores + 10


def test_find_max_lists_every_step_it_climbed_and_what_each_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A load far below any node's ceiling passes every step: ``max_moves_per_s`` is the
    last step's rate, and ``find_max`` lists each step with the CPU shares that tell
    what would have bounded it (node, load, engine, the rest of the machine). Three
    steps rather than the ten of a real climb (each starts its own races).

    What is tested is the climb's bookkeeping, not the latency: a step's window is
    0.6 s, a dozen moves, so its p99 is its slowest move, and one fsync of the embedded
    engine (every write is in its append-only file before the reply) took more than
    the 50 ms limit on a CI machine (docs/performance.md, round 10). So the limit is
    raised here, for this test only; the benchmark itself keeps it."""
    assert FIND_MAX_STEPS[0] == 1.0  # the default run is the first step
    limit_ms = 1000.0
    monkeypatch.setattr(server_bench, "FIND_MAX_STEPS", (1.0, 1.5, 3.0))
    monkeypatch.setattr(server_bench, "MAX_P99_MS", limit_ms)
    result = run(None, racers=4, rate=5.0, seconds=0.6, warmup=0.2, find_max=True)
    embedded = result["embedded"]
    climb = embedded["find_max"]
    assert [step["x"] for step in climb] == [1.0, 1.5, 3.0]
    for step in climb:
        assert step.keys() == {
            "x",
            "moves_per_s",
            "p99_ms",
            "server_cpu_pct",
            "load_cpu_pct",
            "other_cpu_pct",
            "steal_pct",
            "engine_cpu_pct",
        }
        assert step["p99_ms"] <= limit_ms
    # the rate follows the steps: 4 racers at 5 moves/s × x (offered ×3; taken less
    # when the engine's fsync stalls the racers, each waiting for its reply: 1.4×
    # seen in CI, while a climb that did not raise the rate would stay near 1×)
    assert climb[-1]["moves_per_s"] > 1.25 * climb[0]["moves_per_s"]
    assert embedded["max_moves_per_s"] == max(step["moves_per_s"] for step in climb)
    assert climb[0]["moves_per_s"] == embedded["moves_per_s"]  # step 1 is the default run


def _threads_cores(pid: int) -> dict[int, set[int]]:
    return {int(t): os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{pid}/task")}


def test_the_store_runs_on_the_loads_core_and_goes_back_afterwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis (here, on this machine) runs on the load's core while the node is measured,
    not on the node's; afterwards every Redis thread is back on the cores it had. The
    embedded engine, the node's own child, runs on the load's core too."""
    pid = asyncio.run(_local_redis_pid(REDIS_URL))
    assert pid is not None, "the test Redis should be a local redis-server"
    before = _threads_cores(pid)
    cpus = sorted(os.sched_getaffinity(0))
    load_core = {cpus[1]} if len(cpus) > 1 else None  # one core: nothing is pinned
    seen: list[dict[int, set[int]]] = []
    figures = server_bench._server_figures

    async def spy(*args: object, **kw: object) -> dict[str, object]:
        seen.append(_threads_cores(pid))
        return await figures(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(server_bench, "_server_figures", spy)
    result = run(REDIS_URL, racers=4, rate=5.0, seconds=0.6, warmup=0.2)
    assert result["store_pinned"] is (load_core is not None)
    assert result["embedded"]["store_pinned"] is (load_core is not None)
    on_load = {tid: load_core or before[tid] for tid in before}
    assert seen[0] == on_load  # the Redis run: on the load's core
    assert seen[1] == before  # the embedded run: Redis is back already
    assert _threads_cores(pid) == before


async def _first_sends(aligned: bool, racers: int = 20) -> list[float]:
    window = Window(aligned=aligned)
    loop = asyncio.get_running_loop()
    sent: list[float] = []

    async def act() -> tuple[bool, float]:
        sent.append(loop.time())
        return False, 0.0  # one send each

    await asyncio.gather(*(_paced(0.5, window, act) for _ in range(racers)))
    return sent


async def test_the_latency_kept_is_the_round_trip_not_the_racers_own_time() -> None:
    """A racer that takes 30 ms to choose its move and whose reply came 2 ms after
    its frame was written records 2 ms: the server's round trip, not the load's."""
    window = Window(measuring=True)
    calls = 0

    async def act() -> tuple[bool, float]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.03)  # choosing the move, waiting for the task to wake
        return calls < 3, 0.002

    await _paced(0.001, window, act)
    assert window.latencies == [0.002, 0.002]


async def test_racers_send_at_a_random_phase_unless_aligned() -> None:
    """A random phase spreads 20 racers' sends over their interval (one wake-up of the
    server per move); --aligned makes them one burst (one wake-up for all)."""
    spread = await _first_sends(aligned=False)
    assert max(spread) - min(spread) > 0.05
    burst = await _first_sends(aligned=True)
    assert max(burst) - min(burst) < 0.02


async def test_a_round_trip_in_flight_when_the_window_opens_is_not_counted() -> None:
    """The load collects its garbage just before the window opens, stalling its own loop;
    a round trip that began before the window (and waited out that stall) is the load's
    pause, not the server's latency, and one that ends after it closes is not counted
    either."""
    window = Window()
    calls = 0

    async def act() -> tuple[bool, float]:
        nonlocal calls
        calls += 1
        if calls == 1:
            window.measuring = True  # the window opens while this one is in flight
            return True, 0.040
        if calls == 3:
            window.measuring = False  # and closes while this one is
            return True, 0.050
        return calls < 4, 0.002

    await _paced(0.001, window, act)
    assert window.latencies == [0.002]
