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
    shown as ``?`` — what the server refuses in a name —, but a byte that is not UTF-8,
    shown as the byte (:func:`_shown`). Not a character unassigned in
    this Python's Unicode: a newer emoji, which a server on a newer Python lets into a
    name (shown as ``?``, it was lost); no terminal takes one for a control. Most text
    is printable as it is (``str.isprintable``, which only other scripts' spaces and
    unassigned characters fail besides): one pass."""
    text = _CONTROL.sub("?", str(value))
    if text.isprintable():
        return text
    return "".join(_shown(char) for char in text)


#: The lone surrogates Python reads a byte that is not UTF-8 as (``surrogateescape``:
#: U+DC80 for 0x80 … U+DCFF for 0xFF), in a file or directory name of another locale.
_BYTES_AS_SURROGATES: Final = range(0xDC80, 0xDD00)


def _shown(char: str) -> str:
    """One character that is not printable: a byte read as a surrogate as the byte,
    ``\\xff``, as every error line quotes it (solrace.quoting.quoted; shown as ``?``, a
    directory named ``/tmp/$'\\xff'`` read ``/tmp/?``); else ``?`` where it is hidden."""
    if ord(char) in _BYTES_AS_SURROGATES:
        return f"\\x{ord(char) - 0xDC00:02x}"
    return "?" if _hidden(char) else char


def _hidden(char: str) -> bool:
    category = unicodedata.category(char)
    return (category[0] == "C" and category != "Cn" and char != _ZWJ) or category in ("Zl", "Zp")
