"""Golden deal vectors (RULES "Deals must be reproducible": the shuffle is pinned by golden
test vectors, seed → full card order). ``tests/data/deals.json`` was written by
``tests/data/make_deals.py``; here the engine must reproduce it exactly, and a second,
independent implementation of docs/deals.md (written from the spec, sharing no code
with the engine) must derive the same card orders and layouts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from solrace.rules import VARIANTS, deal, position_dict, shuffled_deck, splitmix64

DATA = Path(__file__).resolve().parents[1] / "data" / "deals.json"
VECTORS: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = VECTORS["entries"]
SEEDS = [0, 1, 42, 2**63, 2**64 - 1]
IDS = [f"{e['variant']}-{e['seed']}" for e in ENTRIES]


# ------------------------------------------------- the independent implementation

MASK = 2**64 - 1


def sm64(seed: int) -> Iterator[int]:
    """SplitMix64, docs/deals.md §2."""
    state = seed
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        yield z ^ (z >> 31)


def spec_order(seed: int, decks: int) -> list[str]:
    """docs/deals.md §3–5: Fisher–Yates from the last index down; ``below(bound)`` rejects
    draws under ``2**64 % bound``; cards deck by deck, suits C D H S, ranks A..K."""
    rng, cards = sm64(seed), list(range(52 * decks))
    for i in range(len(cards) - 1, 0, -1):
        threshold = 2**64 % (i + 1)
        x = next(rng)
        while x < threshold:
            x = next(rng)
        j = x % (i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return ["A23456789TJQK"[c % 13] + "CDHS"[c % 52 // 13] for c in cards]


def spec_layout(variant: str, order: list[str]) -> tuple[list[list[str]], list[str]]:
    """docs/deals.md §6: columns bottom to top, left to right, then the stock (lower case
    = face down)."""
    if variant == "double_yukon":
        shape = [(min(k, 8), 6) for k in range(10)]
    elif variant == "klondike":
        shape = [(k, 1) for k in range(7)]
    elif variant == "australian":
        shape = [(0, 4)] * 7
    else:
        shape = [(0, 1)] + [(k, 5) for k in range(1, 7)]
    tableau, pos = [], 0
    for down, up in shape:
        column = order[pos : pos + down + up]
        tableau.append([c.lower() for c in column[:down]] + column[down:])
        pos += down + up
    return tableau, [c.lower() for c in order[pos:]]


# ------------------------------------------------------------------------------ tests


def test_vectors_cover_every_variant_and_seed() -> None:
    """docs/deals.md: seeds 0, 1, 42, 2^63 and 2^64−1 for every variant."""
    covered = {(e["variant"], int(e["seed"])) for e in ENTRIES}
    assert covered == {(v, s) for v in VARIANTS for s in SEEDS}


def test_independent_splitmix64_published_check() -> None:
    """docs/deals.md §2: seed 0 → 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F."""
    assert list(islice(sm64(0), 3)) == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_engine_reproduces_the_vectors(entry: dict[str, Any]) -> None:
    """The engine's SplitMix64, shuffle and deal are exactly the recorded ones."""
    seed, decks = int(entry["seed"]), entry["decks"]
    assert [f"0x{x:016x}" for x in islice(splitmix64(seed), 4)] == entry["splitmix64"]
    order = shuffled_deck(seed, decks)
    assert order == entry["ids"]
    assert ["A23456789TJQK"[c % 13] + "CDHS"[c % 52 // 13] for c in order] == entry["order"]
    assert position_dict(deal(entry["variant"], seed)) == entry["position"]


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_independent_implementation_matches_the_vectors(entry: dict[str, Any]) -> None:
    """A second implementation of the spec gives the recorded SplitMix64 outputs, card
    order and layout: the spec, not just the code, determines the deal."""
    seed, decks = int(entry["seed"]), entry["decks"]
    assert [f"0x{x:016x}" for x in islice(sm64(seed), 4)] == entry["splitmix64"]
    order = spec_order(seed, decks)
    assert order == entry["order"]
    tableau, stock = spec_layout(entry["variant"], order)
    assert tableau == entry["position"]["tableau"]
    assert stock == entry["position"]["stock"]
    assert entry["position"]["waste"] == [] and entry["position"]["recycles"] == 0


@pytest.mark.parametrize("seed", [3, 99, 12345, 2**32 + 7, 2**64 - 2])
@pytest.mark.parametrize("decks", [1, 2])
def test_independent_implementation_matches_the_engine_on_other_seeds(
    seed: int, decks: int
) -> None:
    engine = ["A23456789TJQK"[c % 13] + "CDHS"[c % 52 // 13] for c in shuffled_deck(seed, decks)]
    assert spec_order(seed, decks) == engine


def test_vectors_same_order_for_every_single_deck_variant() -> None:
    """docs/deals.md §6: the variant does not enter the shuffle."""
    for seed in SEEDS:
        orders = {tuple(e["order"]) for e in ENTRIES if int(e["seed"]) == seed and e["decks"] == 1}
        assert len(orders) == 1
