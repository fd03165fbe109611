"""Reproducible deals: ``deal(variant, seed, options)`` is a pure function.

The shuffle is SplitMix64 feeding a Fisher–Yates shuffle with rejection sampling, all
in 64-bit unsigned integer arithmetic, so any language reproduces it bit for bit.
``docs/deals.md`` is the specification; ``tests/data/deals.json`` pins it. Python's
``random`` module is deliberately not used: its algorithm is not a specification.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from solrace.quoting import quoted, quoted_number

from .board import Board
from .cards import CARDS_PER_DECK
from .errors import RulesError
from .variants import variant_class

MASK64: Final = (1 << 64) - 1
GOLDEN_GAMMA: Final = 0x9E3779B97F4A7C15


def splitmix64(seed: int) -> Iterator[int]:
    """The SplitMix64 sequence of ``seed`` (Steele, Lea and Flood, 2014)."""
    state = seed & MASK64
    while True:
        state = (state + GOLDEN_GAMMA) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


def _below(rng: Iterator[int], bound: int) -> int:
    """A uniform integer in ``[0, bound)``: reject draws below ``2**64 mod bound`` so
    that every residue is equally likely (no modulo bias)."""
    threshold = (1 << 64) % bound
    while True:
        x = next(rng)
        if x >= threshold:
            return x % bound


def shuffled_deck(seed: int, decks: int = 1) -> list[int]:
    """Card ids ``0 … 52·decks−1`` in the order the shuffle of ``seed`` gives.

    The unshuffled order is deck by deck, suits C, D, H, S, ranks A … K. Fisher–Yates
    runs from the last position down: for i = n−1 … 1, swap positions i and
    ``_below(rng, i + 1)``.
    """
    check_seed(seed)
    cards = list(range(CARDS_PER_DECK * decks))
    rng = splitmix64(seed)
    for i in range(len(cards) - 1, 0, -1):
        j = _below(rng, i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MASK64:
        shown = quoted_number(seed) if type(seed) is int else quoted(seed)
        raise RulesError(f"a seed is a whole number 0 ≤ seed < 2**64, not {shown}")


def deal(variant: str, seed: int, options: Mapping[str, Any] | None = None) -> Board:
    """A new game of ``variant`` dealt from ``seed``: every racer given the same
    ``(variant, seed, options)`` gets the same layout on every machine."""
    board = variant_class(variant)(options)
    board._layout(shuffled_deck(seed, board.decks))
    return board
