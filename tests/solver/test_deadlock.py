"""The deadlock test (``solrace.solver.deadlock.dead``) must never call a winnable
position lost: checked against the independent exhaustive search of
test_soundness.py on many small random positions of every variant, including
``foundation_to_tableau`` where the exhaustive search can finish."""

from __future__ import annotations

import random
from typing import Any

import pytest
from solrace.rules import deal, dump_position, load_position
from solrace.solver.deadlock import dead
from solrace.solver.solve import spec_of, state_of

from .test_soundness import CASES, small_position, winnable

EXTRA: list[tuple[str, dict[str, Any]]] = [
    ("klondike", {}),
    ("klondike", {"draw": 3}),
]


@pytest.mark.parametrize(("variant", "options"), CASES + EXTRA, ids=lambda x: str(x))
def test_dead_positions_are_really_unwinnable(variant: str, options: dict[str, Any]) -> None:
    rng = random.Random(f"dead{variant}{sorted(options.items())}")
    claimed = 0
    for _ in range(200):
        board = load_position(small_position(variant, options, rng))
        if dead(spec_of(board), state_of(board)):
            claimed += 1
            assert winnable(board, limit=50_000) is not True, dump_position(board)
    print(variant, options, "claimed", claimed)


def test_dead_finds_the_constructed_lock() -> None:
    """QH waits for JH (its only way up) and both black Kings are gone: dead."""
    board = load_position(
        {
            "variant": "yukon",
            "tableau": [["jh", "QH"], ["KH"], [], [], [], [], []],
            "foundations": {"C": 13, "D": 13, "H": 10, "S": 13},
        }
    )
    assert dead(spec_of(board), state_of(board))


def test_dead_a_cards_only_base_lies_above_it_in_its_column() -> None:
    """Russian, spades up to 10: JS must go up next, but QS lies on it, and QS can
    leave only for KS, under JS; JS can leave only for QS, which lies on JS itself
    (the group JS-QS cannot be moved onto its own QS). Lost; the test without the
    "own column" rule let JS use QS and called it open."""
    board = load_position(
        {
            "variant": "russian",
            "tableau": [["KS", "JS", "QS"], [], [], [], [], [], []],
            "foundations": {"C": 13, "D": 13, "H": 13, "S": 10},
        }
    )
    assert winnable(board, limit=50_000) is False
    assert dead(spec_of(board), state_of(board))


def test_a_base_above_a_card_serves_it_once_it_has_left_the_column() -> None:
    """Yukon: QD must leave its column so that the face-down JD under it can go up,
    and its only base is KS, which lies above it in that same column (on TD). Once KS
    has moved to an empty column, QD can go onto it: winnable (exhaustive search), so
    the test must pass. A version of the own-column rule that never lets a card use a
    base that lay above it (no release when a card between them leaves) calls it
    lost; the rule without that release fails this test."""
    board = load_position(
        {
            "variant": "yukon",
            "tableau": [[], ["QS", "KD"], [], [], ["js", "jd", "QD", "TD", "KS"], [], []],
            "foundations": {"C": 13, "D": 9, "H": 13, "S": 10},
        }
    )
    assert winnable(board, limit=50_000) is True
    assert not dead(spec_of(board), state_of(board))


def test_dead_never_fires_on_a_won_deal() -> None:
    """Deals the solver wins are never called dead (a quick whole-deal check)."""
    from solrace.solver import solve_deal

    for seed in range(40):
        board = deal("yukon", seed, {})
        if dead(spec_of(board), state_of(board)):
            assert not solve_deal("yukon", seed, {}, 3_000).won


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        ("yukon", {}),
        ("yukon", {"foundation_to_tableau": True}),
        ("russian", {}),
        ("alaska", {}),
        ("australian", {}),
        ("double_yukon", {}),
        ("klondike", {}),
        ("klondike", {"draw": 3, "thoughtful": True, "foundation_to_tableau": False}),
    ],
    ids=lambda x: str(x),
)
def test_dead_never_fires_on_a_position_of_a_winning_line(
    variant: str, options: dict[str, Any]
) -> None:
    """Mid-game positions of real deals, far larger than an exhaustive search can
    check: every position along a line the engine replays to a win is winnable, so the
    deadlock test (also run inside the search) must pass on each of them."""
    from solrace.rules.log import apply_entry
    from solrace.solver import solve_deal

    checked = wins = 0
    for seed in range(100):  # Russian wins few deals: go on until four are won
        result = solve_deal(variant, seed, options, 5_000)
        if not result.won:
            continue
        wins += 1
        if wins > 4:
            break
        board = deal(variant, seed, options)
        for entry in result.moves:
            assert not dead(spec_of(board), state_of(board)), (seed, entry)
            apply_entry(board, entry)
            checked += 1
    assert checked > 0
