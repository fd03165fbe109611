"""tui/widgets.py: what the help screens say."""

from __future__ import annotations

import pytest
from solrace.rules import deal, view
from solrace_client import RaceClient
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.render import COLOUR, MONO, move_examples
from solrace_client.tui.widgets import HELP, HelpScreen, LobbyScreen, StandingsScreen, help_text
from textual.app import App

from tests.net.conftest import Cluster

from .conftest import wait_until


def test_only_a_racer_is_told_about_picked_cards() -> None:
    """A spectator's help listed "Blue: picked cards · green: where they may go": a
    spectator picks nothing (newcomer pass)."""
    assert "picked cards" in help_text("play").plain
    for kind in ("watch", "lobby", "standings"):
        assert "picked cards" not in help_text(kind).plain


def test_the_help_names_the_marks_the_board_uses() -> None:
    """Colours by default; under NO_COLOR, where the help said "yellow: cursor" of a
    cursor drawn in no colour at all, the attributes that mark it instead."""
    assert "Yellow: cursor" in help_text("play").plain
    plain = help_text("play", MONO).plain
    assert "Inverted: cursor" in plain and "underlined: picked cards" in plain
    assert not any(colour in plain.lower() for colour in ("yellow", "blue", "green"))


@pytest.mark.parametrize("kind", list(HELP))
def test_every_help_lists_its_keys_and_how_to_close(kind: str) -> None:
    text = help_text(kind).plain
    for key, what in HELP[kind]:
        # Each key apart from its words: "Shift+Tab / ← / hprevious racer's board".
        assert f"{key}  " in text and what in text
    assert text.endswith("Press any of Esc, q, ? to close")


def test_the_watch_help_says_boards_lag_and_may_be_held_back() -> None:
    """An audit: a board held back for fairness often did not say so, and the help
    said nothing of the delay or of holding back."""
    text = help_text("watch").plain
    assert "spectator delay" in text and "held back" in text
    assert "held back" not in help_text("play").plain


class _HelpApp(App[None]):
    """Just the race screen's help, as the app pushes it (it reads the app's look)."""

    look = COLOUR

    def on_mount(self) -> None:
        self.push_screen(HelpScreen("play"))

    def text(self) -> str:
        return "\n".join(strip.text for strip in self.screen._compositor.render_strips())


async def test_a_help_taller_than_the_terminal_scrolls_with_the_keys() -> None:
    """In 40×15 the race screen's help showed its first ten keys and a scroll bar; no
    key scrolled it, so x (resign), q (quit) and how to close it could not be read.
    ↓/j, PgDn and End scroll it, ↑/k, PgUp and Home back; q still closes it."""
    app = _HelpApp()
    async with app.run_test(size=(40, 15)) as pilot:
        await pilot.pause()
        assert "Keys" in app.text() and "Press any of" not in app.text()
        await pilot.press("end")
        await pilot.pause()
        assert "Press any of Esc, q, ? to close" in app.text(), app.text()
        await pilot.press("home")
        await pilot.pause()
        assert "Keys" in app.text()
        for start, keys in ((None, ("down", "j", "pagedown")), ("end", ("up", "k", "pageup"))):
            if start is not None:
                await pilot.press(start)
            for key in keys:
                before = app.text()
                await pilot.press(key)
                await pilot.pause()
                assert app.text() != before, key
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.parametrize(
    ("variant", "draw", "recycle", "waste"),
    [
        ("yukon", False, False, False),
        ("klondike", True, True, True),
        ("australian", True, False, True),
        ("double_yukon", False, False, False),
    ],
)
def test_the_race_help_lists_only_the_moves_of_its_game(
    variant: str, draw: bool, recycle: bool, waste: bool
) -> None:
    """A newcomer walk: the help of a Yukon race listed ``d / r`` and ``W>5`` — a
    stock and a waste Yukon does not have. A variants audit: in Klondike and
    Australian ↑ off a column was said to reach "the foundations row", where the stock
    and the waste are, and nothing said how to get at the waste's card."""
    seen = view(deal(variant, 1), owner=True)
    examples = move_examples(seen)
    columns = len(seen["tableau"])
    text = help_text("play", COLOUR, examples, columns).plain
    # the column keys the board has: 1 … 7 (it said 1 … 9, 0), or 1 … 9, 0 for ten
    keys = "1 … 9, 0       go to column 1 … 10" if columns == 10 else "1 … 7  "
    assert keys in text and ("column 1 … 7;" in text) == (columns == 7), text
    top_row = "stock, waste, foundations" if waste else "the foundations row"
    assert f"↑ off a column: {top_row}" in text, text
    assert ("d  /  r  " in text) == recycle, text
    assert ("draw from the stock" in text) == draw, text
    assert ("W>5" in text) == waste, text
    assert "type a move: " + "  ".join(examples) in text
    assert text.endswith("Press any of Esc, q, ? to close")


async def test_a_spectators_help_lists_no_key_of_a_racers(cluster: Cluster) -> None:
    """``?`` in a spectator's lobby said ``space / r  toggle your ready flag``, ``s  start
    the race`` and ``q  leave the room``, and on the race-over screen ``m  rematch``:
    keys that do nothing for a spectator, not a word when pressed (its footer offers
    none of them). A spectator's help lists its own keys."""
    server = await cluster.node()
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", private=True)
    await bob.join(ann.view.code or "", "Bob")
    app = SolraceApp(server.url, mode="watch", code=ann.view.code)
    async with app.run_test(size=(80, 24)) as pilot:

        async def help_of(screen: type) -> str:
            await wait_until(pilot, lambda: isinstance(app.screen, screen), screen.__name__)
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
            text = app.screen_text()
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, screen), "the help closed")
            return text

        lobby = await help_of(LobbyScreen)
        assert "stop watching" in lobby, lobby
        assert not any(words in lobby for words in ("ready flag", "start the race", "leave"))
        for racer in (ann, bob):
            await racer.ready()
        await ann.next_event("started", timeout=30)
        for racer in (ann, bob):
            await racer.resign()
        standings = await help_of(StandingsScreen)
        assert "quit" in standings and "rematch" not in standings, standings
    await ann.close()
    await bob.close()


async def test_the_countdowns_help_lists_the_countdowns_keys(cluster: Cluster) -> None:
    """``?`` in the countdown showed the lobby's help: ``space / r  toggle your ready
    flag``, ``s  start the race``, ``q  leave the room`` — once the countdown runs the
    first two do nothing, and q quits the race, a forfeit (the footer says so too)."""
    server = await cluster.node(countdown_ms=5000)
    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", private=True)
    app = SolraceApp(server.url, action="join", name="Bob", params={"code": ann.view.code})
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
        await pilot.press("space")
        await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"], 10)
        await ann.start()
        await wait_until(pilot, lambda: app.state.phase == "countdown", "the countdown")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        text = app.screen_text()
        assert app.state.phase == "countdown"
        assert "forfeits" in text, text
        assert not any(words in text for words in ("ready flag", "start the race", "leave"))
    await ann.close()
