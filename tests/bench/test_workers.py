"""The solver benchmark's worker pool (solrace.bench.workers)."""

from __future__ import annotations

import subprocess
import sys

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
    ran = subprocess.run(
        [sys.executable, "-c", _UNDER_FORKSERVER],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[1, 2, 3]", ran.stdout
