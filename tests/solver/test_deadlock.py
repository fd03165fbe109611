"""The deadlock test (``solrace.solver.deadlock.dead``) must never call a winnable
position lost: checked against the independent exhaustive search of
test_soundness.py on many small random positions of every variant, including
``foundation_to_tableau`` where the exhaustive search can finish."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from solrace.rules import deal, dump_position, load_position
from solrace.rules.cards import NAMES, SUITS, face_of
from solrace.solver.deadlock import _split, dead, deep_dead, relaxed_dead, split_dead
from solrace.solver.search import (
    EXHAUSTED,
    FOUND,
    OUT_OF_BUDGET,
    SHUFFLE_SIZE,
    Search,
    Spec,
    State,
    settle,
)
from solrace.solver.solve import spec_of, state_of

from .test_soundness import CASES, small_position, winnable

EXTRA: list[tuple[str, dict[str, Any]]] = [
    ("klondike", {}),
    ("klondike", {"draw": 3}),
]


def _settled_root(variant: str, seed: int) -> tuple[Spec, State]:
    """The deal's rules and its root as a solve starts from it (safe moves made)."""
    board = deal(variant, seed, {})
    spec = spec_of(board)
    start = state_of(board)
    cols, downs, piles = list(start[0]), list(start[1]), list(start[2])
    talon, p = settle(spec, cols, downs, piles, start[3], start[4], None)
    return spec, (tuple(cols), tuple(downs), tuple(piles), talon, p, start[5])


def _mid_game_claims_never_won(
    variant: str,
    seeds: tuple[int, ...],
    per_seed: int,
    claimed: Callable[[Spec, State], bool],
) -> int:
    """Mid-game positions of ``variant``'s deals ``seeds``, reached by a randomly
    ordered search of each (3,000 nodes at most): the first ``per_seed`` of each deal
    that ``claimed`` calls lost are each searched from (5,000 nodes) and never won.
    Returns how many were claimed, all deals together."""
    claims = 0
    for seed in seeds:
        spec, root = _settled_root(variant, seed)
        shuffle = random.Random(seed).randbytes(SHUFFLE_SIZE) + bytes((seed & 1,))
        walk = Search(spec, root, shuffle)
        found = 0
        while walk.nodes < 3_000 and found < per_seed:
            if walk.run(walk.nodes + 20) != OUT_OF_BUDGET:
                break
            state = walk.states[-1]
            if not claimed(spec, state):
                continue
            found += 1
            assert Search(spec, state).run(5_000) != FOUND, (seed, state)
        claims += found
    return claims


@pytest.mark.parametrize(("variant", "options"), CASES + EXTRA, ids=lambda x: str(x))
def test_dead_positions_are_really_unwinnable(variant: str, options: dict[str, Any]) -> None:
    rng = random.Random(f"dead{variant}{sorted(options.items())}")
    claimed = 0
    for _ in range(200):
        board = load_position(small_position(variant, options, rng))
        if dead(spec_of(board), state_of(board)):
            claimed += 1
            assert winnable(board, limit=50_000) is not True, dump_position(board)
    print(variant, options, "claimed", claimed)


def test_dead_finds_the_constructed_lock() -> None:
    """QH waits for JH (its only way up) and both black Kings are gone: dead."""
    board = load_position(
        {
            "variant": "yukon",
            "tableau": [["jh", "QH"], ["KH"], [], [], [], [], []],
            "foundations": {"C": 13, "D": 13, "H": 10, "S": 13},
        }
    )
    assert dead(spec_of(board), state_of(board))


def test_dead_a_cards_only_base_lies_above_it_in_its_column() -> None:
    """Russian, spades up to 10: JS must go up next, but QS lies on it, and QS can
    leave only for KS, under JS; JS can leave only for QS, which lies on JS itself
    (the group JS-QS cannot be moved onto its own QS). Lost; the test without the
    "own column" rule let JS use QS and called it open."""
    board = load_position(
        {
            "variant": "russian",
            "tableau": [["KS", "JS", "QS"], [], [], [], [], [], []],
            "foundations": {"C": 13, "D": 13, "H": 13, "S": 10},
        }
    )
    assert winnable(board, limit=50_000) is False
    assert dead(spec_of(board), state_of(board))


def test_a_base_above_a_card_serves_it_once_it_has_left_the_column() -> None:
    """Yukon: QD must leave its column so that the face-down JD under it can go up,
    and its only base is KS, which lies above it in that same column (on TD). Once KS
    has moved to an empty column, QD can go onto it: winnable (exhaustive search), so
    the test must pass. A version of the own-column rule that never lets a card use a
    base that lay above it (no release when a card between them leaves) calls it
    lost; the rule without that release fails this test."""
    board = load_position(
        {
            "variant": "yukon",
            "tableau": [[], ["QS", "KD"], [], [], ["js", "jd", "QD", "TD", "KS"], [], []],
            "foundations": {"C": 13, "D": 9, "H": 13, "S": 10},
        }
    )
    assert winnable(board, limit=50_000) is True
    assert not dead(spec_of(board), state_of(board))


def test_dead_never_fires_on_a_won_deal() -> None:
    """Deals the solver wins are never called dead (a quick whole-deal check)."""
    from solrace.solver import solve_deal

    for seed in range(40):
        board = deal("yukon", seed, {})
        if dead(spec_of(board), state_of(board)):
            assert not solve_deal("yukon", seed, {}, 3_000).won


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        ("yukon", {}),
        ("yukon", {"foundation_to_tableau": True}),
        ("russian", {}),
        ("alaska", {}),
        ("australian", {}),
        ("double_yukon", {}),
        ("klondike", {}),
        ("klondike", {"draw": 3, "thoughtful": True, "foundation_to_tableau": False}),
    ],
    ids=lambda x: str(x),
)
def test_dead_never_fires_on_a_position_of_a_winning_line(
    variant: str, options: dict[str, Any]
) -> None:
    """Mid-game positions of real deals, far larger than an exhaustive search can
    check: every position along a line the engine replays to a win is winnable, so the
    deadlock test (also run inside the search) must pass on each of them."""
    from solrace.rules.log import apply_entry
    from solrace.solver import solve_deal

    checked = wins = 0
    # Russian wins few deals: go on until four are won. Australian wins about one in a
    # hundred at this budget (seed 83 of 0-99), so it starts there instead of spending
    # 20 s of CI on the losses before it.
    first = 83 if variant == "australian" else 0
    for seed in range(first, 100):
        result = solve_deal(variant, seed, options, 5_000)
        if not result.won:
            continue
        wins += 1
        if wins > 4:
            break
        board = deal(variant, seed, options)
        for entry in result.moves:
            assert not dead(spec_of(board), state_of(board)), (seed, entry)
            apply_entry(board, entry)
            checked += 1
    assert checked > 0


#: Yukon: QH (on the face-down KD) and QD (face down under JD and KD) both need KC,
#: their only base left (KS is up). QD must move so that TD under it can go up; QH
#: must move so that KD, JD and QD can turn up. Whichever lies on KC first stays there
#: until it goes up — QH needs JH (at the bottom) up first, QD needs TD (under it) —
#: so the other can never get off: lost. The relaxation alone passes it (each queen
#: may use KC "at some time").
BASE_CONFLICT: dict[str, Any] = {
    "variant": "yukon",
    "tableau": [[], [], [], ["jh", "kh", "td", "qd", "jd", "kd", "QH"], ["qc", "KC"], [], []],
    "foundations": {"C": 11, "D": 9, "H": 10, "S": 13},
}


def test_the_occupancy_split_proves_a_base_conflict() -> None:
    board = load_position(BASE_CONFLICT)
    assert winnable(board, limit=50_000) is False
    spec, state = spec_of(board), state_of(board)
    assert not relaxed_dead(spec, state)
    assert split_dead(spec, state)
    assert dead(spec, state)


def _larger_position(variant: str, options: dict[str, Any], rng: random.Random) -> Any:
    """A legal position with up to 5 ranks of each suit left, in 2-5 columns: large
    enough for bases to be fought over, small enough for the exhaustive search."""
    heights = [13 - rng.randint(0, 5) for _ in range(4)]
    left = [NAMES[face_of(s, r)] for s in range(4) for r in range(heights[s] + 1, 14)]
    rng.shuffle(left)
    columns: list[list[str]] = [[] for _ in range(7)]
    used = rng.sample(range(7), k=rng.randint(2, 5))
    for card in left:
        columns[rng.choice(used)].append(card)
    for col in columns:
        if col:
            hidden = rng.randint(0, len(col) - 1)
            col[:hidden] = [c.lower() for c in col[:hidden]]
    return load_position(
        {
            "variant": variant,
            "options": options,
            "tableau": columns,
            "foundations": {SUITS[s]: heights[s] for s in range(4)},
        }
    )


@pytest.mark.parametrize(
    ("variant", "options", "least"),
    [
        ("yukon", {}, 3),
        ("alaska", {}, 1),
        ("klondike", {"foundation_to_tableau": False}, 0),
    ],
    ids=lambda x: str(x),
)
def test_occupancy_claims_are_checked_by_exhaustive_search(
    variant: str, options: dict[str, Any], least: int
) -> None:
    """Every position the occupancy split (and not the relaxation alone) calls lost,
    among random positions larger than the other tests', is lost by the engine's
    exhaustive search."""
    rng = random.Random(f"split{variant}")
    claimed = 0
    for _ in range(3_000):
        board = _larger_position(variant, options, rng)
        spec, state = spec_of(board), state_of(board)
        if relaxed_dead(spec, state) or not split_dead(spec, state):
            continue
        claimed += 1
        assert winnable(board, limit=50_000) is not True, dump_position(board)
    assert claimed >= least


@pytest.mark.parametrize(
    ("variant", "seeds"),
    [("yukon", (9, 17)), ("alaska", (11, 25))],
    ids=lambda x: str(x),
)
def test_occupancy_claims_mid_game_are_never_won(variant: str, seeds: tuple[int, ...]) -> None:
    """Mid-game positions of real deals, reached by a randomly ordered search: where
    the split calls one lost, a search from it with the relaxation alone must not win
    it. (Alaska seed 25 caught a first version that let a King's escape to an empty
    column go unseen: a King on a Queen can leave it without going up.)"""

    def claimed(spec: Spec, state: State) -> bool:
        return not relaxed_dead(spec, state) and split_dead(spec, state)

    assert _mid_game_claims_never_won(variant, seeds, 5, claimed) > 0


@pytest.mark.parametrize(
    ("variant", "options"),
    [("yukon", {}), ("alaska", {}), ("klondike", {"foundation_to_tableau": False})],
    ids=lambda x: str(x),
)
def test_the_derivation_filter_changes_no_answer(variant: str, options: dict[str, Any]) -> None:
    """split_dead skips the bases that the plain fixed point's derivation did not move
    both cards onto (such a case cannot change the fixed point): on random positions
    it answers exactly as the unfiltered split."""
    rng = random.Random(f"filter{variant}")
    claims = 0
    for _ in range(1_000):
        board = _larger_position(variant, options, rng)
        spec, state = spec_of(board), state_of(board)
        if relaxed_dead(spec, state):
            continue
        filtered = split_dead(spec, state)
        assert filtered == _split(spec, state, None)[0], dump_position(board)
        claims += filtered
    assert claims > 0


@pytest.mark.parametrize(
    ("variant", "options"),
    [("yukon", {}), ("klondike", {"foundation_to_tableau": False})],
    ids=lambda x: str(x),
)
def test_nested_split_claims_are_checked_by_exhaustive_search(
    variant: str, options: dict[str, Any]
) -> None:
    """Every position the nested split (three levels) calls lost and the single split
    does not, among random larger positions, is lost by the exhaustive search."""
    rng = random.Random(f"nested{variant}")
    claimed = 0
    for _ in range(8_000):
        board = _larger_position(variant, options, rng)
        spec, state = spec_of(board), state_of(board)
        if dead(spec, state) or not deep_dead(spec, state, 3, 1_000_000)[0]:
            continue
        claimed += 1
        assert winnable(board, limit=50_000) is not True, dump_position(board)
    assert claimed >= 1


def test_nested_split_proves_a_real_deal_the_search_exhausts() -> None:
    """Yukon seed 511: the relaxation and the single split pass it, three levels of
    the split prove it lost in a few fixed points, and the plain depth-first search
    (the relaxation pruning only) confirms it by exhausting its space."""
    spec, root = _settled_root("yukon", 511)
    assert not dead(spec, root)
    assert not deep_dead(spec, root, 1, 1_000)[0]
    lost, runs = deep_dead(spec, root, 3, 250)
    assert lost and runs < 50
    assert Search(spec, root).run(30_000) == EXHAUSTED


def test_nested_split_claims_mid_game_are_never_won() -> None:
    """Mid-game positions of real Yukon deals reached by randomly ordered searches:
    where the nested split (and not the single one) calls one lost, a search from it
    must not win it."""

    def claimed(spec: Spec, state: State) -> bool:
        return not dead(spec, state) and deep_dead(spec, state, 3, 250)[0]

    assert _mid_game_claims_never_won("yukon", (17, 306, 511, 876), 3, claimed) > 0
