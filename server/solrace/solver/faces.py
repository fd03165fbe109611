"""How the search encodes a card: a face 0–51 (suit × 13 + rank − 1), plus ``DOWN`` while
it lies face down. One module of its own so that the search and the deadlock test,
which both read cards, import it rather than each other."""

from __future__ import annotations

from typing import Final

#: Faces of a deck (a double deck's two copies of a face play alike: one face).
FACES: Final = 52
DOWN: Final = 64
KING: Final = 13

#: Indexed by face (0–51), also valid for face + DOWN.
RANK: Final[tuple[int, ...]] = tuple(f % DOWN % 13 + 1 for f in range(2 * DOWN))
SUIT: Final[tuple[int, ...]] = tuple(f % DOWN // 13 for f in range(2 * DOWN))
RED_SUIT: Final = (False, True, True, False)
