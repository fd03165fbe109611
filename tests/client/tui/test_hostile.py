"""The terminal UI against a scripted server that lies or stalls
(tests/support/fake_server.py): the race-over screen's ✔ stands for the whole of
``solrace verify``, not the commitment alone; a race the server never ends is said to
be overdue, and q still quits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from solrace.protocol import Envelope, encode
from solrace_client import results
from solrace_client.cli import main
from solrace_client.errors import EXIT_FAILED, EXIT_NO
from solrace_client.tui import _enter_then_run
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.widgets import LobbyScreen, PlayScreen, StandingsScreen
from textual.pilot import Pilot
from textual.widgets import Input

from tests.client.test_bot_hostile import _BENT, _RESULT_FIELDS, _bend, _own_log_cut
from tests.support.fake_server import FakeRace, fake_server, rival_declared_winner

from .conftest import dealt, quit_app, wait_for_text, wait_until


async def _race_and_resign(pilot: Pilot[SolraceApp]) -> None:
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
    await pilot.press("space")  # ready: the fake starts the race at once
    await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen), "the race")
    await pilot.press("x")
    await wait_for_text(pilot, "Resign?")
    await pilot.press("y")


async def test_the_race_over_screen_does_not_put_a_tick_under_standings_the_logs_deny() -> None:
    """An audit: a server declared the rival, who never moved, "finished" first with
    0/52 cards; the commitment was true, and the screen said "✔ seed and salt match the
    commitment published at the countdown" under those standings."""
    async with fake_server(FakeRace(tamper=rival_declared_winner)) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await _race_and_resign(pilot)
            await wait_until(pilot, lambda: isinstance(app.screen, StandingsScreen), "standings")
            screen = await wait_for_text(pilot, "NOT VERIFIED")
            said = " ".join(screen.split())
            assert "✘ NOT VERIFIED — racer 2 (Rival): standing:" in said
            assert "status 'finished' but the replayed game is not won" in said
            assert "✔" not in screen
            await quit_app(pilot)


async def test_the_race_over_screen_ticks_a_race_that_verifies() -> None:
    async with fake_server(FakeRace()) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await _race_and_resign(pilot)
            screen = await wait_for_text(pilot, "✔ verified: the deal was committed")
            assert "NOT VERIFIED" not in screen
            await quit_app(pilot)


async def test_a_race_the_server_never_ends_is_said_to_be_overdue_and_q_quits() -> None:
    """The clock stood at 00:00 left with no word for as long as the player waited."""
    race = FakeRace(moves=1000, ends_in_ms=500, race_over=False)
    async with fake_server(race) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        app.race_over_grace_s = 0.5
        async with app.run_test(size=(80, 24)) as pilot:
            await _race_and_resign(pilot)
            said = "the server has not ended the race 0.5 s past its time limit — q quits"
            await wait_for_text(pilot, said)  # whole, in 80 columns
            await quit_app(pilot, "Quit the race?")
    assert app.return_code == 0


async def test_a_countdown_the_server_never_ends_is_said_to_be_overdue_and_q_quits() -> None:
    """The lobby said "The race starts in 0.0 s — get ready!" with no word for as long
    as the player waited when no ``started`` came after the countdown (a server whose
    nodes serving the room died, or whose Redis is down): said as a race never ended
    is, the grace past the countdown's end."""
    async with fake_server(FakeRace(started=False)) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        app.race_over_grace_s = 0.5
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            await pilot.press("space")  # ready: the fake's countdown, and nothing after it
            said = "the server has not started the race 0.5 s past its countdown — q quits"
            await wait_for_text(pilot, said)
            assert app.status_log.count(said) == 1
            await quit_app(pilot, "Quit the race? Leaving forfeits it.")
    assert app.return_code == 0


async def test_the_overdue_line_is_said_after_the_news_still_queued_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session folds each event into the view as it arrives; the app says its news
    line when it takes it from the queue. A start whose screen took a loaded machine
    over a second to show (the test above, full run beside a busy loop) had the clock's
    tick find the view racing past its limit and say "overdue" while "the countdown has
    begun" and "go!" still waited in the queue: said after it, they replaced the line
    said once, and the player never saw it. The screen's switch is slowed here."""
    switch = SolraceApp._sync_screen

    async def slow_switch(app: SolraceApp) -> None:
        if app.state.phase == "racing":
            await asyncio.sleep(1.5)  # past the limit (0.5 s) and the grace (0.5 s)
        await switch(app)

    monkeypatch.setattr(SolraceApp, "_sync_screen", slow_switch)
    race = FakeRace(moves=1000, ends_in_ms=500, race_over=False)
    async with fake_server(race) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        app.race_over_grace_s = 0.5
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            await pilot.press("space")
            await wait_until(pilot, lambda: "go!" in app.status_log, "go!")
            said = "the server has not ended the race 0.5 s past its time limit — q quits"
            await wait_for_text(pilot, said)
            news = ["you are ready", "the countdown has begun", "go!", said]
            assert app.status_log[1:] == news
            await quit_app(pilot, "Quit the race?")
    assert app.return_code == 0


async def test_the_race_over_screen_and_verify_hold_the_log_to_the_moves_acknowledged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The tamper audit solrace bot was given (tests/client/test_bot_hostile.py), made
    on the terminal UI: three moves acknowledged ``moved``, the log revealed cut to the
    first, its standing made to match — the race-over screen said ✔ (docs/fairness.md
    said the UI did not hold its log). Now ✘, and the race it saved fails ``solrace
    verify`` later on the same line: the acknowledged moves are saved with it."""
    async with fake_server(FakeRace(tamper=_own_log_cut)) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"})
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            await pilot.press("space")
            await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen), "the race")
            for seq in range(3):  # draws from the stock: each waits for its card
                await pilot.press("colon", "d", "enter")
                await wait_until(pilot, lambda s=seq: app.state.next_seq > s, f"move {seq}")
            await wait_until(pilot, lambda: isinstance(app.screen, StandingsScreen), "standings")
            screen = await wait_for_text(pilot, "NOT VERIFIED")
            said = " ".join(screen.split())
            assert "✘ NOT VERIFIED — racer 1 (Me): acknowledged moves: move 2 'D' was" in said
            assert "✔" not in screen
            race = app.race_id
            await quit_app(pilot)
    assert race is not None
    saved = results.load_result(race)
    assert saved.acknowledged == results.Acknowledged(1, {0: "D", 1: "D", 2: "D"})
    capsys.readouterr()
    assert main(["verify", race]) == EXIT_NO
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "FAIL racer 1 (Me): acknowledged moves: move 2 'D' was acknowledged, but the log "
        "revealed ends after 1 move"
    ) in said, said


async def test_a_refusal_with_an_escape_sequence_is_shown_without_it() -> None:
    """The command line's failure line and ``verify`` keep a server's escapes off the
    terminal; the race screen's status line, one step away, did not: a server that
    refused a move with ``illegal_move`` and a message holding ``ESC [31m`` had it
    drawn as it is (Textual strips only BEL, BS, VT, FF and CR), so the terminal the
    race was played in turned red."""
    refusal = {"code": "illegal_move", "message": "no\x1b[31m red"}
    async with fake_server(FakeRace(move_error=refusal)) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            await pilot.press("space")  # ready: the fake starts the race at once
            await dealt(pilot, app)
            await pilot.press("colon")
            app.screen.query_one("#move", Input).value = "1>F"
            await pilot.press("enter")
            screen = await wait_for_text(pilot, "no?[31m red")
            assert "\x1b" not in screen and "\x1b" not in app.status_text.plain, screen
            await quit_app(pilot, "Quit the race?")


async def test_an_entry_refused_with_an_escape_sequence_is_said_without_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The one line said when the entry fails (before any screen: ``solrace join``)
    quoted the server's refusal as it came: a ``join`` refused with a message holding
    ``ESC [31m`` wrote the escape to standard error (a red terminal), where the command
    line's own failure line (``_fail``) keeps it off."""
    refusal = {"code": "internal", "message": "full\x1b[31m red"}
    async with fake_server(FakeRace(join_error=refusal)) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        status = await _enter_then_run(app)
    err = capsys.readouterr().err
    assert status == EXIT_FAILED, err
    assert err.startswith("solrace: ") and "full?[31m red" in err, err
    assert "\x1b" not in err, err


@pytest.mark.parametrize("pong", [{}, {"now_ms": "soon"}, {"now_ms": None}, {"now_ms": 1.5e300}])
async def test_a_pong_without_a_clock_leaves_the_clock_unmeasured(pong: dict[str, object]) -> None:
    """The race clock's offset is measured with ``ping`` as the window enters: a pong
    whose ``now_ms`` was missing or not a number ended the app with a traceback (a
    KeyError, a ValueError out of the network worker) before the lobby was shown. The
    clock is left as the snapshot set it, and the race goes on."""
    async with fake_server(FakeRace(pong=pong)) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await _race_and_resign(pilot)
            await wait_for_text(pilot, "✔ verified: the deal was committed")
            assert abs(app.server_now() - app.local_ms()) < 60_000
            await quit_app(pilot)


@pytest.mark.parametrize("field", ["start_at_ms", "ends_at_ms"])
async def test_a_race_time_that_is_not_a_number_leaves_the_clock_blank(field: str) -> None:
    """A ``started`` whose start or time limit was not a number (``"soon"``) ended the
    app with a TypeError traceback from the race screen's clock: the time is not kept,
    and the clock shows what it can."""
    started: dict[str, object] = {"start_at_ms": 1, "ends_at_ms": 2, "commitment": "c"}
    started[field] = "soon"
    # Version 6: after the fake's snapshot (2), ready_changed, countdown and started.
    frame = encode(Envelope("started", v=6, d=started))
    async with fake_server(FakeRace(after_start=[frame])) as url:
        app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            await pilot.press("space")
            await wait_until(pilot, lambda: app.state.version == 6, "the second started")
            app._tick()
            await pilot.pause(0.3)
            assert getattr(app.state, field) is None
            assert "moves 0" in app.screen_text()
            await quit_app(pilot, "Quit the race?")
    assert app.return_code == 0


#: The bent values a race_over can carry to the screen (bytes and a number past 64
#: bits are not sent or not read: the connection closes, which the tests of
#: tests/client/test_bot_hostile.py cover).
_SHOWN = [value for value in _BENT if not isinstance(value, bytes) and value != 2**70]


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(path=st.sampled_from(_RESULT_FIELDS), value=st.sampled_from(_SHOWN))
@example(path=("standings", 0, "moves"), value=[1, 2])  # the clock audit's
def test_the_race_over_screen_shows_a_bent_race_over_never_a_traceback(
    path: tuple[Any, ...], value: object
) -> None:
    """A race_over with one field of the wrong type or missing (the property of
    tests/client/test_hostile_frames.py, on the whole window): the race-over screen
    shows it, with verify's verdict, q quits, and nothing ends the window with a
    traceback (a standing's moves sent as a list did, from the screen's format spec)."""

    async def run() -> int | None:
        async with fake_server(FakeRace(tamper=_bend(path, value))) as url:
            app = SolraceApp(url, action="join", name="Me", params={"code": "FAKE01"}, save=False)
            async with app.run_test(size=(80, 24)) as pilot:
                await _race_and_resign(pilot)
                await wait_until(pilot, lambda: isinstance(app.screen, StandingsScreen), "over")
                await wait_until(pilot, lambda: app.verdict is not None, "the verdict")
                await pilot.pause(0.1)  # painted
                assert "Race over" in app.screen_text()
                await quit_app(pilot)
        return app.return_code

    assert asyncio.run(run()) == 0
