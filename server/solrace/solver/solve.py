"""The solver's API: solve a deal or a position, get a typed, checked result.

``solve_deal`` is a top-level function of plain arguments so that a server can hand it
to a ``ProcessPoolExecutor``; its result is a frozen dataclass of plain values, so it
pickles. Every ``won`` line is replayed on the real engine the way the race server
applies entries (:func:`solrace.rules.log.apply_entry`: the move, then auto-complete
when the option is on) before it is returned, so a line the engine would refuse can
never leave this module.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from solrace.rules import Board, deal
from solrace.rules.cards import FACE
from solrace.rules.log import apply_entry

from .deadlock import dead, deep_dead
from .faces import DOWN
from .search import (
    BUILD_SUIT_UP_OR_DOWN,
    EXHAUSTED,
    FOUND,
    OUT_OF_BUDGET,
    SHUFFLE_SIZE,
    Search,
    Spec,
    State,
    apply,
    finished,
    settle,
)

#: The node budget used when none is given (command line, hints): decides about 95 % of
#: Yukon deals in at most a few seconds on a slow core (docs/winnability.md).
DEFAULT_BUDGET: Final = 100_000

#: The node budget the race server uses to certify a deal (``solve_deal(..., budget_nodes=
#: SERVER_BUDGET)``). Chosen for the certify latency, not for deciding every deal: the
#: server discards an ``unknown`` seed and tries the next, so each discarded seed costs
#: the whole budget, and the p95 of a certification is about one discarded seed plus
#: one win. The optional compiled accelerator is not assumed: a server without it must
#: meet the latency too. The unknown share and certify times it gives are measured in
#: docs/winnability.md ("Server budget"), not restated here.
SERVER_BUDGET: Final = 20_000

#: Difficulty grades by nodes searched before the first win (docs/solver.md).
GRADES: Final = ((300, "easy"), (3_000, "medium"), (30_000, "hard"))


class Outcome(enum.Enum):
    """What the search established. The three are never confused: ``UNWINNABLE`` is
    returned only when the whole (soundly reduced) search space was exhausted."""

    WON = "won"
    UNWINNABLE = "unwinnable"
    UNKNOWN = "unknown"


class SolverError(RuntimeError):
    """The solver produced a line the engine refuses: a bug in the solver, never bad
    input (bad input raises the engine's own errors)."""


@dataclass(frozen=True, slots=True)
class SolveResult:
    """The outcome of one solve.

    ``moves`` is the winning line in canonical notation (empty unless ``WON``): played
    through ``apply_entry`` (the race server's path) from the start position it ends
    with ``is_won()``; it stops where auto-complete takes over when that option is on,
    and spells out the final foundation moves when it is off. ``nodes`` is the number
    of positions the search expanded (for ``WON``, before it found the line: the
    difficulty figure); ``stored`` the number of distinct positions it remembered.
    """

    outcome: Outcome
    moves: tuple[str, ...]
    nodes: int
    stored: int
    budget_nodes: int

    @property
    def won(self) -> bool:
        return self.outcome is Outcome.WON

    @property
    def difficulty(self) -> str | None:
        """``easy``, ``medium``, ``hard`` or ``very hard`` for a won deal (by nodes
        searched before the first win with the solver's human-like move order), None
        otherwise."""
        if self.outcome is not Outcome.WON:
            return None
        for limit, name in GRADES:
            if self.nodes <= limit:
                return name
        return "very hard"

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (for logs, benchmarks and the server)."""
        return {
            "outcome": self.outcome.value,
            "moves": list(self.moves),
            "nodes": self.nodes,
            "stored": self.stored,
            "budget_nodes": self.budget_nodes,
            "difficulty": self.difficulty,
        }


def spec_of(board: Board) -> Spec:
    """The search's view of the board's rules, read from the engine itself."""
    opts = board.options
    return Spec(
        ncols=board.columns,
        decks=board.decks,
        build=board.build,
        runs_only=board.runs_only,
        has_stock=board.has_stock,
        draw=opts.draw,
        max_recycles=None if opts.max_passes is None else opts.max_passes - 1,
        f2t=opts.foundation_to_tableau,
        auto_flip=opts.auto_flip,
    )


def state_of(board: Board) -> State:
    """The compact position of ``board`` (full information: face-down cards included)."""
    cols = tuple(
        bytes(FACE[x] + DOWN for x in col[:down]) + bytes(FACE[x] for x in col[down:])
        for col, down in zip(board.tableau, board.down, strict=True)
    )
    talon = bytes(FACE[x] for x in board.waste) + bytes(FACE[x] for x in reversed(board.stock))
    piles = tuple(len(p) for p in board.piles)
    return (cols, tuple(board.down), piles, talon, len(board.waste), board.recycles)


def _line(spec: Spec, root: State, path: list[Any], prefix: list[str]) -> list[str]:
    """Notation of the root's automatic moves and of every move on ``path``."""
    out = list(prefix)
    state = root
    for move in path:
        state = apply(spec, state, move, out)
    return out


def _checked(board: Board, entries: list[str]) -> tuple[str, ...]:
    """Replay ``entries`` as the race server does; return the line cut where the game
    is won (auto-complete may finish it before the line ends) and completed with the
    final foundation moves when auto-complete is off. Raises :class:`SolverError` if
    the engine refuses a move or the line does not win."""
    game = board.copy()
    line: list[str] = []
    for entry in entries:
        if game.is_won():
            break
        try:
            apply_entry(game, entry)
        except Exception as exc:
            raise SolverError(f"solver line refused by the engine at {entry!r}: {exc}") from exc
        line.append(entry)
    while not game.is_won() and game.can_auto_complete():
        # The first move auto-complete would make; apply_entry then finishes the game
        # itself when the option is on, and we spell out the rest when it is off.
        entry = str(game.copy().auto_complete()[0])
        apply_entry(game, entry)
        line.append(entry)
    if not game.is_won():
        raise SolverError("solver line does not win on the engine")
    return tuple(line)


#: Nodes of the first run, in the solver's own order.
FIRST_RUN: Final = 1_000
#: Unit of the shuffled runs' budgets, which follow the Luby sequence (1,1,2,1,1,2,4,…).
PROBE_UNIT: Final = 250
#: Share of the budget the main (ordered, resumed) search gets; the shuffled probes
#: get the rest. 0.3 rather than the former 0.5: at 20,000 nodes it left fewer
#: unknowns in every variant tried (Yukon seeds 0-999: 85 against 89; Double Yukon
#: 0-299: 5 against 10; Alaska 0-199: 18 against 22; Solvitaire's Klondike 0-199:
#: 27 against 30), and no fewer proofs (docs/winnability.md).
MAIN_SHARE: Final = 0.3
#: The nested occupancy split tried at the root once the first run has not decided
#: the deal: levels, and the most fixed points it may run.
#: Yukon seeds 0-999 at 20,000 nodes: 60 -> 57 unknown (306, 321, 511 and 876 proved
#: lost, each within 155 fixed points; one deal won before is unknown now, the budget
#: its search had went to the split); a fourth level proves no more.
ROOT_SPLIT_DEPTH: Final = 3
ROOT_SPLIT_CAP: Final = 250
#: Nodes of the budget one of those fixed points is charged: about what it costs in
#: time (pure Python, Yukon: 0.23 ms a fixed point against 67 µs a node of an
#: undecided solve), so the budget stays a time budget and a room's certification
#: does not slow down. Charged 1, it left 56 unknown of those 1,000 instead of 57, but
#: every undecided seed took up to 0.1 s longer.
ROOT_SPLIT_NODES: Final = 4


def luby(i: int) -> int:
    """The i-th term (1-based) of the Luby sequence 1,1,2,1,1,2,4,1,1,2,1,1,2,4,8,…: the
    restart schedule within a constant factor of the best fixed one for any
    heavy-tailed run-time distribution (Luby, Sinclair and Zuckerman, 1993)."""
    k = 1
    while (1 << k) - 1 < i:
        k += 1
    while (1 << k) - 1 != i:
        i -= (1 << (k - 1)) - 1
        k = 1
        while (1 << k) - 1 < i:
            k += 1
    return 1 << (k - 1)


def _restarts(
    spec: Spec, root: State, budget: int, should_stop: Callable[[], bool] | None
) -> tuple[int, list[Any], int, int]:
    """A *main* depth-first search in the solver's own move order, resumed between
    short *probes*: runs in a random (seeded, so reproducible) order — fully random on
    odd runs, the solver's priorities with random tie-breaks on even ones — with
    Luby-sequence budgets. The main search starts with :data:`FIRST_RUN` nodes and
    then keeps its share (:data:`MAIN_SHARE`) of everything spent.

    Why: the time to a win is heavy-tailed. A depth-first search that commits to a bad
    early move can spend any budget below it, and the move-order heuristics that win
    most deals in under a hundred nodes mislead the search in the same way on every
    run; a randomly ordered run often wins a "hard" deal in a few hundred nodes. A
    proof, on the other hand, needs one run to exhaust its space: every run is a
    depth-first search from the root with its own transposition table, and the main
    one, never restarted and never reduced, can exhaust a space of up to its share of
    the budget. The probes search the reduced game (:class:`Search`, except in Alaska),
    so a probe that exhausts proves nothing: probing stops and the main search gets
    the rest of the budget.

    Between the first run and the first probe, a deal still open gets the nested
    occupancy split at its root (:func:`~solrace.solver.deadlock.deep_dead`), its
    fixed points counted like the probes' nodes.
    """
    main = Search(spec, root)
    result = main.run(min(FIRST_RUN, budget), should_stop)
    if result != OUT_OF_BUDGET:
        return result, main.path, main.nodes, len(main.seen)
    probed = 0
    if budget - main.nodes > ROOT_SPLIT_CAP * ROOT_SPLIT_NODES:
        # A deal the obvious plays have not decided: worth a stronger proof attempt
        # at the root, paid from the budget (docs/solver.md, "Nested split").
        lost, runs = deep_dead(spec, root, ROOT_SPLIT_DEPTH, ROOT_SPLIT_CAP)
        probed = runs * ROOT_SPLIT_NODES
        if lost:
            return EXHAUSTED, [], main.nodes + probed, len(main.seen)
    probing = True
    # Alaska builds up or down: a card has a natural base on either side, and taking
    # it off one is needed too often (seeds 0-199: 17 unknown instead of 8).
    reduced = spec.build != BUILD_SUIT_UP_OR_DOWN
    stored = len(main.seen)
    run = 1
    while True:
        left = budget - main.nodes - probed
        if not probing:
            # A reduced probe exhausted its space: every other probe would search
            # the same reduced space, so the main search gets the rest.
            result = main.run(main.nodes + left, should_stop) if left > 0 else OUT_OF_BUDGET
            return (
                result,
                main.path if result == FOUND else [],
                main.nodes + probed,
                max(stored, len(main.seen)),
            )
        if left <= 0 or (should_stop is not None and should_stop()):
            return OUT_OF_BUDGET, [], main.nodes + probed, max(stored, len(main.seen))
        shuffle = random.Random(run).randbytes(SHUFFLE_SIZE) + bytes((run & 1,))
        # Odd runs ignore the priorities, even runs keep them and only shuffle ties:
        # on 200 Yukon deals this alternation left 27 unknown where all-random runs
        # left 31 and tie-shuffles only 34.
        probe = Search(spec, root, shuffle, reduced=reduced)
        result = probe.run(min(PROBE_UNIT * luby(run), left), should_stop)
        probed += probe.nodes
        stored = max(stored, len(probe.seen))
        if result == FOUND:
            return result, probe.path, main.nodes + probed, stored
        if result == EXHAUSTED:
            if not reduced:
                return result, [], main.nodes + probed, stored  # a proof, as the main's
            # No proof: a reduced run leaves moves out (Search).
            probing = False
            continue
        run += 1
        left = budget - main.nodes - probed
        target = max(main.nodes, int(probed * MAIN_SHARE / (1 - MAIN_SHARE)))
        result = main.run(min(target, main.nodes + left), should_stop)
        if result != OUT_OF_BUDGET:
            return result, main.path, main.nodes + probed, max(stored, len(main.seen))


def solve_board(
    board: Board,
    budget_nodes: int = DEFAULT_BUDGET,
    should_stop: Callable[[], bool] | None = None,
) -> SolveResult:
    """Solve the game from ``board``'s position (left unchanged), with full
    information. ``should_stop`` is polled every 1,024 nodes; a True answer ends the
    search as ``UNKNOWN`` (pass a clock check for a time budget: this module reads no
    clock)."""
    if budget_nodes < 1:
        raise ValueError("budget_nodes must be at least 1")
    spec = spec_of(board)
    start = state_of(board)
    cols, downs, piles = list(start[0]), list(start[1]), list(start[2])
    prefix: list[str] = []
    talon, p = settle(spec, cols, downs, piles, start[3], start[4], prefix)
    root: State = (tuple(cols), tuple(downs), tuple(piles), talon, p, start[5])
    if board.is_won():
        return SolveResult(Outcome.WON, (), 0, 1, budget_nodes)
    if finished(root):
        return SolveResult(Outcome.WON, _checked(board, prefix), 0, 1, budget_nodes)
    if dead(spec, root):
        return SolveResult(Outcome.UNWINNABLE, (), 0, 1, budget_nodes)
    result, path, nodes, stored = _restarts(spec, root, budget_nodes, should_stop)
    if result == FOUND:
        line = _checked(board, _line(spec, root, path, prefix))
        return SolveResult(Outcome.WON, line, nodes, stored, budget_nodes)
    if result == EXHAUSTED:
        return SolveResult(Outcome.UNWINNABLE, (), nodes, stored, budget_nodes)
    return SolveResult(Outcome.UNKNOWN, (), nodes, stored, budget_nodes)


def solve_deal(
    variant: str,
    seed: int,
    options: Mapping[str, Any] | None = None,
    budget_nodes: int = DEFAULT_BUDGET,
    should_stop: Callable[[], bool] | None = None,
) -> SolveResult:
    """Solve the deal ``(variant, seed, options)`` from its start (``should_stop`` as
    for :func:`solve_board`).

    Top level and plain arguments, so it runs in a ``ProcessPoolExecutor``. Raises the
    engine's :class:`~solrace.rules.RulesError` for an unknown variant, bad options or
    a bad seed, exactly as :func:`solrace.rules.deal` does.
    """
    return solve_board(deal(variant, seed, dict(options or {})), budget_nodes, should_stop)


__all__ = [
    "DEFAULT_BUDGET",
    "SERVER_BUDGET",
    "Outcome",
    "SolveResult",
    "SolverError",
    "solve_board",
    "solve_deal",
]
