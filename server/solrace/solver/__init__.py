"""A full-information solver for every variant of the rules engine (pure, standard
library only, no I/O, no clock).

    >>> from solrace.solver import solve_deal, Outcome
    >>> result = solve_deal("yukon", 42, {}, budget_nodes=100_000)
    >>> result.outcome in (Outcome.WON, Outcome.UNWINNABLE, Outcome.UNKNOWN)
    True

``won`` comes with a line that the engine has replayed to a win; ``unwinnable`` is a
proof (the whole soundly reduced search space was exhausted); ``unknown`` means the
budget ran out. See ``docs/solver.md``.
"""

from .solve import (
    DEFAULT_BUDGET,
    SERVER_BUDGET,
    Outcome,
    SolverError,
    SolveResult,
    solve_board,
    solve_deal,
)

__all__ = [
    "DEFAULT_BUDGET",
    "SERVER_BUDGET",
    "Outcome",
    "SolveResult",
    "SolverError",
    "solve_board",
    "solve_deal",
]
