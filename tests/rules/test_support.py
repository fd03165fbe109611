"""Helpers shared by the rules tests (imported by the other ``test_*`` modules), and
checks of the helpers themselves.

:func:`position` writes a complete position JSON from the few cards a test cares about:
unmentioned cards go to a *filler* column (face down under one face-up card where the
variant allows face-down cards), so a test states only what matters to its rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

import pytest
from solrace.rules import Board, load_position, position_dict

VARIANT_IDS = ("yukon", "klondike", "russian", "alaska", "australian", "double_yukon")
SUITS = "CDHS"
RANKS = "A23456789TJQK"
ALL_FACES = tuple(r + s for s in SUITS for r in RANKS)
#: A position's keys, and a view's, in the rule book's order (RULES "Positions and
#: move notation").
POSITION_KEYS = ["variant", "options", "tableau", "foundations", "stock", "waste", "recycles"]
#: Klondike's options when a room sets none (RULES Klondike 5–8 and options).
KLONDIKE_DEFAULTS = {
    "draw": 1,
    "max_passes": None,
    "scoring": "standard",
    "thoughtful": False,
    "foundation_to_tableau": True,
    "auto_flip": True,
    "undo": True,
    "auto_complete": True,
}


def columns_of(variant: str) -> int:
    return 10 if variant == "double_yukon" else 7


def decks_of(variant: str) -> int:
    return 2 if variant == "double_yukon" else 1


def has_stock(variant: str) -> bool:
    return variant in ("klondike", "australian")


def position(
    variant: str,
    tableau: Sequence[Sequence[str]],
    *,
    options: Mapping[str, Any] | None = None,
    foundations: Mapping[str, Any] | None = None,
    stock: Iterable[str] = (),
    waste: Iterable[str] = (),
    recycles: int = 0,
    filler: int | None = -1,
) -> dict[str, Any]:
    """A complete position of ``variant``.

    ``tableau`` may list fewer columns than the variant has (the rest are empty);
    ``foundations`` may be partial (missing suits are 0; double-deck values are lists);
    stock names may be given in either case (they are written in the variant's case).
    Cards neither mentioned nor on a foundation go to column ``filler`` (default: the
    last column), which must then be empty; ``filler=None`` demands that every card be
    placed by the test.
    """
    options = dict(options or {})
    ncols, decks = columns_of(variant), decks_of(variant)
    cols = [list(c) for c in tableau] + [[] for _ in range(ncols - len(tableau))]
    assert len(cols) == ncols, f"{variant} has {ncols} columns"
    thoughtful = bool(options.get("thoughtful"))
    stock_list = [n.upper() if thoughtful else n.lower() for n in stock]
    waste_list = list(waste)
    found: dict[str, Any] = {}
    for s in SUITS:
        value = (foundations or {}).get(s, 0 if decks == 1 else [0, 0])
        found[s] = value
    on_foundations: Counter[str] = Counter()
    for s, value in found.items():
        for top in value if isinstance(value, list) else [value]:
            for r in range(top):
                on_foundations[RANKS[r] + s] += 1
    mentioned = Counter(n.upper() for n in chain(*cols, stock_list, waste_list))
    leftovers = [
        face
        for face in ALL_FACES
        for _ in range(max(0, decks - mentioned[face] - on_foundations[face]))
    ]
    if leftovers:
        if filler is None:
            raise AssertionError(f"cards not placed: {leftovers}")
        assert not cols[filler], "the filler column must be empty"
        may_hide = variant != "australian" and not thoughtful
        if may_hide:
            cols[filler] = [n.lower() for n in leftovers[:-1]] + [leftovers[-1]]
        else:
            cols[filler] = leftovers
    return {
        "variant": variant,
        "options": options,
        "tableau": cols,
        "foundations": found,
        "stock": stock_list,
        "waste": waste_list,
        "recycles": recycles,
    }


def build(variant: str, tableau: Sequence[Sequence[str]], **kwargs: Any) -> Board:
    """:func:`position` loaded into a board."""
    return load_position(position(variant, tableau, **kwargs))


def won_position(variant: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every card on the foundations."""
    full: Any = 13 if decks_of(variant) == 1 else [13, 13]
    return position(
        variant, [], options=options, foundations=dict.fromkeys(SUITS, full), filler=None
    )


def tableau_of(board: Board) -> list[list[str]]:
    """The tableau as position JSON writes it (lower case = face down)."""
    tableau: list[list[str]] = position_dict(board)["tableau"]
    return tableau


def card_ids(board: Board) -> Counter[int]:
    """How many times each card id occurs anywhere on the board."""
    return Counter(chain(*board.tableau, *board.piles, board.stock, board.waste))


def legal(board: Board) -> set[str]:
    return {str(m) for m in board.legal_moves()}


# ------------------------------------------------------------- the helpers' own tests


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_helper_fills_every_variant_with_a_valid_position(variant: str) -> None:
    board = build(variant, [["KH"]])
    assert sorted(card_ids(board).values()) == [1] * (52 * decks_of(variant))
    assert tableau_of(board)[0] == ["KH"]


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_helper_won_position_loads(variant: str) -> None:
    assert load_position(won_position(variant)).is_won()


def test_helper_refuses_unplaced_cards_when_asked() -> None:
    with pytest.raises(AssertionError, match="cards not placed"):
        position("yukon", [["KH"]], filler=None)
