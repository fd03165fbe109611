"""Keyboard play, without a terminal: a cursor over the board, a picked source, the
picked cards' legal destinations, and the canonical notation a key sequence produces.

The controller never decides whether a move is legal: it only highlights the
destinations the engine lists for the picked cards (``board_from_view(view)``) and
turns what the player chose into notation. The server judges the move and its refusal
(the engine's reason) is what the player reads.

Cursor zones: ``tableau`` (a column and an index into its face-up cards) and the top
row: ``stock``, ``waste`` and ``foundation`` (a pile index: suit for one deck;
``suit * 2 + copy`` for two).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from solrace.rules import Board, NotationError, RulesError, variant_class
from solrace.rules.cards import SUITS
from solrace.rules.moves import (
    FOUNDATION_TO_TABLEAU,
    TABLEAU,
    TO_FOUNDATION,
    WASTE_TO_FOUNDATION,
    WASTE_TO_TABLEAU,
    parse_move,
)

from ..boardview import board_from_view, decks_of

TABLEAU_ZONE = "tableau"
STOCK = "stock"
WASTE = "waste"
FOUNDATION = "foundation"


@dataclass(frozen=True)
class Cursor:
    zone: str = TABLEAU_ZONE
    col: int = 0  # tableau column, or foundation pile index
    index: int = 0  # index into the column's face-up cards (tableau only)


@dataclass(frozen=True)
class Source:
    """Picked cards: ``count`` cards off the top of tableau column ``col``; the top
    waste card; or the top card of foundation pile ``col``."""

    zone: str
    col: int = 0
    count: int = 1


@dataclass(frozen=True)
class Marks:
    """What the board rendering highlights."""

    cursor: Cursor | None = None
    picked: Source | None = None
    dests: frozenset[int] = frozenset()
    to_foundation: bool = False


@dataclass(frozen=True)
class Action:
    """The result of a key: a move to send (notation), and/or words for the player."""

    move: str | None = None
    message: str | None = None


@dataclass
class Layout:
    """The shape of a view that navigation needs."""

    columns: int
    has_stock: bool
    piles: int  # foundation piles: 4, or 8 for two decks
    ups: list[int] = field(default_factory=list)  # face-up cards per column
    downs: list[int] = field(default_factory=list)
    waste_shown: int = 1  # waste cards the top row draws: 3 for draw 3

    @staticmethod
    def shown_of(view: Mapping[str, Any]) -> int:
        """How many waste cards the top row draws (render's ``_top_row``): the draw,
        1 to 3."""
        return max(1, min(int(view["options"].get("draw", 1) or 1), 3))

    @classmethod
    def of(cls, view: Mapping[str, Any]) -> Layout:
        tableau = view["tableau"]
        try:
            has_stock = variant_class(view["variant"]).has_stock
        except RulesError:
            has_stock = bool(view.get("stock") or view.get("waste"))
        decks = decks_of(view.get("variant"))
        return cls(
            columns=len(tableau),
            has_stock=has_stock,
            piles=4 * decks,
            ups=[len(c["up"]) for c in tableau],
            downs=[c["down"] for c in tableau],
            waste_shown=cls.shown_of(view) if has_stock else 1,
        )

    @property
    def top_zones(self) -> list[tuple[str, int]]:
        """The top row's cursor positions, left to right."""
        zones: list[tuple[str, int]] = []
        if self.has_stock:
            zones += [(STOCK, 0), (WASTE, 0)]
        zones += [(FOUNDATION, p) for p in range(self.piles)]
        return zones

    @property
    def top_spans(self) -> list[tuple[int, int]]:
        """The tableau columns (first, last; 0-based) each top-row place is drawn over,
        in :attr:`top_zones` order: one column a place, the waste of draw 3 three (its
        top card over the last). A column past the last place has none over it."""
        spans: list[tuple[int, int]] = []
        at = 0
        if self.has_stock:
            spans += [(0, 0), (1, self.waste_shown)]
            at = 1 + self.waste_shown
        spans += [(at + p, at + p) for p in range(self.piles)]
        return spans


def pretty(name: str) -> str:
    """``TH`` → ``10♥``: a card as the player reads it."""
    rank = "10" if name[0] == "T" else name[0]
    return rank + {"C": "♣", "D": "♦", "H": "♥", "S": "♠"}[name[1]]


def pile_suit(view: Mapping[str, Any], pile: int) -> tuple[int, int]:
    """(suit index, foundation number for notation: 0 single deck, 1/2 double)."""
    if decks_of(view.get("variant")) == 2:
        return pile // 2, pile % 2 + 1
    return pile, 0


def pile_rank(view: Mapping[str, Any], pile: int) -> int:
    suit, number = pile_suit(view, pile)
    top = view["foundations"][SUITS[suit]]
    return int(top[number - 1]) if number else int(top)


def normalise(text: str) -> str:
    """A typed move as canonical notation: ``fh > 4`` → ``FH>4``; ``Undo`` → ``undo``.
    Text that is no move in any case is left as typed (spaces dropped): the server's
    refusal quotes it, and ``garbage`` was said back as ``'GARBAGE' is not a move``
    (a newcomer's audit)."""
    squeezed = "".join(text.split())
    if squeezed.lower() in ("undo", "u"):
        return "undo"
    try:
        parse_move(squeezed.upper())
    except NotationError:
        return squeezed
    return squeezed.upper()


class Controller:
    """Cursor, pick and legal destinations over one racer's board view."""

    def __init__(self, view: Mapping[str, Any] | None = None) -> None:
        self.view: Mapping[str, Any] | None = None
        self.layout = Layout(columns=0, has_stock=False, piles=4)
        self.cursor = Cursor()
        self.picked: Source | None = None
        self._board: Board | None = None
        self._dests: frozenset[int] = frozenset()
        self._to_foundation = False
        if view is not None:
            self.set_view(view)

    # ------------------------------------------------------------- state
    def set_view(self, view: Mapping[str, Any] | None) -> None:
        """A new board (after a move, an undo, a resume): the pick is dropped and the
        cursor kept where it was, as far as the new board allows."""
        self.view = view
        self._board = None
        self.picked = None
        self._dests, self._to_foundation = frozenset(), False
        if view is None:
            return
        old_index = self.cursor.index
        old_up = self.layout.ups[self.cursor.col] if self.cursor.col < len(self.layout.ups) else 0
        self.layout = Layout.of(view)
        cursor = self.cursor
        if cursor.zone == TABLEAU_ZONE:
            col = min(cursor.col, self.layout.columns - 1)
            was_top = old_index >= old_up - 1
            up = self.layout.ups[col]
            index = up - 1 if was_top else old_index
            self.cursor = Cursor(TABLEAU_ZONE, col, max(0, min(index, up - 1)))
        elif (cursor.zone, cursor.col) not in self.layout.top_zones:
            self.cursor = Cursor(TABLEAU_ZONE, 0, max(0, self.layout.ups[0] - 1))

    @property
    def board(self) -> Board | None:
        """The engine board of the view (legal moves only; hidden cards are fillers)."""
        if self._board is None and self.view is not None:
            try:
                self._board = board_from_view(self.view)
            except (ValueError, KeyError, TypeError, RulesError):
                return None  # no highlights; the server still judges every move
        return self._board

    def marks(self) -> Marks:
        return Marks(self.cursor, self.picked, self._dests, self._to_foundation)

    @property
    def destinations(self) -> frozenset[int]:
        """Columns (0-based) the picked cards may legally go to."""
        return self._dests

    @property
    def foundation_is_legal(self) -> bool:
        return self._to_foundation

    # -------------------------------------------------------- navigation
    def _tableau(self, col: int, index: int | None = None) -> None:
        col = max(0, min(col, self.layout.columns - 1))
        up = self.layout.ups[col]
        top = max(0, up - 1)
        self.cursor = Cursor(TABLEAU_ZONE, col, top if index is None else max(0, min(index, top)))

    def left(self) -> None:
        self._step(-1)

    def right(self) -> None:
        self._step(1)

    def _step(self, delta: int) -> None:
        if self.view is None:
            return
        cursor = self.cursor
        if cursor.zone == TABLEAU_ZONE:
            self._tableau((cursor.col + delta) % self.layout.columns)
            return
        zones = self.layout.top_zones
        i = zones.index((cursor.zone, cursor.col)) if (cursor.zone, cursor.col) in zones else 0
        zone, col = zones[(i + delta) % len(zones)]
        self.cursor = Cursor(zone, col)

    def up(self) -> None:
        if self.view is None:
            return
        cursor = self.cursor
        if cursor.zone != TABLEAU_ZONE:
            return
        if cursor.index > 0:
            self.cursor = Cursor(TABLEAU_ZONE, cursor.col, cursor.index - 1)
            return
        # The place drawn over the column, else the nearest (a column past the last
        # place: the last). By position in the row, Klondike draw 3's ↑ went two places
        # right of the pile over the column (its waste is three cards wide), and ↓ came
        # down two columns left of it.
        zones, spans = self.layout.top_zones, self.layout.top_spans
        slot = min(
            range(len(zones)),
            key=lambda i: (max(spans[i][0] - cursor.col, cursor.col - spans[i][1], 0), i),
        )
        self.cursor = Cursor(*zones[slot])

    def down(self) -> None:
        if self.view is None:
            return
        cursor = self.cursor
        if cursor.zone == TABLEAU_ZONE:
            up = self.layout.ups[cursor.col]
            if cursor.index < up - 1:
                self.cursor = Cursor(TABLEAU_ZONE, cursor.col, cursor.index + 1)
            return
        zones = self.layout.top_zones
        slot = zones.index((cursor.zone, cursor.col))
        under = self.layout.top_spans[slot][1]  # the waste's top card, for draw 3
        self._tableau(min(under, self.layout.columns - 1), 0)

    def home(self) -> None:
        """Cursor to the top card of its column."""
        if self.cursor.zone == TABLEAU_ZONE:
            self._tableau(self.cursor.col)

    # ------------------------------------------------------------ picking
    def cancel(self) -> None:
        self.picked = None
        self._dests, self._to_foundation = frozenset(), False

    def _pick(self, source: Source) -> Action:
        self.picked = source
        dests: set[int] = set()
        to_foundation = False
        board = self.board
        for move in board.legal_moves() if board is not None else ():
            kind = move.kind
            if source.zone == TABLEAU_ZONE:
                if kind == TABLEAU and move.src == source.col and move.number == source.count:
                    dests.add(move.dst)
                elif kind == TO_FOUNDATION and move.src == source.col and source.count == 1:
                    to_foundation = True
            elif source.zone == WASTE:
                if kind == WASTE_TO_TABLEAU:
                    dests.add(move.dst)
                elif kind == WASTE_TO_FOUNDATION:
                    to_foundation = True
            elif source.zone == FOUNDATION and kind == FOUNDATION_TO_TABLEAU:
                suit, number = pile_suit(self.view or {}, source.col)
                if move.src == suit and move.number == number:
                    dests.add(move.dst)
        self._dests, self._to_foundation = frozenset(dests), to_foundation
        what = self.describe(source)
        if not dests and not to_foundation:
            return Action(message=f"{what}: it cannot go anywhere (Esc puts it back)")
        return Action(message=f"{what} picked: choose a column or the foundation")

    def describe(self, source: Source) -> str:
        view = self.view or {}
        if source.zone == TABLEAU_ZONE:
            up = view["tableau"][source.col]["up"]
            first = up[len(up) - source.count]
            if source.count == 1:
                return pretty(first)
            return f"{pretty(first)} and {source.count - 1} on it"
        if source.zone == WASTE:
            return pretty(str(view["waste"][-1]))
        suit, _ = pile_suit(view, source.col)
        rank = pile_rank(view, source.col)
        return pretty("A23456789TJQK"[rank - 1] + SUITS[suit])

    def activate(self) -> Action:
        """Enter/space: pick the card under the cursor (with everything on it), or drop
        the picked cards where the cursor is."""
        view = self.view
        if view is None:
            return Action(message="no board yet")
        cursor = self.cursor
        if self.picked is not None:
            return self._drop(cursor)
        if cursor.zone == STOCK:
            return self.stock()
        if cursor.zone == WASTE:
            if not view["waste"]:
                return Action(message="the waste is empty")
            return self._pick(Source(WASTE))
        if cursor.zone == FOUNDATION:
            if pile_rank(view, cursor.col) == 0:
                return Action(message="that foundation is empty")
            return self._pick(Source(FOUNDATION, cursor.col))
        column = view["tableau"][cursor.col]
        up = len(column["up"])
        if up == 0:
            if column["down"]:
                if view["options"].get("auto_flip", True):
                    return Action(message=f"column {cursor.col + 1}: nothing to pick")
                return Action(move=f"U{cursor.col + 1}")
            return Action(message=f"column {cursor.col + 1} is empty")
        index = min(cursor.index, up - 1)
        return self._pick(Source(TABLEAU_ZONE, cursor.col, up - index))

    def _drop(self, cursor: Cursor) -> Action:
        source = self.picked
        assert source is not None
        if cursor.zone == FOUNDATION:
            return self._to_foundation_of(source)
        if cursor.zone in (STOCK, WASTE):
            self.cancel()
            return Action(message="cards cannot go onto the stock or the waste")
        if source.zone == TABLEAU_ZONE and cursor.col == source.col:
            self.cancel()  # dropping back where it came from: just put it down
            return Action(message="put back")
        return self.drop_on(cursor.col)

    def drop_on(self, column: int) -> Action:
        """The picked cards onto tableau column ``column`` (0-based)."""
        source = self.picked
        if source is None:
            return Action(message="pick a card first")
        self.cancel()
        if source.zone == TABLEAU_ZONE:
            if column == source.col:
                return Action(message="put back")
            return Action(move=f"{source.col + 1}:{source.count}>{column + 1}")
        if source.zone == WASTE:
            return Action(move=f"W>{column + 1}")
        suit, number = pile_suit(self.view or {}, source.col)
        return Action(move=f"F{SUITS[suit]}{number or ''}>{column + 1}")

    def _to_foundation_of(self, source: Source) -> Action:
        self.cancel()
        if source.zone == TABLEAU_ZONE:
            if source.count != 1:
                return Action(message="only a single top card goes to a foundation")
            return Action(move=f"{source.col + 1}>F")
        if source.zone == WASTE:
            return Action(move="W>F")
        return Action(message="that card is on a foundation already")

    def number(self, column: int) -> Action:
        """A column number key (0-based column): drop the picked cards there, or move the
        cursor to that column's top card."""
        if self.view is None or column >= self.layout.columns:
            return Action(message=f"there is no column {column + 1}")
        if self.picked is not None:
            return self.drop_on(column)
        self._tableau(column)
        return Action()

    def foundation(self) -> Action:
        """``f``: the picked card, or else the card under the cursor, to its foundation."""
        if self.view is None:
            return Action(message="no board yet")
        if self.picked is not None:
            return self._to_foundation_of(self.picked)
        cursor = self.cursor
        if cursor.zone in (WASTE, STOCK) and self.layout.has_stock:
            return Action(move="W>F")
        if cursor.zone == FOUNDATION:
            if pile_rank(self.view, cursor.col) == 0:  # as Enter there says
                return Action(message="that foundation is empty")
            return Action(message="that card is on a foundation already")
        return Action(move=f"{cursor.col + 1}>F")

    def stock(self) -> Action:
        """Enter on the stock: draw, or turn the waste over when the stock is empty."""
        view = self.view
        if view is None:
            return Action(message="no board yet")
        if not view.get("stock") and view.get("waste"):
            return Action(move="R")
        return Action(move="D")
