"""An independent, deliberately simple reference move generator.

It exists only to check the real rules engine (``solrace.rules``) and is written
from the rule book and the engine's stated choices (``docs/rules.md``) alone, without
looking at the engine. It works directly on the position JSON dict:

- ``legal_moves(pos)`` lists the legal moves in canonical notation;
- ``apply(pos, move)`` returns a NEW position dict after the move;
- ``perft(pos, depth)`` counts the distinct move sequences of length ``depth``.

Speed is not a goal; being obviously right is. Cards are strings such as ``"TD"``
(rank then suit); lower case means face down.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

Position = dict[str, Any]

RANKS = "A23456789TJQK"
SUITS = "CDHS"
RED_SUITS = "DH"

SINGLE_DECK = ("yukon", "klondike", "russian", "alaska", "australian")
DOUBLE_DECK = ("double_yukon",)
VARIANTS = SINGLE_DECK + DOUBLE_DECK
YUKON_LIKE = ("yukon", "russian", "alaska", "double_yukon")  # no stock, no waste
COLUMNS = {
    "yukon": 7,
    "klondike": 7,
    "russian": 7,
    "alaska": 7,
    "australian": 7,
    "double_yukon": 10,
}

KING = 13


# --------------------------------------------------------------------------- cards


def rank(card: str) -> int:
    return RANKS.index(card[0].upper()) + 1


def suit(card: str) -> str:
    return card[1].upper()


def is_red(card: str) -> bool:
    return suit(card) in RED_SUITS


def face_up(card: str) -> bool:
    return card[1].isupper()


def up(card: str) -> str:
    return card.upper()


def down(card: str) -> str:
    return card.lower()


def card_name(r: int, s: str) -> str:
    return RANKS[r - 1] + s


# ------------------------------------------------------------------------- options


def options(pos: Position) -> dict[str, Any]:
    """The effective options: the given ones with the variant's defaults filled in."""
    variant = pos["variant"]
    given = pos.get("options") or {}
    if variant == "australian":
        # draw 1, one pass (so never a recycle), nothing back off a foundation.
        return {
            "draw": 1,
            "max_passes": 1,
            "foundation_to_tableau": False,
            "auto_flip": True,
            "thoughtful": False,
        }
    if variant == "klondike":
        draw = given.get("draw", 1)
        if "max_passes" in given:
            max_passes = given["max_passes"]  # an explicit value wins
        elif given.get("scoring", "standard") == "vegas":
            max_passes = 3 if draw == 3 else 1
        else:
            max_passes = None  # unlimited
        return {
            "draw": draw,
            "max_passes": max_passes,
            "foundation_to_tableau": given.get("foundation_to_tableau", True),
            "auto_flip": given.get("auto_flip", True),
            "thoughtful": given.get("thoughtful", False),
        }
    if variant in YUKON_LIKE:
        return {
            "draw": 1,  # irrelevant: no stock
            "max_passes": None,
            "foundation_to_tableau": given.get("foundation_to_tableau", False),
            "auto_flip": given.get("auto_flip", True),
            "thoughtful": False,
        }
    raise ValueError(f"unknown variant {variant!r}")


# ------------------------------------------------------------------------ building


def accepts(variant: str, below: str, card: str) -> bool:
    """May ``card`` be placed on the face-up tableau card ``below``?"""
    if variant in ("yukon", "klondike", "double_yukon"):
        return rank(below) == rank(card) + 1 and is_red(below) != is_red(card)
    if variant in ("russian", "australian"):
        return rank(below) == rank(card) + 1 and suit(below) == suit(card)
    if variant == "alaska":
        return abs(rank(below) - rank(card)) == 1 and suit(below) == suit(card)
    raise ValueError(f"unknown variant {variant!r}")


def fits_column(variant: str, column: list[str], card: str) -> bool:
    """May a group whose first (lowest) card is ``card`` go onto ``column``?"""
    if not column:
        return rank(card) == KING
    top = column[-1]
    return face_up(top) and accepts(variant, top, card)


def is_run(cards: list[str]) -> bool:
    """Klondike run: each card one rank lower and opposite colour to the one below."""
    for lower, upper in itertools.pairwise(cards):
        if rank(lower) != rank(upper) + 1 or is_red(lower) == is_red(upper):
            return False
    return True


# --------------------------------------------------------------------- foundations


def is_double(pos: Position) -> bool:
    return pos["variant"] in DOUBLE_DECK


def foundation_slots(pos: Position, s: str) -> list[int]:
    """The ranks of the foundations of suit ``s`` (one entry, or two for double deck)."""
    value = pos["foundations"][s]
    if isinstance(value, list):
        return list(value)
    return [value]


def foundation_target(pos: Position, card: str) -> int | None:
    """Index of the first foundation of the card's suit that takes it, or None."""
    for n, top in enumerate(foundation_slots(pos, suit(card))):
        if top == rank(card) - 1:
            return n
    return None


def is_won(pos: Position) -> bool:
    return all(r == KING for s in SUITS for r in foundation_slots(pos, s))


# ------------------------------------------------------------------------ movegen


def legal_moves(pos: Position) -> list[str]:
    """Every legal move of the position, in canonical notation."""
    if is_won(pos):
        return []  # a won game has no legal moves
    variant = pos["variant"]
    opts = options(pos)
    cols: list[list[str]] = pos["tableau"]
    ncols = len(cols)
    stock: list[str] = pos.get("stock", [])
    waste: list[str] = pos.get("waste", [])
    moves: list[str] = []

    # Uc: explicit flip, only without auto_flip.
    if not opts["auto_flip"]:
        for c in range(ncols):
            if cols[c] and not face_up(cols[c][-1]):
                moves.append(f"U{c + 1}")

    for c in range(ncols):
        col = cols[c]
        if not col or not face_up(col[-1]):
            continue  # nothing moves off an empty column or a face-down top
        n_up = 0
        while n_up < len(col) and face_up(col[-1 - n_up]):
            n_up += 1
        # c:k>d -- the top k cards (all face up); first card = k-th from the top.
        for k in range(1, n_up + 1):
            group = col[-k:]
            if variant == "klondike" and not is_run(group):
                continue
            first = group[0]
            for d in range(ncols):
                if d != c and fits_column(variant, cols[d], first):
                    moves.append(f"{c + 1}:{k}>{d + 1}")
        # c>F -- the single top card.
        if foundation_target(pos, col[-1]) is not None:
            moves.append(f"{c + 1}>F")

    if waste:
        top = waste[-1]
        for d in range(ncols):
            if fits_column(variant, cols[d], top):
                moves.append(f"W>{d + 1}")
        if foundation_target(pos, top) is not None:
            moves.append("W>F")

    if opts["foundation_to_tableau"]:
        for s in SUITS:
            for n, r in enumerate(foundation_slots(pos, s)):
                if r == 0:
                    continue
                card = card_name(r, s)
                for d in range(ncols):
                    if fits_column(variant, cols[d], card):
                        if is_double(pos):
                            moves.append(f"F{s}{n + 1}>{d + 1}")
                        else:
                            moves.append(f"F{s}>{d + 1}")

    if stock:
        moves.append("D")
    max_passes = opts["max_passes"]
    recycles = pos.get("recycles", 0)
    if not stock and waste and (max_passes is None or recycles < max_passes - 1):
        moves.append("R")
    return moves


# -------------------------------------------------------------------------- apply


def copy_position(pos: Position) -> Position:
    new = dict(pos)
    new["options"] = dict(pos.get("options") or {})
    new["tableau"] = [list(col) for col in pos["tableau"]]
    new["foundations"] = {
        s: (list(v) if isinstance(v, list) else v) for s, v in pos["foundations"].items()
    }
    new["stock"] = list(pos.get("stock", []))
    new["waste"] = list(pos.get("waste", []))
    new["recycles"] = pos.get("recycles", 0)
    return new


def _flip_if_needed(pos: Position, col: list[str]) -> None:
    if options(pos)["auto_flip"] and col and not face_up(col[-1]):
        col[-1] = up(col[-1])


def _to_foundation(pos: Position, card: str) -> None:
    n = foundation_target(pos, card)
    assert n is not None, card
    s = suit(card)
    if is_double(pos):
        pos["foundations"][s][n] += 1
    else:
        pos["foundations"][s] += 1


_GROUP = re.compile(r"(\d+):(\d+)>(\d+)")
_COL_TO_F = re.compile(r"(\d+)>F")
_WASTE_TO_COL = re.compile(r"W>(\d+)")
_F_TO_COL = re.compile(r"F([CDHS])([12]?)>(\d+)")
_FLIP = re.compile(r"U(\d+)")


def apply_unchecked(pos: Position, move: str) -> Position:
    """The position after ``move``, assuming the move is legal."""
    new = copy_position(pos)
    cols = new["tableau"]
    if m := _GROUP.fullmatch(move):
        c, k, d = int(m[1]) - 1, int(m[2]), int(m[3]) - 1
        group = cols[c][-k:]
        del cols[c][-k:]
        cols[d].extend(group)
        _flip_if_needed(new, cols[c])
    elif m := _COL_TO_F.fullmatch(move):
        c = int(m[1]) - 1
        card = cols[c].pop()
        _to_foundation(new, card)
        _flip_if_needed(new, cols[c])
    elif move == "W>F":
        _to_foundation(new, new["waste"].pop())
    elif m := _WASTE_TO_COL.fullmatch(move):
        cols[int(m[1]) - 1].append(new["waste"].pop())
    elif m := _F_TO_COL.fullmatch(move):
        s, d = m[1], int(m[3]) - 1
        if is_double(new):
            n = int(m[2]) - 1
            r = new["foundations"][s][n]
            new["foundations"][s][n] = r - 1
        else:
            r = new["foundations"][s]
            new["foundations"][s] = r - 1
        cols[d].append(card_name(r, s))
    elif move == "D":
        for _ in range(min(options(new)["draw"], len(new["stock"]))):
            new["waste"].append(up(new["stock"].pop()))
    elif move == "R":
        thoughtful = options(new)["thoughtful"]
        new["stock"] = [c if thoughtful else down(c) for c in reversed(new["waste"])]
        new["waste"] = []
        new["recycles"] += 1
    elif m := _FLIP.fullmatch(move):
        c = int(m[1]) - 1
        cols[c][-1] = up(cols[c][-1])
    else:
        raise ValueError(f"bad move notation {move!r}")
    return new


def apply(pos: Position, move: str) -> Position:
    """The position after ``move`` (a new dict); refuses illegal moves."""
    if move not in legal_moves(pos):
        raise ValueError(f"illegal move {move!r}")
    return apply_unchecked(pos, move)


def perft(pos: Position, depth: int) -> int:
    """Number of distinct legal move sequences of length ``depth``."""
    if depth == 0:
        return 1
    moves = legal_moves(pos)
    if depth == 1:
        return len(moves)
    return sum(perft(apply_unchecked(pos, m), depth - 1) for m in moves)


def divide(pos: Position, depth: int) -> dict[str, int]:
    """perft split by first move (a debugging aid)."""
    return {m: perft(apply_unchecked(pos, m), depth - 1) for m in legal_moves(pos)}


# ---------------------------------------------------------------------- validity


def validate(pos: Position) -> None:
    """Raise AssertionError unless ``pos`` is a complete, valid position."""
    variant = pos["variant"]
    assert variant in VARIANTS, variant
    copies = 2 if variant in DOUBLE_DECK else 1
    cols = pos["tableau"]
    assert len(cols) == COLUMNS[variant], len(cols)
    opts = options(pos)
    counts: dict[str, int] = {}
    for col in cols:
        seen_up = False
        for card in col:
            assert re.fullmatch(r"[A2-9TJQK][CDHS]|[a2-9tjqk][cdhs]", card), card
            if face_up(card):
                seen_up = True
            else:
                assert not seen_up, f"face-down card above a face-up one: {col}"
        if col and not face_up(col[-1]):
            assert not opts["auto_flip"], f"face-down top with auto_flip on: {col}"
        for card in col:
            counts[up(card)] = counts.get(up(card), 0) + 1
    stock, waste = pos.get("stock", []), pos.get("waste", [])
    if variant in YUKON_LIKE:
        assert not stock and not waste, "no stock/waste in this variant"
        assert pos.get("recycles", 0) == 0
    for card in stock:
        assert face_up(card) == bool(opts["thoughtful"]), f"stock card {card}"
    for card in waste:
        assert face_up(card), f"waste card {card}"
    for card in stock + waste:
        counts[up(card)] = counts.get(up(card), 0) + 1
    for s in SUITS:
        slots = foundation_slots(pos, s)
        assert len(slots) == copies, slots
        for top in slots:
            assert 0 <= top <= KING
            for r in range(1, top + 1):
                counts[card_name(r, s)] = counts.get(card_name(r, s), 0) + 1
    for s in SUITS:
        for r in range(1, KING + 1):
            name = card_name(r, s)
            assert counts.get(name, 0) == copies, f"{name} appears {counts.get(name, 0)} times"
    assert sum(counts.values()) == 52 * copies
    recycles = pos.get("recycles", 0)
    assert isinstance(recycles, int) and recycles >= 0
    if opts["max_passes"] is not None:
        assert recycles <= opts["max_passes"] - 1, "more recycles than the passes allow"
