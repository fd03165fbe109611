"""The solver benchmark's worker processes: a pool whose workers stop at once when the
run is left early (Ctrl-C, SIGTERM, a failure: bench/stopping.py).

Why a stop of its own. Left to itself, a ``ProcessPoolExecutor`` leaving its ``with``
block waits for the jobs its workers have taken — chunks of deals, tens of seconds at
100,000 nodes: a Ctrl-C took over a minute to end a run on a 2-core machine
(2026-12-06) — and a SIGTERM to the benchmark never reached them. Killing them is not
the way on Python 3.11: a pool whose workers die marks its pending futures broken, the
run's cancelled ones too, which raised InvalidStateError in the pool's thread (a
traceback after the benchmark's one line; fixed in 3.12, CPython gh-107219), and a
pool shut down without waiting for its thread raced the interpreter's exit
("Exception ignored in: <module 'threading'>"). So a stop is asked: a flag the workers
share makes each skip the jobs it has not begun, SIGUSR1 interrupts the one it is
solving, and the pool then ends as it does after a full run — within
``stopping.STOP_TIMEOUT_S``: a worker that has not answered by then (paused by SIGSTOP)
is killed, once the pool has cancelled what it had not begun (:func:`_shut_down`).

A worker also leaves Ctrl-C and SIGTERM to the benchmark, which a terminal's Ctrl-C
and ``timeout`` send to the whole process group: one reached by Ctrl-C while it waited
for work printed ``Process ForkProcess-1:`` and a traceback, and one SIGTERM ended
broke the pool as above. And it dies with the benchmark (SIGKILL then): one killed by
SIGKILL left its workers waiting for work for ever.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from types import FrameType
from typing import Final, TypeVar

from solrace.orphans import death_signal

from . import stopping

J = TypeVar("J")
T = TypeVar("T")

#: The signals a worker leaves to the benchmark, blocked while the workers start.
_STOPS: Final = {signal.SIGINT, signal.SIGTERM}
#: What the benchmark sends a worker to interrupt the job it is solving.
INTERRUPT: Final = signal.SIGUSR1

# In a worker: the run's stop flag, and whether a job is being solved now.
_stop: Event | None = None
_busy = False


class Stopped(Exception):
    """A job a worker skipped or left because the run stopped (nobody reads it)."""


def _interrupted(signum: int, frame: FrameType | None) -> None:
    if _busy:
        raise Stopped


#: How the workers start: forked (:func:`pool` says why).
WORKER_START: Final = "fork"


def _start(benchmark: int, stop: Event) -> None:
    """A worker's first act: its signals, which were blocked until now (:func:`pool`),
    and its death with the ``benchmark`` process."""
    global _stop
    _stop = stop
    for sig in _STOPS:
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(INTERRUPT, _interrupted)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    ask = death_signal(signal.SIGKILL, benchmark)
    if ask is not None:
        ask()


def call(fn: Callable[[J], T], job: J) -> T:
    """In a worker: ``fn(job)``, unless the run has stopped (:class:`Stopped`, also
    raised inside ``fn`` if the stop comes meanwhile). For ``pool.map``, with
    ``functools.partial(call, fn)``."""
    global _busy
    if _stop is not None and _stop.is_set():
        raise Stopped
    _busy = True
    try:
        return fn(job)
    finally:
        _busy = False


@contextlib.contextmanager
def pool(count: int) -> Iterator[ProcessPoolExecutor]:
    """``count`` worker processes, started now (a first job; the pool forks them all
    at once) with SIGINT and SIGTERM blocked until :func:`_start` has set them — a
    Ctrl-C in between reached a worker still starting, which printed a traceback. Left
    early, the run stops them (the module's docstring) before the pool ends."""
    # Forked, named: the blocked signals are inherited only by a fork, and a worker's
    # death with the benchmark asks that its parent be the benchmark. Python 3.14's
    # default on Linux, forkserver, broke both: every worker exited at its start (its
    # parent the fork server), BrokenProcessPool (a review, forced on 3.11).
    forked = multiprocessing.get_context(WORKER_START)
    stop = forked.Event()
    before = set(multiprocessing.active_children())
    executor = ProcessPoolExecutor(
        count, mp_context=forked, initializer=_start, initargs=(os.getpid(), stop)
    )
    try:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            executor.submit(int).result()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        yield executor
    except BaseException:
        with stopping.shielded():
            stop.set()
            workers = stopping.new_workers(before)
            for worker in workers:
                if worker.pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.pid, INTERRUPT)
            _shut_down(executor, workers)
        raise
    executor.shutdown(wait=True)


def _shut_down(executor: ProcessPoolExecutor, workers: list[BaseProcess]) -> None:
    """The pool of a stopped run ended, waited for ``stopping.STOP_TIMEOUT_S`` at most:
    its ``workers`` still there then are killed, and the pool ends as after a worker
    that died. The wait is the shutdown's, in a thread of its own (the pool has no
    bounded one). Before, it waited for ever — with SIGINT and SIGTERM ignored — for a
    worker that never answered the stop (paused by SIGSTOP): only SIGKILL ended the
    benchmark. A worker killed while it solves still holds a job, which the pool then
    fails (BrokenProcessPool); the ones it had not begun were cancelled first, so that
    Python 3.11 raises no InvalidStateError on them (the module's docstring)."""
    ending = threading.Thread(
        target=executor.shutdown, kwargs={"wait": True, "cancel_futures": True}, daemon=True
    )
    ending.start()
    ending.join(stopping.STOP_TIMEOUT_S)
    if ending.is_alive():
        stopping.stop_workers(workers)
        ending.join(stopping.STOP_TIMEOUT_S)


__all__ = ["INTERRUPT", "Stopped", "call", "pool"]
