"""The solver's node budget bound: the most nodes any command line lets one search use.

Its one home, beside neither the solver's search nor the benchmark: ``solrace-rules
solve``/``hint`` (``--budget``) and the benchmark (``--budget``,
``--certify-budget``) read it from here, and so may the solver. The rules command
line took it from ``solrace.bench.limits``, so the rules engine depended on the
benchmark; and importing it from :mod:`solrace.solver` would load the whole search
core (and look for its compiled accelerator) for every ``solrace-rules`` command,
``deal`` and ``moves`` too, which the rules command line defers to ``solve`` and
``hint``. Standard library only, no import of the engine.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_BUDGET"]

#: Nodes a search may use at most (the default is ``solrace.solver.DEFAULT_BUDGET``,
#: the bench's ``--budget`` 20,000; the largest documented 2,000,000): the solver keeps
#: every position it reached, so memory grows with the budget — one Yukon deal at
#: 2,000,000 nodes took 87 s and 80 MB of one worker (2026-12-06); at the bound, some
#: 7 minutes and 300 MB a deal. Unbounded, a huge ``--budget`` searched for ever.
MAX_BUDGET: Final = 10_000_000
