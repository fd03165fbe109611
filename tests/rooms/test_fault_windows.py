"""Redis failing in the middle of a decision that takes more than one write.

A resume (the ``joined`` reply, then the presence), a join (the token, then the
racer_joined, then the fold), a leave, a disconnect, a rematch (the room_reset, then
the keys' lifetime) and a race's end (the race_over, then the archive) each write more
than once. Redis failing between those writes, or the node dying there, must leave the
room as if the decision was made whole or not at all, and the request's one reply must
say which: a stored decision is never answered as failed, a refused one left nothing
behind, and what must follow a stored decision is written as soon as Redis answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis
from solrace.net.metrics import Metrics
from solrace.protocol import race_id
from solrace.protocol.envelope import Envelope
from solrace.protocol.limits import SEAT_SETTLE_S
from solrace.protocol.views import EventType, LeaveReason, RacerStatus
from solrace.race import RacerGame, decisions
from solrace.race.decisions import DISCONNECT_GRACE_MS
from solrace.race.events import RoomEvent
from solrace.race.state import QUICK_LOBBY_MS
from solrace.rooms import lobby, requests
from solrace.rooms.counters import Tally
from solrace.rooms.node import (
    EMPTY_ROOM_TTL_S,
    FINISHED_ROOM_TTL_S,
    LEASE_MS,
    LEASE_RENEW_S,
    ROOM_TTL_S,
    TICK_RETRY_S,
    WRITE_RETRY_S,
    Node,
)
from solrace.rooms.records import unpack, unpack_event
from solrace.rooms.room import LiveRoom
from solrace.store import Store, token_digest
from solrace.store.errors import StoreUnavailable

from tests.net.conftest import SOLVABLE_SECRET
from tests.store.conftest import room_keys
from tests.support.faults import Clock, Crashed, StoreFaults
from tests.support.race import archived_result, winning_moves
from tests.support.redis import new_prefix, redis_process

from .conftest import Backend, FakePeer, lobby_of_two
from .test_core import _race_on, _room_ttl_ms

T = TypeVar("T")

GRACE_S = DISCONNECT_GRACE_MS / 1000


def _event_type(data: bytes) -> str:
    return str(unpack_event(data).t)


def _storing(kind: str) -> Callable[..., bool]:
    """For :func:`_fail_once` on ``append_event``: the call stores a ``kind`` event."""
    return lambda _room, data, *_rest, **_kw: _event_type(data) == kind


def _fail_once(
    store: Store, call: str, when: Callable[..., bool] = lambda *_a, **_kw: True
) -> list[tuple[Any, ...]]:
    """Make the next call of Store.``call`` that ``when`` accepts (given the call's
    arguments) fail as an unreachable Redis would: StoreUnavailable, nothing written.
    Returns the failed call's arguments, once it has failed: the test checks it hit."""
    real = getattr(store, call)
    failed: list[tuple[Any, ...]] = []

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if not failed and when(*args, **kwargs):
            failed.append(args)
            raise StoreUnavailable(f"{call}: Redis is down (injected)")
        return await real(*args, **kwargs)

    setattr(store, call, flaky)
    return failed


def _stored_types(store: Store) -> list[str]:
    """From now on, the type of every event ``store`` appends (once Redis took it)."""
    append = store.append_event
    types: list[str] = []

    async def recording(*args: Any, **kwargs: Any) -> Any:
        version = await append(*args, **kwargs)
        types.append(_event_type(args[1]))
        return version

    setattr(store, "append_event", recording)  # noqa: B010 (a method of the instance)
    return types


async def _stored(node: Node, room: LiveRoom) -> list[RoomEvent]:
    """Every event Redis holds for the room."""
    return [unpack_event(e.data) for e in await node.store.events_since(room.room_id, 0)]


async def _poll(
    probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], what: str, timeout: float = 5
) -> T:
    """``probe()`` again and again until ``done`` accepts its value, or fail."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done(value := await probe()):
        assert loop.time() < deadline, f"{what}: still {value!r} after {timeout} s"
        await asyncio.sleep(0.02)
    return value


def _is(t: str, **fields: object) -> Callable[[Envelope], bool]:
    return lambda f: f.t == t and all(f.d.get(k) == v for k, v in fields.items())


async def _frame(
    peer: FakePeer,
    what: str,
    predicate: Callable[[Envelope], bool],
    *,
    after: int = 0,
    timeout: float = 5,
) -> Envelope:
    """The first frame from ``peer.frames[after]`` on that ``predicate`` accepts."""

    async def first() -> Envelope | None:
        return next((f for f in peer.frames[after:] if predicate(f)), None)

    found = await _poll(first, lambda f: f is not None, f"{what}: not sent", timeout)
    assert found is not None
    return found


async def _replies(peer: FakePeer, t: str, **d: Any) -> list[Envelope]:
    """Send request ``t`` and return EVERY reply carrying its id (there must be one)."""
    peer._next_id += 1
    request_id = peer._next_id
    await requests.handle(peer.node, peer, Envelope(t, id=request_id, d=d))
    return [f for f in peer.frames if f.id == request_id]


async def _past_grace(clock: Clock, node: Node, room: LiveRoom) -> None:
    """Jump past the disconnect grace and let the node decide. Grace counts from the
    node's last store recovery (Node.store_ok), or the room's (its next tick once a call
    about it failed), so the node sees Redis answer for the room first."""

    async def store_down() -> bool:
        return node.store_down or room.store_down

    await _poll(store_down, lambda down: not down, "the node still sees Redis down")
    clock.advance(GRACE_S + 1, node)
    await node.tick(room)


async def _bob_racing_alone(node: Node) -> tuple[FakePeer, FakePeer, LiveRoom, int]:
    """A race on ``node`` that Ann has resigned, Bob racing on alone: Ann's peer,
    Bob's, the room and Bob's racer."""
    race = await _race_on(node, node)
    ann, bob = race.ann, race.bob
    room, bob_id = bob.room, bob.racer
    assert room is not None and bob_id is not None
    assert (await ann.ask("resign")).t == "ok"
    return ann, bob, room, bob_id


def _status(over: Envelope, name: str) -> object:
    standings = over.d["standings"]
    assert isinstance(standings, list)
    return next(s["status"] for s in standings if s["name"] == name)


async def test_a_disconnect_redis_fails_to_record_twice_is_logged_once_a_try(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis fails the presence that records Bob offline, and its first retry. The
    retry came at once after the node's own try, so an operator (the engine gone) read
    "could not record a racer offline: retrying" twice in the same millisecond; it
    now waits WRITE_RETRY_S first, and each failed try is one line."""
    node = await backend.node(clock=Clock())
    ann, bob, _room, bob_id = await _bob_racing_alone(node)
    first = _fail_once(node.store, "append_event", _storing(EventType.PRESENCE))
    second = _fail_once(node.store, "append_event", _storing(EventType.PRESENCE))
    caplog.set_level(logging.WARNING, logger="solrace.node")
    bob.closed = True
    await lobby.disconnected(node, bob)
    await _frame(ann, "Bob offline", _is("presence", racer=bob_id, online=False))
    assert first and second
    said = "could not record a racer offline: retrying"
    logged = [r for r in caplog.records if r.getMessage() == said]
    assert len(logged) == 2, logged
    assert logged[1].created - logged[0].created >= WRITE_RETRY_S * 0.9


async def test_a_disconnect_still_unrecorded_when_the_node_stops_is_said_given_up(
    backend: Backend, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis refuses every write that would record Bob offline, and the node stops
    (a drain with Redis down). Its log said "could not record a racer offline:
    retrying", then nothing of it: an operator could not tell the write was dropped,
    not pending. The stop now says so, once, for that room and racer."""
    node = await backend.node(clock=Clock())
    _ann, bob, room, bob_id = await _bob_racing_alone(node)
    real = node.store.append_event
    refused: list[str] = []

    async def refusing(room_id: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if _event_type(data) == EventType.PRESENCE:
            refused.append(room_id)
            raise StoreUnavailable("append_event: Redis is down (injected)")
        return await real(room_id, data, *args, **kwargs)

    monkeypatch.setattr(node.store, "append_event", refusing)
    caplog.set_level(logging.WARNING, logger="solrace.node")
    bob.closed = True
    await lobby.disconnected(node, bob)

    async def tries() -> int:
        return len(refused)

    await _poll(tries, lambda n: n >= 1, "the offline was never tried")
    await node.stop()
    gave_up = [
        r
        for r in caplog.records
        if r.getMessage() == "could not record a racer offline: given up, the node stopped first"
    ]
    assert len(gave_up) == 1, [r.getMessage() for r in caplog.records]
    assert (vars(gave_up[0])["room"], vars(gave_up[0])["racer"]) == (room.room_id, bob_id)


@pytest.mark.parametrize("fault", ["write fails", "reply lost"])
async def test_a_resume_whose_presence_write_fails_is_refused_once_and_its_retry_resumes(
    backend: Backend, fault: str
) -> None:
    """Bob drops (recorded offline) and resumes: Redis fails the presence that records
    him online, before storing it or after (its reply lost). A resume records its racer
    online before it sends ``joined`` (a resume racing a rematch was otherwise left in a
    room without its racer), so this one is refused ``unavailable``, its one reply, and
    attaches nothing. Recorded online on that refused connection (the reply lost), Bob
    is recorded offline again, or no close would ever start his grace. The retry, on
    the same connection, resumes him; he plays, and the grace does not forfeit him."""
    clock = Clock()
    node = await backend.node(clock=clock)
    race = await _race_on(node, node)
    ann, bob = race.ann, race.bob
    room, bob_id = bob.room, bob.racer
    assert room is not None and bob_id is not None
    token = (await bob.until(lambda f: f.t == "joined")).d["token"]
    bob.closed = True
    await lobby.disconnected(node, bob)
    await _frame(ann, "Bob offline", _is("presence", racer=bob_id, online=False))

    again = FakePeer(node)
    inject = _fail_once if fault == "write fails" else _reply_lost_once
    hit = inject(node.store, "append_event", _storing(EventType.PRESENCE))
    got = await _replies(again, "resume", room=room.room_id, token=token)
    assert hit, "the resume's presence was never written"
    assert [(f.t, f.d.get("code")) for f in got] == [("error", "unavailable")], got
    assert again.room is None and bob_id not in room.racers

    async def bob_online() -> bool:
        await node.sync(room)
        return room.state.racers[bob_id].online

    await _poll(bob_online, lambda online: not online, "Bob online on a refused connection")
    mark = len(ann.frames)
    retried = await again.ask("resume", room=room.room_id, token=token)
    assert retried.t == "joined", retried.d
    moved = await again.ask("move", seq=0, move=winning_moves(SOLVABLE_SECRET)[0])
    assert moved.t == "moved", moved.d
    await _frame(ann, "Bob online again", _is("presence", racer=bob_id, online=True), after=mark)
    member = room.state.racers[bob_id]
    assert member.online and member.conn == again.conn_id

    await _past_grace(clock, node, room)
    assert not [f for f in ann.frames if _is("racer_left", racer=bob_id)(f)]
    assert room.state.racers[bob_id].status == RacerStatus.PLAYING


async def test_a_resume_while_redis_stays_down_is_refused_at_once(backend: Backend) -> None:
    """As above, the reply lost, and then Redis stays down: the resume is refused
    ``unavailable`` at once, not after the outage (the offline write that follows a
    refused resume is retried in the background, Node.insist). Once Redis is back, Bob
    is recorded offline on the refused connection, and the retry resumes him."""
    node = await backend.node()
    race = await _race_on(node, node)
    bob, room, bob_id = race.bob, race.bob.room, race.bob.racer
    assert room is not None and bob_id is not None
    token = (await bob.until(lambda f: f.t == "joined")).d["token"]
    bob.closed = True
    await lobby.disconnected(node, bob)
    await _frame(race.ann, "Bob offline", _is("presence", racer=bob_id, online=False))
    faults = StoreFaults(node.store)
    append = node.store.append_event
    lost: list[bool] = []

    async def stored_then_down(*args: Any, **kwargs: Any) -> Any:
        outcome = await append(*args, **kwargs)
        if not lost and _event_type(args[1]) == EventType.PRESENCE:
            lost.append(True)
            faults.down = True  # Bob is online on the refused connection; Redis goes
            raise StoreUnavailable("append_event: the reply was lost (injected)")
        return outcome

    setattr(node.store, "append_event", stored_then_down)  # noqa: B010 (of the instance)
    again = FakePeer(node)
    async with asyncio.timeout(3):
        got = await _replies(again, "resume", room=room.room_id, token=token)
    assert [(f.t, f.d.get("code")) for f in got] == [("error", "unavailable")], got
    assert lost and again.room is None
    faults.down = False

    async def bob_online() -> bool:
        await node.sync(room)
        return room.state.racers[bob_id].online

    await _poll(bob_online, lambda online: not online, "Bob online on a refused connection")
    retried = await again.ask("resume", room=room.room_id, token=token)
    assert retried.t == "joined", retried.d


async def test_a_join_whose_write_fails_stores_neither_racer_nor_token(backend: Backend) -> None:
    """A join's token is stored in the same write as its racer_joined: if Redis fails
    that write, the join is refused and neither was stored (a racer without its token
    could never resume, nor close its connection: a ghost holding the lobby); the seat
    the refusal names is no seat. The retry joins, and its token finds its racer."""
    node = await backend.node()
    ann, bob = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="yukon", name="Ann")
    room = ann.room
    assert room is not None
    failed = _fail_once(node.store, "append_event", _storing(EventType.RACER_JOINED))
    refused = await bob.ask("join", code=str(created.d["code"]), name="Bob")
    assert failed
    assert (refused.t, refused.d.get("code")) == ("error", "unavailable"), refused.d
    assert bob.room is None
    stored = await _stored(node, room)
    assert [e.racer for e in stored if e.t == EventType.RACER_JOINED] == [1]
    tokens = await node.store._redis.hkeys(node.store.keys.room(room.room_id).tokens)
    assert sorted(str(t, "ascii") if isinstance(t, bytes) else t for t in tokens) == ["1"]
    # The refusal still names a seat (the node cannot know whether Redis applied the
    # write), and resuming it says it was not stored: joining again is safe.
    token = refused.d.get("token")
    assert isinstance(token, str), refused.d
    resumed = await bob.ask("resume", room=room.room_id, token=token)
    assert (resumed.t, resumed.d.get("code")) == ("error", "bad_token"), resumed.d
    await node.sync(room)
    assert list(room.state.racers) == [1]

    again = await bob.ask("join", code=str(created.d["code"]), name="Bob")
    assert again.t == "joined", again.d
    assert list(room.state.racers) == [1, again.d["racer"]]
    digest = token_digest(str(again.d["token"]))
    assert await node.store.racer_for_token(room.room_id, digest) == str(again.d["racer"])


async def test_two_joins_racing_on_two_nodes_keep_each_racers_token(backend: Backend) -> None:
    """Bob joins on node A while Cy's join on node B is being decided from the room as
    it was before Bob: Cy's first try takes racer id 2, conflicts, and is decided again
    as racer 3. Cy's token must never be written under Bob's id (it was, when the
    token was written before the compare-and-append): Bob could then never resume."""
    a, b = await backend.node(), await backend.node()
    ann, bob, cy = FakePeer(a), FakePeer(a), FakePeer(b)
    created = await ann.ask("create", variant="yukon", name="Ann", max_racers=3)
    code, room_id = str(created.d["code"]), str(created.d["room"])
    await b.room(room_id)  # node B has folded the room: one racer
    decide, events_since = b.decide, b.store.events_since
    deciding: list[bool] = []
    bob_joined: list[Envelope] = []

    async def deciding_cy(*args: Any, **kwargs: Any) -> Any:
        deciding.append(True)
        return await decide(*args, **kwargs)

    async def bob_after_the_read(*args: Any, **kwargs: Any) -> Any:
        read = await events_since(*args, **kwargs)
        if deciding and not bob_joined:  # B has read the room; now Bob joins on A
            bob_joined.append(await bob.ask("join", code=code, name="Bob"))
        return read

    setattr(b, "decide", deciding_cy)  # noqa: B010 (a method of the instance)
    setattr(b.store, "events_since", bob_after_the_read)  # noqa: B010
    cy_joined = await cy.ask("join", code=code, name="Cy")
    setattr(b, "decide", decide)  # noqa: B010
    setattr(b.store, "events_since", events_since)  # noqa: B010
    assert [f.d["racer"] for f in (*bob_joined, cy_joined)] == [2, 3]
    for joined in (bob_joined[0], cy_joined):
        digest = token_digest(str(joined.d["token"]))
        assert await a.store.racer_for_token(room_id, digest) == str(joined.d["racer"])
    resumed = await FakePeer(b).ask("resume", room=room_id, token=bob_joined[0].d["token"])
    assert (resumed.t, resumed.d.get("racer")) == ("joined", 2), resumed.d


def _storing_on(store: Store, kind: str, first: Callable[[], Awaitable[None]]) -> list[bool]:
    """Pause ``store``'s next append of a ``kind`` event between its decision's read and
    its write, and run ``first()`` meanwhile (another node's decision). Returns a list
    that is non-empty once the pause has happened: the test checks it hit."""
    append = store.append_event
    paused: list[bool] = []

    async def held(*args: Any, **kwargs: Any) -> Any:
        if not paused and _event_type(args[1]) == kind:
            paused.append(True)
            await first()
        return await append(*args, **kwargs)

    setattr(store, "append_event", held)  # noqa: B010 (a method of the instance)
    return paused


@pytest.mark.parametrize("first", ["rematch first", "resume first"])
async def test_a_resume_racing_a_rematch_keeps_the_racer_or_refuses_the_resume(
    backend: Backend, first: str
) -> None:
    """Bob drops after the race_over; his resume on node B and Ann's rematch on node A
    are decided at once, each on the room as it was before the other. The rematch
    drops a racer who is offline; the resume had answered ``joined`` first and
    recorded Bob online after: when the reset came in between, Bob's connection was
    left attached to a room that no longer had him — ``ready`` refused ``not_racer``,
    ``join`` ``already_in_room``, never ``presence`` online (5 of 12 tries of a
    lifecycle audit). Whichever is stored first, the outcome is a documented one: Bob
    is kept (online when the reset is decided), or his resume is refused ``bad_token``,
    his connection free to ``join`` the new lobby."""
    a, b = await backend.node(), await backend.node()
    race = await _race_on(a, b)
    ann, bob = race.ann, race.bob
    room_a, bob_id = ann.room, bob.racer
    assert room_a is not None and bob_id is not None
    token = str((await bob.until(lambda f: f.t == "joined")).d["token"])
    assert (await ann.ask("resign")).t == "ok"
    assert (await bob.ask("resign")).t == "ok"
    await ann.until(lambda f: f.t == "race_over")
    bob.closed = True
    await lobby.disconnected(b, bob)
    await _frame(ann, "Bob offline", _is("presence", racer=bob_id, online=False))
    again = FakePeer(b)
    replies: list[Envelope] = []

    async def rematch() -> None:
        assert (await ann.ask("rematch")).t == "ok"

    async def resume() -> None:
        replies.extend(await _replies(again, "resume", room=room_a.room_id, token=token))

    if first == "rematch first":
        paused = _storing_on(b.store, EventType.PRESENCE, rematch)
        await resume()
    else:
        paused = _storing_on(a.store, EventType.ROOM_RESET, resume)
        await rematch()
    assert paused, "the decisions did not interleave"
    reset = await _frame(ann, "the reset", _is("room_reset"))
    kept = [r["racer"] for r in reset.d["racers"]]  # type: ignore[union-attr]
    assert len(replies) == 1, [(f.t, dict(f.d)) for f in replies]
    room_b = b.rooms[room_a.room_id]

    async def folded() -> int:
        return room_b.state.version

    await _poll(folded, lambda v: v == room_a.state.version, "B folded what A stored")
    if first == "rematch first":
        assert bob_id not in kept
        assert (replies[0].t, replies[0].d["code"]) == ("error", "bad_token"), replies[0].d
        assert again.room is None and bob_id not in room_b.racers
        joined = await again.ask("join", code=room_a.meta.code, name="Bob")
        assert joined.t == "joined", joined.d
    else:
        assert bob_id in kept
        assert replies[0].t == "joined", replies[0].d
        member = room_a.state.racers[bob_id]
        assert member.online and member.conn == again.conn_id
        assert room_b.racers[bob_id] is again
        assert (await again.ask("ready", ready=True)).t == "ok"


async def _lobby_whose_next_join_is_not_read_back(
    node: Node,
) -> tuple[FakePeer, FakePeer, LiveRoom, str, list[tuple[Any, ...]]]:
    """Ann's new lobby on ``node`` (its code), Bob beside it, and Redis set to fail the
    first read of the room's events after a racer_joined is stored: the read that
    folds Bob's join. The list says whether it failed."""
    ann, bob = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="yukon", name="Ann")
    room = ann.room
    assert room is not None
    stored = _stored_types(node.store)
    failed = _fail_once(
        node.store, "events_since", lambda *_a, **_kw: EventType.RACER_JOINED in stored
    )
    return ann, bob, room, str(created.d["code"]), failed


async def test_a_join_failing_after_its_racer_is_stored_leaves_no_ghost_in_the_lobby(
    backend: Backend,
) -> None:
    """Bob's racer_joined is stored, then Redis fails the read that folds it: his join
    is refused, and his connection is never attached, so its close records nothing.
    The node records the racer it stored offline (retrying until Redis answers), so
    the grace frees the seat; Bob joining again can ready up and the race starts."""
    clock = Clock()
    node = await backend.node(clock=clock)
    ann, bob, room, code, failed = await _lobby_whose_next_join_is_not_read_back(node)
    mark = len(ann.frames)
    refused = await bob.ask("join", code=code, name="Bob")
    assert failed, "no read of the room's events followed the racer_joined"
    assert refused.t == "error", refused.d
    assert bob.room is None

    ghost = await _frame(ann, "Bob's racer_joined", _is("racer_joined", name="Bob"), after=mark)
    ghost_id = ghost.d["racer"]
    await _frame(ann, "the ghost offline", _is("presence", racer=ghost_id, online=False))
    await _past_grace(clock, node, room)
    left = await _frame(ann, "the ghost's racer_left", _is("racer_left", racer=ghost_id))
    assert left.d["reason"] == LeaveReason.GRACE

    again = await bob.ask("join", code=code, name="Bob")
    assert again.t == "joined", again.d
    assert list(room.state.racers) == [1, again.d["racer"]]
    assert (await bob.ask("ready", ready=True)).t == "ok"
    await ann.until(lambda f: f.t == "deal_chosen", timeout=30)
    start = await ann.ask("start")
    assert start.t == "ok", start.d


async def test_a_join_refused_after_its_racer_is_stored_names_the_seat_a_resume_takes(
    backend: Backend,
) -> None:
    """Bob's racer_joined is stored, then Redis fails the read that folds it: the join
    is refused ``unavailable`` (its outcome unknown), and the offline that frees a
    ghost's seat cannot be written yet either. The refusal names the seat (``room``,
    ``token``): Bob resumes it on the same connection and is that racer, not a second
    one (joining again took a second seat, its ghost holding the lobby for the grace).
    The offline about the refused join, written once Redis lets it, lands after the
    resume and must change nothing (it is about the connection id the refused join
    had): no presence flickers, the grace passes with Bob in the lobby, online."""
    clock = Clock()
    node = await backend.node(clock=clock)
    ann, bob, room, code, failed_read = await _lobby_whose_next_join_is_not_read_back(node)
    append, held = node.store.append_event, asyncio.Event()

    async def offline_held(*args: Any, **kwargs: Any) -> Any:
        event = unpack_event(args[1])
        if event.t == EventType.PRESENCE and not event.d["online"] and not held.is_set():
            raise StoreUnavailable("append_event: Redis is down (injected)")
        return await append(*args, **kwargs)

    setattr(node.store, "append_event", offline_held)  # noqa: B010 (a method of the instance)
    refused = await bob.ask("join", code=code, name="Bob")
    assert failed_read
    assert (refused.t, refused.d.get("code")) == ("error", "unavailable"), refused.d
    assert refused.d.get("room") == room.room_id, refused.d
    token = refused.d.get("token")
    assert isinstance(token, str) and token, refused.d
    assert bob.room is None

    resumed = await bob.ask("resume", room=room.room_id, token=token)
    assert resumed.t == "joined", resumed.d
    seat = resumed.d["racer"]
    await node.sync(room)
    assert list(room.state.racers) == [1, seat], "the resume took a second seat"
    mark = len(ann.frames)
    held.set()  # Redis takes the offline now: after the resume's online
    await asyncio.sleep(5 * WRITE_RETRY_S)  # the offline's retries have run
    await node.sync(room)
    assert room.state.racers[seat].online
    # Not even for a moment (the node would say Bob is back, but everyone saw him go).
    flicker = [f.d for f in ann.frames[mark:] if f.t == "presence"]
    assert not flicker, f"the late offline of the refused join was recorded: {flicker}"
    await _past_grace(clock, node, room)
    assert room.state.racers[seat].status != RacerStatus.LEFT
    assert (await bob.ask("ready", ready=True)).t == "ok"


async def test_a_leave_redis_fails_is_refused_and_its_retry_recorded(backend: Backend) -> None:
    """Ann resigned; Bob leaves mid-race and Redis fails the racer_left. The leave is
    refused and Bob is still in the room, so his retry is stored: he has left, and the
    race, with nobody playing, ends at once (not at its time limit)."""
    node = await backend.node()
    ann, bob, room, bob_id = await _bob_racing_alone(node)
    failed = _fail_once(node.store, "append_event", _storing(EventType.RACER_LEFT))
    first = await bob.ask("leave")
    assert failed
    assert (first.t, first.d.get("code")) == ("error", "unavailable"), first.d
    assert bob.room is not None, "a leave that was refused took the racer out of the room"

    assert (await bob.ask("leave")).t == "ok"
    left = await _frame(ann, "Bob's racer_left", _is("racer_left", racer=bob_id))
    assert left.d["reason"] == LeaveReason.LEFT
    assert any(e.t == EventType.RACER_LEFT and e.racer == bob_id for e in await _stored(node, room))
    over = await _frame(ann, "the race_over", _is("race_over"))
    assert _status(over, "Bob") == RacerStatus.LEFT


async def test_a_disconnect_redis_fails_to_record_is_recorded_and_forfeits(
    backend: Backend,
) -> None:
    """Ann resigned; Bob's connection closes while Redis fails the presence that
    records him offline. The node records it once Redis answers, so his grace runs:
    he leaves when it ends, and the race he held open is over."""
    clock = Clock()
    node = await backend.node(clock=clock)
    ann, bob, room, bob_id = await _bob_racing_alone(node)
    failed = _fail_once(node.store, "append_event", _storing(EventType.PRESENCE))
    bob.closed = True
    await lobby.disconnected(node, bob)
    assert failed
    await _frame(ann, "Bob offline", _is("presence", racer=bob_id, online=False))
    assert not room.state.racers[bob_id].online

    await _past_grace(clock, node, room)
    left = await _frame(ann, "Bob's racer_left", _is("racer_left", racer=bob_id))
    assert left.d["reason"] == LeaveReason.GRACE
    over = await _frame(ann, "the race_over", _is("race_over"))
    assert _status(over, "Bob") == RacerStatus.LEFT


async def _two_hour_race_over(node: Node) -> tuple[FakePeer, LiveRoom]:
    """Ann and Bob race with a two-hour limit and resign: the race is over, archived,
    and the race_over has cut the room's keys to an hour."""
    race = await _race_on(node, node, time_limit_s=7200)
    assert (await race.ann.ask("resign")).t == "ok"
    assert (await race.bob.ask("resign")).t == "ok"
    over = await race.ann.until(lambda f: f.t == "race_over")
    room = race.ann.room
    assert room is not None
    await archived_result(node.store, race_id(room.room_id, str(over.d["commitment"])))
    assert 0 < await _room_ttl_ms(node, room.room_id) <= FINISHED_ROOM_TTL_S * 1000
    return race.ann, room


async def _ttls(node: Node, room: LiveRoom) -> dict[str, int]:
    """Every key of the room, and its global join code key -> PTTL (ms)."""
    ttls = await room_keys(node.store, room.room_id)
    code_key = node.store.keys.code(room.meta.code)
    ttls[code_key] = int(await node.store._redis.pttl(code_key))
    return ttls


def _all_between(ttls: dict[str, int], low_s: float, high_s: float) -> bool:
    return all(low_s * 1000 < ms <= high_s * 1000 for ms in ttls.values())


async def _until_all_between(node: Node, room: LiveRoom, low_s: float, high_s: float) -> None:
    """Until every key of the room and its join code key expire in ``low_s``–``high_s``."""
    await _poll(
        lambda: _ttls(node, room),
        lambda ttls: _all_between(ttls, low_s, high_s),
        f"the room's keys expire in {low_s}-{high_s} s",
    )


def _is_reset(_room: str, data: bytes, *_a: Any, **_kw: Any) -> bool:
    return unpack_event(data).t == EventType.ROOM_RESET


def _reply_lost_once(store: Store, call: str, when: Callable[..., bool]) -> list[tuple[Any, ...]]:
    """The next call of Store.``call`` that ``when`` accepts is made, then raises
    StoreUnavailable: Redis applied it and its reply was lost."""
    real = getattr(store, call)
    lost: list[tuple[Any, ...]] = []

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        outcome = await real(*args, **kwargs)
        if not lost and when(*args, **kwargs):
            lost.append(args)
            raise StoreUnavailable(f"{call}: the reply was lost (injected)")
        return outcome

    setattr(store, call, flaky)
    return lost


@pytest.mark.parametrize("fault", ["settle fails", "reset reply lost", "node killed"])
async def test_a_rematch_gets_its_lifetime_back_whatever_fails_after_its_reset(
    backend: Backend, fault: str
) -> None:
    """The race_over cut the room's expiry to an hour; the rematch gives it its
    lifetime back. That was a second write after the room_reset: a node killed
    between the two, or a reset whose reply Redis lost (answered ``unavailable``, its
    retry ``wrong_phase``, nothing retried), left the new round — up to two hours —
    in keys that expired within the hour, and the round was lost mid-race (an audit,
    reproduced). The reset now sets the expiry in its own write, the logs follow, and
    the retry of a rematch whose reply was lost is ``ok``."""
    node = await backend.node()
    ann, room = await _two_hour_race_over(node)
    serving = node
    if fault == "settle fails":
        failed = _fail_once(node.store, "settle_expiry")
        assert (await ann.ask("rematch")).t == "ok"
        assert failed
    elif fault == "reset reply lost":
        lost = _reply_lost_once(node.store, "append_event", _is_reset)
        first = await ann.ask("rematch")
        assert lost and first.d["code"] == "unavailable", first.d
        assert (await ann.ask("rematch")).t == "ok"  # the retry finds it made
    else:
        crashed = _dies_at(node, {"settle_expiry": _always})
        with contextlib.suppress(Crashed):
            await ann.ask("rematch")
        assert crashed
        await node.stop()
        serving = await backend.node()
    ttls = await _ttls(serving, room)
    fixed = {key: ms for key, ms in ttls.items() if key.rsplit(":", 1)[1] in _FIXED}
    assert _all_between(fixed, ROOM_TTL_S - 60, ROOM_TTL_S), fixed  # at once: one write
    # The join code (another slot, so not in that write) never went down to the
    # race_over's hour: it outlives the new round's two hours whatever failed (an
    # audit of this change: it was left at the hour when the node died).
    assert ttls[serving.store.keys.code(room.meta.code)] > 7200 * 1000
    if fault != "node killed":  # the logs follow, once the settle is retried
        await _until_all_between(serving, room, ROOM_TTL_S - 60, ROOM_TTL_S)


@pytest.mark.parametrize("fault", ["save fails", "reset fails", "node killed after the save"])
async def test_a_rematch_saves_the_race_it_follows_before_its_reset(
    backend: Backend, fault: str
) -> None:
    """A rematch trims the room's history: the race it follows loses its race_over at
    the rematch after next, and with it the last trace any node could archive the race
    from (docs/store.md, "A room's history"). So the rematch first saves that race's
    result if no node has (here the archive was lost: the node that ended the race
    died before saving it), then stores its reset. Redis failing the save refuses the
    rematch and stores no reset; Redis failing the reset, or the node dying before
    it, leaves the result saved; the retry is ``ok``."""
    node = await backend.node()
    ann, room = await _two_hour_race_over(node)
    race = race_id(room.room_id, str(room.state.commitment))
    await node.store._redis.delete(node.store.keys.result(race))
    assert await node.store.load_result(race) is None
    if fault == "node killed after the save":
        crashed = _dies_at(node, {"append_event": _is_reset})
        with contextlib.suppress(Crashed):
            await ann.ask("rematch")
        assert crashed
        await node.stop()
        node = await backend.node()
        taken_up = await node.room(room.room_id)
        assert taken_up.state.phase == "finished"  # no reset stored
        assert await node.store.load_result(race) is not None
        return
    failed = _fail_once(node.store, "save_result" if fault == "save fails" else "append_event")
    refused = await ann.ask("rematch")
    assert failed and refused.d["code"] == "unavailable", refused.d
    assert room.state.phase == "finished"
    last = (await node.store.events_since(room.room_id, room.state.version - 1))[-1]
    assert unpack_event(last.data).t == EventType.RACE_OVER
    saved = await node.store.load_result(race)
    assert (saved is None) == (fault == "save fails")
    assert (await ann.ask("rematch")).t == "ok"
    assert room.state.round == 2 and await node.store.load_result(race) is not None


async def test_a_finished_races_late_expiry_cannot_cut_another_nodes_rematch_short(
    backend: Backend,
) -> None:
    """Node A decides the race_over; its hour's expiry was a later write, held up
    (Redis slow, the node paused) while node B folded the race_over, took a rematch
    and gave the room its lifetime back — then A's hour landed on the new round (an
    audit, reproduced: the round's keys would go an hour later). The hour is the
    race_over's own write now, and what A writes late copies the room's expiry as it
    is then."""
    a, b = await backend.node(), await backend.node()
    race = await _race_on(a, b, time_limit_s=7200)
    ann, bob = race.ann, race.bob
    assert (await bob.ask("resign")).t == "ok"
    await ann.until(lambda f: f.t == "progress" and f.d["status"] == "resigned")
    real = a.store.settle_expiry
    held = asyncio.Event()

    async def late(room_id: str, **kwargs: Any) -> None:
        await held.wait()
        await real(room_id, **kwargs)

    setattr(a.store, "settle_expiry", late)  # noqa: B010 (a method of the instance)
    resigned = asyncio.ensure_future(ann.ask("resign"))  # A decides the race_over
    await bob.until(lambda f: f.t == "race_over", timeout=10)
    assert (await bob.ask("rematch")).t == "ok"
    room = bob.room
    assert room is not None
    await _until_all_between(b, room, ROOM_TTL_S - 60, ROOM_TTL_S)
    held.set()
    assert (await resigned).t == "ok"
    await asyncio.sleep(0.2)  # A's late writes land
    ttls = await _ttls(b, room)
    assert _all_between(ttls, ROOM_TTL_S - 60, ROOM_TTL_S), ttls


def _is_left(data: bytes) -> bool:
    return _event_type(data) == EventType.RACER_LEFT


@pytest.mark.parametrize("fault", ["read back fails", "reply lost"])
async def test_a_leave_whose_outcome_redis_hid_is_ok_when_retried(
    backend: Backend, fault: str
) -> None:
    """Bob's leave is stored, then Redis hides the outcome (the read that folds it
    fails, or the append's reply is lost): ``unavailable``. Its retry was refused
    ``not_racer`` for ever, the connection stayed in the room (``create``:
    ``already_in_room``), and a lobby so emptied kept its lifetime and its listing (an
    audit, reproduced). The retry finds the leave made: ``ok``, the connection is
    free, and the empty lobby expires within ten minutes, unlisted."""
    node = await backend.node()
    bob = FakePeer(node)
    assert (await bob.ask("create", variant="yukon", name="Bob")).t == "joined"
    room = bob.room
    assert room is not None
    stored = _stored_types(node.store)
    if fault == "read back fails":
        hit = _fail_once(
            node.store, "events_since", lambda *_a, **_kw: EventType.RACER_LEFT in stored
        )
    else:
        hit = _reply_lost_once(
            node.store,
            "append_event",
            lambda _r, data, *_a, **_kw: _event_type(data) == "racer_left",
        )
    first = await bob.ask("leave")
    assert hit and first.d["code"] == "unavailable", first.d
    assert (await bob.ask("leave")).t == "ok"
    assert bob.room is None
    assert (await bob.ask("create", variant="yukon", name="Bob")).t == "joined"
    # Its join code too: everyone left, so nothing can give the room a longer expiry.
    await _until_all_between(node, room, 0, EMPTY_ROOM_TTL_S)
    assert room.room_id not in await node.store.listed_rooms()


async def test_a_start_or_resign_whose_reply_was_lost_is_ok_when_retried(
    backend: Backend,
) -> None:
    """Protocol §9: a request whose outcome Redis hid may be sent again, and finds the
    decision made. A host's start and a racer's resign so retried were refused
    ``wrong_phase`` (the state was right, the answer wrong: an audit)."""
    node = await backend.node()
    ready = await lobby_of_two(node)
    ann, bob = ready.ann, ready.bob
    lost = _reply_lost_once(
        node.store, "append_event", lambda _r, data, *_a, **_kw: _event_type(data) == "countdown"
    )
    assert (await ann.ask("start")).d["code"] == "unavailable"
    assert lost and (await ann.ask("start")).t == "ok"
    room = ann.room
    assert room is not None  # listed behind the lobbies, as a countdown read back is
    assert room.room_id not in await node.store.listed_lobbies()
    await bob.until(lambda f: f.t == "started")
    lost = _reply_lost_once(
        node.store, "append_event", lambda _r, data, *_a, **_kw: _event_type(data) == "progress"
    )
    assert (await bob.ask("resign")).d["code"] == "unavailable"
    assert lost and (await bob.ask("resign")).t == "ok"
    assert [e.t for e in await _stored(node, ann.room)].count("countdown") == 1  # type: ignore[arg-type]


async def test_a_countdown_the_clock_decided_whose_reply_was_lost_is_followed_by_its_writes(
    backend: Backend,
) -> None:
    """The last racer's ``ready`` lets the room's timer decide the countdown (no
    ``start``, so no client asks again), and Redis loses the countdown's reply: the
    tick is retried, finds the countdown stored, and decides nothing. What follows a
    countdown (the room moved behind the lobbies and out of its variant's quick
    lobbies, its logs' expiry, the race counted started) followed only a countdown
    read back: here never. The room raced on sorted as a lobby somebody is in, read
    by every ``list`` and ``quick`` as one (an audit of the rule "what must follow a
    stored decision is written as soon as Redis answers"). Now a decision whose
    append's outcome is unknown is looked for once Redis answers, and its writes made
    if it was stored."""
    node = await backend.node()
    ann, bob = FakePeer(node), FakePeer(node)
    for peer, name in ((ann, "Ann"), (bob, "Bob")):
        assert (await peer.ask("quick", variant="yukon", name=name)).t == "joined"
    room = ann.room
    assert room is not None and bob.room is room
    assert room.room_id in await node.store.quick_lobbies("yukon")
    lost = _reply_lost_once(node.store, "append_event", _storing(EventType.COUNTDOWN))
    for peer in (bob, ann):  # all ready: the room's timer decides the countdown
        assert (await peer.ask("ready", ready=True)).t == "ok"
    await ann.until(lambda f: f.t == "started", timeout=30)
    assert lost, "the countdown's reply was not lost"

    async def sorted_as_lobby() -> tuple[bool, bool]:
        return (
            room.room_id in await node.store.listed_lobbies(),
            room.room_id in await node.store.quick_lobbies("yukon"),
        )

    await _poll(sorted_as_lobby, lambda where: where == (False, False), "among the lobbies")
    assert room.room_id in await node.store.listed_rooms()  # listed, behind them
    assert isinstance(node.metrics, Tally)
    assert node.metrics.races_started.value == 1


async def test_a_graces_leave_whose_reply_was_lost_empties_its_lobby_without_a_sweep(
    backend: Backend,
) -> None:
    """Bob, alone in his public lobby, hangs up and stays away: at the end of his grace
    the room's timer decides his leave, and Redis loses its reply. The retried tick
    finds him gone and decides nothing, so the lobby everyone left stayed listed, its
    join code on its day, until another write found it (a ``list``, a node's minutely
    sweep; never, for a finished room's last leave). Now the node finds its leave
    stored once Redis answers and makes what follows it: unlisted, every key and the
    code on the room's ten minutes. (No sweep runs here.)"""
    clock = Clock()
    node = await backend.node(clock=clock)
    node.sweep_orphans = _no_sweep  # type: ignore[method-assign]  # before its loop runs
    bob = FakePeer(node)
    assert (await bob.ask("create", variant="yukon", name="Bob")).t == "joined"
    room = bob.room
    assert room is not None
    await lobby.disconnected(node, bob)
    lost = _reply_lost_once(node.store, "append_event", _storing(EventType.RACER_LEFT))
    await _past_grace(clock, node, room)
    assert lost, "the leave's reply was not lost"

    async def listed() -> bool:
        return room.room_id in await node.store.listed_rooms()

    await _poll(listed, lambda yes: not yes, "the emptied lobby is still listed")
    await _until_all_between(node, room, 0, EMPTY_ROOM_TTL_S)


@pytest.mark.parametrize("kind", [EventType.RACER_LEFT, EventType.ROOM_RESET])
async def test_a_decision_whose_reply_was_lost_is_logged_once_found_stored(
    backend: Backend, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """Every decision about a racer gets one line, from the node that stored it (an
    operator tells from the log why each racer ended as it did): a grace's leave, a
    rematch. One whose append's reply Redis lost got none on any node — its retry (the
    tick's, the client's) finds it made and decides nothing — though the node found it
    stored and made its writes. Now it is said then, as the node decided it."""
    clock = Clock()
    node = await backend.node(clock=clock)
    node.sweep_orphans = _no_sweep  # type: ignore[method-assign]  # before its loop runs
    caplog.set_level(logging.INFO, logger="solrace.node")
    said = "racer left" if kind == EventType.RACER_LEFT else "rematch"
    if kind == EventType.RACER_LEFT:
        bob = FakePeer(node)
        assert (await bob.ask("create", variant="yukon", name="Bob")).t == "joined"
        room = bob.room
        assert room is not None
        await lobby.disconnected(node, bob)
        lost = _reply_lost_once(node.store, "append_event", _storing(kind))
        await _past_grace(clock, node, room)
        expected = {"round": None, "reason": LeaveReason.GRACE, "phase": "lobby"}
    else:
        race = await _race_on(node, node)
        room = race.ann.room
        assert room is not None
        for peer in (race.ann, race.bob):
            assert (await peer.ask("resign")).t == "ok"
        await race.ann.until(lambda f: f.t == "race_over")
        lost = _reply_lost_once(node.store, "append_event", _storing(kind))
        assert (await race.ann.ask("rematch")).t == "error"  # unavailable: outcome unknown
        expected = {"round": 2, "reason": None, "phase": None}
    assert lost, "the reply was not lost"

    async def lines() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == said]

    await _poll(lines, lambda found: len(found) > 0, f"no {said!r} line")
    async with room.lock:  # the late writes, under the room's lock
        pass
    (line,) = await lines()
    assert {k: getattr(line, k, None) for k in expected} == expected


async def _no_sweep() -> None:
    return None


async def test_a_countdown_whose_append_failed_is_not_counted_for_another_nodes_same_countdown(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """Ann (node A) and Bob (node B) wait in a quick lobby: at its lobby timer both
    nodes' timers decide the countdown for the same instant, in the same millisecond
    (nodes share the time). A's append fails, its outcome unknown: Redis did not take
    it; B's is stored (or A's own next try, for the same millisecond). The countdowns
    are the same bytes (same room, round, commitment and instant), so A, finding "its"
    bytes at the version once Redis answered, took that countdown for the append it
    lost and made its writes again: the race counted started twice, "race starting"
    logged twice (6/6 before the fix). Only the append A made itself is A's: its id."""
    clock = _Still()
    node_a, node_b = await backend.node(clock=clock), await backend.node(clock=clock)
    caplog.set_level(logging.INFO, logger="solrace.node")
    ann, bob = FakePeer(node_a), FakePeer(node_b)
    for peer, name in ((ann, "Ann"), (bob, "Bob")):
        assert (await peer.ask("quick", variant="yukon", name=name)).t == "joined"
    room_a = ann.room
    assert room_a is not None and bob.room is not None
    failed_a = asyncio.Event()
    holders: list[asyncio.Future[None]] = []
    real_append = node_a.store.append_event

    async def redis_back_for_a_once_stored(version: int) -> None:
        # A's next look at the room comes once B's countdown is stored at ``version``.
        async with room_a.lock:
            await _poll(
                lambda: node_a.store.version(room_a.room_id), lambda v: v >= version, "B's append"
            )

    async def a_fails(*args: Any, **kwargs: Any) -> Any:
        if not failed_a.is_set() and _event_type(args[1]) == EventType.COUNTDOWN:
            failed_a.set()
            holders.append(asyncio.ensure_future(redis_back_for_a_once_stored(args[2] + 1)))
            raise StoreUnavailable("append_event: Redis is down (injected)")
        return await real_append(*args, **kwargs)

    setattr(node_a.store, "append_event", a_fails)  # noqa: B010 (a method of the instance)
    _storing_on(node_b.store, EventType.COUNTDOWN, failed_a.wait)  # B's after A's failed
    await ann.until(lambda f: f.t == "deal_chosen", timeout=30)
    await _poll(lambda: _synced(node_b, bob.room), lambda v: v == room_a.state.version, "B")
    clock.advance(QUICK_LOBBY_MS / 1000 + 1, node_a, node_b)  # both timers: the countdown
    await _poll(lambda: _countdowns(node_a, room_a), lambda n: n == 1, "the countdown stored")
    assert failed_a.is_set(), "A's append did not fail"
    await holders[0]
    # Each node counts under the room's lock: A's look at the room queued behind the
    # holder, the countdown's writes on the node that stored it.
    for room in (room_a, bob.room):
        async with room.lock:
            pass
    assert isinstance(node_a.metrics, Tally) and isinstance(node_b.metrics, Tally)
    counted = node_a.metrics.races_started.value + node_b.metrics.races_started.value
    starting = [r for r in caplog.records if r.getMessage() == "race starting"]
    assert (counted, len(starting)) == (1, 1), "one countdown, counted by the node that stored it"


class _Still(Clock):
    """A :class:`Clock` that stands still unless advanced: two nodes' decisions for
    the same instant in the same millisecond."""

    def __init__(self) -> None:
        super().__init__()
        self.at = super().__call__()

    def __call__(self) -> int:
        return self.at + self.offset_ms


async def _synced(node: Node, room: LiveRoom | None) -> int:
    assert room is not None
    await node.sync(room)
    return room.state.version


async def _countdowns(node: Node, room: LiveRoom) -> int:
    return [e.t for e in await _stored(node, room)].count(EventType.COUNTDOWN)


#: The last part of the names of a room's fixed keys (RoomKeys.fixed) and of its
#: global join code key.
_FIXED = {"meta", "code", "ver", "chain", "events", "tokens", "nodes", "over", "keys"}


async def test_a_rematch_whose_read_back_fails_still_gets_its_lifetime_back(
    backend: Backend,
) -> None:
    """The room_reset is stored, then Redis fails the read that folds it, before the
    write giving the keys their lifetime cap back. The request is told ``unavailable``
    (its outcome unknown, as for any decision not read back), but the write is not
    dropped with the read: once Redis answers, the node folds the reset and makes it,
    so the new round of up to two hours does not live in keys that expire within the
    hour (before, they kept the race_over's one-hour expiry)."""
    node = await backend.node()
    ann, room = await _two_hour_race_over(node)

    stored = _stored_types(node.store)
    failed = _fail_once(
        node.store, "events_since", lambda *_a, **_kw: EventType.ROOM_RESET in stored
    )
    rematch = await ann.ask("rematch")
    assert failed, "no read of the room's events followed the room_reset"
    assert rematch.t == "error" and rematch.d["code"] == "unavailable", rematch.d
    await _frame(ann, "the room_reset", _is("room_reset"))

    async def ttl_ms() -> int:
        return await _room_ttl_ms(node, room.room_id)

    kept = await _poll(ttl_ms, lambda ms: ms > 7200 * 1000, "the room's TTL (ms)")
    assert kept > (ROOM_TTL_S - 60) * 1000


def _dies_at(node: Node, calls: dict[str, Callable[..., bool]]) -> list[str]:
    """Kill ``node`` at the first call of a Store method in ``calls`` that its
    predicate accepts: that call raises Crashed and the store answers nothing more (as
    a dead process would). Returns the call it died at, once it has."""
    faults = StoreFaults(node.store)
    crashed: list[str] = []
    for call, when in calls.items():
        real = getattr(node.store, call)

        def crash(call: str, real: Any, when: Callable[..., bool]) -> Any:
            async def dying(*args: Any, **kwargs: Any) -> Any:
                if not faults.down and when(*args, **kwargs):
                    faults.down = True  # killed: it writes nothing more
                    crashed.append(call)
                    raise Crashed()
                return await real(*args, **kwargs)

            return dying

        setattr(node.store, call, crash(call, real, when))
    return crashed


@pytest.mark.parametrize("dies", ["before its race_over", "before its archive"])
async def test_a_race_its_lone_node_died_ending_is_ended_and_archived_by_the_next(
    backend: Backend, dies: str
) -> None:
    """The only node is killed as it ends a race: before the race_over is stored (the
    race is due to end: nobody plays) or after, before the result is archived. Nobody
    will ask for the room again, so another node must find it by itself (the note
    written before the countdown and the race_over) once the dead node's lease has
    lapsed, end the race if it is not ended, and archive its result."""
    node = await backend.node()
    race = await _race_on(node, node)
    ann, bob, room = race.ann, race.bob, race.room
    assert (await ann.ask("resign")).t == "ok"
    if dies == "before its race_over":
        crashed = _dies_at(node, {"append_event": _storing(EventType.RACE_OVER)})
    else:  # whichever of its two writes the end makes first
        crashed = _dies_at(node, {"expire_room": _always, "save_result": _always})
    with contextlib.suppress(Crashed):
        await bob.ask("resign")
    await _poll(_value(crashed), bool, "the node was not killed")
    await node.stop()
    race_key = race_id(room.room_id, race.commitment)
    reader = await backend.node()  # reads what the dead node left in Redis
    assert await reader.store.load_result(race_key) is None, "archived before the crash"
    stored = [e.t for e in await _stored(reader, room)]
    assert (EventType.RACE_OVER in stored) is (dies == "before its archive"), stored

    # The next node looks after the rooms no live node serves: once the dead node's
    # lease has lapsed (dropped here: what 5 s without renewal does), at its next sweep.
    await reader.store.drop_lease(node.node_id)
    await reader.sweep_orphans()
    kept = unpack(await archived_result(reader.store, race_key, timeout=5))
    assert kept["result"]["reason"] and kept["result"]["commitment"] == race.commitment
    assert {s["status"] for s in kept["result"]["standings"]} == {RacerStatus.RESIGNED}


def _always(*_args: Any, **_kwargs: Any) -> bool:
    return True


def _value(items: list[str]) -> Callable[[], Awaitable[list[str]]]:
    async def probe() -> list[str]:
        return items

    return probe


@pytest.mark.parametrize("private", [False, True])
async def test_a_room_whose_node_dies_right_after_creating_it_still_expires(
    backend: Backend, private: bool
) -> None:
    """A new room's lifetime cap was a write after the room's: a node killed between
    the two left a room whose keys, join code and listing lived for ever (an audit,
    reproduced). The create's own writes carry an expiry now — the short one of a room
    nobody is in: given the day-long cap, a create cut before its creator's join left
    its meta and code a day (meta, code copy and global code all at 86,400 s, seen),
    though nobody was ever in it. Its first join gives it the cap."""
    node = await backend.node()
    ann = FakePeer(node)
    # Killed at its next write after the room's (the creator's join; its lifetime cap,
    # when that was a write of its own).
    crashed = _dies_at(node, {"append_event": _always, "expire_room": _always})
    with contextlib.suppress(Crashed):
        await ann.ask("create", variant="yukon", name="Ann", private=private)
    assert crashed
    await node.stop()
    other = await backend.node()
    listed = await other.store.listed_rooms()
    assert len(listed) == (0 if private else 1)
    ttls: dict[str, int] = {}
    raw = other.store._redis
    async for key in raw.scan_iter(match=other.store.keys.prefix.replace("{", "\\{") + "*"):
        name = key.decode()
        if name.endswith((":meta", ":code")) or ":code:" in name:
            ttls[name] = int(await raw.pttl(name))
    assert len(ttls) == 3, ttls  # the room's meta and code copy, the global code key
    assert _all_between(ttls, 0, EMPTY_ROOM_TTL_S), ttls


async def _room_metas(node: Node) -> list[str]:
    """Every room the store holds (its meta key), whichever node made it."""
    pattern = node.store.keys.prefix + "\\{room:*\\}:meta"
    return [k.decode() async for k in node.store._redis.scan_iter(match=pattern, count=1000)]


@pytest.mark.parametrize("request_type", ["create", "quick"])
async def test_a_room_whose_write_fails_after_its_claim_leaves_neither(
    backend: Backend, request_type: str
) -> None:
    """A room-opening request proposing a token claims it, then writes its room: Redis
    failing that write refuses it ``unavailable`` naming no seat, with no room stored
    and its claim released — so the same request sent again is seated, not refused
    ``token_in_use`` by its own first attempt."""
    node = await backend.node()
    bob = FakePeer(node)
    failed = _fail_once(node.store, "create_room")
    token = secrets.token_urlsafe(24)
    refused = await bob.ask(request_type, variant="yukon", name="Bob", token=token)
    assert failed
    assert (refused.t, refused.d.get("code")) == ("error", "unavailable"), refused.d
    assert "room" not in refused.d and "token" not in refused.d
    assert bob.room is None and not node.rooms
    assert await _room_metas(node) == [] and await node.store.listed_rooms() == []
    assert await node.store.claimed_seat(token_digest(token)) is None
    again = await bob.ask(request_type, variant="yukon", name="Bob", token=token)
    assert again.t == "joined", again.d
    assert len(await _room_metas(node)) == 1


@pytest.mark.parametrize("dies", ["before its room", "before its seat"])
async def test_a_room_opener_whose_node_dies_after_its_claim_is_resumed_as_never_seated(
    backend: Backend, dies: str
) -> None:
    """The node is killed after a ``create``'s claim: before the room is written, or
    after it and before the creator's seat. No fault leaves a room its claim does not
    name: none at all, or the empty room (which expires: the test above). A resume by
    the token alone on another node is told ``unavailable`` while the seat may still be
    being written, then ``bad_token`` — ask again — and the claim expires on its own."""
    clock = Clock()
    node = await backend.node(clock=clock)
    call = "create_room" if dies == "before its room" else "append_event"
    crashed = _dies_at(node, {call: _always})
    token = secrets.token_urlsafe(24)
    with contextlib.suppress(Crashed):
        await FakePeer(node).ask("create", variant="yukon", name="Ann", token=token)
    assert crashed == [call]
    await node.stop()
    other = await backend.node(clock=clock)
    rooms = await _room_metas(other)
    assert len(rooms) == (0 if dies == "before its room" else 1), rooms
    claim = await other.store.claimed_seat(token_digest(token))
    assert claim is not None
    assert any(claim.room_id in meta for meta in rooms) == (dies == "before its seat")
    early = await FakePeer(other).ask("resume", token=token)
    assert (early.t, early.d["code"]) == ("error", "unavailable"), early.d
    clock.advance(SEAT_SETTLE_S, other)
    later = await FakePeer(other).ask("resume", token=token)
    assert (later.t, later.d["code"]) == ("error", "bad_token"), later.d
    ttl = int(await other.store._redis.ttl(other.store.keys.seat(token_digest(token))))
    assert 0 < ttl <= lobby.SEAT_CLAIM_TTL_S


async def _adopted_after(backend: Backend, clock: Clock, dead: Node, room: LiveRoom) -> Node:
    """``dead`` is killed (it writes nothing more); the next node's sweep must adopt
    ``room`` and mark the dead node's racers offline. Returns that node."""
    StoreFaults(dead.store).down = True
    await dead.stop()
    nxt = await backend.node(clock=clock)
    await nxt.store.drop_lease(dead.node_id)  # what 5 s without renewal does
    await nxt.sweep_orphans()  # the sweep it runs at start, 6 s later and every minute
    adopted = nxt.rooms.get(room.room_id)
    assert adopted is not None and adopted.served(), "no node looks after the room"

    async def online() -> list[str]:  # the start's own sweep may be marking them
        return [r.name for r in adopted.state.racers.values() if r.online]

    await _poll(online, lambda names: not names, "the dead node's racers are not offline")
    return nxt


async def test_a_race_whose_only_node_died_mid_race_is_adopted_ended_and_archived(
    backend: Backend,
) -> None:
    """The only node serving a race dies in the middle of it, and neither racer comes
    back. No request will ever load the room again, so the next node must find it by
    itself (the note written before the countdown), see that no live node serves it,
    and serve it: the dead node's racers go offline, forfeit when their grace ends,
    and the race is over and archived — not left running until its keys expire."""
    clock = Clock()
    node = await backend.node(clock=clock)
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    assert (await race.ann.ask("move", seq=0, move=winning_moves(SOLVABLE_SECRET)[0])).t == "moved"
    nxt = await _adopted_after(backend, clock, node, room)

    clock.advance(GRACE_S + 1, nxt)
    await nxt.tick(nxt.rooms[room.room_id])
    race_key = race_id(room.room_id, race.commitment)
    kept = unpack(await archived_result(nxt.store, race_key, timeout=5))
    assert kept["result"]["reason"] and kept["result"]["commitment"] == race.commitment
    assert {s["status"] for s in kept["result"]["standings"]} == {RacerStatus.LEFT}
    # The note goes right after the result is saved (the archive's second write).
    await _poll(nxt.store.unarchived_rooms, lambda rooms: room.room_id not in rooms, "the note")


async def test_a_listed_lobby_whose_only_node_died_is_adopted_and_its_ghost_leaves(
    backend: Backend,
) -> None:
    """Ann waits in a public lobby; her node dies and she does not come back. The next
    node's sweep adopts the listed lobby: Ann goes offline, leaves when her grace
    ends, and the emptied lobby leaves the list — instead of a ghost waiting there,
    ready to be joined, until the room's keys expire a day later."""
    clock = Clock()
    node = await backend.node(clock=clock)
    ann = FakePeer(node)
    assert (await ann.ask("create", variant="yukon", name="Ann")).t == "joined"
    room = ann.room
    assert room is not None
    assert room.room_id in await node.store.listed_rooms()
    nxt = await _adopted_after(backend, clock, node, room)

    clock.advance(GRACE_S + 1, nxt)
    adopted = nxt.rooms[room.room_id]
    await nxt.tick(adopted)
    assert not adopted.state.racers, adopted.state.racers
    assert room.room_id not in await nxt.store.listed_rooms()


async def test_a_start_whose_countdown_write_fails_after_its_note_is_refused_and_retried(
    backend: Backend,
) -> None:
    """A countdown takes two writes: the room is noted as a race to archive
    (Store.mark_unarchived), then the countdown is stored. Redis fails the second: the
    start is refused ``unavailable`` and nothing but the note was written, so the room
    is still a lobby (the sweep leaves a noted lobby alone); the host's retry starts
    the race, which ends, is archived, and its note cleared."""
    node = await backend.node()
    ready = await lobby_of_two(node)
    ann, bob, room = ready.ann, ready.bob, ready.room

    failed = _fail_once(node.store, "append_event", _storing(EventType.COUNTDOWN))
    refused = await _replies(ann, "start")
    assert failed
    assert [(r.t, r.d.get("code")) for r in refused] == [("error", "unavailable")]
    assert room.room_id in await node.store.unarchived_rooms()  # the first write
    stored = [e.t for e in await _stored(node, room)]
    assert EventType.COUNTDOWN not in stored, stored
    assert not ann.events("countdown") and not bob.events("countdown")
    await node.sweep_orphans()  # a noted lobby is neither adopted nor cleared
    assert room.state.phase == "lobby"
    assert room.room_id in await node.store.unarchived_rooms()

    assert (await ann.ask("start")).t == "ok"  # the retry
    started = await ann.until(lambda f: f.t == "started")
    await bob.until(lambda f: f.t == "started")
    assert [e.t for e in await _stored(node, room)].count(EventType.COUNTDOWN) == 1
    assert (await ann.ask("resign")).t == "ok"
    assert (await bob.ask("resign")).t == "ok"
    await ann.until(lambda f: f.t == "race_over")
    race_key = race_id(room.room_id, str(started.d["commitment"]))
    await archived_result(node.store, race_key)
    await _poll(node.store.unarchived_rooms, lambda rooms: room.room_id not in rooms, "the note")


async def test_a_start_whose_board_read_fails_still_sends_the_racer_its_board(
    backend: Backend,
) -> None:
    """At the start each racer here gets its own board, built from its engine, which
    the node rebuilds from the store. Redis fails that read for Ann: the race has
    started all the same (stored and broadcast), so her board is sent once Redis
    answers, and Bob's at once. Before, Ann never got hers — her client waits for it
    after ``started`` — and only warnings were logged (a Redis stall of 6 s in the
    start window left 9 of 50 of the server benchmark's rooms unstarted this way)."""
    node = await backend.node()
    ready = await lobby_of_two(node)
    ann, bob, room = ready.ann, ready.bob, ready.room
    assert (await ann.ask("start")).t == "ok"
    failed = _fail_once(node.store, "move_log")  # the start comes a countdown later
    await ann.until(lambda f: f.t == "started")
    for peer, racer in ((ann, 1), (bob, 2)):
        await _frame(peer, f"racer {racer}'s own board", _is("board", racer=racer))
        assert len([f for f in peer.frames if f.t == "board"]) == 1
    # (Checked once the boards are out: the engines are read after ``started`` is sent.)
    assert failed == [(room.room_id, room.log_name(1))], failed
    assert (await ann.ask("move", seq=0, move=winning_moves(SOLVABLE_SECRET)[0])).t == "moved"


async def test_a_resign_whose_spectator_board_read_fails_is_ok_and_the_race_ends(
    backend: Backend,
) -> None:
    """A spectator (boards one second late) watches after Ann has moved and resigned,
    and the node then keeps no shadow engine of her game (the watch built one; it is
    dropped here, as one found out of step is: spectators.fold_move). Bob resigns:
    folding that builds the spectators' boards, and Redis fails the read that rebuilds
    Ann's shadow. The resign is stored and broadcast: it is answered ``ok``, the race
    (nobody plays) ends, and the spectator gets Ann's final board once Redis answers.
    Before, the failure escaped the fold: Bob was told ``unavailable``, no timer was
    armed, and the race nobody played never ended (nor did the spectator get her
    board)."""
    node = await backend.node()
    race = await _race_on(node, node, spectator_delay_s=1)
    ann, bob, spy = race.ann, race.bob, FakePeer(node)
    moves = winning_moves(SOLVABLE_SECRET)
    for seq in range(3):
        assert (await ann.ask("move", seq=seq, move=moves[seq])).t == "moved"
    assert (await ann.ask("resign")).t == "ok"
    room = ann.room
    assert room is not None
    assert (await spy.ask("watch", code=room.meta.code)).t == "watching"
    mark = len(spy.frames)
    del room.shadows[1]

    failed = _fail_once(node.store, "move_log")
    assert [(r.t, r.d.get("code")) for r in await _replies(bob, "resign")] == [("ok", None)]
    assert failed == [(room.room_id, room.log_name(1), 0)], failed  # Ann's shadow
    await _frame(spy, "the race_over", _is("race_over"), after=mark)
    await _frame(ann, "the race_over", _is("race_over"))
    await _frame(spy, "Ann's final board", _is("board", racer=1), after=mark, timeout=10)


@pytest.mark.parametrize("fails", ["its replay", "its boards"])
async def test_a_watch_whose_read_fails_is_refused_once_and_leaves_no_spectator(
    backend: Backend, fails: str
) -> None:
    """A watch reads the events missed since ``since`` (its replay) and the boards a
    new spectator starts with (rebuilding shadow engines). Redis fails one of those
    reads: the watch gets one reply, ``unavailable``, and leaves no spectator behind,
    and its retry watches, boards and all. Before, a failed replay left the connection
    among the room's spectators (fed its frames, never detached), and failed boards
    came after ``watching``: an error with the same id, and no boards."""
    node = await backend.node()
    race = await _race_on(node, node)
    ann = race.ann
    room = ann.room
    assert room is not None
    moves = winning_moves(SOLVABLE_SECRET)
    for seq in range(3):
        assert (await ann.ask("move", seq=seq, move=moves[seq])).t == "moved"
    code, since = str(ann.frames[0].d["code"]), room.state.version - 2
    spy = FakePeer(node)
    if fails == "its replay":
        failed = _fail_once(node.store, "events_since", lambda *_a, **kw: "limit" in kw)
    else:
        failed = _fail_once(node.store, "move_log")
    got = await _replies(spy, "watch", code=code, since=since)
    assert failed
    assert [(r.t, r.d.get("code")) for r in got] == [("error", "unavailable")], got
    assert spy.room is None and spy not in room.spectators

    mark = len(spy.frames)
    again = await spy.ask("watch", code=code, since=since)
    assert (again.t, again.d["replay"]) == ("watching", 2), again.d
    await _frame(spy, "Ann's board", _is("board", racer=1), after=mark)
    assert spy in room.spectators


@pytest.mark.parametrize("fails", ["the rebuild", "the notice"])
async def test_a_tailed_rebuild_redis_fails_is_made_later_and_the_tail_goes_on(
    backend: Backend, fails: str
) -> None:
    """Ann races on node A, Bob on node B, which folds Ann's events from its tail.
    The next one B tails does not follow the event B folded last, as when Redis has
    lost writes: B rebuilds the room from Redis and sends Bob a ``resync`` notice with
    a fresh snapshot, and Redis fails a read of that (the room's events, or Bob's log
    for his board). B must finish once Redis answers: Bob gets his notice, and B goes
    on folding Ann's events. Before, the failure escaped the tail loop and ended it:
    B never folded another node's event again (Bob waited for Ann's moves for ever);
    a failed rebuild left the room forgotten, to be folded again from version 1 as
    live events; and a failed notice was never sent."""
    a, b = await backend.node(), await backend.node()
    race = await _race_on(a, b)
    ann, bob = race.ann, race.bob
    room_a, room_b = ann.room, bob.room
    assert room_a is not None and room_b is not None
    moves = winning_moves(SOLVABLE_SECRET)
    assert (await ann.ask("move", seq=0, move=moves[0])).t == "moved"
    await _frame(bob, "Ann's first move", _is("progress", racer=1))
    if fails == "the rebuild":
        failed = _fail_once(b.store, "events_since", lambda _room, since, **_kw: since == 0)
    else:
        failed = _fail_once(b.store, "move_log")
    room_b.chain = "lost"  # the event B folded last is not the one Redis now holds
    mark = len(bob.frames)

    assert (await ann.ask("move", seq=1, move=moves[1])).t == "moved"
    notice = await _frame(bob, "the resync notice", _is("resync"), after=mark)
    assert failed, f"{fails}: no read failed"
    assert notice.d["snapshot"]["version"] == room_a.state.version  # type: ignore[index]
    assert (await ann.ask("move", seq=2, move=moves[2])).t == "moved"
    version = room_a.state.version
    await _frame(bob, "Ann's third move", lambda f: f.t == "progress" and f.v == version)
    # Nothing of the history was sent again as live events after the failed rebuild.
    assert [f.v for f in bob.frames[mark:] if f.v is not None] == [version], bob.frames[mark:]


@pytest.mark.parametrize("fails", ["the fold", "the read"])
async def test_a_tail_that_fails_on_a_defect_goes_on_in_order(
    backend: Backend, caplog: pytest.LogCaptureFixture, fails: str
) -> None:
    """Node B's tail meets what no store raises (a defect, met once): in its fold of
    an event from node A, or in its read of the streams. A failed read ended B's tail
    for good (Bob never got another of Ann's moves); now each is logged with its
    traceback, counted, and the tail reads again from the version B folded last: Bob
    gets every move of Ann's, once, in order."""
    a, b = await backend.node(), await backend.node()
    race = await _race_on(a, b)
    ann, bob = race.ann, race.bob
    assert ann.room is not None
    owner, name = (b, "ingest") if fails == "the fold" else (b.store, "tail")
    real, failures = getattr(owner, name), []

    async def failing_once(*args: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append(True)
            raise RuntimeError("a defect (injected)")
        return await real(*args, **kwargs)

    setattr(owner, name, failing_once)
    mark = len(bob.frames)
    moves = winning_moves(SOLVABLE_SECRET)
    for seq in range(3):
        assert (await ann.ask("move", seq=seq, move=moves[seq])).t == "moved"
    version = ann.room.state.version
    await _frame(bob, "Ann's third move", lambda f: f.t == "progress" and f.v == version)
    assert failures, f"{fails}: never failed"
    versions = [f.v for f in bob.frames[mark:] if f.v is not None]
    assert versions == list(range(version - 2, version + 1)), versions
    said = {
        "the fold": "folding another node's events failed",
        "the read": "a node loop failed; restarting it",
    }[fails]
    logged = [r for r in caplog.records if r.getMessage() == said]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert isinstance(b.metrics, Tally) and b.metrics.defects.labels("tail").value == 1


async def test_an_engine_rebuilt_from_a_read_older_than_a_move_does_not_replace_the_current(
    backend: Backend,
) -> None:
    """Two rebuilds of a racer's engine overlap: one (a start board sent late, after
    Redis failed at the start) reads the empty move log, and before its read returns,
    the racer's first move rebuilds the engine itself, applies the move and stores it.
    The late read must not replace the engine the move went into: it did, and the
    racer's next move was refused ``bad_seq`` "expected 0" for a move it had been told
    was ``moved`` (found by tests/rooms/test_fault_soak.py)."""
    node = await backend.node()
    race = await _race_on(node, node)
    ann, room = race.ann, race.ann.room
    assert room is not None and ann.racer is not None
    move_log, gate, reads = node.store.move_log, asyncio.Event(), []
    late_reader: contextvars.ContextVar[bool] = contextvars.ContextVar("late", default=False)

    async def late_read(*args: Any, **kwargs: Any) -> Any:
        raw = await move_log(*args, **kwargs)
        if late_reader.get():
            reads.append(str(len(raw)))
            await gate.wait()  # read now, returned after the move below
        return raw

    async def late_rebuild() -> RacerGame:
        late_reader.set(True)
        room.games.pop(ann.racer or 0, None)
        return await node.game(room, ann.racer or 0)

    setattr(node.store, "move_log", late_read)  # noqa: B010 (a method of the instance)
    late = asyncio.ensure_future(late_rebuild())
    await _poll(_value(reads), lambda got: got == ["0"], "the late read")
    moves = winning_moves(SOLVABLE_SECRET)
    assert (await ann.ask("move", seq=0, move=moves[0])).t == "moved"
    gate.set()
    await late
    reply = await ann.ask("move", seq=1, move=moves[1])
    assert reply.t == "moved", reply.d


@pytest.mark.parametrize("retry", [False, True])
async def test_a_move_checked_on_an_engine_behind_the_store_gets_the_stores_answer(
    backend: Backend, retry: bool
) -> None:
    """An engine cached behind the racer's stored log (whatever made it so): a move is
    judged against the log, not that engine — the next move is ``moved`` and a retry
    of the last stored one gets its stored outcome, never ``bad_seq``."""
    node = await backend.node()
    race = await _race_on(node, node)
    ann, room = race.ann, race.ann.room
    assert room is not None and ann.racer is not None
    moves = winning_moves(SOLVABLE_SECRET)
    assert (await ann.ask("move", seq=0, move=moves[0])).t == "moved"
    behind = RacerGame.rebuild(
        room.meta.settings.variant, room.seed(), room.meta.settings.options, []
    )
    room.games[ann.racer] = behind
    seq = 0 if retry else 1
    reply = await ann.ask("move", seq=seq, move=moves[seq])
    assert (reply.t, reply.d.get("seq")) == ("moved", seq), reply.d
    assert await node.store.log_length(room.room_id, room.log_name(ann.racer)) == seq + 1


async def test_a_certified_deal_whose_write_fails_is_chosen_when_redis_answers(
    backend: Backend,
) -> None:
    """The solver wins a candidate, then Redis fails its ``deal_chosen``. Nobody in
    the lobby does anything: the candidate found is still chosen once Redis answers,
    so the lobby does not show "certifying a winnable deal…" until someone happens to
    act (before, only a request started the certification again)."""
    node = await backend.node()
    ann = FakePeer(node)
    failed = _fail_once(node.store, "append_event", _storing(EventType.DEAL_CHOSEN))
    created = await ann.ask("create", variant="yukon", name="Ann")
    assert created.t == "joined", created.d
    chosen = await ann.until(lambda f: f.t == "deal_chosen", timeout=30)
    assert failed, "no deal_chosen write was made"
    assert chosen.d["certified"] is True, chosen.d
    room = ann.room
    assert room is not None
    stored = [ev.t for ev in await _stored(node, room)]
    assert stored.count(EventType.DEAL_CHOSEN) == 1, stored


async def _tail_held(node: Node) -> asyncio.Event:
    """Hold ``node``'s tail of the other nodes' events until the returned event is set:
    the node's copy of its rooms goes stale, as when it is paused (SIGSTOP) or cut off
    from Redis and its first move after the link returns comes before its tail does.
    Returns once a tail read is held (one already under way has ended)."""
    real = node.store.tail
    release, held_now = asyncio.Event(), asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        held_now.set()
        await release.wait()
        return await real(*args, **kwargs)

    setattr(node.store, "tail", held)  # noqa: B010 (a method of the instance)
    await asyncio.wait_for(held_now.wait(), timeout=10)
    return release


@pytest.mark.parametrize("ended_by", ["grace", "resign"])
async def test_a_racer_whose_race_ended_on_another_node_cannot_finish_on_a_stale_one(
    backend: Backend, ended_by: str
) -> None:
    """Bob races on node B, Ann on node A. While B has not folded it, A ends Bob's race
    (his grace ran out there, or he resigned from a window on A); then Bob's finishing
    move reaches B, whose copy of the room says he still races. The move must not be
    stored: a node paused past the grace stored it, and Bob, who had left, won."""
    clock = Clock()
    node_a, node_b = await backend.node(clock), await backend.node(clock)
    race = await _race_on(node_a, node_b)
    ann, bob = race.ann, race.bob
    room_a, room_b = ann.room, bob.room
    assert room_a is not None and room_b is not None
    line = winning_moves(SOLVABLE_SECRET)
    for seq, move in enumerate(line[:-1]):
        assert (await bob.ask("move", seq=seq, move=move)).t == "moved"
    bob_id = next(r.racer for r in room_a.state.racers.values() if r.name == "Bob")
    await _poll(
        _stored_log_length(node_a, room_a, bob_id), lambda n: n == len(line) - 1, "Bob's moves"
    )
    release = await _tail_held(node_b)
    if ended_by == "grace":
        decision = lambda: decisions.leave(room_a.state, bob_id, LeaveReason.GRACE)  # noqa: E731
    else:
        decision = lambda: decisions.resign(room_a.state, bob_id)  # noqa: E731
    assert await node_a.decide(room_a, decision)
    assert room_b.state.racers[bob_id].status == RacerStatus.PLAYING  # B's copy is stale

    refused = await bob.ask("move", seq=len(line) - 1, move=line[-1])
    assert refused.t == "error" and refused.d["code"] == "wrong_phase", refused.d
    assert refused.d["message"] == "your race is over"
    stored = await _stored(node_a, room_a)
    assert not any(e.t == EventType.FINISHED for e in stored), "Bob's finish was stored"
    assert await _stored_log_length(node_a, room_a, bob_id)() == len(line) - 1
    release.set()

    # Ann wins: the only racer still in the race.
    for seq, move in enumerate(line):
        assert (await ann.ask("move", seq=seq, move=move)).t == "moved"
    over = await ann.until(lambda f: f.t == "race_over")
    first = over.d["standings"][0]  # type: ignore[index]
    assert (first["name"], first["status"]) == ("Ann", RacerStatus.FINISHED), first
    bob_status = RacerStatus.LEFT if ended_by == "grace" else RacerStatus.RESIGNED
    assert _status(over, "Bob") == bob_status


def _stored_log_length(node: Node, room: LiveRoom, racer: int) -> Callable[[], Awaitable[int]]:
    async def probe() -> int:
        return len(await node.store.move_log(room.room_id, room.log_name(racer)))

    return probe


async def test_after_an_outage_other_nodes_racers_are_not_marked_offline_before_a_lease(
    backend: Backend,
) -> None:
    """Redis down longer than a lease: every node's lease lapses. The first node back
    found the others' leases gone and marked their racers offline, and a moment later
    those nodes (renewing) marked them online again (an audit: a flash of 'offline').
    A node that is really dead is still marked, a lease later."""
    clock = Clock()
    node_a, node_b = await backend.node(clock), await backend.node(clock)
    race = await _race_on(node_a, node_b)
    room_a, bob = race.ann.room, race.bob
    assert room_a is not None
    bob_id = next(r.racer for r in room_a.state.racers.values() if r.name == "Bob")
    assert node_b._watch_task is not None
    node_b._watch_task.cancel()  # B renews no more: its lease is the outage's victim
    await node_a.store.drop_lease(node_b.node_id)
    node_a.store_failed()
    node_a.store_ok()  # Redis answers again
    await node_a.check_rooms()
    assert room_a.state.racers[bob_id].online, "marked offline right after the outage"
    assert not bob.events("presence")
    clock.advance(LEASE_MS / 1000 + 1)
    await node_a.check_rooms()  # B's renewal may still be waiting out a command
    assert room_a.state.racers[bob_id].online
    clock.advance(node_a.store.timeout_s + LEASE_RENEW_S)
    await node_a.check_rooms()  # B had time to renew, and has not: it is dead
    assert not room_a.state.racers[bob_id].online


async def test_a_redis_refusing_every_write_reads_as_down_and_its_room_retries_paced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that answers reads and refuses every write (as one out of memory under
    ``noeviction`` does; here ``min-replicas-to-write 1``: NOREPLICAS) under a race whose
    time limit is due. Two defects a review found: ``solrace_store_up`` read 1 in 60 of
    60 samples (a request's failure never set the node's flag, and each read that
    answered cleared it), and the room's tick, failing, was re-armed at once by the fold
    of its own read, bypassing TICK_RETRY_S: 1,588-2,245 'tick failed; retrying' lines
    in 3 s for one room. A real Redis: the failure is the store's, not an injected one."""
    caplog.set_level(logging.WARNING, logger="solrace.node")
    with redis_process(tmp_path / "redis") as url:
        clock = Clock()
        store = await Store.connect(url, prefix=new_prefix())
        node = Node(
            store,
            room_secret=lambda: SOLVABLE_SECRET,
            candidates_in_flight=1,
            countdown_ms=100,
            clock=clock,
        )
        node.start()
        store_up = Metrics(node).store_up  # the series /metrics exports
        admin = aioredis.from_url(url)
        try:
            race = await _race_on(node, node)
            assert store_up.collect()[0].samples[0].value == 1
            await admin.config_set("min-replicas-to-write", 1)  # every write refused now
            refused = await FakePeer(node).ask("create", variant="yukon", name="Cy")
            assert refused.d.get("code") == "unavailable", refused.d
            caplog.clear()
            clock.advance(int(race.settings["time_limit_s"]) + 1, node)  # timeouts due
            samples = []
            for _ in range(30):  # 3 s
                await asyncio.sleep(0.1)
                samples.append(store_up.collect()[0].samples[0].value)
            retries = sum(r.getMessage() == "tick failed; retrying" for r in caplog.records)
            assert samples.count(0) == len(samples), samples
            assert 1 <= retries <= 3 / TICK_RETRY_S + 2, retries
        finally:
            await admin.config_set("min-replicas-to-write", 0)
            await admin.aclose()
            await node.stop()
            await store.delete_all()
            await store.close()


async def test_a_lobby_whose_creators_offline_redis_fails_to_sort_sorts_when_it_answers(
    backend: Backend,
) -> None:
    """Ann's quick lobby: she hangs up, her ``presence`` offline is stored, then the
    second write, the lobby's move behind the lobbies somebody is in (Store.
    move_listing), fails. The lobby stayed among those ``quick`` reads, a room nobody
    is in, until something sorted it: the node sorts it again once Redis answers,
    and a quick racer starts a lobby of its own rather than joining Ann's empty one."""
    node = await backend.node()
    ann = FakePeer(node)
    assert (await ann.ask("quick", variant="yukon", name="Ann")).t == "joined"
    room = ann.room
    assert room is not None
    failed = _fail_once(node.store, "move_listing")
    ann.closed = True  # her connection closes without a leave
    await lobby.disconnected(node, ann)
    assert failed, "the sort was not attempted"
    assert any(e.t == EventType.PRESENCE for e in await _stored(node, room))

    async def sorted_() -> tuple[bool, bool]:
        store = node.store
        return (
            room.room_id in await store.listed_lobbies(),
            room.room_id in await store.idle_lobbies(),
        )

    await _poll(sorted_, lambda where: where == (False, True), "the lobby was not sorted")
    bob = FakePeer(node)
    assert (await bob.ask("quick", variant="yukon", name="Bob")).t == "joined"
    assert bob.room is not None and bob.room.room_id != room.room_id


async def test_a_race_whose_lone_node_died_between_its_archive_and_its_note_keeps_its_result(
    backend: Backend,
) -> None:
    """The race_over is stored and its result archived, then the node is killed
    before it clears the note that the race awaits its archive (Store.
    clear_unarchived): two writes. The next node's sweep finds the note, the race
    ended and archived: it clears the note, and the archive keeps the dead node's
    result (no second one, no other race_over)."""
    node = await backend.node()
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    crashed = _dies_at(node, {"clear_unarchived": _always})
    assert (await race.ann.ask("resign")).t == "ok"
    with contextlib.suppress(Crashed):
        await race.bob.ask("resign")
    await _poll(_value(crashed), bool, "the node was not killed")
    await node.stop()
    race_key = race_id(room.room_id, race.commitment)
    reader = await backend.node()
    saved = await reader.store.load_result(race_key)
    assert saved is not None, "not archived before the crash"
    assert room.room_id in await reader.store.unarchived_rooms()

    await reader.store.drop_lease(node.node_id)  # what 5 s without renewal does
    await reader.sweep_orphans()
    assert room.room_id not in await reader.store.unarchived_rooms()
    assert await reader.store.load_result(race_key) == saved
    stored = [e.t for e in await _stored(reader, room)]
    assert stored.count(EventType.RACE_OVER) == 1, stored
