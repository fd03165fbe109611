"""The ``solrace`` command line: ``rooms`` against a real server, the hand-over to the
UI (with a stand-in UI module), ``resume`` from the saved race, names remembered, and
``races``."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import solrace_client
from rich.console import Console
from solrace.argtypes import EXIT_READER_GONE
from solrace.protocol.limits import (
    MAX_LOG_LEN,
    MAX_NAME_LEN,
    MAX_RACE_ID_LEN,
    SERVER_FRAME_LIMITS,
)
from solrace.rules import new_board
from solrace.rules.cli import parse_option as _option
from solrace.rules.options import options_to_json
from solrace_client import RaceClient, config
from solrace_client.cli import (
    _duration,
    build_parser,
    main,
    rooms_table,
    rooms_view,
    standings_table,
)
from solrace_client.connection import MAX_SERVERS
from solrace_client.errors import EXIT_FAILED

from tests.net.conftest import Cluster
from tests.support import terminal
from tests.support.fake_server import FakeRace, fake_server
from tests.support.interrupt import interrupted_while_loading


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


#: A ``rooms`` entry, as the server lists one (the tests of the table add options).
_ROOM: dict[str, Any] = {
    "code": "NK2HGJ",
    "variant": "klondike",
    "phase": "lobby",
    "racers": 1,
    "max_racers": 4,
    "host": "Bot-1234",
    "time_limit_s": 90,
    "spectator_delay_s": 45,
}


def test_a_room_with_many_options_wraps_its_variant_and_squeezes_nothing_at_80_columns() -> None:
    """A room with four options once made the table squeeze every other column to
    "pha…", "ra…" and an empty host at 80 columns; the options were JSON-quoted."""
    room = {**_ROOM, "options": {"max_passes": 3, "scoring": "vegas", "undo": False, "draw": 3}}
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(rooms_table([room]))
    out = console.export_text()
    assert "…" not in out
    for word in ("code", "variant", "phase", "racers", "host", "limit", "watch delay"):
        assert word in out
    for value in ("NK2HGJ", "lobby", "1/4", "Bot-1234", "1m30s", "45s"):
        assert value in out
    assert "scoring=vegas" in out and "undo=false" in out and '"' not in out
    assert max(len(line) for line in out.splitlines()) <= 80


def assert_whole(out: str, width: int, values: Sequence[str]) -> bool:
    """``out`` shows every value whole: a table (returned True) within ``width``, each
    value within one of its lines — not squeezed to nothing, cut to "…" or wrapped
    inside its cell —; or, two lines an entry (False), text the terminal may wrap,
    each value in its words."""
    lines = out.splitlines()
    table = "┃" in out
    for value in values:
        if table:
            assert any(value in line for line in lines), (value, out)
        else:
            assert value in " ".join(out.split()), (value, out)
    assert not table or max(len(line) for line in lines) <= width, out
    return table


_WIDTHS = [20, 22, 25, 30, 33, 36, 40, 42, 50, 60, 71, 72, 79, 80, 85, 86, 140]


@pytest.mark.parametrize("width", _WIDTHS)
def test_rooms_show_every_value_whole_at_every_width(width: int) -> None:
    """An audit: ``fits`` looked for "…" and over-long lines only; rich also squeezes a
    column to nothing (every column but the code's at 22 columns and less) or wraps a
    cell (``(quick)`` on a line of its own at 80), and the table was shown so. (A
    newcomer audit before: at 40 columns variant and host squeezed to "ph…", "rac…";
    at 60 the table kept its width and the terminal wrapped its lines.)"""
    room = {**_ROOM, "options": {"draw": 3}, "quick": True}

    def shown(width: int) -> str:
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(rooms_view([room], console))
        return console.export_text()

    values = ("NK2HGJ", "klondike draw=3 (quick)", "lobby", "1/4", "Bot-1234", "1m30s", "45s")
    out = shown(width)
    table = assert_whole(out, width, values)
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= width
    natural = max(len(line) for line in shown(200).splitlines() if "┃" in line)
    assert natural == 86
    assert table == (width >= natural)  # the table whenever it fits whole


@pytest.mark.parametrize("width", _WIDTHS)
def test_races_show_every_value_whole_at_every_width(
    synthetic_race: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    width: int,
) -> None:
    """``COLUMNS=40 solrace races`` (33 to 42 columns) drew a table whose columns after
    the race id were empty."""

    def shown(width: int) -> str:
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["races"]) == 0
        return capsys.readouterr().out.split("\n", 1)[1]  # after the directory's line

    values = ("r_synthetic.98acb6a5", "SYN123", "yukon", "all_done", "Ann")
    table = assert_whole(shown(width), width, values)
    natural = max(len(line) for line in shown(200).splitlines() if "┃" in line)
    assert natural == 72
    assert table == (width >= natural)  # the table whenever it fits whole


def test_a_columns_of_0_is_no_width_and_everything_is_said(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``COLUMNS=0`` (a terminal that reports no size) was taken as a width of 0 by
    rich: ``solrace races``, ``verify`` and ``rooms`` printed nothing at all, their
    one-line errors included (``solrace verify nosuch``: nothing, status 2)."""
    monkeypatch.setenv("COLUMNS", "0")
    assert main(["races"]) == 0
    assert "r_synthetic.98acb6a5" in capsys.readouterr().out
    assert main(["verify", str(synthetic_race)]) == 0
    assert "verifying race r_synthetic.98acb6a5" in capsys.readouterr().out
    assert main(["verify", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("solrace: no saved race 'nosuch'") and err.count("\n") == 1, err


async def test_rooms_says_when_there_are_none(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await cluster.node()
    assert await _run(["--server", server.url, "rooms"]) == 0
    out = capsys.readouterr().out
    assert "no open rooms" in out
    # the command to copy stays on one line, whatever the width (it was cut at 80), and
    # works as printed: with the --server typed (it asked ws://127.0.0.1:8765 without)
    flag = f" --server {server.url}"
    assert out.rstrip("\n").endswith(f"; start one with: solrace create --variant yukon{flag}")
    assert out.count("\n") == 1
    # the hint names the variant asked for (it said yukon whatever was asked)
    assert await _run(["--server", server.url, "rooms", "--variant", "klondike"]) == 0
    out = capsys.readouterr().out
    assert "no open klondike rooms" in out
    assert out.rstrip("\n").endswith(f"; start one with: solrace create --variant klondike{flag}")
    monkeypatch.setenv("SOLRACE_SERVER", server.url)  # then the command needs none
    assert await _run(["rooms"]) == 0
    assert capsys.readouterr().out.rstrip("\n").endswith("solrace create --variant yukon")
    # nor with spaces around it (`export SOLRACE_SERVER="$URL "`): the hint compared
    # the URL that answered with the variable as written and added a needless --server
    monkeypatch.setenv("SOLRACE_SERVER", f" {server.url} ")
    assert await _run(["rooms"]) == 0
    assert capsys.readouterr().out.rstrip("\n").endswith("solrace create --variant yukon")


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
    # as every bad argument: it said "solrace: --difficulty needs …", without the command
    assert main([*base, "--deals", "random", "--difficulty", "hard"]) == 2
    said = _usage_error(capsys.readouterr().err, "create")
    assert said == "--difficulty needs winnable deals: leave out --deals random"
    assert len(ui.calls) == 2  # no room was asked for


def test_create_and_bot_refuse_an_option_of_another_variant_before_connecting(
    ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer's `solrace create --option draw=3` (a Yukon room: Klondike's option)
    said `solrace: variant yukon has no option 'draw' …` only once a server answered,
    without the command or its --help, and `solrace bot --create` said `create
    refused: …` — or `cannot reach …` first, the option found wrong only after that was
    mended. The client's engine checks the options as the server does: a bad argument,
    said as every other one is, before anything connects."""
    server = ["--server", "ws://127.0.0.1:9"]  # nothing listens there: never reached
    for command in ("create", "bot"):
        room = ["--create"] if command == "bot" else []
        assert main([command, *room, "--option", "draw=3", *server]) == 2
        said = _usage_error(capsys.readouterr().err, command)
        assert said.startswith('variant yukon has no option "draw" (options: '), said
        argv = [command, *room, "--variant", "klondike", "--option", "draw=4", *server]
        assert main(argv) == 2
        said = _usage_error(capsys.readouterr().err, command)
        assert said == "option draw must be 1 or 3, not 4", said
        # past msgpack's 64 bits: a TypeError traceback as the request was encoded
        huge = "9" * 23
        argv = [command, *room, "--variant", "klondike", "--option", f"max_passes={huge}"]
        assert main([*argv, *server]) == 2
        said = _usage_error(capsys.readouterr().err, command)
        assert said == (
            f"option max_passes must be a whole number 1 to 2147483647 or null (unlimited), "
            f"not {huge}"
        ), said
    assert ui.calls == []  # no room was asked for


def test_create_and_bot_say_an_option_that_is_not_utf8_with_its_bytes(
    ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    """An audit: ``--option draw=$'\\xff'`` was refused as ``option draw must be 1 or 3,
    not "\\udcff"`` — Python's stand-in for the byte, which nobody typed — where a name
    or a code is said with its bytes as typed."""
    server = ["--server", "ws://127.0.0.1:9"]  # nothing listens there: never reached
    for command in ("create", "bot"):
        room = ["--create"] if command == "bot" else []
        with pytest.raises(SystemExit) as refused:
            main([command, *room, "--variant", "klondike", "--option", "draw=\udcff", *server])
        assert refused.value.code == 2
        said = _usage_error(capsys.readouterr().err, command)
        assert said == "argument --option: not UTF-8 text: 'draw=\\xff'", said
    assert ui.calls == []


def test_a_server_given_twice_is_refused_not_the_last_one_taken(
    ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    """An audit: ``--server A --server B`` (before or after the command, or one of
    each) asked B alone, A dropped in silence — as one who meant both to be tried in
    turn would not expect: that is ``--server A,B``. Refused, saying so."""
    a, b = "ws://127.0.0.1:9", "ws://127.0.0.1:10"
    for argv in (
        ["--server", a, "--server", b, "rooms"],
        ["rooms", "--server", a, "--server", b],
        ["--server", a, "join", "K7QX2M", "--server", b],
    ):
        with pytest.raises(SystemExit) as refused:
            main(argv)
        assert refused.value.code == 2
        command = next(word for word in argv if not word.startswith(("-", "ws:")))
        said = _usage_error(capsys.readouterr().err, command)
        assert said == (
            f"argument --server: given twice ('{a}', then '{b}'): give it once; to try "
            f"several servers in turn, one --server with commas: --server {a},{b}"
        ), said
    assert ui.calls == []


def test_a_server_given_twice_to_an_offline_command_is_told_it_takes_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A review: ``solrace --server A verify x --server B`` was told to give one
    ``--server A,B`` — a flag ``verify`` refuses the next time, "no --server". What is
    wrong is the flag itself, whatever its count: said so at once."""
    a, b = "ws://127.0.0.1:9", "ws://127.0.0.1:10"
    for argv in (
        ["--server", a, "verify", "x", "--server", b],
        ["races", "--server", a, "--server", b],
        ["--server", a, "--server", b, "replay", "x"],
    ):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's exit: the old "given twice"
            status = exc.code
        assert status == 2
        command = next(word for word in argv if not word.startswith(("-", "ws:")))
        said = _usage_error(capsys.readouterr().err, command)
        assert said == "it works on this computer's saved races: no --server", said


def test_create_and_bot_refuse_an_option_given_twice(
    ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: ``--option draw=3 --option draw=1`` asked for a room of draw 1, the
    first value dropped in silence. A key given twice is a bad argument, said before
    anything connects."""
    server = ["--server", "ws://127.0.0.1:9"]  # nothing listens there: never reached
    for command in ("create", "bot"):
        room = ["--create"] if command == "bot" else []
        twice = ["--option", "draw=3", "--option", "scoring=vegas", "--option", "draw=1"]
        with pytest.raises(SystemExit) as refused:  # as argparse refuses any argument
            main([command, *room, "--variant", "klondike", *twice, *server])
        assert refused.value.code == 2
        said = _usage_error(capsys.readouterr().err, command)
        assert said == "argument --option: draw is given twice: give each option once", said
    assert ui.calls == []  # no room was asked for


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
    commitment = "c" * 64  # the round's: it names the race if that is over
    saved = config.SavedRace("ws://saved:3", "r_1", "ABC123", 2, token, "Dee", 7)
    saved.commitment = commitment
    config.save_race(saved)
    assert main(["resume"]) == 0
    assert main(["resume", "--server", "ws://other:4"]) == 0
    params = {"room": "r_1", "token": token, "code": "ABC123", "commitment": commitment}
    assert ui.calls == [
        ("race", ("ws://saved:3", "resume", "Dee"), params),
        ("race", ("ws://other:4", "resume", "Dee"), params),
    ]


def test_resume_sends_back_the_proof_that_the_rooms_last_race_over_went_out(
    ui: FakeUI, synthetic_race: Path
) -> None:
    """``solrace resume`` is a new process: its view holds no race_over, and it sent no
    proof (``revealed``), so a store rewound to before the room's last race_over raced
    the revealed deal again. It sends the saved race's pair (the window's view when it
    saved the race), else — an older client's file has none — the newest saved result
    of the room; a room with neither sends none."""
    pair = {"seed": 7, "salt": "5" * 64}
    saved = config.SavedRace("ws://saved:3", "r_synthetic", "SYN123", 2, "t" * 32, "Dee")
    saved.revealed = pair
    config.save_race(saved)
    assert main(["resume"]) == 0
    config.save_race(config.SavedRace("ws://saved:3", "r_synthetic", "SYN123", 2, "t" * 32, "Dee"))
    assert main(["resume"]) == 0
    config.clear_race("r_synthetic", "t" * 32)
    config.save_race(config.SavedRace("ws://saved:3", "r_other", "OTH123", 2, "u" * 32, "Dee"))
    assert main(["resume"]) == 0
    result = json.loads(synthetic_race.read_text())["result"]
    proofs = [call[2].get("revealed") for call in ui.calls]
    assert proofs == [pair, {"seed": result["seed"], "salt": result["salt"]}, None]


def test_resume_goes_to_the_saved_races_server_whatever_solrace_server_says(
    ui: FakeUI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer audit: with ``export SOLRACE_SERVER=…`` (the README's way to name a
    server) and a race run on another with ``--server``, ``resume`` asked the
    variable's server, which knew no such room — "the saved race's room is gone (it
    has expired)" — and the saved race, token and all, was forgotten. The variable is
    a default for commands that name no server; a saved race names its own. Only a
    ``--server`` typed on the command line overrides it (the server moved)."""
    monkeypatch.setenv("SOLRACE_SERVER", "ws://env:2")
    saved = config.SavedRace("ws://saved:3", "r_1", "ABC123", 2, "t" * 32, "Dee", 7)
    config.save_race(saved)
    assert main(["resume"]) == 0
    assert main(["resume", "--server", "ws://typed:4"]) == 0
    assert [call[1][0] for call in ui.calls] == ["ws://saved:3", "ws://typed:4"]
    monkeypatch.setenv("SOLRACE_SERVER", "not a url")  # nor is the variable checked
    assert main(["resume"]) == 0
    assert ui.calls[-1][1][0] == "ws://saved:3"


def _closed_window_race(room: str, age_s: int) -> None:
    """A race saved by a window that is gone (pid 0: unknown), ``age_s`` old."""
    race = config.SavedRace("ws://saved:3", room, "ABC123", 1, f"{room}-token", "Dee")
    config.save_race(race)
    path = config.playing_dir() / f"{room}.1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "pid": 0}))
    then = path.stat().st_mtime - age_s
    os.utime(path, (then, then))


def test_resume_forgets_every_stale_saved_race_in_one_go(
    ui: FakeUI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two saved races whose windows are gone, both over: each ``resume`` used up one,
    so a newcomer met two failures in a row (an audit). One ``resume`` tries them in
    turn, newest first, and stops at the first that is not refused for good."""
    for age, room in enumerate(["r_new", "r_old", "r_live"]):
        _closed_window_race(room, age)

    def run_race(server: str, action: str, name: str, **params: Any) -> int:
        ui.calls.append(("race", (server, action, name), params))
        if params["room"] == "r_live":
            return 0
        config.clear_race(params["room"], params["token"])  # as the UI does when refused
        return 2

    monkeypatch.setattr(solrace_client.tui, "run_race", run_race)  # type: ignore[attr-defined]
    assert main(["resume"]) == 0
    assert [call[2]["room"] for call in ui.calls] == ["r_new", "r_old", "r_live"]
    assert [race.room for race in config.saved_races()] == ["r_live"]


def test_resume_stops_at_a_saved_race_it_could_not_reach(
    ui: FakeUI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that cannot be reached refuses nothing for good: that race stays saved
    and the older ones are not tried."""
    _closed_window_race("r_new", 0)
    _closed_window_race("r_old", 1)

    def run_race(server: str, action: str, name: str, **params: Any) -> int:
        ui.calls.append(("race", (server, action, name), params))
        return 2  # "cannot reach": nothing cleared

    monkeypatch.setattr(solrace_client.tui, "run_race", run_race)  # type: ignore[attr-defined]
    assert main(["resume"]) == 2
    assert [call[2]["room"] for call in ui.calls] == ["r_new"]
    assert len(config.saved_races()) == 2


def test_verify_says_what_a_result_without_the_countdowns_commitment_cannot_show(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer audit: with no commitment seen at the countdown, ``verify`` skipped
    that check in silence and said the deal "was committed in advance"."""
    assert main(["verify", str(synthetic_race)]) == 0
    out = capsys.readouterr().out
    assert " SKIP  published commitment: this file does not hold the commitment announced" in out
    assert "OK as far as checked" in out and "committed in advance" not in out


def test_replay_with_an_empty_input_fails_in_one_line(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``solrace replay RACE < /dev/null`` showed step 0 and ended without a word, then
    (a later audit) with a hint but status 0: a script that redirected its input got a
    success that replayed nothing. It is one line on stderr, status 2, and no board."""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["replay", str(synthetic_race)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "solrace: replay: no commands on standard input (it is not a terminal and is "
        "empty): pipe some (n, p, q …), or use --print to print one board\n"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["replay", str(synthetic_race)]) == 0
    captured = capsys.readouterr()
    assert "step 1 of" in captured.out and captured.err == ""


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


def _usage_error(stderr: str, command: str) -> str:
    """The one line of a bad argument, in docs/client.md's format: ``solrace COMMAND:
    … (see solrace COMMAND --help)``; what it says between the two."""
    line = _one_line(stderr)
    head, tail = f"solrace {command}: ", f" (see solrace {command} --help)"
    assert line.startswith(head) and line.endswith(tail), line
    return line[len(head) : -len(tail)]


def test_each_commands_help_says_which_server_it_asks_by_default() -> None:
    """``solrace fetch --help`` said ``server URL (default: $SOLRACE_SERVER or
    ws://127.0.0.1:8765)``, but fetch of a saved race asks the server it was raced on
    (its file's ``server``), as resume does — a newcomer with $SOLRACE_SERVER set was
    told the wrong server by --help, and right by docs/client.md."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def server_help(command: str) -> str:
        action = next(a for a in sub.choices[command]._actions if "--server" in a.option_strings)
        return " ".join((action.help or "").split())

    assert server_help("rooms") == "server URL (default: $SOLRACE_SERVER or ws://127.0.0.1:8765)"
    assert server_help("resume") == (
        "server URL (default: the saved race's own server, not $SOLRACE_SERVER)"
    )
    assert server_help("fetch") == (
        "server URL (default: a saved race's own server, not $SOLRACE_SERVER; for a race id "
        "with no file here, $SOLRACE_SERVER or ws://127.0.0.1:8765)"
    )


def test_bot_needs_exactly_one_way_in(capsys: pytest.CaptureFixture[str]) -> None:
    """In the format of every bad argument: it said ``solrace: give one of: …``."""
    assert main(["bot", "--server", "ws://127.0.0.1:9"]) == 2
    said = _usage_error(capsys.readouterr().err, "bot")
    assert said == "give one of: a room CODE, --quick, --create"
    for argv in (["ABC", "--quick"], ["--quick", "--create"], ["ABC", "--quick", "--create"]):
        assert main(["bot", *argv, "--server", "ws://127.0.0.1:9"]) == 2
        said = _usage_error(capsys.readouterr().err, "bot")
        assert said == "give only one of: a room CODE, --quick, --create", argv
    assert main(["bot", "--quick", "--racers", "3", "--server", "ws://127.0.0.1:9"]) == 2
    said = _usage_error(capsys.readouterr().err, "bot")
    assert said == "--racers is a setting of a room the bot creates: it needs --create"
    # what a starting host waits for: without --host-start (or --create) nothing read it
    for argv in (["--quick"], ["ABC"]):
        assert main(["bot", *argv, "--min-racers", "3", "--server", "ws://127.0.0.1:9"]) == 2
        said = _usage_error(capsys.readouterr().err, "bot")
        assert said == (
            "--min-racers is how many racers a starting host waits for: "
            "it needs --host-start (or --create)"
        ), argv


def test_a_bot_joining_by_code_refuses_a_variant(capsys: pytest.CaptureFixture[str]) -> None:
    """``solrace bot K7QX2M --variant klondike`` joined the room, whatever its variant,
    and raced it: the flag did nothing, without a word — as a room's settings with a
    CODE did before they were refused. A room's code names its variant already; the
    default (yukon, for --quick and --create) still needs no flag."""
    assert main(["bot", "K7QX2M", "--variant", "klondike", "--server", "ws://127.0.0.1:9"]) == 2
    said = _usage_error(capsys.readouterr().err, "bot")
    assert said == (
        "--variant chooses the room of --quick or --create: a room CODE has its own variant"
    )


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


def test_races_names_an_unreadable_file_in_one_line(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corrupt saved race (cut short by a full disk, edited by hand) was left out of
    ``solrace races`` without a word, status 0: its race seemed never saved. It is
    named on one line of its own (its path and what is wrong, as ``verify`` says it),
    the readable races still listed, and the status says a file could not be read."""
    broken = synthetic_race.with_name("r_broken.00000000.json")
    broken.write_text('{"room": "r_broken", "settings": ', encoding="utf-8")
    assert main(["races"]) == EXIT_FAILED == 2
    captured = capsys.readouterr()
    assert "r_synthetic" in captured.out and "r_broken" not in captured.out
    assert captured.err.splitlines() == [
        f"solrace: {broken}: not a race result (a race result is JSON; line 1: "
        "Expecting value), left out"
    ]


def test_races_on_a_narrow_terminal_lose_nothing(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer audit: at 50 columns the table's headers became "c… v… …"."""
    monkeypatch.setenv("COLUMNS", "50")
    assert main(["races"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert "r_synthetic.98acb6a5" in out.split() and "SYN123" in out and "winner Ann" in out
    # No table the terminal would break across its lines: plain lines, written whole
    # (as every line of the CLI: the terminal wraps text, not a table's borders).
    assert "│" not in out and "┃" not in out


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


# ------------------------------------------------- defects a newcomer ran into (review)
def _solrace(*argv: str, **run: Any) -> subprocess.CompletedProcess[str]:
    """The console script, as a user runs it (its own stdin, stdout, stderr)."""
    return subprocess.run(
        [str(terminal.SOLRACE), *argv],
        capture_output=run.pop("capture_output", True),
        text=True,
        timeout=60,
        **run,
    )


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_a_name_the_server_would_refuse_is_refused_here_and_never_remembered(
    ui: FakeUI, capsys: pytest.CaptureFixture[str], config_dir: Path
) -> None:
    """A refused --name used to be saved anyway, and every later command then failed
    over a --name nobody had given."""
    for bad in ("x" * 25, "", "   ", "Ann\u202e"):
        with pytest.raises(SystemExit) as exited:
            main(["quick", "--name", bad, "--server", "ws://h:1"])
        assert exited.value.code == 2
        assert "--name" in _one_line(capsys.readouterr().err)
    assert not (config_dir / "profile.json").exists()
    assert ui.calls == []
    # a bad name an older client saved is passed over, not sent
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "profile.json").write_text('{"name": "' + "y" * 40 + '"}')
    assert config.default_name() != "y" * 40
    assert main(["quick", "--server", "ws://h:1"]) == 0
    assert ui.calls[-1][1][2] == config.default_name()
    # and a good one is trimmed as the server keeps it
    assert main(["quick", "--name", "  Ann   Lee ", "--server", "ws://h:1"]) == 0
    assert ui.calls[-1][1][2] == "Ann Lee" == config.default_name()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["quick", "--name", "Ann\udcff"],
            "solrace quick: argument --name: not UTF-8 text: 'Ann\\xff'",
        ),
        (
            ["bot", "--quick", "--name", "\udcff"],
            "solrace bot: argument --name: not UTF-8 text: '\\xff'",
        ),
        (["join", "K7\udcff"], "solrace join: argument code: not UTF-8 text: 'K7\\xff'"),
        (["watch", "\udcff"], "solrace watch: argument code: not UTF-8 text: '\\xff'"),
    ],
)
def test_a_name_or_code_that_is_not_utf8_is_said_so(
    argv: list[str], says: str, ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer audit: ``--name $'\\xff'`` (a byte of another locale, which Python
    reads as the lone surrogate U+DCFF) was refused as "'\\udcff': must not contain the
    character U+DCFF" — a character nobody typed —, a code as "'\\udcff' is not a room
    code". Said as every other command says such a value: its bytes, as typed."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--server", "ws://h:1"])
    assert exited.value.code == 2
    assert _one_line(capsys.readouterr().err) == f"{says} (see solrace {argv[0]} --help)"
    assert ui.calls == []


async def test_several_servers_are_tried_in_turn_and_an_empty_one_is_refused(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    server = await cluster.node()
    both = f"ws://127.0.0.1:9,{server.url}"  # the first is down: the second answers
    assert await _run(["rooms", "--server", both]) == 0
    out = capsys.readouterr().out  # it named both servers, the one down too
    assert f"no open rooms on {server.url};" in out and "127.0.0.1:9," not in out
    assert await _run(["rooms", "--server", ""]) == 2
    assert "no server URL given" in _one_line(capsys.readouterr().err)
    assert await _run(["rooms", "--server", "ws://127.0.0.1:9,ws://127.0.0.1:10"]) == 2
    assert "cannot reach" in _one_line(capsys.readouterr().err)


def test_a_bad_server_url_says_where_it_came_from(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOLRACE_SERVER", "garbage")
    assert main(["rooms"]) == 2
    assert "bad server URL 'garbage'" in (said := _one_line(capsys.readouterr().err))
    assert said.endswith("(from $SOLRACE_SERVER)")
    assert main(["rooms", "--server", "garbage"]) == 2  # typed: no need to say
    assert "$SOLRACE_SERVER" not in _one_line(capsys.readouterr().err)
    # websockets refused it only when connecting, said as "cannot reach"
    assert main(["rooms", "--server", "ws://user@127.0.0.1:9"]) == 2
    said = _one_line(capsys.readouterr().err)
    assert "bad server URL" in said and "takes no user name" in said
    assert "cannot reach" not in said


def test_fetch_of_a_race_file_naming_its_server_ignores_a_bad_solrace_server(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audit: ``fetch FILE`` asks the server the file names, not ``$SOLRACE_SERVER``'s
    — yet a garbage ``$SOLRACE_SERVER`` refused it (``bad server URL 'garbage' (from
    $SOLRACE_SERVER)``), a variable it would not have used, as ``resume`` is not."""
    saved = json.loads(synthetic_race.read_text())
    synthetic_race.write_text(json.dumps({**saved, "server": "ws://127.0.0.1:9"}))
    monkeypatch.setenv("SOLRACE_SERVER", "garbage")
    assert main(["fetch", str(synthetic_race)]) == 2  # nothing listens on port 9
    said = _one_line(capsys.readouterr().err)
    assert "cannot reach ws://127.0.0.1:9" in said and "garbage" not in said, said
    # a race id this computer has no file of is asked of $SOLRACE_SERVER's: refused
    assert main(["fetch", "abc.deadbeef"]) == 2
    said = _one_line(capsys.readouterr().err)
    assert said.startswith("solrace: bad server URL 'garbage'"), said
    assert said.endswith("(from $SOLRACE_SERVER)"), said


def test_a_config_directory_not_utf8_is_named_with_its_bytes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An audit: ``SOLRACE_CONFIG_DIR=$'/tmp/\\xff'`` was named ``/tmp/?``, its byte
    lost, where an argument's is said ``\\xff``."""
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", f"{tmp_path}/\udcff")
    assert main(["races"]) == 0
    assert capsys.readouterr().out.split() == f"no saved races in {tmp_path}/\\xff/races".split()


def test_more_servers_than_are_tried_or_none_from_the_variable_say_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audit: ``$SOLRACE_SERVER`` of 1,000 URLs had each tried in turn — 5 s each
    where a host does not answer, over an hour before a word —, where a race file's
    are cut at MAX_SERVERS; and one of commas alone said "no server URL given"
    to one who had given none, without saying where it came from."""
    many = ",".join(f"ws://127.0.0.1:{port}" for port in range(9, 9 + MAX_SERVERS + 1))
    for argv, env in ((["rooms", "--server", many], None), (["rooms"], many)):
        if env is not None:
            monkeypatch.setenv("SOLRACE_SERVER", env)
        assert main(argv) == 2
        said = _one_line(capsys.readouterr().err)
        where = " (from $SOLRACE_SERVER)" if env else ""
        assert said == (
            f"solrace: {MAX_SERVERS + 1} server URLs given: at most {MAX_SERVERS} are "
            f"tried in turn (the nodes of one deployment){where}"
        ), said
    monkeypatch.setenv("SOLRACE_SERVER", ",,,")
    assert main(["rooms"]) == 2
    said = _one_line(capsys.readouterr().err)
    assert said == "solrace: no server URL given (e.g. ws://127.0.0.1:8765) (from $SOLRACE_SERVER)"


def test_bot_settings_that_make_no_sense_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    server = ["--server", "ws://127.0.0.1:9"]
    for argv in (
        ["bot", "--quick", "--min-racers", "0"],
        ["bot", "--quick", "--max-moves", "-5"],
        ["bot", "--quick", "--delay", "-1"],
        ["bot", "--quick", "--delay", "nan"],
    ):
        with pytest.raises(SystemExit) as exited:
            main([*argv, *server])
        assert exited.value.code == 2
        _one_line(capsys.readouterr().err)
    assert main(["bot", "--create", "--racers", "2", "--min-racers", "3", *server]) == 2
    assert "could never start" in _usage_error(capsys.readouterr().err, "bot")


def test_a_corrupt_saved_race_is_called_unreadable_not_missing(
    ui: FakeUI, capsys: pytest.CaptureFixture[str], config_dir: Path
) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "race.json").write_text("{bad")
    assert main(["resume"]) == 2
    assert "unreadable" in _one_line(capsys.readouterr().err)


def test_verify_and_replay_refuse_odd_files_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic_race: Path
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert main(["verify", str(deep)]) == 2
    assert "nested too deeply" in _one_line(capsys.readouterr().err)
    assert main(["replay", str(deep), "--print"]) == 2
    assert "nested too deeply" in _one_line(capsys.readouterr().err)
    assert main(["verify", str(tmp_path)]) == 2
    assert "is a directory" in _one_line(capsys.readouterr().err)
    # a path that is there but is no file: it said "no saved race … and no such file"
    for command in (["verify"], ["replay", "--print"], ["fetch", "--server", "ws://h:1"]):
        assert main([command[0], os.devnull, *command[1:]]) == 2
        said = _one_line(capsys.readouterr().err)
        not_a_file = f"solrace: {os.devnull} is not a file: give a race id or a race file"
        assert said.startswith(not_a_file), said
    text = tmp_path / "passwd"  # any text file given by mistake: said as such
    text.write_text("root:x:0:0:root:/root:/bin/bash\n")
    assert main(["verify", str(text)]) == 2
    said = _one_line(capsys.readouterr().err)
    assert f"{text}: not a race result (a race result is JSON; line 1:" in said
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x7fELF\x02\x01\xd0\xff")
    assert main(["verify", str(binary)]) == 2
    assert f"{binary}: not a race result (not text)" in _one_line(capsys.readouterr().err)
    long = tmp_path / "long.json"  # a verify audit: said without the file, in Python's words
    long.write_text('{"seed": 1' + "0" * 5000 + "}")
    assert main(["verify", str(long)]) == 2
    said = _one_line(capsys.readouterr().err)
    assert f"{long}: not a race result (a number in it has more than " in said, said
    assert "set_int_max_str_digits" not in said
    odd = tmp_path / "odd.json"
    odd.write_text('{"race": 5, "result": "x"}')
    assert main(["verify", str(odd)]) == 2
    assert str(odd) in _one_line(capsys.readouterr().err)
    assert main(["replay", str(synthetic_race), "--racer", "Ann"]) == 2
    said = _usage_error(capsys.readouterr().err, "replay")
    assert said == "--racer goes with --print (the stepper shows every racer)"
    assert main(["replay", "r_nosuchrace", "--racer", "Ann"]) == 2  # the arguments first
    assert "--racer goes with --print" in _usage_error(capsys.readouterr().err, "replay")
    assert main(["verify", str(synthetic_race), "--server", "ws://h:1"]) == 2
    said = _usage_error(capsys.readouterr().err, "verify")
    assert said == "it works on this computer's saved races: no --server"


def test_output_that_cannot_be_written_is_one_line(synthetic_race: Path) -> None:
    """A full disk (/dev/full) or a closed standard output: one line, status 2, no
    traceback and no "Exception ignored" after it."""
    with open("/dev/full", "w") as full:
        done = _solrace("races", stdout=full, capture_output=False, stderr=subprocess.PIPE)
    assert done.returncode == 2
    assert "cannot write the output: No space left on device" in _one_line(done.stderr)
    closed = _solrace(
        "races",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        capture_output=False,
        preexec_fn=lambda: os.close(1),
    )
    assert closed.returncode == 2
    assert "standard output is closed" in _one_line(closed.stderr)


def test_the_race_screen_without_a_terminal_says_so_in_one_line() -> None:
    """`solrace create </dev/null 2>log` used to draw into the log until killed."""
    done = _solrace("create", "--server", "ws://127.0.0.1:9", stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "needs a terminal" in _one_line(done.stderr)
    assert done.stdout == ""


def test_an_unusable_config_directory_is_a_warning_not_a_traceback(
    ui: FakeUI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race goes on, said once why nothing is kept (it said "could not remember the
    name in /dev/null/solrace: Not a directory", and nothing of resume or results)."""
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", "/dev/null/solrace")
    assert main(["quick", "--name", "Ann", "--server", "ws://h:1"]) == 0  # the UI's status
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(
        "solrace: the config directory /dev/null/solrace ($SOLRACE_CONFIG_DIR) cannot be "
        "made: /dev/null is not a directory: set $SOLRACE_CONFIG_DIR to a directory ("
    ), line
    assert "resume" in line and ui.calls[-1][1][2] == "Ann"


@pytest.mark.parametrize(
    "argv",
    [
        ["races"],
        ["resume"],
        ["replay", "r_1.abcdef01"],
        ["verify", "r_1"],
        ["fetch", "r_1.abcdef01", "--server", "ws://127.0.0.1:1"],
    ],
)
def test_a_config_directory_that_is_a_file_is_said_so_by_every_command_reading_it(
    argv: list[str],
    ui: FakeUI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A newcomer audit: ``SOLRACE_CONFIG_DIR`` naming a file made ``races`` say "no
    saved races in FILE/races" (status 0), ``resume`` "nothing saved in FILE", and
    ``replay``, ``verify`` and ``fetch`` "no saved race … in FILE/races"."""
    file = tmp_path / "cfgfile"
    file.write_text("")
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", str(file))
    assert main(argv) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"solrace: the config directory {file} ($SOLRACE_CONFIG_DIR) is not a directory: "
        "set $SOLRACE_CONFIG_DIR to a directory"
    )
    assert ui.calls == [] and file.read_text() == ""


@pytest.mark.parametrize(
    ("argv", "sub", "holds"),
    [
        (["races"], "races", "its finished races"),
        (["replay", "r_1.abcdef01"], "races", "its finished races"),
        (["verify", "r_1"], "races", "its finished races"),
        (["fetch", "r_1.abcdef01", "--server", "ws://127.0.0.1:1"], "races", "its finished races"),
        (["resume"], "playing", "the races in progress for solrace resume"),
    ],
)
def test_a_file_where_the_config_directory_keeps_races_is_said_so(
    argv: list[str],
    sub: str,
    holds: str,
    ui: FakeUI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A newcomer audit: a file named ``races`` in the config directory made ``races``
    say "no saved races in …/races" (status 0), ``verify`` "no saved race 'r_1' in
    …/races and no such file", ``fetch`` "solrace: …/races: File exists" (mkdir's
    words), and a file named ``playing`` made ``resume`` say "nothing saved"."""
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", str(tmp_path))
    (tmp_path / sub).write_text("")
    assert main(argv) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"solrace: {tmp_path / sub} is not a directory: the config directory keeps "
        f"{holds} there (remove or rename that file)"
    )
    assert ui.calls == [] and (tmp_path / sub).read_text() == ""


def test_a_config_home_that_is_a_file_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = tmp_path / "home-config"
    file.write_text("")
    monkeypatch.delenv("SOLRACE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(file))
    assert main(["races"]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"solrace: the config directory {file / 'solrace'} ($XDG_CONFIG_HOME) cannot be "
        f"made: {file} is not a directory: set $SOLRACE_CONFIG_DIR to a directory"
    )


def test_a_stepper_interrupted_with_ctrl_c_exits_130(
    synthetic_race: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(prompt: str) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr("builtins.input", interrupted)
    assert main(["replay", str(synthetic_race)]) == 130
    assert "interrupted" in capsys.readouterr().err


# ------------------------------------------------ defects a newcomer ran into (audit)
def _bad_option(data: dict[str, Any]) -> None:
    data["settings"]["options"] = {"draw": 7}  # Yukon has no draw: the engine says so


#: A saved race file's faults, and what ``verify`` and ``replay`` say about each.
MALFORMED: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "log not a list": (
        lambda d: d["result"]["standings"][0].update(log=5),
        "result.standings[0].log is 5, not a list of moves",
    ),
    "log entry not a string": (
        lambda d: d["result"]["standings"][1]["log"].append(7),
        "result.standings[1].log is [",
    ),
    "racer null": (
        lambda d: d["result"]["standings"][0].update(racer=None),
        "result.standings[0].racer is null, not a racer id",
    ),
    # A verify audit: racer ids no server gives (it numbers racers from 1) verified OK
    # ("racer 0 (Ann)", "racer -5 (Bob)").
    "racer 0": (
        lambda d: d["result"]["standings"][0].update(racer=0),
        "result.standings[0].racer is 0, not a racer id (the server numbers racers from 1)",
    ),
    "racer negative": (
        lambda d: d["result"]["standings"][1].update(racer=-5),
        "result.standings[1].racer is -5, not a racer id (the server numbers racers from 1)",
    ),
    "acknowledged to racer 0": (
        lambda d: d.update(acknowledged={"racer": 0, "moves": []}),
        'acknowledged is {"racer": 0, "moves": []}, not a racer and its moves acknowledged',
    ),
    "name missing": (
        lambda d: d["result"]["standings"][1].pop("name"),
        "result.standings[1].name is missing, not a name",
    ),
    "no standings": (
        lambda d: d["result"].update(standings=[]),
        "result.standings lists no racer",
    ),
    "standings not a list": (
        lambda d: d["result"].update(standings={"a": 1}),
        'result.standings is {"a": 1}, not a list of racers',
    ),
    # A verify audit: 16,000 standings were replayed and ranked (4.8 s, 4.0 of them in
    # the quadratic check of racers listed twice); no room seats more than MAX_RACERS.
    "more racers than any room seats": (
        lambda d: d["result"]["standings"].extend(
            [{**d["result"]["standings"][1], "racer": 3 + i, "place": 3 + i} for i in range(7)]
        ),
        "result.standings lists 9 racers, more than the 8 a room seats",
    ),
    "a standing not a map": (
        lambda d: d["result"]["standings"].append(5),
        "result.standings[2] is 5, not a racer's standing",
    ),
    "certificate not a list": (
        lambda d: d["result"].update(certificate=True),
        "result.certificate is true, not a list of moves",
    ),
    "seed not a number": (
        lambda d: d["result"].update(seed="abc"),
        'result.seed is "abc", not a whole number',
    ),
    "elapsed time not a number": (
        lambda d: d["result"]["standings"][0].update(elapsed_ms="abc"),
        'result.standings[0].elapsed_ms is "abc", not a whole number',
    ),
    "variant missing": (
        lambda d: d["settings"].pop("variant"),
        "settings.variant is missing, not one of yukon, klondike",
    ),
    "options not a map": (
        lambda d: d["settings"].update(options=[1]),
        "settings.options is [1], not a map of options",
    ),
    # empty, they were read as no options ("or {}"), where [1] was refused
    "options an empty list": (
        lambda d: d["settings"].update(options=[]),
        "settings.options is [], not a map of options",
    ),
    "options false": (
        lambda d: d["settings"].update(options=False),
        "settings.options is false, not a map of options",
    ),
    # a wrong-typed option was verify's FAIL (status 1, "not verified"), not a file's
    # fault: no server deals with "draw": "3" — whatever the variant (a value of its
    # type, draw 7, is still one verify fails: the engine's refusal)
    "an option of the wrong type": (
        lambda d: d["settings"].update(options={"draw": "3"}),
        'settings.options.draw is "3", not a whole number',
    ),
    "an option true where a number goes": (
        lambda d: d["settings"].update(options={"max_passes": True}),
        "settings.options.max_passes is true, not a whole number or null",
    ),
    "an option a number where true or false goes": (
        lambda d: d["settings"].update(options={"undo": 0}),
        "settings.options.undo is 0, not true or false",
    ),
    # said "malformed", naming nothing; [] and [[k, v]] went through dict() and were
    # read as a result without a seed, or one with the pairs' keys
    "settings null": (
        lambda d: d.update(settings=None),
        "settings is null, not a map of the room's settings",
    ),
    "result a list": (
        lambda d: d.update(result=[]),
        "result is [], not a map of the race's outcome",
    ),
    "result a list of pairs": (
        lambda d: d.update(result=[["seed", 1]]),
        'result is [["seed", 1]], not a map of the race\'s outcome',
    ),
    # A verify audit: these ended in a traceback (OverflowError formatting the time,
    # int()'s digit limit in the engine) or a 5,000-character line.
    "elapsed time beyond 64 bits": (
        lambda d: d["result"]["standings"][0].update(elapsed_ms=10**400),
        f"result.standings[0].elapsed_ms is 1{'0' * 39}… (401 characters), not a whole number"
        " (64 bits at most)",
    ),
    "a move time beyond 64 bits": (
        lambda d: d["result"]["standings"][1]["times"].__setitem__(-1, -(10**400)),
        "result.standings[1].times is [",
    ),
    "a move time not a number": (
        lambda d: d["result"]["standings"][1]["times"].__setitem__(0, "soon"),
        "result.standings[1].times is [",
    ),
    "a log entry longer than any move": (
        lambda d: d["result"]["standings"][0]["log"].__setitem__(0, "1:" + "9" * 5000 + ">2"),
        "result.standings[0].log is [",
    ),
    "a certificate entry longer than any move": (
        lambda d: d["result"].update(certificate=["D" * 17]),
        'result.certificate is ["DDDDDDDDDDDDDDDDD"], not a list of moves',
    ),
    # A verify audit: without a time limit of whole seconds, verify skipped the checks
    # that no move and no finish come at or after it, and said OK to a finish at 10,000 s.
    "time limit missing": (
        lambda d: d["settings"].pop("time_limit_s"),
        "settings.time_limit_s is missing, not a time limit of 60 to 7200 s",
    ),
    "time limit not a number": (
        lambda d: d["settings"].update(time_limit_s="900"),
        'settings.time_limit_s is "900", not a time limit of 60 to 7200 s',
    ),
    "time limit past the protocol's": (
        lambda d: d["settings"].update(time_limit_s=10**9),
        "settings.time_limit_s is 1000000000, not a time limit of 60 to 7200 s",
    ),
    # A tamper audit: the seats the order check holds the standings to ("no more racers
    # than the room seats") were checked only when a whole number: "1", or none at
    # all, and a third racer added to a room of two verified OK.
    "seats missing": (
        lambda d: d["settings"].pop("max_racers"),
        "settings.max_racers is missing, not a number of seats from 2 to 8",
    ),
    "seats not a number": (
        lambda d: d["settings"].update(max_racers="1"),
        'settings.max_racers is "1", not a number of seats from 2 to 8',
    ),
    "seats past the protocol's": (
        lambda d: d["settings"].update(max_racers=10**6),
        "settings.max_racers is 1000000, not a number of seats from 2 to 8",
    ),
    # A verify audit: the settings verify does not read were taken of any type ("private":
    # [1], "deals": ["random"]…); each one docs/protocol.md (RoomSettings) defines is
    # held to its type where the file has it (an older client's may lack some).
    "private not true or false": (
        lambda d: d["settings"].update(private=[1]),
        "settings.private is [1], not true or false",
    ),
    "quick a number": (
        lambda d: d["settings"].update(quick=5),
        "settings.quick is 5, not true or false",
    ),
    "spectator delay a string": (
        lambda d: d["settings"].update(spectator_delay_s="x"),
        'settings.spectator_delay_s is "x", not a delay of 0 to 600 s',
    ),
    "spectator delay past the protocol's": (
        lambda d: d["settings"].update(spectator_delay_s=601),
        "settings.spectator_delay_s is 601, not a delay of 0 to 600 s",
    ),
    "deals a list": (
        lambda d: d["settings"].update(deals=["random"]),
        'settings.deals is ["random"], not one of winnable, random',
    ),
    "difficulty a map": (
        lambda d: d["settings"].update(difficulty={"a": 1}),
        'settings.difficulty is {"a": 1}, not one of easy, medium, hard or null',
    ),
    "spectators a number": (
        lambda d: d["settings"].update(spectators=3.5),
        "settings.spectators is 3.5, not one of fair, open",
    ),
    # A verify audit: a log longer than any race holds (the server takes no entry past
    # MAX_LOG_LEN) verified OK, 5,002 entries or 100,000, each replayed; and so were the
    # lists beside it. A file no server wrote, as an entry longer than any move is.
    "a log longer than a race allows": (
        lambda d: d["result"]["standings"][1]["log"].extend(["undo"] * MAX_LOG_LEN),
        f"result.standings[1].log holds {MAX_LOG_LEN + 12:,} entries, more than the "
        f"{MAX_LOG_LEN:,} a race allows",
    ),
    "move times longer than a race allows": (
        lambda d: d["result"]["standings"][0]["times"].extend([10**6] * MAX_LOG_LEN),
        "result.standings[0].times holds ",
    ),
    "acknowledged moves longer than a race allows": (
        lambda d: d.update(acknowledged={"racer": 2, "moves": [None] * (MAX_LOG_LEN + 1)}),
        f"acknowledged.moves holds {MAX_LOG_LEN + 1:,} entries, more than the "
        f"{MAX_LOG_LEN:,} a race allows",
    ),
    # no list from a server is longer (protocol.limits.SERVER_FRAME_LIMITS)
    "a certificate longer than any list a server sends": (
        lambda d: d["result"].update(certificate=["D"] * (SERVER_FRAME_LIMITS.max_array_len + 1)),
        f"result.certificate holds {SERVER_FRAME_LIMITS.max_array_len + 1:,} moves, more than "
        f"the {SERVER_FRAME_LIMITS.max_array_len:,} a server's message carries",
    ),
    # A tamper audit: a name or race id of 100,000 characters verified, each line of
    # the report that names it as long (no server keeps a name over 24 characters).
    "a name longer than any racer's": (
        lambda d: d["result"]["standings"][0].update(name="A" * 100_000),
        f'result.standings[0].name is "{"A" * 40}"… (100,000 characters), not a name',
    ),
    "race longer than any race id": (
        lambda d: d.update(race="r_" + "a" * 100_000),
        f'race is "r_{"a" * 38}"… (100,002 characters), not a race id',
    ),
    # No race id is longer than the protocol's (a room id of MAX_ROOM_ID_LEN, a dot and
    # 8 digits): the bound was a bare 130 of the client's own, and a "race" of 74 to 130
    # characters loaded (verify's FAIL race id, status 1).
    "race one character longer than any race id": (
        lambda d: d.update(race="r" * MAX_RACE_ID_LEN + "x"),
        f'race is "{"r" * 40}"… ({MAX_RACE_ID_LEN + 1} characters), not a race id',
    ),
    "room not a name": (  # a verify audit: loaded, and named the race "5.<commitment>"
        lambda d: d.update(room=5),
        "room is 5, not a room id",
    ),
    "race not a name": (
        lambda d: d.update(race={"id": 1}),
        'race is {"id": 1}, not a race id',
    ),
    "deal not a map": (  # a verify audit: dropped, as if the lobby had not been seen
        lambda d: d.update(deal=[1]),
        "deal is [1], not a deal (certified, moves, difficulty)",
    ),
    "deal's moves not a number": (
        lambda d: d.update(deal={"certified": True, "moves": "many", "difficulty": None}),
        'deal is {"certified": true, "moves": "many", "di… (56 characters), not a deal',
    ),
    # Tamper audit (verifyleft): fields no check failed, of shapes no client saves. A
    # code of 5,000 characters was a 5,000-character line of `solrace races`; an
    # integer commitment seen at the countdown was compared as its digits; a deal of
    # -5 moves verified as the lobby's word.
    "code not a room code": (
        lambda d: d.update(code=[1, 2]),
        "code is [1, 2], not a room code (1 to 16 letters or digits)",
    ),
    "code longer than any": (
        lambda d: d.update(code="X" * 5_000),
        f'code is "{"X" * 40}"… (5,000 characters), not a room code',
    ),
    "published commitment not a commitment": (
        lambda d: d.update(published_commitment=12345),
        "published_commitment is 12345, not a commitment (64 lower-case hex digits)",
    ),
    "deal of negative moves": (
        lambda d: d.update(deal={"certified": True, "moves": -5, "difficulty": "easy"}),
        'deal is {"certified": true, "moves": -5, "diffic… (54 characters), not a deal',
    ),
    "deal of a difficulty the solver never gives": (
        lambda d: d.update(deal={"certified": True, "moves": 5, "difficulty": "x" * 5_000}),
        "deal is {",
    ),
    "saved_at_ms not a number": (
        lambda d: d.update(saved_at_ms="yesterday"),
        'saved_at_ms is "yesterday", not a whole number',
    ),
}


def _broken(
    synthetic_race: Path, tmp_path: Path, fault: Callable[[dict[str, Any]], object]
) -> Path:
    data = json.loads(synthetic_race.read_text())
    fault(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("command", [["verify"], ["replay", "--print"], ["replay"]])
@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_race_file_is_one_line_naming_the_file_and_the_fault(
    synthetic_race: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    command: list[str],
) -> None:
    """Such files crashed verify and replay with a traceback (TypeError, ValueError) or
    said "list index out of range": one loader now says what is wrong, status 2."""
    fault, says = MALFORMED[case]
    path = _broken(synthetic_race, tmp_path, fault)
    assert main([command[0], str(path), *command[1:]]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"solrace: {path}: not a saved race result: {says}"), line


def test_a_deal_the_engine_refuses_fails_verify_and_cannot_be_replayed(
    synthetic_race: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _broken(synthetic_race, tmp_path, _bad_option)
    for argv in (["replay", str(path), "--print"], ["replay", str(path)]):
        assert main(argv) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"solrace: {path}: cannot replay: variant yukon has no option")
    assert main(["verify", str(path)]) == 1  # a race that cannot be dealt does not verify
    assert "FAIL  deal: cannot deal yukon" in capsys.readouterr().out


def test_the_stepper_with_standard_input_closed_says_so_in_one_line(
    synthetic_race: Path,
) -> None:
    """`solrace replay RACE <&-` ended in "RuntimeError: input(): lost sys.stdin"."""
    done = _solrace(
        "replay", str(synthetic_race), stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0)
    )
    assert done.returncode == 2
    assert "standard input, which is closed: use --print" in _one_line(done.stderr)
    printed = _solrace(
        "replay",
        str(synthetic_race),
        "--print",
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.close(0),
    )
    assert printed.returncode == 0 and "foundations" in printed.stdout, printed.stderr


def test_bot_creates_a_room_with_every_setting_create_has(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """bot had no --spectator-delay, --deals or --difficulty: `bot --create
    --spectator-delay -1` said "argument code: '-1' is not a room code"."""
    asked: list[dict[str, Any]] = []

    async def fake_run_bot(servers: list[str], **kwargs: Any) -> dict[str, Any]:
        asked.append(kwargs["create"])
        return {"reason": "all_done", "standings": []}

    monkeypatch.setattr("solrace_client.bot.run_bot", fake_run_bot)
    server = ["--server", "ws://127.0.0.1:9"]
    argv = ["bot", "--create", "--variant", "klondike", "--spectator-delay", "30"]
    assert main([*argv, "--deals", "winnable", "--difficulty", "easy", *server]) == 0
    assert asked == [
        {
            "variant": "klondike",
            "options": {},
            "spectator_delay_s": 30,
            "deals": "winnable",
            "difficulty": "easy",
        }
    ]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["bot", "--create", "--spectator-delay", "-1", *server])
    assert exited.value.code == 2
    line = _one_line(capsys.readouterr().err)
    assert "argument --spectator-delay: must be 0 to 600 s, got -1 s" in line
    assert main(["bot", "--create", "--deals", "random", "--difficulty", "hard", *server]) == 2
    said = _usage_error(capsys.readouterr().err, "bot")
    assert said == "--difficulty needs winnable deals: leave out --deals random"
    # a room's settings without --create would be ignored: they are refused instead
    for given, flag in (
        (["--quick", "--spectator-delay", "0"], "--spectator-delay"),
        (["ABC123", "--racers", "3"], "--racers"),
        (["--quick", "--private"], "--private"),
    ):
        assert main(["bot", *given, *server]) == 2
        assert f"{flag} is a setting of a room the bot creates" in _one_line(
            capsys.readouterr().err
        )
    assert len(asked) == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["replay", "RACE", "--step", "abc"], "argument --step: not a whole number: 'abc'"),
        (["replay", "RACE", "--step", "-1"], "argument --step: must be 0 to 5000, got -1"),
        (["bot", "--quick", "--seed", "abc"], "argument --seed: not a whole number: 'abc'"),
        # a newcomer audit: each was taken, --seed -1 and 400 digits alike, and a step
        # past any log shows what the last entry of every log shows
        (["replay", "RACE", "--step", "5001"], "argument --step: must be 0 to 5000, got 5001"),
        (
            ["bot", "--quick", "--seed", "-1"],
            "argument --seed: must be 0 to 18446744073709551615, got -1",
        ),
        (
            ["bot", "--quick", "--seed", str(2**64)],
            "argument --seed: must be 0 to 18446744073709551615, got 18446744073709551616",
        ),
        # past the entries a racer's log may hold (MAX_LOG_LEN), which the server refuses
        (
            ["bot", "--quick", "--max-moves", "5001"],
            "argument --max-moves: must be 1 to 5000, got 5001",
        ),
        (["races", "--limit", "x"], "argument --limit: not a whole number: 'x'"),
    ],
)
def test_every_whole_number_argument_is_refused_in_the_same_words(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--step and --seed said argparse's "invalid int value" where the others say "not a
    whole number"."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert says in _one_line(capsys.readouterr().err)


def test_an_empty_race_is_called_empty_not_a_directory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``fetch`` added "; nor is it a race id (<room>.<8 hex digits>) to fetch" to it, as
    if an empty string might have been meant as one."""
    for command in ("verify", "replay", "fetch"):
        assert main([command, ""]) == 2
        line = _one_line(capsys.readouterr().err)
        assert line == "solrace: no race given: the race id or file name is empty", line


def test_a_step_past_the_end_starts_the_stepper_at_the_last(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/client.md: a --step past the end shows the final position."""
    monkeypatch.setattr("sys.stdin", io.StringIO("q\n"))
    last = max(len(s["log"]) for s in json.loads(synthetic_race.read_text())["result"]["standings"])
    assert main(["replay", str(synthetic_race), "--step", str(MAX_LOG_LEN)]) == 0
    assert f"step {last} of {last}" in capsys.readouterr().out


def test_a_code_typed_as_it_is_read_out_in_two_words_is_one_code(
    ui: FakeUI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``solrace join kbz 8cl`` said "solrace: unrecognized arguments: 8cl": case and
    spaces do not matter (docs/client.md), unquoted too."""
    monkeypatch.setenv("SOLRACE_SERVER", "ws://env:2")
    assert main(["join", "kbz", "8cl", "--name", "Bob"]) == 0
    assert main(["watch", "KBZ", "8CL"]) == 3
    args = build_parser().parse_args(["bot", "kbz", "8cl", "--name", "B"])
    assert args.code == "KBZ8CL"  # the bot's code too (a newcomer audit)
    assert build_parser().parse_args(["bot", "--quick"]).code is None
    assert ui.calls == [
        ("race", ("ws://env:2", "join", "Bob"), {"code": "KBZ8CL"}),
        ("watch", ("ws://env:2", "KBZ8CL"), {}),
    ]
    with pytest.raises(SystemExit) as exit_:
        main(["join", "kbz", "8c!"])
    assert exit_.value.code == 2
    assert _one_line(capsys.readouterr().err) == (
        "solrace join: argument code: 'kbz 8c!' is not a room code: 1 to 16 letters and "
        "digits, like K7QX2M (see solrace join --help)"
    )


def test_an_unknown_argument_is_said_by_the_command_it_was_given_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``solrace rooms extra`` said "solrace: … (see solrace --help)", whose help does
    not list the command's arguments."""
    for argv, command in (
        (["rooms", "extra"], "rooms"),
        (["races", "--json"], "races"),
        (["bot", "K7QX2M", "--more"], "bot"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        unknown = argv[-1]
        assert _one_line(capsys.readouterr().err) == (
            f"solrace {command}: unrecognized arguments: {unknown} (see solrace {command} --help)"
        )


_INTERRUPTED_WHILE_LOADING = interrupted_while_loading("solrace_client.entry")


@pytest.mark.parametrize("module", ["websockets", "rich", "solrace_client.cli"])
def test_ctrl_c_while_the_clients_modules_load_is_one_line_and_130(module: str) -> None:
    """A newcomer audit: Ctrl-C in the first ~0.1 s of ``solrace rooms`` printed a
    traceback (30 lines deep in rich) and died by the signal, not 130."""
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_WHILE_LOADING, module, "rooms"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stderr) == (130, "solrace: interrupted\n")


#: A name a solrace server accepts (brackets are not control characters) that rich
#: would read as markup — a closing tag with nothing to close — and what a hostile
#: server or an edited file may add: a terminal's escape sequence (clear the screen).
_MARKUP_NAME = "[/]Evil[bold"
_ESCAPE_NAME = "Riv\x1b[2J"


@pytest.mark.parametrize("width", [40, 80])
def test_a_hosts_name_that_looks_like_markup_is_shown_as_it_is(width: int) -> None:
    """An audit: one public room whose host was named ``[/]Evil`` made ``solrace
    rooms`` a traceback (rich.errors.MarkupError) for everyone."""
    room = {**_ROOM, "host": _MARKUP_NAME, "code": "[red]X"}
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(rooms_view([room], console))
    out = " ".join(console.export_text().split())
    assert _MARKUP_NAME in out and "[red]X" in out


def test_standings_show_names_as_they_are_and_no_escape_sequence() -> None:
    """The bot's table at the end of a race: a racer named ``[/]Evil`` made every
    bot of that race end in a traceback; a name with an escape sequence (from a
    hostile server: a solrace server refuses it) reached the terminal raw."""
    result = {
        "reason": "all_done",
        "standings": [
            {"place": 1, "racer": 1, "name": _MARKUP_NAME, "status": "finished"},
            {"place": "[/]", "racer": 2, "name": _ESCAPE_NAME, "status": "resigned"},
        ],
    }
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(standings_table(result, 2))
    out = console.export_text()
    assert _MARKUP_NAME in out and "Riv?[2J" in out and "\x1b" not in out


def test_standings_in_80_columns_keep_one_line_per_racer_and_every_figure() -> None:
    """``solrace bot … | tee log`` prints its table 80 columns wide (not a terminal).
    The mark ◀ followed a name: with a name of the longest length (24, one word) it
    wrapped onto a line of its own. It has a column of its own now; a long name is
    cut, never a figure."""
    long = "A" * MAX_NAME_LEN
    result = {
        "reason": "all_done",
        "standings": [
            {
                "place": 1,
                "racer": 1,
                "name": long,
                "status": "finished",
                "foundation": 52,
                "moves": 1234,
                "score": 5678,
                "elapsed_ms": 754321,
            },
            {
                "place": 2,
                "racer": 2,
                "name": "B" * MAX_NAME_LEN,
                "status": "resigned",
                "foundation": 10,
                "moves": 60,
                "score": 12,
                "elapsed_ms": None,
            },
        ],
    }
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(standings_table(result, 1))
    rows = [line for line in console.export_text().splitlines() if "│" in line]
    assert len(rows) == 2, rows
    assert "◀" in rows[0] and "◀" not in rows[1], rows
    for figure in ("52", "1234", "5678", "754.3s", "finished"):
        assert figure in rows[0], (figure, rows[0])


def test_standings_in_80_columns_keep_a_bots_name_whole_and_cut_a_long_one() -> None:
    """A newcomer's audit: ``greedy-bot (2)`` — a name of two words — was wrapped onto
    two lines of the bot's table in 80 columns. A name that fits is whole; a longer one
    is cut with "…" on its own line."""
    standings = [
        {"place": 1, "racer": 1, "name": "greedy-bot (2)", "status": "finished"},
        {"place": 2, "racer": 2, "name": "Annabelle the Great Cook", "status": "resigned"},
    ]
    for s in standings:
        s.update(foundation=52, moves=1234, score=-52, elapsed_ms=754321)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(standings_table({"reason": "all_done", "standings": standings}, 1))
    rows = [line for line in console.export_text().splitlines() if "│" in line]
    assert len(rows) == 2, rows
    assert "greedy-bot (2)" in rows[0], rows
    assert "Annabelle the" in rows[1] and "…" in rows[1], rows
    assert all(len(line) <= 80 for line in console.export_text().splitlines())


def test_races_and_verify_show_a_files_names_as_they_are(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A race file is anyone's to edit: its winner's name, its race id and a racer's
    name go to the terminal as text, not markup (``verify`` of a file whose race was
    ``x[/]y`` was a traceback)."""
    data = json.loads(synthetic_race.read_text())
    data["race"] = "x[/]y"
    data["result"]["standings"][0]["name"] = _MARKUP_NAME
    data["result"]["standings"][1]["name"] = _ESCAPE_NAME
    synthetic_race.write_text(json.dumps(data))
    for columns in ("200", "50"):
        monkeypatch.setenv("COLUMNS", columns)
        assert main(["races"]) == 0
        out = capsys.readouterr().out
        assert _MARKUP_NAME in out and "\x1b" not in out
    assert main(["verify", str(synthetic_race)]) == 1  # a race id its room does not make
    out = capsys.readouterr().out
    assert "verifying race x[/]y" in out and _MARKUP_NAME in out
    assert "FAIL  race id: the file names race x[/]y, but its room" in out
    assert "Riv?[2J" in out and "\x1b" not in out


def test_races_cuts_an_end_reason_no_server_gives(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tamper audit: a result's reason of 5,000 characters (verify fails it: the
    statuses give all_done) was printed whole in `solrace races`' listing. One of the
    server's end reasons is shown as it is, anything else quoted and cut."""
    data = json.loads(synthetic_race.read_text())
    data["result"]["reason"] = "y" * 5_000
    synthetic_race.write_text(json.dumps(data))
    for columns in ("200", "50"):
        monkeypatch.setenv("COLUMNS", columns)
        assert main(["races"]) == 0
        out = capsys.readouterr().out
        assert "'yyyy" in out and "(5,000 characters)" in out, out
        assert max(map(len, out.splitlines())) < 200, out


def _listed(variant: str, given: dict[str, Any]) -> str:
    """The variant cell of a room created with ``--option``s ``given``, its options
    resolved by the engine as a server lists them."""
    board = new_board(variant, given)
    room = {**_ROOM, "variant": variant}
    room["options"] = options_to_json(board.options, board.allowed_options)
    console = Console(width=140, record=True, file=io.StringIO())
    console.print(rooms_table([room]))
    row = next(line for line in console.export_text().splitlines() if "NK2HGJ" in line)
    return row.split("│")[2].strip()


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ({"scoring": "vegas", "max_passes": None}, "klondike max_passes=null scoring=vegas"),
        ({"scoring": "vegas"}, "klondike scoring=vegas"),
        ({"draw": 3, "scoring": "vegas"}, "klondike scoring=vegas draw=3"),
        (
            {"draw": 3, "scoring": "vegas", "max_passes": 1},
            "klondike scoring=vegas draw=3 max_passes=1",
        ),
        ({"max_passes": 1}, "klondike max_passes=1"),
        ({"max_passes": None}, "klondike"),
    ],
)
def test_rooms_list_the_options_that_differ_from_their_defaults_for_that_room(
    given: dict[str, Any], shown: str
) -> None:
    """An audit: ``rooms`` compared with the plain defaults, not those the room's other
    options make (Vegas scoring passes once, three times with draw 3): a Vegas room
    with unlimited passes listed as ``klondike scoring=vegas`` (which reads as one
    pass), and ``draw=3 scoring=vegas`` added ``max_passes=3``, Vegas's own default.
    Any room listed is made again by its ``--option``s."""
    listed = _listed("klondike", given)
    assert sorted(listed.split()) == sorted(shown.split())
    again = dict(_option(word) for word in listed.split()[1:])
    assert new_board("klondike", again).options == new_board("klondike", given).options


#: Runs ``solrace_client.entry.main(sys.argv[1:])`` where the modules of the client
#: extra (rich, textual) are not installed: a plain ``pip install`` of the package.
_WITHOUT_THE_CLIENT_EXTRA = textwrap.dedent(
    """
    import sys
    from importlib.abc import MetaPathFinder

    class NotInstalled(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in ("rich", "textual"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    from solrace_client.entry import main
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.parametrize("argv", [["rooms"], ["races"], ["quick"], ["--version"]])
def test_without_the_client_extra_it_says_how_to_install_it(argv: list[str]) -> None:
    """A newcomer audit: the ``solrace`` console script is installed by any ``pip
    install`` of the package — deploy/README.md's server install, the Dockerfile's —
    but without the ``client`` extra every command was a traceback ending in
    ``ModuleNotFoundError: No module named 'rich'``."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_THE_CLIENT_EXTRA, *argv],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "solrace: the terminal client needs the 'client' extra, which is not installed "
        "here (no module named 'rich'): install the package with it, e.g. "
        ".venv/bin/pip install -e '.[client]' in its checkout (docs/client.md)\n"
    )


#: A text of 100,000 characters, as a newcomer audit gave each argument.
HUGE = "9" * 100_000


@pytest.mark.parametrize(
    "argv",
    [
        ["quick", "--name", "n" + HUGE, "--server", "ws://h:1"],
        ["quick", "--name", "\udcff" + HUGE, "--server", "ws://h:1"],
        ["join", "K" + HUGE, "--server", "ws://h:1"],
        ["create", "--time-limit", "t" + HUGE, "--server", "ws://h:1"],
        ["bot", "--quick", "--delay", "d" + HUGE, "--server", "ws://h:1"],
        ["bot", "--quick", "-o", "o" + HUGE, "--server", "ws://h:1"],
        ["rooms", "--server", "garbage" + HUGE],
        ["rooms", "--server", "ws://h:x" + HUGE],
        ["verify", "r" + HUGE],
        ["c" + HUGE],
        ["rooms", "e" + HUGE],
    ],
    ids=lambda v: " ".join(v)[:30],
)
def test_an_error_quotes_at_most_an_excerpt_of_a_huge_argument(
    argv: list[str], ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer audit: an argument of 100,000 characters came back whole in its one
    error line (100 KB). Now its first characters, and how long it was."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    said = _one_line(capsys.readouterr().err)
    assert len(said) < 400 and "… (100,00" in said, said[:400]
    assert ui.calls == []


def test_a_bot_delay_past_a_minute_is_refused_in_one_line(
    ui: FakeUI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer audit: ``bot --delay`` had no upper bound (``--delay 1e9``: a bot
    that waits 30 years between moves, holding its seat). At most MAX_BOT_DELAY_S."""
    with pytest.raises(SystemExit) as exited:
        main(["bot", "--quick", "--delay", "61", "--server", "ws://h:1"])
    assert exited.value.code == 2
    assert _one_line(capsys.readouterr().err) == (
        "solrace bot: argument --delay: must be 0 to 60 seconds, got 61 seconds "
        "(see solrace bot --help)"
    )
    assert ui.calls == []
    from solrace_client.cli import MAX_BOT_DELAY_S  # one definition: docs/client.md's 60

    assert MAX_BOT_DELAY_S == 60


def test_a_race_file_named_with_an_escape_sequence_is_named_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic_race: Path
) -> None:
    """A file name is the user's text, not the terminal's: ``verify``'s first line and
    the refusal of an unreadable file wrote a name's ESC as it is, and a file named
    ``$'r\\e[31m.json'`` turned the terminal red (a newcomer walk)."""
    named = tmp_path / "r\x1b[31m.json"
    named.write_bytes(synthetic_race.read_bytes())
    assert main(["verify", str(named)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.startswith("verifying race r_synthetic")
    named.write_text("")
    for command in (["verify"], ["replay", "--print"], ["fetch", "--server", "ws://h:1"]):
        assert main([command[0], str(named), *command[1:]]) == 2
        said = _one_line(capsys.readouterr().err)
        assert "\x1b" not in said and "not a race result" in said, said


def test_races_names_a_config_directory_with_brackets_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer walk: ``races`` printed the races directory as rich markup, so a
    config directory named ``[/]x`` was a MarkupError traceback and one named
    ``[bold]x`` was said as ``x``."""
    for name in ("[/]x", "[bold]y"):
        config_dir = tmp_path / name
        monkeypatch.setenv("SOLRACE_CONFIG_DIR", str(config_dir))
        assert main(["races"]) == 0
        assert capsys.readouterr().out == f"no saved races in {config_dir / 'races'}\n"


@pytest.mark.parametrize("cluster", ["embedded"], indirect=True)
async def test_no_open_rooms_names_a_url_with_brackets_as_typed(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer walk: the "no open rooms" line was printed as rich markup, so a
    server URL whose query held ``[bold]`` lost it from the command printed to copy,
    and one whose path held ``[/]`` was a MarkupError traceback."""
    server = await cluster.node()
    for url in (f"{server.url}/?a=[bold]x", f"{server.url}/[/]"):
        assert await _run(["rooms", "--server", url]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"no open rooms on {url}; start one with:"), out
        assert out.rstrip().endswith(f"--server {url}"), out


async def test_rooms_of_a_server_that_answers_list_with_another_reply_says_so_in_a_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A faulty or hostile server that answered ``list`` with ``ok`` (no rooms): the
    client read it as ``rooms`` and `solrace rooms` ended with a KeyError traceback.
    A reply of another type than asked for closes the connection, said in a line."""
    async with fake_server(FakeRace()) as url:
        status = await asyncio.to_thread(main, ["rooms", "--server", url])
    err = capsys.readouterr().err
    assert status == EXIT_FAILED, err
    said = " ".join(err.split())
    assert said.startswith("solrace: ") and "a list answered 'ok', not 'rooms'" in said, said
