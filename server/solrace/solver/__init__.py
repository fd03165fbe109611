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

from ._accel_path import usable as _usable

# The optional compiled accelerator (solver/accel.py): when a build of the current
# sources exists, the search core loads from it. Same code, same answers.
_compiled = _usable()
if _compiled is not None:
    __path__.insert(0, str(_compiled))

from .solve import (  # noqa: E402  (after the search path is set)
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
