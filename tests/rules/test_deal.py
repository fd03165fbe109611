"""``solrace.rules.deal``: reproducible deals (RULES "Deals must be reproducible",
docs/deals.md) — SplitMix64, the shuffle, seeds, and every variant's layout. The golden
vectors are in ``test_deal_vectors.py``."""

from __future__ import annotations

from itertools import islice

import pytest
from solrace.rules import RulesError, deal, position_dict, shuffled_deck, splitmix64

from tests.rules.test_support import VARIANT_IDS, card_ids, decks_of


def test_splitmix64_first_outputs_for_seed_0() -> None:
    """docs/deals.md §2: an independent published check of SplitMix64 (seed 0)."""
    assert list(islice(splitmix64(0), 3)) == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]


def test_splitmix64_outputs_are_64_bit() -> None:
    for seed in (0, 1, 2**63, 2**64 - 1):
        assert all(0 <= x < 2**64 for x in islice(splitmix64(seed), 50))


@pytest.mark.parametrize("decks", [1, 2])
def test_shuffled_deck_is_a_permutation(decks: int) -> None:
    for seed in (0, 1, 42, 2**64 - 1):
        cards = shuffled_deck(seed, decks)
        assert sorted(cards) == list(range(52 * decks))


@pytest.mark.parametrize("seed", [0, 1, 2**63, 2**64 - 1])
def test_deal_seed_range_accepted(seed: int) -> None:
    """docs/deals.md §1: 0 ≤ seed < 2**64."""
    for variant in VARIANT_IDS:
        deal(variant, seed)


@pytest.mark.parametrize("seed", [-1, 2**64, 2**70, True, False, 1.0, "1", None])
def test_deal_seed_out_of_range_or_not_an_int_refused(seed: object) -> None:
    """docs/deals.md §1: anything else is refused (booleans too)."""
    with pytest.raises(RulesError, match="a seed is a whole number"):
        deal("yukon", seed)  # type: ignore[arg-type]
    with pytest.raises(RulesError):
        shuffled_deck(seed)  # type: ignore[arg-type]


def test_a_long_refused_seed_is_quoted_at_most_in_its_first_characters() -> None:
    """``solrace-rules deal yukon <4,000 nines>`` said the seed whole, one 4 KB line."""
    with pytest.raises(RulesError) as refused:
        deal("yukon", int("9" * 4000))
    assert str(refused.value) == (
        f"a seed is a whole number 0 ≤ seed < 2**64, not '{'9' * 40}'… (4,000 characters)"
    )
    with pytest.raises(RulesError) as refused:  # str() refuses it: it was a traceback
        deal("yukon", int("f" * 4000, 16))
    assert str(refused.value).endswith("not a number of 16,000 bits")


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_deal_same_seed_same_deal(variant: str) -> None:
    """RULES deals: a deal is a pure function of (variant, seed)."""
    for seed in (0, 7, 2**64 - 1):
        a, b = deal(variant, seed), deal(variant, seed)
        assert a.snapshot() == b.snapshot()
        assert position_dict(a) == position_dict(b)


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_deal_different_seeds_differ(variant: str) -> None:
    """RULES deals: different seeds give different deals (200 seeds, all distinct)."""
    seen = {deal(variant, seed).snapshot() for seed in range(200)}
    assert len(seen) == 200
    assert deal(variant, 0).snapshot() != deal(variant, 2**64 - 1).snapshot()


def test_deal_variant_does_not_enter_the_shuffle() -> None:
    """docs/deals.md §6: the same seed gives the same card order in every single-deck
    variant; cards are laid column by column, bottom to top, then the stock."""
    order = shuffled_deck(42)
    for variant in ("yukon", "russian", "alaska", "klondike", "australian"):
        board = deal(variant, 42)
        laid = [c for col in board.tableau for c in col] + board.stock
        assert laid == order, variant
    double = deal("double_yukon", 42)
    assert [c for col in double.tableau for c in col] == shuffled_deck(42, 2)


def test_deal_options_other_than_thoughtful_do_not_change_it() -> None:
    """docs/deals.md §6: options other than thoughtful do not change the deal."""
    plain = deal("klondike", 5)
    for options in ({"draw": 3}, {"scoring": "vegas"}, {"auto_flip": False}, {"undo": False}):
        assert deal("klondike", 5, options).snapshot()[:6] == plain.snapshot()[:6]
    thoughtful = deal("klondike", 5, {"thoughtful": True})
    assert thoughtful.tableau == plain.tableau and thoughtful.down == [0] * 7


def test_deal_docs_example_yukon_42() -> None:
    """docs/deals.md example: yukon 42 starts ["7C"] and ["3h","KC","AS","2S","AC","AH"]."""
    tableau = position_dict(deal("yukon", 42))["tableau"]
    assert tableau[0] == ["7C"]
    assert tableau[1] == ["3h", "KC", "AS", "2S", "AC", "AH"]


# ------------------------------------------------------------------------------ layouts

LAYOUTS = {
    # variant: (column sizes, face-down counts, stock size)
    "yukon": ([1, 6, 7, 8, 9, 10, 11], [0, 1, 2, 3, 4, 5, 6], 0),
    "russian": ([1, 6, 7, 8, 9, 10, 11], [0, 1, 2, 3, 4, 5, 6], 0),
    "alaska": ([1, 6, 7, 8, 9, 10, 11], [0, 1, 2, 3, 4, 5, 6], 0),
    "klondike": ([1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 4, 5, 6], 24),
    "australian": ([4] * 7, [0] * 7, 24),
    "double_yukon": (
        [6, 7, 8, 9, 10, 11, 12, 13, 14, 14],
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 8],
        0,
    ),
}


@pytest.mark.parametrize("variant", VARIANT_IDS)
@pytest.mark.parametrize("seed", [0, 1, 2**64 - 1])
def test_deal_layout_shape(variant: str, seed: int) -> None:
    """RULES layouts: Yukon (and Russian, Alaska) 1/6/…/11 with k−1 face down; Klondike
    1…7 with the top face up and 24 in the stock; Australian 7×4 face up and 24 in the
    stock; Double Yukon 6…14,14 with 0,1,…,8,8 face down. Foundations and waste empty;
    every card exactly once."""
    sizes, down, stock = LAYOUTS[variant]
    board = deal(variant, seed)
    assert [len(c) for c in board.tableau] == sizes
    assert board.down == down
    assert len(board.stock) == stock and board.waste == [] and board.recycles == 0
    assert board.foundation_count() == 0 and len(board.piles) == 4 * decks_of(variant)
    assert sorted(card_ids(board)) == list(range(52 * decks_of(variant)))
    assert board.move_count == 0 and board.elapsed_ms == 0 and board.history == []


@pytest.mark.parametrize(
    ("bound", "draws", "expected"),
    [
        (3, [0, 5], 2),  # 2**64 % 3 == 1: 0 is rejected, 5 % 3 == 2
        (3, [1], 1),  # the threshold itself is accepted (x >= threshold)
        (7, [1, 2], 2),  # 2**64 % 7 == 2: 0 and 1 rejected
        (104, [2**64 - 1], (2**64 - 1) % 104),
        (1, [0], 0),
    ],
)
def test_below_rejects_draws_under_the_threshold(
    bound: int, draws: list[int], expected: int
) -> None:
    """docs/deals.md §3: below(bound) rejects x < 2**64 mod bound, then returns x mod bound
    (no modulo bias). Random draws almost never hit the threshold, so feed them."""
    from solrace.rules.deal import _below

    assert 2**64 % 3 == 1 and 2**64 % 7 == 2
    assert _below(iter(draws), bound) == expected
