"""Solver benchmark and winnability study: ``python -m solrace.bench solver --json``.

For each variant (a preset: a variant id plus options) it solves deals of consecutive
seeds ``start … start+deals−1`` at a node budget, on several processes, and reports
won / unwinnable / unknown counts, the winnable share with a 95 % Wilson interval
(unknowns counted as lost for the lower bound and as won for the upper bound), solve
times and nodes. The *certify* measure is what a server pays to find a winnable Yukon
deal: starting from a seed, solve consecutive seeds at the certify budget until one is
won, and time the whole walk (discarded seeds included). The *node certify* measure
(``--certify-node``, the JSON's ``certify_node``) times the same walks through the
node's own code and worker pool (:mod:`solrace.rooms.certify`,
:mod:`solrace.rooms.solver_workers`), one candidate at a time and then as the node
runs them: what a room waits for its deal.

Times are wall-clock per solve inside the worker process, so they are what one core
does while the other core does the same: a fair picture of a 2-core server.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final

from solrace.solver import SERVER_BUDGET, solve_deal

from . import workers as bench_workers
from .failed import RunFailed

#: Presets: name → (variant, options). Options are the engine's defaults unless stated.
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "yukon": ("yukon", {}),
    "russian": ("russian", {}),
    "alaska": ("alaska", {}),
    "australian": ("australian", {}),
    "double_yukon": ("double_yukon", {}),
    "klondike": ("klondike", {}),
    "klondike-draw3": ("klondike", {"draw": 3}),
    # Solvitaire's "klondike": draw 3, unlimited redeals, foundations not removable
    # (its default), every card known — the rules of the published 81.945 %. Known,
    # not face up: a dealt face-down card still moves only once it is uncovered, which
    # is the engine's default deal (the solver sees every card of any deal). The
    # engine's ``thoughtful`` deals every card face up, and a face-up run may then go
    # through cards Solvitaire keeps face down: a more permissive game (below).
    "klondike-draw3-solvitaire": ("klondike", {"draw": 3, "foundation_to_tableau": False}),
    "klondike-draw3-thoughtful": (
        "klondike",
        {"draw": 3, "thoughtful": True, "foundation_to_tableau": False},
    ),
}

#: With a log, running counts are written every this many deals.
PROGRESS_EVERY = 500
OUTCOMES = ("won", "unwinnable", "unknown")

DEFAULT_PRESETS = (
    "yukon",
    "russian",
    "alaska",
    "australian",
    "double_yukon",
    "klondike",
    "klondike-draw3",
)

# The sizes of a run with none given: a quick look at every measure (22-45 s on a
# 2-core machine under load 6-7, 18-21 s of CPU), at the server's node budget. They
# were 200 deals at 100,000 nodes, 200 certify walks and 100 node walks a setting —
# the study's sizes: a bare run, killed after 10 minutes, was not half-way (each
# Australian deal the solver leaves unknown costs the whole budget). The studies of
# docs/winnability.md name their sizes, so these defaults are no part of their figures.
#: Deals per preset.
DEFAULT_DEALS: Final = 20
#: Certify walks (``--certify``).
DEFAULT_WALKS: Final = 20
#: Certify walks through the node's workers, per setting (``--certify-node``).
DEFAULT_NODE_WALKS: Final = 10


def _solve_one(job: tuple[str, dict[str, Any], int, int]) -> tuple[int, str, int, int, float]:
    variant, options, seed, budget = job
    t0 = time.perf_counter()
    result = solve_deal(variant, seed, options, budget)
    elapsed = time.perf_counter() - t0
    return seed, result.outcome.value, result.nodes, len(result.moves), elapsed


def _certify_one(job: tuple[str, dict[str, Any], int, int, int]) -> tuple[int, int, float]:
    """Walk consecutive seeds from ``first`` until one is won; (seeds tried, winning
    seed, seconds). Gives up after ``limit`` seeds (never reached in practice)."""
    variant, options, first, budget, limit = job
    t0 = time.perf_counter()
    for k in range(limit):
        if solve_deal(variant, first + k, options, budget).won:
            return k + 1, first + k, time.perf_counter() - t0
    return limit, -1, time.perf_counter() - t0


#: The walks' secrets: fixed, so every run (and both settings) tries the same candidates.
_WALK_SECRET = b"solrace certify benchmark walk %d"


async def _node_walk(
    variant: str, options: dict[str, Any], secret: bytes, budget: int, in_flight: int
) -> tuple[int, float]:
    """One certification through the node's own code and worker pool
    (:func:`solrace.rooms.certify.first_won` over ``try_candidate`` on the node's
    solver workers): (candidates started, seconds)."""
    from solrace.rooms import certify as node_certify
    from solrace.rooms import solver_workers

    started = 0

    async def solve(attempt: int) -> node_certify.Certificate | None:
        nonlocal started
        started += 1
        found: node_certify.Certificate | None = await solver_workers.run(
            node_certify.try_candidate, variant, options, secret, 1, attempt, None, budget
        )
        return found

    t0 = time.perf_counter()
    found = await node_certify.first_won(solve, lambda: True, in_flight, spare=solver_workers.spare)
    elapsed = time.perf_counter() - t0
    if found is None or found.line is None:  # None: never, the walk is always wanted
        raise RunFailed(f"no candidate won in {started}")
    return started, elapsed


async def _node_walks(
    preset: str, walks: int, budget: int, in_flight: int, idle: bool
) -> list[tuple[int, float]]:
    """``walks`` certifications one after another. ``idle``: each begins once the
    workers are idle (a room arriving at a quiet node); else right after the last (rooms
    arriving together: a candidate a walk abandoned holds its worker until it stops,
    which is then no spare for the next walk's second candidate)."""
    from solrace.rooms import solver_workers

    variant, options = PRESETS[preset]
    out = []
    for i in range(walks):
        while idle and not solver_workers.idle():
            await asyncio.sleep(0.005)
        out.append(await _node_walk(variant, options, _WALK_SECRET % i, budget, in_flight))
    return out


def _walk_figures(rows: list[tuple[int, float]]) -> dict[str, Any]:
    secs = [r[1] for r in rows]
    return {
        "seconds_p50": round(_quantile(secs, 0.5), 3),
        "seconds_p95": round(_quantile(secs, 0.95), 3),
        "seconds_max": round(max(secs), 3),
        "candidates_mean": round(sum(r[0] for r in rows) / len(rows), 3),
    }


def node_certify_run(preset: str, walks: int, budget: int) -> dict[str, Any]:
    """The certify latency a room gets from the node: ``walks`` walks with one
    candidate at a time (the node before CANDIDATES_IN_FLIGHT: the baseline, same
    run), then with the node's CANDIDATES_IN_FLIGHT, on the node's worker pool; each
    setting with every walk starting on idle workers (``idle``) and back to back
    (``back_to_back``)."""
    from solrace.rooms import certify as node_certify
    from solrace.rooms import solver_workers
    from solrace.solver.accel import accelerated

    async def measure() -> dict[str, Any]:
        settings: dict[str, Any] = {}
        try:
            await _node_walks(preset, 2, budget, 1, True)  # warm-up: workers spawn, import
            for in_flight in (1, node_certify.CANDIDATES_IN_FLIGHT):
                figures = settings[str(in_flight)] = {}
                for timing, idle in (("idle", True), ("back_to_back", False)):
                    rows = await _node_walks(preset, walks, budget, in_flight, idle)
                    figures[timing] = _walk_figures(rows)
        finally:
            solver_workers.shutdown()
        return settings

    return {
        "preset": preset,
        "budget_nodes": budget,
        "walks": walks,
        "solver_workers": solver_workers.SOLVER_WORKERS,
        "accelerated": accelerated(),
        "in_flight": asyncio.run(measure()),
    }


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def _summary(rows: Iterable[tuple[int, str, int, int, float]]) -> dict[str, Any]:
    rows = list(rows)
    n = len(rows)
    won = sum(1 for r in rows if r[1] == "won")
    unwinnable = sum(1 for r in rows if r[1] == "unwinnable")
    unknown = n - won - unwinnable
    low, _ = wilson(won, n)
    _, high = wilson(won + unknown, n)
    times = [r[4] for r in rows]
    nodes = [r[2] for r in rows]
    won_rows = [r for r in rows if r[1] == "won"]
    return {
        "deals": n,
        "won": won,
        "unwinnable": unwinnable,
        "unknown": unknown,
        "won_share": round(won / n, 5) if n else None,
        "winnable_low95": round(low, 5),
        "winnable_high95": round(high, 5),
        "decided_share_ci95": [round(x, 5) for x in wilson(won, won + unwinnable)],
        "time_ms": {
            "p50": round(_quantile(times, 0.5) * 1000, 1),
            "p95": round(_quantile(times, 0.95) * 1000, 1),
            "max": round(max(times, default=0.0) * 1000, 1),
            "mean": round(sum(times) / n * 1000, 1) if n else None,
        },
        "nodes": {
            "p50": _quantile(nodes, 0.5),
            "p95": _quantile(nodes, 0.95),
            "max": max(nodes, default=0),
        },
        "won_nodes_p50": _quantile([r[2] for r in won_rows], 0.5),
        "won_line_p50": _quantile([r[3] for r in won_rows], 0.5),
    }


def run(
    presets: Sequence[str] = DEFAULT_PRESETS,
    deals: int = DEFAULT_DEALS,
    budget: int = SERVER_BUDGET,
    workers: int | None = None,
    start: int = 0,
    deals_by_preset: dict[str, int] | None = None,
    certify: int = DEFAULT_WALKS,
    certify_budget: int | None = None,
    certify_preset: str = "yukon",
    log: Any = None,
    node_walks: int = 0,
) -> dict[str, Any]:
    workers = workers or os.cpu_count() or 1
    out: dict[str, Any] = {
        "benchmark": "solver",
        "budget_nodes": budget,
        "start_seed": start,
        "workers": workers,
        "variants": {},
    }
    with bench_workers.pool(workers) as pool:
        for name in presets:
            variant, options = PRESETS[name]
            count = (deals_by_preset or {}).get(name, deals)
            jobs = [(variant, options, start + i, budget) for i in range(count)]
            t0 = time.perf_counter()
            rows = []
            solve = functools.partial(bench_workers.call, _solve_one)
            for row in pool.map(solve, jobs, chunksize=8):
                rows.append(row)
                if log is not None and not len(rows) % PROGRESS_EVERY:
                    # Running counts, so a long study's progress (and a partial
                    # result) can be read before it ends.
                    tally = {o: sum(1 for r in rows if r[1] == o) for o in OUTCOMES}
                    print(name, "progress", len(rows), tally, file=log, flush=True)
            summary = _summary(rows)
            summary["variant"] = variant
            summary["options"] = options
            summary["wall_s"] = round(time.perf_counter() - t0, 1)
            out["variants"][name] = summary
            if log is not None:
                print(name, summary, file=log, flush=True)
        if certify:
            variant, options = PRESETS[certify_preset]
            cbudget = certify_budget or budget
            # Start points spread over the seed space, each walking consecutive seeds.
            jobs2 = [(variant, options, 10**9 + 7919 * i, cbudget, 1000) for i in range(certify)]
            certify_one = functools.partial(bench_workers.call, _certify_one)
            walks = list(pool.map(certify_one, jobs2, chunksize=4))
            secs = [w[2] for w in walks]
            tried = [w[0] for w in walks]
            out["certify"] = {
                "preset": certify_preset,
                "budget_nodes": cbudget,
                "walks": certify,
                "seconds_p50": round(_quantile(secs, 0.5), 3),
                "seconds_p95": round(_quantile(secs, 0.95), 3),
                "seconds_max": round(max(secs, default=0.0), 3),
                "seeds_tried_mean": round(sum(tried) / len(tried), 3) if tried else None,
                "seeds_tried_max": max(tried, default=0),
            }
            if log is not None:
                print("certify", out["certify"], file=log, flush=True)
    if node_walks:
        # After the study's pool is gone: the node's workers have the machine.
        from solrace.rooms.certify import CERTIFY_BUDGET_NODES

        out["certify_node"] = node_certify_run(
            certify_preset, node_walks, certify_budget or CERTIFY_BUDGET_NODES
        )
        if log is not None:
            print("certify_node", out["certify_node"], file=log, flush=True)
    return out
