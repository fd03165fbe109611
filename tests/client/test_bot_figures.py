"""The greedy bot's win rate that docs/client.md states is the one it has: the deals
1…100 of Yukon and Klondike are played again, offline, by the bot's strategy with the
bot's own stopping rules (run_bot's defaults), and the wins counted."""

from __future__ import annotations

import inspect
import random
import re
from pathlib import Path

import pytest
from solrace.race.fairness import round_seed
from solrace.rooms.certify import MAX_CANDIDATES
from solrace.rules import deal, view
from solrace.rules.log import apply_entry
from solrace.solver import SERVER_BUDGET, solve_deal
from solrace_client.boardview import board_from_view
from solrace_client.bot import _counts, run_bot
from solrace_client.strategy import STRATEGIES, Memory, position_key

DOC = Path(__file__).parents[2] / "docs" / "client.md"
DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(run_bot).parameters.items()
    if p.default is not inspect.Parameter.empty
}


def play_like_the_bot(variant: str, seed: int) -> str:
    """The bot's game loop without a server: choose from the rebuilt view only; resign
    after max_moves, a stall of stall_limit revisits or patience moves of no progress."""
    board = deal(variant, seed)
    rng = random.Random(seed)  # tie-breaks, reproducibly (the bot: --seed)
    memory = Memory()
    memory.arrive(view(board, owner=True))
    played = stall = idle = 0
    best = (-1, 1 << 30)
    while board.status() == "playing":
        if (
            played >= DEFAULTS["max_moves"]
            or stall > DEFAULTS["stall_limit"]
            or idle > DEFAULTS["patience"]
        ):
            return "resigned"
        here = view(board, owner=True)
        choice = STRATEGIES["greedy"](board_from_view(here), memory, rng)
        if choice is None:
            return "stuck"
        apply_entry(board, str(choice.move))
        after = view(board, owner=True)
        memory.leave(position_key(here), str(choice.move))
        memory.arrive(after)
        played += 1
        stall = 0 if choice.novel else stall + 1
        up, down = _counts(after)
        if up > best[0] or down < best[1]:
            idle, best = 0, (max(up, best[0]), min(down, best[1]))
        else:
            idle += 1
    return str(board.status())


@pytest.mark.parametrize("variant", ["yukon", "klondike"])
def test_the_documented_win_rate_is_measured(variant: str) -> None:
    stated = re.search(rf"\*\*(\d+)\s+of\s+100\s+{variant.capitalize()}\*\*", DOC.read_text())
    assert stated is not None, f"docs/client.md states no {variant} figure"
    wins = sum(play_like_the_bot(variant, seed) == "won" for seed in range(1, 101))
    assert wins == int(stated.group(1))


def certified_seed(room: int) -> int:
    """The deal a winnable room of secret ``room`` would deal first: its first
    candidate seed the solver wins at the server's budget (rooms/certify.py)."""
    secret = room.to_bytes(8, "big") + b"certified-bot-sample"
    for attempt in range(MAX_CANDIDATES):
        seed = round_seed(secret, 1, attempt)
        if solve_deal("yukon", seed, {}, SERVER_BUDGET).won:
            return seed
    raise AssertionError(f"room {room}: no candidate won")


def test_the_documented_win_rate_on_certified_deals_is_measured() -> None:
    """Rooms deal certified winnable deals by default: the bot's figure on those."""
    stated = re.search(r"\*\*(\d+)\s+of\s+100\s+certified Yukon\*\*", DOC.read_text())
    assert stated is not None, "docs/client.md states no figure on certified deals"
    wins = sum(play_like_the_bot("yukon", certified_seed(room)) == "won" for room in range(100))
    assert wins == int(stated.group(1))
