"""A public room's create cut between its writes (docs/design.md, "Faults").

Store.create_room writes the room's keys (its meta and code, one pipeline), then lists
it (a second pipeline): a listed room is never one whose meta is not written yet.
Redis failing between the two, or the node dying there, must leave no room its
creator was told of that nobody can find, and no listing of a room nobody can join
for long: the creator is told ``unavailable`` (or its node is gone), ``list`` shows
no such room, and once no join of its creator can still land (SEAT_SETTLE_S) the
next sweep leaves nothing of it listed. Sent again, the create is a room ``list``
shows.

The creator's join is the create's next write, and the first join gives the room its
day (it was written with a new room's ten minutes), then its join code's (another
slot) in the write after. Cut before the join, nothing of the room outlives its ten
minutes, and once the join can no longer land it is in no listing, no quick lobbies
(the next ``quick`` drops it, and seats its racer elsewhere) and no note; cut after
the join, the code still gets its day.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from solrace.protocol.limits import SEAT_SETTLE_S
from solrace.protocol.views import EventType
from solrace.rooms.node import EMPTY_ROOM_TTL_S, ROOM_TTL_S, Node
from solrace.rooms.records import unpack_event

from tests.store.conftest import room_keys
from tests.support.faults import Clock, Crashed, StoreFaults

from .conftest import Backend, FakePeer
from .test_fault_windows import _always, _dies_at, _fail_once, _poll, _reply_lost_once
from .test_take_up_faults import _dead, _node, _sweep

#: Where the fault strikes the listing's pipeline, the room's keys written: Redis
#: fails it (nothing listed), Redis applies it and fails before it answers (and
#: fails the create's clean-up after it), or the node dies there.
CUTS = ["redis fails", "listed, then redis fails", "node dies"]


class _Cut:
    """A pipeline of ``node``'s raw client that runs ``on_listing`` (given its
    ``execute``) in place of its ``execute`` when it lists a room (a ``zadd``); any
    other pipeline runs as it is."""

    def __init__(
        self,
        make: Callable[..., Any],
        on_listing: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
    ) -> None:
        self._make, self._on_listing = make, on_listing
        self._calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def queue(*args: Any, **kwargs: Any) -> _Cut:
            self._calls.append((name, args, kwargs))
            return self

        return queue

    async def execute(self) -> Any:
        pipe = self._make(transaction=False)
        for name, args, kwargs in self._calls:
            getattr(pipe, name)(*args, **kwargs)
        if any(name == "zadd" for name, _a, _k in self._calls):
            return await self._on_listing(pipe.execute)
        return await pipe.execute()


def _cut_listing(node: Node, fault: str) -> list[str]:
    """Cut ``node``'s next listing write of a create (see CUTS). Returns the cuts made."""
    redis = node.store._redis
    real_pipeline, real_delete = redis.pipeline, redis.delete
    faults = StoreFaults(node.store) if fault == "node dies" else None
    cut: list[str] = []

    async def failing_delete(*_args: Any) -> Any:
        raise RedisConnectionError("delete: Redis is down (injected)")

    async def on_listing(execute: Callable[[], Awaitable[Any]]) -> Any:
        if cut:
            return await execute()
        cut.append(fault)
        redis.delete = failing_delete  # its clean-up fails (or never runs: killed)
        if faults is not None:
            faults.down = True  # killed: it writes nothing more
            raise Crashed()
        if fault == "listed, then redis fails":
            await execute()
        raise RedisConnectionError("the listing: Redis is down (injected)")

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        if cut:
            redis.delete = real_delete  # Redis answers again
            return real_pipeline(*args, **kwargs)
        return _Cut(real_pipeline, on_listing)

    redis.pipeline = pipeline
    return cut


@pytest.mark.parametrize("fault", CUTS)
async def test_a_public_create_cut_before_its_listing_is_listed_or_never_was(
    backend: Backend, fault: str
) -> None:
    """Ann creates a public room; a fault cuts the create after the room's keys,
    at its listing. She is told ``unavailable`` (no room, no seat) or her node is
    gone; ``list`` shows no room; past the window her join could still land in, the
    next sweep (another node's) leaves no room listed and adopts none. Her create
    sent again is a room ``list`` shows: the one room listed."""
    clock = Clock()
    node = await _node(backend, clock)
    ann = FakePeer(node)
    cut = _cut_listing(node, fault)
    reply = None
    with contextlib.suppress(Crashed):  # the node dying answers nothing
        reply = await ann.ask("create", variant="yukon", name="Ann")
    assert cut, "the listing was not cut"
    other = await _node(backend, clock)
    if fault == "node dies":
        await _dead(node, by=other)
        assert reply is None
    else:
        assert reply is not None and (reply.t, reply.d.get("code")) == ("error", "unavailable")
        assert "room" not in reply.d
    assert ann.room is None
    lister = FakePeer(other)
    assert (await lister.ask("list")).d["rooms"] == []

    clock.advance(SEAT_SETTLE_S + 1)
    await _sweep(other)
    assert await other.store.listed_rooms() == [], "a room nobody was told of stays listed"
    assert not [r for r in other.rooms.values() if r.served()], "an empty room was adopted"

    again = FakePeer(other if fault == "node dies" else node)
    created = await again.ask("create", variant="yukon", name="Ann")
    assert created.t == "joined", created.d
    other.listing_cache.forget()
    assert [r["code"] for r in (await lister.ask("list")).d["rooms"]] == [created.d["code"]]


#: Where a fault strikes the creator's join, the room's keys written: Redis fails it
#: (nothing stored; the creator is told ``unavailable``, its seat named), or the node
#: dies there.
JOIN_CUTS = ["redis fails", "node dies"]


def _cut_join(node: Node, fault: str) -> list[Any]:
    """Cut ``node``'s next event append (a create's: its creator's join; see JOIN_CUTS).
    Returns the cuts made."""
    if fault == "node dies":
        return _dies_at(node, {"append_event": _always})
    return _fail_once(node.store, "append_event")


async def _opened(node: Node, peer: FakePeer, how: str) -> str:
    """``peer`` opens a Yukon room on ``node`` (``how``: a public or private create, or
    a quick that finds no lobby), whatever a fault makes of it; the room's id."""
    with contextlib.suppress(Crashed):  # the node dying answers nothing
        if how == "quick":
            await peer.ask("quick", variant="yukon", name="Ann")
        else:
            await peer.ask("create", variant="yukon", name="Ann", private=how == "private")
    [room_id] = node.rooms  # the room's writes were made: the join was cut
    return room_id


@pytest.mark.parametrize("fault", JOIN_CUTS)
@pytest.mark.parametrize("how", ["public", "private", "quick"])
async def test_a_create_cut_before_its_creators_join_leaves_nothing_for_long(
    backend: Backend, fault: str, how: str
) -> None:
    """Ann opens a room; a fault cuts her join, the room's writes made. Nobody was
    ever in the room, and nobody can be told its code: its meta and join codes expire
    on a new room's ten minutes (EMPTY_ROOM_TTL_S), not the day-long cap (before:
    86,400 s on all three, private or not), and once no join of hers can still land,
    the next sweep leaves it in no listing, no quick lobbies and no note, and takes
    nobody's room up."""
    clock = Clock()
    node = await _node(backend, clock)
    cut = _cut_join(node, fault)
    room_id = await _opened(node, FakePeer(node), how)
    assert cut, "the join was not cut"
    other = await _node(backend, clock)
    if fault == "node dies":
        await _dead(node, by=other)
    room = await other.room(room_id)
    assert not room.state.racers
    ttls = await room_keys(other.store, room_id)
    code_key = other.store.keys.code(room.meta.code)
    ttls[code_key] = int(await other.store._redis.pttl(code_key))
    meta, code = other.store.keys.room(room_id).meta, other.store.keys.room(room_id).code
    assert {meta, code, code_key} <= set(ttls), ttls
    assert all(0 < ms <= EMPTY_ROOM_TTL_S * 1000 for ms in ttls.values()), ttls

    clock.advance(SEAT_SETTLE_S + 1)
    if fault == "redis fails":
        # Its node, alive, leaves the set of the room it does not serve (within a
        # second: Node.leave_unserved); until then the sweep leaves the room to it.
        await _poll(lambda: other.store.room_nodes(room_id), lambda ids: not ids, "its nodes")
    await _sweep(other)
    assert room_id not in await other.store.listed_rooms()
    assert room_id not in await other.store.quick_lobbies("yukon")
    assert room_id not in await other.store.unlisted_lobbies()
    assert not [r for r in other.rooms.values() if r.served()], "an empty room was taken up"


@pytest.mark.parametrize("fault", JOIN_CUTS)
async def test_a_quick_room_nobody_joined_is_dropped_by_the_next_quick_not_joined(
    backend: Backend, fault: str
) -> None:
    """Ann's quick opens a room and a fault cuts her join. Once her join can no longer
    land, Bob's quick reads that room first (the variant's oldest quick lobby): it
    drops it from the quick lobbies and seats Bob in a room of his own. Before, Bob
    was seated in the room ``list`` and the sweep had hidden, and every quick read it
    until its keys expired."""
    clock = Clock()
    node = await _node(backend, clock)
    cut = _cut_join(node, fault)
    dead_room = await _opened(node, FakePeer(node), "quick")
    assert cut, "the join was not cut"
    other = await _node(backend, clock)
    if fault == "node dies":
        await _dead(node, by=other)
    assert await other.store.quick_lobbies("yukon") == [dead_room]

    clock.advance(SEAT_SETTLE_S + 1)
    bob = FakePeer(other)
    joined = await bob.ask("quick", variant="yukon", name="Bob")
    assert joined.t == "joined", joined.d
    assert bob.room is not None and bob.room.room_id != dead_room, "seated in the dead room"
    assert await other.store.quick_lobbies("yukon") == [bob.room.room_id]
    assert dead_room not in await other.store.listed_rooms()


@pytest.mark.parametrize("fault", JOIN_CUTS)
@pytest.mark.parametrize("private", [False, True])
async def test_a_first_join_cut_before_its_codes_settle_still_gives_the_code_its_day(
    backend: Backend, fault: str, private: bool
) -> None:
    """Ann's join, the room's first, gives it its day in its own write; its join code
    (another slot) follows in the next (Store.settle_expiry). Cut there: Redis failing
    it, the write is retried until it lands; the node dying there (the code left on
    ten minutes, the room on its day), the sweep that takes the lobby up settles it —
    else friends given the code could not join a lobby waiting past ten minutes."""
    clock = Clock()
    node = await _node(backend, clock)
    ann = FakePeer(node)
    cut: list[Any] = (
        _dies_at(node, {"settle_expiry": _always})
        if fault == "node dies"
        else _fail_once(node.store, "settle_expiry")
    )
    room_id = await _opened(node, ann, "private" if private else "public")
    assert cut, "the settle was not cut"
    other = await _node(backend, clock)
    keys = other.store.keys
    code_key = keys.code((await other.room(room_id)).meta.code)
    raw = other.store._redis
    assert int(await raw.pttl(keys.room(room_id).meta)) > (ROOM_TTL_S - 60) * 1000
    if fault == "node dies":
        assert 0 < int(await raw.pttl(code_key)) <= EMPTY_ROOM_TTL_S * 1000
        await _dead(node, by=other)
        await _sweep(other)
        taken = other.rooms.get(room_id)
        assert taken is not None and taken.served(), "the lobby was not taken up"
    else:
        assert ann.room is not None and ann.room.room_id == room_id  # seated all the same

    async def code_ms() -> int:
        return int(await raw.pttl(code_key))

    await _poll(code_ms, lambda ms: ms > (ROOM_TTL_S - 60) * 1000, "the code's day")


@pytest.mark.parametrize("private", [False, True])
async def test_a_first_join_whose_reply_was_lost_still_gives_the_code_its_day(
    backend: Backend, private: bool
) -> None:
    """Ann's join, the room's first, is stored (the room's day in its own write), and
    Redis loses its reply: she is told ``unavailable`` naming her seat, and resumes
    it. Her node is alive, so no sweep takes the lobby up; nothing settled the code
    (it followed only a join read back), which kept a new room's ten minutes while
    the room had its day: friends given the code could not join a lobby waiting past
    ten minutes (``unknown_room``). The failed join settles it (a review)."""
    node = await backend.node()
    ann = FakePeer(node)
    lost = _reply_lost_once(
        node.store,
        "append_event",
        lambda _r, data, *_a, **_kw: unpack_event(data).t == EventType.RACER_JOINED,
    )
    refused = await ann.ask("create", variant="yukon", name="Ann", private=private)
    assert lost and refused.d["code"] == "unavailable", refused.d
    room_id, token = str(refused.d["room"]), str(refused.d["token"])
    resumed = await ann.ask("resume", room=room_id, token=token)
    assert resumed.t == "joined", resumed.d
    keys, raw = node.store.keys, node.store._redis
    code_key = keys.code((await node.room(room_id)).meta.code)
    assert int(await raw.pttl(keys.room(room_id).meta)) > (ROOM_TTL_S - 60) * 1000

    async def code_ms() -> int:
        return int(await raw.pttl(code_key))

    await _poll(code_ms, lambda ms: ms > (ROOM_TTL_S - 60) * 1000, "the code's day")


async def test_a_quick_room_another_node_seated_a_racer_in_is_not_dropped_by_its_create(
    backend: Backend,
) -> None:
    """Ann's quick opens a room on node A; before her join, Bob's quick on node B
    takes that room (its first racer: a room nobody is in yet takes the next quick
    racer). Redis then fails the read Ann's join begins with: nothing of hers stored,
    and A's copy of the room, never read again, has nobody in it. Her abandoned create
    dropped the room from the quick lobbies and the listing on that copy: Bob sat in
    a room no ``quick`` or ``list`` could find (before the drop took the quick lobbies
    too, the next quick racer still found him). The drop reads the room first."""
    clock = Clock()
    node_a, node_b = await _node(backend, clock), await _node(backend, clock)
    bob = FakePeer(node_b)
    create_room = node_a.store.create_room
    failed: list[Any] = []

    async def then_bob(*args: Any, **kwargs: Any) -> None:
        await create_room(*args, **kwargs)
        joined = await bob.ask("quick", variant="yukon", name="Bob")
        assert joined.t == "joined", joined.d
        failed.append(_fail_once(node_a.store, "events_since"))

    setattr(node_a.store, "create_room", then_bob)  # noqa: B010 (of the instance)
    refused = await FakePeer(node_a).ask("quick", variant="yukon", name="Ann")
    assert failed and failed[0], "Ann's join was not cut"
    assert refused.d["code"] == "unavailable" and "room" not in refused.d, refused.d
    assert bob.room is not None
    [room_id] = node_a.rooms
    assert bob.room.room_id == room_id, "Bob was not seated in Ann's room"
    assert await node_b.store.quick_lobbies("yukon") == [room_id], "Bob's room left quick"
    assert room_id in await node_b.store.listed_rooms(), "Bob's room was unlisted"
