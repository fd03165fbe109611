"""Digits are 0-9: the one test of "a text of digits" everything that reads a number
from text uses.

``str.isdigit`` is true of ``'²'``, ``'١'`` and other Unicode digits, which ``int()``
refuses (``'²'``) or reads as another number (``'١'`` is 1): a check made with it let
such a text through to an ``int()`` that failed with a traceback, or to redis-py, which
ran a node on database 0 in silence. Each place had its own ``isascii() and isdigit()``
— and some had only ``isdigit()``.
"""

from __future__ import annotations

__all__ = ["digits_value", "is_digits"]


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the ASCII digits 0-9, and nothing else (no
    sign, no space): what ``int()`` reads as the number it shows."""
    return text.isascii() and text.isdigit()


def digits_value(text: str) -> int | None:
    """The number ``text`` spells in the digits 0-9, or None: not such digits
    (:func:`is_digits`), or more of them than ``int()`` reads
    (``sys.get_int_max_str_digits()``, 4,300 by default), which it refuses with a
    ValueError — a check with :func:`is_digits` alone let 5,000 nines through to a
    traceback in ``solrace replay``, and to redis-py, which drops a database index it
    cannot read and ran the node on database 0."""
    if not is_digits(text):
        return None
    try:
        return int(text)
    except ValueError:  # past int()'s limit of digits
        return None
