"""Several nodes on one store: a room spread over nodes, a node restarted mid-race,
and a store failure in the middle of a move."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from solrace.store.errors import StoreUnavailable
from solrace_client import RaceClient, ServerError
from solrace_client.boardview import board_from_view

from tests.support.race import check_no_leaks, play_until_done, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster


async def test_racers_of_one_room_on_two_nodes_with_a_spectator_on_a_third(
    cluster: Cluster,
) -> None:
    one, two, three = await cluster.node(), await cluster.node(), await cluster.node()
    ann = await RaceClient.connect(one.url)
    bob = await RaceClient.connect(two.url)
    watcher = await RaceClient.connect(three.url)
    await ann.create("yukon", "Ann")
    await bob.join(ann.code or "", "Bob")
    await watcher.watch(code=ann.code)
    await ann.wait_for(lambda e: e.t == "racer_joined" and e.d["name"] == "Bob")
    await bob.ready()
    await ann.wait_for(lambda e: e.t == "ready_changed")
    await ann.start()
    for client in (ann, bob, watcher):
        await client.next_event("started", timeout=10)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(bob, moves[:10])
    seen = await ann.wait_for(lambda e: e.t == "progress" and e.d["moves"] == 10)
    assert seen.d["racer"] == bob.racer
    assert (await play_until_done(ann, moves))["status"] == "finished"
    await bob.resign()
    over = await watcher.next_event("race_over", timeout=10)
    assert [s["name"] for s in over.d["standings"]] == ["Ann", "Bob"]
    # Every node delivered the same events in the same order, without gaps.
    for client in (ann, bob, watcher):
        versions = [e.v for e in client.received if e.v is not None]
        assert versions == list(range(versions[0], versions[-1] + 1))
    settings = ann.snapshot["settings"]  # type: ignore[index]
    assert check_no_leaks(watcher.received, over.d, settings) > 10
    for client in (ann, bob, watcher):
        await client.close()


async def test_a_node_tails_a_room_only_once_another_node_serves_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone in a room, a node folds its own appends and reads nothing back; when a
    second node starts serving the room, the first is woken and tails it, so the
    second node's events reach the first node's racers, once each and in order."""
    one = await cluster.node()
    tailed: list[set[str]] = []
    real_tail = one.node.store.tail

    async def spy(positions: Mapping[str, int], block_ms: int, **kw: Any) -> Any:
        tailed.append(set(positions))
        return await real_tail(positions, block_ms, **kw)

    monkeypatch.setattr(one.node.store, "tail", spy)
    ann, bob = await racing(one.url)
    room = ann.room or ""
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:10])
    await bob.wait_for(lambda e: e.t == "progress" and e.d["moves"] == 10)
    assert not any(room in rooms for rooms in tailed)  # nothing read back
    two = await cluster.node()
    await bob.close()
    bob_again = await RaceClient.connect(two.url)
    await bob_again.resume(room=room, token=bob.token, since=bob.version)
    await play_until_done(bob_again, moves[:5])
    seen = await ann.wait_for(lambda e: e.t == "progress" and e.d["racer"] == bob.racer)
    assert seen.d["moves"] >= 1
    assert any(room in rooms for rooms in tailed)
    await play_until_done(ann, moves[10:])
    await bob_again.resign()
    await ann.next_event("race_over", timeout=10)
    versions = [e.v for e in ann.received if e.v is not None]
    assert versions == list(range(versions[0], versions[-1] + 1))  # once each, in order
    for client in (ann, bob_again):
        await client.close()


async def test_a_lost_wake_up_between_joining_and_waking_still_delivers(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Joining a room's node set and waking the other nodes are two writes. If the
    wake-up is lost between them (the joining node dies, Redis restarts without it),
    the node alone in the room still learns of the other's events: its room check finds
    Redis ahead of what it folded, twice running, and tails the room."""
    one = await cluster.node()
    ann, bob = await racing(one.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:3])
    two = await cluster.node()

    async def lost(node_ids: Any, room_id: str) -> None:
        return None  # the XADD never happened

    monkeypatch.setattr(two.node.store, "wake", lost)
    await bob.close()
    bob_again = await RaceClient.connect(two.url)
    await bob_again.resume(room=bob.room, token=bob.token, since=bob.version)
    await play_until_done(bob_again, moves[:4])
    seen = await ann.wait_for(
        lambda e: e.t == "progress" and e.d["racer"] == bob.racer and e.d["moves"] == 4,
        timeout=10,
    )
    assert seen.d["moves"] == 4
    room = one.node.rooms[ann.room or ""]
    assert room.shared  # tailed from now on
    versions = [e.v for e in ann.received if e.v is not None]
    assert versions == list(range(versions[0], versions[-1] + 1))  # once each, in order
    for client in (ann, bob_again):
        await client.close()


async def test_a_node_restarted_mid_race_loses_nothing_acknowledged(cluster: Cluster) -> None:
    first = await cluster.node()
    ann, bob = await racing(first.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:25])
    acknowledged = ann.board
    await cluster.kill(first)  # the node dies; its connections drop
    await ann.closed
    restarted = await cluster.node()
    again = await RaceClient.connect(restarted.url)
    joined = await again.resume(room=ann.room, token=ann.token, since=ann.version)
    you = joined["snapshot"]["you"]
    assert you["next_seq"] == 25 and you["board"] == acknowledged
    bob_again = await RaceClient.connect(restarted.url)
    await bob_again.resume(room=bob.room, token=bob.token, since=bob.version)
    assert (await play_until_done(again, moves[25:]))["status"] == "finished"
    await bob_again.resign()
    over = await again.next_event("race_over", timeout=10)
    assert over.d["standings"][0]["log"] == moves
    for client in (again, bob_again):
        await client.close()


async def test_a_store_failure_during_a_move_leaves_nothing_applied(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await ann.move(moves[0])
    before = ann.board
    store = server.node.store
    real_append = store.append_move

    async def failing(*args: object, **kwargs: object) -> object:
        raise StoreUnavailable("redis went away")

    monkeypatch.setattr(store, "append_move", failing)
    with pytest.raises(ServerError) as refused:
        await ann.move(moves[1])
    assert refused.value.code == "unavailable" and refused.value.data["seq"] == 1
    monkeypatch.setattr(store, "append_move", real_append)
    # The move was not applied: the resumed board is the one before it, and the same
    # seq now succeeds exactly once.
    joined = await ann.resume()
    assert joined["snapshot"]["you"]["board"] == before
    assert joined["snapshot"]["you"]["next_seq"] == 1
    moved = await ann.move(moves[1])
    assert moved["seq"] == 1 and moved["moves"] == 2
    for client in (ann, bob):
        await client.close()


async def _play_legal(client: RaceClient, count: int) -> None:
    """``count`` moves of the client's own board (the first legal one each time that
    is not ``undo``): a deal whose winning line the test does not know."""
    for _ in range(count):
        board = board_from_view(client.board or {})
        legal = [str(m) for m in board.legal_moves()]
        if not legal:
            return
        if (await client.move(legal[0]))["status"] != "playing":
            return


async def test_racers_dropping_out_one_by_one_across_nodes_leak_nothing_in_either_round(
    cluster: Cluster,
) -> None:
    """Three racers on two nodes and a spectator on a third: one finishes while the
    others race, one resigns, the last plays on (each leaves fair spectating's count
    as it goes), then a rematch. Neither round shows the spectator a card a racer
    still racing had not turned up. (The dropping-out paths had no leak check across
    nodes: an audit's.)"""
    one, two, three = await cluster.node(), await cluster.node(), await cluster.node()
    ann, bob, cy = await racing(
        one.url, two.url, names=("Ann", "Bob", "Cy"), spectator_delay_s=0, max_racers=3
    )
    watcher = await RaceClient.connect(three.url)
    await watcher.watch(code=ann.code)
    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(bob, moves[:8])
    assert (await play_until_done(ann, moves))["status"] == "finished"
    await play_until_done(cy, moves[:4])
    await play_until_done(bob, moves[8:20])
    await bob.resign()
    await play_until_done(cy, moves[4:30])
    await cy.resign()
    over = await watcher.next_event("race_over", timeout=10)
    settings = ann.snapshot["settings"]  # type: ignore[index]
    assert check_no_leaks(watcher.received, over.d, settings) > 20
    # Round 2, the same three: its own deal, its frames checked from its reset on.
    for client in (ann, bob, cy):
        await client.wait_for(lambda e: e.t == "race_over", timeout=10)
    await ann.rematch()
    for client in (bob, cy):
        await client.wait_for(lambda e: e.t == "room_reset", timeout=10)
        await client.ready()
    for _ in (bob, cy):
        await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"], timeout=10)
    await ann.start()
    for client in (ann, bob, cy):
        await client.wait_started()
    reset = max(i for i, e in enumerate(watcher.received) if e.t == "room_reset")
    await _play_legal(cy, 15)
    await _play_legal(ann, 5)
    await ann.resign()
    await _play_legal(bob, 15)
    await bob.resign()
    await cy.resign()
    over = await watcher.wait_for(lambda e: e.t == "race_over", timeout=10)
    assert check_no_leaks(watcher.received[reset:], over.d, settings) > 10
    for client in (ann, bob, cy, watcher):
        await client.close()
