"""The envelope every frame carries: ``{t, id, v, d}`` (lila-ws style).

One fixed outer shape lets the server route, rate-limit and answer a frame before it
understands its payload, and lets a client tell replies (``id``), room events (``v``)
and notices (neither) apart without knowing every message type.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from ._check import is_int_in
from .limits import MAX_REQUEST_ID, MAX_TYPE_LEN, MAX_VERSION

#: Keys an envelope may have on the wire; anything else makes the frame malformed.
ENVELOPE_KEYS = frozenset({"t", "id", "v", "d"})

#: ``d`` when none is given: each such envelope gets a new empty dict of its own.
_NO_DATA: Final[Mapping[str, object]] = MappingProxyType({})


class _Fields(NamedTuple):
    t: str
    id: int | None
    v: int | None
    d: Mapping[str, object]


class Envelope(_Fields):
    """One protocol message.

    - ``t``: message type, a short non-empty string (``"move"``, ``"progress"``).
    - ``id``: the client's request id. Set on requests that want their reply matched,
      echoed on that reply, ``None`` everywhere else.
    - ``v``: room event version, ``>= 1`` and gap-free per room. Set only on room
      events, which is what makes resume-by-version possible.
    - ``d``: the payload, a map with string keys (empty when the message has no fields).

    Construction checks the outer shape and raises ``ValueError`` — a bug in the
    caller — because the codec validates peer input *before* building an envelope.

    A named tuple that checks itself in ``__new__``, not a frozen dataclass: a move
    makes three (its request, its ``moved``, its ``progress``), and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` — 10,400
    instructions an envelope on Python 3.11, 5,900 this way (docs/performance.md,
    round 28). Immutable as before (``_replace`` is not used: it would skip the check).
    """

    __slots__ = ()

    def __new__(
        cls,
        t: str,
        id: int | None = None,
        v: int | None = None,
        d: Mapping[str, object] = _NO_DATA,
    ) -> Envelope:
        if d is _NO_DATA:
            d = {}
        if (
            type(t) is str
            and 1 <= len(t) <= MAX_TYPE_LEN
            and (id is None or (type(id) is int and 0 <= id <= MAX_REQUEST_ID))
            and (v is None or (type(v) is int and 1 <= v <= MAX_VERSION))
            and type(d) is dict
        ):
            # the usual envelope, checked in one expression (every frame is one)
            return tuple.__new__(cls, (t, id, v, d))
        if not isinstance(t, str) or not 1 <= len(t) <= MAX_TYPE_LEN:
            raise ValueError(f"envelope t must be a string of 1–{MAX_TYPE_LEN} chars: {t!r}")
        if id is not None and not is_int_in(id, 0, MAX_REQUEST_ID):
            raise ValueError(f"envelope id must be an int in 0..{MAX_REQUEST_ID}: {id!r}")
        if v is not None and not is_int_in(v, 1, MAX_VERSION):
            raise ValueError(f"envelope v must be an int >= 1: {v!r}")
        if not isinstance(d, Mapping):
            raise ValueError(f"envelope d must be a mapping: {type(d).__name__}")
        return tuple.__new__(cls, (t, id, v, d))

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
        t, id_, v, d = self  # one unpacking, not a descriptor call a field
        wire: dict[str, object] = {"t": t}
        if id_ is not None:
            wire["id"] = id_
        if v is not None:
            wire["v"] = v
        if d:
            wire["d"] = dict(d)
        return wire
