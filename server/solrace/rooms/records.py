"""What the node stores through :mod:`solrace.store`, as msgpack bytes.

The store is opaque about payloads; this module is the one place that knows their
shape: room metadata (``meta``: settings and the room's secret, from which every
round's seed derives — it never leaves the server), room events (``RoomEvent.stored``)
and move-log entries (``[notation or "undo", race clock ms]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solrace.protocol import _msgpack
from solrace.race import RoomSettings
from solrace.race.events import RoomEvent


def pack(value: object) -> bytes:
    """msgpack bytes, through the protocol's one packer (a new packer per call, as
    ``msgpack.packb`` makes, cost about a microsecond a move)."""
    return _msgpack.packb(value)


def unpack(data: bytes) -> Any:
    return _msgpack.unpack_trusted(data)


def pack_event(event: RoomEvent) -> bytes:
    return pack(event.stored())


def unpack_event(data: bytes) -> RoomEvent:
    return RoomEvent.from_stored(unpack(data))


@dataclass(frozen=True)
class RoomMeta:
    room: str
    code: str
    secret: bytes
    settings: RoomSettings
    created_ms: int

    def encode(self) -> bytes:
        return pack(
            {
                "room": self.room,
                "code": self.code,
                "secret": self.secret,
                "settings": self.settings.to_dict(),
                "created_ms": self.created_ms,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> RoomMeta:
        raw = unpack(data)
        return cls(
            room=raw["room"],
            code=raw["code"],
            secret=raw["secret"],
            settings=RoomSettings.from_dict(raw["settings"]),
            created_ms=raw["created_ms"],
        )


def log_name(round_no: int, racer: int) -> str:
    """The store's name for one racer's move log in one round."""
    return f"{round_no}:{racer}"


def pack_entry(entry: str, at_ms: int) -> bytes:
    return pack([entry, at_ms])


def unpack_entries(raw: list[bytes]) -> list[tuple[str, int]]:
    return [(e[0], e[1]) for e in (unpack(item) for item in raw)]
