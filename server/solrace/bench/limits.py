"""The largest size each benchmark option takes, and why (docs/performance.md).

Unbounded, ``--racers 1000000`` or ``--rooms 100000000000000000000`` was accepted and
the run set off to build it: connections until the machine's file descriptors ran out,
rooms until Redis filled, a list of every deal's job before the first was solved. Each
bound is well past every run docs/performance.md and docs/winnability.md report, and
near where a run stops measuring what it is for; past it ``python -m solrace.bench``
says so in one line, status 2, before anything runs. The solver's ``--budget`` and
``--certify-budget`` are bound by the solver's own ``MAX_BUDGET``
(:mod:`solrace.solver_budget`), which ``solrace-rules`` shares.
"""

from __future__ import annotations

from typing import Final

from solrace.protocol.limits import MAX_LOG_LEN

#: ``--seconds``: the rules suite's time budget (default 4) and the server suite's
#: measured window (default 20; the documented runs 3-20). The window keeps every
#: round trip's latency — ten minutes at the most a node has carried (6,630 moves/s)
#: are 4 million — and ``--find-max`` runs one window a step (up to 12): two hours.
MAX_SECONDS: Final = 600.0

#: ``--warmup`` (server; default 3): the rooms have started and the node's timers
#: settled within seconds; a minute is twenty times the default.
MAX_WARMUP_S: Final = 60.0

#: ``--racers`` (server; default 200): 2,000 racers and their 500 spectators are 2,500
#: connections in the load and in the node, and at the default rate offer 10,000
#: moves/s, past the most a node carried in docs/performance.md (6,630, round 24): a
#: larger load measures only a node that cannot keep up.
MAX_RACERS: Final = 2_000

#: ``--rate`` (server; moves/s per racer, default 5): a racer sends its next move only
#: once the last is answered, so it cannot keep a pace faster than the node answers; at
#: 100 a second (one every 10 ms) the interval is already a fifth of the latency
#: ``--find-max`` allows (``server.MAX_P99_MS``, 50 ms). More load is more racers.
MAX_RATE: Final = 100.0

#: ``--rooms`` (core; default 10): a hundred times the default, 5,000 peers of one
#: process, and set up under valgrind (``--callgrind``, about 50 times slower) for each
#: of its eight runs; the count per move does not depend on the rooms past a few.
MAX_ROOMS: Final = 1_000

#: ``--moves`` (core; moves per racer, default 40): a racer's log holds no more
#: (``protocol.limits.MAX_LOG_LEN``): the node refuses the moves past it, and the run
#: would fail its count.
MAX_MOVES: Final = MAX_LOG_LEN

#: ``--deals`` (solver; deals per preset, default 20; the studies of
#: docs/winnability.md ran 10,000): hours of a 2-core machine at 100,000 nodes,
#: and a winnable share already known within ±0.3 % (95 % Wilson interval). Every
#: deal's job is listed before the first is solved.
MAX_DEALS: Final = 100_000

#: ``--certify`` and ``--certify-node`` (solver; certify walks, default 20 and 10,
#: the documented 300): a walk solves deals until one is won (its p95 0.3-1.3 s at
#: the server's budget, docs/performance.md "Solver"); 10,000 are over thirty times
#: the documented, hours of one core on the slower presets.
MAX_WALKS: Final = 10_000

#: ``--workers`` (solver processes): past it each machine's cores are long
#: outnumbered. Unbounded, 1000 started 1000 processes on a 2-core machine, and a
#: number past a C int was an OverflowError traceback as the pool started.
MAX_WORKERS: Final = 256

__all__ = [
    "MAX_DEALS",
    "MAX_MOVES",
    "MAX_RACERS",
    "MAX_RATE",
    "MAX_ROOMS",
    "MAX_SECONDS",
    "MAX_WALKS",
    "MAX_WARMUP_S",
    "MAX_WORKERS",
]
