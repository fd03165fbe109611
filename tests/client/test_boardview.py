"""board_from_view: a board rebuilt from a view has exactly the viewed board's legal
moves and the same view, in every variant, for owners and for others; played_view: the
board after a move, exactly the server's, or None where the move brings a card into
sight."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from solrace.rules import VARIANTS, deal, parse_move, view
from solrace.rules.log import apply_entry
from solrace.rules.view import seen_cards
from solrace_client.boardview import board_from_view, played_view

CASES = [(v, {}) for v in VARIANTS] + [
    ("klondike", {"thoughtful": True}),
    ("klondike", {"draw": 3}),
    ("klondike", {"auto_flip": False}),
    ("yukon", {"auto_flip": False, "foundation_to_tableau": True}),
]


@pytest.mark.parametrize(("variant", "options"), CASES)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), choices=st.randoms(use_true_random=False))
def test_rebuilt_board_has_the_same_legal_moves_and_view(
    variant: str, options: dict[str, object], seed: int, choices: random.Random
) -> None:
    board = deal(variant, seed, options)
    for _ in range(60):
        for owner in (True, False):
            seen = view(board, owner=owner)
            rebuilt = board_from_view(seen)
            assert sorted(map(str, rebuilt.legal_moves())) == sorted(map(str, board.legal_moves()))
            assert view(rebuilt, owner=owner) == seen
        moves = board.legal_moves()
        if not moves:
            break
        board.push(choices.choice(moves))


def test_a_view_with_too_many_copies_is_refused() -> None:
    seen = view(deal("yukon", 1))
    seen["waste"] = [seen["tableau"][0]["up"][0]]
    with pytest.raises(ValueError):
        board_from_view(seen)


@pytest.mark.parametrize(("variant", "options"), CASES)
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), choices=st.randoms(use_true_random=False))
def test_a_move_is_shown_ahead_exactly_when_it_brings_no_card_into_sight(
    variant: str, options: dict[str, object], seed: int, choices: random.Random
) -> None:
    """What the terminal client shows before the server's reply (docs/fairness.md,
    "Latency"): the server's own view after the move, or nothing — never a filler
    card standing in for one face down."""
    board = deal(variant, seed, options)
    predicted = 0
    for _ in range(60):
        moves = [str(m) for m in board.legal_moves()] + ["undo"]
        before = view(board, owner=True)
        for move in moves:
            after = board.copy()
            try:
                apply_entry(after, move)
            except Exception:  # an undo with nothing to undo
                assert played_view(before, move) is None
                continue
            shown = played_view(before, move)
            new_sight = seen_cards(after) - seen_cards(board)
            if move == "undo" or new_sight:
                assert shown is None, (move, shown)
            else:
                assert shown == view(after, owner=True), move
                predicted += 1
        if not moves[:-1]:
            break
        apply_entry(board, choices.choice(moves[:-1]))
    assert predicted or not board.legal_moves()


def test_a_move_the_engine_refuses_is_not_shown_ahead() -> None:
    board = deal("yukon", 7)
    seen = view(board, owner=True)
    refused = [m for m in ("1:1>2", "2:1>3", "3:1>4", "4:1>5") if board.refusal(parse_move(m))]
    assert refused
    for move in [*refused, "FH>1", "undo", "not a move"]:
        assert played_view(seen, move) is None
