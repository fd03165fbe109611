"""``solrace.rules.perft``: perft(n) is the number of distinct move sequences of length n
(RULES notation); the counts themselves are checked against an independent generator in
``test_reference_perft.py``."""

from __future__ import annotations

import pytest
from solrace.rules import deal, divide, perft

from tests.rules.test_support import build


def test_perft_depth_0_and_1() -> None:
    board = deal("yukon", 5)
    assert perft(board, 0) == 1
    assert perft(board, 1) == len(board.legal_moves())


def test_perft_leaves_the_board_unchanged_and_uncounted() -> None:
    board = deal("klondike", 5)
    before = board.snapshot()
    perft(board, 3)
    assert board.snapshot() == before and board.move_count == 0 and board.history == []


def test_divide_sums_to_perft() -> None:
    board = deal("australian", 5)
    split = divide(board, 3)
    assert set(split) == {str(m) for m in board.legal_moves()}
    assert sum(split.values()) == perft(board, 3)


def test_perft_depth_1_by_hand() -> None:
    """A complete position counted by hand: KH, QS, KS left (C, D done, H to Q, S to J).
    QS goes on KH or to its foundation, KH to its foundation, each King to any of the
    four empty columns: 1 + 1 + 1 + 4 + 4 = 11 moves."""
    board = build(
        "yukon",
        [["KH"], ["QS"], ["KS"]],
        foundations={"C": 13, "D": 13, "H": 12, "S": 11},
        filler=None,
    )
    expected = {"2:1>1", "2>F", "1>F"}
    expected |= {f"{c}:1>{d}" for c in (1, 3) for d in (4, 5, 6, 7)}
    assert {str(m) for m in board.legal_moves()} == expected
    assert perft(board, 1) == 11


def test_perft_negative_depth_refused() -> None:
    with pytest.raises(ValueError):
        perft(deal("yukon", 1), -1)


def test_divide_at_depth_0_is_refused_and_leaves_the_board_unchanged() -> None:
    """At depth 0 no sequence has a first move: divide pushed the first move, then
    perft(depth −1) raised "depth must be ≥ 0" with the move still on the board."""
    board = deal("yukon", 5)
    before = board.snapshot()
    with pytest.raises(ValueError, match="divide needs a depth of 1 or more"):
        divide(board, 0)
    assert board.snapshot() == before and board.history == []
