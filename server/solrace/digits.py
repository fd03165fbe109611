"""Digits are 0-9: the one test of "a text of digits" everything that reads a number
from text uses.

``str.isdigit`` is true of ``'²'``, ``'١'`` and other Unicode digits, which ``int()``
refuses (``'²'``) or reads as another number (``'١'`` is 1): a check made with it let
such a text through to an ``int()`` that failed with a traceback, or to redis-py, which
ran a node on database 0 in silence. Each place had its own ``isascii() and isdigit()``
— and some had only ``isdigit()``.
"""

from __future__ import annotations

__all__ = ["is_digits"]


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the ASCII digits 0-9, and nothing else (no
    sign, no space): what ``int()`` reads as the number it shows."""
    return text.isascii() and text.isdigit()
