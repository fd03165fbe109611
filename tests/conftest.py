"""What every test may use: private ``redis-server`` processes (``private_redis``,
tests/support/redis.py), how many workers ``-n auto`` starts, and the leak guard (a
test that leaves keys of its prefix in the shared Redis fails: tests/support/leaks.py).

The suite runs in parallel (pytest-xdist, ``-n auto`` in pyproject.toml): most tests
wait on sockets, timers and child processes, not on the CPU. Three workers per core.
With one per core the suite kept a 2-core machine 40 % busy (956 s of CPU in 1,176 s,
19 min 36 s) and CI took 27 min. With two per core a full run took 13 min 05 s on a
quiet machine (1,070 s of CPU: 68 % busy) but CI, on a busier one, 19 min 21 s — a
breath from its 20-minute limit (2026-12-07). With three per core the same suite took
11 min 08 s, 86 % busy (1,145 s of CPU), all 5,669 passing, and CI 11 min 19 s: past
that the CPU, not the waiting, bounds it. The suite grew to 6,448 tests and CI to 23 min
(2026-12-07, a slower machine): 15-16 min here, 91 % busy (1,620-1,790 s of CPU). Three
cuts brought it to 11 min 57 s (1,258 s): each test process solves a test deal once,
not once per test (tests/support/race.py); fewer pairings, where they added least — the
room core under asyncio's loop on the embedded store only, the client's tests against
one store (tests/rooms/conftest.py and tests/client/conftest.py say why); CI warms
pytest's cache of rewritten test modules first (.ci/run). Four workers were once set
aside for the chaos test, which alone loads both cores with three nodes and thirty
bots: one CI run saw three racers of the surviving nodes drop their connections. It
was not seen again in 16 runs under every load tried since (busy loops, CPU caps down
to a quarter of a core, ``-n 4`` beside it); only a node that answers nothing for
~7 s, the client's keepalive, drops them — tests/deploy/test_chaos.py now says who
dropped, when and why, should it recur.

Tests never share state: each uses its own Redis key prefix (``new_prefix``), temporary
directory and spare ports, and one that must disturb Redis itself (pause it, kill its
clients, configure it) starts a private one."""

from __future__ import annotations

import os

import pytest

from tests.support.leaks import pytest_runtest_setup, pytest_runtest_teardown  # noqa: F401
from tests.support.redis import private_redis  # noqa: F401  (fixture)

#: Workers per core for ``-n auto`` (rounded down, at least one), and the most workers
#: it starts on any machine.
WORKERS_PER_CORE = 3
MAX_WORKERS = 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, int(WORKERS_PER_CORE * (cores or 1))))
