"""Cards as small integers, and their canonical two-letter names.

A card is an ``int`` id. Its *face* is ``id % 52``: ``suit = face // 13`` (clubs 0,
diamonds 1, hearts 2, spades 3) and ``rank = face % 13 + 1`` (Ace 1 … King 13). The ids
``face`` and ``face + 52`` are the two copies of a face in a double deck: distinct cards
with the same face. Integers keep the hot path (move checks, move generation) to table
look-ups instead of attribute access.
"""

from __future__ import annotations

from typing import Final

from solrace.quoting import json_quoted

from .errors import NotationError

SUITS: Final = "CDHS"
RANKS: Final = "A23456789TJQK"
#: Each rank as a player says it (in messages): ``10``, not the notation's ``T``.
RANK_WORDS: Final = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUIT_NAMES: Final = ("club", "diamond", "heart", "spade")
KING: Final = 13
CARDS_PER_DECK: Final = 52
MAX_DECKS: Final = 2

_IDS = range(CARDS_PER_DECK * MAX_DECKS)
#: Face (0–51) of every card id.
FACE: Final[tuple[int, ...]] = tuple(i % CARDS_PER_DECK for i in _IDS)
#: Rank (1–13) of every card id.
RANK: Final[tuple[int, ...]] = tuple(i % CARDS_PER_DECK % 13 + 1 for i in _IDS)
#: Suit (0–3) of every card id.
SUIT: Final[tuple[int, ...]] = tuple(i % CARDS_PER_DECK // 13 for i in _IDS)
#: True for hearts and diamonds.
RED: Final[tuple[bool, ...]] = tuple(SUIT[i] in (1, 2) for i in _IDS)


def face_of(suit: int, rank: int) -> int:
    """The face (0–51) of a suit index and a rank."""
    return suit * 13 + rank - 1


def card_name(card: int) -> str:
    """Canonical upper-case name of a card's face: ``TD`` for the ten of diamonds."""
    return RANKS[RANK[card] - 1] + SUITS[SUIT[card]]


#: Canonical name of every face, indexed by face.
NAMES: Final[tuple[str, ...]] = tuple(card_name(f) for f in range(CARDS_PER_DECK))
NAMES_DOWN: Final[tuple[str, ...]] = tuple(n.lower() for n in NAMES)
_FACE_BY_NAME: Final[dict[str, int]] = {n: f for f, n in enumerate(NAMES)}
#: Every valid card text and what :func:`parse_card` makes of it: one look-up for the
#: usual case (positions and views are read card by card).
CARD_TEXTS: Final[dict[str, tuple[int, bool]]] = {
    **{n: (f, True) for f, n in enumerate(NAMES)},
    **{n: (f, False) for f, n in enumerate(NAMES_DOWN)},
}


def parse_card(text: str) -> tuple[int, bool]:
    """Parse ``"7H"`` (face up) or ``"7h"`` (face down) into ``(face, face_up)``.

    Mixed case such as ``"Kh"`` is refused: the case is the face-up flag, so it must be
    unambiguous.
    """
    parsed = CARD_TEXTS.get(text) if type(text) is str else None
    if parsed is not None:
        return parsed
    if not isinstance(text, str) or len(text) != 2:
        raise NotationError(
            f"not a card: {json_quoted(text)} (expected rank and suit, like 7H or ks)"
        )
    upper = text.upper()
    face = _FACE_BY_NAME.get(upper)
    if face is None:
        raise NotationError(
            f"not a card: {json_quoted(text)} (rank one of {RANKS}, suit one of {SUITS})"
        )
    if text == upper:
        return face, True
    if text == text.lower():
        return face, False
    raise NotationError(f"card {json_quoted(text)} mixes upper and lower case")


def is_red(card: int) -> bool:
    return RED[card]


def describe_colour(card: int) -> str:
    return "red" if RED[card] else "black"
