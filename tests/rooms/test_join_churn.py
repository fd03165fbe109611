"""A lobby's joins are bounded per address (decisions.join_too_soon): a client that
joins a room and leaves it in a loop (its host staying, so the lobby never closes)
stored a ``racer_joined`` and a ``racer_left`` each time, and a racer's token, in a
room that keeps them until its next rematch (its stream) or its expiry (the tokens).
A soak audit measured 10 cycles a second from one connection at the client library's
pace: 20 events and 10 tokens a second, 1.7 million events (about 340 MB) a day in
one room. Through the room core with fake peers on every store."""

from __future__ import annotations

import time

from solrace.protocol.limits import JOIN_BURST, JOIN_INTERVAL_S
from solrace.race.events import EventType
from solrace.rooms.clock import SLEW_MS_PER_S
from solrace.rooms.lobby import JOIN_WAIT_MAX_MS
from solrace.rooms.node import Node
from solrace.rooms.records import unpack_event

from .conftest import Backend, FakePeer


class Clock:
    """A node's race clock (ms) that a test moves ahead; ``frozen``, it moves only
    then (a slow run must not refill a bucket the test empties)."""

    def __init__(self, frozen: bool = False) -> None:
        self.ahead_ms = 0
        self.frozen_at = int(time.time() * 1000) if frozen else None

    def __call__(self) -> int:
        now = int(time.time() * 1000) if self.frozen_at is None else self.frozen_at
        return now + self.ahead_ms


def _from(peer: FakePeer, address: str) -> FakePeer:
    peer.address = address
    return peer


async def _private_lobby(backend: Backend) -> tuple[Clock, Node, FakePeer, str, FakePeer]:
    """A frozen clock, a node, Ann's private lobby (its code) and a peer from another
    address that will join it in a loop."""
    clock = Clock(frozen=True)
    node = await backend.node(clock=clock)
    ann = _from(FakePeer(node), "203.0.113.1")
    created = await ann.ask("create", variant="yukon", name="Ann", private=True)
    churn = _from(FakePeer(node), "198.51.100.7")
    return clock, node, ann, str(created.d["code"]), churn


async def _stored(node: Node, room_id: str) -> list[EventType]:
    return [unpack_event(e.data).t for e in await node.store.events_since(room_id, 0)]


async def test_an_address_joining_and_leaving_in_a_loop_is_slowed(backend: Backend) -> None:
    clock, node, ann, code, churn = await _private_lobby(backend)
    joined = refused = 0
    for _ in range(3 * JOIN_BURST):
        reply = await churn.ask("join", code=code, name="Churn")
        if reply.t == "joined":
            joined += 1
            assert (await churn.ask("leave")).t == "ok"
            continue
        assert (reply.t, reply.d["code"]) == ("error", "rate_limited"), reply.d
        assert 0 < int(reply.d["retry_after_ms"]) <= JOIN_WAIT_MAX_MS
        refused += 1
    assert (joined, refused) == (JOIN_BURST, 2 * JOIN_BURST)
    room = ann.room
    assert room is not None
    kinds = await _stored(node, room.room_id)
    # Ann's join and the burst's joins and leaves: nothing of the refused ones.
    assert kinds.count(EventType.RACER_JOINED) == 1 + JOIN_BURST
    assert kinds.count(EventType.RACER_LEFT) == JOIN_BURST
    # Another address is not held up by it ...
    bob = _from(FakePeer(node), "198.51.100.8")
    assert (await bob.ask("join", code=code, name="Bob")).t == "joined"
    assert (await bob.ask("leave")).t == "ok"
    # ... and the looping one joins again once the interval has passed.
    clock.ahead_ms += int(JOIN_INTERVAL_S * 1000)
    assert (await churn.ask("join", code=code, name="Churn")).t == "joined"
    refusal = await _from(FakePeer(node), "198.51.100.7").ask("join", code=code, name="Again")
    assert refusal.d.get("code") == "rate_limited", refusal.d


async def test_a_rematch_gives_every_address_its_burst_again(backend: Backend) -> None:
    """Not carried by a reset: a rematch follows a whole race."""
    clock, node, ann, code, churn = await _private_lobby(backend)
    for _ in range(JOIN_BURST):
        assert (await churn.ask("join", code=code, name="Churn")).t == "joined"
        assert (await churn.ask("leave")).t == "ok"
    assert (await churn.ask("join", code=code, name="Churn")).d.get("code") == "rate_limited"
    room = ann.room
    assert room is not None
    assert len(room.state.join_buckets) == 2  # Ann's and the looping address's
    clock.frozen_at = None  # the countdown runs on the clock
    assert (await ann.ask("ready", ready=True)).t == "ok"
    bob = _from(FakePeer(node), "198.51.100.8")
    assert (await bob.ask("join", code=code, name="Bob")).t == "joined"
    assert (await bob.ask("ready", ready=True)).t == "ok"
    await ann.until(lambda f: f.t == "started", timeout=30)
    for peer in (ann, bob):
        assert (await peer.ask("resign")).t == "ok"
    await ann.until(lambda f: f.t == "race_over")
    assert (await ann.ask("rematch")).t == "ok"
    assert room.state.round == 2 and room.state.join_buckets == {}
    assert (await churn.ask("join", code=code, name="Churn")).t == "joined"


async def test_a_join_sent_again_after_its_retry_after_is_taken_on_a_slewing_clock(
    backend: Backend,
) -> None:
    """As a resume's (tests/rooms/test_resume_bucket.py): ``retry_after_ms`` is waited
    out by the client's clock while the node's, slewing back toward the store's,
    counts up to SLEW_MS_PER_S less of each second; the join sent again then is
    taken."""
    clock, _node, _ann, code, churn = await _private_lobby(backend)
    for _ in range(JOIN_BURST):
        assert (await churn.ask("join", code=code, name="Churn")).t == "joined"
        assert (await churn.ask("leave")).t == "ok"
    refusal = await churn.ask("join", code=code, name="Churn")
    assert refusal.d.get("code") == "rate_limited", refusal.d
    wait_ms = int(refusal.d["retry_after_ms"])  # type: ignore[call-overload]
    assert 0 < wait_ms <= JOIN_WAIT_MAX_MS
    clock.ahead_ms += wait_ms * (1000 - SLEW_MS_PER_S) // 1000
    again = await churn.ask("join", code=code, name="Churn")
    assert again.t == "joined", again.d
