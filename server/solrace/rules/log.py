"""Move logs: a game is ``(variant, seed, options)`` plus the list of what the player
did, in notation, with ``"undo"`` for the player's undo. Replaying a log rebuilds the
game exactly; this is how any server node rebuilds a racer's engine from Redis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from .board import Board
from .deal import deal
from .errors import NotAMove
from .moves import NOTATIONS

UNDO: Final = "undo"


def apply_entry(board: Board, entry: str, at_ms: int | None = None) -> None:
    """Apply one log entry with full checking (the log may come from anywhere)."""
    if entry == UNDO:
        board.undo(at_ms)
    else:
        try:
            board.play(entry, at_ms)
        except NotAMove:  # its list of what is a move leaves out undo, which a log takes
            raise NotAMove(entry, (*NOTATIONS, UNDO)) from None
        if board.options.auto_complete and board.can_auto_complete():
            board.auto_complete(at_ms)


def replay(
    variant: str, seed: int, options: Mapping[str, Any] | None, entries: Iterable[str]
) -> Board:
    """Deal and play ``entries``; raises the engine's error at the first bad entry."""
    board = deal(variant, seed, options)
    for entry in entries:
        apply_entry(board, entry)
    return board
