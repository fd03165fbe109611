"""A public room's create cut between its writes (docs/design.md, "Faults").

Store.create_room writes the room's keys (its meta and code, one pipeline), then lists
it (a second pipeline): a listed room is never one whose meta is not written yet.
Redis failing between the two, or the node dying there, must leave no room its
creator was told of that nobody can find, and no listing of a room nobody can join
for long: the creator is told ``unavailable`` (or its node is gone), ``list`` shows
no such room, and once no join of its creator can still land (SEAT_SETTLE_S) the
next sweep leaves nothing of it listed. Sent again, the create is a room ``list``
shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from solrace.protocol.limits import SEAT_SETTLE_S
from solrace.rooms.node import Node

from tests.support.faults import Clock, Crashed, StoreFaults

from .conftest import Backend, FakePeer
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
