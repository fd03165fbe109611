"""Perft checks: an independent reference move generator against the rules engine.

- (a) the reference generator (``tests/reference_movegen.py``) against positions whose
  depth-1 and depth-2 counts were made by hand (see each entry's ``note``);
- (b) every entry of ``tests/data/perft.json`` with the reference generator;
- (c) the engine (``solrace.rules``) against the same counts, and its move lists against
  the reference's, at every entry and after every legal first move.

Rebuild the data with ``.venv/bin/python tests/data/make_perft.py``.
RULES sections covered: every move rule of every variant (Yukon 1-5, Klondike 1-8,
Russian, Alaska, Australian, Double Yukon) and the notation/perft definition.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.reference_movegen import (
    VARIANTS,
    Position,
    apply,
    legal_moves,
    options,
    perft,
    validate,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "perft.json"
ENTRIES: list[dict[str, Any]] = json.loads(DATA.read_text())
BY_NAME = {entry["name"]: entry for entry in ENTRIES}
NAMES = [entry["name"] for entry in ENTRIES]

try:  # the engine may not be written yet; the reference tests must still run
    from solrace.rules import load_position
    from solrace.rules import perft as engine_perft

    ENGINE_ERROR: Exception | None = None
except Exception as exc:  # pragma: no cover - depends on the engine's state
    ENGINE_ERROR = exc

# Counted by hand (the reasoning is in each entry's "note"); independent of perft.json.
HAND_COUNTED: dict[str, dict[int, int]] = {
    "hand_yukon_two_hearts": {1: 7, 2: 49, 3: 336},
    "hand_yukon_noflip_face_down_king": {1: 7, 2: 48},
    "hand_klondike_draw3_order_and_recycle": {1: 7, 2: 50},
    "hand_australian_one_pass": {1: 7, 2: 50},
    "hand_double_yukon_two_heart_kings": {1: 18, 2: 316},
    "hand_klondike_last_card_f2t": {1: 25, 2: 570},
}

# The depth-1 move lists of some hand positions, written out by hand.
HAND_MOVES: dict[str, list[str]] = {
    "hand_yukon_two_hearts": ["1>F"] + [f"1:2>{d}" for d in range(2, 8)],
    "hand_yukon_noflip_face_down_king": ["U1", "2>F"] + [f"2:1>{d}" for d in range(3, 8)],
    "hand_klondike_draw3_order_and_recycle": [f"1:1>{d}" for d in range(2, 8)] + ["D"],
    "hand_australian_one_pass": [f"1:1>{d}" for d in range(2, 8)] + ["D"],
    "hand_double_yukon_two_heart_kings": ["1>F", "2>F"]
    + [f"1:2>{d}" for d in range(3, 11)]
    + [f"2:1>{d}" for d in range(3, 11)],
    "hand_klondike_last_card_f2t": ["1>F"]
    + [f"1:1>{d}" for d in range(2, 8)]
    + [f"F{s}>{d}" for s in "CDH" for d in range(2, 8)],
}


def position(name: str) -> Position:
    return copy.deepcopy(BY_NAME[name]["position"])


# ------------------------------------------------------------------ (a) by hand


@pytest.mark.parametrize("name", sorted(HAND_COUNTED))
def test_reference_matches_hand_counts(name: str) -> None:
    pos = position(name)
    validate(pos)
    for depth, expected in HAND_COUNTED[name].items():
        assert perft(pos, depth) == expected, (name, depth)
        assert BY_NAME[name]["perft"][str(depth)] == expected, (name, depth)


@pytest.mark.parametrize("name", sorted(HAND_MOVES))
def test_reference_hand_move_lists(name: str) -> None:
    assert sorted(legal_moves(position(name))) == sorted(HAND_MOVES[name])


def test_reference_draw_order_and_recycle() -> None:
    """RULES Klondike 5-6: the stock's last card is drawn first; R reverses the waste."""
    pos = position("hand_klondike_draw3_order_and_recycle")
    drawn = apply(pos, "D")
    assert drawn["stock"] == [] and drawn["waste"] == ["QS", "JS"]
    assert "R" in legal_moves(drawn) and "W>F" in legal_moves(drawn)
    recycled = apply(drawn, "R")
    assert recycled["stock"] == ["js", "qs"] and recycled["waste"] == []
    assert recycled["recycles"] == 1
    # max_passes 2: the second recycle is out of reach.
    assert "R" not in legal_moves(apply(recycled, "D"))
    assert pos["stock"] == ["js", "qs"], "apply must not change its argument"


def test_reference_refuses_illegal_moves() -> None:
    pos = position("hand_yukon_two_hearts")
    for move in ("1:1>2", "2>F", "D", "R", "U1", "W>F", "FH>2", "1:3>2"):
        with pytest.raises(ValueError):
            apply(pos, move)


def test_reference_won_game_has_no_moves() -> None:
    """RULES common (win): even with foundation_to_tableau on, a won game has no moves."""
    won = apply(position("hand_klondike_last_card_f2t"), "1>F")
    assert options(won)["foundation_to_tableau"] is True
    assert legal_moves(won) == []


# ---------------------------------------------------------- (b) the data set


def test_dataset_shape() -> None:
    assert len(ENTRIES) >= 24
    assert len(set(NAMES)) == len(NAMES)
    assert {e["position"]["variant"] for e in ENTRIES} == set(VARIANTS)
    for entry in ENTRIES:
        assert entry["note"], entry["name"]
        assert "1" in entry["perft"], entry["name"]
        depths = sorted(int(d) for d in entry["perft"])
        assert depths == list(range(1, len(depths) + 1)), entry["name"]


@pytest.mark.parametrize("name", NAMES)
def test_reference_perft(name: str) -> None:
    pos = position(name)
    validate(pos)
    got = {d: perft(pos, int(d)) for d in BY_NAME[name]["perft"]}
    assert got == BY_NAME[name]["perft"]


# ------------------------------------------------------------- (c) the engine


def _engine_load(pos: Position) -> Any:
    if ENGINE_ERROR is not None:
        pytest.fail(f"solrace.rules is not importable: {ENGINE_ERROR!r}")
    return load_position(copy.deepcopy(pos))


def _engine_moves(pos: Position) -> list[str]:
    return sorted(str(m) for m in _engine_load(pos).legal_moves())


def _locate_difference(pos: Position, depth: int, path: list[str]) -> str:
    """Descend along reference moves to the first position where the two disagree."""
    ref_moves = sorted(legal_moves(pos))
    eng_moves = _engine_moves(pos)
    if ref_moves != eng_moves or depth <= 1:
        return (
            f"after {path or 'no moves'}: position {json.dumps(pos)}\n"
            f"  only reference: {sorted(set(ref_moves) - set(eng_moves))}\n"
            f"  only engine:    {sorted(set(eng_moves) - set(ref_moves))}"
        )
    for move in ref_moves:
        child = apply(pos, move)
        if engine_perft(_engine_load(child), depth - 1) != perft(child, depth - 1):
            return _locate_difference(child, depth - 1, [*path, move])
    return (
        f"after {path or 'no moves'}: every child agrees when loaded from JSON, so the "
        f"engine's own play() of one of {ref_moves} differs from the reference's apply; "
        f"position {json.dumps(pos)}"
    )


@pytest.mark.parametrize("name", NAMES)
def test_engine_perft_matches(name: str) -> None:
    pos = position(name)
    board = _engine_load(pos)
    for depth, expected in sorted(BY_NAME[name]["perft"].items(), key=lambda kv: int(kv[0])):
        got = engine_perft(board, int(depth))
        if got != expected:
            where = _locate_difference(pos, int(depth), [])
            pytest.fail(f"{name}: perft({depth}) engine {got} != reference {expected}\n{where}")


@pytest.mark.parametrize("name", NAMES)
def test_engine_legal_moves_match(name: str) -> None:
    pos = position(name)
    assert _engine_moves(pos) == sorted(legal_moves(pos)), name
    for move in legal_moves(pos):
        child = apply(pos, move)
        assert _engine_moves(child) == sorted(legal_moves(child)), (name, move, child)
