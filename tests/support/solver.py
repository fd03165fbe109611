"""A full-information solver for tests: it sees every card (tests know the seed), so it
can produce a winning move list for a deal, which test racers then play over the
network. Depth-first search with a transposition table and simple move ordering
(foundation moves, then moves that turn a card up, then the rest); bounded by a node
budget so a hard deal just returns None.
"""

from __future__ import annotations

from solrace.rules import Board, Move
from solrace.rules.moves import (
    DRAW,
    FOUNDATION_TO_TABLEAU,
    RECYCLE,
    TO_FOUNDATION,
    WASTE_TO_FOUNDATION,
)


def board_key(board: Board) -> tuple[object, ...]:
    """What tells one position from another in a search: the cards where they lie,
    face down or up (recycles left out: without a pass limit they count for ever)."""
    return (
        tuple(tuple(c) for c in board.tableau),
        tuple(board.down),
        tuple(len(p) for p in board.piles),
        tuple(board.stock),
        tuple(board.waste),
    )


def _ordered(board: Board) -> list[Move]:
    scored: list[tuple[int, int, Move]] = []
    for i, move in enumerate(board.legal_moves()):
        if move.kind == FOUNDATION_TO_TABLEAU:
            continue  # never needed to win here; keeps the search small
        if move.kind in (TO_FOUNDATION, WASTE_TO_FOUNDATION):
            rank = 0
        elif move.kind in (DRAW, RECYCLE):
            rank = 3
        else:
            before = board.face_down_count()
            board.push(move)
            uncovered = board.face_down_count() < before
            board.pop()
            rank = 1 if uncovered else 2
        scored.append((rank, i, move))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [m for _, _, m in scored]


def solve(board: Board, budget: int = 200_000) -> list[Move] | None:
    """A list of moves that wins from ``board`` (left unchanged), or None."""
    seen: set[tuple[object, ...]] = set()
    path: list[Move] = []
    nodes = 0

    def search() -> bool:
        nonlocal nodes
        if board.is_won() or board.can_auto_complete():
            return True
        nodes += 1
        if nodes > budget:
            return False
        key = board_key(board)
        if key in seen:
            return False
        seen.add(key)
        for move in _ordered(board):
            board.push(move)
            path.append(move)
            if search():
                board.pop()
                return True
            path.pop()
            board.pop()
        return False

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return list(path) if search() else None
    finally:
        sys.setrecursionlimit(limit)
