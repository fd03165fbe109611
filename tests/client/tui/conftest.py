"""Fixtures for the terminal client's tests: the real server cluster of tests/net, an
isolated config directory, a stand-in for the results module, and pilot helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from solrace.protocol.limits import START_WAIT_S
from solrace.race.fairness import round_seed
from solrace.rules import deal, view
from solrace_client import RaceClient
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.widgets import LobbyScreen, PlayScreen
from textual.pilot import Pilot

from tests.net.conftest import SOLVABLE_SECRET

#: The deal every pilot test plays: round 1 of the cluster's fixed room secret.
SEED = round_seed(SOLVABLE_SECRET, 1)


def first_view(variant: str = "yukon") -> dict[str, Any]:
    return view(deal(variant, SEED), owner=True)


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every test saves its race token and profile in its own directory."""
    path = tmp_path / "config"
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", str(path))
    return path


async def wait_until(
    pilot: Pilot[Any], predicate: Callable[[], Any], what: str, timeout: float = 10.0
) -> None:
    app = pilot.app
    assert isinstance(app, SolraceApp)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(
                f"timed out waiting for {what}\n--- screen ---\n{app.screen_text()}\n"
                f"--- status log ---\n{app.status_log}"
            )
        await pilot.pause(0.02)


async def wait_for_text(pilot: Pilot[Any], text: str, timeout: float = 10.0) -> str:
    app = pilot.app
    assert isinstance(app, SolraceApp)
    await wait_until(pilot, lambda: text in app.screen_text(), repr(text), timeout)
    return app.screen_text()


def keys_for(move: str) -> list[str]:
    """The keys that play ``c:k>d`` or ``c>F`` with the cursor: the column's number key
    puts the cursor on its top card, ``k`` climbs one card, Enter picks, the
    destination's number key drops (``f`` sends to the foundation)."""
    if move.endswith(">F"):
        return [column_key(int(move[:-2]) - 1), "f"]
    src, rest = move.split(":")
    count, dst = rest.split(">")
    climb = ["k"] * (int(count) - 1)
    return [column_key(int(src) - 1), *climb, "enter", column_key(int(dst) - 1)]


def column_key(column: int) -> str:
    return str((column + 1) % 10)


async def lobby_code(pilot: Pilot[Any], app: SolraceApp) -> str:
    """Wait for the lobby: the room's code, which it must have."""
    await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
    code = app.state.code
    assert code
    return code


async def dealt(pilot: Pilot[Any], app: SolraceApp) -> None:
    """Wait for the race screen with the deal on it: as long as a ``start`` may wait
    for its round's certified deal (START_WAIT_S), and a little more. A Russian lobby
    tries some sixteen candidates (94 % of its deals are lost), on solver workers that
    yield to everything else: at load 13 its deal took more than the 10 s waited."""
    await wait_until(
        pilot,
        lambda: isinstance(app.screen, PlayScreen) and app.controller.view is not None,
        "the deal",
        START_WAIT_S + 5,
    )


async def readied_by_space(pilot: Pilot[Any], app: SolraceApp, host: RaceClient) -> None:
    """The lobby as a joiner: space toggles the app's racer ready, the host sees it
    and starts; the deal is on the race screen."""
    await wait_for_text(pilot, "You are not ready")
    await pilot.press("space")
    await host.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"])
    await wait_for_text(pilot, "You are ready")
    await host.start()
    await dealt(pilot, app)


async def quit_app(pilot: Pilot[Any], confirm: str | None = None) -> None:
    """``q``, then ``y`` to the question ``confirm`` where the app asks one: the app
    has exited."""
    await pilot.press("q")
    if confirm is not None:
        await wait_for_text(pilot, confirm)
        await pilot.press("y")
    await wait_until(pilot, lambda: pilot.app.return_code is not None, "exit")


async def racing(pilot: Pilot[Any], app: SolraceApp, server_url: str) -> tuple[RaceClient, str]:
    """Bob joins the app's room and readies; the app (host) starts: the race is on.
    Returns Bob and the lobby's screen text, as it was just before the start."""
    await wait_until(pilot, lambda: isinstance(app.screen, LobbyScreen), "the lobby")
    bob = await RaceClient.connect(server_url)
    await bob.join(app.state.code or "", "Bob")
    await bob.ready()
    lobby = await wait_for_text(pilot, "Everyone is ready")
    await pilot.press("s")
    await dealt(pilot, app)
    await pilot.pause(0.2)
    return bob, lobby
