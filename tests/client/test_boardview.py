"""board_from_view: a board rebuilt from a view has exactly the viewed board's legal
moves and the same view, in every variant, for owners and for others."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from solrace.rules import VARIANTS, deal, view
from solrace_client.boardview import board_from_view

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
