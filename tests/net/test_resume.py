"""Reconnects: racers resume with their token (on any node) and spectators resume
from the last version they saw, getting exactly the events they missed."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable

import pytest
from solrace.net.server import RaceServer
from solrace.protocol import SERVER_FRAME_LIMITS, SUBPROTOCOL, Envelope, decode, encode
from solrace.protocol.limits import RESUME_BURST, RESUME_INTERVAL_S
from solrace.rooms.lobby import RESUME_WAIT_MAX_MS
from solrace_client import RaceClient
from websockets.asyncio.client import connect

from tests.support.race import check_no_leaks, play_until_done, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster


async def test_a_racer_reconnects_mid_race_and_finishes(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    moves = winning_moves(SOLVABLE_SECRET)
    half = len(moves) // 2
    await play_until_done(ann, moves[:half])
    board, version = ann.board, ann.version
    room, token = ann.room, ann.token
    await ann.close()  # the connection drops
    offline = await bob.next_event("presence", timeout=10)
    assert offline.d == {"racer": 1, "online": False}
    again = await RaceClient.connect(server.url)
    joined = await again.resume(room=room, token=token, since=version)
    you = joined["snapshot"]["you"]
    assert you["next_seq"] == half and you["board"] == board
    last = await play_until_done(again, moves[half:])
    assert last["status"] == "finished"
    await bob.resign()
    over = await again.next_event("race_over", timeout=10)
    winner = over.d["standings"][0]
    assert (winner["name"], winner["place"], len(winner["log"])) == ("Ann", 1, len(moves))
    assert check_no_leaks(again.received, over.d, joined["snapshot"]["settings"], 1) > 0
    for client in (again, bob):
        await client.close()


async def test_a_new_connection_replaces_the_old_one(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    twin = await RaceClient.connect(server.url)
    await twin.resume(room=ann.room, token=ann.token, since=ann.version)
    await ann.closed
    assert ann.close_code == 1000 and ann.ws.close_reason == "replaced"
    moved = await twin.move(winning_moves(SOLVABLE_SECRET)[0])
    assert moved["seq"] == 0
    for client in (twin, bob):
        await client.close()


async def test_a_spectator_resumes_from_a_version_and_gets_exactly_what_it_missed(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    watcher = await RaceClient.connect(server.url)
    await watcher.watch(code=ann.code)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:3])
    await watcher.wait_for(lambda e: e.t == "progress" and e.d["moves"] == 3)
    seen = watcher.version
    await watcher.close()
    await play_until_done(ann, moves[3:10])  # 7 progress events while it is away
    await bob.resign()
    await bob.wait_for(lambda e: e.t == "progress" and e.d["status"] == "resigned")
    back = await RaceClient.connect(server.url)
    reply = await back.request("watch", room=ann.room, since=seen)
    replayed = [e for e in _after_reply(back) if e.v is not None]
    assert reply["replay"] == len(replayed) == 8
    assert [e.v for e in replayed] == list(range(seen + 1, seen + 9))
    assert reply["snapshot"]["version"] == seen + 8
    assert [e.d["moves"] for e in replayed[:7]] == list(range(4, 11))
    assert replayed[7].d["status"] == "resigned"
    for client in (ann, bob, back):
        await client.close()


def _after_reply(client: RaceClient) -> list:  # type: ignore[type-arg]
    frames = client.received
    index = next(i for i, e in enumerate(frames) if e.t == "watching")
    return frames[index + 1 :]


async def test_resuming_on_another_node_closes_the_old_connection_there(
    cluster: Cluster,
) -> None:
    one, two = await cluster.node(), await cluster.node()
    ann, bob = await racing(one.url)
    twin = await RaceClient.connect(two.url)
    await twin.resume(room=ann.room, token=ann.token, since=ann.version)
    await asyncio.wait_for(ann.closed, 10)
    assert ann.close_code == 1000 and ann.ws.close_reason == "replaced"
    moved = await twin.move(winning_moves(SOLVABLE_SECRET)[0])
    assert moved["seq"] == 0
    # The replaced connection did not leave a stale "offline" behind.
    progress = await bob.wait_for(lambda e: e.t == "progress" and e.d["racer"] == twin.racer)
    assert progress.d["moves"] == 1
    assert not [e for e in bob.received if e.t == "presence" and not e.d["online"]]
    for client in (twin, bob):
        await client.close()


# ------------------------------------------------------------ a reconnect loop

#: How long the reconnect loop below runs: past one resume interval, not two.
LOOP_S = 2.5


async def _resume_over_and_over(
    urls: list[str], room: str, token: str, seconds: float
) -> list[Envelope]:
    """Connect, ``resume``, close, repeat, one connection at a time (to ``urls`` in
    turn), for ``seconds``: what a buggy client's tight reconnect loop does, and what
    an audit did with a valid token. The replies, in order."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    replies = []
    while loop.time() < end:
        url = urls[len(replies) % len(urls)]
        async with connect(url, subprotocols=[SUBPROTOCOL]) as ws:
            await ws.send(encode(Envelope("resume", id=1, d={"room": room, "token": token})))
            while (reply := decode(await ws.recv(), limits=SERVER_FRAME_LIMITS)).id != 1:
                pass
        replies.append(reply)
    return replies


def _presence_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    said = ("racer online", "racer offline", "racer resumed")
    return [r.getMessage() for r in caplog.records if r.getMessage() in said]


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_racer_resuming_in_a_loop_costs_its_room_a_bounded_rate(
    cluster: Cluster, nodes: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A racer resuming its own private room's seat over and over, one connection at a
    time, made a real node write three lines a reconnect (``racer online``, ``racer
    resumed``, ``racer offline``: 950-1,000 a second) and two presence events (630 a
    second) into the room's stream, which only a round's start trims and which every
    node taking the room up folds: about 7.6 GB a day. Each connection has a fresh
    rate and work bucket, so neither bounded it. A racer now resumes RESUME_BURST times
    in a row, then once every RESUME_INTERVAL_S; one more is refused ``rate_limited``,
    with ``retry_after_ms`` (when it may), storing and logging nothing — on every node,
    as the bucket is folded from the room's stored events. Before, this test's loop of
    2 s made 773 resumes on one node: 1,546 events and 2,319 lines (735 on two)."""
    servers = [await cluster.node(rate=None) for _ in range(nodes)]
    host = await RaceClient.connect(servers[0].url)
    await host.create("yukon", "Ann", private=True, deals="random")
    room, token = host.room, host.token
    assert room is not None and token is not None
    await host.close()
    store = servers[0].node.store
    await _until(lambda: _offline(servers[0], room), 5)
    before = await store.version(room)
    with caplog.at_level(logging.INFO, logger="solrace"):
        replies = await _resume_over_and_over([s.url for s in servers], room, token, LOOP_S)
        await asyncio.sleep(0.3)  # the last close is recorded
    stored = await store.version(room) - before
    lines = _presence_lines(caplog)
    resumed = [r for r in replies if r.t == "joined"]
    refused = [r for r in replies if r.t == "error"]
    # The burst, then one resume per interval: each stores an online and, as its
    # connection closes, an offline, and says three lines.
    most = RESUME_BURST + math.floor(LOOP_S / RESUME_INTERVAL_S)
    assert RESUME_BURST < len(resumed) <= most  # one more once the interval was up
    assert stored <= 2 * most and len(lines) <= 3 * most
    assert refused and {r.d["code"] for r in refused} == {"rate_limited"}
    assert all(0 < r.d["retry_after_ms"] <= RESUME_WAIT_MAX_MS for r in refused)
    assert len(await store.events_since(room, before)) == stored
    # Refusals are a repeated line (one at once, then a count every 10 s), naming
    # who: the room, the racer and the connection's address.
    said = [r.__dict__ for r in caplog.records if r.getMessage() == "resumed again too soon"]
    assert 1 <= len(said) <= nodes
    assert (said[0]["room"], said[0]["racer"], said[0]["peer"][:10]) == (room, 1, "127.0.0.1:")


def _offline(server: RaceServer, room: str) -> bool:
    live = server.node.rooms.get(room)
    return live is not None and not any(r.online for r in live.state.racers.values())


async def _until(predicate: Callable[[], bool], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)
