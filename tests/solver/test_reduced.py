"""The shuffled probes search a *reduced* game (``Search(..., reduced=True)``): no group
move that takes its first card off a card it builds on, unless that card can go up
next. Such a move is rarely useful but sometimes needed, so a reduced run that
exhausts its space proves nothing; these tests check that the solver never turns one
into ``unwinnable`` (against the independent exhaustive search of test_soundness.py)
and that the reduced move list is the full one minus exactly those moves."""

from __future__ import annotations

import random
from typing import Any

import pytest
from solrace.rules import deal, load_position
from solrace.rules.log import apply_entry
from solrace.solver import Outcome, solve_board, solve_deal
from solrace.solver import solve as solve_module
from solrace.solver.faces import DOWN
from solrace.solver.search import (
    EXHAUSTED,
    FOUND,
    OFF_NATURAL_PRIO,
    TAB,
    Search,
    apply,
    moves_of,
    settle,
)
from solrace.solver.solve import spec_of, state_of

from .test_soundness import CASES, check_against_exhaustive_search, winnable

#: Winnable, but only with a move off a natural base: the solver's line moves KH and
#: the KD group to empty columns, the KC group on to a third, then takes JC off QD
#: (which it builds on; QD cannot go up, TD lies under it) onto QH, so that TD-QD can
#: follow JC and QD move on to KC, freeing TD. Found by comparing the reduced and the
#: full search on random small positions: the reduced one exhausts, the full one wins.
NEEDS_OFF_NATURAL: dict[str, Any] = {
    "variant": "yukon",
    "tableau": [
        [],
        ["th", "qc", "JD", "KH"],
        [],
        [],
        [],
        [],
        ["KS", "JH", "KD", "QH", "KC", "TD", "QD", "JC"],
    ],
    "foundations": {"C": 10, "D": 9, "H": 9, "S": 12},
}


def _root(board: Any) -> Any:
    spec = spec_of(board)
    start = state_of(board)
    cols, downs, piles = list(start[0]), list(start[1]), list(start[2])
    talon, p = settle(spec, cols, downs, piles, start[3], start[4], None)
    return spec, (tuple(cols), tuple(downs), tuple(piles), talon, p, start[5])


def test_a_reduced_search_can_exhaust_a_winnable_position() -> None:
    board = load_position(NEEDS_OFF_NATURAL)
    assert winnable(board) is True
    spec, root = _root(board)
    assert Search(spec, root, reduced=True).run(100_000) == EXHAUSTED
    assert Search(spec, root).run(100_000) == FOUND


def test_a_reduced_probe_that_exhausts_is_no_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the main search's first run cut to one node, the probes run first; the
    first reduced probe exhausts, and the main search must still win the deal."""
    monkeypatch.setattr(solve_module, "FIRST_RUN", 1)
    board = load_position(NEEDS_OFF_NATURAL)
    result = solve_board(board, 100_000)
    assert result.outcome is Outcome.WON
    game = board.copy()
    for entry in result.moves:
        apply_entry(game, entry)
    assert game.is_won()


@pytest.mark.parametrize(("variant", "options"), CASES, ids=lambda x: str(x))
def test_probes_first_still_match_exhaustive_search(
    variant: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small random positions solved with the probes (reduced) running first: the
    outcome must agree with the engine's exhaustive search."""
    monkeypatch.setattr(solve_module, "FIRST_RUN", 1)
    rng = random.Random(f"reduced{variant}{sorted(options.items())}")
    check_against_exhaustive_search(variant, options, rng, 12)


@pytest.mark.parametrize("variant", ["yukon", "alaska", "double_yukon", "russian", "klondike"])
def test_reduced_moves_are_the_full_moves_minus_off_natural_ones(variant: str) -> None:
    """Along a won line of a few deals: the reduced list leaves out exactly the
    tableau moves of priority OFF_NATURAL_PRIO (and the same moves of a King-led group
    to an empty column, one priority lower)."""
    checked = 0
    for seed in range(3):
        board = deal(variant, seed, {})
        spec, state = _root(board)
        result = solve_deal(variant, seed, {}, 20_000)
        if not result.won:
            continue
        for _ in range(60):
            full = moves_of(spec, state)
            reduced = moves_of(spec, state, reduced=True)
            left_out = [m for m in full if m not in reduced]
            assert all(m in full for m in reduced)
            assert [m for m in full if m in reduced] == reduced
            for m in left_out:
                assert m[2] == TAB and m[0] in (OFF_NATURAL_PRIO, OFF_NATURAL_PRIO + 1)
                col = state[0][m[3]]
                assert spec.fits[col[m[4] - 1] * DOWN + col[m[4]]]
            checked += len(left_out)
            if not full:
                break
            state = apply(spec, state, full[0], None)
    if variant != "russian":  # runs only there: the rule rarely applies
        assert checked > 0
