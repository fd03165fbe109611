"""A racer far from the server (docs/fairness.md, "Latency"): through a link of 150 ms
round trip, the race screen shows a move that turns up no card at once and sends the
next without waiting for the reply (pipelined, docs/protocol.md §11); a move that turns
a card up shows the card only once the server's reply names it; a refusal undoes every
move shown ahead of it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from solrace.rules import Board, deal, view
from solrace.rules.log import apply_entry
from solrace.store.errors import StoreUnavailable
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.render import card_label
from textual.pilot import Pilot

from tests.net.conftest import Cluster
from tests.support.faults import StoreFaults
from tests.support.flaky_link import FlakyLink
from tests.support.race import check_no_leaks

from .conftest import SEED, racing, wait_until

#: The round trip of the link between the app and the server (a friend a continent
#: away: docs/fairness.md measures 50, 150 and 300 ms).
RTT_S = 0.150
#: Moves in a row that turn up no card.
QUIET_MOVES = 6
#: The round trip of the pipelining test: long enough that the test's own pace on a
#: loaded machine (about 0.1 s a move under CI's parallel load) stays well inside it,
#: so that a move is sent while the one before it still waits for its reply.
PIPELINE_RTT_S = 0.400


def _reveals(board: Board, move: str) -> bool:
    after = board.copy()
    apply_entry(after, move)
    return after.face_down_count() < board.face_down_count()


def quiet_line(count: int) -> list[str]:
    """``count`` moves from the test deal's start, none of which turns up a card (the
    first legal one each time, back and forth where it must)."""
    board = deal("yukon", SEED)
    line: list[str] = []

    def walk(depth: int) -> bool:
        if depth == count:
            return True
        for move in map(str, board.legal_moves()):
            if _reveals(board, move):
                continue
            apply_entry(board, move)
            line.append(move)
            if walk(depth + 1):
                return True
            board.undo()
            line.pop()
        return False

    assert walk(0), "the test deal has no such line"
    return line


def views_of(line: list[str]) -> list[dict[str, Any]]:
    """The owner's board before the line and after each of its moves."""
    board = deal("yukon", SEED)
    views = [view(board, owner=True)]
    for move in line:
        apply_entry(board, move)
        views.append(view(board, owner=True))
    return views


def server_port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


async def far_app(link: FlakyLink) -> SolraceApp:
    link.latency_s = RTT_S / 2  # each way
    return SolraceApp(
        link.url, action="create", name="Ann", params={"variant": "yukon"}, save=False
    )


async def shown_until(
    pilot: Pilot[Any], app: SolraceApp, done: Callable[[], bool], seen: list[dict[str, Any]]
) -> None:
    """Wait for ``done``, keeping every board the race screen shows meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not done():
        if app.controller.view is not None and app.controller.view not in seen:
            seen.append(dict(app.controller.view))
        assert loop.time() < deadline, app.status_log
        await pilot.pause(0.005)
    if app.controller.view is not None and app.controller.view not in seen:
        seen.append(dict(app.controller.view))


async def test_moves_that_turn_up_no_card_take_one_round_trip_not_one_each(
    cluster: Cluster, clients_keep_every_frame: None
) -> None:
    """Each move is played once its board is on the screen, as a player does. Before,
    the screen waited for every move's reply: 6 moves took 6 round trips; now each is
    shown and sent while the replies to the ones before are on their way, and every
    board shown is a real position of the racer's game. Counted, not timed (a bound of
    half the round trips met the test's own pace under CI's load: 0.62 s against 0.45
    s): how many moves were in flight at once — one, had each waited for its reply.
    docs/tools/latency.py measures what it saves (docs/fairness.md, "Latency")."""
    server = await cluster.node()
    line = quiet_line(QUIET_MOVES)
    views = views_of(line)
    async with FlakyLink(server_port(server.url), seed=1) as link:
        app = await far_app(link)
        link.latency_s = PIPELINE_RTT_S / 2
        async with app.run_test(size=(80, 24)) as pilot:
            bob, _ = await racing(pilot, app, server.url)
            assert app.controller.view == views[0]
            seen: list[dict[str, Any]] = []
            most = 0
            for k, move in enumerate(line):
                app.send_move(move)
                await shown_until(pilot, app, lambda k=k: app.controller.view == views[k + 1], seen)
                most = max(most, len(app.in_flight.live()))
            await shown_until(pilot, app, lambda: app.state.next_seq == QUIET_MOVES, seen)
            assert most >= 2, f"at most {most} move in flight: each waited for its reply"
            assert app.controller.view == app.state.my_board == views[-1]
            assert all(board in views for board in seen)  # no guessed board, ever
            assert app.status_log[-1] == f"{line[-1]} ✓"
            # Pipelined moves get no frame with a card the racer has not turned up.
            await bob.resign()
            assert app.client is not None
            frames = app.client.received
            app.ask_resign()
            await pilot.press("y")
            await wait_until(pilot, lambda: app.state.phase == "finished", "the race's end")
            over = next(f for f in frames if f.t == "race_over").d
            settings = (app.client.snapshot or {})["settings"]
            assert check_no_leaks(frames, over, settings, app.state.me) >= QUIET_MOVES
            await bob.close()


async def test_a_card_turned_up_shows_only_once_the_server_names_it(cluster: Cluster) -> None:
    server = await cluster.node()
    board = deal("yukon", SEED)
    move = next(str(m) for m in board.legal_moves() if _reveals(board, str(m)))
    views = views_of([move])
    up = {name for column in views[0]["tableau"] for name in column["up"]}
    turned = next(name for column in views[1]["tableau"] for name in column["up"] if name not in up)
    async with FlakyLink(server_port(server.url), seed=1) as link:
        app = await far_app(link)
        async with app.run_test(size=(80, 24)) as pilot:
            bob, _ = await racing(pilot, app, server.url)
            assert card_label(turned) not in app.screen_text()
            app.send_move(move)
            seen: list[dict[str, Any]] = []
            screens: list[str] = []

            def confirmed() -> bool:
                screens.append(app.screen_text())
                return app.state.next_seq == 1

            await shown_until(pilot, app, confirmed, seen)
            await wait_until(pilot, lambda: app.controller.view == views[1], "the card")
            # Until the reply, the board the move was played on, and no sign of the card.
            assert seen[0] == views[0] and len(screens) > 5
            assert not any(card_label(turned) in screen for screen in screens[:-2])
            assert card_label(turned) in app.screen_text()
            await bob.close()


async def test_a_refused_move_undoes_the_moves_shown_ahead_of_it(cluster: Cluster) -> None:
    """The store fails as the second of three pipelined moves is stored: it is refused
    (``unavailable``), the third after it too (its seq is no longer the next). The screen
    goes back to the server's board after the first, says why once (after asking the
    server's board: the outcome of an ``unavailable`` move is unknown), and plays on."""
    server = await cluster.node()
    line = quiet_line(3)
    views = views_of(line)
    faults = StoreFaults(server.node.store)

    async def refuse(append: Callable[[], Any]) -> Any:
        raise StoreUnavailable("injected: Redis is down")

    async def first(append: Callable[[], Any]) -> Any:
        faults.on_append_move(refuse)
        return await append()

    async with FlakyLink(server_port(server.url), seed=1) as link:
        app = await far_app(link)
        async with app.run_test(size=(80, 24)) as pilot:
            bob, _ = await racing(pilot, app, server.url)
            faults.on_append_move(first, log="1:1")
            for k, move in enumerate(line):
                app.send_move(move)
                await wait_until(pilot, lambda k=k: app.controller.view == views[k + 1], "shown")
            await wait_until(pilot, lambda: not app.in_flight.sent, "every reply")
            # Its outcome unknown, the server's board is asked for (a round trip) first.
            await wait_until(pilot, lambda: "not played" in app.status_log[-1], "the refusal")
            assert app.state.next_seq == 1
            assert app.controller.view == app.state.my_board == views[1]
            refusals = [line for line in app.status_log if "unavailable" in line or "retry" in line]
            assert len(refusals) == 1, app.status_log
            assert not any("seq" in line for line in app.status_log)
            app.send_move(line[1])  # and the race goes on from the server's board
            await wait_until(pilot, lambda: app.state.next_seq == 2, "the move again")
            assert app.controller.view == views[2]
            await bob.close()
