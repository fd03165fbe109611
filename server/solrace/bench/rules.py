"""Rules-engine benchmark: checked plays, legal-move generations and log replays.

Random games are played with a fixed seed (reproducible work), and each figure is the
best of several timed rounds, which is the figure least disturbed by a noisy machine.
A *baseline* (a bare Python loop doing list appends and pops of the same count) runs in
the same process so that figures from different machines and runs can be compared as
ratios too.
"""

from __future__ import annotations

import random
import time
from typing import Any

from solrace.rules import VARIANTS, Board, Move, deal
from solrace.rules.log import apply_entry


def _random_game(
    variant: str, seed: int, rng: random.Random, length: int
) -> tuple[Board, list[Move]]:
    """Play up to ``length`` random legal moves; return the start board and the moves."""
    board = deal(variant, seed, {"auto_complete": False})
    start = board.copy()
    moves: list[Move] = []
    for _ in range(length):
        legal = board.legal_moves()
        if not legal:
            break
        move = rng.choice(legal)
        board.push(move)
        moves.append(move)
    return start, moves


def _games(variant: str, min_moves: int, length: int) -> list[tuple[Board, list[Move]]]:
    """Random games until ``min_moves`` moves in all (short-lived variants such as
    Russian, where random play sticks fast, get more games)."""
    rng = random.Random(1234)
    games: list[tuple[Board, list[Move]]] = []
    total = 0
    while total < min_moves and len(games) < 2000:
        game = _random_game(variant, rng.getrandbits(64), rng, length)
        games.append(game)
        total += len(game[1])
    return games


def _best(rounds: int, fn: Any) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_variant(variant: str, seconds: float) -> dict[str, float]:
    games = _games(variant, 8000, 200)
    total_moves = sum(len(m) for _, m in games)
    rounds = max(3, int(seconds * 3))

    def plays() -> None:
        for start, moves in games:
            board = start.copy()
            for move in moves:
                board.play(move)

    def generations() -> None:
        for start, moves in games:
            board = start.copy()
            for move in moves:
                board.legal_moves()
                board.push(move)

    logs = [(start, [str(m) for m in moves]) for start, moves in games]
    long_logs = [(s, e) for s, e in logs if len(e) >= 200] or logs

    def replays() -> None:
        for start, entries in long_logs:
            board = start.copy()
            for entry in entries[:200]:
                apply_entry(board, entry)

    t_play = _best(rounds, plays)
    t_gen = _best(rounds, generations)
    t_replay = _best(rounds, replays)
    replay_len = sum(min(200, len(e)) for _, e in long_logs) / len(long_logs)
    return {
        "play_per_s": round(total_moves / t_play),
        "legal_moves_per_s": round(total_moves / t_gen),
        "replay_200_ms": round(t_replay / len(long_logs) * 1000 * 200 / replay_len, 3),
        "moves_timed": total_moves,
    }


def baseline(seconds: float) -> dict[str, float]:
    """A bare loop of list append+pop: how fast this Python is on this machine now."""
    n = 200_000

    def loop() -> None:
        stack: list[int] = []
        for i in range(n):
            stack.append(i)
            stack.pop()

    t = _best(max(3, int(seconds * 3)), loop)
    return {"append_pop_per_s": round(n / t)}


def run(seconds: float = 3.0) -> dict[str, Any]:
    per = seconds / (len(VARIANTS) + 1)
    return {
        "benchmark": "rules",
        "baseline": baseline(per),
        "variants": {v: bench_variant(v, per) for v in VARIANTS},
    }
