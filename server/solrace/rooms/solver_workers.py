"""The node's solver worker processes, and the candidates handed to them.

Certifying a deal (:mod:`solrace.rooms.certify`) solves candidate seeds, each for up
to the whole node budget — most of a second in pure Python — so the solver runs in
worker processes and the node's event loop never waits for it. The workers run at
niceness :data:`SOLVER_NICE`: on a machine with fewer free cores than workers, the
node's moves come first.

Two things a ``multiprocessing`` pool does not do are done here:

- **Counting what the workers hold** (:func:`spare`, :func:`idle`): a room's second
  candidate in flight is only worth handing out to a worker nobody else waits for.
- **Stopping a candidate nobody waits for any more** (:func:`run` cancelled): a pool
  job cannot be cancelled, so each job gets a slot in a shared array of stop flags,
  which the solver polls (every 1,024 nodes, ``should_stop``). Without it an abandoned
  candidate ran out its budget and kept its worker from the next room for up to a
  second.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import itertools
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.pool import Pool
from typing import Any, Final

#: Solver worker processes (each solves one candidate at a time).
SOLVER_WORKERS: Final = 2
#: The workers' niceness: the node's event loop (every room's moves) runs first.
SOLVER_NICE: Final = 10
#: Stop flags shared with the workers: jobs beyond this many at once cannot be stopped
#: early (they run out their budget, as every job did before).
STOP_SLOTS: Final = 256

_pool: Pool | None = None
#: The stop flags, one byte per slot (the node's copy; a worker has its own mapping).
_flags: Any = None
#: Jobs handed to the workers and not finished (abandoned ones included), and which
#: job (by number) holds each stop slot taken: a late stop must not reach the next job
#: given the same slot. Changed on the loop's thread and on the pool's result thread.
_jobs = 0
_holders: dict[int, int] = {}
_job_numbers = itertools.count()
_lock = threading.Lock()

#: In a worker: the stop flags it was started with.
_worker_flags: Any = None


def spare() -> bool:
    """Whether a job handed to the workers now would start at once."""
    return _jobs < SOLVER_WORKERS


def idle() -> bool:
    """Whether the workers hold no job (none running, none queued)."""
    return _jobs == 0


def stopper(slot: int | None) -> Callable[[], bool] | None:
    """In a worker: the solver's ``should_stop`` for the job holding ``slot``."""
    flags = _worker_flags
    if slot is None or flags is None:
        return None
    return lambda: flags[slot] != 0


async def run(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args, stop_slot=slot)`` on a worker, awaited without blocking the
    loop. Cancelled, it asks the worker to stop the job (the function passes
    :func:`stopper` of its slot to the solver); the job still counts until it ends."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    pool = _workers()
    job, slot = _take_job()

    def settle(outcome: Any, failed: bool) -> None:
        if not future.done():
            if failed:
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def finished(outcome: Any, failed: bool = False) -> None:
        # On the pool's result thread; the loop may be gone by then.
        _end_job(pool, job, slot)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome, failed)

    try:
        pool.apply_async(
            function,
            args,
            {"stop_slot": slot},
            callback=finished,
            error_callback=lambda exc: finished(exc, True),
        )
    except BaseException:
        _end_job(pool, job, slot)
        raise
    try:
        return await future
    except asyncio.CancelledError:
        _stop(pool, job, slot)
        raise


def _take_job() -> tuple[int, int | None]:
    """A number for a new job, and the stop slot it holds: the lowest free one (None
    when all are taken)."""
    global _jobs
    with _lock:
        _jobs += 1
        job = next(_job_numbers)
        slot = next((s for s in range(STOP_SLOTS) if s not in _holders), None)
        if slot is not None:
            _holders[slot] = job
        return job, slot


def _end_job(pool: Pool, job: int, slot: int | None) -> None:
    global _jobs
    with _lock:
        if pool is not _pool:
            return  # a job of workers shutdown() stopped: nothing of it is counted now
        _jobs -= 1
        if slot is not None and _holders.get(slot) == job:
            del _holders[slot]
            _flags[slot] = 0


def _stop(pool: Pool, job: int, slot: int | None) -> None:
    with _lock:
        # Only while the job holds the slot: once it ended, the slot may be another's.
        if slot is not None and pool is _pool and _holders.get(slot) == job:
            _flags[slot] = 1


def _worker_init(flags: Any) -> None:
    """A solver worker holds no terminal or pipe of the node's (a supervisor waiting
    for the node's output to close must not wait for it), dies with the node, and
    yields the CPU to the node (SOLVER_NICE)."""
    global _worker_flags
    _worker_flags = flags
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if hasattr(os, "nice"):
        os.nice(SOLVER_NICE)
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _workers() -> Pool:
    global _pool, _flags
    if _pool is None:
        # spawn: a worker never inherits the event loop, sockets or locks. The spawned
        # helper processes are handed our stderr's descriptor; under a program that
        # replaced sys.stderr (a Textual app capturing output) there is none, so the
        # pool is made with the process's own stderr in place.
        context = multiprocessing.get_context("spawn")
        flags = context.RawArray(ctypes.c_byte, STOP_SLOTS)
        replaced, sys.stderr = sys.stderr, sys.__stderr__ or sys.stderr
        try:
            pool = context.Pool(SOLVER_WORKERS, initializer=_worker_init, initargs=(flags,))
        finally:
            sys.stderr = replaced
        with _lock:
            _pool, _flags = pool, flags
            _holders.clear()
        atexit.register(shutdown)
        return pool
    return _pool


def shutdown() -> None:
    """Stop the solver workers now (a draining node does not wait for a deal)."""
    global _pool, _jobs
    with _lock:
        pool, _pool = _pool, None
        _jobs = 0  # what the workers held goes with them
        _holders.clear()
    if pool is not None:
        pool.terminate()
