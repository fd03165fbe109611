"""What the room core needs of a connection: send bytes, close, a connection id.

The core never sees a socket. :class:`Peer` keeps the connection's role in a room
(idle, racer, spectator) — state the core owns — and leaves the two operations that
touch the wire to the adapter: ``solrace.net.session.Session`` for WebSockets, a list
of frames in the tests.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from solrace.protocol import BadMessage, ErrorCode, encode
from solrace.protocol.envelope import Envelope

if TYPE_CHECKING:
    from .room import LiveRoom


class Peer(ABC):
    """One client connection as the room core sees it."""

    def __init__(self) -> None:
        self.room: LiveRoom | None = None
        self.racer: int | None = None
        #: True once the connection is closing: nothing more is sent to it.
        self.closed = False
        #: Tells this connection from the racer's other ones, on any node.
        self.conn_id = secrets.token_hex(8)
        #: The client address a public room seats once (the network layer's
        #: admission.Ticket.seat_key), None if it counts none. Never stored: a room
        #: keeps a digest keyed by its own secret (lobby.seat_origin).
        self.address: str | None = None
        #: Work units the request being handled cost beyond one message
        #: (solrace.protocol.limits, "work"): the core counts, the adapter charges it.
        self.work = 0.0

    # ------------------------------------------------------------- the wire
    @abstractmethod
    def send_bytes(self, frame: bytes) -> None:
        """Queue one encoded frame, in call order, without waiting (a slow reader
        must never hold up a room); a no-op once ``closed``."""

    @abstractmethod
    def close_later(self, code: int, reason: str) -> None:
        """Start closing with a close code and reason; sets ``closed``."""

    def send(self, envelope: Envelope) -> None:
        self.send_bytes(encode(envelope))

    def charge(self, units: float) -> None:
        """Count work the current request makes the node do (a replay, a listing)."""
        self.work += units

    def take_work(self) -> float:
        """The work counted since the last call, which the adapter charges."""
        work, self.work = self.work, 0.0
        return work

    # ------------------------------------------------------------------ role
    def attach_racer(self, room: LiveRoom, racer: int) -> None:
        self.room, self.racer = room, racer

    def attach_spectator(self, room: LiveRoom) -> None:
        self.room, self.racer = room, None

    def detach(self) -> None:
        self.room, self.racer = None, None

    def racer_room(self) -> tuple[LiveRoom, int]:
        """The room and racer this connection plays, or the refusal to send."""
        if self.room is None:
            raise BadMessage(ErrorCode.NOT_RACER)
        if self.racer is None:
            raise BadMessage(ErrorCode.SPECTATOR_CANNOT_ACT)
        return self.room, self.racer

    def may_open_room(self) -> None:
        """Raise the refusal (``too_many_rooms``) if this connection's client may not
        open another room now. The network layer counts rooms by client address
        (solrace.net.admission); a connection it does not count may open any number."""
        return None

    def may_try_code(self) -> None:
        """Raise the refusal (``rate_limited``) if this connection's client may not
        look a room code up now: it tried too many that named no room (the network
        layer counts them by client address: solrace.net.admission). A connection it
        does not count may try any number."""
        return None

    def missed_code(self) -> None:
        """The room code this connection looked up named no room: counted against its
        client (:meth:`may_try_code`)."""
        return None

    def new_conn_id(self) -> None:
        """Take a new connection id: what was recorded about the old one (an offline
        written late, once Redis answers) is then about a connection this one no
        longer is, and cannot mark a racer it enters next offline."""
        self.conn_id = secrets.token_hex(8)

    def origin(self) -> str | None:
        """The client's address as the operator knows it (the one a trusted proxy
        forwarded, else the peer's), for lines that count by address
        (solrace.rooms.repeats); None if there is none."""
        return None

    def ids(self) -> dict[str, object]:
        """Fields that name this connection in log lines."""
        return {"room": self.room.room_id if self.room else None, "racer": self.racer}


__all__ = ["Peer"]
