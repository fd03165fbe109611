"""What a viewer may see of a board (DESIGN.md: hidden information is sacred).

A view never holds a card id, and never the face of a face-down card or of a stock
card: face-down cards are a count per column, the stock is a count. Views are the only
board data the server sends; racers get their own board's view, spectators every
racer's, nobody a face they could not see at the table.
"""

from __future__ import annotations

from typing import Any

from .board import Board
from .cards import CARDS_PER_DECK, NAMES, SUITS
from .options import options_to_json


def view(board: Board, owner: bool = False) -> dict[str, Any]:
    """The board as a viewer sees it.

    ``owner`` is True for the player's own view; it matters only under thoughtful
    Klondike, where the player (and nobody else) sees the stock's cards.
    """
    tableau = [
        {"down": hidden, "up": [NAMES[c % CARDS_PER_DECK] for c in col[hidden:]]}
        for col, hidden in zip(board.tableau, board.down, strict=True)
    ]
    foundations: dict[str, Any] = {}
    for s, suit in enumerate(SUITS):
        ranks = [len(board.piles[p]) for p in board._suit_piles[s]]
        foundations[suit] = ranks[0] if board.decks == 1 else ranks
    result: dict[str, Any] = {
        "variant": board.variant,
        "options": options_to_json(board.options, board.allowed_options),
        "tableau": tableau,
        "foundations": foundations,
        "stock": len(board.stock),
        "waste": [NAMES[c % CARDS_PER_DECK] for c in board.waste],
        "recycles": board.recycles,
    }
    if owner and board.options.thoughtful:
        result["stock_cards"] = [NAMES[c % CARDS_PER_DECK] for c in board.stock]
    return result


def hidden_faces(board: Board, owner: bool = False) -> set[str]:
    """Names of the faces a viewer must not learn from this board now: faces of which
    every copy is face down in the tableau or (except for a thoughtful owner) in the
    stock. With two decks, a face whose other copy is in sight is not a secret. Used by
    leak checks."""
    hidden_ids = [c for col, d in zip(board.tableau, board.down, strict=True) for c in col[:d]]
    if not (owner and board.options.thoughtful):
        hidden_ids += board.stock
    copies: dict[int, int] = {}
    for card in hidden_ids:
        copies[card % CARDS_PER_DECK] = copies.get(card % CARDS_PER_DECK, 0) + 1
    return {NAMES[face] for face, n in copies.items() if n == board.decks}
