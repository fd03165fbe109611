"""How a bot picks its next move from what a racer may see: its own board's view.

A strategy gets an engine board rebuilt from the view (:func:`board_from_view`: the
hidden cards are fillers, so only *which moves are legal* and *what the visible cards
do* are meaningful) and the set of positions the bot has already been in. It never
learns a face-down card, so a bot is exactly as informed as a human racer.

Positions are compared by :func:`position_key`, the view without ``recycles`` and
``options``: turning the waste over returns a Klondike stock to a position the bot has
already seen, and counting that as new would let a bot cycle the stock forever.

Where a move leads can be worked out on the rebuilt board for every move except those
that show a hidden card: a turn (the face is unknown, but the face-down count drops,
so the position is new for sure) and a draw (the drawn card is unknown and the
position may well have been seen). A draw is therefore judged by the way taken, not
the place reached: it is new when the bot has never drawn from this position before.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from solrace.rules import Board, Move, view
from solrace.rules.moves import (
    DRAW,
    FLIP,
    FOUNDATION_TO_TABLEAU,
    RECYCLE,
    TABLEAU,
    TO_FOUNDATION,
    WASTE_TO_FOUNDATION,
    WASTE_TO_TABLEAU,
)

_KEY_FIELDS: Final = ("tableau", "foundations", "stock", "waste", "stock_cards")


def position_key(board_view: Mapping[str, Any]) -> str:
    """A canonical text for a viewed position, for "have I been here before?"."""
    return json.dumps({k: board_view.get(k) for k in _KEY_FIELDS}, sort_keys=True)


def board_key(board: Board) -> str:
    """:func:`position_key` of a board as its owner sees it."""
    return position_key(view(board, owner=True))


@dataclass(frozen=True)
class Choice:
    """A chosen move; ``novel`` is False when it returns to a position already seen
    (the bot counts those to notice that it is going round in circles)."""

    move: Move
    novel: bool


@dataclass
class Memory:
    """What a bot remembers of its game: the positions it has been in, and which
    move it took from which position."""

    seen: set[str] = field(default_factory=set)
    taken: set[tuple[str, str]] = field(default_factory=set)

    def arrive(self, board_view: Mapping[str, Any]) -> str:
        key = position_key(board_view)
        self.seen.add(key)
        return key

    def leave(self, key: str, move: str) -> None:
        self.taken.add((key, move))


Strategy = Callable[[Board, Memory, random.Random], Choice | None]


def _reveals(board: Board, move: Move) -> bool:
    """Whether ``move`` turns a face-down card up (decided by playing it and taking it
    back: the rebuilt board's face-down count is the real one)."""
    before = board.face_down_count()
    board.push(move)
    try:
        return board.face_down_count() < before
    finally:
        board.pop()


def _novel(board: Board, move: Move, memory: Memory, here: str) -> bool:
    """Whether ``move`` leads somewhere new (a draw: whether it was ever drawn here)."""
    if move.kind == DRAW:
        return (here, str(move)) not in memory.taken
    board.push(move)
    try:
        return board_key(board) not in memory.seen
    finally:
        board.pop()


def _pointless(board: Board, move: Move) -> bool:
    """A whole face-up column moved onto an empty column: a new position on paper,
    nothing gained (Yukon kings shuffling between empty columns)."""
    if move.kind != TABLEAU:
        return False
    src = board.tableau[move.src]
    return board.down[move.src] == 0 and move.number == len(src) and not board.tableau[move.dst]


def _opens_something(board: Board, move: Move) -> bool:
    """One move of lookahead: after ``move``, can a card go up or a card be turned?"""
    board.push(move)
    try:
        for nxt in board.legal_moves():
            kind = nxt.kind
            if kind in (TO_FOUNDATION, WASTE_TO_FOUNDATION, FLIP):
                return True
            if kind == TABLEAU:
                col = board.tableau[nxt.src]
                down = board.down[nxt.src]
                if down and nxt.number == len(col) - down:
                    return True
        return False
    finally:
        board.pop()


def _fallback(moves: list[Move], rng: random.Random) -> Choice | None:
    """Only revisiting moves are left: prefer the stock (the way round a Klondike stock
    always revisits), else anything. The bot's stall counter bounds how long."""
    if not moves:
        return None
    stock = [m for m in moves if m.kind in (DRAW, RECYCLE)]
    return Choice(rng.choice(stock or moves), novel=False)


def greedy(board: Board, memory: Memory, rng: random.Random) -> Choice | None:
    """A plain human-like plan: cards to the foundations first, then moves that turn a
    card up, then waste → tableau moves and tableau moves that make a foundation move or
    a turn possible next, then draw/recycle, then any other tableau move (before drawing
    when the stock allows one pass only); only to positions not seen before, and never
    foundation → tableau unless nothing else is left. Ties are broken at random."""
    moves = board.legal_moves()
    # With a single pass through the stock a drawn card is gone for good, so
    # rearranging the tableau first is worth more than drawing.
    one_pass = board.options.max_passes == 1
    here = board_key(board)
    tiers: list[list[Move]] = [[], [], [], [], []]
    for move in moves:
        kind = move.kind
        if kind == FOUNDATION_TO_TABLEAU:
            continue
        if kind in (TO_FOUNDATION, WASTE_TO_FOUNDATION):
            if _reveals(board, move) or _novel(board, move, memory, here):
                tiers[0].append(move)
        elif _reveals(board, move):
            tiers[1].append(move)
        elif kind == WASTE_TO_TABLEAU:
            if _novel(board, move, memory, here):
                tiers[2].append(move)
        elif kind == TABLEAU:
            if not _pointless(board, move) and _novel(board, move, memory, here):
                useful = _opens_something(board, move) or one_pass
                tiers[2 if useful else 4].append(move)
        elif kind in (DRAW, RECYCLE) and _novel(board, move, memory, here):
            tiers[3].append(move)
    for tier in tiers:
        if tier:
            return Choice(rng.choice(tier), novel=True)
    return _fallback(moves, rng)


def random_walk(board: Board, memory: Memory, rng: random.Random) -> Choice | None:
    """Any legal move to a position not seen before, chosen uniformly."""
    moves = board.legal_moves()
    here = board_key(board)
    fresh = [m for m in moves if _reveals(board, m) or _novel(board, m, memory, here)]
    if fresh:
        return Choice(rng.choice(fresh), novel=True)
    return _fallback(moves, rng)


STRATEGIES: Final[dict[str, Strategy]] = {"greedy": greedy, "random": random_walk}
