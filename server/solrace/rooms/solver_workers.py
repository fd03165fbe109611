"""The node's solver worker processes, and the candidates handed to them.

Certifying a deal (:mod:`solrace.rooms.certify`) solves candidate seeds, each for up
to the whole node budget — most of a second in pure Python — so the solver runs in
worker processes and the node's event loop never waits for it. The workers run at
niceness :data:`SOLVER_NICE`: on a machine with fewer free cores than workers, the
node's moves come first.

Why not ``multiprocessing.Pool``: its workers share one job queue behind one lock, and
a worker killed while it holds that lock (waiting for its next job) leaves it held for
ever — ``Pool.terminate`` then waits on it. Ctrl-C in a terminal, ``timeout`` or
``kill -- -PGID`` signal the node's whole process group, workers included: a node so
stopped hung in its drain in 9 runs of 12. Here each worker has a pipe of its own,
fed by a thread of the node; a worker that dies fails its own job
(:class:`WorkerLost`), is started again for the next one, and holds nothing anyone
else waits for. The workers ignore SIGINT (the node decides when they stop) and are
killed, not asked, when the node stops.

Also done here:

- **Counting what the workers hold** (:func:`spare`, :func:`idle`): a room's second
  candidate in flight is only worth handing out to a worker nobody else waits for.
- **Stopping a candidate nobody waits for any more** (:func:`run` cancelled): each job
  gets a slot in a shared array of stop flags, which the solver polls (every 1,024
  nodes, ``should_stop``). Without it an abandoned candidate ran out its budget and
  kept its worker from the next room for up to a second.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Final

from solrace.orphans import death_signal

#: Solver worker processes (each solves one candidate at a time).
SOLVER_WORKERS: Final = 2
#: The workers' niceness: the node's event loop (every room's moves) runs first.
SOLVER_NICE: Final = 10
#: Stop flags shared with the workers: jobs beyond this many at once cannot be stopped
#: early (they run out their budget, as every job did before).
STOP_SLOTS: Final = 256
#: How long a stopping node waits for a killed worker to be reaped.
REAP_WAIT_S: Final = 5.0
#: A worker that keeps dying before it answers a job (a broken environment, no
#: memory) is started again after RESPAWN_FIRST_S, then twice as long each time, up
#: to RESPAWN_MAX_S: it was started again at once, twice for every job, and a node's
#: queued candidates spawned interpreter after interpreter back to back.
RESPAWN_FIRST_S: Final = 0.25
RESPAWN_MAX_S: Final = 30.0
#: A worker whose processes died this many times in a row before answering a job is
#: failing (:meth:`Workers.failing`): certifications deal uncertified rather than wait
#: for it. Not two: a worker killed twice from outside (an operator, the kernel out of
#: memory) is started again and answers; three in a row is an environment it cannot
#: live in.
FAILING_STREAK: Final = 3

log = logging.getLogger("solrace.solver")

_pool: Workers | None = None
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


def failing() -> bool:
    """Whether the workers keep dying before they answer a job (:meth:`Workers.failing`):
    a certification then deals uncertified at once instead of waiting out their
    restarts' back-off candidate after candidate (solrace.rooms.certify)."""
    pool = _pool
    return pool is not None and pool.failing()


def stopper(slot: int | None) -> Callable[[], bool] | None:
    """In a worker: the solver's ``should_stop`` for the job holding ``slot``."""
    flags = _worker_flags
    if slot is None or flags is None:
        return None
    return lambda: flags[slot] != 0


async def run(function: Callable[..., Any], *args: Any, limit_s: float | None = None) -> Any:
    """``function(*args, stop_slot=slot)`` on a worker, awaited without blocking the
    loop. Cancelled, it asks the worker to stop the job (the function passes
    :func:`stopper` of its slot to the solver); the job still counts until it ends.
    ``limit_s``: a worker that has not answered this long after it was handed the job
    is taken for hung — killed, started again for the next job — and the job gets
    :class:`WorkerLost` (None: no limit)."""
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
        # On a thread feeding a worker; the loop may be gone by then.
        _end_job(pool, job, slot)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome, failed)

    try:
        pool.submit(_Job(function, args, {"stop_slot": slot}, finished, limit_s))
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


def _end_job(pool: Workers, job: int, slot: int | None) -> None:
    global _jobs
    with _lock:
        if pool is not _pool:
            return  # a job of workers shutdown() stopped: nothing of it is counted now
        _jobs -= 1
        if slot is not None and _holders.get(slot) == job:
            del _holders[slot]
            _flags[slot] = 0


def _stop(pool: Workers, job: int, slot: int | None) -> None:
    with _lock:
        # Only while the job holds the slot: once it ended, the slot may be another's.
        if slot is not None and pool is _pool and _holders.get(slot) == job:
            _flags[slot] = 1


STOPPED: Final = "the solver workers are stopped"


class WorkerLost(RuntimeError):
    """The worker running a job died before it answered (killed by a signal, out of
    memory), or the workers were stopped (``stopped``): the job has no outcome."""

    def __init__(self, message: str, stopped: bool = False) -> None:
        super().__init__(message)
        self.stopped = stopped


@dataclass(frozen=True, slots=True)
class _Job:
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: Called on a feeding thread with the outcome, and True if it is an exception.
    finished: Callable[[Any, bool], None]
    #: How long the worker may take to answer (None: as long as it lives).
    limit_s: float | None = None


class Workers:
    """:data:`SOLVER_WORKERS` worker processes, each fed by a thread of the node
    through a pipe of its own. Jobs wait in the node (an in-process queue, whose lock
    no worker can take with it) until a thread is free."""

    def __init__(self, size: int) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.flags: Any = self._context.RawArray(ctypes.c_byte, STOP_SLOTS)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stopping = False
        #: Set by stop(): it cuts short a wait before a worker is started again.
        self._stopped = threading.Event()
        self._guard = threading.Lock()
        #: Per worker: how many of its processes in a row died before answering a job.
        self._deaths = [0] * size
        #: When a worker last died (monotonic seconds; never: -inf).
        self._last_death = float("-inf")
        # Started here, on the caller's thread (as a Pool does): the workers are up
        # before the first job; a worker started again later is its thread's.
        self._workers: list[tuple[BaseProcess, Connection] | None] = []
        try:
            for _ in range(size):
                self._workers.append(self._start(own_stderr=True))
        except BaseException:
            for worker in self._workers:
                if worker is not None:
                    _kill(*worker)
            raise
        self._threads = [
            threading.Thread(target=self._feed, args=(i,), name=f"solver-feed-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def pids(self) -> list[int | None]:
        """The workers' process ids (None for one not running now)."""
        with self._guard:
            return [None if w is None else w[0].pid for w in self._workers]

    def failing(self) -> bool:
        """Whether every worker keeps dying before it answers a job (FAILING_STREAK
        times in a row), the last death within RESPAWN_MAX_S: past that, a job may try
        a worker again (a mended environment: its answer ends the streak). Every, not
        any: while one worker lives, candidates are solved (a review)."""
        with self._guard:
            streak = all(deaths >= FAILING_STREAK for deaths in self._deaths)
            return streak and time.monotonic() - self._last_death < RESPAWN_MAX_S

    def submit(self, job: _Job) -> None:
        """Queue a job for the next free worker."""
        if self._stopping:
            raise WorkerLost(STOPPED, stopped=True)
        self._jobs.put(job)

    def stop(self) -> None:
        """Kill the workers (a job in progress gets :class:`WorkerLost`, one queued
        none: nobody waits for either) and let the feeding threads end."""
        with self._guard:
            self._stopping = True
            workers, self._workers = self._workers, [None] * len(self._workers)
        self._stopped.set()
        for _ in self._threads:
            self._jobs.put(None)
        for worker in workers:
            if worker is not None:
                _kill(*worker)

    def _start(self, own_stderr: bool = False) -> tuple[BaseProcess, Connection]:
        """A worker process and the node's end of its pipe. ``own_stderr``: on the
        thread that makes the pool, the process's own stderr is put in place while it
        starts — the first start launches multiprocessing's resource tracker, which is
        handed stderr's descriptor, and under a program that replaced sys.stderr (a
        Textual app capturing output) there is none. A worker started again later, on
        a feeding thread, needs none (the tracker runs) and must not swap it: the
        program's own thread may be replacing sys.stderr at that moment."""
        mine, theirs = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=_worker_main, args=(theirs, self.flags), name="solrace-solver", daemon=True
        )
        replaced = sys.stderr
        if own_stderr:
            sys.stderr = sys.__stderr__ or sys.stderr
        try:
            process.start()
        except BaseException:
            mine.close()
            raise
        finally:
            if own_stderr:
                sys.stderr = replaced
            theirs.close()
        return process, mine

    def _feed(self, index: int) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                outcome, failed = self._run_on(index, job), False
            except BaseException as exc:  # the worker's failure, or its loss
                outcome, failed = exc, True
            job.finished(outcome, failed)

    def _run_on(self, index: int, job: _Job) -> Any:
        # A job that could not be sent never ran: it goes to a worker started again.
        # One whose answer never came may have run: its worker's loss is its outcome.
        for _ in range(2):
            worker = self._worker(index)
            process, pipe = worker
            try:
                pipe.send((job.function, job.args, job.kwargs))
            except OSError:
                self._lose(index, worker)
                continue
            try:
                # A worker that never answers (stopped by a signal, stuck, frozen by its
                # host) is neither dead nor alive to recv: its job, and every room whose
                # walk waited for it, waited for ever ("certifying" in the lobby, nothing
                # logged). Past the job's limit it is killed as a dead one would be lost.
                if job.limit_s is not None and not pipe.poll(job.limit_s):
                    self._lose(index, worker)
                    raise WorkerLost(
                        f"solver worker {process.pid} did not answer within {job.limit_s:g} s:"
                        " killed"
                    )
                ok, outcome = pipe.recv()
            except (EOFError, OSError) as exc:
                self._lose(index, worker)
                raise WorkerLost(f"solver worker {process.pid} died ({process.exitcode})") from exc
            self._deaths[index] = 0  # it answered: it can live
            if not ok:
                raise outcome
            return outcome
        raise WorkerLost("no solver worker could be started to take the job")

    def _worker(self, index: int) -> tuple[BaseProcess, Connection]:
        """The index's worker, started (again) if it is not running."""
        with self._guard:
            if self._stopping:
                raise WorkerLost(STOPPED, stopped=True)
            worker = self._workers[index]
        if worker is not None and worker[0].is_alive():
            return worker
        if worker is not None:
            self._lose(index, worker)
        self._back_off(index)
        worker = self._start()
        with self._guard:
            if not self._stopping:
                self._workers[index] = worker
                return worker
        _kill(*worker)
        raise WorkerLost(STOPPED, stopped=True)

    def _back_off(self, index: int) -> None:
        """Before the index's worker is started again: wait while its last ones died
        before answering a job — none after the first such death (one killed from
        outside), then RESPAWN_FIRST_S, doubled up to RESPAWN_MAX_S; said once, in
        the log, when it starts. Cut short by stop()."""
        deaths = self._deaths[index]
        if deaths < 2:
            return
        wait = min(RESPAWN_MAX_S, RESPAWN_FIRST_S * 2 ** (deaths - 2))
        if deaths == 2:
            log.warning(
                "solver worker %d keeps dying before it answers a job (%d in a row): "
                "starting it again after %g s, then twice as long each time up to %g s",
                index,
                deaths,
                wait,
                RESPAWN_MAX_S,
            )
        if self._stopped.wait(wait):
            raise WorkerLost(STOPPED, stopped=True)

    def _lose(self, index: int, worker: tuple[BaseProcess, Connection]) -> None:
        """Forget a worker that died, and reap it — unless stop() took it (and kills
        it): then the job ends as stopped."""
        with self._guard:
            mine = self._workers[index] is worker
            if mine:
                self._workers[index] = None
                self._deaths[index] += 1
                self._last_death = time.monotonic()
        if not mine:
            raise WorkerLost(STOPPED, stopped=True)
        _kill(*worker)


def _kill(process: BaseProcess, pipe: Connection) -> None:
    """SIGKILL, not a request: a worker owes the node nothing, and holds no lock."""
    with contextlib.suppress(OSError, ValueError):
        process.kill()
    process.join(REAP_WAIT_S)
    pipe.close()


def _worker_main(pipe: Connection, flags: Any) -> None:
    """A worker's life: answer each job sent on its pipe, until the pipe closes."""
    _worker_init(flags)
    while True:
        try:
            function, args, kwargs = pipe.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[bool, Any] = (True, function(*args, **kwargs))
        except Exception as exc:
            answer = (False, exc)
        try:
            pipe.send(answer)
        except (EOFError, OSError):
            return
        except Exception as exc:  # an answer that does not pickle
            pipe.send((False, RuntimeError(f"a solver answer could not be sent: {exc!r}")))


def _worker_init(flags: Any) -> None:
    """A solver worker holds no terminal or pipe of the node's (a supervisor waiting
    for the node's output to close must not wait for it), ignores Ctrl-C (a terminal
    sends it to the node's whole group: the node stops its workers itself), dies with
    the node, and yields the CPU to the node (SOLVER_NICE)."""
    global _worker_flags
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_flags = flags
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if hasattr(os, "nice"):
        os.nice(SOLVER_NICE)
    ask = death_signal(signal.SIGKILL, os.getppid())
    if ask is not None:
        ask()


_exit_registered = False


def _workers() -> Workers:
    global _pool, _flags, _exit_registered
    if _pool is None:
        pool = Workers(SOLVER_WORKERS)
        with _lock:
            _pool, _flags = pool, pool.flags
            _holders.clear()
        if not _exit_registered:
            atexit.register(shutdown)
            _exit_registered = True
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
        pool.stop()
