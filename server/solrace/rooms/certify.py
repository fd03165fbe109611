"""Certified deals: a ``winnable`` room deals only a seed a solver has won.

When a round's lobby opens, a node serving the room draws candidate seeds (the
round's seed, then ``round_seed(secret, round, 1)``, ``2``, ...) and solves each in a
worker *process* — the solver is pure Python, and in a thread it would hold the GIL and
delay every other room's moves — until one is won (at the asked difficulty). The
winning line is the certificate: ``deal_chosen`` announces its length and difficulty
(server-only: which candidate, and the line), the countdown commits to it with the
seed, ``race_over`` reveals it, and ``solrace verify`` replays it (docs/fairness.md).

Two nodes may certify the same round; ``decisions.deal_chosen`` keeps the first.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from multiprocessing.pool import Pool
from typing import TYPE_CHECKING, Any, Final

from solrace.protocol.limits import START_WAIT_S
from solrace.protocol.views import Phase
from solrace.race import decisions as decide_
from solrace.race.fairness import round_seed
from solrace.solver import SERVER_BUDGET, solve_deal
from solrace.store.errors import StoreUnavailable

if TYPE_CHECKING:
    from .node import Node
    from .room import LiveRoom

log = logging.getLogger("solrace.certify")

#: The solver's node budget per candidate seed (docs/winnability.md: the budget's
#: share of unknowns and the certification time it gives).
CERTIFY_BUDGET_NODES: Final = SERVER_BUDGET
#: Candidates tried before the room falls back to an uncertified deal (announced so).
MAX_CANDIDATES: Final = 100
#: Candidates of one round solved at once; the first won is the deal. A candidate the
#: solver leaves unknown costs the whole budget (most of a second in pure Python), and
#: one walk in twenty met one: solved one after another, those walks were the p95.
#: With a second candidate beside it, the next seed is usually won meanwhile.
CANDIDATES_IN_FLIGHT: Final = 2
#: Solver worker processes: one per candidate in flight.
SOLVER_WORKERS: Final = CANDIDATES_IN_FLIGHT
#: The workers' niceness: on a machine with fewer free cores than workers, the node's
#: event loop (every room's moves) runs first and the solver takes what is left.
SOLVER_NICE: Final = 10

#: A requested difficulty accepts these solver bands.
_BANDS: Final = {"easy": ("easy",), "medium": ("medium",), "hard": ("hard", "very hard")}

_pool: Pool | None = None
#: Candidates handed to the workers and not finished yet (abandoned ones included: a
#: worker runs them out). Counted on the loop's thread and the pool's result thread.
_jobs = 0
_jobs_lock = threading.Lock()


def spare_worker() -> bool:
    """Whether a candidate handed to the workers now would start at once: a room's
    second candidate is only worth solving on a worker nobody else is waiting for
    (on a busy node it would delay other rooms' first candidates)."""
    return _jobs < SOLVER_WORKERS


def idle_workers() -> bool:
    """Whether no candidate is handed to the workers (none running, none queued)."""
    return _jobs == 0


def _count_job(change: int) -> None:
    global _jobs
    with _jobs_lock:
        _jobs = max(0, _jobs + change)  # a reply of workers shutdown() stopped: ignored


@dataclass(frozen=True)
class Certificate:
    """What certifying a round found: the candidate dealt and its winning line (None
    if no candidate was won within the limits: the deal is then not certified)."""

    attempt: int
    line: tuple[str, ...] | None
    difficulty: str | None


def try_candidate(
    variant: str,
    options: Mapping[str, Any],
    secret: bytes,
    round_no: int,
    attempt: int,
    difficulty: str | None,
    budget_nodes: int = CERTIFY_BUDGET_NODES,
) -> Certificate | None:
    """Solve candidate ``attempt`` of the round: its certificate if it is won at
    ``difficulty``, else None. Plain arguments, no I/O: it runs in a worker process."""
    result = solve_deal(variant, round_seed(secret, round_no, attempt), options, budget_nodes)
    bands = _BANDS.get(difficulty or "", ())
    if result.won and (not bands or result.difficulty in bands):
        return Certificate(attempt, result.moves, result.difficulty)
    return None


def certify(
    variant: str,
    options: Mapping[str, Any],
    secret: bytes,
    round_no: int,
    difficulty: str | None,
    budget_nodes: int = CERTIFY_BUDGET_NODES,
    candidates: int = MAX_CANDIDATES,
) -> Certificate:
    """Solve candidate seeds in order until one is won at ``difficulty`` (the whole
    search in one call, as the server makes it candidate by candidate)."""
    for attempt in range(candidates):
        found = try_candidate(variant, options, secret, round_no, attempt, difficulty, budget_nodes)
        if found is not None:
            return found
    return Certificate(0, None, None)


async def first_won(
    solve: Callable[[int], Awaitable[Certificate | None]],
    needed: Callable[[], bool],
    in_flight: int = CANDIDATES_IN_FLIGHT,
    candidates: int = MAX_CANDIDATES,
    spare: Callable[[], bool] = lambda: True,
) -> Certificate:
    """Solve candidates ``0, 1, …`` with ``solve``, up to ``in_flight`` at a time (more
    than one only while ``spare`` says a worker is free for it), until one is won: that
    one (the lowest attempt if several are won together), or a certificate without a
    line when none of ``candidates`` is or the round stopped being ``needed``. A
    candidate still running then is abandoned (its worker finishes it within the
    budget; the result is dropped)."""
    running: set[asyncio.Future[Certificate | None]] = set()
    attempt = 0
    try:
        while True:
            while (
                len(running) < in_flight
                and attempt < candidates
                and needed()
                and (not running or spare())
            ):
                running.add(asyncio.ensure_future(solve(attempt)))
                attempt += 1
            if not running:
                return Certificate(0, None, None)
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            won = [found for found in (task.result() for task in done) if found is not None]
            if won:
                return min(won, key=lambda found: found.attempt)
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)


def _worker_init() -> None:
    """A solver worker holds no terminal or pipe of the node's (a supervisor waiting
    for the node's output to close must not wait for it), dies with the node, and
    yields the CPU to the node (SOLVER_NICE)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if hasattr(os, "nice"):
        os.nice(SOLVER_NICE)
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _workers() -> Pool:
    global _pool
    if _pool is None:
        # spawn: a worker never inherits the event loop, sockets or locks. The spawned
        # helper processes are handed our stderr's descriptor; under a program that
        # replaced sys.stderr (a Textual app capturing output) there is none, so the
        # pool is made with the process's own stderr in place.
        replaced, sys.stderr = sys.stderr, sys.__stderr__ or sys.stderr
        try:
            _pool = multiprocessing.get_context("spawn").Pool(
                SOLVER_WORKERS, initializer=_worker_init
            )
        finally:
            sys.stderr = replaced
        atexit.register(shutdown)
    return _pool


def shutdown() -> None:
    """Stop the solver workers now (a draining node does not wait for a deal)."""
    global _pool, _jobs
    if _pool is not None:
        _pool.terminate()
        _pool = None
        with _jobs_lock:
            _jobs = 0  # what the workers held is gone with them


async def _solve(*args: Any) -> Certificate | None:
    """``try_candidate(*args)`` in a worker process, awaited without blocking the loop.

    One candidate per job, not a whole certification: the workers serve every room of
    the node in turn, so a room whose deal is hard to certify (up to MAX_CANDIDATES
    candidates) holds the others up by one candidate at most (its second candidate in
    flight only goes to a spare worker), and a certification nobody needs any more
    (the room was left, another node chose the deal) stops after the candidates in
    progress instead of running to its end."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Certificate | None] = loop.create_future()

    def settle(outcome: Any, failed: bool) -> None:
        if not future.done():
            if failed:
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def reply(outcome: Any, failed: bool = False) -> None:
        # Called on the pool's result thread; the loop may be gone by then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome, failed)

    def finished(outcome: Any, failed: bool = False) -> None:
        _count_job(-1)
        reply(outcome, failed)

    workers = _workers()
    _count_job(+1)
    try:
        workers.apply_async(
            try_candidate, args, callback=finished, error_callback=lambda e: finished(e, True)
        )
    except BaseException:
        _count_job(-1)
        raise
    return await future


def ensure(node: Node, room: LiveRoom) -> None:
    """Start certifying the room's round here if it needs it and nobody here does."""
    state = room.state
    if state.phase != Phase.LOBBY or state.deal_ready():
        return
    key = (room.room_id, state.round)
    if key not in node.certifying:
        task = asyncio.ensure_future(_run(node, room, state.round))
        task.add_done_callback(_retrieve)
        node.certifying[key] = task


def _retrieve(task: asyncio.Future[None]) -> None:
    """A certification that failed because Redis did not answer raises that to whoever
    waits for it (a ``start``: ``unavailable``, retried). Often nobody does — the
    solver finished during an outage — and the failure is no news: the next
    ``start`` certifies again. Retrieving it here keeps asyncio from logging it,
    with a traceback, as an exception never retrieved."""
    if not task.cancelled():
        task.exception()


async def ready(node: Node, room: LiveRoom) -> None:
    """Wait until the room's round has its deal (certifying it here if need be)."""
    ensure(node, room)
    task = node.certifying.get((room.room_id, room.state.round))
    if task is not None:
        await asyncio.wait_for(asyncio.shield(task), START_WAIT_S)
    await node.sync(room)


def _needed(room: LiveRoom, round_no: int) -> bool:
    """Whether the round still wants its deal: not chosen yet, and someone is still in
    the lobby (one everyone left expires: nothing more is written to it)."""
    state = room.state
    in_lobby = state.phase == Phase.LOBBY and bool(state.racers)
    return state.round == round_no and in_lobby and not state.deal_ready()


async def _run(node: Node, room: LiveRoom, round_no: int) -> None:
    key = (room.room_id, round_no)
    try:
        settings = room.meta.settings
        found = await first_won(
            lambda attempt: _solve(
                settings.variant,
                dict(settings.options),
                room.meta.secret,
                round_no,
                attempt,
                settings.difficulty,
            ),
            # Until the deal is chosen (maybe by another node), or the round is gone.
            lambda: _needed(room, round_no),
            node.candidates_in_flight,
            spare=spare_worker,
        )
        if not _needed(room, round_no):
            return  # everyone left (or the deal was chosen) while the solver ran
        line = None if found.line is None else list(found.line)
        deal = {
            "certified": line is not None,
            "moves": None if line is None else len(line),
            "difficulty": found.difficulty,
        }
        if line is None:
            log.warning("no winnable deal found: uncertified", extra={"room": room.room_id})
        await node.decide(
            room,
            lambda: decide_.deal_chosen(room.state, round_no, deal),
            attempt=found.attempt,
            line=None if line is None else tuple(line),
        )
        await node.tick(room)
    except (StoreUnavailable, asyncio.CancelledError):
        raise
    except Exception:
        log.exception("certifying a deal failed", extra={"room": room.room_id})
    finally:
        node.certifying.pop(key, None)
