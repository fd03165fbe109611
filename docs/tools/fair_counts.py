"""What closing the counts channel would cost: docs/fairness.md, "What the counts still
tell", measured offline.

    python docs/tools/fair_counts.py --seeds 0 120

A measuring tool, not part of the server. The fair way to show an opponent's counts
(foundation cards, cards still face down) would be as of its latest state whose every
face-up card the viewer has seen too — the rule boards already follow. How stale would
that make them? For each Yukon seed the solver wins (20,000 nodes), three games are
played on the same deal: the certificate (an expert) and two runs of the client's
greedy bot with different random choices (casual racers). Two of them race, one move
each a tick; at every tick where both are still playing, the tool works out what the
viewer would be shown of the other's counts under that rule and compares it with the
live counts. It prints one JSON object per pairing ("cert→greedy": what the greedy
racer would see of the expert): the share of ticks the shown counts would be the live
ones, and the mean and largest shortfall in foundation cards and in cards turned up.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass

from solrace.argtypes import whole
from solrace.race import RacerGame
from solrace.rooms.spectators import _face_up, _mask
from solrace.rules import view
from solrace.solver import solve_deal
from solrace_client.boardview import board_from_view
from solrace_client.strategy import Memory, greedy

VARIANT = "yukon"
#: A greedy game stops after this many moves (it wins about one deal in ten, and may
#: wander: the bot's own stall counter is not used here).
GREEDY_MOVES = 400


@dataclass(frozen=True)
class State:
    """One state of a game: the cards its board shows, the cards its racer has seen
    (bitmasks of card ids), its counts and whether its racer is still playing."""

    shown: int
    seen: int
    foundation: int
    face_down: int
    playing: bool


def greedy_line(seed: int, rng_seed: int) -> list[str]:
    game = RacerGame(VARIANT, seed, {})
    memory, rng = Memory(), random.Random(rng_seed)
    line: list[str] = []
    while len(line) < GREEDY_MOVES and game.status() == "playing":
        own = view(game.board, owner=True)
        here = memory.arrive(own)
        choice = greedy(board_from_view(own), memory, rng)
        if choice is None:
            break
        memory.leave(here, str(choice.move))
        game.apply(str(choice.move), 0)
        line.append(str(choice.move))
    return line


def states(seed: int, line: list[str]) -> list[State]:
    game = RacerGame(VARIANT, seed, {}, track_seen=True)

    def now() -> State:
        counts = game.progress()
        return State(
            _face_up(game.board),
            _mask(game.seen or set()),
            counts["foundation"],
            counts["face_down"],
            game.status() == "playing",
        )

    out = [now()]
    for entry in line:
        game.apply(entry, 0)
        out.append(now())
    return out


def race(mover: list[State], viewer: list[State]) -> list[tuple[bool, int, int]]:
    """Per tick while both play: (shown counts live?, foundation shortfall, turned-up
    shortfall) of what ``viewer`` would be shown of ``mover``."""
    ticks: list[tuple[bool, int, int]] = []
    for tick in range(max(len(mover), len(viewer))):
        live = mover[min(tick, len(mover) - 1)]
        sees = viewer[min(tick, len(viewer) - 1)]
        if not (live.playing and sees.playing):
            break
        last = min(tick, len(mover) - 1)
        fair = next(i for i in range(last, -1, -1) if not mover[i].shown & ~sees.seen)
        shown = mover[fair]
        ticks.append(
            (
                fair == last,
                live.foundation - shown.foundation,
                shown.face_down - live.face_down,
            )
        )
    return ticks


def build_parser() -> argparse.ArgumentParser:
    """The tool's command line (tests/test_docs_inline_commands.py parses the pages'
    commands with it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    seed = whole(0)  # solrace.argtypes: one clear line for a bad number (not "invalid int")
    parser.add_argument("--seeds", nargs=2, type=seed, default=(0, 120), metavar=("FIRST", "END"))
    return parser


def main() -> None:
    args = build_parser().parse_args()
    pairings = {
        "cert→greedy": ("cert", "g1"),
        "greedy→cert": ("g1", "cert"),
        "greedy→greedy": ("g1", "g2"),
    }
    ticks: dict[str, list[tuple[bool, int, int]]] = {name: [] for name in pairings}
    deals = 0
    for seed in range(*args.seeds):
        solved = solve_deal(VARIANT, seed, {}, 20_000)
        if not solved.won:
            continue
        deals += 1
        games = {
            "cert": states(seed, list(solved.moves)),
            "g1": states(seed, greedy_line(seed, 1)),
            "g2": states(seed, greedy_line(seed, 2)),
        }
        for name, (mover, viewer) in pairings.items():
            ticks[name] += race(games[mover], games[viewer])
    for name, rows in ticks.items():
        print(
            json.dumps(
                {
                    "pairing": name,
                    "deals": deals,
                    "ticks": len(rows),
                    "live_share": round(sum(r[0] for r in rows) / len(rows), 3),
                    "foundation_short_mean": round(sum(r[1] for r in rows) / len(rows), 2),
                    "foundation_short_max": max(r[1] for r in rows),
                    "turned_up_short_mean": round(sum(r[2] for r in rows) / len(rows), 2),
                    "turned_up_short_max": max(r[2] for r in rows),
                },
                ensure_ascii=False,
            )
        )


if __name__ == "__main__":
    main()
