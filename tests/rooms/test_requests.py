"""Requests answered outside any room: ``result``, the archive of a finished race
(docs/protocol.md §5), on every store."""

from __future__ import annotations

from typing import Any

from solrace.protocol import race_id
from solrace.protocol.limits import RESULT_COST
from solrace.rooms.counters import Tally

from tests.support.race import archived_result

from .conftest import Backend, FakePeer
from .test_core import _ann_wins, _race_on


async def test_result_answers_what_the_race_over_said_to_any_connection(backend: Backend) -> None:
    """A connection in no room (a newcomer who never saw the race), one on another
    node, and one still in the room all get the archive: the race_over's result,
    the room's settings and its deal, never its code."""
    node = await backend.node()
    other = await backend.node()
    race = await _race_on(node, node)
    over = await _ann_wins(race.ann, race.bob)
    room = race.ann.room
    assert room is not None
    race_key = race_id(room.room_id, race.commitment)
    await archived_result(node.store, race_key)
    for asker in (FakePeer(node), FakePeer(other), race.bob):
        reply = await asker.ask("result", race=race_key)
        assert reply.t == "archived", reply.d
        assert reply.d["race"] == race_key and reply.d["room"] == room.room_id
        assert reply.d["result"] == over.d
        settings: Any = reply.d["settings"]
        assert settings["variant"] == race.settings["variant"]
        deal: Any = reply.d["deal"]
        assert deal["certified"] is True and deal["moves"] > 0
        assert "code" not in reply.d and room.meta.code not in str(reply.d)


async def test_result_of_a_race_nobody_archived_is_unknown_race(backend: Backend) -> None:
    """Not archived (made up, still running, expired): ``unknown_race`` naming the
    field; a request that is no race id at all is ``bad_message``. Either way the
    connection carries on, and each answer is charged to its work bucket."""
    node = await backend.node()
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    asker = FakePeer(node)
    running = race_id(room.room_id, race.commitment)  # started, not over: not archived
    for unknown in (running, "r_000000000000.0123abcd", "r_x.nocommit"):
        reply = await asker.ask("result", race=unknown)
        assert reply.t == "error", reply.d
        assert reply.d["code"] == "unknown_race" and reply.d["field"] == "race"
    for bad in ("r_x", "r_x.0123ABCD", "../x.0123abcd", "r_x.0123abcd.json", 42):
        reply = await asker.ask("result", race=bad)
        assert reply.t == "error" and reply.d["code"] == "bad_message", reply.d
    assert asker.take_work() == 3 * RESULT_COST
    counted = node.metrics
    assert isinstance(counted, Tally)
    assert counted.requests_refused_by_code() == {"unknown_race": 3, "bad_message": 5}
    assert (await asker.ask("ping")).t == "pong"
