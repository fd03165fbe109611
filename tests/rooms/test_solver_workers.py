"""The node's solver workers: they yield the CPU to the node, count the candidates
they hold (a second candidate in flight only goes to a spare worker), and stop a
candidate nobody waits for any more instead of running out its budget."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import ClassVar

import pytest
from solrace.rooms import certify, solver_workers

from tests.net.conftest import SOLVABLE_SECRET
from tests.support import processes

#: Candidate 12 of the test secret's round 1 (Yukon) is left unknown at 200,000 nodes,
#: after 9 s of pure Python: at 2,000,000 nodes it runs for more than a minute.
SLOW_ATTEMPT = 12
SLOW = ("yukon", {}, SOLVABLE_SECRET, 1, SLOW_ATTEMPT, None, 2_000_000)
#: Candidate 0 is won in a few hundred nodes (the known test deal).
QUICK = ("yukon", {}, SOLVABLE_SECRET, 1, 0, None)


async def _until_idle(within_s: float) -> float:
    began = time.monotonic()
    while not solver_workers.idle():
        assert time.monotonic() - began < within_s, "the workers still hold a candidate"
        await asyncio.sleep(0.01)
    return time.monotonic() - began


def test_the_solver_workers_yield_the_cpu_to_the_node() -> None:
    """The pool's workers run at SOLVER_NICE: the node's loop comes first."""
    pool = solver_workers._workers()
    try:
        assert len(_started(pool)) == solver_workers.SOLVER_WORKERS
    finally:
        solver_workers.shutdown()


async def test_the_workers_count_the_candidates_they_hold() -> None:
    try:
        assert solver_workers.idle() and solver_workers.spare()
        assert await solver_workers.run(certify.try_candidate, *QUICK) is not None
        assert solver_workers.idle()
        held = [asyncio.ensure_future(solver_workers.run(certify.try_candidate, *SLOW))]
        await asyncio.sleep(0)
        assert not solver_workers.idle() and solver_workers.spare()  # one of two busy
        held.append(asyncio.ensure_future(solver_workers.run(certify.try_candidate, *SLOW)))
        await asyncio.sleep(0)
        assert not solver_workers.spare()
        for job in held:
            job.cancel()
        await _until_idle(30)
    finally:
        solver_workers.shutdown()


async def test_an_abandoned_candidate_is_stopped_and_frees_its_worker() -> None:
    """A pool job cannot be cancelled: before the stop flags, a candidate abandoned
    when another was won ran out its budget (here more than a minute) and its worker
    was no spare for the next room meanwhile."""
    try:
        job = asyncio.ensure_future(solver_workers.run(certify.try_candidate, *SLOW))
        await asyncio.sleep(1.0)  # the workers start, and the candidate runs
        assert not job.done() and not solver_workers.idle()
        job.cancel()
        # Far less than the candidate's budget (more than a minute), with room for
        # workers at SOLVER_NICE on a loaded machine (10 s ran out once in a CI run
        # beside three other test runs).
        took = await _until_idle(30)
        assert took < 30
        # Its slot is clean again: the next candidate takes it (the lowest free slot,
        # all being free) and is not stopped at once (a stopped one is not won).
        found = await solver_workers.run(certify.try_candidate, *QUICK)
        assert found is not None and found.line
    finally:
        solver_workers.shutdown()


def test_a_late_stop_does_not_reach_the_next_job_on_its_slot() -> None:
    """A job's cancel can come after the job ended and its slot went to the next job:
    that stop is for nobody (it would stop the next room's candidate)."""
    pool = solver_workers._workers()
    try:
        first, slot = solver_workers._take_job()
        solver_workers._end_job(pool, first, slot)
        second, again = solver_workers._take_job()
        assert slot is not None and again == slot  # the lowest free slot, taken again
        solver_workers._stop(pool, first, slot)  # the first job's cancel, late
        assert solver_workers._flags[slot] == 0
        solver_workers._stop(pool, second, again)
        assert solver_workers._flags[slot] == 1
        solver_workers._end_job(pool, second, again)
        assert solver_workers._flags[slot] == 0 and solver_workers.idle()
    finally:
        solver_workers.shutdown()


def _started(pool: solver_workers.Workers) -> list[int]:
    """The workers' pids, once each has started (set its niceness)."""
    deadline = time.monotonic() + 30
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    while True:
        pids = [pid for pid in pool.pids() if pid is not None]
        niceness = [os.getpriority(os.PRIO_PROCESS, pid) for pid in pids]
        if len(pids) == solver_workers.SOLVER_WORKERS and all(
            n == min(19, mine + solver_workers.SOLVER_NICE) for n in niceness
        ):
            return pids
        assert time.monotonic() < deadline, niceness
        time.sleep(0.05)


def _until_dead(pids: list[int]) -> None:
    """Until each process has died (a zombie until the node reaps it)."""
    deadline = time.monotonic() + 10
    for pid in pids:
        while processes.state(pid) not in ("Z", None):
            assert time.monotonic() < deadline, f"{pid} still running"
            time.sleep(0.01)


async def test_workers_killed_while_they_wait_are_started_again_and_stop_at_once() -> None:
    """A ``multiprocessing.Pool`` worker killed while it waited for a job held the
    pool's queue lock: the next jobs never ran and ``terminate`` waited for ever. Here
    a killed worker holds nothing: the next jobs run on workers started again, and
    stopping takes no time."""
    pool = solver_workers._workers()
    try:
        first = _started(pool)
        os.kill(first[0], signal.SIGKILL)
        os.kill(first[1], signal.SIGTERM)
        _until_dead(first)
        found = await asyncio.wait_for(
            asyncio.gather(*(solver_workers.run(certify.try_candidate, *QUICK) for _ in range(2))),
            60,
        )
        assert all(f is not None and f.line for f in found)
        assert not set(first) & {pid for pid in pool.pids() if pid is not None}
    finally:
        began = time.monotonic()
        solver_workers.shutdown()
        assert time.monotonic() - began < 5


async def test_ctrl_c_does_not_reach_a_workers_job() -> None:
    """A terminal's Ctrl-C goes to the node's whole group: the node decides when its
    workers stop, not the signal."""
    pool = solver_workers._workers()
    try:
        pids = _started(pool)
        job = asyncio.ensure_future(solver_workers.run(certify.try_candidate, *QUICK))
        for pid in pids:
            os.kill(pid, signal.SIGINT)
        found = await asyncio.wait_for(job, 60)
        assert found is not None and found.line
        assert pool.pids() == pids  # the same workers, alive
    finally:
        solver_workers.shutdown()


async def test_a_candidate_whose_worker_dies_is_not_won_and_the_loss_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = solver_workers._workers()
    try:
        pids = _started(pool)
        candidate = asyncio.ensure_future(certify._solve(*SLOW))
        await asyncio.sleep(1.0)  # the candidate runs on one of them
        assert not candidate.done()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        assert await asyncio.wait_for(candidate, 10) is None
        assert "a solver worker was lost" in caplog.text
        with pytest.raises(solver_workers.WorkerLost) as lost:
            job = asyncio.ensure_future(solver_workers.run(certify.try_candidate, *SLOW))
            await asyncio.sleep(1.0)
            for pid in pool.pids():  # None: the one whose loss the first job saw
                if pid is not None:  # (the other, killed above, may be reaped already)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            await asyncio.wait_for(job, 10)
        assert not lost.value.stopped
        assert solver_workers.idle()
    finally:
        solver_workers.shutdown()


async def test_stopping_ends_a_job_in_progress_quietly(caplog: pytest.LogCaptureFixture) -> None:
    """A draining node stops its workers with a candidate in progress: the candidate
    ends (not won), and nothing is logged as lost."""
    solver_workers._workers()
    candidate = asyncio.ensure_future(certify._solve(*SLOW))
    await asyncio.sleep(1.0)
    began = time.monotonic()
    solver_workers.shutdown()
    assert time.monotonic() - began < 5
    assert await asyncio.wait_for(candidate, 10) is None
    assert "lost" not in caplog.text


def _die_at_once(pipe: object, flags: object) -> None:
    """A worker that cannot live (a broken environment, no memory): it exits as it
    starts, before any job."""
    os._exit(3)


class _Counted(solver_workers.Workers):
    """Workers that note when each is started."""

    starts: ClassVar[list[float]] = []

    def _start(self, own_stderr: bool = False) -> tuple[BaseProcess, Connection]:
        self.starts.append(time.monotonic())
        return super()._start(own_stderr)


def test_a_worker_that_dies_as_it_starts_is_started_again_with_a_backoff(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that died at once every time was started again at once for every job,
    twice a job: a node's queued candidates (100 a room) spawned interpreter after
    interpreter back to back (9 in 3 s here, as fast as they start). Now the restarts
    of a worker that keeps dying before it answers a job back off (RESPAWN_FIRST_S,
    doubled up to RESPAWN_MAX_S), said in one log line, and stopping the workers cuts
    a wait short."""
    monkeypatch.setattr(solver_workers, "_worker_main", _die_at_once)
    pool = _Counted(1)
    ended: list[bool] = []
    for _ in range(50):
        pool.submit(solver_workers._Job(len, ((),), {}, lambda _, failed: ended.append(failed)))
    deadline = time.monotonic() + 30  # five starts: a second or two, more on a busy machine
    while len(pool.starts) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the fifth dies: its restart waits 2 s, which stop() cuts short
    pool.stop()
    pool._threads[0].join(2)
    assert not pool._threads[0].is_alive(), "stopping waited out a backoff"
    gaps = [later - earlier for earlier, later in itertools.pairwise(pool.starts)]
    # the waits 0, 0.25, 0.5, 1 s: the fourth restart comes at least 1 s after the third
    assert len(gaps) >= 4 and gaps[3] >= 0.9 * solver_workers.RESPAWN_FIRST_S * 4, gaps
    assert len(gaps) < 6, gaps  # none more within the 2 s wait stop() cut short
    assert all(ended)  # every job that ran was lost, none hung
    said = [r.getMessage() for r in caplog.records if "keeps dying" in r.getMessage()]
    assert len(said) == 1, said


def test_one_worker_that_keeps_dying_is_not_the_whole_node_failing() -> None:
    """``failing`` (every room then deals uncertified) is every worker dying as it
    starts, not one of them: a worker killed three times in a row (the kernel out of
    memory on large candidates, say) made every room of the node uncertified for 30 s
    while the other worker solved (a review)."""
    pool = solver_workers.Workers(2)
    try:
        pool._deaths = [solver_workers.FAILING_STREAK, 0]
        pool._last_death = time.monotonic()
        assert not pool.failing()
        pool._deaths = [solver_workers.FAILING_STREAK] * 2
        assert pool.failing()
    finally:
        pool.stop()
