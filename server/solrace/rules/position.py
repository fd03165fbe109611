"""Positions as JSON (docs/rules.md, "Positions and move notation"), like FEN for chess.

:func:`load_position` accepts a JSON string or an already-parsed mapping and refuses
anything that cannot occur with an :class:`InvalidPositionError` that names the
problem. :func:`dump_position` writes the canonical form: every option spelled out,
keys in the order of docs/rules.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, Final

from solrace.quoting import json_quoted

from .board import Board
from .cards import CARDS_PER_DECK, NAMES, NAMES_DOWN, RANK, SUIT, SUITS, face_of, parse_card
from .errors import InvalidPositionError, NotationError, RulesError
from .options import options_to_json
from .variants import variant_class

_KEYS = ("variant", "options", "tableau", "foundations", "stock", "waste", "recycles")

#: The most unknown keys a refusal names, then how many more: a file of 60,000 stray
#: keys was refused with every one quoted, one line of 589 KB.
MAX_KEYS_NAMED: Final = 3


def position_dict(board: Board) -> dict[str, Any]:
    """The position as plain JSON-ready data."""
    tableau = []
    for col, hidden in zip(board.tableau, board.down, strict=True):
        names = [NAMES_DOWN[c % CARDS_PER_DECK] for c in col[:hidden]]
        names += [NAMES[c % CARDS_PER_DECK] for c in col[hidden:]]
        tableau.append(names)
    foundations: dict[str, Any] = {}
    for s, suit in enumerate(SUITS):
        ranks = [len(board.piles[p]) for p in board._suit_piles[s]]
        foundations[suit] = ranks[0] if board.decks == 1 else ranks
    stock_names = NAMES if board.options.thoughtful else NAMES_DOWN
    return {
        "variant": board.variant,
        "options": options_to_json(board.options, board.allowed_options),
        "tableau": tableau,
        "foundations": foundations,
        "stock": [stock_names[c % CARDS_PER_DECK] for c in board.stock],
        "waste": [NAMES[c % CARDS_PER_DECK] for c in board.waste],
        "recycles": board.recycles,
    }


def dump_position(board: Board, indent: int | None = None) -> str:
    """The position as canonical JSON text."""
    return json.dumps(position_dict(board), indent=indent, ensure_ascii=False)


def load_position(data: str | bytes | Mapping[str, Any]) -> Board:
    """Read a position; raise :class:`InvalidPositionError` if it cannot occur."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise InvalidPositionError(f"not JSON: {exc}") from None
        except ValueError:  # a number past int()'s limit; Python's words advise a call
            digits = sys.get_int_max_str_digits()
            raise InvalidPositionError(
                f"not a position: a number of more than {digits} digits"
            ) from None
        except RecursionError:  # a hostile file: arrays nested a hundred thousand deep
            raise InvalidPositionError("not a position: JSON nested too deeply") from None
    if not isinstance(data, Mapping):
        raise InvalidPositionError("a position is a JSON object")
    unknown = set(data) - set(_KEYS)
    if unknown:
        names = sorted(unknown)
        shown = ", ".join(json_quoted(key) for key in names[:MAX_KEYS_NAMED])
        if len(names) > MAX_KEYS_NAMED:
            shown += f" and {len(names) - MAX_KEYS_NAMED:,} more"
        raise InvalidPositionError(f"unknown keys in position: {shown}")
    if "variant" not in data or "tableau" not in data or "foundations" not in data:
        raise InvalidPositionError("a position needs at least variant, tableau and foundations")
    options = data.get("options")
    if options is None:  # absent or null: the variant's defaults ("or {}" took [] and false)
        options = {}
    if not isinstance(options, Mapping):
        raise InvalidPositionError("options must be a JSON object")
    try:
        board = variant_class(data["variant"], json_quoted)(dict(options))
    except RulesError as exc:
        raise InvalidPositionError(str(exc)) from None
    return _Loader(board).load(data)


class _Loader:
    """Reads one position into ``board``, counting every face as it goes."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.copies_seen = [0] * CARDS_PER_DECK

    def card(self, text: Any, where: str) -> tuple[int, bool]:
        try:
            face, up = parse_card(text)
        except NotationError as exc:
            raise InvalidPositionError(f"{where}: {exc}") from None
        seen = self.copies_seen[face]
        if seen >= self.board.decks:
            raise InvalidPositionError(
                f"{where}: {NAMES[face]} appears more than {self._times(self.board.decks)}"
            )
        self.copies_seen[face] = seen + 1
        return face + seen * CARDS_PER_DECK, up

    @staticmethod
    def _times(n: int) -> str:
        return "once" if n == 1 else "twice"

    def load(self, data: Mapping[str, Any]) -> Board:
        board = self.board
        opts = board.options
        may_hide = board.variant != "australian" and not opts.thoughtful
        tableau_data = data["tableau"]
        if not isinstance(tableau_data, list) or len(tableau_data) != board.columns:
            raise InvalidPositionError(f"{board.variant} has {board.columns} tableau columns")
        tableau: list[list[int]] = []
        down: list[int] = []
        for c, column in enumerate(tableau_data):
            where = f"column {c + 1}"
            if not isinstance(column, list):
                raise InvalidPositionError(f"{where} must be a list of cards")
            cards: list[int] = []
            hidden = 0
            for i, text in enumerate(column):
                card, up = self.card(text, where)
                if not up:
                    if not may_hide:
                        raise InvalidPositionError(
                            f"{where}: {text} is face down, but every tableau card is face up"
                            f" in {self._describe()}"
                        )
                    if hidden != i:
                        raise InvalidPositionError(
                            f"{where}: face-down {text} lies on a face-up card"
                        )
                    hidden += 1
                cards.append(card)
            if cards and hidden == len(cards) and opts.auto_flip:
                raise InvalidPositionError(
                    f"{where}: its top card {column[-1]} is face down, which cannot happen"
                    " with auto_flip on"
                )
            tableau.append(cards)
            down.append(hidden)
        stock = self.pile_of(data, "stock", face_up=opts.thoughtful)
        waste = self.pile_of(data, "waste", face_up=True)
        if not board.has_stock and (stock or waste):
            raise InvalidPositionError(f"{board.variant} has no stock or waste")
        recycles = data.get("recycles", 0)
        if isinstance(recycles, bool) or not isinstance(recycles, int) or recycles < 0:
            raise InvalidPositionError("recycles must be a whole number ≥ 0")
        limit = board._max_recycles if board.has_stock else 0
        if limit is not None and recycles > limit:
            raise InvalidPositionError(
                f"recycles is {recycles}, but this game allows at most {limit}"
            )
        piles = self.foundations(data["foundations"])
        missing = [NAMES[f] for f in range(CARDS_PER_DECK) if self.copies_seen[f] < board.decks]
        if missing:
            raise InvalidPositionError(f"cards missing: {', '.join(missing)}")
        board._set_up(tableau, down, piles, stock, waste, recycles)
        return board

    def _describe(self) -> str:
        return "thoughtful klondike" if self.board.options.thoughtful else self.board.variant

    def pile_of(self, data: Mapping[str, Any], key: str, face_up: bool) -> list[int]:
        items = data.get(key, [])
        if not isinstance(items, list):
            raise InvalidPositionError(f"{key} must be a list of cards")
        cards = []
        for text in items:
            card, up = self.card(text, key)
            if up != face_up:
                state = "face up (upper case)" if face_up else "face down (lower case)"
                raise InvalidPositionError(f"{key}: {text} must be {state}")
            cards.append(card)
        return cards

    def foundations(self, data: Any) -> list[list[int]]:
        board = self.board
        if not isinstance(data, Mapping) or set(data) != set(SUITS):
            raise InvalidPositionError("foundations must give a rank for each of C, D, H, S")
        piles: list[list[int]] = []
        for s, suit in enumerate(SUITS):
            value = data[suit]
            ranks = value if board.decks > 1 else [value]
            if not isinstance(ranks, list) or len(ranks) != board.decks:
                shape = "a list of two ranks" if board.decks > 1 else "a rank"
                raise InvalidPositionError(f"foundation {suit} must be {shape}")
            for rank in ranks:
                if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= 13:
                    raise InvalidPositionError(
                        f"foundation {suit}: rank {json_quoted(rank)} is not 0–13"
                    )
                pile = []
                for r in range(1, rank + 1):
                    card, _ = self.card(NAMES[face_of(s, r)], f"foundation {suit}")
                    assert RANK[card] == r and SUIT[card] == s
                    pile.append(card)
                piles.append(pile)
        return piles
