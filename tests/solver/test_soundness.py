"""``unwinnable`` is a proof: on small positions (a few cards left, loaded through the
engine's position JSON), the solver's outcome is checked against an exhaustive search
written here independently — plain depth-first search over the engine's own
``legal_moves``/``push``/``pop``, no pruning, no automatic moves, no canonical keys.
Every variant is covered, with the options that change the rules of play except
``foundation_to_tableau`` (with cards coming back off the foundations even a few cards'
game is too large for an unpruned search; its safe-move rule is argued in
docs/solver.md and its won lines are replayed in test_solve.py); a wrong
safe-move rule, a wrong talon shortcut or an unsound transposition key shows up as an
``unwinnable`` the exhaustive search can win (or a ``won`` it cannot)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from solrace.rules import Board, dump_position, load_position
from solrace.rules.cards import NAMES, SUITS, face_of
from solrace.rules.log import apply_entry
from solrace.solver import Outcome, solve_board

from tests.support.solver import board_key

CASES: list[tuple[str, dict[str, Any]]] = [
    ("yukon", {}),
    ("yukon", {"auto_flip": False}),
    ("russian", {}),
    ("alaska", {}),
    ("australian", {}),
    ("double_yukon", {}),
    ("klondike", {"foundation_to_tableau": False}),
    ("klondike", {"foundation_to_tableau": False, "auto_flip": False}),
    ("klondike", {"draw": 3, "foundation_to_tableau": False}),
    ("klondike", {"draw": 3, "foundation_to_tableau": False, "thoughtful": True}),
    ("klondike", {"draw": 3, "max_passes": 2, "foundation_to_tableau": False}),
    ("klondike", {"draw": 1, "max_passes": 1, "foundation_to_tableau": False}),
]
POSITIONS_PER_CASE = 12


def winnable(board: Board, limit: int = 20_000) -> bool | None:
    """Exhaustive search on the engine: is a won position reachable? None if the
    position has more than ``limit`` positions (foundation → tableau can make even a
    few cards' game large); such positions are skipped."""
    start = board.copy()
    seen: set[object] = set()
    stack = [start]

    limited = board.options.max_passes is not None

    def key(b: Board) -> object:
        # Recycles matter only with a pass limit; without one they count forever.
        return (*board_key(b), b.recycles if limited else 0)

    seen.add(key(start))
    while stack:
        b = stack.pop()
        if b.is_won():
            return True
        for move in b.legal_moves():
            b.push(move)
            k = key(b)
            if k not in seen:
                seen.add(k)
                stack.append(b.copy())
            b.pop()
        if len(seen) > limit:
            return None
    return False


def small_position(variant: str, options: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A legal position with a handful of cards left, dealt at random."""
    decks = 2 if variant == "double_yukon" else 1
    ncols = 10 if variant == "double_yukon" else 7
    has_talon = variant in ("klondike", "australian")
    heights: list[list[int]] = []
    left: list[str] = []
    for s in range(4):
        hs = []
        for _ in range(decks):
            h = 13 - rng.choice((0, 0, 1, 2, 3, 4)) if decks == 1 else 13 - rng.choice((0, 0, 1, 2))
            hs.append(h)
            left += [NAMES[face_of(s, r)] for r in range(h + 1, 14)]
        heights.append(hs)
    rng.shuffle(left)
    stock: list[str] = []
    waste: list[str] = []
    if has_talon and left:
        k = rng.randint(0, min(5, len(left)))
        talon, left = left[:k], left[k:]
        split = rng.randint(0, len(talon))
        waste, stock = talon[:split], talon[split:]
    columns: list[list[str]] = [[] for _ in range(ncols)]
    used = rng.sample(range(ncols), k=min(ncols, rng.randint(2, 4)))
    for card in left:
        columns[rng.choice(used)].append(card)
    may_hide = variant != "australian" and not options.get("thoughtful", False)
    auto_flip = options.get("auto_flip", True) if variant != "australian" else True
    for col in columns:
        if may_hide and col:
            hidden = rng.randint(0, len(col) - 1 if auto_flip else len(col))
            col[:hidden] = [c.lower() for c in col[:hidden]]
    stock_up = options.get("thoughtful", False)
    max_passes = options.get("max_passes")
    recycles = 0 if max_passes is None else rng.randint(0, max_passes - 1)
    return {
        "variant": variant,
        "options": options,
        "tableau": columns,
        "foundations": {SUITS[s]: (heights[s][0] if decks == 1 else heights[s]) for s in range(4)},
        "stock": [c if stock_up else c.lower() for c in stock],
        "waste": waste,
        "recycles": recycles if variant == "klondike" else 0,
    }


def check_against_exhaustive_search(
    variant: str, options: dict[str, Any], rng: random.Random, positions: int
) -> None:
    """Solve ``positions`` small random positions; each outcome must be what the
    engine's exhaustive search says, each won line must win, and at least half the
    positions must be small enough for the exhaustive search to decide."""
    checked = 0
    for _ in range(positions):
        board = load_position(small_position(variant, options, rng))
        truth = winnable(board)
        if truth is None:
            continue
        checked += 1
        result = solve_board(board, 200_000)
        assert result.outcome is not Outcome.UNKNOWN
        assert (result.outcome is Outcome.WON) == truth, dump_position(board)
        if result.won:
            game = board.copy()
            for entry in result.moves:
                assert not game.is_won()
                apply_entry(game, entry)
            assert game.is_won()
    assert checked >= positions // 2


@pytest.mark.parametrize(("variant", "options"), CASES, ids=lambda x: str(x))
def test_outcome_matches_exhaustive_search(variant: str, options: dict[str, Any]) -> None:
    rng = random.Random(f"{variant}{sorted(options.items())}")
    check_against_exhaustive_search(variant, options, rng, POSITIONS_PER_CASE)


def test_sampler_produces_both_outcomes() -> None:
    """The cross-check is only worth something if it sees unwinnable positions too."""
    seen = set()
    rng = random.Random(99)
    for _ in range(40):
        board = load_position(small_position("yukon", {}, rng))
        seen.add(solve_board(board).outcome)
    assert seen == {Outcome.WON, Outcome.UNWINNABLE}


def test_constructed_unwinnable_position() -> None:
    """QH waits for JH, which lies under it face down; no black King is left to take
    QH, and only a King may go to an empty column."""
    board = load_position(
        {
            "variant": "yukon",
            "tableau": [["jh", "QH"], ["KH"], [], [], [], [], []],
            "foundations": {"C": 13, "D": 13, "H": 10, "S": 13},
        }
    )
    assert winnable(board) is False
    assert solve_board(board).outcome is Outcome.UNWINNABLE
