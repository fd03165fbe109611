"""The solver (``solrace.solver``): every ``won`` line replays to a win on the engine
through the race server's own path (``RacerGame.apply``: the move, then auto-complete
when the option is on), for every variant and the options that change the rules of
play; ``unknown`` when the budget is too small; results are plain, picklable values."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from solrace.race.game import RacerGame
from solrace.rules import VARIANTS, deal, load_position
from solrace.rules.cards import CARDS_PER_DECK, KING, RANK
from solrace.solver import Outcome, SolveResult, faces, solve_board, solve_deal
from solrace.solver.solve import luby

# Variant × options that change what a winning line must look like.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("yukon", {}),
    ("yukon", {"auto_flip": False}),
    ("yukon", {"auto_complete": False}),
    ("yukon", {"foundation_to_tableau": True}),
    ("russian", {}),
    ("russian", {"auto_flip": False, "auto_complete": False}),
    ("alaska", {}),
    ("alaska", {"foundation_to_tableau": True}),
    ("australian", {}),
    ("australian", {"auto_complete": False}),
    ("double_yukon", {}),
    ("double_yukon", {"auto_flip": False}),
    ("klondike", {}),
    ("klondike", {"draw": 3}),
    ("klondike", {"draw": 3, "max_passes": 2, "auto_flip": False}),
    ("klondike", {"draw": 1, "max_passes": 3, "auto_complete": False}),
    ("klondike", {"max_passes": 1}),
    ("klondike", {"draw": 3, "thoughtful": True, "foundation_to_tableau": False}),
]

SEEDS = range(6)
BUDGET = 3_000


def replay_in_race(
    variant: str, seed: int, options: dict[str, Any], moves: tuple[str, ...]
) -> bool:
    game = RacerGame(variant, seed, options)
    for i, entry in enumerate(moves):
        assert not game.board.is_won(), f"line continues after the win at {i}"
        game.apply(entry, at_ms=i)
    return game.board.is_won()


def test_every_variant_is_covered() -> None:
    assert {variant for variant, _ in CASES} == set(VARIANTS)


@pytest.mark.parametrize(("variant", "options"), CASES, ids=lambda x: str(x))
def test_won_lines_replay_to_a_win_in_the_race_game(variant: str, options: dict[str, Any]) -> None:
    outcomes = []
    for seed in SEEDS:
        result = solve_deal(variant, seed, options, BUDGET)
        outcomes.append(result.outcome)
        if result.outcome is Outcome.WON:
            assert result.moves, "a dealt game is never won before a move"
            assert replay_in_race(variant, seed, options, result.moves)
            assert result.nodes <= BUDGET and result.difficulty is not None
        else:
            assert result.moves == () and result.difficulty is None
    if variant not in ("russian", "australian") and options.get("max_passes") != 1:
        assert Outcome.WON in outcomes, f"no {variant} deal won in {len(SEEDS)} seeds"


def test_auto_flip_off_lines_turn_cards_up_explicitly() -> None:
    result = solve_deal("yukon", 0, {"auto_flip": False}, BUDGET)
    assert result.won and any(m.startswith("U") for m in result.moves)


def test_auto_complete_off_lines_end_with_foundation_moves() -> None:
    on = solve_deal("yukon", 0, {}, BUDGET)
    off = solve_deal("yukon", 0, {"auto_complete": False}, BUDGET)
    assert on.won and off.won
    assert len(off.moves) > len(on.moves)
    assert all(m.endswith(">F") for m in off.moves[len(on.moves) :])


def test_yukon_42_the_documented_example_is_won() -> None:
    result = solve_deal("yukon", 42)
    assert result.outcome is Outcome.WON
    assert replay_in_race("yukon", 42, {}, result.moves)


def test_solving_is_deterministic() -> None:
    assert solve_deal("yukon", 7, {}, 5_000) == solve_deal("yukon", 7, {}, 5_000)


def test_tiny_budget_gives_unknown() -> None:
    for variant in VARIANTS:
        result = solve_deal(variant, 1, {}, 1)
        # A deal the deadlock test proves lost at the root needs no node at all.
        assert result.outcome is not Outcome.WON, variant
        assert result.nodes <= 1 and result.moves == ()


def test_should_stop_ends_the_search_as_unknown() -> None:
    calls = []

    def stop() -> bool:
        calls.append(1)
        return True

    # A deal that needs more than 1,024 nodes, so the callable is polled.
    board = deal("yukon", 5)
    result = solve_board(board, 1_000_000, should_stop=stop)
    assert result.outcome is Outcome.UNKNOWN and calls
    assert result.nodes < 10_000


def test_bad_budget_and_bad_deal_are_refused() -> None:
    with pytest.raises(ValueError):
        solve_deal("yukon", 1, {}, 0)
    with pytest.raises(ValueError):  # RulesError is a ValueError
        solve_deal("nope", 1)
    with pytest.raises(ValueError):
        solve_deal("yukon", -1)


def test_board_is_left_unchanged_and_a_won_board_needs_no_move() -> None:
    board = deal("klondike", 3)
    before = board.snapshot()
    solve_board(board, 2_000)
    assert board.snapshot() == before
    result = solve_deal("yukon", 0)
    won = RacerGame("yukon", 0, {})
    for i, entry in enumerate(result.moves):
        won.apply(entry, i)
    again = solve_board(won.board)
    assert again.outcome is Outcome.WON and again.moves == ()


def test_result_is_plain_and_picklable() -> None:
    result = solve_deal("yukon", 0)
    assert isinstance(result, SolveResult)
    assert pickle.loads(pickle.dumps(result)) == result
    data = result.as_dict()
    assert data["outcome"] == "won" and data["moves"] == list(result.moves)


def test_position_in_auto_complete_condition_is_finished_by_one_move() -> None:
    position = {
        "variant": "yukon",
        "tableau": [["KS", "QH"], ["KH", "QS"], [], [], [], [], []],
        "foundations": {"C": 13, "D": 13, "H": 11, "S": 11},
    }
    board = load_position(position)
    result = solve_board(board)
    assert result.won and len(result.moves) == 1
    game = board.copy()
    from solrace.rules.log import apply_entry

    apply_entry(game, result.moves[0])
    assert game.is_won()


def test_luby_sequence() -> None:
    assert [luby(i) for i in range(1, 16)] == [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]


def test_the_search_encodes_cards_as_the_engine_does() -> None:
    """The search core keeps its own card constants (it is compiled on its own, without
    the engine: solver/accel.py); they must be the engine's."""
    assert faces.FACES == CARDS_PER_DECK and faces.KING == KING
    assert faces.DOWN >= CARDS_PER_DECK  # a face-down card never reads as a face
    assert faces.RANK[: faces.FACES] == RANK[:CARDS_PER_DECK]
    assert all(faces.RANK[f + faces.DOWN] == faces.RANK[f] for f in range(faces.FACES))
