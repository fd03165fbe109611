"""Strings from a server or a race file made fit for a terminal.

A solrace server lets no control or invisible formatting character into a name, but a
hostile server, or an edited race file, may send an escape sequence (an audit's racer
name ``ESC ] 0 ; … BEL`` set the terminal's title through the UI), a direction override
(U+202E: the rest of the line read backwards, one name passed for another) or a line
separator. Everything the client shows of a name, a status or a room code goes through
:func:`printable` first.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["printable"]

#: C0 and C1 control characters: a terminal's escape sequences start with one.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


#: The zero-width joiner: a format character, but the one that binds an emoji sequence
#: (the server lets it into a name too).
_ZWJ: Final = "\u200d"


def printable(value: object) -> str:
    """``value`` as text with each control, format (a direction override, a zero-width
    space), private-use or surrogate character, and each line or paragraph separator,
    shown as ``?`` — what the server refuses in a name. Not a character unassigned in
    this Python's Unicode: a newer emoji, which a server on a newer Python lets into a
    name (shown as ``?``, it was lost); no terminal takes one for a control. Most text
    is printable as it is (``str.isprintable``, which only other scripts' spaces and
    unassigned characters fail besides): one pass."""
    text = _CONTROL.sub("?", str(value))
    if text.isprintable():
        return text
    return "".join("?" if _hidden(char) else char for char in text)


def _hidden(char: str) -> bool:
    category = unicodedata.category(char)
    return (category[0] == "C" and category != "Cn" and char != _ZWJ) or category in ("Zl", "Zp")
