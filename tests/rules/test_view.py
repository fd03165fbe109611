"""``solrace.rules.view``: what a viewer may see (RULES "Race rules": no racer or
spectator may learn a face-down card before it is turned up; thoughtful: the stock is
visible to its player only; docs/rules.md "Views")."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from solrace.rules import Board, deal, hidden_faces, view

from tests.rules.test_support import POSITION_KEYS, VARIANT_IDS, build


def _hidden_names(board: Board, owner: bool) -> set[str]:
    """Faces of face-down tableau cards and (unless a thoughtful owner) stock cards,
    computed from the board's lists, not by ``hidden_faces``."""
    names = set()
    for col, down in zip(board.tableau, board.down, strict=True):
        names.update("A23456789TJQK"[c % 13] + "CDHS"[c % 52 // 13] for c in col[:down])
    if not (owner and board.options.thoughtful):
        names.update("A23456789TJQK"[c % 13] + "CDHS"[c % 52 // 13] for c in board.stock)
    return names


def test_view_shape() -> None:
    """docs/rules.md: a view is plain data; face-down cards are a count per column; the
    stock is a count."""
    board = deal("klondike", 8)
    board.play("D")
    seen = view(board)
    assert list(seen) == POSITION_KEYS
    assert seen["tableau"][3]["down"] == 3 and len(seen["tableau"][3]["up"]) == 1
    assert seen["stock"] == 23 and len(seen["waste"]) == 1
    assert seen["foundations"] == {"C": 0, "D": 0, "H": 0, "S": 0}
    assert json.loads(json.dumps(seen)) == seen


@pytest.mark.parametrize("variant", VARIANT_IDS)
@pytest.mark.parametrize("owner", [False, True])
def test_view_never_names_a_face_down_or_stock_card(variant: str, owner: bool) -> None:
    """RULES race rules: no face-down card's identity (tableau or stock) is in a view,
    the player's own included."""
    board = deal(variant, 3)
    text = json.dumps(view(board, owner=owner))
    copies_hidden = Counter(
        _name(c) for col, down in zip(board.tableau, board.down, strict=True) for c in col[:down]
    )
    if not (owner and board.options.thoughtful):
        copies_hidden.update(_name(c) for c in board.stock)
    # With two decks a face may be hidden (one copy) and visible (the other): check the
    # faces whose every copy is hidden.
    fully_hidden = {n for n, k in copies_hidden.items() if k == board.decks}
    assert fully_hidden
    assert hidden_faces(board, owner) == fully_hidden
    assert fully_hidden <= _hidden_names(board, owner)
    for name in fully_hidden:
        assert f'"{name}"' not in text and f'"{name.lower()}"' not in text


def _name(card: int) -> str:
    return "A23456789TJQK"[card % 13] + "CDHS"[card % 52 // 13]


def test_view_thoughtful_stock_visible_to_its_owner_only() -> None:
    """RULES Klondike options (thoughtful): the stock is visible to its player; others
    (spectators) still see only a count."""
    board = deal("klondike", 8, {"thoughtful": True})
    owner, other = view(board, owner=True), view(board, owner=False)
    assert owner["stock_cards"] == [n.upper() for n in _stock_names(board)]
    assert "stock_cards" not in other
    text = json.dumps(other)
    for name in _stock_names(board):
        assert f'"{name}"' not in text
    assert all(col["down"] == 0 for col in owner["tableau"])
    assert "stock_cards" not in view(deal("klondike", 8), owner=True)


def _stock_names(board: Board) -> list[str]:
    return ["A23456789TJQK"[c % 13] + "CDHS"[c // 13] for c in board.stock]


def test_view_after_undo_of_a_flip_hides_the_card_again() -> None:
    """RULES common (undo): undo must not reveal anything new; docs: the card a move
    turned up is face down again after undo, and views show what the position shows."""
    board = build("yukon", [["8S"], ["kc", "qd", "7H"]])
    board.play("2:1>1")
    assert '"QD"' in json.dumps(view(board))
    board.undo()
    text = json.dumps(view(board))
    assert '"QD"' not in text and '"KC"' not in text
    assert view(board)["tableau"][1] == {"down": 2, "up": ["7H"]}


def test_view_double_deck_foundations_and_counts() -> None:
    board = build("double_yukon", [["KH"]], foundations={"H": [3, 1]})
    seen = view(board)
    assert seen["foundations"]["H"] == [3, 1]
    assert seen["stock"] == 0 and seen["waste"] == []
