"""msgpack encoding and strict decoding of envelopes.

``decode`` is the boundary where untrusted bytes enter the server, so it promises one
thing above all: it returns an :class:`Envelope` or raises a :class:`ProtocolError`
subclass — never ``ValueError``, ``KeyError``, ``RecursionError`` or ``MemoryError``
from a crafted frame (a property-based test holds it to that). To keep that promise
cheaply it refuses, before any game code runs:

- text frames (close 1003) — the protocol is binary;
- frames over the byte limit (1009), checked before unpacking;
- strings, arrays and maps over their limits (1009), refused by ``msgpack.unpackb``
  before they are allocated, and nesting deeper than ``max_depth`` (1009);
- anything msgpack cannot read: truncated, trailing bytes, invalid UTF-8, reserved
  bytes (1007);
- types outside the data model — ``bin`` and ``ext`` (timestamps included) — and maps
  with non-``str`` or duplicate keys (1007). Duplicates are refused rather than
  resolved "last wins", so no two components can ever read one frame differently;
- an outer shape that is not exactly an envelope (1007).

The data model is JSON's: nil, bool, int, float, str, array, map with str keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from . import _msgpack
from ._check import is_int, is_int_in, type_name
from .envelope import ENVELOPE_KEYS, Envelope
from .errors import CloseCode, ErrorCode, MalformedFrame, ProtocolError
from .limits import (
    CLIENT_FRAME_LIMITS,
    MAX_REQUEST_ID,
    MAX_TYPE_LEN,
    MAX_VERSION,
    FrameLimits,
)

Frame = bytes | bytearray | memoryview | str

_SCALARS: Final = (bool, int, float, str, type(None))
_SCALAR_TYPES: Final = frozenset(_SCALARS)


def encode(envelope: Envelope) -> bytes:
    """Pack an envelope into one binary frame.

    Raises ``TypeError`` if ``d`` holds a value outside the data model (a server bug,
    not a peer's fault). No size limit is applied: the server's outgoing frames are
    bounded by construction and clients enforce ``SERVER_FRAME_LIMITS`` on receipt.
    """
    return _msgpack.packb(envelope.to_wire())


def decode(frame: Frame, *, limits: FrameLimits = CLIENT_FRAME_LIMITS) -> Envelope:
    """Read one frame into an :class:`Envelope`, or raise :class:`MalformedFrame`.

    ``frame`` is what websockets hands over: ``bytes`` for a binary frame, ``str`` for a
    text frame. The server uses the default ``CLIENT_FRAME_LIMITS``; a client decoding
    server frames passes ``limits=SERVER_FRAME_LIMITS``. ``d`` of the result is a plain
    ``dict``; message validation (``messages.parse_client_message``) comes next.
    """
    if isinstance(frame, str):
        raise MalformedFrame(
            "text frames are not accepted: send msgpack in binary frames",
            close_code=CloseCode.UNSUPPORTED_DATA,
        )
    data = bytes(frame)
    if len(data) > limits.max_frame_bytes:
        raise _too_large(f"frame of {len(data)} bytes; the limit is {limits.max_frame_bytes}")
    if not data:
        raise MalformedFrame("empty frame")
    value = _unpack(data, limits)
    _check_tree(value, limits.max_depth)
    return _envelope(value)


def _too_large(message: str) -> MalformedFrame:
    return MalformedFrame(message, code=ErrorCode.TOO_LARGE, close_code=CloseCode.MESSAGE_TOO_BIG)


def _pairs(pairs: list[tuple[object, object]]) -> dict[str, object]:
    """Build a map from msgpack's key/value pairs, refusing what ``dict`` would hide:
    non-``str`` keys (an empty ``bin`` gets past the unpacker's length limit) and
    repeated keys."""
    result: dict[str, object] = {}
    for key, item in pairs:
        if not isinstance(key, str):
            raise MalformedFrame(f"map keys must be strings, not {type_name(key)}")
        if key in result:
            raise MalformedFrame(f"map key {key[:32]!r} appears twice")
        result[key] = item
    return result


def _unpack(data: bytes, limits: FrameLimits) -> object:
    try:
        value, trailing = _msgpack.unpack_one(
            data,
            max_str_len=limits.max_str_bytes,
            max_array_len=limits.max_array_len,
            max_map_len=limits.max_map_len,
            pairs_hook=_pairs,
        )
    except ProtocolError:
        raise
    except _msgpack.StackError:
        raise _too_large(f"nesting deeper than {limits.max_depth}") from None
    except _msgpack.OutOfData:
        raise MalformedFrame("truncated msgpack: the frame ends inside a value") from None
    except Exception as exc:  # msgpack documents that unpack may raise anything
        text = str(exc)
        if "exceeds max_" in text:
            if "max_bin_len" in text or "max_ext_len" in text:
                kind = "binary" if "max_bin_len" in text else "extension"
                raise MalformedFrame(f"{kind} values are not allowed") from None
            raise _too_large(f"value over the limits ({text})") from None
        raise MalformedFrame(f"unreadable msgpack ({type(exc).__name__})") from None
    if trailing:
        raise MalformedFrame("trailing bytes after the envelope")
    return value


def _check_tree(value: object, max_depth: int) -> None:
    """Refuse types outside the data model and containers nested deeper than
    ``max_depth`` (msgpack's own bound is a fixed 1024, far too deep). Iterative, so a
    hostile frame cannot exhaust Python's recursion limit. Scalars are told apart by
    their exact type first (every frame a client sends comes through here)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind in _SCALAR_TYPES:
            continue
        if isinstance(item, list | dict):
            if depth > max_depth:
                raise _too_large(f"nesting deeper than {max_depth}")
            children: Iterable[object] = item.values() if isinstance(item, dict) else item
            for child in children:
                if type(child) not in _SCALAR_TYPES:
                    stack.append((child, depth + 1))
            continue
        if isinstance(item, _SCALARS):
            continue
        raise MalformedFrame(f"{type_name(item)} values are not allowed")


def _envelope(value: object) -> Envelope:
    if not isinstance(value, dict):
        raise MalformedFrame(f"a frame must be a map (an envelope), not {type_name(value)}")
    if not value.keys() <= ENVELOPE_KEYS:
        unknown = sorted(set(value) - ENVELOPE_KEYS)
        raise MalformedFrame(f"unknown envelope key {unknown[0][:32]!r} (allowed: t, id, v, d)")
    t = value.get("t")
    if not isinstance(t, str) or not 1 <= len(t) <= MAX_TYPE_LEN:
        raise MalformedFrame(f"envelope t must be a string of 1–{MAX_TYPE_LEN} characters")
    request_id = value.get("id")
    if request_id is not None and not is_int_in(request_id, 0, MAX_REQUEST_ID):
        raise MalformedFrame(f"envelope id must be an integer in 0..{MAX_REQUEST_ID}")
    version = value.get("v")
    if version is not None and not is_int_in(version, 1, MAX_VERSION):
        raise MalformedFrame(f"envelope v must be an integer in 1..{MAX_VERSION}")
    data = value.get("d")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise MalformedFrame(f"envelope d must be a map, not {type_name(data)}")
    return Envelope(t, id=_as_int(request_id), v=_as_int(version), d=data)


def _as_int(value: object) -> int | None:
    return value if is_int(value) else None
