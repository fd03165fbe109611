"""What a viewer may see of a board (docs/design.md: hidden information is sacred).

A view never holds a card id, and never the face of a face-down card or of a stock
card: face-down cards are a count per column, the stock is a count. Views are the only
board data the server sends; racers get their own board's view, spectators every
racer's, nobody a face they could not see at the table.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from .board import Board
from .cards import CARDS_PER_DECK, NAMES, SUITS
from .options import Options, options_to_json

#: Card names by id, for one deck and for every id of a two-deck game (id % 52).
_NAMES: tuple[str, ...] = tuple(NAMES)
_NAMES_BY_ID: tuple[str, ...] = tuple(NAMES[i % CARDS_PER_DECK] for i in range(2 * CARDS_PER_DECK))


#: A variant's options as JSON, by variant class and options (both immutable): the
#: same few for every view a room sends.
_OPTIONS_JSON: dict[tuple[type[Board], Options], dict[str, Any]] = {}


def view(board: Board, owner: bool = False, shown: Container[int] | None = None) -> dict[str, Any]:
    """The board as a viewer sees it.

    ``owner`` is True for the player's own view; it matters only under thoughtful
    Klondike, where the player (and nobody else) sees the stock's cards.

    ``shown`` makes it a *fair* view (docs/fairness.md): a face-up card whose id is
    not in ``shown`` is sent as ``None`` in the tableau and waste, and a foundation
    pile counts only its cards up to the first withheld one, the rest being counted
    in ``withheld_foundation``. The server passes the cards that every racer still
    racing has seen in its own game, and sends a spectator only fair views that
    withhold nothing (a withheld card's place and moves would still betray it):
    the markers say which views those are.
    """

    # Built inline, not through a per-card helper: a view is built for every move's
    # reply and every spectator board, and the calls were most of its cost.
    names = _NAMES if board.decks == 1 else _NAMES_BY_ID
    if shown is None:
        tableau = [
            {"down": hidden, "up": [names[c] for c in col[hidden:]]}
            for col, hidden in zip(board.tableau, board.down, strict=True)
        ]
        waste: list[str | None] = [names[c] for c in board.waste]
    else:
        tableau = [
            {"down": hidden, "up": [names[c] if c in shown else None for c in col[hidden:]]}
            for col, hidden in zip(board.tableau, board.down, strict=True)
        ]
        waste = [names[c] if c in shown else None for c in board.waste]
    withheld = 0
    foundations: dict[str, Any] = {}
    for s, suit in enumerate(SUITS):
        ranks = []
        for p in board._suit_piles[s]:
            pile = board.piles[p]
            count = len(pile)
            if shown is not None:
                count = next((i for i, c in enumerate(pile) if c not in shown), count)
                withheld += len(pile) - count
            ranks.append(count)
        foundations[suit] = ranks[0] if board.decks == 1 else ranks
    key = (type(board), board.options)
    options = _OPTIONS_JSON.get(key)
    if options is None:
        options = _OPTIONS_JSON[key] = options_to_json(board.options, board.allowed_options)
    result: dict[str, Any] = {
        "variant": board.variant,
        "options": dict(options),  # a copy: the caller owns its view
        "tableau": tableau,
        "foundations": foundations,
        "stock": len(board.stock),
        "waste": waste,
        "recycles": board.recycles,
    }
    if shown is not None:
        result["withheld_foundation"] = withheld
    if owner and board.options.thoughtful:
        result["stock_cards"] = [NAMES[c % CARDS_PER_DECK] for c in board.stock]
    return result


def seen_cards(board: Board) -> set[int]:
    """Ids of the cards the board's own player sees now: face up in the tableau, the
    waste, the foundations, and the stock under thoughtful Klondike. A player's
    knowledge is the union of this over its game (undo takes nothing back)."""
    ids = {c for col, hidden in zip(board.tableau, board.down, strict=True) for c in col[hidden:]}
    ids.update(board.waste)
    for pile in board.piles:
        ids.update(pile)
    if board.options.thoughtful:
        ids.update(board.stock)
    return ids


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
