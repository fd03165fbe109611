"""A race window left open for hours: what the app keeps must not grow with every
move and every round it is told of (a long-session audit)."""

from __future__ import annotations

import pytest
from solrace_client import RaceClient
from solrace_client.boardview import board_from_view
from solrace_client.tui.app import STATUS_LOG_KEPT, SolraceApp
from solrace_client.tui.widgets import LobbyScreen, PlayScreen, StandingsScreen

from tests.net.conftest import Cluster

from .conftest import dealt, wait_until

#: Moves the player plays: a move and its undo (``u``), this many times: more
#: lines than a window keeps (STATUS_LOG_KEPT).
PAIRS = 60


@pytest.mark.parametrize("cluster", ["embedded"], indirect=True)  # the UI's doing alone
async def test_a_race_window_keeps_no_line_for_every_move_it_confirmed(cluster: Cluster) -> None:
    """``SolraceApp.status_log`` keeps every status line shown, "oldest first": one
    for each move confirmed (``3:1>4 ✓``), each rival's news, some ten for each round
    (countdown, go, resigned, race over, rematch, deal, ready), for as long as the
    window is open; no document bounds it. Measured: 203 lines after 200 moves; a
    watch window on a room that rematches gains ten a round (22 after round 2, 122
    after round 12). A window that races or watches for hours holds every line it
    ever showed. It may keep fewer lines than the moves played since the first."""
    assert 2 * PAIRS > STATUS_LOG_KEPT  # else a log kept whole would pass
    server = await cluster.node(countdown_ms=50)
    app = SolraceApp(server.url, mode="race", action="create", name="Ann", params={"private": True})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
        bob = await RaceClient.connect(server.url)
        await bob.join(app.state.code or "", "Bob")
        await bob.ready()
        await wait_until(pilot, lambda: bob.racer in app.state.racers, "Bob")
        await wait_until(pilot, lambda: app.state.racers[bob.racer].get("ready"), "Bob ready")
        await pilot.press("s")
        await dealt(pilot, app)
        before = len(app.status_log)
        board = board_from_view(app.state.my_board)
        move = str(next(m for m in board.legal_moves() if m.kind != "draw"))
        screen = app.screen
        assert isinstance(screen, PlayScreen)
        for i in range(PAIRS):  # as its keys play them (the binding's action: "u" undoes)
            screen.action_play(move)
            screen.action_play("undo")
            await wait_until(pilot, lambda i=i: app.state.next_seq == 2 * i + 2, f"pair {i}")
        await wait_until(pilot, lambda: app.status_log[-1] == "undo ✓", "the last undo")
        assert isinstance(app.screen, PlayScreen)
        await bob.resign()
        await pilot.press("x")
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, StandingsScreen), "standings")
        grown = len(app.status_log) - before
        assert grown < 2 * PAIRS, f"{grown} status lines kept for {2 * PAIRS} moves"
        await bob.close()
