"""RULES "Scoring" (seed 001) and the documented choices in docs/rules.md: standard, Vegas
and win/loss (``none``) scores, and the Vegas default of ``max_passes``."""

from __future__ import annotations

import pytest
from solrace.rules import deal, load_position

from tests.rules.test_support import build, won_position


def test_scoring_standard_is_the_default() -> None:
    """RULES Scoring / docs: scoring defaults to "standard"; a fresh deal scores 0."""
    for variant in ("yukon", "klondike", "australian", "double_yukon"):
        board = deal(variant, 3)
        assert board.options.scoring == "standard"
        assert board.score == 0


def test_scoring_standard_plus_10_per_card_to_a_foundation() -> None:
    """RULES Scoring (standard): +10 per card to a foundation."""
    board = build("klondike", [["AH"], ["2H"]])
    board.play("1>F")
    assert board.score == 10
    board.play("2>F")
    assert board.score == 20


def test_scoring_standard_plus_5_waste_to_tableau() -> None:
    """RULES Scoring (standard): +5 per card waste → tableau."""
    board = build("klondike", [["8H"]], waste=["7C"])
    board.play("W>1")
    assert board.score == 5


@pytest.mark.parametrize("variant", ["klondike", "yukon"])
def test_scoring_standard_plus_5_per_card_turned_up_automatically(variant: str) -> None:
    """RULES Scoring (standard): +5 per face-down card turned up (by auto_flip); the
    tableau move itself scores nothing."""
    board = build(variant, [["kc", "7H"], ["8S"]])
    board.play("1:1>2")
    assert board.score == 5
    unflipping = build(variant, [["7H"], ["8S"]])
    unflipping.play("1:1>2")
    assert unflipping.score == 0


def test_scoring_standard_plus_5_for_an_explicit_flip() -> None:
    """RULES Scoring (standard) / docs: an explicit ``Uc`` scores the +5 too."""
    board = build("klondike", [["kc", "7H"], ["8S"]], options={"auto_flip": False})
    board.play("1:1>2")
    assert board.score == 0
    board.play("U1")
    assert board.score == 5


def test_scoring_standard_plus_3_bonus_for_waste_to_foundation() -> None:
    """RULES Scoring (standard): +3 per direct waste → foundation move, on top of +10."""
    board = build("klondike", [], waste=["AH"])
    board.play("W>F")
    assert board.score == 13


def test_scoring_standard_minus_20_per_recycle() -> None:
    """RULES Scoring (standard): −20 per pass through the stock after the first; drawing
    scores nothing."""
    board = build("klondike", [], stock=["5C"])
    board.play("D")
    assert board.score == 0
    board.play("R")
    assert board.score == -20
    board.play("D")
    board.play("R")
    assert board.score == -40  # no floor


def test_scoring_standard_minus_10_off_a_foundation_bonus_stays() -> None:
    """RULES Scoring (standard): a card moved off a foundation loses the 10 points it
    earned; the +3 waste bonus of the earlier move stays (docs/rules.md)."""
    board = build("klondike", [["8S"], ["KD"]], waste=["7H"], foundations={"H": 6})
    assert board.score == 60  # a loaded position counts its foundation cards
    board.play("W>F")
    assert board.score == 73
    board.play("FH>1")
    assert board.score == 63


def test_scoring_standard_loaded_position_counts_foundations_and_recycles() -> None:
    """docs/rules.md: a loaded position starts at 10·F − 20·R."""
    board = build("klondike", [], foundations={"H": 3, "C": 1}, stock=["5D"], recycles=2)
    assert board.score == 40 - 40


def test_scoring_vegas_starts_at_minus_52() -> None:
    """RULES Scoring (Vegas): −52 to start (per deck, docs/rules.md)."""
    assert deal("klondike", 5, {"scoring": "vegas"}).score == -52
    assert deal("double_yukon", 5, {"scoring": "vegas"}).score == -104


def test_scoring_vegas_plus_5_per_card_to_a_foundation_and_nothing_else() -> None:
    """RULES Scoring (Vegas): +5 per card to a foundation; draws, flips, recycles and
    waste → tableau score nothing; a card off a foundation gives its 5 back (docs)."""
    board = build(
        "klondike",
        [["kc", "AH"], ["8S"], ["2H"], ["3S"]],
        options={"scoring": "vegas", "max_passes": None},
        waste=["7H", "7D"],
        stock=["3C"],
    )
    assert board.score == -52
    expected = {"1>F": -47, "3>F": -42, "W>2": -42, "D": -42, "R": -42, "FH>4": -47}
    for notation, score in expected.items():
        board.play(notation)
        assert board.score == score, notation
    assert board.down[0] == 0 and board.recycles == 1


def test_scoring_vegas_max_passes_defaults() -> None:
    """RULES Klondike options: Vegas makes max_passes default to 3 for draw 3 and 1 for
    draw 1; an explicit max_passes wins."""
    assert deal("klondike", 1, {"scoring": "vegas"}).options.max_passes == 1
    assert deal("klondike", 1, {"scoring": "vegas", "draw": 3}).options.max_passes == 3
    assert deal("klondike", 1, {"scoring": "vegas", "max_passes": 2}).options.max_passes == 2
    explicit_unlimited = {"scoring": "vegas", "draw": 3, "max_passes": None}
    assert deal("klondike", 1, explicit_unlimited).options.max_passes is None
    assert deal("klondike", 1, {"draw": 3}).options.max_passes is None  # standard: unlimited


def test_scoring_vegas_draw_one_allows_no_recycle() -> None:
    """RULES Klondike options: Vegas draw 1 is a single pass."""
    board = build("klondike", [], options={"scoring": "vegas"}, waste=["5C"])
    assert "R" not in {str(m) for m in board.legal_moves()}


@pytest.mark.parametrize("variant", ["klondike", "yukon", "double_yukon", "australian"])
def test_scoring_none_is_one_when_won_else_zero(variant: str) -> None:
    """RULES Scoring (win/loss): 1 or 0."""
    playing = deal(variant, 9, {"scoring": "none"})
    assert playing.score == 0
    move = playing.legal_moves()[0]
    playing.play(move)
    assert playing.score == 0
    won = load_position(won_position(variant, {"scoring": "none"}))
    assert won.score == 1


def test_scoring_none_becomes_one_on_the_winning_move() -> None:
    """RULES Scoring (win/loss): the winning move makes the score 1; undoing it, 0."""
    board = build(
        "klondike",
        [["KS"]],
        options={"scoring": "none"},
        foundations={"C": 13, "D": 13, "H": 13, "S": 12},
        filler=None,
    )
    assert board.score == 0
    board.play("1>F")
    assert board.score == 1
    board.undo()
    assert board.score == 0


def test_scoring_auto_complete_moves_score_like_foundation_moves() -> None:
    """docs/rules.md: auto-complete moves score +10 each."""
    board = build(
        "yukon", [["KC"], ["KD"]], foundations={"C": 12, "D": 12, "H": 13, "S": 13}, filler=None
    )
    before = board.score
    board.auto_complete()
    assert board.score == before + 20
