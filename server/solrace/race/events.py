"""Room events: the one shape the fold, the decisions, the store and the wire share.

A room's history is a sequence of :class:`RoomEvent`. Each has what every client sees
— its type ``t`` and data ``d``, exactly the protocol's room event (docs/protocol.md
§7), which never holds a card or, before ``race_over``, the seed — and what only the
server keeps: ``at`` (the server clock, so every node times the room alike), the
connection and node a racer joined or came back on (and, joining, a digest of its
address), the move a ``progress`` event
records and its log's length (so any node can fold spectators' boards from events
alone), and the deal a ``deal_chosen`` event stands for. :meth:`RoomEvent.stored` and
:meth:`RoomEvent.from_stored` are the store's encoding; :meth:`RoomEvent.wire` is the
client's, through the protocol's checked builders.

The builders below are the only places an event is made: the decisions
(:mod:`.decisions`) and the move path use them, never dict literals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from solrace.protocol.envelope import Envelope
from solrace.protocol.messages import room_event
from solrace.protocol.views import EventType, RacerStatus

__all__ = ["Carried", "EventType", "Presence", "RoomEvent", "event", "finished", "progress"]

#: The stored form's keys for the server-only fields (short: a room's stream holds
#: one progress event per move).
_AT, _CONN, _NODE, _ORIGIN, _ENTRY, _LENGTH, _ATTEMPT, _LINE, _CARRIED = (
    "at",
    "conn",
    "node",
    "origin",
    "e",
    "n",
    "attempt",
    "line",
    "carried",
)


@dataclass(frozen=True, slots=True)
class Presence:
    """A racer's presence as the room's fold holds it (race.state.RacerState): what
    a rematch carries into the new round for each racer who stays."""

    online: bool
    offline_since_ms: int | None
    conn: str | None
    node: str | None
    origin: str | None

    def stored(self) -> list[Any]:
        return [self.online, self.offline_since_ms, self.conn, self.node, self.origin]

    @classmethod
    def from_stored(cls, raw: list[Any]) -> Presence:
        online, offline_since_ms, conn, node, origin = raw
        return cls(bool(online), offline_since_ms, conn, node, origin)


@dataclass(frozen=True, slots=True)
class Carried:
    """What a ``room_reset`` carries from the rounds before it (RoomEvent.carried)."""

    #: The round the reset begins.
    round: int
    #: The id the next racer to join gets (ids are never reused in a room).
    next_racer: int
    #: Each staying racer's presence, by racer id.
    presence: Mapping[int, Presence]

    def stored(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "next_racer": self.next_racer,
            "presence": [[racer, *p.stored()] for racer, p in self.presence.items()],
        }

    @classmethod
    def from_stored(cls, raw: Mapping[str, Any]) -> Carried:
        presence = {int(row[0]): Presence.from_stored(list(row[1:])) for row in raw["presence"]}
        return cls(int(raw["round"]), int(raw["next_racer"]), presence)


class RoomEvent(NamedTuple):
    """One room event. ``d`` is the protocol's data for ``t``; the rest never leaves
    the server.

    A named tuple, not a frozen dataclass: one is made on every move (its progress),
    and a frozen dataclass's ``__init__`` sets each of its eleven fields through
    ``object.__setattr__`` — 23,700 instructions for a move's ``progress()`` on Python
    3.11, 11,000 as a named tuple (docs/performance.md, round 28). As immutable as
    before; copies are :meth:`but`."""

    t: EventType
    d: Mapping[str, Any]
    #: Server clock (Unix ms) when it was appended.
    at: int = 0
    #: ``racer_joined``/``presence``: the racer's connection and the node holding it.
    conn: str | None = None
    node: str | None = None
    #: ``racer_joined``: a digest of the client address the racer joined from (None:
    #: not counted), so that a public room seats an address once (decisions.join).
    origin: str | None = None
    #: ``progress`` of a move: the move log entry (notation or undo, race clock ms)
    #: and the log's length after it.
    entry: tuple[str, int] | None = None
    log_length: int | None = None
    #: ``deal_chosen``: the candidate the round deals and its certificate, if any.
    attempt: int = 0
    line: tuple[str, ...] | None = None
    #: ``room_reset``: what the room carries into the new round from before it — the
    #: new round's number, the next racer id, and each staying racer's presence
    #: (:class:`Carried`) — so that the reset alone begins the room's fold: a
    #: rematch trims the stream before the previous round (docs/store.md, "A room's
    #: history"), and a node taking the room up folds from a reset. None in a reset
    #: stored before resets carried it (the fold then takes it from the state).
    carried: Carried | None = None

    def but(self, **changes: Any) -> RoomEvent:
        """A copy with some server-only fields set (``at``, ``conn``, ...)."""
        return self._replace(**changes)

    def wire(self, version: int) -> Envelope:
        """The event as clients get it, checked by the protocol's builder."""
        return room_event(self.t, version, self.d)

    def stored(self) -> dict[str, Any]:
        """The store's form (msgpack-able): ``{t, d, at}`` plus the fields set."""
        # One unpacking, not eleven field reads: a named tuple's field is a descriptor
        # call (every move's progress is stored).
        t, d, at, conn, node, origin, entry, log_length, attempt, line, carried = self
        out: dict[str, Any] = {"t": str(t), "d": dict(d), _AT: at}
        if conn is not None:
            out[_CONN] = conn
        if node is not None:
            out[_NODE] = node
        if origin is not None:
            out[_ORIGIN] = origin
        if entry is not None:
            out[_ENTRY] = list(entry)
        if log_length is not None:
            out[_LENGTH] = log_length
        if t == EventType.DEAL_CHOSEN:
            out[_ATTEMPT] = attempt
            out[_LINE] = None if line is None else list(line)
        if carried is not None:
            out[_CARRIED] = carried.stored()
        return out

    @classmethod
    def from_stored(cls, raw: Mapping[str, Any]) -> RoomEvent:
        entry = raw.get(_ENTRY)
        line = raw.get(_LINE)
        carried = raw.get(_CARRIED)
        return cls(
            EventType(raw["t"]),
            raw["d"],
            at=raw.get(_AT, 0),
            conn=raw.get(_CONN),
            node=raw.get(_NODE),
            origin=raw.get(_ORIGIN),
            entry=None if entry is None else (entry[0], entry[1]),
            log_length=raw.get(_LENGTH),
            attempt=raw.get(_ATTEMPT) or 0,
            line=None if line is None else tuple(line),
            carried=None if carried is None else Carried.from_stored(carried),
        )

    @property
    def racer(self) -> int:
        """The racer the event is about (every type but the room-wide ones has one)."""
        return int(self.d["racer"])


def event(kind: EventType, **data: Any) -> RoomEvent:
    return RoomEvent(kind, data)


def progress(
    racer: int,
    counts: Mapping[str, int],
    status: RacerStatus | str,
    place: int | None = None,
    *,
    entry: tuple[str, int] | None = None,
    log_length: int | None = None,
    at: int = 0,
) -> RoomEvent:
    """A racer's public counts changed (a stored move, or a status such as resigned):
    never a card. A move's event also carries, server-side, the move and the log's
    length after it, and the server time it is appended at."""
    data = {
        "racer": racer,
        "foundation": counts["foundation"],
        "moves": counts["moves"],
        "face_down": counts["face_down"],
        "status": status,
        "place": place,
    }
    return RoomEvent(EventType.PROGRESS, data, at=at, entry=entry, log_length=log_length)


def finished(racer: int, place: int, elapsed_ms: int, counts: Mapping[str, int]) -> RoomEvent:
    """A racer completed its foundations and got ``place`` (1 = the winner)."""
    return event(
        EventType.FINISHED,
        racer=racer,
        place=place,
        elapsed_ms=elapsed_ms,
        foundation=counts["foundation"],
        moves=counts["moves"],
    )
