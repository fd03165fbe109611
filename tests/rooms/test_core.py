"""The room core with fake peers: requests, replies, events and refusals, with no
socket anywhere (the same core runs behind solrace.net in the other tests)."""

from __future__ import annotations

from solrace.protocol import CloseReason
from solrace.rooms.counters import Tally

from tests.support.race import winning_moves

from .conftest import SOLVABLE_SECRET, Backend, FakePeer


async def _race(backend: Backend) -> tuple[FakePeer, FakePeer]:
    node = await backend.node()
    ann, bob = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="yukon", name="Ann")
    assert created.t == "joined", created.d
    code = str(created.d["code"])
    assert (await bob.ask("join", code=code, name="Bob")).t == "joined"
    assert (await bob.ask("ready", ready=True)).t == "ok"
    await ann.until(lambda f: f.t == "deal_chosen", timeout=30)
    assert (await ann.ask("start")).t == "ok"
    for peer in (ann, bob):
        await peer.until(lambda f: f.t == "started")
    return ann, bob


async def test_a_race_from_create_to_race_over_through_fake_peers(backend: Backend) -> None:
    ann, bob = await _race(backend)
    moves = winning_moves(SOLVABLE_SECRET)
    for seq, move in enumerate(moves):
        reply = await ann.ask("move", seq=seq, move=move)
        assert reply.t == "moved", reply.d
    assert reply.d["status"] == "finished"
    assert (await bob.ask("resign")).t == "ok"
    over = await bob.until(lambda f: f.t == "race_over")
    assert [s["name"] for s in over.d["standings"]] == ["Ann", "Bob"]  # type: ignore[index]
    for peer in (ann, bob):
        versions = [f.v for f in peer.events()]
        assert versions == list(range(versions[0], versions[-1] + 1))  # once each, in order
    counted = ann.node.metrics
    assert isinstance(counted, Tally) and counted.moves_accepted.value == len(moves)


async def test_refusals_are_replies_and_change_nothing(backend: Backend) -> None:
    ann, _bob = await _race(backend)
    node = ann.node
    stranger = FakePeer(node)
    assert (await stranger.ask("join", code="ZZZZZZ", name="Cy")).d["code"] == "unknown_room"
    assert (await stranger.ask("move", seq=0, move="1>F")).d["code"] == "not_racer"
    illegal = await ann.ask("move", seq=0, move="1:9>2")
    assert illegal.t == "error" and illegal.d["code"] in ("illegal_move", "bad_notation")
    assert (await ann.ask("move", seq=5, move="1>F")).d["code"] == "bad_seq"
    first = winning_moves(SOLVABLE_SECRET)[0]
    assert (await ann.ask("move", seq=0, move=first)).t == "moved"
    retried = await ann.ask("move", seq=0, move=first)  # a retry: the stored outcome
    assert retried.t == "moved" and retried.d["seq"] == 0
    refused = node.metrics
    assert isinstance(refused, Tally)
    assert refused.refused()["bad_seq"] == 1 and refused.moves_retried.value == 1


async def test_a_racer_resuming_on_another_node_closes_its_old_connection(
    backend: Backend,
) -> None:
    ann, bob = await _race(backend)
    other = await backend.node()
    again = FakePeer(other)
    token = (await ann.until(lambda f: f.t == "joined")).d["token"]
    resumed = await again.ask("resume", room=ann.room.room_id if ann.room else "", token=token)
    assert resumed.t == "joined", resumed.d
    await ann.until(lambda f: ann.closed)
    assert ann.closes == [(1000, CloseReason.REPLACED)]
    move = winning_moves(SOLVABLE_SECRET)[0]
    assert (await again.ask("move", seq=0, move=move)).t == "moved"
    seen = await bob.until(lambda f: f.t == "progress")  # bob's node tails the room now
    assert seen.d["racer"] == 1


async def test_a_room_check_tells_its_own_moves_in_flight_from_another_nodes(
    backend: Backend,
) -> None:
    """The once-a-second room check starts tailing a room only when Redis stays ahead
    of what the node folded: its own move between append and fold is not another
    node's event (it would have made every busy room "shared" and read back)."""
    node = await backend.node()
    ann = FakePeer(node)
    await ann.ask("create", variant="yukon", name="Ann")
    assert ann.room is not None
    room = ann.room
    folded = room.state.version
    node._check_alone(room, folded + 1)  # its own append, not folded yet
    room.state.version = folded + 1  # ... folded by the next check
    node._check_alone(room, folded + 1)
    assert not room.shared
    node._check_alone(room, folded + 2)  # now something nobody here folds
    node._check_alone(room, folded + 2)
    assert room.shared
