"""An attacker holding a racer's token and any number of other connections learns no
face-down card, no seed, no salt and no certificate before ``race_over``
(docs/fairness.md), through any interface the node offers: its own connection (moves,
refusals, a resume's snapshot and replay), a second connection watching the room, an
idle connection listing rooms and asking for the race's result by its id (the room and
the commitment, both public from the countdown), and the node's HTTP answers
(``/healthz``, its JSON report, ``/metrics``, the page a browser gets).

tests/net/test_fair_spectating.py holds the spectator rule itself; this file is the
audit that walks every other way in during one race (and the rematch's next round)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

import pytest
from solrace.protocol import race_id
from solrace.protocol.fairness import certificate_digest
from solrace_client import RaceClient, ServerError

from tests.support.race import check_no_leaks, play_until_done, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster
from .test_nodes import _play_legal

#: Paths of the node's HTTP port an attacker may ask, with queries.
HTTP_PATHS = ("/healthz", "/healthz?format=json", "/healthz?probe=live", "/metrics", "/", "/x")


def _get(port: int, path: str) -> str:
    """The body the node answers ``path`` with, whatever its status."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as exc:
        return str(exc.read().decode())


async def _http_bodies(port: int) -> list[str]:
    return [await asyncio.to_thread(_get, port, path) for path in HTTP_PATHS]


def _notations(columns: int) -> Iterable[str]:
    """A move of every notation form to and from every column (and one past), many
    of them refused: each refusal's words are checked for cards."""
    yield from ("D", "R", "W>F", "undo")
    for c in range(1, columns + 2):
        yield from (f"{c}>F", f"W>{c}", f"U{c}", f"FH>{c}", f"FS2>{c}")
        for d in range(1, columns + 2):
            if c != d:
                yield from (f"{c}:1>{d}", f"{c}:3>{d}", f"{c}:9>{d}")


def _secrets_in(text: str, result: dict[str, Any]) -> list[str]:
    """Which of the round's secrets ``text`` holds."""
    seed, salt, line = result["seed"], result["salt"], result["certificate"]
    found = [name for name, value in (("seed", str(seed)), ("salt", salt)) if value in text]
    if f"{seed:x}" in text.lower() and len(f"{seed:x}") >= 8:
        found.append("seed (hex)")
    if line and certificate_digest(line).hex() in text:
        found.append("certificate digest")
    return found


def _commitment(client: RaceClient) -> str:
    (countdown,) = [e for e in client.received if e.t == "countdown"][-1:]
    return str(countdown.d["commitment"])


async def test_a_racer_with_every_other_way_in_learns_no_hidden_card_or_seed(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)  # Bob is the attacker: his token and more
    room = bob.room
    assert room is not None
    spy = await RaceClient.connect(server.url)  # Bob's second window, watching
    await spy.watch(code=bob.code)
    idle = await RaceClient.connect(server.url)  # Bob's third, in no room
    race = race_id(room, _commitment(bob))
    moves = winning_moves(SOLVABLE_SECRET)
    # Ann turns up many cards Bob has not: everything Bob reaches now could name one.
    await play_until_done(ann, moves[: len(moves) // 2])
    await play_until_done(bob, moves[:2])
    bodies = await _http_bodies(server.port)
    refusals: list[str] = []
    for move in _notations(len(bob.board["tableau"])):  # type: ignore[index]
        try:
            await bob.move(move)
        except ServerError as exc:
            refusals.append(exc.code)
        else:
            break  # a move the rules took: its board is checked like any other
    assert "illegal_move" in refusals
    # The race's result by its id, before it ends: there is none to send.
    for asked in (race, f"{room}.nocommit"):
        try:
            await idle.fetch_result(asked)
        except ServerError as exc:
            assert exc.code == "unknown_race", exc
        else:
            raise AssertionError(f"a result of {asked} was sent while its race was under way")
    listed = await idle.list_rooms()
    assert any(r["room"] == room for r in listed)
    # Bob comes back on a fourth connection: the snapshot and the events he missed.
    again = await RaceClient.connect(server.url)
    await again.resume(room=room, token=bob.token, since=1)
    bodies += await _http_bodies(server.port)
    await ann.resign()
    await again.resign()
    over = await spy.next_event("race_over", timeout=10)
    await again.next_event("race_over", timeout=10)
    result, settings = dict(over.d), spy.snapshot["settings"]  # type: ignore[index]
    for body in bodies:
        assert not _secrets_in(body, result), body[:200]
    assert check_no_leaks(spy.received, result, settings) > 5
    assert check_no_leaks(idle.received, result, settings) > 2
    for client in (ann, bob, again):
        assert check_no_leaks(client.received, result, settings, client.racer) > 2
    # The result is there once the race is over.
    archived = await idle.fetch_result(race)
    assert archived["result"]["seed"] == result["seed"]
    # Round 2, a rematch: round 1's race_over is in every connection's history now, and
    # the new round's countdown commits a deal of its own, whose result is not there
    # while it is raced.
    await ann.rematch()
    await again.wait_for(lambda e: e.t == "room_reset", timeout=10)
    await again.ready()
    await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"], timeout=10)
    await ann.start()
    for client in (ann, again):
        await client.wait_started()
    second = race_id(room, _commitment(again))
    assert second != race
    frames = {id(c): len(c.received) for c in (ann, again, spy, idle)}
    await _play_legal(ann, 12)
    await _play_legal(again, 3)
    with pytest.raises(ServerError, match="unknown_race"):
        await idle.fetch_result(second)
    assert (await idle.fetch_result(race))["result"] == archived["result"]
    bodies = await _http_bodies(server.port)
    await ann.resign()
    await again.resign()
    first = over.v or 0
    over = await spy.wait_for(lambda e: e.t == "race_over" and (e.v or 0) > first, timeout=10)
    result = dict(over.d)
    for body in bodies:
        assert not _secrets_in(body, result), body[:200]
    assert check_no_leaks(spy.received[frames[id(spy)] :], result, settings) > 5
    assert check_no_leaks(idle.received[frames[id(idle)] :], result, settings) > 0
    for client in (ann, again):
        round_two = client.received[frames[id(client)] :]
        assert check_no_leaks(round_two, result, settings, client.racer) > 2
    for client in (ann, bob, spy, idle, again):
        await client.close()
