"""perft: the number of distinct move sequences of a given length (docs/rules.md).

The standard check of a move generator: counts computed here must equal counts from
an independent implementation (``tests/reference_movegen.py``) and ``tests/data/perft.json``.
Auto-complete is off and undo is not a move.
"""

from __future__ import annotations

from typing import Final

from .board import Board

#: divide's refusal of depth 0 (the rules CLI says it too, for ``perft 0 --divide``).
DIVIDE_DEPTH: Final = "divide needs a depth of 1 or more: at depth 0 there is no first move"


def perft(board: Board, depth: int) -> int:
    """Count move sequences of length ``depth`` from ``board`` (left unchanged)."""
    if depth < 0:
        raise ValueError("depth must be ≥ 0")
    if depth == 0:
        return 1
    moves = board.legal_moves()
    if depth == 1:
        return len(moves)
    total = 0
    for move in moves:
        board.push(move)
        total += perft(board, depth - 1)
        board.pop()
    return total


def divide(board: Board, depth: int) -> dict[str, int]:
    """perft split by first move, for finding where two generators disagree. Depth 1
    or more: at depth 0 no sequence has a first move (refused before any move is
    pushed, so the board is left as it was)."""
    if depth < 1:
        raise ValueError(DIVIDE_DEPTH)
    result: dict[str, int] = {}
    for move in board.legal_moves():
        board.push(move)
        result[str(move)] = perft(board, depth - 1)
        board.pop()
    return result
