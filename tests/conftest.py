"""What every test may use: private ``redis-server`` processes (``private_redis``,
tests/support/redis.py), and how many workers ``-n auto`` starts.

The suite runs in parallel (pytest-xdist, ``-n auto`` in pyproject.toml): most tests
wait on sockets, timers and child processes, not on the CPU. One worker per core: with
two per core (387 s instead of 930 s in one process, on 2 cores) the chaos test, which
alone loads both cores with three nodes and thirty bots, once saw three racers of the
surviving nodes drop their connections (tests/deploy/test_chaos.py, "others dropped
too"); not yet explained, so the suite does not crowd it.

Tests never share state: each uses its own Redis key prefix, temporary directory and
spare ports, and one that must disturb Redis itself (pause it, kill its clients,
configure it) starts a private one."""

from __future__ import annotations

import os

import pytest

from tests.support.redis import private_redis  # noqa: F401  (fixture)

#: Workers per core for ``-n auto``, and the most workers it starts on any machine.
WORKERS_PER_CORE = 1
MAX_WORKERS = 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(MAX_WORKERS, WORKERS_PER_CORE * (cores or 1))
