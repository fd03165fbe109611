"""A listing sort cut between its own two writes (docs/design.md, "Faults").

Store.move_listing sorts a public room in the listing (one write) and, for a quick
room, takes it out of its variant's quick lobbies or puts it back there (another
write, in another slot on a Cluster). A racer back in a quick lobby nobody was in
moves it back among the lobbies and the quick lobbies: Redis failing between the two
writes, or the node dying there, must not leave the lobby listed but out of what
``quick`` reads — its racer waiting in a room no quick racer is sent to.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from solrace.rooms import lobby
from solrace.rooms.node import Node
from solrace.store.errors import StoreUnavailable

from tests.support.faults import Clock, Crashed, StoreFaults

from .conftest import Backend, FakePeer
from .test_fault_windows import _poll
from .test_take_up_faults import FAULTS, _dead, _node


def _cut_quick_add(node: Node, room_id: str, fault: str) -> list[str]:
    """Cut ``node``'s next write putting ``room_id`` back among its variant's quick
    lobbies (the second write of Store.move_listing, the first made): Redis fails it,
    or the node dies there."""
    store = node.store
    faults = StoreFaults(store) if fault == "node dies" else None
    redis = store._redis
    real = redis.zadd
    quick_key = store.keys.quick("yukon")
    cut: list[str] = []

    async def cutting(name: Any, mapping: Any, *args: Any, **kwargs: Any) -> Any:
        if not cut and name == quick_key and room_id in mapping:
            cut.append(name)
            if faults is not None:
                faults.down = True  # killed: it writes nothing more
                raise Crashed()
            raise StoreUnavailable("zadd: Redis is down (injected)")
        return await real(name, mapping, *args, **kwargs)

    setattr(redis, "zadd", cutting)  # noqa: B010 (a method of the instance)
    return cut


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_quick_lobby_whose_racer_came_back_is_found_by_quick_whatever_cut_its_sort(
    backend: Backend, fault: str
) -> None:
    """Ann's quick lobby: she hangs up (sorted behind the races, out of the quick
    lobbies), then resumes, and her lobby's sort back is cut after the listing's write,
    before the quick lobbies'. Redis failing: the node sorts it again once Redis
    answers. The node dying: Ann's connection went with it, and her resume on the next
    node sorts it. Either way Bob's ``quick`` joins Ann, not a lobby of his own."""
    clock = Clock()
    node = await _node(backend, clock)
    ann = FakePeer(node)
    created = await ann.ask("quick", variant="yukon", name="Ann")
    assert created.t == "joined", created.d
    room = ann.room
    assert room is not None
    ann.closed = True  # her connection closes without a leave
    await lobby.disconnected(node, ann)
    assert room.room_id in await node.store.idle_lobbies()
    assert room.room_id not in await node.store.quick_lobbies("yukon")

    cut = _cut_quick_add(node, room.room_id, fault)
    back = FakePeer(node)
    token = str(created.d["token"])
    resumed = None
    with contextlib.suppress(Crashed):  # the node dying answers nothing
        resumed = await back.ask("resume", room=room.room_id, token=token)
    assert cut, "the sort back was not cut"
    serving = node
    if fault == "node dies":
        serving = await _node(backend, clock)
        await _dead(node, by=serving)
        assert room.room_id in await serving.store.listed_lobbies()  # the first write
        assert room.room_id not in await serving.store.quick_lobbies("yukon")
        back = FakePeer(serving)
        resumed = await back.ask("resume", room=room.room_id, token=token)
    assert resumed is not None and resumed.t == "joined", resumed

    await _poll(
        lambda: serving.store.quick_lobbies("yukon"),
        lambda rooms: room.room_id in rooms,
        "the lobby is not among the quick lobbies",
    )
    bob = FakePeer(serving)
    assert (await bob.ask("quick", variant="yukon", name="Bob")).t == "joined"
    assert bob.room is not None and bob.room.room_id == room.room_id
