"""Reconnects: racers resume with their token (on any node) and spectators resume
from the last version they saw, getting exactly the events they missed."""

from __future__ import annotations

import asyncio

from solrace_client import RaceClient

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
