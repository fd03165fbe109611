"""The variants of docs/rules.md, each a :class:`~solrace.rules.board.Board` subclass.

A variant is a few class attributes (columns, decks, building rule, options) and its
layout: how a shuffled deck is dealt. The layouts are part of the deal specification in
``docs/deals.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from solrace.quoting import quoted

from .board import BUILD_SUIT, BUILD_SUIT_UP_OR_DOWN, Board
from .errors import UnknownVariantError

_COMMON: dict[str, Any] = {"undo": True, "auto_complete": True, "scoring": "standard"}
_YUKON_OPTIONS: dict[str, Any] = {
    "auto_flip": True,
    "foundation_to_tableau": False,
    **_COMMON,
}


class YukonFamilyBoard(Board):
    """Yukon layout: column 1 one face-up card; column k has k−1 face-down cards and
    five face-up cards (docs/rules.md, Yukon layout)."""

    allowed_options: ClassVar[dict[str, Any]] = _YUKON_OPTIONS
    face_up_per_column: ClassVar[int] = 5
    max_face_down: ClassVar[int] = 99

    def _layout(self, cards: list[int]) -> None:
        tableau: list[list[int]] = []
        down: list[int] = []
        pos = 0
        for k in range(self.columns):
            hidden = min(k, self.max_face_down)
            size = hidden + (1 if k == 0 and self.decks == 1 else self.face_up_per_column)
            tableau.append(cards[pos : pos + size])
            down.append(hidden)
            pos += size
        assert pos == len(cards), "layout must use every card"
        self._set_up(tableau, down, [[] for _ in range(4 * self.decks)], [], [], 0)


class YukonBoard(YukonFamilyBoard):
    """Yukon: group moves, build down in alternating colours."""

    variant = "yukon"


class RussianBoard(YukonFamilyBoard):
    """Russian: Yukon layout and group moves, build down by suit."""

    variant = "russian"
    build = BUILD_SUIT


class AlaskaBoard(YukonFamilyBoard):
    """Alaska: Yukon layout and group moves, build by suit up or down."""

    variant = "alaska"
    build = BUILD_SUIT_UP_OR_DOWN


class DoubleYukonBoard(YukonFamilyBoard):
    """Double Yukon: two decks, ten columns with 0,1,…,8,8 face-down cards and six
    face-up cards each (PySol's layout), eight foundations."""

    variant = "double_yukon"
    columns = 10
    decks = 2
    face_up_per_column = 6
    max_face_down = 8


class KlondikeBoard(Board):
    """Klondike: columns of 1…7 cards with the top face up, 24 in the stock."""

    variant = "klondike"
    has_stock = True
    runs_only = True
    allowed_options: ClassVar[dict[str, Any]] = {
        "draw": 1,
        "max_passes": None,
        "scoring": "standard",
        "thoughtful": False,
        "foundation_to_tableau": True,
        "auto_flip": True,
        "undo": True,
        "auto_complete": True,
    }

    def _layout(self, cards: list[int]) -> None:
        tableau: list[list[int]] = []
        down: list[int] = []
        pos = 0
        for k in range(self.columns):
            tableau.append(cards[pos : pos + k + 1])
            down.append(0 if self.options.thoughtful else k)
            pos += k + 1
        self._set_up(tableau, down, [[] for _ in range(4)], cards[pos:], [], 0)


class AustralianBoard(Board):
    """Australian: seven columns of four face-up cards; a one-pass, draw-one stock;
    group moves built down by suit; nothing comes back off a foundation."""

    variant = "australian"
    has_stock = True
    build = BUILD_SUIT
    allowed_options: ClassVar[dict[str, Any]] = dict(_COMMON)
    fixed_options: ClassVar[dict[str, Any]] = {
        "draw": 1,
        "max_passes": 1,
        "foundation_to_tableau": False,
        "auto_flip": True,
    }

    def _layout(self, cards: list[int]) -> None:
        tableau = [cards[4 * k : 4 * k + 4] for k in range(self.columns)]
        self._set_up(tableau, [0] * self.columns, [[] for _ in range(4)], cards[28:], [], 0)


VARIANTS: dict[str, type[Board]] = {
    cls.variant: cls
    for cls in (
        YukonBoard,
        KlondikeBoard,
        RussianBoard,
        AlaskaBoard,
        AustralianBoard,
        DoubleYukonBoard,
    )
}


def variant_class(variant: str, shown: Callable[[object], str] = quoted) -> type[Board]:
    """``variant``'s board class, else :class:`UnknownVariantError` quoting it with
    ``shown``: as typed on a command line, or as JSON where a position held it
    (``unknown variant true``, not Python's ``True``)."""
    try:
        return VARIANTS[variant]
    except (KeyError, TypeError):
        known = ", ".join(VARIANTS)
        raise UnknownVariantError(f"unknown variant {shown(variant)} (known: {known})") from None


def new_board(variant: str, options: dict[str, Any] | None = None) -> Board:
    """An empty board of ``variant`` with ``options`` resolved (no cards yet)."""
    return variant_class(variant)(options)
