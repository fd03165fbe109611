"""The solver benchmark's worker pool (solrace.bench.workers)."""

from __future__ import annotations

import subprocess
import sys


def _python(program: str) -> subprocess.CompletedProcess[str]:
    """``program`` run by this Python in a process of its own, which must succeed."""
    ran = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr
    return ran


#: A run of the pool in a process whose default start method is forkserver (Python
#: 3.14's on Linux): it prints the jobs' answers.
_UNDER_FORKSERVER = """
import functools, multiprocessing
multiprocessing.set_start_method("forkserver")
from solrace.bench import workers
if __name__ == "__main__":
    with workers.pool(2) as executor:
        print(sorted(executor.map(functools.partial(workers.call, abs), [-1, -2, -3])))
"""


def test_the_workers_start_forked_whatever_the_default_start_method() -> None:
    """A worker dies with the benchmark by checking that its parent is the benchmark,
    and its signals stay blocked until it has set them, both of which only a fork
    gives. The pool took the platform's default: under forkserver (Python 3.14's
    default on Linux) every worker exited at its start, BrokenProcessPool (a review)."""
    ran = _python(_UNDER_FORKSERVER)
    assert ran.stdout.strip() == "[1, 2, 3]", ran.stdout


#: The run's clean-up (bench/stopping.py's ``Children``) meeting the pool's workers
#: still there (a stop of the pool cut short): it prints how long it took.
_CLEAN_UP_WITH_WORKERS = """
import time
from solrace.bench import stopping, workers
if __name__ == "__main__":
    children = stopping.Children()
    with workers.pool(2):
        began = time.monotonic()
        children.stop()
        print(time.monotonic() - began)
"""


def test_the_clean_up_stops_the_workers_at_once() -> None:
    """The workers leave SIGTERM to the benchmark (they ignore it: ``timeout`` sends it
    to the whole group), so the clean-up's SIGTERM did nothing and each stop of them
    waited ``stopping.STOP_TIMEOUT_S`` (5.0 s) for the SIGKILL that followed."""
    ran = _python(_CLEAN_UP_WITH_WORKERS)
    assert float(ran.stdout) < 1.0, ran.stdout
