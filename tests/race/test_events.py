"""RoomEvent: one value for the fold, the decisions, the store and the wire."""

from __future__ import annotations

import msgpack
import pytest
from solrace.protocol import decode, encode
from solrace.protocol.views import EventType
from solrace.race import events
from solrace.race.events import RoomEvent

COUNTS = {"foundation": 7, "moves": 31, "face_down": 12}


def _round_trip(event: RoomEvent) -> RoomEvent:
    raw = msgpack.unpackb(msgpack.packb(event.stored(), use_bin_type=True), raw=False)
    return RoomEvent.from_stored(raw)


def test_a_move_event_keeps_its_server_only_fields_through_the_store() -> None:
    event = events.progress(2, COUNTS, "playing", entry=("3:2>5", 1500), log_length=9).but(at=77)
    again = _round_trip(event)
    assert again == event
    assert (again.entry, again.log_length, again.at) == (("3:2>5", 1500), 9, 77)


def test_the_wire_carries_t_and_d_only() -> None:
    """Nothing server-only reaches a client: not the move, the connection or the node."""
    event = events.progress(2, COUNTS, "playing", entry=("3:2>5", 1500), log_length=9)
    event = event.but(at=77, conn="c0ffee", node="node-1")
    frame = decode(encode(event.wire(12)))
    assert (frame.t, frame.v) == ("progress", 12)
    assert dict(frame.d) == {**COUNTS, "racer": 2, "status": "playing", "place": None}
    wire = encode(event.wire(12))
    for secret in (b"3:2>5", b"c0ffee", b"node-1"):
        assert secret not in wire


def test_a_deal_keeps_its_candidate_and_certificate_server_side() -> None:
    deal = events.event(EventType.DEAL_CHOSEN, certified=True, moves=2, difficulty="easy")
    deal = deal.but(attempt=3, line=("1:1>F", "2:1>F"))
    again = _round_trip(deal)
    assert (again.attempt, again.line) == (3, ("1:1>F", "2:1>F"))
    assert b"1:1>F" not in encode(deal.wire(4))


def test_events_stored_before_the_typed_events_still_fold() -> None:
    """Rooms in a store written by the previous release (dicts with short keys)."""
    old = {
        "t": "progress",
        "d": {**COUNTS, "racer": 1, "status": "playing", "place": None},
        "at": 5,
        "e": ["1:1>F", 10],
        "n": 3,
    }
    event = RoomEvent.from_stored(old)
    assert (event.t, event.entry, event.log_length, event.at) == (
        EventType.PROGRESS,
        ("1:1>F", 10),
        3,
        5,
    )
    assert event.stored() == old


def test_an_unknown_type_is_refused_when_read() -> None:
    with pytest.raises(ValueError):
        RoomEvent.from_stored({"t": "chat", "d": {}})


def test_finished_reports_counts_and_place() -> None:
    event = events.finished(4, 1, 90_000, COUNTS)
    assert event.t == EventType.FINISHED
    assert dict(event.d) == {
        "racer": 4,
        "place": 1,
        "elapsed_ms": 90_000,
        "foundation": 7,
        "moves": 31,
    }
    assert event.racer == 4
