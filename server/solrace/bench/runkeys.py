"""Where a benchmark run keeps its Redis keys: under one prefix of its own.

Every key a run writes — its stores', and its children's: the callgrind runs of the
core benchmark, the ``solrace-server`` of the server benchmark — is under
``FAMILY + RUN + ":"``, where RUN is the benchmark's process id, a dash and 12 random
hex digits (``solrace-bench-core:48213-9f3c0a1b2c4d:``). Why one prefix a run: each
store used to pick a prefix of its own, and what deleted it was that store's
``finally``; a run stopped where no ``finally`` ran (SIGTERM's default action, a child
killed) left its keys under names nobody knew — 4,674 of them from a core run killed at
25 s, which then failed the next CI's "no key left" check. Now ``python -m
solrace.bench`` deletes the whole run's prefix however the run ends (bench/stopping.py),
and only it: other runs' prefixes differ by their process id and random part. A run
killed by SIGKILL, which nothing can catch, leaves its keys; its process id names them
(docs/performance.md, "When a run is killed").
"""

from __future__ import annotations

import os
import uuid
from typing import Final

from solrace.store import Store

#: The prefix family of the store and server benchmarks' keys.
BENCH_FAMILY: Final = "solrace-bench:"
#: The prefix family of the room-core benchmark's keys.
CORE_FAMILY: Final = "solrace-bench-core:"


def run_prefix(family: str) -> str:
    """A new run's prefix: ``family``, this process's id, a dash, 12 random hex digits
    and a colon. No glob character: the prefix is its own SCAN pattern's start."""
    return f"{family}{os.getpid()}-{uuid.uuid4().hex[:12]}:"


def part(prefix: str, name: str) -> str:
    """A prefix under the run's ``prefix`` for one store of the run (one drive, one
    child): ``name``, a dash and 8 random hex digits, so that two stores of a run never
    share a key even when one of them could not delete its own."""
    return f"{prefix}{name}-{uuid.uuid4().hex[:8]}:"


async def delete_prefix(redis_url: str, prefix: str) -> int:
    """Delete every key under ``prefix`` (on a cluster, on every master); how many."""
    store = await Store.connect(redis_url, prefix)
    try:
        return await store.delete_all()
    finally:
        await store.close()


__all__ = ["BENCH_FAMILY", "CORE_FAMILY", "delete_prefix", "part", "run_prefix"]
