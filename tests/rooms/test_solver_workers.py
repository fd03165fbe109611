"""The node's solver workers: they yield the CPU to the node, count the candidates
they hold (a second candidate in flight only goes to a spare worker), and stop a
candidate nobody waits for any more instead of running out its budget."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from solrace.rooms import certify, solver_workers

from tests.net.conftest import SOLVABLE_SECRET

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
    pool: Any = solver_workers._workers()
    try:
        pids = [process.pid for process in pool._pool]
        assert len(pids) == solver_workers.SOLVER_WORKERS
        deadline = time.monotonic() + 30
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        while True:  # a spawned worker sets its niceness once it has started
            niceness = [os.getpriority(os.PRIO_PROCESS, pid) for pid in pids]
            if all(n == min(19, mine + solver_workers.SOLVER_NICE) for n in niceness):
                break
            assert time.monotonic() < deadline, niceness
            time.sleep(0.05)
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
        took = await _until_idle(10)
        assert took < 10
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
