"""Server benchmark: what a move costs ``solrace-server`` next to a bare echo round trip.

Why this shape (issue 9): a node's CPU per accepted move only means something next to
the floor every WebSocket server pays, so one run measures both under the same paced
load. A bare websockets + msgpack echo server (a subprocess running this module) and
``solrace-server`` (on real Redis under a throw-away key prefix, then on its embedded
engine in a throw-away data directory) each run alone, pinned to one core where the OS
allows; the load generator runs in this process pinned to the other core and reports its
own CPU, so it is visibly not the bottleneck. The store — the machine's Redis when it runs
here and may be pinned, or the embedded engine — runs on the load's core for the run
(``store_pinned`` in the JSON), and Redis goes back where it was afterwards: left free,
the scheduler ran Redis on the node's core whenever the node woke it, and the node then
waited for Redis to finish its batch, which pushed the climb's p99 over its limit long
before the node's core was full (round 11 of docs/performance.md).

The load: ``racers`` racers in rooms of 4 (``deals: "random"`` so no solver runs,
``private: true``), one spectator per room; each racer sends a move every
``1/rate`` seconds, chosen from the legal moves of its own board view
(:func:`solrace_client.boardview.board_from_view`), never undo. A racer whose game ends
(won, stuck, refused) stops. Server CPU comes from the scheduler's clock
(``/proc/<pid>/task/*/schedstat``, :func:`_cpu_s`) over the measured window; latency
is the time from sending a move to its ``moved`` ack. On the embedded engine the node's
figures stay the node's own, and the engine's CPU (the valkey-server child, named by
``DATA_DIR/engine.pid``) is reported next to them (``engine_cpu_us_per_move``):
together they are what one machine pays per move. On real Redis, Redis's CPU is not
measured (the machine's Redis is shared with other runs).

The echo runs once more after the servers (``echo.after_cpu_us_per_rt``): the same
work before and after says whether the machine's own speed moved during the run.

The echo, the node and the load all run on one event loop, ``loop`` (default ``auto``:
uvloop where installed, as ``solrace-server`` does: ``solrace.net.main.run_on_loop``), named in
the JSON: the ratio then compares the node's code with the echo's, not two loops.

``echo_main`` is the echo server: ``python -m solrace.bench.server <port> [<loop>]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

import msgpack  # the bare echo's, as any websockets + msgpack server would
from solrace_client import ServerError
from solrace_client.boardview import board_from_view
from websockets.asyncio.server import ServerConnection, serve

from solrace.net.main import AUTO, resolve_loop, run_on_loop, tune_gc
from solrace.orphans import death_signal
from solrace.protocol import Envelope, encode
from solrace.protocol._msgpack import unpack_trusted
from solrace.protocol.limits import SUBPROTOCOL
from solrace.store.embedded import PID_NAME

from . import stopping
from .failed import RunFailed
from .runkeys import BENCH_FAMILY, delete_prefix, part, run_prefix
from .wire import WireClient

ROOM_SIZE = 4
#: Target of ``max_moves_per_s``: the highest load whose ack p99 stays within this.
MAX_P99_MS = 50.0
#: Load multipliers tried by ``--find-max`` (stops at the first whose p99 is over):
#: quarter steps up to twice the default load, where a node saturates on the 2-core
#: machines of docs/performance.md (doubling alone reported the default load itself
#: for a node that carried 1.25 times it), half steps to three times, where the whole
#: 2-core machine (node, load and Redis) is full on the slower ones, then larger ones
#: (with the store off the node's core, ×8 passed on the machine of round 11).
FIND_MAX_STEPS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0)
STARTUP_TIMEOUT_S = 20.0
#: Pause between the load's own garbage collection and the measuring window: that
#: collection stalled the load's loop for 25-42 ms at 1.5 x the default load (gen-2,
#: measured with gc.callbacks), and the round trips it held up were counted as the
#: server's: over 1 % of a 10 s window at that rate, enough to move p99 from under
#: 10 ms to 40-100 ms from one run to the next.
SETTLE_S = 0.5
STOP_TIMEOUT_S = 5.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------- processes
def _free_port() -> int:
    """A loopback port nobody listens on now (the child binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cores() -> tuple[set[int] | None, set[int] | None]:
    """(child core, load core), or (None, None) where pinning is impossible: one CPU,
    or no ``sched_setaffinity`` (not Linux)."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return {cpus[0]}, {cpus[1]}


@contextlib.contextmanager
def _pinned(pid: int | None, core: set[int] | None) -> Iterator[bool]:
    """Every thread of process ``pid`` (the store) on ``core`` meanwhile, then back on
    the cores it had; yields whether it could be pinned (not without a pid or a core,
    nor a process this user may not move — then no thread of it is moved at all)."""
    before: dict[int, set[int]] = {}

    def put_back() -> None:
        for tid, cpus in before.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)

    pinned = False
    if pid is not None and core is not None:
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                before[int(task)] = os.sched_getaffinity(int(task))
                os.sched_setaffinity(int(task), core)
            pinned = True
        except OSError:  # not ours to move, or it ended: not half pinned either
            put_back()
    try:
        yield pinned
    finally:
        put_back()


async def _local_redis_pid(redis_url: str) -> int | None:
    """The process of the Redis at ``redis_url`` if it runs on this machine (a plain
    ``redis://`` loopback URL, whose ``INFO`` names a Redis or Valkey server process
    here), else None — also when it cannot tell (a cluster URL, ``INFO`` refused):
    the store then stays where it is."""
    import redis.asyncio
    from redis.exceptions import RedisError

    url = urlparse(redis_url)
    if url.scheme != "redis" or url.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    client = redis.asyncio.from_url(redis_url)
    try:
        pid = int((await client.info("server"))["process_id"])
    except (RedisError, KeyError, ValueError):
        return None
    finally:
        await client.aclose()
    try:
        name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8")
    except OSError:
        return None
    return pid if "redis" in name or "valkey" in name else None


def _cpu_s(pid: int) -> float:
    """CPU time of ``pid`` (all its threads) in seconds, from the scheduler's own clock
    (/proc/<pid>/task/*/schedstat, nanoseconds). utime + stime are sampled per clock
    tick (10 ms): too coarse for a small process in a short run (the embedded engine of
    a tiny run used less than a tick and read 0). Without schedstat, utime + stime."""
    if not os.path.exists(f"/proc/{pid}/schedstat"):
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    return sum(int(text.split()[0]) for text in _per_thread(pid, "schedstat")) / 1e9


def _per_thread(pid: int, name: str) -> Iterator[str]:
    """The text of /proc/<pid>/task/*/``name`` for each thread still there."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with (
            contextlib.suppress(FileNotFoundError, ProcessLookupError),  # a thread ended
            open(f"/proc/{pid}/task/{task}/{name}", encoding="ascii") as f,
        ):
            yield f.read()


#: Index of ``steal`` among the fields of /proc/stat's ``cpu`` line.
STEAL_FIELD = 7


def _sleeps(pid: int) -> int:
    """Times ``pid`` (all its threads) went to sleep waiting for something — voluntary
    context switches (/proc/<pid>/task/*/status) — and so woke again: on these VMs
    the same code costs a process that sleeps between requests about twice the CPU
    (docs/performance.md, round 12), so how often the node and the echo slept says how
    much of their CPU per move is that. (A busier process batches more per wake-up:
    the count moves with the machine's speed too.)"""
    return sum(
        int(line.split()[1])
        for text in _per_thread(pid, "status")
        for line in text.splitlines()
        if line.startswith("voluntary_ctxt_switches:")
    )


def _machine_busy_s() -> tuple[float, float]:
    """CPU seconds every core of the machine spent busy so far, and of those the
    seconds the hypervisor ran something else while a core had work (``steal``;
    /proc/stat), so a run can say how much of the machine its own processes did not
    use: another workload on the server's pinned core, or a virtual machine's host,
    inflates latency without showing in the node's CPU."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    steal = fields[STEAL_FIELD] if len(fields) > STEAL_FIELD else 0
    return (sum(fields[:8]) - idle) / CLK_TCK, steal / CLK_TCK


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


@contextlib.contextmanager
def _child(argv: list[str], port: int, core: set[int] | None) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv``, pin it, wait until ``port`` accepts; always stop it (SIGTERM,
    then SIGKILL after ``STOP_TIMEOUT_S``: bench/stopping.py, which stops it too if this
    stop is cut short) so no run leaves a process behind — and it gets SIGTERM if the
    benchmark dies (SIGKILL). It runs in a session of its own: a Ctrl-C reaches only the
    benchmark, which stops it here, instead of every server in the terminal's process
    group printing its own KeyboardInterrupt."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=death_signal(signal.SIGTERM),
    )
    with stopping.tracked(proc, STOP_TIMEOUT_S):
        if core is not None:
            os.sched_setaffinity(proc.pid, core)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RunFailed(f"{argv[2:]} exited with {proc.returncode}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RunFailed(f"{argv[2:]} did not listen within {STARTUP_TIMEOUT_S} s")
            time.sleep(0.05)
        yield proc


# ------------------------------------------------------------------ load
@dataclass(frozen=True)
class Load:
    """The paced load of one run: ``racers`` in rooms of four (and a spectator each),
    each sending a move every ``1 / rate`` s, measured for ``seconds`` after
    ``warmup``; ``aligned``: see :class:`Window`."""

    racers: int
    rate: float
    seconds: float
    warmup: float
    aligned: bool = False


@dataclass
class Window:
    """What the racers record while ``measuring`` (the window after warm-up)."""

    measuring: bool = False
    #: Every racer sends at the same instants (``--aligned``) instead of at a random
    #: phase: arrivals come in bursts, so a server wakes once per burst, not per move.
    aligned: bool = False
    latencies: list[float] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


#: What one paced action reports: whether to go on, and the round trip it measured
#: (from just before its frame was written to the socket until its reply was read
#: from it, in seconds).
Act = Callable[[], Awaitable[tuple[bool, float]]]


async def _paced(interval: float, window: Window, act: Act) -> None:
    """Call ``act`` every ``interval`` s (random phase, so racers do not send in
    lock-step) until ``window.stop`` or ``act`` says to stop; a late racer does not
    burst to catch up, so the offered load never exceeds the target. The latency kept
    is the one ``act`` measured: the server's round trip, not the racer's own time to
    choose its move or the wake-up of its task after the reply was read; and only for
    an action that began and ended inside the measuring window."""
    loop = asyncio.get_running_loop()
    due = loop.time() + (0.0 if window.aligned else random.uniform(0, interval))
    while not window.stop.is_set():
        delay = due - loop.time()
        if delay > 0:
            # A plain sleep (at most one interval), then a look at the stop flag:
            # waiting on the stop event with a timeout made a task per move, about 5 %
            # of the load's samples at three times the default load (py-spy; round 11
            # of docs/performance.md).
            await asyncio.sleep(delay)
            if window.stop.is_set():
                return
        else:
            due = loop.time()
        due += interval
        # Only a round trip wholly inside the window counts: one in flight when it
        # opened also waited out whatever the load did just before (its collection).
        counted = window.measuring
        go_on, latency = await act()
        if not go_on:
            return
        if counted and window.measuring:
            window.latencies.append(latency)


def _pick(view: dict[str, Any] | None) -> str | None:
    """A random legal move of the racer's own board view (never undo), or None."""
    if view is None:
        return None
    moves = board_from_view(view).legal_moves()
    return str(random.choice(moves)) if moves else None


class _LeanRacer:
    """One load connection that does only what the load needs: send requests, match
    replies, keep its own board. Frames are read with plain msgpack — no envelope
    checks, no room fold — straight from the socket's read callback
    (:class:`~solrace.bench.wire.WireClient`), because the load generator must not be
    the bottleneck (a :class:`RaceClient` per connection, checking and folding every
    frame, used 80 % of the load's core at twice the default rate). The server is what
    is measured."""

    def __init__(self) -> None:
        self.conn: WireClient | None = None
        self.board: dict[str, Any] | None = None
        self.racer: int | None = None
        self.started = asyncio.Event()
        self._ids = iter(range(1, 1 << 62))
        self._pending: dict[int, asyncio.Future[tuple[dict[str, Any], float]]] = {}

    @classmethod
    async def connect(cls, url: str) -> _LeanRacer:
        racer = cls()
        racer.conn = await WireClient.connect(url, racer._message, [SUBPROTOCOL])
        return racer

    def _message(self, frame: bytes) -> None:
        read = time.perf_counter()
        msg = cast("dict[str, Any]", unpack_trusted(frame))
        t, d = msg.get("t"), msg.get("d") or {}
        future = self._pending.pop(msg.get("id") or 0, None)
        if t == "moved":
            self.board = d["board"]
        elif t == "board" and d.get("racer") == self.racer and self.racer is not None:
            self.board = d["view"]
            self.started.set()
        if future is not None and not future.done():
            future.set_result((msg, read))

    async def ask(self, t: str, **d: Any) -> dict[str, Any]:
        """Send request ``t``; its reply's data (a refusal raises ServerError)."""
        return (await self.timed_ask(t, **d))[0]

    async def timed_ask(self, t: str, **d: Any) -> tuple[dict[str, Any], float]:
        """:meth:`ask`, with the round trip: from its frame written to the socket to
        its reply read from it, in seconds."""
        assert self.conn is not None
        request_id = next(self._ids)
        future: asyncio.Future[tuple[dict[str, Any], float]]
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        frame = encode(Envelope(t, id=request_id, d=d))
        sent = time.perf_counter()
        self.conn.send(frame)
        async with asyncio.timeout(STARTUP_TIMEOUT_S):  # no task per request, as wait_for
            reply, read = await future
        if reply.get("t") == "error":
            raise ServerError(reply.get("d") or {})
        data: dict[str, Any] = reply.get("d") or {}
        return data, read - sent

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


async def _race_room(
    url: str, room: int, size: int, interval: float, window: Window, started: asyncio.Event
) -> None:
    """One room: ``size`` racers and a spectator; plays until ``window.stop``."""
    clients = [await _LeanRacer.connect(url) for _ in range(size + 1)]
    try:
        host, *guests = clients[:size]
        made = await host.ask(
            "create", variant="yukon", name=f"r{room}a", deals="random", private=True
        )
        host.racer, code = made["racer"], made["snapshot"]["code"]
        for i, guest in enumerate(guests):
            guest.racer = (await guest.ask("join", code=code, name=f"r{room}{i}"))["racer"]
        await clients[size].ask("watch", code=code)
        for racer in clients[:size]:
            await racer.ask("ready", ready=True)
        for racer in clients[:size]:
            await asyncio.wait_for(racer.started.wait(), STARTUP_TIMEOUT_S)
        started.set()

        def mover(racer: _LeanRacer) -> Act:
            seq = iter(range(1 << 62))

            async def act() -> tuple[bool, float]:
                move = _pick(racer.board)
                if move is None:
                    return False, 0.0
                try:
                    reply, rtt = await racer.timed_ask("move", seq=next(seq), move=move)
                except ServerError:
                    return False, 0.0
                return reply.get("status") == "playing", rtt

            return act

        await asyncio.gather(*(_paced(interval, window, mover(r)) for r in clients[:size]))
        await window.stop.wait()
        # End the race as players do, so that the node is done with the room: a room
        # whose racers only vanish runs on (timers, state) until their grace ends, and
        # with --find-max each step's rooms would still weigh on the next step's.
        await asyncio.gather(
            *(asyncio.wait_for(r.ask("leave"), STOP_TIMEOUT_S) for r in clients[:size]),
            return_exceptions=True,
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


async def _echo_room(url: str, size: int, interval: float, window: Window) -> None:
    """The echo run's room: the same connections and the same paced move frames."""
    replies: list[asyncio.Future[float] | None] = [None] * (size + 1)

    def on_reply(i: int) -> Callable[[bytes], None]:
        def got(frame: bytes) -> None:
            future = replies[i]
            if future is not None and not future.done():
                future.set_result(time.perf_counter())

        return got

    conns = [await WireClient.connect(url, on_reply(i)) for i in range(size + 1)]
    try:

        def sender(i: int) -> Act:
            ids = iter(range(1, 1 << 62))

            async def act() -> tuple[bool, float]:
                n = next(ids)
                future = replies[i] = asyncio.get_running_loop().create_future()
                frame = encode(Envelope("move", id=n, d={"seq": n, "move": "4:3>1"}))
                sent = time.perf_counter()
                conns[i].send(frame)
                async with asyncio.timeout(STARTUP_TIMEOUT_S):
                    read = await future
                return True, read - sent

            return act

        await asyncio.gather(*(_paced(interval, window, sender(i)) for i in range(size)))
    finally:
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


async def _drive(
    url: str,
    pid: int,
    load: Load,
    echo: bool,
    engine_pid: int | None = None,
) -> dict[str, Any]:
    """Run the load against the server at ``url`` (process ``pid``, and its embedded
    engine ``engine_pid`` if any) and measure it."""
    window = Window(aligned=load.aligned)
    interval = 1.0 / load.rate
    rooms = max(1, load.racers // ROOM_SIZE)
    size = min(ROOM_SIZE, load.racers)
    tasks: list[asyncio.Task[None]] = []
    started = [asyncio.Event() for _ in range(rooms)]
    for r in range(rooms):
        coro = (
            _echo_room(url, size, interval, window)
            if echo
            else _race_room(url, r, size, interval, window, started[r])
        )
        tasks.append(asyncio.create_task(coro))
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not echo and not all(e.is_set() for e in started):
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise RunFailed("a room could not start its race") from task.exception()
            if time.monotonic() > deadline:
                ready = sum(e.is_set() for e in started)
                raise RunFailed(
                    f"rooms did not start within {STARTUP_TIMEOUT_S} s"
                    f" ({ready} of {rooms} had started)"
                )
            await asyncio.sleep(0.05)
        await asyncio.sleep(load.warmup)
        # The load's own collector pauses must not count as server latency: collect
        # now, then not at all while measuring (its garbage is acyclic, freed as it goes).
        # The collection stalls the load's loop for tens of milliseconds: let the moves
        # it held up and the late ones it bunched go through before the window opens.
        tune_gc()
        gc.disable()
        await asyncio.sleep(SETTLE_S)
        cpu0, load0, wall0 = _cpu_s(pid), time.process_time(), time.perf_counter()
        sleeps0 = _sleeps(pid)
        busy0 = _machine_busy_s()
        engine0 = _cpu_s(engine_pid) if engine_pid is not None else 0.0
        window.measuring = True
        await asyncio.sleep(load.seconds)
        window.measuring = False
        gc.enable()
        cpu, load_cpu = _cpu_s(pid) - cpu0, time.process_time() - load0
        sleeps = _sleeps(pid) - sleeps0
        busy1 = _machine_busy_s()
        busy, steal = busy1[0] - busy0[0], busy1[1] - busy0[1]
        engine = _cpu_s(engine_pid) - engine0 if engine_pid is not None else None
        wall = time.perf_counter() - wall0
        rss = _rss_mb(pid)
    finally:
        gc.enable()
        window.stop.set()
        _, pending = await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    count = len(window.latencies)
    return {
        "cpu_us_per_op": round(cpu / count * 1e6, 1) if count else None,
        "wakeups_per_op": round(sleeps / count, 2) if count else None,
        "engine_cpu_us_per_op": (
            round(engine / count * 1e6, 1) if engine is not None and count else None
        ),
        "ops_per_s": round(count / wall, 1),
        "p50_ms": _pct(window.latencies, 0.50),
        "p99_ms": _pct(window.latencies, 0.99),
        "rss_mb": rss,
        "load_cpu_pct": round(load_cpu / wall * 100, 1),
        "server_cpu_pct": round(cpu / wall * 100, 1),
        # Everything else the machine ran meanwhile (Redis, its engine, other work), in
        # % of one core: high means the figures were taken on a busy machine.
        "other_cpu_pct": round((busy - steal - cpu - load_cpu - (engine or 0.0)) / wall * 100, 1),
        # The host's share of the machine's cores meanwhile (a VM's steal time), in %
        # of one core: what no process here was charged for, yet did not run.
        "steal_pct": round(steal / wall * 100, 1),
    }


async def _server_figures(
    argv: list[str],
    core: set[int] | None,
    load: Load,
    find_max: bool,
    echo_us: float | None,
    data_dir: Path | None = None,
    store_core: set[int] | None = None,
) -> dict[str, Any]:
    """One ``solrace-server`` run (and, with ``find_max``, its load steps); with
    ``data_dir``, on its embedded engine there, whose CPU is measured too and which
    runs on ``store_core``."""
    port = _free_port()
    url = f"ws://127.0.0.1:{port}"
    if data_dir is not None:
        argv = [*argv, "--data-dir", str(data_dir)]
    with contextlib.ExitStack() as stack:
        proc = stack.enter_context(_child([*argv, "--port", str(port)], port, core))
        engine = int((data_dir / PID_NAME).read_text()) if data_dir is not None else None
        engine_pinned = stack.enter_context(_pinned(engine, store_core))
        got = await _drive(url, proc.pid, load, False, engine)
        best: float | None = None
        climb: list[dict[str, Any]] = []
        if find_max:
            for step in FIND_MAX_STEPS:
                at = (
                    got
                    if step == 1.0
                    else await _drive(
                        url, proc.pid, replace(load, rate=load.rate * step), False, engine
                    )
                )
                climb.append(_step_figures(step, at))
                if at["p99_ms"] is None or at["p99_ms"] > MAX_P99_MS:
                    break
                best = max(best or 0.0, at["ops_per_s"])
    us = got["cpu_us_per_op"]
    figures: dict[str, Any] = {
        "server_cpu_us_per_move": us,
        "ratio": round(echo_us / us, 3) if echo_us and us else None,
        "moves_per_s": got["ops_per_s"],
        "p50_ms": got["p50_ms"],
        "p99_ms": got["p99_ms"],
        "max_moves_per_s": best,
        "rss_mb": got["rss_mb"],
        "server_cpu_pct": got["server_cpu_pct"],
        "load_cpu_pct": got["load_cpu_pct"],
        "other_cpu_pct": got["other_cpu_pct"],
        "steal_pct": got["steal_pct"],
        "server_wakeups_per_move": got["wakeups_per_op"],
    }
    if engine is not None:
        figures["engine_cpu_us_per_move"] = got["engine_cpu_us_per_op"]
        figures["store_pinned"] = engine_pinned
    if find_max:
        figures["find_max"] = climb
    return figures


def _step_figures(step: float, at: dict[str, Any]) -> dict[str, Any]:
    """One step of ``--find-max``, enough to tell what bounded the climb: the node's
    core (``server_cpu_pct`` near 100), the load's, or the whole machine (the three CPU
    shares, with the embedded engine's, near 100 × the cores)."""
    figures = {
        "x": step,
        "moves_per_s": at["ops_per_s"],
        "p99_ms": at["p99_ms"],
        "server_cpu_pct": at["server_cpu_pct"],
        "load_cpu_pct": at["load_cpu_pct"],
        "other_cpu_pct": at["other_cpu_pct"],
        "steal_pct": at["steal_pct"],
    }
    if at["engine_cpu_us_per_op"] is not None:
        engine_pct = at["engine_cpu_us_per_op"] * at["ops_per_s"] / 1e4
        figures["engine_cpu_pct"] = round(engine_pct, 1)
    return figures


async def _echo_figures(load: Load, loop: str, core: set[int] | None) -> dict[str, Any]:
    """One run of the bare echo server (a child on ``core``) under ``load``."""
    port = _free_port()
    echo_argv = [sys.executable, "-m", "solrace.bench.server", str(port), loop]
    with _child(echo_argv, port, core) as proc:
        return await _drive(f"ws://127.0.0.1:{port}", proc.pid, load, echo=True)


async def _run(
    redis_url: str | None, load: Load, find_max: bool, loop: str, run_keys: str
) -> dict[str, Any]:
    child_core, load_core = _cores()
    before = os.sched_getaffinity(0) if load_core is not None else None
    if load_core is not None:
        os.sched_setaffinity(0, load_core)
    try:
        echo = await _echo_figures(load, loop, child_core)
        echo_us = echo["cpu_us_per_op"]
        # Every connection may send a move every 1/rate s plus its requests to set up;
        # the limit must never close a benchmark connection (it is not what is measured).
        limit = max(100.0, load.rate * 4 * max(FIND_MAX_STEPS))
        server = [
            sys.executable,
            "-m",
            "solrace.net.main",
            "--host",
            "127.0.0.1",
            # Warnings too: a node's trouble (Redis failing, a slow client dropped)
            # shows on the benchmark's stderr when a run goes wrong (docs/performance.md).
            "--log-level",
            "warning",
            "--rate-per-s",
            f"{limit:g}",
            "--rate-burst",
            f"{limit:g}",
            "--loop",
            loop,
        ]
        result: dict[str, Any] = {
            "benchmark": "server",
            "racers": load.racers,
            "rate_per_racer": load.rate,
            "room_size": min(ROOM_SIZE, load.racers),
            "seconds": load.seconds,
            "aligned": load.aligned,
            "loop": loop,
            "pinned": child_core is not None,
            "echo_cpu_us_per_rt": echo_us,
            "echo": {
                k: echo[k]
                for k in (
                    "wakeups_per_op",
                    "ops_per_s",
                    "p50_ms",
                    "p99_ms",
                    "load_cpu_pct",
                    "other_cpu_pct",
                    "steal_pct",
                )
            },
        }
        if redis_url is not None:
            prefix = part(run_keys, "server")
            try:
                with _pinned(await _local_redis_pid(redis_url), load_core) as redis_pinned:
                    on_redis = await _server_figures(
                        [*server, "--redis-url", redis_url, "--key-prefix", prefix],
                        child_core,
                        load,
                        find_max,
                        echo_us,
                    )
            finally:
                await delete_prefix(redis_url, prefix)
            result.update(on_redis)
            result["store_pinned"] = redis_pinned
        with tempfile.TemporaryDirectory(prefix="solrace-bench-") as data:
            result["embedded"] = await _server_figures(
                server, child_core, load, find_max, echo_us, Path(data), load_core
            )
        # The echo again, last: the same work measured before and after the servers
        # says how much the machine's own speed moved meanwhile (on the VMs of
        # docs/performance.md, by a third from one run to the next).
        after = await _echo_figures(load, loop, child_core)
        result["echo"]["after_cpu_us_per_rt"] = after["cpu_us_per_op"]
        return result
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)


def run(
    redis_url: str | None = "redis://127.0.0.1:6379/0",
    *,
    racers: int = 200,
    rate: float = 5.0,
    seconds: float = 20.0,
    warmup: float = 3.0,
    find_max: bool = False,
    aligned: bool = False,
    loop: str = AUTO,
    prefix: str | None = None,
) -> dict[str, Any]:
    """The benchmark's JSON object; ``redis_url=None`` skips the real-Redis run (its
    top-level figures are then absent and only ``embedded`` is measured). ``aligned``:
    see :class:`Window` (the default, a random phase per racer, is what users do).
    ``loop``: the event loop of the echo, the node and the load (``--loop`` of
    ``solrace-server``); raises ``ValueError`` for one that is not installed.
    ``prefix``: the run's key prefix (default a new one, bench/runkeys.py), under which
    the node on Redis keeps its keys."""
    load = Load(racers, rate, seconds, warmup, aligned)
    resolved = resolve_loop(loop)
    run_keys = prefix or run_prefix(BENCH_FAMILY)
    return run_on_loop(resolved, _run(redis_url, load, find_max, resolved, run_keys))


# ------------------------------------------------------------------ echo
async def _echo_serve(port: int) -> None:
    async def handler(ws: ServerConnection) -> None:
        async for frame in ws:
            await ws.send(msgpack.packb(msgpack.unpackb(frame)))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with serve(handler, "127.0.0.1", port, compression=None):
        await stop.wait()


def echo_main(port: int, loop: str = AUTO) -> int:
    """The baseline server: decode each msgpack frame and send it back, nothing else."""
    run_on_loop(loop, _echo_serve(port))
    return 0


if __name__ == "__main__":
    sys.exit(echo_main(int(sys.argv[1]), *sys.argv[2:3]))
