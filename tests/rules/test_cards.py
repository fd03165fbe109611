"""RULES "Cards": 52 cards, colours, opposite colour, double-deck identical cards kept apart
(``solrace.rules.cards`` and how the board uses it)."""

from __future__ import annotations

import pytest
from solrace.rules import InvalidPositionError, NotationError, deal, load_position, parse_move
from solrace.rules.cards import (
    NAMES,
    RANK,
    SUIT,
    card_name,
    describe_colour,
    face_of,
    is_red,
    parse_card,
)

from tests.rules.test_support import ALL_FACES, build, card_ids, position, tableau_of


def test_cards_rule_52_cards_four_suits_thirteen_ranks_no_jokers() -> None:
    """RULES Cards: 4 suits × 13 ranks (A=1 … K=13), no jokers, names like TD."""
    assert len(set(NAMES)) == 52
    assert NAMES == ALL_FACES
    assert NAMES[0] == "AC" and NAMES[12] == "KC" and NAMES[13] == "AD" and NAMES[51] == "KS"
    assert card_name(face_of(1, 10)) == "TD"
    assert {RANK[c] for c in range(52)} == set(range(1, 14))
    assert {SUIT[c] for c in range(52)} == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("name", "red"),
    [("AH", True), ("7D", True), ("KH", True), ("2C", False), ("QS", False), ("TC", False)],
)
def test_cards_rule_hearts_and_diamonds_red_clubs_and_spades_black(name: str, red: bool) -> None:
    """RULES Cards: hearts and diamonds are red; clubs and spades are black."""
    face, _ = parse_card(name)
    assert is_red(face) is red
    assert is_red(face + 52) is red  # the second deck's copy has the same colour
    assert describe_colour(face) == ("red" if red else "black")


def test_cards_rule_opposite_colour_is_red_on_black_or_black_on_red() -> None:
    """RULES Cards: "opposite colour" = red on black or black on red (seen through Yukon
    building: 7H/7D go on a black 8, 7C/7S on a red 8, never same colour)."""
    board = build("yukon", [["8S"], ["8D"], ["7H"], ["7C"], ["7D"], ["7S"]])
    for notation in ("3:1>1", "5:1>1", "4:1>2", "6:1>2"):
        assert board.refusal(parse_move(notation)) is None, notation
    for notation in ("3:1>2", "5:1>2", "4:1>1", "6:1>1"):
        assert "same colour" in (board.refusal(parse_move(notation)) or ""), notation


def test_card_notation_upper_case_is_face_up_lower_case_face_down() -> None:
    """RULES positions: rank then suit; lower case means face down."""
    assert parse_card("TD") == (face_of(1, 10), True)
    assert parse_card("ks") == (face_of(3, 13), False)


@pytest.mark.parametrize("text", ["Kh", "kH", "1H", "10H", "XH", "KX", "K", "", "KHS", 7, None])
def test_card_notation_refuses_mixed_case_and_non_cards(text: object) -> None:
    """RULES positions: a card is one rank letter and one suit letter, in one case."""
    with pytest.raises(NotationError):
        parse_card(text)  # type: ignore[arg-type]


def test_cards_rule_double_deck_identical_cards_are_distinct_ids() -> None:
    """RULES Cards: in a double deck two identical cards are distinct cards (ids face and
    face+52), each exactly once."""
    board = deal("double_yukon", 7)
    counts = card_ids(board)
    assert sorted(counts) == list(range(104))
    assert set(counts.values()) == {1}


def test_cards_rule_double_deck_identical_cards_kept_apart_when_moved() -> None:
    """RULES Cards: moving one of two identical cards moves that card only; the other copy
    stays where it was, and undo brings back exactly the copy that moved."""
    board = build("double_yukon", [["8S", "7H"], ["8C", "7H"], ["8S"]])
    first, second = board.tableau[0][-1], board.tableau[1][-1]
    assert first != second and first % 52 == second % 52
    board.play("2:1>3")
    assert board.tableau[2][-1] == second
    assert board.tableau[0][-1] == first
    board.undo()
    assert board.tableau[1][-1] == second and board.tableau[2] == [board.tableau[2][0]]


def test_cards_rule_double_deck_first_copy_met_gets_lower_id() -> None:
    """docs/rules.md: loading gives the first copy met (columns left to right, bottom to
    top, then stock, then waste) the lower id."""
    board = build("double_yukon", [["8S", "7H"], ["8C", "7H"]])
    assert board.tableau[0][1] < board.tableau[1][1]
    assert board.tableau[1][1] == board.tableau[0][1] + 52
    assert tableau_of(board)[:2] == [["8S", "7H"], ["8C", "7H"]]


def test_cards_rule_single_deck_refuses_a_second_copy() -> None:
    """RULES Cards: a single-deck game holds each card once."""
    data = position("yukon", [["7H"], ["7H"]])
    with pytest.raises(InvalidPositionError, match="7H appears more than once"):
        load_position(data)
