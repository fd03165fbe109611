"""``solrace-server`` without a Redis URL, stopped and started again mid-race on the same
``--data-dir``, lets the racers resume (issue 10, "done when"): the real console script,
the real embedded engine, the client library's resume and verify.

Stopped two ways: SIGTERM (the node drains, then stops its engine, which fsyncs and
exits), and SIGKILL of the engine and then of the node (nothing is shut down: what was
acknowledged must already be in the append-only file)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from solrace.protocol import Envelope
from solrace.store.embedded import PID_NAME
from solrace_client import RaceClient, ServerError
from solrace_client.boardview import board_from_view
from solrace_client.results import SavedResult, race_id
from solrace_client.verify import verify_result

from tests.support.race import play_until_refused, racing
from tests.support.server_process import SERVER_SCRIPT, ServerProcess, solrace_server
from tests.support.stack import http_get


async def _play(client: RaceClient, count: int, rng: random.Random) -> list[str]:
    """Up to ``count`` random legal moves; the ones the server acknowledged."""
    acked: list[str] = []
    for _ in range(count):
        moves = board_from_view(client.board or {}).legal_moves()
        if not moves:
            break
        move = str(rng.choice(moves))
        reply = await client.move(move)
        acked.append(move)
        if reply["status"] != "playing":
            break
    return acked


async def _stop(server: ServerProcess, *clients: RaceClient) -> None:
    """Stop the server as an operator does before a restore (SIGTERM: it drains), and
    its clients once it has closed them."""
    server.proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(server.proc.wait(), 15) == 0, server.log
    await _closed(*clients)


async def _closed(*clients: RaceClient) -> None:
    """Each client, once the stopped server has closed its connection, closed."""
    for client in clients:
        await asyncio.wait_for(client.closed, 10)
        await client.close()


def _restore_copy(data: Path, copy: Path, tmp_path: Path) -> None:
    """Put the copy of the data directory in its place (docs/server.md's restore)."""
    data.rename(tmp_path / "aside")
    copy.rename(data)


def _log_moves(standing: dict[str, Any]) -> list[str]:
    """A standing's move log as notation (entries may carry more than the move)."""
    return [str(e["move"] if isinstance(e, dict) else e) for e in standing["log"]]


async def _resign_and_check_logs(
    clients: dict[str, RaceClient], acked: dict[str, list[str]]
) -> Envelope:
    """Every racer resigns (unless already stuck or finished); the race_over, seen by
    the first, whose standings hold each racer's acknowledged moves, in order."""
    for client in clients.values():
        with contextlib.suppress(ServerError):  # already stuck or finished
            await client.resign()
    over = await next(iter(clients.values())).next_event("race_over", timeout=30)
    standings = {s["name"]: s for s in over.d["standings"]}
    for name in acked:
        assert _log_moves(standings[name]) == acked[name]
    return over


def _assert_verifies(
    room: str, settings: dict[str, Any], result: Mapping[str, Any], published: str
) -> None:
    """The race's result, saved as the client saves it, passes the client's verify."""
    saved = SavedResult(
        race=race_id(room, result),
        room=room,
        settings=settings,
        result=dict(result),
        published_commitment=published,
    )
    report = verify_result(saved)
    assert report.ok, report.failures


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
async def test_a_restarted_server_resumes_the_race_with_every_acknowledged_move(
    stop: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    rng = random.Random(7)
    async with solrace_server(data_dir=data) as first:
        ann, bob = await racing(first.url)
        published, settings = str(ann.view.published_commitment), dict(ann.view.settings)
        acked = {"Ann": await _play(ann, 8, rng), "Bob": await _play(bob, 5, rng)}
        boards = {"Ann": ann.board, "Bob": bob.board}
        tokens = {"Ann": ann.token, "Bob": bob.token}
        room = ann.room
        assert room is not None and all(acked.values())
        engine = int((data / PID_NAME).read_text())
        if stop == "sigterm":
            await _stop(first, ann, bob)
            assert "stopped" in first.log
        else:
            os.kill(engine, signal.SIGKILL)
            first.proc.kill()
            await first.proc.wait()
            first.expect_clean_exit = False
            await _closed(ann, bob)

    async with solrace_server(data_dir=data) as second:
        assert f"data in {data};" in second.log
        back: dict[str, RaceClient] = {}
        for name in ("Ann", "Bob"):
            client = back[name] = await RaceClient.connect(second.url)
            resumed = await client.resume(room=room, token=tokens[name], since=None)
            you = resumed["snapshot"]["you"]
            assert you["next_seq"] == len(acked[name]), (name, you, second.log)
            assert you["board"] == boards[name]
        acked["Ann"] += await _play(back["Ann"], 6, rng)
        acked["Bob"] += await _play(back["Bob"], 6, rng)
        over = await _resign_and_check_logs(back, acked)
        _assert_verifies(room, settings, over.d, published)
        for client in back.values():
            await client.close()


async def test_a_second_server_on_the_same_data_dir_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    async with solrace_server(data_dir=data) as first:
        done = await asyncio.to_thread(
            subprocess.run,
            [str(SERVER_SCRIPT), "--port", "0", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert (
            f"cannot start: data directory {data} is in use by another solrace-server" in (lines[0])
        )
        assert str(first.proc.pid) in lines[0]
        client = await RaceClient.connect(first.url)  # the first one still serves
        assert await client.list_rooms() == []
        await client.close()


async def test_an_engine_killed_under_a_running_server_is_restarted_and_the_race_goes_on(
    tmp_path: Path,
) -> None:
    """The engine SIGKILLed mid-race while the node runs (as the kernel's OOM killer
    would; a full disk makes it exit by itself): the node restarts it on its data
    directory, and the same connections play on without a restart of the node, every
    move acknowledged before the kill still in the racers' logs. Before, every request
    was ``unavailable`` until an operator restarted solrace-server."""
    data = tmp_path / "data"
    rng = random.Random(11)
    async with solrace_server(data_dir=data) as server:
        ann, bob = await racing(server.url)
        acked = {"Ann": await _play(ann, 6, rng), "Bob": await _play(bob, 4, rng)}
        assert all(acked.values())
        engine = int((data / PID_NAME).read_text())
        os.kill(engine, signal.SIGKILL)
        async with asyncio.timeout(15):
            while "the embedded engine is back" not in server.log:
                await asyncio.sleep(0.05)
        assert f"the embedded engine (pid {engine}) was killed by signal SIGKILL" in server.log
        assert int((data / PID_NAME).read_text()) != engine
        acked["Ann"] += await _play(ann, 4, rng)
        acked["Bob"] += await _play(bob, 4, rng)
        async with asyncio.timeout(10):  # 200 again once the node's own calls succeed
            while (await http_get(urlsplit(server.url).port or 0, "/healthz"))[0] != 200:
                await asyncio.sleep(0.1)
        await _resign_and_check_logs({"Ann": ann, "Bob": bob}, acked)
        for client in (ann, bob):
            await client.close()


async def test_a_copy_of_the_data_directory_taken_while_serving_restores_the_race(
    tmp_path: Path,
) -> None:
    """docs/server.md's backup and restore, as an operator does them: ``cp -a`` of the
    data directory while the node serves, then (the node stopped) the copy put in its
    place. The race resumes as it was at the copy; a move acknowledged after it is
    gone, and the racer who had seen it is resynchronised and the loss logged."""
    data, copy = tmp_path / "data", tmp_path / "copy"
    rng = random.Random(11)
    async with solrace_server(data_dir=data) as first:
        ann, bob = await racing(first.url)
        published, settings = str(ann.view.published_commitment), dict(ann.view.settings)
        acked = {"Ann": await _play(ann, 6, rng), "Bob": await _play(bob, 4, rng)}
        boards = {"Ann": ann.board, "Bob": bob.board}
        subprocess.run(["cp", "-a", str(data), str(copy)], check=True)  # as documented
        assert await _play(ann, 3, rng)  # acknowledged after the copy: lost
        async with asyncio.timeout(10):  # Bob has seen them too (a CI run under load:
            while bob.version != ann.version:  # not yet, so he had nothing to resync)
                await asyncio.sleep(0.02)
        seen = {"Ann": ann.version, "Bob": bob.version}
        tokens = {"Ann": ann.token, "Bob": bob.token}
        room = ann.room
        await _stop(first, ann, bob)
    _restore_copy(data, copy, tmp_path)
    async with solrace_server(data_dir=data) as second:
        back: dict[str, RaceClient] = {}
        for name in ("Ann", "Bob"):
            client = back[name] = await RaceClient.connect(second.url)
            resumed = await client.resume(room=room, token=tokens[name], since=seen[name])
            await client.wait_for(lambda e: e.t == "resync")
            you = resumed["snapshot"]["you"]
            assert you["next_seq"] == len(acked[name]), (name, you, second.log)
            assert client.board == boards[name]
        assert "Redis lost acknowledged writes" in second.log, second.log
        acked["Ann"] += await _play(back["Ann"], 4, rng)
        over = await _resign_and_check_logs(back, acked)
        _assert_verifies(room or "", settings, over.d, published)
        for client in back.values():
            await client.close()


async def test_a_race_that_ended_after_the_copy_is_not_raced_again_after_a_restore(
    tmp_path: Path,
) -> None:
    """docs/server.md's restore of a copy taken mid-race, the race ending after it: the
    restarted node has no memory of the race_over, and the store says the race is under
    way. Before, Ann, holding the revealed seed and certificate, played the certificate
    and was placed 1st (an audit: 72 moves, 10.5 s). Her client sends the race_over's
    seed and salt with its resume: the race ends at once, as at its time limit, and
    takes none of her moves; the node logs it as a warning."""
    data, copy = tmp_path / "data", tmp_path / "copy"
    async with solrace_server(data_dir=data) as first:
        ann, bob = await racing(first.url)
        subprocess.run(["cp", "-a", str(data), str(copy)], check=True)  # as documented
        await ann.resign()
        await bob.resign()
        revealed = await ann.next_event("race_over", timeout=10)
        line = list(revealed.d["certificate"] or [])
        assert line, "a winnable room reveals its certificate"
        await _stop(first, ann, bob)
    _restore_copy(data, copy, tmp_path)
    async with solrace_server(data_dir=data) as second:
        back = await RaceClient.connect(second.url, view=ann.view)  # Ann's client
        back.room, back.code, back.token = ann.room, ann.code, ann.token
        joined = await back.resume()
        assert joined["snapshot"]["phase"] == "racing"
        played, refused = await play_until_refused(back, line)
        assert (refused, played[-1:]) == (["wrong_phase"], []), (refused, len(played), played[-1:])
        over = await back.wait_for(lambda e: e.t == "race_over", timeout=10)
        assert over.d["reason"] == "time_limit", over.d["reason"]
        assert [s["status"] for s in over.d["standings"]] == ["timeout", "timeout"]
        assert "proved the round's seed was already revealed" in second.log, second.log
        await back.close()
