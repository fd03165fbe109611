"""Small type predicates shared by the codec, the validators and the view builders.

Python counts ``True`` as the integer 1; msgpack does not. Every integer check in the
protocol goes through :func:`is_int` so a boolean never passes for a number (a
``max_racers`` of ``true`` is a client bug to report, not 1 racer).
"""

from __future__ import annotations

from typing import TypeGuard


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool``."""
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def is_int_in(value: object, lo: int, hi: int) -> TypeGuard[int]:
    """An ``int`` (not a ``bool``) within ``[lo, hi]``."""
    if type(value) is int:  # the common case, in one test
        return lo <= value <= hi
    return is_int(value) and lo <= value <= hi


def type_name(value: object) -> str:
    """A value's msgpack type name, for error messages a client developer can act on."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes | bytearray):
        return "binary"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__
