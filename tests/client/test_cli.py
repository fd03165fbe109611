"""The ``solrace`` command line: ``rooms`` against a real server, the hand-over to the
UI (with a stand-in UI module), ``resume`` from the saved race, names remembered, and
``races``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import solrace_client
from solrace.rules.cli import EXIT_READER_GONE
from solrace.rules.cli import parse_option as _option
from solrace_client import RaceClient, config
from solrace_client.cli import _duration, build_parser, main

from tests.net.conftest import Cluster


async def _run(argv: list[str]) -> int:
    """``main`` in a worker thread: it runs its own event loop, like the console script."""
    return await asyncio.wait_for(asyncio.to_thread(main, argv), 20)


async def test_rooms_lists_public_rooms_with_their_settings(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await cluster.node()
    ann, bob, cy = [await RaceClient.connect(server.url) for _ in range(3)]
    await ann.create("klondike", "Ann", options={"draw": 3}, time_limit_s=600, spectator_delay_s=30)
    await bob.create("yukon", "Bob", max_racers=2)
    await cy.create("yukon", "Cy", private=True)
    assert ann.code and bob.code and cy.code
    monkeypatch.setenv("SOLRACE_SERVER", server.url)  # the environment names the server
    assert await _run(["rooms"]) == 0
    out = capsys.readouterr().out
    assert ann.code in out and bob.code in out and cy.code not in out
    row = next(line for line in out.splitlines() if ann.code in line)
    assert "klondike draw=3" in row and "lobby" in row and "1/4" in row
    assert "Ann" in row and "10m" in row and "30s" in row
    assert "auto_flip" not in out  # default options are not listed
    assert await _run(["rooms", "--variant", "yukon", "--server", server.url]) == 0
    out = capsys.readouterr().out
    assert bob.code in out and ann.code not in out and "1/2" in out
    for client in (ann, bob, cy):
        await client.close()


async def test_rooms_says_when_there_are_none(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    server = await cluster.node()
    assert await _run(["--server", server.url, "rooms"]) == 0
    out = capsys.readouterr().out
    assert "no open rooms" in out
    # the command to copy stays on one line, whatever the width (it was cut at 80)
    assert out.rstrip("\n").endswith("; start one with: solrace create --variant yukon")
    assert out.count("\n") == 1


def test_rooms_without_a_server_fails_with_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rooms", "--server", "ws://127.0.0.1:9"]) == 2
    assert "cannot reach ws://127.0.0.1:9" in capsys.readouterr().err


# ------------------------------------------------------------ the UI hand-over
class FakeUI:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def run_race(self, server: str, action: str, name: str, **params: object) -> int:
        self.calls.append(("race", (server, action, name), params))
        return 0

    def run_watch(self, server: str, code: str) -> int:
        self.calls.append(("watch", (server, code), {}))
        return 3


@pytest.fixture
def ui(monkeypatch: pytest.MonkeyPatch) -> FakeUI:
    fake = FakeUI()
    module = types.ModuleType("solrace_client.tui")
    module.run_race = fake.run_race  # type: ignore[attr-defined]
    module.run_watch = fake.run_watch  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "solrace_client.tui", module)
    monkeypatch.setattr(solrace_client, "tui", module, raising=False)
    return fake


def test_create_hands_the_settings_to_the_ui(ui: FakeUI) -> None:
    argv = ["create", "--variant", "klondike", "--racers", "3", "--option", "draw=3"]
    argv += ["--option", "scoring=vegas", "--private", "--time-limit", "10m"]
    argv += ["--spectator-delay", "30", "--name", "Ann", "--server", "ws://h:1"]
    assert main(argv) == 0
    assert ui.calls == [
        (
            "race",
            ("ws://h:1", "create", "Ann"),
            {
                "variant": "klondike",
                "options": {"draw": 3, "scoring": "vegas"},
                "max_racers": 3,
                "time_limit_s": 600,
                "private": True,
                "spectator_delay_s": 30,
            },
        )
    ]
    assert config.default_name() == "Ann"  # remembered


def test_create_asks_for_deals_and_a_difficulty_only_when_told(
    ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["create", "--variant", "australian", "--name", "Ann", "--server", "ws://h:1"]
    assert main(base) == 0  # the server's default for the variant applies
    assert main([*base, "--deals", "winnable", "--difficulty", "hard"]) == 0
    assert [call[2] for call in ui.calls] == [
        {"variant": "australian", "options": {}},
        {"variant": "australian", "options": {}, "deals": "winnable", "difficulty": "hard"},
    ]
    with pytest.raises(SystemExit) as exited:
        main([*base, "--deals", "rigged"])
    assert exited.value.code == 2
    assert "invalid choice: 'rigged'" in capsys.readouterr().err


def test_join_quick_and_watch_hand_over(ui: FakeUI, monkeypatch: pytest.MonkeyPatch) -> None:
    config.save_name("Bob")
    monkeypatch.setenv("SOLRACE_SERVER", "ws://env:2")
    assert main(["join", "k7qx2m"]) == 0
    assert main(["quick", "--variant", "russian", "--name", "Cy"]) == 0
    assert main(["watch", "K7QX2M"]) == 3  # the UI's exit status is the command's
    assert ui.calls == [
        ("race", ("ws://env:2", "join", "Bob"), {"code": "K7QX2M"}),  # normalised
        ("race", ("ws://env:2", "quick", "Cy"), {"variant": "russian"}),
        ("watch", ("ws://env:2", "K7QX2M"), {}),
    ]


def test_resume_rejoins_the_saved_race(ui: FakeUI, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resume"]) == 2
    assert "no race to resume" in capsys.readouterr().err
    token = "t" * 32
    config.save_race(config.SavedRace("ws://saved:3", "r_1", "ABC123", 2, token, "Dee", 7))
    assert main(["resume"]) == 0
    assert main(["resume", "--server", "ws://other:4"]) == 0
    assert ui.calls == [
        ("race", ("ws://saved:3", "resume", "Dee"), {"room": "r_1", "token": token}),
        ("race", ("ws://other:4", "resume", "Dee"), {"room": "r_1", "token": token}),
    ]


def test_a_broken_ui_does_not_break_the_other_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], synthetic_race: Path
) -> None:
    monkeypatch.setitem(sys.modules, "solrace_client.tui", None)  # import fails
    monkeypatch.delattr(solrace_client, "tui", raising=False)
    assert main(["join", "ABC123"]) == 2
    assert "terminal UI cannot start" in capsys.readouterr().err
    assert main(["verify", str(synthetic_race)]) == 0
    assert main(["races"]) == 0
    assert "r_synthetic" in capsys.readouterr().out


# ------------------------------------------------------------------ parsing
def test_options_and_durations_parse() -> None:
    assert _option("draw=3") == ("draw", 3)
    assert _option("undo=false") == ("undo", False)
    assert _option("max_passes=null") == ("max_passes", None)
    assert _option("scoring=vegas") == ("scoring", "vegas")
    assert (_duration("90"), _duration("90s"), _duration("15m")) == (90, 90, 900)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["create", "--option", "draw"])


def test_bot_needs_exactly_one_way_in(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bot", "--server", "ws://127.0.0.1:9"]) == 2
    assert main(["bot", "ABC", "--quick", "--server", "ws://127.0.0.1:9"]) == 2
    assert "give a room CODE" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["races"], ["verify", "r_synthetic"]])
def test_a_reader_that_went_away_ends_a_command_quietly_with_141(
    argv: list[str], synthetic_race: Path, config_dir: Path
) -> None:
    """``solrace races | head -1``: once head has its line, the command stops with no
    message and 141 (rich alone would exit 1, which says "the answer is no")."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the first write fails with EPIPE
    try:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "solrace"), *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env={**os.environ, "SOLRACE_CONFIG_DIR": str(config_dir)},
        )
    finally:
        os.close(write_end)
    assert done.returncode == EXIT_READER_GONE == 141, done.stderr
    assert done.stderr == b""


def test_races_lists_saved_races(synthetic_race: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["races"]) == 0
    out = capsys.readouterr().out
    assert "r_synthetic" in out and "SYN123" in out and "Ann" in out


async def test_rooms_lists_no_finished_rooms(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/client.md: rooms in the lobby, the countdown or racing — not finished ones
    (the client filters them out whether or not the server lists them)."""
    server = await cluster.node()
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann")
    await bob.join(ann.code or "", "Bob")
    await bob.ready()
    await ann.start()
    await ann.wait_started()
    await ann.resign()
    await bob.resign()
    await ann.next_event("race_over")
    assert await _run(["rooms", "--server", server.url]) == 0
    out = capsys.readouterr().out
    assert ann.code not in out and "no open rooms" in out
    for client in (ann, bob):
        await client.close()
