"""Moves and the canonical move notation of docs/rules.md.

A :class:`Move` is an immutable value. Its ``str`` is its canonical notation, and
:func:`parse_move` reads that notation back; parsing is memoised, because move logs
repeat the same few hundred notations endlessly and a dictionary hit is far cheaper than
a parse.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from solrace.quoting import quoted

from .cards import SUITS
from .errors import NotAMove, NotationError

# Move kinds. Plain ints keep the engine's dispatch a couple of integer compares.
TABLEAU: Final = 0  # c:k>d
TO_FOUNDATION: Final = 1  # c>F
WASTE_TO_TABLEAU: Final = 2  # W>d
WASTE_TO_FOUNDATION: Final = 3  # W>F
FOUNDATION_TO_TABLEAU: Final = 4  # Fs>d (double deck: Fsn>d)
DRAW: Final = 5  # D
RECYCLE: Final = 6  # R
FLIP: Final = 7  # Uc

MAX_COLUMNS: Final = 10
#: The most cards one column can hold (two decks): a longer run names no move.
MAX_RUN: Final = 104


class Move(NamedTuple):
    """One move: an immutable value (a named tuple, so the parse cache can hand the same
    object to every caller safely). Columns are 0-based here and 1-based in notation.

    ``src`` is a column for tableau moves and a suit index (0–3) for foundation →
    tableau moves; ``number`` is the number of cards of a tableau move, and for a
    foundation → tableau move the foundation number (0 = single deck, 1 or 2 = which of
    the two foundations of that suit in a double deck).
    """

    kind: int
    src: int = 0
    number: int = 0
    dst: int = 0

    def __repr__(self) -> str:
        return f"Move({self})"

    def __str__(self) -> str:
        kind = self.kind
        if kind == TABLEAU:
            return f"{self.src + 1}:{self.number}>{self.dst + 1}"
        if kind == TO_FOUNDATION:
            return f"{self.src + 1}>F"
        if kind == WASTE_TO_TABLEAU:
            return f"W>{self.dst + 1}"
        if kind == WASTE_TO_FOUNDATION:
            return "W>F"
        if kind == FOUNDATION_TO_TABLEAU:
            number = str(self.number) if self.number else ""
            return f"F{SUITS[self.src]}{number}>{self.dst + 1}"
        if kind == DRAW:
            return "D"
        if kind == RECYCLE:
            return "R"
        return f"U{self.src + 1}"

    # Constructors that read like the notation table.
    @classmethod
    def tableau(cls, src: int, count: int, dst: int) -> Move:
        return cls(TABLEAU, src, count, dst)

    @classmethod
    def to_foundation(cls, src: int) -> Move:
        return cls(TO_FOUNDATION, src)

    @classmethod
    def waste_to_tableau(cls, dst: int) -> Move:
        return cls(WASTE_TO_TABLEAU, 0, 0, dst)

    @classmethod
    def waste_to_foundation(cls) -> Move:
        return cls(WASTE_TO_FOUNDATION)

    @classmethod
    def foundation_to_tableau(cls, suit: int, dst: int, number: int = 0) -> Move:
        return cls(FOUNDATION_TO_TABLEAU, suit, number, dst)

    @classmethod
    def draw(cls) -> Move:
        return cls(DRAW)

    @classmethod
    def recycle(cls) -> Move:
        return cls(RECYCLE)

    @classmethod
    def flip(cls, column: int) -> Move:
        return cls(FLIP, column)


_COLUMN = r"([1-9][0-9]?)"
_PATTERNS: Final = (
    (re.compile(rf"{_COLUMN}:([1-9][0-9]*)>{_COLUMN}"), TABLEAU),
    (re.compile(rf"{_COLUMN}>F"), TO_FOUNDATION),
    (re.compile(rf"W>{_COLUMN}"), WASTE_TO_TABLEAU),
    (re.compile(r"W>F"), WASTE_TO_FOUNDATION),
    (re.compile(rf"F([CDHS])([12]?)>{_COLUMN}"), FOUNDATION_TO_TABLEAU),
    (re.compile(r"D"), DRAW),
    (re.compile(r"R"), RECYCLE),
    (re.compile(rf"U{_COLUMN}"), FLIP),
)

_parse_cache: dict[str, Move] = {}
_PARSE_CACHE_LIMIT: Final = 4096


def _column(text: str, notation: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_COLUMNS:
        raise NotationError(
            f"{quoted(notation)}: column {value} is not between 1 and {MAX_COLUMNS}", column=value
        )
    return value - 1


#: The notations :func:`parse_move` takes, as a refusal of anything else lists them.
NOTATIONS: Final = ("c:k>d", "c>F", "W>d", "W>F", "Fs>d", "Fsn>d", "D", "R", "Uc")


def parse_move(notation: str) -> Move:
    """Parse canonical notation (``3:4>6``, ``2>F``, ``W>5``, ``FH>4``, ``D``, ``R``, ``U3``).

    Only the canonical spelling is accepted: no spaces, upper-case letters, no leading
    zeros, so that each move has exactly one notation and logs compare byte for byte.
    Raises :class:`NotationError`; whether the move is *legal* is the board's business.
    """
    if not isinstance(notation, str):  # first: an unhashable value must not reach the cache
        raise NotationError(f"a move must be a string, not {type(notation).__name__}")
    cached = _parse_cache.get(notation)
    if cached is not None:
        return cached
    move = _parse_uncached(notation)
    if len(_parse_cache) < _PARSE_CACHE_LIMIT:
        _parse_cache[notation] = move
    return move


def _parse_uncached(notation: str) -> Move:
    for pattern, kind in _PATTERNS:
        match = pattern.fullmatch(notation)
        if match is None:
            continue
        groups = match.groups()
        if kind == TABLEAU:
            src = _column(groups[0], notation)
            dst = _column(groups[2], notation)
            # Read only as many digits as MAX_RUN has: a count of thousands of digits
            # raised int()'s ValueError, not a NotationError (a verify audit).
            if len(groups[1]) > len(str(MAX_RUN)) or int(groups[1]) > MAX_RUN:
                # not the count itself: cut short, it was quoted as another number
                raise NotationError(
                    f"{quoted(notation)}: no column holds more than {MAX_RUN} cards"
                )
            count = int(groups[1])
            if src == dst:
                raise NotationError(f"{quoted(notation)}: a column cannot move onto itself")
            return Move(TABLEAU, src, count, dst)
        if kind in (TO_FOUNDATION, FLIP):
            return Move(kind, _column(groups[0], notation))
        if kind == WASTE_TO_TABLEAU:
            return Move(kind, 0, 0, _column(groups[0], notation))
        if kind == FOUNDATION_TO_TABLEAU:
            number = int(groups[1]) if groups[1] else 0
            return Move(kind, SUITS.index(groups[0]), number, _column(groups[2], notation))
        return Move(kind)
    raise NotAMove(notation, NOTATIONS)
