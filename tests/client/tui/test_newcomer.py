"""What a new player trips over in the terminal UI (issue 11): at 80×24 every variant's
board and the lobby fit without wrapping or cutting, the help hides what is under it;
the words say what happens; q after "press q" and for a spectator just quits; moves
typed while reconnecting are refused visibly, never lost silently."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from solrace.rules import VARIANTS
from solrace_client import RaceClient, config, errors
from solrace_client.tui import app as app_module
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.controller import Controller
from solrace_client.tui.render import (
    SUIT_SYMBOL,
    option_words,
    render_progress,
    render_watch,
    settings_words,
)
from solrace_client.tui.widgets import HELP, ConfirmScreen, LobbyScreen

from tests.net.conftest import SOLVABLE_SECRET, Cluster
from tests.support import terminal
from tests.support.race import winning_moves

from .conftest import keys_for, racing, wait_for_text, wait_until

MOVES = winning_moves(SOLVABLE_SECRET)
SIZE = (80, 24)


# ------------------------------------------------------------------ layout
@pytest.mark.parametrize("variant", sorted(VARIANTS))
async def test_every_variant_board_and_lobby_fit_80x24(cluster: Cluster, variant: str) -> None:
    server = await cluster.node()
    options = {"draw": 3} if variant == "klondike" else {}  # the widest top row
    app = SolraceApp(
        server.url, action="create", name="Ann", params={"variant": variant, "options": options}
    )
    async with app.run_test(size=SIZE) as pilot:
        bob, lobby = await racing(pilot, app, server.url)
        flat = " ".join(lobby.split())
        for part in settings_words(app.state.settings) + option_words(
            app.state.settings["options"]
        ):
            assert part in flat, f"{part!r} is cut from the lobby:\n{lobby}"
        assert all(len(row) <= SIZE[0] for row in lobby.split("\n"))

        screen = app.screen_text()
        rows = [row.split("│")[0] for row in screen.split("\n")]  # the board's side
        top, numbers = rows[2], rows[3]
        for symbol in SUIT_SYMBOL.values():
            assert symbol in top, f"a foundation wrapped off the top row:\n{screen}"
        assert numbers.split()[:2] == ["1", "2"], f"the top row wrapped:\n{screen}"
        board = app.screen.query_one("#board")
        painted = app.paint_board(board.content_size.width, board.content_size.height)
        assert max(line.cell_len for line in painted.split("\n")) <= board.content_size.width

        await pilot.press("question_mark")
        helped = await wait_for_text(pilot, "Keys")  # a pause of 0.2 s: at load 10, not yet
        assert "Racers" not in helped and "/52" not in helped
        assert "the top 4 cards of column 3 onto column 6" in helped  # the notation
        await bob.close()


def test_one_move_is_one_move() -> None:
    racers = [{"racer": 1, "name": "Ann", "status": "playing", "moves": 1, "foundation": 0}]
    line = render_progress(racers, 52, 1, 40).plain.split("\n")[0]
    assert "1 move " in line and "1 moves" not in line


# ------------------------------------------------------------------- words
def test_putting_cards_back_is_not_called_dropping() -> None:
    from solrace.rules import deal, view

    controller = Controller(view(deal("yukon", 7), owner=True))
    messages = []
    for column in range(7):
        controller.cancel()
        messages.append(controller.number(column).message or "")
        messages.append(controller.activate().message or "")
    stuck = [m for m in messages if "cannot go anywhere" in m]
    assert stuck and all("Esc puts it back" in m for m in stuck)
    assert not any("drop" in m for m in messages)


def test_a_watched_board_says_how_many_cards_it_shows_not_the_live_count() -> None:
    from solrace.rules import deal, view

    board = view(deal("yukon", 7), owner=True)
    board["foundations"] = {"C": 2, "D": 0, "H": 1, "S": 0}
    live = [{"racer": 1, "name": "Ann", "status": "playing", "foundation": 9}]
    text = render_watch(live, {1: (1000, board)}, 80, 24, now_ms=31_000).plain
    assert "3/52" in text.split("\n")[1] and "9/52" not in text.split("\n")[1]


async def test_a_spectator_quits_with_q_without_being_asked(cluster: Cluster) -> None:
    server = await cluster.node()
    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann")
    app = SolraceApp(server.url, mode="watch", code=ann.code)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_text(pilot, "boards live")
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code is not None, "the exit")
        assert not isinstance(app.screen, ConfirmScreen)
    assert app.return_code == 0
    await ann.close()


async def test_after_press_q_q_quits_without_asking(cluster: Cluster) -> None:
    server = await cluster.node()
    app = SolraceApp(server.url, action="create", name="Ann", params={"variant": "yukon"})
    async with app.run_test(size=SIZE) as pilot:
        bob, _ = await racing(pilot, app, server.url)
        assert app.client is not None and app.client.token
        other = await RaceClient.connect(server.url)
        await other.resume(app.state.room, app.client.token, since=None)  # another window
        await wait_for_text(pilot, "press q")
        assert "Quit the race" not in app.screen_text()
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code is not None, "the exit")
        assert not any(
            "Leaving forfeits" in str(getattr(s, "question", "")) for s in app.screen_stack
        )
        await other.close()
        await bob.close()


# ------------------------------------------------------ moves while offline
async def test_moves_typed_while_reconnecting_are_refused_visibly(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await cluster.node()
    app = SolraceApp(server.url, action="create", name="Ann", params={"variant": "yukon"})
    down = True
    connect = RaceClient.connect

    async def flaky_connect(url: str, **kwargs: Any) -> RaceClient:
        if down:
            raise ConnectionRefusedError(111, "Connection refused")
        return await connect(url, **kwargs)

    async with app.run_test(size=SIZE) as pilot:
        bob, _ = await racing(pilot, app, server.url)
        monkeypatch.setattr(app_module.RaceClient, "connect", flaky_connect)
        assert app.client is not None
        await app.client.ws.close()  # the network goes down
        await wait_until(pilot, lambda: not app.online, "offline")
        await pilot.press(*keys_for(MOVES[0]))
        await wait_until(
            pilot,
            lambda: any(f"{MOVES[0]} not sent" in line for line in app.status_log),
            "the refusal",
        )
        said = len(app.status_log)
        await wait_until(
            pilot,
            lambda: any("reconnecting" in line for line in app.status_log[said:]),
            "a later attempt",
            20,
        )
        attempts = [line for line in app.status_log[said:] if "reconnecting" in line]
        assert all(f"not sent: {MOVES[0]}" in line for line in attempts)  # every attempt
        down = False
        await wait_until(
            pilot, lambda: app.status_log[-1].startswith("reconnected"), "the reconnection", 20
        )
        assert f"not sent while offline: {MOVES[0]} — play again" in app.status_log[-1]
        assert (app.state.you or {}).get("next_seq") == 0  # nothing was played behind
        await bob.close()


# ------------------------------------------------------- entry before the screen
async def _until_exit(argv: list[str]) -> tuple[int, str]:
    """Run ``solrace`` on a terminal to its end: its status and all it wrote there."""
    code, shown, _ = await terminal.run(argv, errors_apart=False)
    assert terminal.ALTERNATE_SCREEN not in shown, "the screen opened before the entry failed"
    return code, shown.decode(errors="replace")


async def test_an_unknown_code_is_one_line_without_opening_the_screen(cluster: Cluster) -> None:
    """``solrace join CODE`` (and ``watch``) with a code no room has used to open the
    full screen and close it again before saying why; now the room is entered first."""
    server = await cluster.node()
    for command, words in (
        (["join", "NOSUCH", "--name", "Bob"], errors.ENTRY_WORDS["join", "unknown_room"]),
        (["watch", "NOSUCH"], errors.ENTRY_WORDS["watch", "unknown_room"]),
    ):
        code, text = await _until_exit([*command, "--server", server.url])
        lines = [line for line in text.splitlines() if line.strip()]
        assert code == 2, text
        assert lines == [f"solrace: {words}"], text


async def test_an_unreachable_server_is_one_line_without_opening_the_screen() -> None:
    argv = ["join", "ABC123", "--name", "Bob", "--server", "ws://127.0.0.1:9"]
    code, text = await _until_exit(argv)
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2, text
    assert len(lines) == 1 and lines[0].startswith("solrace: cannot reach ws://127.0.0.1:9")


async def test_a_dumb_terminal_is_told_in_one_line_without_the_screen() -> None:
    """``TERM=dumb`` (Emacs' ``M-x shell``, some IDEs' run consoles) cannot move its
    cursor: the full screen was written there all the same, a stream of escape
    sequences, with no word. Now one line says why, status 2, and nothing is drawn."""
    for command, what in (
        (["create", "--name", "Ann"], "race screen"),
        (["watch", "ABC123"], "watch screen"),
    ):
        argv = [*command, "--server", "ws://127.0.0.1:9"]
        code, shown, err = await terminal.run(argv, env={"TERM": "dumb"})
        assert code == 2 and b"\x1b" not in shown, shown
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"solrace: the {what} needs a terminal that can draw a full screen (TERM=dumb"
        ), err


async def test_a_room_entered_first_still_gets_the_screen(cluster: Cluster) -> None:
    """The other side of the change: once the room is entered, the UI takes the screen."""
    server = await cluster.node()
    argv = ["create", "--name", "Ann", "--server", server.url]
    proc, master = await terminal.spawn(argv, errors_apart=False)
    out = bytearray()
    try:
        while terminal.ALTERNATE_SCREEN not in out:
            chunk = await terminal.read(master)
            assert chunk, out.decode(errors="replace")
            out += chunk
        assert b"solrace:" not in out  # no failure, and no "connecting" on a quick entry
    finally:
        proc.kill()
        await proc.wait()
        os.close(master)


async def _screen_shown_then_quit(proc: asyncio.subprocess.Process, master: int) -> None:
    """Read the terminal (the screen repaints: a terminal nobody reads blocks it) until
    the race screen is drawn on it, then quit with q, y: the program ends with 0."""
    out = bytearray()

    async def drain() -> None:
        while chunk := await terminal.read(master):
            out.extend(chunk)

    reading = asyncio.create_task(drain())
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while terminal.ALTERNATE_SCREEN not in out or b"Room code" not in out:
            if asyncio.get_running_loop().time() > deadline or reading.done():
                raise AssertionError(f"no screen on the terminal: {bytes(out)[-500:]!r}")
            await asyncio.sleep(0.05)
        for key in (b"q", b"y"):
            await asyncio.sleep(0.5)
            os.write(master, key)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(master)
        await asyncio.wait_for(reading, 10)


async def test_the_screen_is_on_the_terminal_with_standard_error_redirected(
    cluster: Cluster,
) -> None:
    """``solrace create 2>errors.log``: Textual draws on standard error, so the whole
    screen went into the file and the terminal stayed blank for the race."""
    server = await cluster.node()
    argv = ["create", "--name", "Ann", "--server", server.url]
    proc, master = await terminal.spawn(argv, errors_apart=True)  # stderr: a pipe
    assert proc.stderr is not None
    errors = asyncio.create_task(proc.stderr.read())  # the "file": never full
    try:
        await _screen_shown_then_quit(proc, master)
        assert await asyncio.wait_for(errors, 10) == b""  # nothing went to the file
    finally:
        errors.cancel()


async def test_the_screen_is_on_the_terminal_with_standard_error_closed(
    cluster: Cluster,
) -> None:
    """``solrace create 2>&-``: the terminal stayed blank and no key did anything (the
    connection's socket took file descriptor 2, and the screen meant for standard error
    went to the server); q, y ended it only by luck. Standard error closed is now the
    null device, and the screen is drawn on the terminal as with ``2>errors.log``."""
    server = await cluster.node()
    argv = ["create", "--name", "Ann", "--server", server.url]
    proc, master = await terminal.spawn(argv, errors_apart=False, errors_closed=True)
    await _screen_shown_then_quit(proc, master)


async def test_q_ctrl_c_and_ctrl_q_ask_and_twice_quits(cluster: Cluster) -> None:
    """Textual's own Ctrl-C only said "press ctrl+q", and its Ctrl-Q quit at once, past
    the question that q asks before a player loses a seat or forfeits a race; and q
    while asked answered "no" (docs/tui.md: the same key again while asked quits)."""
    server = await cluster.node()

    async def quit_with(key: str) -> int | None:
        app = SolraceApp(server.url, action="create", name="Ann", params={"variant": "yukon"})
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
            await pilot.press(key)
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
            assert app.return_code is None  # asked, not gone
            await pilot.press(key)
            await wait_until(pilot, lambda: app.return_code is not None, "the exit")
        return app.return_code

    for key in ("q", "ctrl+c", "ctrl+q"):
        assert await quit_with(key) == 0


# ------------------------------------------- two windows on one computer
async def test_two_windows_on_one_computer_keep_their_own_tokens(cluster: Cluster) -> None:
    """The README races Ann and Bob in two terminals of one computer: one config
    directory. Both windows wrote one race.json, each over the other at every phase
    change, so ``solrace resume`` after Ann's window crashed could rejoin as Bob (and
    throw Bob's own window out); and the first to quit deleted the other's token."""
    server = await cluster.node()
    ann = SolraceApp(server.url, action="create", name="Ann", params={"variant": "yukon"})
    async with ann.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(ann.screen, LobbyScreen), "Ann's lobby")
        bob = SolraceApp(server.url, action="join", name="Bob", params={"code": ann.state.code})
        async with bob.run_test(size=SIZE) as bob_pilot:
            await wait_until(bob_pilot, lambda: isinstance(bob.screen, LobbyScreen), "Bob's lobby")
            await wait_for_text(pilot, "Bob")
            saved = {race.name: race.token for race in config.saved_races()}
            assert ann.session.token and bob.session.token
            assert saved == {"Ann": ann.session.token, "Bob": bob.session.token}
            await bob_pilot.press("q")
            await wait_until(bob_pilot, lambda: isinstance(bob.screen, ConfirmScreen), "asked")
            await bob_pilot.press("y")
            await wait_until(bob_pilot, lambda: bob.return_code is not None, "Bob's exit")
        left = config.load_race()
        assert left is not None and left.token == ann.session.token  # Ann's is kept


async def test_the_quick_lobby_says_its_whole_sentence(cluster: Cluster) -> None:
    """The status line of a quick lobby ended "it starts once everyone is"."""
    server = await cluster.node()
    app = SolraceApp(server.url, action="quick", name="Ann", params={"variant": "yukon"})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
        await wait_until(pilot, lambda: app.status_log, "the welcome")
        assert app.status_log[0] == (
            "quick race: press space when ready; it starts once everyone is ready"
        )


async def test_x_asks_before_resigning_as_the_keys_say(cluster: Cluster) -> None:
    """A newcomer audit: x opens "Resign? You stay in the standings." (y/n), but the
    help and docs/tui.md's table read only "resign (you stay in the standings)" — a
    player who pressed x and then a move key saw the board ignore every key, under a
    question, while q's row says "asks first"."""
    server = await cluster.node()
    app = SolraceApp(server.url, action="create", name="Ann", params={"variant": "yukon"})
    async with app.run_test(size=SIZE) as pilot:
        bob, _ = await racing(pilot, app, server.url)
        await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        await pilot.press("n")
        await bob.close()
    assert "asks first" in dict(HELP["play"])["x"]
    table = (Path(__file__).parents[3] / "docs" / "tui.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| x |"))
    assert "asks first" in row, row
