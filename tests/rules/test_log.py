"""``solrace.rules.log``: a game is (variant, seed, options) plus a log of notations and
"undo"; replaying the log rebuilds the game exactly (RULES common rules: undo, moves
counted; auto-complete applied by the log when the option is on)."""

from __future__ import annotations

import random

import pytest
from solrace.rules import IllegalMoveError, NotationError, deal, position_dict, replay
from solrace.rules.log import UNDO, apply_entry


def _random_log(variant: str, seed: int, options: dict, n: int, rng_seed: int) -> list[str]:
    board = deal(variant, seed, options)
    rng = random.Random(rng_seed)
    entries = []
    for _ in range(n):
        if board.history and board.options.undo and rng.random() < 0.15:
            entries.append(UNDO)
            apply_entry(board, UNDO)
            continue
        moves = board.legal_moves()
        if not moves:
            break
        entry = str(rng.choice(moves))
        entries.append(entry)
        apply_entry(board, entry)
    return entries


@pytest.mark.parametrize(
    ("variant", "options"),
    [("yukon", {}), ("klondike", {"draw": 3}), ("double_yukon", {"auto_flip": False})],
)
def test_replay_rebuilds_the_game(variant: str, options: dict) -> None:
    """A replayed log gives the same position, score, move count and history."""
    entries = _random_log(variant, 17, options, 60, 4)
    assert UNDO in entries
    live = deal(variant, 17, options)
    for entry in entries:
        apply_entry(live, entry, at_ms=100)
    again = replay(variant, 17, options, entries)
    assert again.snapshot() == live.snapshot()
    assert position_dict(again) == position_dict(live)
    assert again.move_count == live.move_count == len(entries)
    assert again.history == live.history


def test_replay_stops_at_the_first_illegal_entry() -> None:
    board = deal("yukon", 1)
    bad = next(
        f"{c}:1>{d}"
        for c in range(1, 8)
        for d in range(1, 8)
        if c != d and f"{c}:1>{d}" not in {str(m) for m in board.legal_moves()}
    )
    with pytest.raises(IllegalMoveError):
        replay("yukon", 1, None, [bad])
    with pytest.raises(NotationError):
        replay("yukon", 1, None, ["1 :1>2"])
    with pytest.raises(IllegalMoveError, match="there is no move to undo"):
        replay("yukon", 1, None, [UNDO])


def test_replay_undo_refused_when_undo_is_off() -> None:
    """RULES common (undo=false): a log with an undo is refused."""
    first = str(deal("yukon", 1).legal_moves()[0])
    with pytest.raises(IllegalMoveError, match="undo is off"):
        replay("yukon", 1, {"undo": False}, [first, UNDO])


def test_apply_entry_passes_the_callers_clock() -> None:
    board = deal("yukon", 1)
    apply_entry(board, str(board.legal_moves()[0]), at_ms=42)
    assert board.elapsed_ms == 42
    apply_entry(board, UNDO, at_ms=99)
    assert board.elapsed_ms == 99 and board.move_count == 2
