"""Rebuild ``tests/data/perft.json`` deterministically from the reference generator.

Run from the repository root::

    .venv/bin/python tests/data/make_perft.py

Positions come from our own shuffles (``random.Random(seed)``, used here only to make
test data -- it is not the product's deal algorithm), the variant's layout, and a few
weighted random legal moves played with ``tests/reference_movegen.py``; a few are
written by hand. The counts are computed with the reference generator, never with
the engine under test.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.reference_movegen import (  # noqa: E402
    KING,
    SUITS,
    Position,
    apply,
    card_name,
    down,
    face_up,
    foundation_slots,
    legal_moves,
    perft,
    up,
    validate,
)

OUT = Path(__file__).resolve().parent / "perft.json"

# Depth d+1 is added while perft(d) stays at most this (keeps the reference fast).
GROW_WHILE_AT_MOST = 1200
MAX_DEPTH = 8
# A few entries go deeper, for larger counts (each still well under 2 s here).
DEEPER = {
    "yukon_deal": 5,
    "yukon_kings_empty_columns": 4,
    "klondike_kings_empty_columns": 4,
    "russian_kings_empty_columns": 4,
    "klondike_f2t_rich": 5,
}


# -------------------------------------------------------------------------- deals


def full_deck(copies: int = 1) -> list[str]:
    return [card_name(r, s) for _ in range(copies) for s in SUITS for r in range(1, KING + 1)]


def empty_foundations(variant: str) -> dict[str, Any]:
    if variant == "double_yukon":
        return {s: [0, 0] for s in SUITS}
    return {s: 0 for s in SUITS}


def deal(variant: str, seed: int, opts: dict[str, Any] | None = None) -> Position:
    """A fresh layout of ``variant`` from a shuffle with ``random.Random(seed)``."""
    opts = dict(opts or {})
    deck = full_deck(2 if variant == "double_yukon" else 1)
    random.Random(seed).shuffle(deck)
    thoughtful = bool(opts.get("thoughtful", False))
    shape: list[tuple[int, int]]  # (face down, face up) per column
    if variant in ("yukon", "russian", "alaska"):
        shape = [(0, 1)] + [(k - 1, 5) for k in range(2, 8)]
    elif variant == "double_yukon":
        shape = [(min(k - 1, 8), 6) for k in range(1, 11)]
    elif variant == "klondike":
        shape = [(k - 1, 1) for k in range(1, 8)]
        if thoughtful:
            shape = [(0, k) for k in range(1, 8)]
    elif variant == "australian":
        shape = [(0, 4)] * 7
    else:
        raise ValueError(variant)
    tableau: list[list[str]] = []
    i = 0
    for n_down, n_up in shape:
        col = [down(c) for c in deck[i : i + n_down]] + deck[i + n_down : i + n_down + n_up]
        i += n_down + n_up
        tableau.append(col)
    rest = deck[i:]
    stock = [c if thoughtful else down(c) for c in rest]
    pos: Position = {
        "variant": variant,
        "options": opts,
        "tableau": tableau,
        "foundations": empty_foundations(variant),
        "stock": stock,
        "waste": [],
        "recycles": 0,
    }
    validate(pos)
    return pos


def move_weight(pos: Position, move: str) -> float:
    """Bias the random walk towards progress so positions look like real games."""
    if move.endswith(">F"):
        return 6.0
    if move.startswith("U"):
        return 6.0
    if move.startswith("F"):
        return 0.3
    if move == "D":
        return 3.0
    if move == "R":
        return 1.0
    if move.startswith("W>"):
        return 3.0
    c, rest = move.split(":")
    k = int(rest.split(">")[0])
    col = pos["tableau"][int(c) - 1]
    if len(col) > k and not face_up(col[-k - 1]):
        return 5.0  # uncovers a face-down card
    if len(col) == k:
        return 2.0
    return 1.0


def _never(pos: Position) -> bool:
    return False


def walk(
    pos: Position,
    seed: int,
    max_steps: int,
    until: Callable[[Position], bool] = _never,
    weight: Callable[[Position, str], float] = move_weight,
) -> Position | None:
    """Play weighted random legal moves; stop after ``max_steps`` or once ``until`` holds.

    With a predicate, returns None if it never held.
    """
    rng = random.Random(seed)
    for _ in range(max_steps):
        if until(pos):
            return pos
        moves = legal_moves(pos)
        if not moves:
            break
        move = rng.choices(moves, [weight(pos, m) for m in moves])[0]
        pos = apply(pos, move)
    if until(pos):
        return pos
    return None if until is not _never else pos


def walked(
    variant: str,
    opts: dict[str, Any],
    seed: int,
    steps: int,
    until: Callable[[Position], bool] = _never,
    weight: Callable[[Position, str], float] = move_weight,
) -> Position:
    """Deal with ``seed`` and walk; with a predicate, try successive seeds until it holds."""
    for attempt in range(500):
        s = seed + 1000 * attempt
        result = walk(deal(variant, s, opts), s, steps, until, weight)
        if result is not None:
            validate(result)
            return result
    raise RuntimeError(f"no position found for {variant} {opts}")


# ---------------------------------------------------------------------- predicates


def foundation_total(pos: Position) -> int:
    return sum(sum(foundation_slots(pos, s)) for s in SUITS)


def face_down_tops(pos: Position) -> int:
    return sum(1 for col in pos["tableau"] if col and not face_up(col[-1]))


def empty_columns(pos: Position) -> int:
    return sum(1 for col in pos["tableau"] if not col)


def rich(pos: Position, n: int) -> bool:
    """At least ``n`` legal moves (avoids dull or stuck positions)."""
    return len(legal_moves(pos)) >= n


def has_move(pos: Position, prefix: str) -> bool:
    return any(m.startswith(prefix) for m in legal_moves(pos))


def twin_faces_visible(pos: Position) -> int:
    """How many faces show both copies face up in the tableau (double deck)."""
    seen: dict[str, int] = {}
    for col in pos["tableau"]:
        for card in col:
            if face_up(card):
                seen[card] = seen.get(card, 0) + 1
    return sum(1 for n in seen.values() if n == 2)


# ----------------------------------------------------------------------- by hand


def completed(
    variant: str,
    opts: dict[str, Any],
    tableau: list[list[str]],
    stock: list[str],
    waste: list[str],
    recycles: int = 0,
) -> Position:
    """A hand-made position: foundations hold exactly the cards not listed elsewhere.

    Each suit's missing cards must be A..r for some r.
    """
    copies = 2 if variant == "double_yukon" else 1
    present: dict[str, int] = {}
    for card in [c for col in tableau for c in col] + stock + waste:
        present[up(card)] = present.get(up(card), 0) + 1
    foundations: dict[str, Any] = {}
    for s in SUITS:
        slots = []
        for copy in range(copies):
            r = 0
            while r < KING and present.get(card_name(r + 1, s), 0) <= copy:
                r += 1
            slots.append(r)
        foundations[s] = slots if copies == 2 else slots[0]
    pos: Position = {
        "variant": variant,
        "options": opts,
        "tableau": tableau,
        "foundations": foundations,
        "stock": stock,
        "waste": waste,
        "recycles": recycles,
    }
    validate(pos)
    return pos


def pad(columns: list[list[str]], n: int = 7) -> list[list[str]]:
    return columns + [[] for _ in range(n - len(columns))]


def shuffled(cards: list[str], seed: int) -> list[str]:
    cards = list(cards)
    random.Random(seed).shuffle(cards)
    return cards


def missing_cards(
    tableau: list[list[str]], waste: list[str], foundations: dict[str, int]
) -> list[str]:
    """Single deck: the cards in neither the tableau, the waste nor the foundations."""
    used = {up(c) for col in tableau for c in col} | set(waste)
    return [
        card_name(r, s)
        for s in SUITS
        for r in range(foundations[s] + 1, KING + 1)
        if card_name(r, s) not in used
    ]


# ------------------------------------------------------------------------ entries

HAND: list[dict[str, Any]] = [
    {
        "name": "hand_yukon_two_hearts",
        "note": (
            "Hand count. Only QH and KH are off the foundations (H at J), column 1 = KH,QH, "
            "columns 2-7 empty. Depth 1 = 7: 1>F (QH onto the J) and 1:2>2..7 (KH-led "
            "group to each of 6 empty columns); 1:1>d is illegal (QH is no King). "
            "Depth 2 = 49: after 1>F column 1 = KH: 1>F and 1:1>2..7 = 7; after 1:2>d "
            "(6 such) column d = KH,QH: d>F and d:2>e for the 6 other (empty) columns = 7; "
            "7 + 6*7 = 49. Depth 3 = 336: 1>F,1>F wins (a won game has no moves), "
            "1>F,1:1>d leaves KH alone in d: 7 each -> 42; each of the 42 continuations of "
            "1:2>d has 7 -> 294."
        ),
        "position": completed("yukon", {}, pad([["KH", "QH"]]), [], []),
        "depths": 3,
    },
    {
        "name": "hand_yukon_noflip_face_down_king",
        "note": (
            "Hand count, auto_flip false. Left: KH face down alone in column 1 and KS face up "
            "alone in column 2 (H and S at Q). Depth 1 = 7: U1, 2>F, 2:1>3..7 (5 empty "
            "columns; column 1 is not empty and its top is face down). Depth 2 = 48: after "
            "U1: 1>F, 1:1>3..7, 2>F, 2:1>3..7 = 12; after 2>F only U1 = 1; after 2:1>d "
            "(5 such): U1, d>F, d:1>e for the 5 other empty columns (2..7 minus d) = 7 -> "
            "35; 12 + 1 + 35 = 48."
        ),
        "position": completed(
            "yukon",
            {"auto_flip": False, "foundation_to_tableau": False},
            pad([["kh"], ["KS"]]),
            [],
            [],
        ),
        "depths": 3,
    },
    {
        "name": "hand_klondike_draw3_order_and_recycle",
        "note": (
            "Hand count, draw 3, max_passes 2, recycles 0, no foundation->tableau. Left: KS "
            "in column 1, stock [js, qs] (qs is drawn first), S at T. Depth 1 = 7: "
            "1:1>2..7 (6) and D (1>F is illegal: S is at T). Depth 2 = 50: after "
            "1:1>d (6 such): d:1>e for the 6 other empty columns + D = 7 -> 42; after D "
            "the stock is empty and the waste is [QS, JS] (JS on top): 1:1>2..7 (6), W>F "
            "(JS onto the T) and R (0 < 2-1) = 8; 42 + 8 = 50. A wrong draw order would "
            "put QS on top and lose W>F."
        ),
        "position": completed(
            "klondike",
            {"draw": 3, "max_passes": 2, "foundation_to_tableau": False},
            pad([["KS"]]),
            ["js", "qs"],
            [],
        ),
        "depths": 3,
    },
    {
        "name": "hand_australian_one_pass",
        "note": (
            "Hand count, australian. Left: KS in column 1 and qs alone in the stock, S at J. "
            "Depth 1 = 7: 1:1>2..7 (6) and D. Depth 2 = 50: after 1:1>d (6 such): "
            "d:1>e (6) + D = 7 -> 42; after D: waste [QS], stock empty: W>F, W>1 (QS on KS, "
            "same suit one lower) and 1:1>2..7 (6) = 8, and no R (one pass); 42 + 8 = 50."
        ),
        "position": completed("australian", {}, pad([["KS"]]), ["qs"], []),
        "depths": 3,
    },
    {
        "name": "hand_double_yukon_two_heart_kings",
        "note": (
            "Hand count, double_yukon. Left: KH, KH, QH; foundations H = [12, 11]. Column 1 "
            "= KH,QH, column 2 = KH, columns 3-10 empty. Depth 1 = 18: 1>F (QH goes to the "
            "second H foundation, the first that takes it), 1:2>3..10 (8), 2>F (KH onto the "
            "first, at Q), 2:1>3..10 (8). Depth 2 = 316: after 1>F both KH are alone in "
            "columns 1 and 2: 2*(1 + 8) = 18; after 1:2>d (8 such) 8 empty columns remain: "
            "d>F, d:2>e (8), 2>F, 2:1>e (8) = 18 -> 144; after 2>F (H = [13, 11]) 9 empty "
            "columns: 1>F and 1:2>e (9) = 10; after 2:1>d (8 such): 1>F, 1:2>e (8), d>F, "
            "d:1>e (8) = 18 -> 144; 18 + 144 + 10 + 144 = 316."
        ),
        "position": completed(
            "double_yukon",
            {},
            pad([["KH", "QH"], ["KH"]], 10),
            [],
            [],
        ),
        "depths": 2,
    },
    {
        "name": "hand_klondike_last_card_f2t",
        "note": (
            "Hand count, klondike defaults (foundation->tableau on). Only KS is off the "
            "foundations (S at Q), in column 1; no stock, no waste. Depth 1 = 25: 1>F, "
            "1:1>2..7 (6), FC/FD/FH>2..7 (the three Kings to 6 empty columns: 18); QS "
            "cannot go onto KS. Depth 2 = 570: after 1>F the game is won: 0 moves; after "
            "1:1>d (6 such) = 1 + 6 + 18 = 25 -> 150; after FC>d (6 such; KC in d, C at Q): "
            "1>F, 1:1>e (5), d>F, d:1>e (5), FD>e (5), FH>e (5) = 22 (QC fits neither "
            "black King, QS neither) -> 132; after FD>d: the same 22 plus FD>1 (QD on KS) "
            "and FS>d (QS on KD) = 24 -> 144; FH>d likewise 24 -> 144; "
            "0 + 150 + 132 + 144 + 144 = 570."
        ),
        "position": completed("klondike", {}, pad([["KS"]]), [], []),
        "depths": 2,
    },
]

HAND_EXPECTED = {
    "hand_yukon_two_hearts": {"1": 7, "2": 49, "3": 336},
    "hand_yukon_noflip_face_down_king": {"1": 7, "2": 48},
    "hand_klondike_draw3_order_and_recycle": {"1": 7, "2": 50},
    "hand_australian_one_pass": {"1": 7, "2": 50},
    "hand_double_yukon_two_heart_kings": {"1": 18, "2": 316},
    "hand_klondike_last_card_f2t": {"1": 25, "2": 570},
}


def yukon_kings() -> Position:
    tableau = pad(
        [
            ["KH", "QC", "JD", "TS", "9H", "8C"],
            ["9d", "4s", "7h", "6s", "8s", "KS", "QD", "JC", "TD", "9S"],
            [],
            ["8d", "tc", "5d", "7d", "KD", "5S", "6D", "QS", "JH"],
            [],
            ["7s", "6c", "KC", "QH", "JS", "TH", "9C", "8H", "7C"],
        ]
    )
    return completed("yukon", {}, tableau, [], [])


def klondike_kings() -> Position:
    tableau = pad(
        [
            ["KH", "QS", "JD", "TC"],
            [],
            ["5c", "9h", "KC", "QD"],
            [],
            ["8s", "3d", "4C", "KD", "QC", "JH"],  # 4C,KD is not a run: only KD-QC-JH moves
            ["KS"],
            ["jc", "7h", "TD", "9S", "8H"],
        ]
    )
    waste = ["7C", "QH"]
    foundations = {"C": 3, "D": 2, "H": 4, "S": 1}
    stock = [down(c) for c in shuffled(missing_cards(tableau, waste, foundations), 77)]
    return completed("klondike", {"draw": 1}, tableau, stock, waste)


def russian_kings() -> Position:
    tableau = pad(
        [
            ["KC", "QC", "JC", "5H", "TD"],
            [],
            ["4s", "9c", "KD", "QD", "JD", "TC", "6H"],
            ["KH", "QH", "JH", "TH", "9H", "8H", "7H"],
            [],
            ["8c", "KS", "QS", "JS", "TS", "9D", "9S", "8S"],
            ["7s", "6s", "5s", "8D", "7D", "6D"],
        ]
    )
    return completed("russian", {"auto_flip": True}, tableau, [], [])


def scattered(
    variant: str,
    opts: dict[str, Any],
    foundations: dict[str, Any],
    shape: list[tuple[int, int]],
    seed: int,
    until: Callable[[Position], bool],
) -> Position:
    """Given foundations, deal the other cards into columns of the given (down, up) shape.

    Tries successive seeds until ``until`` holds. No stock (Yukon-like variants).
    """
    copies = 2 if variant == "double_yukon" else 1
    rest = []
    for s in SUITS:
        slots = foundations[s] if copies == 2 else [foundations[s]]
        for top in slots:
            rest += [card_name(r, s) for r in range(top + 1, KING + 1)]
    assert sum(d + u for d, u in shape) == len(rest), (sum(d + u for d, u in shape), len(rest))
    for attempt in range(2000):
        cards = shuffled(rest, seed + attempt)
        tableau = []
        i = 0
        for n_down, n_up in shape:
            tableau.append(
                [down(c) for c in cards[i : i + n_down]] + cards[i + n_down : i + n_down + n_up]
            )
            i += n_down + n_up
        pos: Position = {
            "variant": variant,
            "options": opts,
            "tableau": tableau,
            "foundations": {
                s: (list(v) if isinstance(v, list) else v) for s, v in foundations.items()
            },
            "stock": [],
            "waste": [],
            "recycles": 0,
        }
        validate(pos)
        if until(pos):
            return pos
    raise RuntimeError("no scattered position found")


def not_done_klondike(p: Position) -> bool:
    return bool(p["stock"] or p["waste"])


def entries_generated() -> list[dict[str, Any]]:
    e: list[dict[str, Any]] = []

    def add(name: str, note: str, pos: Position) -> None:
        validate(pos)
        e.append({"name": name, "note": note, "position": pos})

    # ---- yukon
    add("yukon_deal", "fresh yukon deal (own shuffle, seed 1), default options", deal("yukon", 1))
    add(
        "yukon_mid",
        "yukon after 25 weighted random moves (seed 2), defaults",
        walked("yukon", {}, 2, 25),
    )
    add(
        "yukon_noflip_face_down_tops",
        "yukon auto_flip false with at least two face-down tops, so Uc moves appear and "
        "nothing moves onto or off those columns",
        walked(
            "yukon",
            {"auto_flip": False},
            3,
            60,
            until=lambda p: face_down_tops(p) >= 2 and foundation_total(p) >= 1,
            weight=lambda p, m: 0.2 if m.startswith("U") else move_weight(p, m),
        ),
    )
    add(
        "yukon_f2t_mid",
        "yukon with foundation_to_tableau true and at least 6 foundation cards: Fs>d moves",
        walked(
            "yukon",
            {"foundation_to_tableau": True},
            4,
            120,
            until=lambda p: foundation_total(p) >= 6,
        ),
    )
    add(
        "yukon_kings_empty_columns",
        "hand-made yukon: three empty columns and four Kings, one leading a whole column "
        "(1:6>e), others buried under face-up cards (King-led groups of several sizes)",
        yukon_kings(),
    )
    add(
        "yukon_late",
        "yukon late game: at most 3 face-down cards left (seed 6)",
        walked(
            "yukon",
            {},
            6,
            400,
            until=lambda p: (
                sum(1 for c in p["tableau"] for x in c if not face_up(x)) <= 3
                and foundation_total(p) >= 10
            ),
        ),
    )

    # ---- klondike
    add(
        "klondike_deal_draw1",
        "fresh klondike deal, draw 1 (options empty: defaults)",
        deal("klondike", 11),
    )
    add("klondike_deal_draw3", "fresh klondike deal, draw 3", deal("klondike", 12, {"draw": 3}))
    add(
        "klondike_mid_draw1",
        "klondike draw 1 after 40 weighted random moves, waste non-empty",
        walked(
            "klondike",
            {"draw": 1},
            13,
            40,
            until=lambda p: len(p["waste"]) >= 3 and foundation_total(p) >= 2,
        ),
    )
    add(
        "klondike_mid_draw3",
        "klondike draw 3 mid game with a waste and foundations",
        walked(
            "klondike",
            {"draw": 3},
            14,
            60,
            until=lambda p: (
                len(p["waste"]) >= 4
                and foundation_total(p) >= 3
                and len(p["stock"]) >= 4
                and rich(p, 4)
            ),
        ),
    )
    add(
        "klondike_maxpasses1_exhausted",
        "klondike draw 1, max_passes 1: stock empty, waste non-empty, R illegal",
        walked(
            "klondike",
            {"draw": 1, "max_passes": 1},
            15,
            80,
            until=lambda p: not p["stock"] and len(p["waste"]) >= 3 and rich(p, 4),
        ),
    )
    add(
        "klondike_maxpasses3_last_recycle",
        "klondike draw 3, max_passes 3, recycles 1 and a short stock: one R left in reach",
        walked(
            "klondike",
            {"draw": 3, "max_passes": 3},
            16,
            200,
            until=lambda p: (
                p["recycles"] == 1 and 1 <= len(p["stock"]) <= 3 and len(p["waste"]) >= 2
            ),
        ),
    )
    add(
        "klondike_maxpasses3_no_more_recycles",
        "klondike draw 1, max_passes 3, recycles 2 (the limit) with a short stock",
        walked(
            "klondike",
            {"draw": 1, "max_passes": 3},
            17,
            400,
            until=lambda p: p["recycles"] == 2 and len(p["stock"]) <= 2 and len(p["waste"]) >= 2,
        ),
    )
    add(
        "klondike_vegas_draw1",
        "klondike vegas scoring, draw 1, no max_passes given (so 1 pass): stock nearly "
        "empty, so R never becomes legal",
        walked(
            "klondike",
            {"draw": 1, "scoring": "vegas"},
            18,
            100,
            until=lambda p: 1 <= len(p["stock"]) <= 2 and len(p["waste"]) >= 2 and rich(p, 3),
        ),
    )
    add(
        "klondike_vegas_draw3",
        "klondike vegas, draw 3, no max_passes (so 3 passes), recycles 1 and a short "
        "stock: one more R allowed",
        walked(
            "klondike",
            {"draw": 3, "scoring": "vegas"},
            19,
            300,
            until=lambda p: p["recycles"] == 1 and len(p["stock"]) <= 3 and len(p["waste"]) >= 2,
        ),
    )
    add(
        "klondike_vegas_explicit_passes",
        "klondike vegas, draw 1 with an explicit max_passes 2 (explicit wins): stock empty, "
        "recycles 0, so R is legal",
        walked(
            "klondike",
            {"draw": 1, "scoring": "vegas", "max_passes": 2},
            20,
            100,
            until=lambda p: not p["stock"] and p["recycles"] == 0 and len(p["waste"]) >= 2,
        ),
    )
    add(
        "klondike_thoughtful_deal",
        "klondike thoughtful fresh deal: every card face up (stock upper case); face-up "
        "stretches are not runs, so only the top run of each column moves",
        deal("klondike", 21, {"thoughtful": True}),
    )
    add(
        "klondike_thoughtful_recycled",
        "klondike thoughtful draw 3 after a recycle: the recycled stock stays upper case",
        walked(
            "klondike",
            {"thoughtful": True, "draw": 3},
            22,
            200,
            until=lambda p: p["recycles"] >= 1 and len(p["stock"]) >= 3 and len(p["waste"]) >= 2,
        ),
    )
    add(
        "klondike_noflip",
        "klondike auto_flip false with face-down tops (Uc) and a waste",
        walked(
            "klondike",
            {"auto_flip": False},
            23,
            80,
            until=lambda p: face_down_tops(p) >= 2 and len(p["waste"]) >= 1,
            weight=lambda p, m: 0.2 if m.startswith("U") else move_weight(p, m),
        ),
    )
    add(
        "klondike_no_f2t",
        "klondike foundation_to_tableau false, foundations non-empty",
        walked(
            "klondike",
            {"foundation_to_tableau": False},
            24,
            150,
            until=lambda p: foundation_total(p) >= 8 and not_done_klondike(p),
        ),
    )
    add(
        "klondike_f2t_rich",
        "klondike default (foundation_to_tableau true) with many foundation cards: Fs>d",
        walked(
            "klondike",
            {},
            25,
            300,
            until=lambda p: foundation_total(p) >= 12 and not_done_klondike(p),
        ),
    )
    add(
        "klondike_kings_empty_columns",
        "hand-made klondike: two empty columns, five Kings (KH and KD leading runs, KS "
        "alone), a non-run face-up stretch 4C,KD in column 5, waste top QH",
        klondike_kings(),
    )

    # ---- russian
    add("russian_deal", "fresh russian deal (same-suit building)", deal("russian", 31))
    add(
        "russian_mid",
        "russian after weighted random moves with foundation cards",
        walked("russian", {}, 32, 150, until=lambda p: foundation_total(p) >= 3 and rich(p, 4)),
    )
    add(
        "russian_kings_empty_columns",
        "hand-made russian: two empty columns, King-led groups with mixed suits inside",
        russian_kings(),
    )

    # ---- alaska
    add("alaska_deal", "fresh alaska deal (same suit up or down)", deal("alaska", 41))
    add(
        "alaska_f2t_mid",
        "alaska with foundation_to_tableau true and foundation cards",
        walked(
            "alaska",
            {"foundation_to_tableau": True},
            42,
            150,
            until=lambda p: foundation_total(p) >= 4 and has_move(p, "F"),
        ),
    )
    add(
        "alaska_noflip",
        "alaska auto_flip false with face-down tops",
        walked(
            "alaska",
            {"auto_flip": False},
            43,
            80,
            until=lambda p: face_down_tops(p) >= 2,
            weight=lambda p, m: 0.2 if m.startswith("U") else move_weight(p, m),
        ),
    )

    # ---- australian
    add(
        "australian_deal",
        "fresh australian deal: 7x4 face up, 24 in the stock",
        deal("australian", 51),
    )
    add(
        "australian_mid",
        "australian mid game with a waste and foundation cards",
        walked(
            "australian",
            {},
            52,
            80,
            until=lambda p: len(p["waste"]) >= 3 and foundation_total(p) >= 2 and rich(p, 4),
        ),
    )
    add(
        "australian_stock_out",
        "australian with the stock used up: one pass only, so no R although the waste is not empty",
        walked("australian", {}, 53, 200, until=lambda p: not p["stock"] and len(p["waste"]) >= 2),
    )

    # ---- double yukon
    add(
        "double_yukon_deal",
        "fresh double_yukon deal (10 columns, 104 cards)",
        deal("double_yukon", 61),
    )
    add(
        "double_yukon_twins_foundations",
        "double_yukon mid game: foundations hold cards and both copies of some face are "
        "face up in the tableau",
        walked(
            "double_yukon",
            {},
            62,
            300,
            until=lambda p: foundation_total(p) >= 6 and twin_faces_visible(p) >= 2,
        ),
    )
    add(
        "double_yukon_f2t_mid",
        "double_yukon with foundation_to_tableau true after random moves, an Fsn>d move "
        "at the root",
        walked(
            "double_yukon",
            {"foundation_to_tableau": True},
            63,
            400,
            until=lambda p: foundation_total(p) >= 6 and has_move(p, "F"),
        ),
    )
    add(
        "double_yukon_f2t_equal_foundations",
        "double_yukon, foundation_to_tableau true, clubs foundations [5, 5]: FC1>d and FC2>d "
        "are distinct moves; a club played with c>F goes to the first foundation",
        scattered(
            "double_yukon",
            {"foundation_to_tableau": True},
            {"C": [5, 5], "D": [3, 2], "H": [0, 0], "S": [4, 1]},
            [(0, 6), (1, 6), (2, 7), (3, 7), (4, 7), (4, 7), (3, 7), (2, 6), (1, 6), (0, 5)],
            65,
            until=lambda p: (
                has_move(p, "FC1>")
                and has_move(p, "FC2>")
                and any(m.endswith(">F") for m in legal_moves(p))
            ),
        ),
    )
    add(
        "double_yukon_noflip",
        "double_yukon auto_flip false with face-down tops",
        walked(
            "double_yukon",
            {"auto_flip": False},
            64,
            120,
            until=lambda p: face_down_tops(p) >= 2 and foundation_total(p) >= 1,
            weight=lambda p, m: 0.2 if m.startswith("U") else move_weight(p, m),
        ),
    )
    return e


def counts(pos: Position, fixed_depth: int | None, min_depth: int = 1) -> dict[str, int]:
    result: dict[str, int] = {}
    depth = 1
    while True:
        result[str(depth)] = perft(pos, depth)
        if fixed_depth is not None:
            if depth >= fixed_depth:
                break
        elif depth >= min_depth and (
            depth >= MAX_DEPTH or not 0 < result[str(depth)] <= GROW_WHILE_AT_MOST
        ):
            break
        depth += 1
    return result


def main() -> None:
    entries: list[dict[str, Any]] = []
    for hand in HAND:
        pos = hand["position"]
        got = counts(pos, hand["depths"])
        for d, n in HAND_EXPECTED[hand["name"]].items():
            assert got[d] == n, (hand["name"], d, got[d], n)
        entries.append({"name": hand["name"], "note": hand["note"], "position": pos, "perft": got})
    for entry in entries_generated():
        deeper = DEEPER.get(entry["name"], 1)
        entries.append({**entry, "perft": counts(entry["position"], None, deeper)})
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names))
    total = 0.0
    for entry in entries:
        start = time.perf_counter()
        for d, n in entry["perft"].items():
            assert perft(entry["position"], int(d)) == n
        spent = time.perf_counter() - start
        total += spent
        print(f"{entry['name']:40s} {json.dumps(entry['perft'])}  {spent:.2f}s")
    print(f"{len(entries)} entries, reference check {total:.1f}s")
    OUT.write_text(json.dumps(entries, indent=1) + "\n")


if __name__ == "__main__":
    main()
