"""A playable board rebuilt from a view: legal moves without knowing hidden cards.

A racer only ever receives its own board's *view* (face-down cards and the stock are
counts). Which moves are legal right now never depends on what the hidden cards are:
they can neither move nor take a card. So the client fills the hidden places with the
faces it cannot see (in any order) and asks the engine. What it learns from that board
is exactly what is legal now; what the filler cards are is meaningless and is never
shown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from solrace.protocol.views import board_view_wire
from solrace.rules import Board, RulesError, load_position, parse_move, variant_class, view
from solrace.rules.cards import CARDS_PER_DECK, NAMES, NAMES_DOWN, RANKS, SUITS, face_of
from solrace.rules.log import UNDO, apply_entry

_FACE = {name: face for face, name in enumerate(NAMES)}


def decks_of(variant: object) -> int:
    """How many decks a variant deals, as the rules engine says (1 if the variant is
    unknown to this client's engine: a newer server's variant still renders)."""
    try:
        return variant_class(str(variant)).decks
    except RulesError:
        return 1


def board_from_view(view: Mapping[str, Any]) -> Board:
    """An engine board whose legal moves are those of the viewed board."""
    decks = decks_of(view["variant"])
    # Copies of each face not in sight, counted by face index: one look-up per card
    # (a client rebuilds its board this way for every move it considers).
    unseen_copies = [decks] * CARDS_PER_DECK
    stock_cards = list(view.get("stock_cards") or [])
    for names in (*(column["up"] for column in view["tableau"]), view["waste"], stock_cards):
        for name in names:
            unseen_copies[_FACE[name]] -= 1
    foundations = view["foundations"]
    for s, suit in enumerate(SUITS):
        tops = foundations[suit] if decks > 1 else [foundations[suit]]
        for top in tops:
            for rank in range(1, top + 1):
                unseen_copies[face_of(s, rank)] -= 1
    if any(n < 0 for n in unseen_copies):
        raise ValueError("the view shows a card more often than the deck holds it")
    unseen = [NAMES_DOWN[face] for face, n in enumerate(unseen_copies) for _ in range(n)]
    tableau = []
    for column in view["tableau"]:
        hidden = [unseen.pop() for _ in range(column["down"])]
        tableau.append(hidden + list(column["up"]))
    if stock_cards:  # the owner's view of thoughtful Klondike lists its stock
        stock = list(stock_cards)
    else:
        stock = [unseen.pop() for _ in range(view["stock"])]
        if view["options"].get("thoughtful"):
            stock = [name.upper() for name in stock]  # thoughtful stock is face up
    position = {
        "variant": view["variant"],
        "options": dict(view["options"]),
        "tableau": tableau,
        "foundations": dict(foundations),
        "stock": stock,
        "waste": list(view["waste"]),
        "recycles": view["recycles"],
    }
    return load_position(position)


def recycle_is_legal(view: Mapping[str, Any]) -> bool:
    """Whether the engine would turn the viewed board's waste over now (``R``): not
    with a stock left, nor with the passes spent (Klondike's ``max_passes``, and
    Australian's one pass) — where an empty stock offered ``↺`` and the footer ``r``.
    False for a view the engine cannot rebuild (a spectator's, cards withheld)."""
    try:
        board = board_from_view(view)
    except (ValueError, KeyError, TypeError, RulesError):
        return False
    return board.refusal(parse_move("R")) is None


def played_view(board_view: Mapping[str, Any], move: str) -> dict[str, Any] | None:
    """The owner's view after ``move``, where the engine can tell it from ``board_view``
    alone: None for a move it refuses, an ``undo`` (the rebuilt board has no history),
    and any move that turns up a card the view does not show — a face-down card
    flipped, a stock card drawn. The hidden places hold fillers (:func:`board_from_view`),
    so such a move's card would be a guess: it is never shown. Every other move's
    result is exactly what the server will answer (the engine is deterministic and the
    fillers neither move nor are seen), so the terminal client can show it before the
    server's ``moved`` comes (docs/fairness.md, "Latency")."""
    if move == UNDO:
        return None
    try:
        board = board_from_view(board_view)
        apply_entry(board, move)
        after = board_view_wire(view(board, owner=True), owner=True)
    except (ValueError, KeyError, TypeError, RulesError):
        return None
    if _in_sight(after) - _in_sight(board_view):
        return None  # a card comes into sight: only the server may say which
    return after


def _in_sight(board_view: Mapping[str, Any]) -> Counter[str]:
    """Every card the view shows, by name (a foundation's cards too: its count)."""
    names: Counter[str] = Counter()
    for column in board_view["tableau"]:
        names.update(column["up"])
    names.update(board_view["waste"])
    names.update(board_view.get("stock_cards") or [])
    for s, suit in enumerate(SUITS):
        tops = board_view["foundations"][suit]
        for top in tops if isinstance(tops, list) else [tops]:
            names.update(RANKS[rank - 1] + SUITS[s] for rank in range(1, int(top) + 1))
    return names
