"""The bot against a scripted server that lies or stalls (tests/support/fake_server.py):
``solrace bot`` checks the race it ran as ``solrace verify`` does and exits 1 when it
does not verify; it gives up on a race that is never declared over; a reply to a
request it never sent changes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from solrace.protocol import Envelope, encode
from solrace.rules import deal
from solrace.rules.log import apply_entry
from solrace_client.bot import BotError, run_bot
from solrace_client.cli import main
from solrace_client.errors import EXIT_FAILED, EXIT_NO
from solrace_client.session import Backoff

from tests.support.fake_server import (
    SEED,
    SETTINGS,
    VARIANT,
    FakeRace,
    fake_server,
    rival_declared_winner,
)


async def _solrace_bot(url: str) -> int:
    argv = ["bot", "FAKE01", "--server", url, "--delay", "0", "--seed", "1"]
    return await asyncio.wait_for(asyncio.to_thread(main, argv), 30)


async def test_solrace_bot_exits_1_when_the_race_it_ran_does_not_verify(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It printed the server's standings and exited 0, a racer "finished" with 0/52
    cards first; only a `solrace verify` run by hand said FAIL."""
    async with fake_server(FakeRace(tamper=rival_declared_winner)) as url:
        status = await _solrace_bot(url)
    out = capsys.readouterr().out
    assert status == EXIT_NO, out
    said = " ".join(out.split())
    assert "✘ NOT VERIFIED — racer 2 (Rival): standing:" in said
    assert "status 'finished' but the replayed game is not won" in said
    assert "✔" not in out


def _own_log_cut(result: dict[str, Any]) -> None:
    """A :attr:`FakeRace.tamper`: the racer's log cut to its first move, and its
    standing made the log's (counts, times), so the result adds up on its own: what
    the bot was told live, each of its moves acknowledged, is all that contradicts it."""
    mine = next(s for s in result["standings"] if s["racer"] == 1)
    board = deal(VARIANT, SEED, SETTINGS["options"])
    apply_entry(board, mine["log"][0])
    mine.update(
        log=mine["log"][:1],
        times=mine["times"][:1],
        foundation=board.foundation_count(),
        moves=board.move_count,
        score=board.score,
        reached_ms=mine["times"][0] if board.foundation_count() else None,
    )


async def test_solrace_bot_exits_1_when_the_result_drops_a_move_the_server_acknowledged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A tamper audit: a server that revealed the racer's log cut short — three moves
    acknowledged ``moved``, one in the log, the standing made to match — got ✔ from
    the bot, which knew better: the log is the server's word to ``solrace verify``,
    not to the racer's own client."""
    async with fake_server(FakeRace(tamper=_own_log_cut)) as url:
        status = await _solrace_bot(url)
    out = capsys.readouterr().out
    assert status == EXIT_NO, out
    said = " ".join(out.split())
    assert "✘ NOT VERIFIED — racer 1 (Me): acknowledged moves: move 2 " in said, said
    assert "acknowledged, but the log revealed ends after 1 move" in said, said
    assert "✔" not in out


async def test_solrace_bot_says_verified_when_the_race_verifies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with fake_server(FakeRace()) as url:
        status = await _solrace_bot(url)
    out = capsys.readouterr().out
    assert status == 0, out
    assert "✔ verified: " in out and "NOT VERIFIED" not in out


async def test_the_bot_gives_up_on_a_race_the_server_never_ends() -> None:
    """`solrace bot` against a server that acknowledged its resign and never sent
    race_over was still waiting 45 s after the race's time limit (3 s)."""
    race = FakeRace(moves=1000, ends_in_ms=1000, race_over=False)
    async with fake_server(race) as url:
        began = time.monotonic()
        with pytest.raises(BotError) as gave_up:
            await asyncio.wait_for(
                run_bot(url, code="FAKE01", max_moves=3, race_over_grace_s=0.5, save=False),
                10,
            )
        took = time.monotonic() - began
    assert str(gave_up.value) == (
        "the server has not ended the race 0.5 s after its time limit (no race_over): giving up"
    )
    assert 1.5 <= took < 4, took  # the time limit, the grace, and not much more


async def test_the_bot_gives_up_on_a_countdown_the_server_never_ends() -> None:
    """`solrace bot` against a server that sent a countdown and never the ``started``
    that ends it (the nodes serving the room gone, its Redis down) waited for ever, as
    it did for a race never ended: it gives up the grace past the countdown's end."""
    async with fake_server(FakeRace(started=False)) as url:
        began = time.monotonic()
        with pytest.raises(BotError) as gave_up:
            await asyncio.wait_for(
                run_bot(url, code="FAKE01", race_over_grace_s=0.5, save=False), 10
            )
        took = time.monotonic() - began
    assert str(gave_up.value) == (
        "the server has not started the race 0.5 s after its countdown (no started): giving up"
    )
    assert took < 4, took  # the countdown (none here), the grace, and not much more


async def test_a_moved_reply_no_move_asked_for_does_not_stall_the_bot() -> None:
    """A ``moved`` with an id the bot never sent was taken for its move: its next seq
    ran ahead of the server's, and the bot waited forever."""
    stray = encode(Envelope("moved", id=99_999, d={"seq": 0}))
    async with fake_server(FakeRace(moves=3, after_start=[stray])) as url:
        result = await asyncio.wait_for(run_bot(url, code="FAKE01", save=False), 10)
    (mine,) = [s for s in result["standings"] if s["racer"] == 1]
    assert len(mine["log"]) == 3


async def test_solrace_bot_verbose_names_a_config_directory_with_an_escape_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``races`` and a failure line print the races directory through ``printable``;
    ``solrace bot --verbose``'s progress lines did not: its ``result saved to PATH``,
    of a config directory named with an ESC, wrote the escape to stderr as it is
    (a red terminal), one line from ``races``' fixed one."""
    config_dir = tmp_path / "c\x1b[31md"
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", str(config_dir))
    async with fake_server(FakeRace()) as url:
        argv = ["bot", "FAKE01", "--server", url, "--delay", "0", "--seed", "1", "--verbose"]
        status = await asyncio.wait_for(asyncio.to_thread(main, argv), 30)
    said = capsys.readouterr()
    assert status == 0, said
    assert "result saved to " in said.err, said.err
    assert "\x1b" not in said.err + said.out, said.err
    assert f"result saved to {tmp_path}/c?[31md/races/" in said.err, said.err


#: A race_over's fields, as the fake server sends them (its result: two standings).
_RESULT_FIELDS: list[tuple[Any, ...]] = [
    (key,) for key in ("reason", "standings", "seed", "salt", "commitment", "certificate")
] + [
    ("standings", i, key)
    for i in range(2)
    for key in (
        "racer",
        "name",
        "status",
        "place",
        "foundation",
        "moves",
        "score",
        "elapsed_ms",
        "reached_ms",
        "log",
        "times",
    )
]
_MISSING = object()
_BENT: list[object] = ["soon", [1, 2], {"a": 1}, None, 2**70, -1, 1.5, b"\xff", _MISSING]


def _bend(path: tuple[Any, ...], value: object) -> Callable[[dict[str, Any]], None]:
    """A :attr:`FakeRace.tamper` that sets the field at ``path`` to ``value`` (or
    drops it)."""

    def tamper(result: dict[str, Any]) -> None:
        parent: Any = result
        for step in path[:-1]:
            parent = parent[step]
        if value is _MISSING:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value

    return tamper


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(_RESULT_FIELDS), value=st.sampled_from(_BENT))
def test_solrace_bot_says_a_bent_race_over_in_a_line_never_a_traceback(
    path: tuple[Any, ...], value: object
) -> None:
    """A race_over with one field of the wrong type or missing (the property of
    tests/client/test_hostile_frames.py, on the whole command): ``solrace bot`` ends
    with its status and its words, never an exception; the race does not verify."""

    async def run() -> int:
        async with fake_server(FakeRace(tamper=_bend(path, value))) as url:
            return await _solrace_bot(url)

    # A race_over the client cannot read closes the connection; the fake server takes
    # no resume, and the bot's reconnects, at once here, give up, said in a line.
    with mock.patch.object(Backoff, "delay", lambda *_: 0.0):
        assert asyncio.run(run()) in (0, EXIT_FAILED, EXIT_NO)
