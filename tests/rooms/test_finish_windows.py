"""A finish against a copy of the room that has not folded it yet.

A finish is its racer's last move: the place it took is the racer's for the round.
A node decides whether a racer may still move on its own copy of the room, which can
be behind the store (its tail held up: paused, cut off from Redis, or merely slower
than the node that stored the finish). The store must then refuse what the rules
refuse — nothing may follow a finish in its log — or the racer keeps a place its log
no longer earns (docs/store.md, "Closed logs").
"""

from __future__ import annotations

import pytest
from solrace.protocol import CloseCode, CloseReason
from solrace.protocol.envelope import Envelope
from solrace.protocol.views import EventType, RacerStatus
from solrace.race import RacerGame
from solrace.rooms import lobby, requests
from solrace.rules.log import UNDO

from tests.net.conftest import SOLVABLE_SECRET
from tests.support.faults import Clock
from tests.support.race import winning_moves

from .conftest import Backend, FakePeer
from .test_core import _race_on
from .test_fault_windows import _reply_lost_once, _stored, _tail_held


async def test_nothing_follows_a_finish_stored_by_another_node(backend: Backend) -> None:
    """Bob races on node B. He resumes on node A (his reply lost, say) and finishes
    there: place 1. B has not folded that yet, so his old connection on B still looks
    like a playing racer's, and it sends an ``undo`` (undo is on). It was stored: Bob
    held place 1 with a log that no longer won, and played on (the race waited for him
    until its time limit; finishing again would have taken him a second place). It
    must be refused (``your race is over``), nothing stored."""
    clock = Clock()
    node_a, node_b = await backend.node(clock), await backend.node(clock)
    race = await _race_on(node_a, node_b)
    ann, bob = race.ann, race.bob
    assert race.settings["options"]["undo"]
    line = winning_moves(SOLVABLE_SECRET)
    for seq, move in enumerate(line[:-1]):
        assert (await bob.ask("move", seq=seq, move=move)).t == "moved"
    room_b = bob.room
    assert room_b is not None
    bob_id = bob.racer
    assert bob_id is not None

    release = await _tail_held(node_b)
    bob_on_a = FakePeer(node_a)
    resumed = await bob_on_a.ask("resume", room=room_b.room_id, token=race.bob_token)
    assert resumed.t == "joined", resumed.d
    won = await bob_on_a.ask("move", seq=len(line) - 1, move=line[-1])
    assert (won.t, won.d["status"]) == ("moved", RacerStatus.FINISHED), won.d
    assert room_b.state.racers[bob_id].status == RacerStatus.PLAYING  # B's copy is stale

    undo = Envelope("move", id=10**6, d={"seq": len(line), "move": UNDO})  # (an id unused)
    await requests.handle(node_b, bob, undo)
    replies = [f for f in bob.frames if f.id == undo.id]
    assert not any(f.t == "moved" for f in replies), replies
    # Refused, B folds the room: Bob's connection there was replaced by the one on A,
    # so B closes it (the refusal goes nowhere, as on a closing socket).
    assert bob.closes == [(CloseCode.NORMAL, CloseReason.REPLACED)], bob.closes
    log = await node_a.store.move_log(room_b.room_id, room_b.log_name(bob_id))
    assert len(log) == len(line)
    stored = await _stored(node_a, room_b)
    bob_progress = [
        e.d["status"] for e in stored if e.t == EventType.PROGRESS and e.d["racer"] == bob_id
    ]
    assert bob_progress[-1] == RacerStatus.FINISHED, bob_progress
    release.set()

    # The race goes on for Ann alone, and Bob's win stands when it ends.
    assert (await ann.ask("resign")).t == "ok"
    over = await ann.until(lambda f: f.t == "race_over")
    first = over.d["standings"][0]  # type: ignore[index]
    assert (first["name"], first["status"], first["log"]) == ("Bob", "finished", line), first


@pytest.mark.parametrize("then", ["retried", "dropped"])
async def test_a_last_finish_whose_reply_is_lost_ends_the_race_at_once(
    backend: Backend, then: str
) -> None:
    """Bob resigned; Ann, the last racer playing, finishes, Redis takes the move and
    its reply is lost (the node answers ``unavailable``, not knowing). Her client
    retries the move and is told it is stored (finished), or her connection drops.
    Nothing folded the finish after a retry: the node does not read back its own
    writes, and a retry answered from the log decides nothing, so only the room check
    ended the race, once two checks running had found Redis ahead (1-2 s later; the
    checks are off here). The node now ticks the room at once after a finish whose
    outcome it does not know: the race_over reaches Bob, Ann 1st, either way."""
    node = await backend.node()
    node.check_rooms = _no_checks  # type: ignore[method-assign]
    race = await _race_on(node, node)
    ann, bob = race.ann, race.bob
    assert (await bob.ask("resign")).t == "ok"
    line = winning_moves(SOLVABLE_SECRET)
    for seq, move in enumerate(line[:-1]):
        assert (await ann.ask("move", seq=seq, move=move)).t == "moved"
    lost = _reply_lost_once(node.store, "append_move", lambda *_a, **_k: True)
    last = {"seq": len(line) - 1, "move": line[-1]}
    refused = await ann.ask("move", **last)
    assert lost and refused.d["code"] == "unavailable", refused.d
    if then == "retried":
        retried = await ann.ask("move", **last)
        assert (retried.t, retried.d["status"]) == ("moved", RacerStatus.FINISHED), retried.d
    else:
        ann.closed = True  # no retry comes
        await lobby.disconnected(node, ann)
    over = await bob.until(lambda f: f.t == "race_over", timeout=1)
    first = over.d["standings"][0]  # type: ignore[index]
    assert (first["name"], first["status"], first["log"]) == ("Ann", "finished", line), first


async def test_a_last_racers_stuck_move_whose_reply_is_lost_ends_the_race_at_once(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a room without undo a move that leaves its racer no legal move ends her
    race, as a finish does (RoomState.playing). Bob resigned; Ann's move leaves her
    stuck, Redis takes it and its reply is lost: as for a finish, nothing here folds
    it, and only the room check ended the race (1-2 s later; off here). The node ticks
    the room at once after any move that ends its racer's race. (Which move of the
    deal leaves her stuck is not the point: the rules' status is made so.)"""
    node = await backend.node()
    node.check_rooms = _no_checks  # type: ignore[method-assign]
    race = await _race_on(node, node, options={"undo": False})
    ann, bob = race.ann, race.bob
    assert (await bob.ask("resign")).t == "ok"
    line = winning_moves(SOLVABLE_SECRET)
    real = RacerGame.status

    def status(game: RacerGame) -> str:
        return RacerStatus.STUCK if game.seq > 1 else real(game)

    monkeypatch.setattr(RacerGame, "status", status)
    assert (await ann.ask("move", seq=0, move=line[0])).d["status"] == RacerStatus.PLAYING
    lost = _reply_lost_once(node.store, "append_move", lambda *_a, **_k: True)
    refused = await ann.ask("move", seq=1, move=line[1])
    assert lost and refused.d["code"] == "unavailable", refused.d
    over = await bob.until(lambda f: f.t == "race_over", timeout=1)
    standings = {s["name"]: s["status"] for s in over.d["standings"]}  # type: ignore[union-attr]
    assert standings == {"Ann": RacerStatus.STUCK, "Bob": RacerStatus.RESIGNED}, standings


async def _no_checks() -> None:
    """Node.check_rooms, off: the room check's catch-up is not what ends the race."""
