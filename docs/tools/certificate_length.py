"""What a certified deal's announced line length and band told a racer: docs/fairness.md,
"Why the lobby no longer says the line's length", measured offline.

    python docs/tools/certificate_length.py --hidden 5 --rooms 6

A measuring tool, not part of the server. Until the leak audit of 2026-12-07 the lobby
announced a certified deal's winning line's length and the difficulty band the solver
found. The solver is public and deterministic, so a racer who knows every card it has
turned up, and which cards are left, can deal each way the last few may lie, solve it
at the server's budget and keep the ways that give the announced length and band. For
each of ``--rooms`` rooms (a random secret, certified as the server certifies a Yukon
round) the tool plays the certificate until ``--hidden`` cards are still face down,
solves every arrangement of them, and prints one JSON object: how many arrangements
there were, how many were won at all, how many give the announced band, the length,
both, whether the true one is among those, and the milliseconds a solve took. Also
``nodes``, the positions the solver searched on the true deal, and ``near_nodes``, the
ways whose solve searched within ``NEAR`` of that: what a racer timing the lobby's
``deal_chosen`` could tell when it was said as soon as the solver finished (the walk's
time follows those positions; it is now said on a whole second, docs/fairness.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from typing import Any

from solrace.argtypes import whole
from solrace.race.fairness import round_seed
from solrace.rooms.certify import CERTIFY_BUDGET_NODES, certify
from solrace.rules import VARIANTS, Board, deal, load_position, position_dict
from solrace.solver import solve_board

#: The variant measured unless ``--variant`` says: the default of ``solrace quick``.
VARIANT = "yukon"
#: More hidden cards than this is more than 40,320 solves a room.
MAX_HIDDEN = 8
#: A wall clock's reading of a solve's positions, generously: within 10 %.
NEAR = 0.1


def _places(start: Board, hidden: set[int]) -> list[tuple[int, int]]:
    """Where the cards of ``hidden`` lie in the deal: (column, index)."""
    return [
        (c, i)
        for c, column in enumerate(start.tableau)
        for i, card in enumerate(column)
        if card in hidden
    ]


def measure(secret: bytes, hidden: int, variant: str = VARIANT) -> dict[str, Any] | None:
    """One room's figures (None if its round is not certified)."""
    found = certify(variant, {}, secret, 1, None)
    if found.line is None:
        return None
    seed = round_seed(secret, 1, found.attempt)
    line, band = list(found.line), found.difficulty
    board = deal(variant, seed)
    played = 0
    for move in line:
        if board.face_down_count() <= hidden:
            break
        board.play(move)
        played += 1
    down = {
        card for column, d in zip(board.tableau, board.down, strict=True) for card in column[:d]
    }
    start = deal(variant, seed)
    places = _places(start, down)
    position = position_dict(start)
    names = [position["tableau"][c][i] for c, i in places]
    counts = {"won": 0, "same_band": 0, "same_length": 0, "both": 0, "near_nodes": 0}
    nodes = solve_board(load_position(position_dict(start)), CERTIFY_BUDGET_NODES).nodes
    truth_kept = False
    began = time.perf_counter()
    ways = 0
    for way in itertools.permutations(names):
        dealt = position_dict(start)
        for (c, i), name in zip(places, way, strict=True):
            dealt["tableau"][c][i] = name
        result = solve_board(load_position(dealt), CERTIFY_BUDGET_NODES)
        ways += 1
        same_band = result.won and result.difficulty == band
        same_length = result.won and len(result.moves) == len(line)
        counts["won"] += result.won
        counts["same_band"] += same_band
        counts["same_length"] += same_length
        counts["both"] += same_band and same_length
        counts["near_nodes"] += result.won and abs(result.nodes - nodes) <= NEAR * nodes
        truth_kept |= same_band and same_length and list(way) == names
    return {
        "line": len(line),
        "band": band,
        "played": played,
        "hidden": len(names),
        "nodes": nodes,
        "ways": ways,
        **counts,
        "truth_kept": truth_kept,
        "ms_a_solve": round((time.perf_counter() - began) * 1000 / ways),
    }


def build_parser() -> argparse.ArgumentParser:
    """The tool's command line (tests/test_docs_inline_commands.py parses the pages'
    commands with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default=VARIANT)
    parser.add_argument("--hidden", type=whole(1, MAX_HIDDEN), default=5)
    parser.add_argument("--rooms", type=whole(1, 1000), default=6)
    parser.add_argument("--seed", type=whole(0, 2**32), default=7, help="draws the secrets")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    rng = random.Random(args.seed)
    for _ in range(args.rooms):
        secret = bytes(rng.getrandbits(8) for _ in range(32))
        row = measure(secret, args.hidden, args.variant)
        print(json.dumps(row if row is not None else {"certified": False}), flush=True)


if __name__ == "__main__":
    main()
