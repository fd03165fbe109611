"""A typed façade over msgpack, which ships no type information.

Every call into msgpack goes through here (except the server benchmark's bare echo,
which uses the plain library on purpose), so the untyped surface is a dozen lines
(the project's mypy configuration accepts msgpack's missing stubs) instead of ``Any``
leaking through the codec.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgpack

#: Raised by the unpacker when nesting exceeds its fixed internal stack.
StackError: type[Exception] = msgpack.StackError
#: Raised when the frame ends in the middle of a value.
OutOfData: type[Exception] = msgpack.OutOfData

#: What ``msgpack.unpackb`` says (a plain ValueError) when the data end inside a value;
#: its ``Unpacker`` raises :data:`OutOfData` instead.
_INCOMPLETE = "Unpack failed: incomplete input"

PairsHook = Callable[[list[tuple[object, object]]], object]


def _refuse(obj: object) -> object:
    """``default`` hook of the packer: anything msgpack cannot map natively is a bug in
    the caller, so say which type it was instead of packing something surprising."""
    if isinstance(obj, int):
        raise TypeError(f"integer {obj} is outside msgpack's range (-2**63 .. 2**64-1)")
    raise TypeError(f"cannot encode {type(obj).__name__} in a solrace frame")


class _Packers(threading.local):
    """One packer per thread: ``msgpack.packb`` makes (and allocates a buffer for) a
    new one on every call, which cost more than packing a move's frames; a packer is
    not safe to share between threads."""

    def __init__(self) -> None:
        self.packer = msgpack.Packer(use_bin_type=True, default=_refuse, strict_types=False)


_PACKERS = _Packers()


def packb(obj: object) -> bytes:
    """Pack ``obj``: str as msgpack str, bytes as bin, tuples as arrays."""
    packed: bytes = _PACKERS.packer.pack(obj)
    return packed


def unpack_trusted(data: bytes) -> object:
    """Unpack bytes this server wrote itself (its store's records), without the limits
    a frame from a client gets: integer map keys allowed, ``bin`` as ``bytes``."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def unpack_one(
    data: bytes,
    *,
    max_str_len: int,
    max_array_len: int,
    max_map_len: int,
    pairs_hook: PairsHook,
) -> tuple[object, bool]:
    """Unpack the first value of ``data`` under the given limits.

    Returns the value and whether bytes remain after it. Non-empty ``bin`` and every
    ``ext`` are refused by the unpacker itself (their length limits are 0, so even a
    timestamp ext fails); an empty ``bin`` gets through as ``b""`` and is the caller's to
    refuse. Map keys must be ``str`` or ``bytes`` (``strict_map_key``) and are handed, in
    order, to ``pairs_hook``. Raises :data:`OutOfData` when ``data`` ends inside the
    value, and otherwise whatever msgpack raises: the caller treats any exception as an
    unreadable frame, as msgpack's own documentation advises.

    One ``msgpack.unpackb`` call, not an ``Unpacker``: making an ``Unpacker`` (its
    keyword arguments, its buffer) cost 45,000 instructions a frame, three times the
    whole ``unpackb`` of a move request (docs/performance.md, round 28). ``unpackb``
    has the same limits; it tells trailing bytes by :class:`msgpack.ExtraData`, which
    carries the value, and a truncated frame by a ``ValueError`` of its own text.
    """
    try:
        value: object = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            use_list=True,
            unicode_errors="strict",
            max_str_len=max_str_len,
            max_bin_len=0,
            max_array_len=max_array_len,
            max_map_len=max_map_len,
            max_ext_len=0,
            object_pairs_hook=pairs_hook,
        )
    except msgpack.ExtraData as extra:
        return extra.unpacked, True
    except ValueError as exc:
        if str(exc) == _INCOMPLETE:
            raise msgpack.OutOfData from None
        raise
    return value, False
