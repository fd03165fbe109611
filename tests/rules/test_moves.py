"""``solrace.rules.moves``: the canonical move notation of RULES "Positions and move
notation", the NotationError / IllegalMoveError distinction, and the refusal reasons the
board gives for well-formed but illegal moves."""

from __future__ import annotations

import pytest
from solrace.rules import (
    IllegalMoveError,
    Move,
    NotationError,
    RulesError,
    deal,
    parse_move,
)

from tests.rules.test_support import build, legal

# Every form of the notation table (and the double-deck extension), with its Move.
FORMS = {
    "3:4>6": Move.tableau(2, 4, 5),
    "1:1>2": Move.tableau(0, 1, 1),
    "10:13>9": Move.tableau(9, 13, 8),
    "2>F": Move.to_foundation(1),
    "10>F": Move.to_foundation(9),
    "W>5": Move.waste_to_tableau(4),
    "W>F": Move.waste_to_foundation(),
    "FH>4": Move.foundation_to_tableau(2, 3),
    "FC>1": Move.foundation_to_tableau(0, 0),
    "FS1>10": Move.foundation_to_tableau(3, 9, 1),
    "FD2>4": Move.foundation_to_tableau(1, 3, 2),
    "D": Move.draw(),
    "R": Move.recycle(),
    "U3": Move.flip(2),
    "U10": Move.flip(9),
}


@pytest.mark.parametrize(("notation", "move"), list(FORMS.items()))
def test_notation_every_form_parses_and_formats_back(notation: str, move: Move) -> None:
    """RULES notation: ``c:k>d``, ``c>F``, ``W>d``, ``W>F``, ``Fs>d`` (``Fsn>d`` with two
    decks), ``D``, ``R``, ``Uc``: each parses to its move and formats back identically."""
    parsed = parse_move(notation)
    assert parsed == move
    assert str(parsed) == notation
    assert str(move) == notation
    assert repr(move) == f"Move({notation})"
    assert hash(parsed) == hash(move)


def test_notation_distinct_notations_are_distinct_moves() -> None:
    """RULES notation: each distinct notation is a distinct move."""
    assert len({parse_move(n) for n in FORMS}) == len(FORMS)
    assert Move.tableau(0, 1, 2) != Move.tableau(0, 2, 2) != Move.tableau(0, 1, 5)
    assert Move.draw() != "D"


@pytest.mark.parametrize(
    "text",
    [
        # spaces
        " 3:4>6",
        "3:4>6 ",
        "3 :4>6",
        "3: 4>6",
        "3:4 >6",
        "3:4> 6",
        "2 >F",
        "W >5",
        "F H>4",
        "3:4>6\n",
        # lower case
        "w>f",
        "w>5",
        "W>f",
        "2>f",
        "fh>4",
        "Fh>4",
        "d",
        "r",
        "u3",
        # leading zeros
        "03:4>6",
        "3:04>6",
        "3:4>06",
        "02>F",
        "W>05",
        "U03",
        "FH>04",
        "FH01>4",
        # zero cards, a column onto itself, columns out of range
        "3:0>4",
        "1:1>1",
        "10:2>10",
        "11:1>2",
        "1:1>11",
        "0:1>2",
        "1:1>0",
        "11>F",
        "0>F",
        "W>11",
        "W>0",
        "U11",
        "U0",
        "FH>11",
        "FH>0",
        # foundation numbers other than 1 and 2, unknown suits, other junk
        "FH0>4",
        "FH3>4",
        "FX>4",
        "F>4",
        "FH>F",
        "WF",
        "W>W",
        "DD",
        "RR",
        "U",
        "F",
        "W",
        "",
        "3:>4",
        "3:4>",
        ":4>6",
        "3-4>6",
        "3:4→6",
        "1:105>2",
        "1:" + "9" * 5000 + ">2",  # more digits than int() converts: ValueError, not ours
        "undo",
        "3:4>6;",
        "１:1>2",  # a full-width digit
    ],
)
def test_notation_non_canonical_spellings_are_refused(text: str) -> None:
    """RULES notation: only the canonical spelling is accepted — no spaces, no lower case,
    no leading zeros, ``3:0>4``, ``1:1>1`` and column 11 are refused — with NotationError,
    not IllegalMoveError."""
    with pytest.raises(NotationError) as info:
        parse_move(text)
    assert not isinstance(info.value, IllegalMoveError)
    board = deal("yukon", 1)
    before = board.snapshot()
    with pytest.raises(NotationError):
        board.play(text)
    assert board.snapshot() == before and board.move_count == 0


@pytest.mark.parametrize("value", [None, 3, b"D", ["D"], {"move": "D"}, ("D",), 3.5])
def test_notation_non_strings_are_notation_errors(value: object) -> None:
    """A move that is not a string is a NotationError (never a TypeError, even when it is
    unhashable: the parse cache must not see it first)."""
    with pytest.raises(NotationError, match="a move must be a string"):
        parse_move(value)  # type: ignore[arg-type]


def test_notation_error_messages_name_the_problem() -> None:
    with pytest.raises(NotationError, match="column 11 is not between 1 and 10"):
        parse_move("11:1>2")
    with pytest.raises(NotationError, match="a column cannot move onto itself"):
        parse_move("1:1>1")
    with pytest.raises(
        NotationError, match=r"expected c:k>d, c>F, W>d, W>F, Fs>d, Fsn>d, D, R or Uc"
    ):
        parse_move("3:0>4")


def test_notation_error_versus_illegal_move_error() -> None:
    """A string that is not a move is a NotationError; a well-formed move the position does
    not allow is an IllegalMoveError. Both are RulesErrors (ValueErrors)."""
    board = deal("yukon", 1)
    with pytest.raises(IllegalMoveError) as illegal:
        board.play("8:1>1")  # well formed (columns go to 10), but yukon has 7
    assert illegal.value.reason == "there is no column 8 (yukon has 7)"
    assert illegal.value.move == "8:1>1"
    assert str(illegal.value) == "illegal move 8:1>1: there is no column 8 (yukon has 7)"
    with pytest.raises(NotationError) as notation:
        board.play("11:1>1")
    for exc in (illegal.value, notation.value):
        assert isinstance(exc, RulesError) and isinstance(exc, ValueError)
    assert not isinstance(notation.value, IllegalMoveError)
    assert not isinstance(illegal.value, NotationError)


def test_parse_cache_returns_equal_moves() -> None:
    """Parsing is memoised; a parse is always equal to a fresh one."""
    assert parse_move("3:4>6") == parse_move("3:4>6") == Move.tableau(2, 4, 5)


# ----------------------------------------------------------------- refusal reasons

# (variant, tableau, extra position arguments, move, exact reason)
REASONS = [
    ("yukon", [["8H"], ["7H"]], {}, "2:1>1", "7H cannot go on 8H: same colour"),
    ("yukon", [["9S"], ["7H"]], {}, "2:1>1", "7H cannot go on 9S: it must be one rank lower (8)"),
    ("yukon", [["AH"], ["2C"]], {}, "2:1>1", "2C cannot go on AH: nothing goes on an Ace"),
    ("yukon", [["QH"], []], {}, "1:1>2", "only a King may go to an empty column, not QH"),
    ("yukon", [["QH"], []], {}, "2:1>1", "column 2 is empty"),
    ("yukon", [["ks", "7H"], ["8S"]], {}, "1:2>2", "column 1 has only 1 face-up card"),
    ("yukon", [["ks", "7H", "6C"], ["8S"]], {}, "1:3>2", "column 1 has only 2 face-up cards"),
    ("yukon", [["8S"]], {}, "8:1>1", "there is no column 8 (yukon has 7)"),
    ("yukon", [["8S"]], {}, "1:1>9", "there is no column 9 (yukon has 7)"),
    ("yukon", [["8S"]], {}, "9>F", "there is no column 9 (yukon has 7)"),
    ("yukon", [["2H"]], {}, "1>F", "2H cannot go to a foundation: the heart foundation needs AH"),
    (
        "yukon",
        [["5S"]],
        {"foundations": {"S": 2}},
        "1>F",
        "5S cannot go to a foundation: the spade foundation needs 3S",
    ),
    ("yukon", [[]], {}, "1>F", "column 1 is empty"),
    ("yukon", [["8S"]], {}, "W>F", "yukon has no stock or waste"),
    ("yukon", [["8S"]], {}, "W>1", "yukon has no stock or waste"),
    ("yukon", [["8S"]], {}, "D", "yukon has no stock"),
    ("yukon", [["8S"]], {}, "R", "yukon has no stock"),
    ("yukon", [["8S"]], {}, "U1", "cards turn up by themselves here (auto_flip is on)"),
    (
        "yukon",
        [["8S"]],
        {"options": {"auto_flip": False}},
        "U1",
        "column 1's top card is already face up",
    ),
    (
        "yukon",
        [["8S"], ["kc"]],
        {"options": {"auto_flip": False}},
        "2:1>1",
        "column 2's top card is face down: turn it up first (U2)",
    ),
    (
        "yukon",
        [["8S"], ["kc"]],
        {"options": {"auto_flip": False}},
        "2>F",
        "column 2's top card is face down: turn it up first (U2)",
    ),
    (
        "yukon",
        [["7H"], ["kc"]],
        {"options": {"auto_flip": False}},
        "1:1>2",
        "column 2's top card is face down: turn it up first (U2)",
    ),
    (
        "yukon",
        [["8S"]],
        {"options": {"auto_flip": False}},
        "U9",
        "there is no column 9 (yukon has 7)",
    ),
    (
        "yukon",
        [["8S"]],
        {"foundations": {"H": 7}},
        "FH>1",
        "foundation cards stay where they are (foundation_to_tableau is off)",
    ),
    ("klondike", [["8S"]], {}, "FH>1", "the heart foundation is empty"),
    (
        "klondike",
        [["9S", "2D", "7C"], ["TD"]],
        {},
        "1:3>2",
        "only a run moves in klondike: 2D does not build on 9S",
    ),
    ("klondike", [["8S"]], {}, "W>1", "the waste is empty"),
    ("klondike", [["8S"]], {"stock": ["5C"]}, "R", "the stock is not empty yet"),
    ("klondike", [["8S"]], {}, "R", "the waste is empty: nothing to turn over"),
    ("klondike", [["8S"]], {"waste": ["5C"]}, "D", "the stock is empty: turn the waste over (R)"),
    ("klondike", [["8S"]], {}, "D", "the stock and the waste are empty"),
    (
        "klondike",
        [["8S"]],
        {"waste": ["5C"], "options": {"max_passes": 1}},
        "R",
        "no passes left (max_passes is 1)",
    ),
    ("klondike", [["8S"]], {"waste": ["7S"]}, "W>1", "7S cannot go on 8S: same colour"),
    (
        "klondike",
        [["8S"]],
        {"foundations": {"H": 7}},
        "FH1>1",
        "there is one foundation per suit: write it without a number",
    ),
    ("russian", [["8H"], ["7S"]], {}, "2:1>1", "7S cannot go on 8H: different suit"),
    ("russian", [["8H"], ["6H"]], {}, "2:1>1", "6H cannot go on 8H: it must be one rank lower (7)"),
    ("russian", [["AH"], ["2H"]], {}, "2:1>1", "2H cannot go on AH: nothing goes on an Ace"),
    (
        "alaska",
        [["8H"], ["6H"]],
        {},
        "2:1>1",
        "6H cannot go on 8H: it must be one rank higher or lower",
    ),
    ("alaska", [["8H"], ["9D"]], {}, "2:1>1", "9D cannot go on 8H: different suit"),
    ("australian", [["8H"], ["7S"]], {}, "2:1>1", "7S cannot go on 8H: different suit"),
    (
        "australian",
        [["8S"]],
        {"foundations": {"H": 7}},
        "FH>1",
        "foundation cards stay where they are in australian",
    ),
    (
        "double_yukon",
        [["8S"], ["QH"]],
        {},
        "2:1>3",
        "only a King may go to an empty column, not QH",
    ),
    (
        "double_yukon",
        [["8S"]],
        {"foundations": {"H": [7, 0]}, "options": {"foundation_to_tableau": True}},
        "FH>1",
        "there are two foundations per suit: write FH1 or FH2",
    ),
    (
        "double_yukon",
        [["8S"]],
        {"foundations": {"H": [7, 0]}, "options": {"foundation_to_tableau": True}},
        "FH2>1",
        "the heart foundation is empty",
    ),
]


@pytest.mark.parametrize(
    ("variant", "tableau", "extra", "notation", "reason"),
    REASONS,
    ids=[f"{r[0]}-{r[3]}-{r[4][:30]}" for r in REASONS],
)
def test_illegal_move_reasons(
    variant: str, tableau: list[list[str]], extra: dict, notation: str, reason: str
) -> None:
    """RULES notation / errors: a well-formed illegal move raises IllegalMoveError with a
    reason for players ("7H cannot go on 8H: same colour"), leaves the board unchanged, is
    not among the legal moves, and ``refusal`` gives the same reason."""
    board = build(variant, tableau, **extra)
    move = parse_move(notation)
    before, count = board.snapshot(), board.move_count
    with pytest.raises(IllegalMoveError) as info:
        board.play(notation)
    assert reason in info.value.reason
    assert board.refusal(move) == info.value.reason
    assert not board.is_legal(move)
    assert notation not in legal(board)
    assert board.snapshot() == before and board.move_count == count


def test_legal_moves_are_distinct_and_each_passes_refusal() -> None:
    """RULES notation: legal_moves lists each distinct notation once, and ``play`` accepts
    each of them."""
    for variant, seed in [("yukon", 3), ("klondike", 3), ("double_yukon", 3), ("alaska", 9)]:
        board = deal(variant, seed)
        moves = board.legal_moves()
        assert len(moves) == len({str(m) for m in moves})
        for move in moves:
            assert board.refusal(move) is None
            copy = board.copy()
            copy.play(str(move))
