"""``solrace.rules.variants``: the variants named in seed 000 — Russian, Alaska,
Australian, Double Yukon (RULES "Variants named in seed 000", docs/rules.md). Their
deal layouts are checked in ``test_deal.py``."""

from __future__ import annotations

import pytest
from solrace.rules import (
    VARIANTS,
    IllegalMoveError,
    InvalidOptionError,
    UnknownVariantError,
    deal,
    new_board,
    parse_move,
    position_dict,
    variant_class,
)
from solrace.rules.board import Board
from solrace.rules.options import OPTION_NAMES

from tests.rules.test_support import build, legal, tableau_of


def assert_illegal(board: Board, notation: str, reason: str) -> None:
    before = board.snapshot()
    with pytest.raises(IllegalMoveError) as info:
        board.play(notation)
    assert reason in info.value.reason, info.value.reason
    assert notation not in legal(board)
    assert board.snapshot() == before


def test_variant_ids() -> None:
    """Each variant of docs/rules.md is its own variant id."""
    assert set(VARIANTS) == {
        "yukon",
        "klondike",
        "russian",
        "alaska",
        "australian",
        "double_yukon",
    }
    assert variant_class("alaska").variant == "alaska"
    assert new_board("russian").variant == "russian"
    with pytest.raises(UnknownVariantError, match="unknown variant 'spider'"):
        variant_class("spider")


# ============================================================================= Russian


def test_russian_builds_down_by_same_suit() -> None:
    """RULES Russian: build tableau by same suit, one rank lower."""
    board = build("russian", [["8H"], ["7H"], ["7S"], ["6H"], ["9S"]])
    assert "2:1>1" in legal(board)
    assert_illegal(board, "3:1>1", "7S cannot go on 8H: different suit")
    assert_illegal(board, "4:1>1", "6H cannot go on 8H: it must be one rank lower (7)")
    assert_illegal(board, "1:1>5", "8H cannot go on 9S: different suit")
    board.play("2:1>1")
    assert tableau_of(board)[0] == ["8H", "7H"]


def test_russian_group_moves_as_yukon() -> None:
    """RULES Russian: Yukon group moves (any face-up card with everything on it, internal
    order irrelevant); empty column King only."""
    board = build("russian", [["8H"], ["qs", "7H", "2C", "KD"], [], ["QD", "5C"]])
    board.play("2:3>1")
    assert tableau_of(board)[:2] == [["8H", "7H", "2C", "KD"], ["QS"]]
    assert_illegal(board, "4:2>3", "only a King may go to an empty column, not QD")
    board.play("1:1>3")
    assert tableau_of(board)[2] == ["KD"]


def test_russian_yukon_options() -> None:
    """docs/rules.md: Russian has Yukon's options (foundation_to_tableau default false)."""
    board = build(
        "russian", [["8H"]], foundations={"H": 7}, options={"foundation_to_tableau": True}
    )
    assert "FH>1" in legal(board)
    assert deal("russian", 1).options.foundation_to_tableau is False


# ============================================================================== Alaska


def test_alaska_builds_by_suit_up_or_down() -> None:
    """RULES Alaska: build by same suit, up or down by one rank."""
    board = build("alaska", [["8H"], ["7H"], ["9H"], ["7D"], ["6H"]])
    assert {"2:1>1", "3:1>1"} <= legal(board)
    assert_illegal(board, "4:1>1", "7D cannot go on 8H: different suit")
    assert_illegal(board, "5:1>1", "6H cannot go on 8H: it must be one rank higher or lower")
    board.play("3:1>1")  # up: 9H on 8H
    assert tableau_of(board)[0] == ["8H", "9H"]
    assert_illegal(board, "2:1>1", "7H cannot go on 9H: it must be one rank higher or lower")
    board.undo()
    board.play("2:1>1")  # down: 7H on 8H
    assert tableau_of(board)[0] == ["8H", "7H"]


def test_alaska_up_and_down_includes_king_on_queen_and_two_on_ace() -> None:
    """RULES Alaska: a King may go on a Queen of its suit, a 2 on an Ace."""
    board = build("alaska", [["QS"], ["KS"], ["AD"], ["2D"]])
    assert {"2:1>1", "1:1>2", "4:1>3", "3:1>4"} <= legal(board)


def test_alaska_group_moves_and_empty_column() -> None:
    """RULES Alaska: Yukon layout and group moves; an empty column takes a King only."""
    board = build("alaska", [["8H"], ["5C", "9H", "3D"], [], ["QH"]])
    board.play("2:2>1")
    assert tableau_of(board)[0] == ["8H", "9H", "3D"]
    assert_illegal(board, "4:1>3", "only a King may go to an empty column, not QH")


# ========================================================================== Australian


def test_australian_layout_seven_columns_of_four_face_up_and_24_stock() -> None:
    """RULES Australian: seven columns of four cards, all face up; 24 in the stock."""
    board = deal("australian", 12)
    assert [len(c) for c in board.tableau] == [4] * 7
    assert board.down == [0] * 7
    assert len(board.stock) == 24 and board.waste == []


def test_australian_draws_one_card_once_through_no_recycle_ever() -> None:
    """RULES Australian: the stock turns one at a time onto the waste, one pass, no
    redeal."""
    board = build("australian", [], stock=["9D", "5S", "3H"])
    assert board.options.draw == 1 and board.options.max_passes == 1
    board.play("D")
    assert position_dict(board)["waste"] == ["3H"]
    board.play("D")
    board.play("D")
    assert "R" not in legal(board)
    assert_illegal(board, "R", "no passes left (australian allows 1 pass)")
    assert_illegal(board, "D", "the stock is empty")


def test_australian_same_suit_group_moves() -> None:
    """RULES Australian: Yukon group moves (any card with everything on it), built down by
    same suit."""
    board = build("australian", [["8H"], ["5C", "7H", "2C", "KD"], ["8S"]])
    assert_illegal(board, "2:3>3", "7H cannot go on 8S: different suit")
    board.play("2:3>1")
    assert tableau_of(board)[:2] == [["8H", "7H", "2C", "KD"], ["5C"]]


def test_australian_empty_column_king_only() -> None:
    """RULES Australian: an empty column takes only a King or a group led by a King."""
    board = build("australian", [["QH", "3C"], [], ["KD", "4S"]])
    assert_illegal(board, "1:2>2", "only a King may go to an empty column, not QH")
    board.play("3:2>2")
    assert tableau_of(board)[1] == ["KD", "4S"]


def test_australian_waste_to_tableau_and_foundation() -> None:
    """RULES Australian: the top waste card plays to the tableau or a foundation."""
    board = build("australian", [["8H"]], waste=["AS", "7H"], foundations={})
    board.play("W>1")
    board.play("W>F")
    assert tableau_of(board)[0] == ["8H", "7H"]
    assert position_dict(board)["foundations"]["S"] == 1


def test_australian_nothing_comes_back_off_a_foundation() -> None:
    """RULES Australian: no foundation → tableau, and the option cannot be turned on."""
    board = build("australian", [["8S"]], foundations={"H": 7})
    assert_illegal(board, "FH>1", "foundation cards stay where they are in australian")
    with pytest.raises(InvalidOptionError):
        deal("australian", 1, {"foundation_to_tableau": True})


@pytest.mark.parametrize(
    "option",
    ["draw", "max_passes", "thoughtful", "foundation_to_tableau", "auto_flip", "bogus"],
)
def test_australian_unknown_option_refused(option: str) -> None:
    """RULES Australian / docs: draw 1, one pass, no foundation → tableau are fixed by the
    variant; setting them (or any unknown option) is refused."""
    with pytest.raises(InvalidOptionError, match=f'variant australian has no option "{option}"'):
        deal("australian", 1, {option: 1})


def test_australian_options_it_does_have() -> None:
    """docs/rules.md: Australian has undo, auto_complete and scoring."""
    board = deal("australian", 1, {"undo": False, "auto_complete": False, "scoring": "vegas"})
    assert position_dict(board)["options"] == {
        "undo": False,
        "auto_complete": False,
        "scoring": "vegas",
    }


# ======================================================================== Double Yukon


def test_double_yukon_layout_ten_columns_104_cards() -> None:
    """RULES Double Yukon / docs: ten columns with 0,1,…,8,8 face-down cards and six
    face-up cards each, 104 cards, eight empty foundations."""
    board = deal("double_yukon", 4)
    assert board.down == [0, 1, 2, 3, 4, 5, 6, 7, 8, 8]
    assert [len(c) for c in board.tableau] == [6, 7, 8, 9, 10, 11, 12, 13, 14, 14]
    assert sum(len(c) for c in board.tableau) == 104
    assert len(board.piles) == 8 and not any(board.piles)
    assert position_dict(board)["foundations"] == {s: [0, 0] for s in "CDHS"}


def test_double_yukon_eight_foundations_two_per_suit() -> None:
    """RULES Double Yukon: eight foundations; a card goes to the first foundation of its
    suit that takes it (docs/rules.md)."""
    board = build("double_yukon", [["AH"], ["AH"], ["2H"]])
    board.play("1>F")
    board.play("2>F")
    assert position_dict(board)["foundations"]["H"] == [1, 1]
    board.play("3>F")
    assert position_dict(board)["foundations"]["H"] == [2, 1]


def test_double_yukon_foundation_needs_either_next_card() -> None:
    """docs/rules.md: with two foundations of a suit, either one's next card is wanted."""
    board = build("double_yukon", [["9H"]], foundations={"H": [3, 5]})
    assert_illegal(
        board, "1>F", "9H cannot go to a foundation: the heart foundation needs 4H or 6H"
    )


def test_double_yukon_foundation_notation_numbered() -> None:
    """RULES Double Yukon / docs: ``FH1>4`` and ``FH2>4`` name the two heart foundations;
    ``FH>4`` is refused as ambiguous."""
    board = build(
        "double_yukon",
        [[], [], [], ["8S"]],
        foundations={"H": [7, 5]},
        options={"foundation_to_tableau": True},
    )
    moves = legal(board)
    assert "FH1>4" in moves and "FH2>4" not in moves
    assert not any(m.startswith("FH>") for m in moves)
    assert_illegal(board, "FH>4", "there are two foundations per suit: write FH1 or FH2")
    assert_illegal(board, "FH2>4", "5H cannot go on 8S: it must be one rank lower (7)")
    board.play("FH1>4")
    assert position_dict(board)["foundations"]["H"] == [6, 5]
    assert tableau_of(board)[3] == ["8S", "7H"]
    assert str(parse_move("FH2>4")) == "FH2>4"


def test_single_deck_refuses_numbered_foundation() -> None:
    """docs/rules.md: single-deck variants have one foundation per suit, no number."""
    board = build("klondike", [["8S"]], foundations={"H": 7})
    assert_illegal(board, "FH1>1", "there is one foundation per suit: write it without a number")


def test_double_yukon_group_moves_alternate_colours() -> None:
    """RULES Double Yukon: Yukon rules (group moves, opposite colours, King-only empty
    columns), columns numbered 1–10."""
    board = build("double_yukon", [["8S"], ["7H", "2C", "KD"], [], [], [], [], [], [], ["8H"]])
    assert_illegal(board, "2:3>9", "7H cannot go on 8H: same colour")
    board.play("2:3>1")
    assert tableau_of(board)[0] == ["8S", "7H", "2C", "KD"]
    assert_illegal(board, "9:1>3", "only a King may go to an empty column, not 8H")
    board.play("1:1>3")
    assert tableau_of(board)[2] == ["KD"]


def test_australian_refusals_name_no_option_it_does_not_have() -> None:
    """docs/rules.md: Australian's draw, one pass, no foundation → tableau and auto flip
    are fixed by the variant, not options; its refusals said "max_passes is 1" and
    "foundation_to_tableau is off", options a player of it cannot set. Each now says
    the variant fixes it; Klondike's still name the option its room set."""
    board = build("australian", [["8S"]], stock=["9D"], foundations={"H": 7})
    board.play("D")
    said = {
        "R": "no passes left (australian allows 1 pass)",
        "FH>1": "foundation cards stay where they are in australian",
        "U1": "cards turn up by themselves in australian",
    }
    fixed = set(OPTION_NAMES) - set(board.allowed_options)
    for move, why in said.items():
        assert_illegal(board, move, why)
        assert board.refusal(parse_move(move)) == why
        assert not any(name in why for name in fixed)
    klondike = build("klondike", [["8S"]], stock=["9D"], foundations={}, options={"max_passes": 1})
    klondike.play("D")
    assert_illegal(klondike, "R", "no passes left (max_passes is 1)")
    assert_illegal(klondike, "U1", "cards turn up by themselves here (auto_flip is on)")
