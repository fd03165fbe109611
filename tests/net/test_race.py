"""Full races over real sockets, through to standings; fairness; the leak check."""

from __future__ import annotations

import asyncio

from solrace.protocol import verify
from solrace.race.fairness import round_seed
from solrace.rules import replay
from solrace_client import RaceClient

from tests.support.race import (
    check_no_leaks,
    lobby,
    play_until_done,
    racing,
    winning_moves,
)

from .conftest import SOLVABLE_SECRET, Cluster


async def _start(clients: list[RaceClient]) -> None:
    await clients[0].start()
    for client in clients:
        await client.wait_started()


async def test_full_race_three_racers_and_a_spectator_to_standings(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob, cy = await lobby(server.url, names=("Ann", "Bob", "Cy"))
    watcher = await RaceClient.connect(server.url)
    watching = await watcher.watch(code=ann.code)
    assert [r["name"] for r in watching["snapshot"]["racers"]] == ["Ann", "Bob", "Cy"]
    await _start([ann, bob, cy])
    moves = winning_moves(SOLVABLE_SECRET)
    # Bob plays a few moves and resigns; Cy plays half the game and resigns; Ann wins.
    await play_until_done(bob, moves[:5])
    await bob.resign()
    await play_until_done(cy, moves[: len(moves) // 2])
    await cy.resign()
    last = await play_until_done(ann, moves)
    assert last["status"] == "finished"
    over = await watcher.next_event("race_over", timeout=10)
    result = over.d
    places = [(s["name"], s["place"], s["status"]) for s in result["standings"]]
    assert places == [("Ann", 1, "finished"), ("Cy", 2, "resigned"), ("Bob", 3, "resigned")]
    assert result["reason"] == "all_done"
    # Fairness: the revealed seed matches the commitment published at the countdown,
    # and every log replays on that deal to the reported counts.
    settings = watching["snapshot"]["settings"]
    certificate = result["certificate"]
    assert verify(result["commitment"], result["seed"], result["salt"], certificate)
    assert not verify(result["commitment"], result["seed"], result["salt"])  # it counts
    # The deal was certified winnable: the revealed line wins it.
    assert watching["snapshot"]["deal"] is None or watching["snapshot"]["deal"]["certified"]
    won = replay(settings["variant"], result["seed"], settings["options"], certificate)
    assert won.is_won()
    for standing in result["standings"]:
        board = replay(settings["variant"], result["seed"], settings["options"], standing["log"])
        assert board.foundation_count() == standing["foundation"]
        assert board.move_count == standing["moves"]
    # The leak check: every frame every client received before race_over.
    for client in (ann, bob, cy):
        assert check_no_leaks(client.received, result, settings, client.racer) > 5
    assert check_no_leaks(watcher.received, result, settings) > 20
    for client in (ann, bob, cy, watcher):
        await client.close()


async def test_spectator_sees_boards_and_racers_see_only_progress(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await lobby(server.url)
    watcher = await RaceClient.connect(server.url)
    await watcher.watch(code=ann.code)
    await _start([ann, bob])
    await ann.move(winning_moves(SOLVABLE_SECRET)[0])
    board = await watcher.wait_for(lambda e: e.t == "board" and e.d["racer"] == ann.racer)
    assert board.d["view"]["tableau"]
    progress = await bob.wait_for(lambda e: e.t == "progress" and e.d["racer"] == ann.racer)
    assert progress.d["moves"] == 1
    # Bob never receives a board of Ann's.
    assert not [e for e in bob.received if e.t == "board" and e.d["racer"] == ann.racer]
    for client in (ann, bob, watcher):
        await client.close()


async def test_two_finishers_on_two_nodes_get_places_one_and_two_exactly_once(
    cluster: Cluster,
) -> None:
    one, two = await cluster.node(), await cluster.node()
    ann, bob = await racing(one.url, two.url)
    moves = winning_moves(SOLVABLE_SECRET)
    # Both play the same winning line at the same time, on different nodes.
    a, b = await asyncio.gather(play_until_done(ann, moves), play_until_done(bob, moves))
    assert a["status"] == b["status"] == "finished"
    over = await ann.next_event("race_over", timeout=10)
    places = sorted((s["place"], s["status"]) for s in over.d["standings"])
    assert places == [(1, "finished"), (2, "finished")]
    finished = [e for e in ann.received if e.t == "finished"]
    assert sorted(e.d["place"] for e in finished) == [1, 2]
    for client in (ann, bob):
        await client.close()


async def test_time_limit_ends_the_race_and_ranks_by_foundations(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url, time_limit_s=60)
    moves = winning_moves(SOLVABLE_SECRET)[:40]
    board = replay("yukon", round_seed(SOLVABLE_SECRET, 1), None, moves)
    assert board.foundation_count() > 0, "the test needs Bob to have cards up"
    await play_until_done(bob, moves)
    # Move the room's clock past its time limit instead of waiting a minute.
    node = server.node
    real_clock = node.clock
    node.clock = lambda: real_clock() + 61_000
    room = node.rooms[ann.room or ""]
    await node.tick(room)
    over = await ann.next_event("race_over", timeout=10)
    assert over.d["reason"] == "time_limit"
    statuses = {s["name"]: s["status"] for s in over.d["standings"]}
    assert statuses == {"Ann": "timeout", "Bob": "timeout"}
    ranking = [(s["name"], s["place"], s["foundation"]) for s in over.d["standings"]]
    assert ranking == [("Bob", 1, board.foundation_count()), ("Ann", 2, 0)]
    for client in (ann, bob):
        await client.close()


async def test_rematch_deals_a_new_seed_in_the_same_room(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    await ann.resign()
    await bob.resign()
    first = await ann.next_event("race_over", timeout=10)
    await bob.rematch()
    reset = await ann.next_event("room_reset", timeout=10)
    assert {r["name"] for r in reset.d["racers"]} == {"Ann", "Bob"}
    await bob.ready()
    await ann.start()
    countdown = await ann.next_event("countdown", timeout=10)
    assert countdown.d["commitment"] != first.d["commitment"]
    for client in (ann, bob):
        await client.close()
