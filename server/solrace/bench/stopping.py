"""How a benchmark stops before its end: SIGTERM as Ctrl-C, and nothing of the run left.

Ctrl-C (SIGINT) stops a run as asyncio does: the ``asyncio.Runner`` a benchmark runs in
cancels it, and its ``finally`` blocks stop what it started and delete what it wrote;
out of a loop, KeyboardInterrupt does the same. SIGTERM — ``timeout``, a CI job
cancelled, ``kill`` — kept its default action, which ends the process on the spot with
no ``finally`` run: a core run killed at 25 s left 4,674 keys, the server benchmark's
``solrace-server`` ran on with its keys (re-parented to init), the solver's workers
waited for work for ever. :func:`sigterm_as_interrupt` makes SIGTERM stop a run the way
SIGINT does, and ``python -m solrace.bench`` says which one stopped it
(:attr:`Stop.words`, :attr:`Stop.status`).

A second signal can cut the ``finally`` blocks short (asyncio's second Ctrl-C raises at
once), so the run's end does not rely on them alone: :class:`Children` then stops
whatever the run started that is still there — every child a benchmark starts is
:func:`tracked` until its owner has stopped it, and the solver's worker processes are
multiprocessing's — and ``python -m solrace.bench`` deletes the run's keys
(bench/runkeys.py), both under :func:`shielded`: the signals are ignored for those few
seconds, which a third signal would otherwise cut short too. SIGKILL cannot be caught:
what it leaves is said in docs/performance.md ("When a run is killed").
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any, Final

from solrace.argtypes import EXIT_INTERRUPTED, EXIT_TERMINATED

#: How long a child asked to stop (SIGTERM) may take before it is killed (SIGKILL).
STOP_TIMEOUT_S: Final = 5.0

_tracked: set[subprocess.Popen[Any]] = set()


@dataclass
class Stop:
    """Which signal stopped the run: SIGTERM once one came, else it was SIGINT."""

    signal: int | None = None

    @property
    def words(self) -> str:
        """The one line's words: ``terminated (SIGTERM)`` or ``interrupted``."""
        return "terminated (SIGTERM)" if self.signal == signal.SIGTERM else "interrupted"

    @property
    def status(self) -> int:
        """What a shell reports for a process the signal stops: 143 or 130."""
        return EXIT_TERMINATED if self.signal == signal.SIGTERM else EXIT_INTERRUPTED


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[Stop]:
    """Meanwhile the first SIGTERM does what SIGINT does now: it calls SIGINT's handler
    — an ``asyncio.Runner``'s, which cancels the running benchmark, or Python's, which
    raises KeyboardInterrupt. Later ones are ignored: ``timeout`` sends SIGTERM to the
    process and then to its whole group, and asyncio takes a second signal for "stop
    now", which would cut the clean-up short. The previous handlers are put back after.
    Only the main thread can set a handler; elsewhere SIGTERM keeps its own.

    SIGINT ignored (a background job of a script, ``nohup``) stays ignored, but blocked
    instead meanwhile, with Python's handler in place: asyncio installs its own only
    over Python's, and a KeyboardInterrupt raised by SIGTERM's handler at any point of a
    loop's work — the only way to stop a run without it — printed the tracebacks of
    the callbacks it went through, and a server run then said that its rooms did not
    start. A SIGINT that came meanwhile is discarded: it was to be ignored."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    sigint_ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if sigint_ignored:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if stop.signal is not None:
            return
        stop.signal = signum
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
            return
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, before)
        if sigint_ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # discards one pending
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """SIGINT and SIGTERM ignored meanwhile (a run's last clean-up, seconds at most), then
    their handlers put back; SIGKILL still ends it. Outside the main thread, nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def tracked(proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT_S) -> Iterator[None]:
    """``proc`` is the run's meanwhile, and is stopped when the block ends however it
    ends (:func:`stop_process`, :func:`shielded`: a second Ctrl-C while a node child
    drained cut its stop short, and the run then deleted its keys under it — the node
    logged "Redis lost the whole room" for each); tracked until then, so that
    :class:`Children` stops it if it is still there all the same."""
    _tracked.add(proc)
    try:
        yield
    finally:
        with shielded():
            stop_process(proc, timeout)
        _tracked.discard(proc)


def stop_process(proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, and SIGKILL after ``timeout`` — to its whole process group if it leads
    one (a child in a session of its own: its own children too); reaped either way."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)


class Children:
    """The processes a run starts from now on: :func:`tracked` children, and
    multiprocessing's (the solver's workers) — not those there before (the caller's)."""

    def __init__(self) -> None:
        self._before = set(multiprocessing.active_children())

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop every one still there: the tracked ones all asked at once (SIGTERM), then
        killed (SIGKILL) past ``timeout``; multiprocessing's killed (:func:`stop_workers`);
        all reaped."""
        procs = [p for p in _tracked if p.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        stop_workers(new_workers(self._before))
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.kill()
                proc.wait()
            _tracked.discard(proc)


def new_workers(before: set[BaseProcess]) -> list[BaseProcess]:
    """multiprocessing's children of this process that are not in ``before``."""
    return [p for p in multiprocessing.active_children() if p not in before]


def stop_workers(workers: list[BaseProcess]) -> None:
    """Stop multiprocessing ``workers`` now: killed (SIGKILL), not asked, and reaped. A
    worker holds nothing to clean up (the node's solver workers are killed so too), and
    the solver benchmark's ignore SIGTERM (bench/workers.py: ``timeout`` sends it to the
    whole group): asked first, they made every stop wait ``STOP_TIMEOUT_S`` for nothing."""
    for worker in workers:
        worker.kill()
    for worker in workers:
        worker.join()


__all__ = [
    "STOP_TIMEOUT_S",
    "Children",
    "Stop",
    "new_workers",
    "shielded",
    "sigterm_as_interrupt",
    "stop_process",
    "stop_workers",
    "tracked",
]
