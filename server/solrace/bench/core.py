"""Room-core benchmark: what one move costs the room core, counted rather than timed.

Why (docs/performance.md, round 11): the server benchmark measures seconds on machines
whose speed moves by a third from one run to the next, so a change worth 5 % of a move
cannot show there, and the profile of a move is flat (some forty functions, none above
3 %). This benchmark drives the room core alone — a :class:`~solrace.rooms.node.Node` on
the real store (Redis, then the embedded engine), with fake peers and no sockets (the
wire's framing is what the echo of the server benchmark pays) — through a fixed script:
``rooms`` rooms of 4 racers and a spectator, the same deals every run (room secrets
from a counter), each racer playing the same random legal moves (seeded). Run under
valgrind's callgrind the script's cost is a count of instructions, which repeats
within about 1 % whatever else the machine does (not better: timer-driven work and
how many moves a group commit carries still vary; docs/performance.md, round 12):
``--callgrind`` runs it twice per setting (``SHORT_MOVES`` and ``moves`` moves a racer) and reports
``instructions_per_move``, the difference of the two counts over the difference of
the moves (start-up, imports and room set-up cancel out). ``cpu_us_per_move`` is the
plain run's process CPU over its moves, for orientation only.

Two regimes, as a node sees them:

- ``sequential``: one move at a time, each sent once the previous one is answered —
  no two moves share a group commit or an event-loop turn: a node at the server
  benchmark's default load, where moves rarely overlap;
- ``concurrent``: every racer's next move at once, round after round — a busy node,
  whose group commits carry many moves.

The child run is ``python -m solrace.bench.core STORE ROOMS MOVES REGIME [LINE_MOVES
[PREFIX]]`` (STORE a Redis URL or ``embedded``; LINE_MOVES how long the racers' lines are
worked out, see :func:`drive`; PREFIX its store's key prefix on Redis, under the run's:
bench/runkeys.py); it prints one JSON object.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, cast

from solrace.net.main import AUTO, LOOP, resolve_loop, run_on_loop
from solrace.orphans import death_signal
from solrace.protocol._msgpack import unpack_trusted
from solrace.protocol.envelope import Envelope
from solrace.protocol.views import RacerStatus
from solrace.race import RacerGame
from solrace.rooms import requests
from solrace.rooms.counters import Tally
from solrace.rooms.node import Node
from solrace.rooms.peer import Peer
from solrace.store import Store

from . import stopping
from .failed import RunFailed
from .runkeys import CORE_FAMILY, part, run_prefix
from .server import ROOM_SIZE  # rooms as the server benchmark's: 4 racers, a spectator

DEFAULT_ROOMS: Final = 10
DEFAULT_MOVES: Final = 40
#: Moves a racer plays in the shorter of the two callgrind runs of a setting.
SHORT_MOVES: Final = 10
REGIMES: Final = ("sequential", "concurrent")
EMBEDDED: Final = "embedded"
#: Lets the room timers of a started race settle before the measured moves.
SETTLE_S: Final = 0.3
#: How long a callgrind child asked to stop (SIGTERM) may take to clean up — its node,
#: its keys, its embedded engine, ~50 times slower under valgrind — before SIGKILL.
CALLGRIND_STOP_S: Final = 30.0


class _CountingPeer(Peer):
    """A connection that counts what it is sent and keeps the frames of a request
    being set up (moves are counted, not decoded: the decoding would be counted too)."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
        self.frames = 0
        self.sent_bytes = 0
        self.kept: list[bytes] | None = None
        self._ids = itertools.count(1)

    def send_bytes(self, frame: bytes) -> None:
        self.frames += 1
        self.sent_bytes += len(frame)
        if self.kept is not None:
            self.kept.append(frame)

    def close_later(self, code: int, reason: str) -> None:
        self.closed = True

    async def ask(self, t: str, **d: Any) -> dict[str, Any]:
        """Send a set-up request; its reply, decoded (an error reply raises)."""
        request_id = next(self._ids)
        self.kept = []
        await requests.handle(self.node, self, Envelope(t, id=request_id, d=d))
        frames, self.kept = self.kept, None
        for frame in frames:
            reply = cast("dict[str, Any]", unpack_trusted(frame))
            if reply.get("id") == request_id:
                if reply.get("t") == "error":
                    raise RunFailed(f"{t}: {reply.get('d')}")
                return reply
        raise RunFailed(f"{t}: no reply")

    async def move(self, seq: int, move: str) -> None:
        """Send a move; its reply is counted, not read (the run checks the node's
        count of accepted moves at the end)."""
        await requests.handle(
            self.node, self, Envelope("move", id=next(self._ids), d={"seq": seq, "move": move})
        )


def _secrets() -> Iterator[bytes]:
    """Room secrets from a counter: the same deals in every run."""
    for i in itertools.count():
        yield hashlib.sha256(b"solrace-bench-core:%d" % i).digest()


async def _open_store(where: str, data_dir: str, prefix: str) -> Store:
    if where == EMBEDDED:
        return await Store.start_embedded(data_dir, prefix=CORE_FAMILY)
    return await Store.connect(where, prefix=prefix)


async def _rooms(node: Node, rooms: int) -> tuple[list[_CountingPeer], list[_CountingPeer]]:
    """``rooms`` started races of ``ROOM_SIZE`` racers, each watched by a spectator:
    the racers, and every peer (spectators included)."""
    racers: list[_CountingPeer] = []
    everyone: list[_CountingPeer] = []
    for r in range(rooms):
        host = _CountingPeer(node)
        made = await host.ask("create", variant="yukon", name=f"r{r}h", deals="random")
        code = made["d"]["snapshot"]["code"]
        guests = [_CountingPeer(node) for _ in range(ROOM_SIZE - 1)]
        for i, guest in enumerate(guests):
            await guest.ask("join", code=code, name=f"r{r}g{i}")
        spectator = _CountingPeer(node)
        await spectator.ask("watch", code=code)
        for racer in (host, *guests):
            await racer.ask("ready", ready=True)
        racers += [host, *guests]
        everyone += [host, *guests, spectator]
    return racers, everyone


def _game(peer: Peer) -> RacerGame:
    """A fresh game of the racer's own deal."""
    room, _racer = peer.racer_room()
    settings = room.meta.settings
    return RacerGame(settings.variant, room.seed(), settings.options)


def random_line(game: RacerGame, moves: int, rng: random.Random) -> list[str]:
    """Up to ``moves`` random legal moves (never undo) from ``game``'s position, played
    on it. The first k moves are the same for every ``moves`` ≥ k (one draw a move)."""
    line: list[str] = []
    while len(line) < moves and game.status() == RacerStatus.PLAYING:
        move = str(rng.choice(game.board.legal_moves()))
        game.apply(move, 0)
        line.append(move)
    return line


async def drive(
    where: str,
    rooms: int,
    moves: int,
    regime: str,
    line_moves: int | None = None,
    prefix: str | None = None,
) -> dict[str, Any]:
    """One in-process run: set up, play the first ``moves`` moves of every racer's line,
    count. The lines are worked out ``line_moves`` (at least ``moves``) long: the two
    callgrind runs of a setting both work them out to the longer run's length, so that
    choosing the moves (the benchmark's own engine work, about 12 µs a move) cancels out
    of their difference and is not counted as the node's. ``prefix``: the store's key
    prefix on Redis (default one of a new run's, bench/runkeys.py)."""
    line_moves = max(moves, line_moves or 0)
    prefix = prefix or part(run_prefix(CORE_FAMILY), regime)
    with tempfile.TemporaryDirectory(prefix="solrace-bench-core-") as data_dir:
        store = await _open_store(where, data_dir, prefix)
        secrets = _secrets()
        node = Node(store, countdown_ms=0, room_secret=lambda: next(secrets))
        node.start()
        try:
            racers, everyone = await _rooms(node, rooms)
            await asyncio.sleep(SETTLE_S)
            lines = [
                random_line(_game(p), line_moves, random.Random(i)) for i, p in enumerate(racers)
            ]
            frames_before = sum(p.frames for p in everyone)
            bytes_before = sum(p.sent_bytes for p in everyone)
            played = 0
            cpu = time.process_time()
            for seq in range(moves):
                turn = [(p, ln[seq]) for p, ln in zip(racers, lines, strict=True) if seq < len(ln)]
                if regime == "concurrent":
                    await asyncio.gather(*(p.move(seq, m) for p, m in turn))
                else:
                    for peer, move in turn:
                        await peer.move(seq, move)
                played += len(turn)
            cpu = time.process_time() - cpu
            tally = node.metrics
            assert isinstance(tally, Tally)  # the core's own counters (no server swapped them)
            accepted = tally.moves_accepted.value
            if accepted != played:
                raise RunFailed(f"{played} moves sent, {accepted} accepted")
            frames = sum(p.frames for p in everyone) - frames_before
            sent = sum(p.sent_bytes for p in everyone) - bytes_before
        finally:
            await node.stop()
            if where != EMBEDDED:
                await store.delete_all()
            await store.close()
    return {
        "moves": played,
        "cpu_us_per_move": round(cpu / played * 1e6, 1) if played else None,
        "frames_per_move": round(frames / played, 2) if played else None,
        "bytes_per_move": round(sent / played) if played else None,
    }


def _callgrind_total(
    where: str, rooms: int, moves: int, regime: str, loop: str, line_moves: int, prefix: str
) -> tuple[int, int]:
    """Instructions of a whole child run under callgrind, and the moves it played; the
    child's store on Redis is under ``prefix``.

    The child runs in a session of its own, its temporary files (its embedded engine's
    data) in this run's directory: a Ctrl-C or ``timeout``'s SIGTERM reaches this
    process alone, which stops the child (SIGTERM: it cleans up as this process does,
    slowly under valgrind; SIGKILL past ``CALLGRIND_STOP_S``) before the directory
    goes; it gets SIGTERM too if this process dies. ``subprocess.run`` killed it 0.25 s
    after a Ctrl-C, which both had received: its keys stayed, and so did its directory."""
    with tempfile.TemporaryDirectory(prefix="solrace-bench-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-m",
                "solrace.bench.core",
                where,
                str(rooms),
                str(moves),
                regime,
                str(line_moves),
                prefix,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, LOOP.variable: loop, "TMPDIR": tmp},
            start_new_session=True,
            preexec_fn=death_signal(signal.SIGTERM),
        )
        with stopping.tracked(proc, CALLGRIND_STOP_S):
            stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            raise RunFailed(f"the callgrind run failed: {tail}")
        played = json.loads(stdout)["moves"]
        for text in out.read_text(encoding="utf-8", errors="replace").splitlines():
            if text.startswith(("summary:", "totals:")):
                return int(text.split()[1]), played
    raise RunFailed("callgrind wrote no total")


def instructions_per_move(
    where: str,
    rooms: int,
    moves: int,
    regime: str,
    loop: str,
    short: int = SHORT_MOVES,
    prefix: str | None = None,
) -> float:
    """ΔIr / Δmoves between a run of ``short`` and one of ``moves`` moves a racer; their
    stores on Redis are under ``prefix``, the run's (default a new one)."""
    run_keys = prefix or run_prefix(CORE_FAMILY)

    def total(moves_now: int) -> tuple[int, int]:
        child = part(run_keys, f"callgrind-{regime}")
        return _callgrind_total(where, rooms, moves_now, regime, loop, moves, child)

    short_ir, short_moves = total(short)
    long_ir, long_moves = total(moves)
    if long_moves <= short_moves:
        raise RunFailed("the longer run played no more moves than the shorter")
    return (long_ir - short_ir) / (long_moves - short_moves)


def callgrind_available() -> bool:
    return shutil.which("valgrind") is not None


def run(
    redis_url: str,
    *,
    rooms: int = DEFAULT_ROOMS,
    moves: int = DEFAULT_MOVES,
    callgrind: bool = False,
    loop: str = AUTO,
    prefix: str | None = None,
) -> dict[str, Any]:
    """Both regimes on Redis, then on the embedded engine; every key on Redis under
    ``prefix``, the run's (default a new one, bench/runkeys.py)."""
    if callgrind and moves <= SHORT_MOVES:
        raise ValueError(f"--moves must be above {SHORT_MOVES} with --callgrind")
    loop_name = resolve_loop(loop)
    run_keys = prefix or run_prefix(CORE_FAMILY)
    result: dict[str, Any] = {
        "benchmark": "core",
        "rooms": rooms,
        "room_size": ROOM_SIZE,
        "spectators_per_room": 1,
        "moves_per_racer": moves,
        "loop": loop_name,
        "callgrind": callgrind,
    }
    for label, where in (("redis", redis_url), (EMBEDDED, EMBEDDED)):
        figures: dict[str, Any] = {}
        for regime in REGIMES:
            with _quiet():
                on = part(run_keys, regime)
                plain = run_on_loop(loop_name, drive(where, rooms, moves, regime, prefix=on))
            if callgrind:
                per_move = instructions_per_move(
                    where, rooms, moves, regime, loop_name, prefix=run_keys
                )
                plain["instructions_per_move"] = round(per_move)
            figures[regime] = plain
        result[label] = figures
    return result


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The node's warnings about its rooms are not the figures: silenced for a run,
    and the logging of whoever called put back afterwards."""
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(before)


def child_main(argv: list[str]) -> int:
    """``python -m solrace.bench.core STORE ROOMS MOVES REGIME [LINE_MOVES [PREFIX]]``:
    one run, its JSON. SIGTERM (its parent stopping it) stops it as Ctrl-C would: its
    keys deleted, its engine stopped, status 143 (bench/stopping.py)."""
    where, rooms, moves, regime = argv[0], int(argv[1]), int(argv[2]), argv[3]
    line_moves = int(argv[4]) if len(argv) > 4 else moves
    prefix = argv[5] if len(argv) > 5 else None
    loop = LOOP.value(None, os.environ)  # what its parent resolved (_callgrind_total)
    with stopping.sigterm_as_interrupt() as stop:
        try:
            with _quiet():
                figures = run_on_loop(loop, drive(where, rooms, moves, regime, line_moves, prefix))
        except KeyboardInterrupt:
            print(f"python -m solrace.bench.core: {stop.words}", file=sys.stderr)
            return stop.status
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
