"""The envelope every frame carries: ``{t, id, v, d}`` (lila-ws style).

One fixed outer shape lets the server route, rate-limit and answer a frame before it
understands its payload, and lets a client tell replies (``id``), room events (``v``)
and notices (neither) apart without knowing every message type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ._check import is_int_in
from .limits import MAX_REQUEST_ID, MAX_TYPE_LEN, MAX_VERSION

#: Keys an envelope may have on the wire; anything else makes the frame malformed.
ENVELOPE_KEYS = frozenset({"t", "id", "v", "d"})


@dataclass(frozen=True, slots=True)
class Envelope:
    """One protocol message.

    - ``t``: message type, a short non-empty string (``"move"``, ``"progress"``).
    - ``id``: the client's request id. Set on requests that want their reply matched,
      echoed on that reply, ``None`` everywhere else.
    - ``v``: room event version, ``>= 1`` and gap-free per room. Set only on room
      events, which is what makes resume-by-version possible.
    - ``d``: the payload, a map with string keys (empty when the message has no fields).

    Construction checks the outer shape and raises ``ValueError`` — a bug in the
    caller — because the codec validates peer input *before* building an envelope.
    """

    t: str
    id: int | None = None
    v: int | None = None
    d: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t, id_, v = self.t, self.id, self.v
        if (
            type(t) is str
            and 1 <= len(t) <= MAX_TYPE_LEN
            and (id_ is None or (type(id_) is int and 0 <= id_ <= MAX_REQUEST_ID))
            and (v is None or (type(v) is int and 1 <= v <= MAX_VERSION))
            and type(self.d) is dict
        ):
            return  # the usual envelope, checked in one expression (every frame is one)
        if not isinstance(self.t, str) or not 1 <= len(self.t) <= MAX_TYPE_LEN:
            raise ValueError(f"envelope t must be a string of 1–{MAX_TYPE_LEN} chars: {self.t!r}")
        if self.id is not None and not is_int_in(self.id, 0, MAX_REQUEST_ID):
            raise ValueError(f"envelope id must be an int in 0..{MAX_REQUEST_ID}: {self.id!r}")
        if self.v is not None and not is_int_in(self.v, 1, MAX_VERSION):
            raise ValueError(f"envelope v must be an int >= 1: {self.v!r}")
        if not isinstance(self.d, Mapping):
            raise ValueError(f"envelope d must be a mapping: {type(self.d).__name__}")

    @property
    def is_reply(self) -> bool:
        """A reply to a request that carried an id."""
        return self.id is not None

    @property
    def is_event(self) -> bool:
        """A versioned room event."""
        return self.v is not None

    def to_wire(self) -> dict[str, object]:
        """The map that is packed: ``id``/``v`` omitted when ``None`` and ``d`` when
        empty, so the common frames stay a few bytes (``{"t": "ping"}``)."""
        wire: dict[str, object] = {"t": self.t}
        if self.id is not None:
            wire["id"] = self.id
        if self.v is not None:
            wire["v"] = self.v
        if self.d:
            wire["d"] = dict(self.d)
        return wire
