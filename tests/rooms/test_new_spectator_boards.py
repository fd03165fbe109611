"""A new spectator's boards (spectators.Shadow.last_whole) against the rule they must
give, computed the way the server did before the shadows kept what each state shows:
replay the racer's whole log, build the fair view after every entry, keep the last
that withholds nothing (docs/fairness.md, "Fair spectating").

Random races on one deal, where racers copy each other's moves some of the time, so
that one racer turning up a card releases another's older board; with undo, a racer
who stops racing (the shown cards grow), the spectator delay (only the moves made by
a time) and the race's end (everything shown). After every entry each racer's board is
asked for, as a watch would, and must equal the replay's exactly — and its cost per
watch (engine applications) must not grow with the log (tests/rooms/test_spectators.py
measures that through a node).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from solrace.race import RacerGame
from solrace.rooms import spectators
from solrace.rules.log import UNDO

from .conftest import EngineWork

#: Variant, options: one deck and two, draw three, thoughtful (the stock is seen by its
#: player but never shown to a spectator), no auto-complete.
CASES = [
    ("klondike", {"draw": 3}),
    ("klondike", {"thoughtful": True}),
    ("yukon", {"auto_complete": False}),
    ("russian", {}),
    ("double_yukon", {}),
    ("alaska", {}),
]


def _replayed(
    game_args: tuple[str, int, dict[str, Any]],
    log: list[tuple[str, int]],
    shown: set[int] | None,
    until: int | None,
) -> dict[str, Any] | None:
    """The rule, the old way: the latest whole fair view among the log's states (up to
    the first entry made after ``until``), None if even the deal's is held back."""
    game = RacerGame(*game_args)
    view = game.board_view(shown)
    last = view if spectators._whole(view) else None
    for entry, at in log:
        if until is not None and at > until:
            break
        game.apply(entry, at)
        view = game.board_view(shown)
        if spectators._whole(view):
            last = view
    return last


def _entry(rng: random.Random, game: RacerGame, lead: list[tuple[str, int]]) -> str | None:
    """The next entry of a racer: most often the leader's next move (so its knowledge
    catches up with the leader's), else undo now and then, else a random legal move."""
    board = game.board
    if lead and len(game.entries) < len(lead) and rng.random() < 0.6:
        follow = lead[len(game.entries)][0]
        if game.entries == [e for e, _ in lead[: len(game.entries)]]:
            return follow
    moves = board.legal_moves()
    if board.can_undo() and (not moves or rng.random() < 0.12):
        return UNDO  # stuck with undo allowed: still racing
    return str(rng.choice(moves)) if moves else None


@pytest.mark.parametrize(("variant", "options"), CASES)
def test_last_whole_equals_the_full_replay_as_knowledge_grows(
    variant: str, options: dict[str, Any]
) -> None:
    rng = random.Random(f"{variant}{sorted(options.items())}")
    seed = rng.getrandbits(64)
    game_args = (variant, seed, options)
    shadows = [spectators.Shadow(*game_args) for _ in range(3)]
    logs: list[list[tuple[str, int]]] = [[], [], []]
    racing = [True, True, True]
    clock = 0
    released = undone = delayed_older = 0
    previous: list[dict[str, Any] | None] = [None, None, None]
    for step in range(240):
        if step == 160:
            racing[2] = False  # the third racer stops: only two seen sets count now
        mover = rng.choice([r for r in range(3) if racing[r]])
        # Racer 1 follows racer 0's moves, racer 2 follows racer 1's.
        entry = _entry(rng, shadows[mover], logs[mover - 1] if mover else [])
        if entry is None:
            racing[mover] = False
            if not any(racing):
                break
            continue
        clock += rng.randrange(0, 400)
        shadows[mover].apply(entry, clock)
        logs[mover].append((entry, clock))
        undone += entry == UNDO
        seen = [s.seen or set() for s, r in zip(shadows, racing, strict=True) if r]
        shown = set.intersection(*seen) if seen else None
        for racer, shadow in enumerate(shadows):
            view = shadow.last_whole(shown)
            assert view == _replayed(game_args, logs[racer], shown, None), (step, racer)
            if racer != mover and view != previous[racer]:
                released += 1  # another racer's knowledge released an older board
            previous[racer] = view
            until = clock - rng.choice([0, 300, 2000, 10_000])
            delayed = shadow.last_whole(shown, until)
            assert delayed == _replayed(game_args, logs[racer], shown, until), (step, racer)
            delayed_older += delayed != view
    everything = shadows[0].last_whole(None)  # nobody races: the board as it is
    assert everything == _replayed(game_args, logs[0], None, None) == shadows[0].board_view()
    # The races did what this test is about.
    assert released and undone and delayed_older


def test_a_watch_costs_the_entries_made_since_the_last_not_the_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The audit's race: a racer turns the stock over and over (1,500 entries) and its
    opponent has seen only the deal, so its board is held back. Counted as engine
    applications (the old way: the whole log, and a view per entry, every watch): the
    first watch may replay the log once; twenty more with nothing changed apply none
    and build no board; after ten more entries, a watch applies at most those ten."""
    game_args = ("klondike", 12345, {})
    shadow = spectators.Shadow(*game_args)
    shown = RacerGame(*game_args, track_seen=True).seen  # the opponent never moved
    assert shown is not None

    def turn(entries: int) -> None:
        for _ in range(entries):
            shadow.apply("D" if shadow.board.stock else "R", shadow.seq)

    turn(1500)
    while spectators._whole(shadow.board_view(shown)):
        turn(1)  # held back: the waste shows a card the opponent has not seen
    work = EngineWork()
    log = list(zip(shadow.entries, range(shadow.seq), strict=True))
    expected = _replayed(game_args, log, shown, None)
    work.install(monkeypatch)
    first = shadow.last_whole(shown)
    assert first == expected and first is not None
    assert work.applied <= len(log) and work.views == 1
    work.reset()
    for _ in range(20):
        assert shadow.last_whole(shown) is first
    assert work.applied == work.views == 0
    turn(10)
    work.reset()
    log = list(zip(shadow.entries, range(shadow.seq), strict=True))
    monkeypatch.undo()
    expected = _replayed(game_args, log, shown, None)
    work.install(monkeypatch, views=False)
    assert shadow.last_whole(shown) == expected
    assert work.applied <= 10
