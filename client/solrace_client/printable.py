"""Strings from a server or a race file made fit for a terminal.

A solrace server lets no control character into a name, but a hostile server, or an
edited race file, may send an escape sequence (an audit's racer name ``ESC ] 0 ; … BEL``
set the terminal's title through the UI). Everything the client shows of a name, a
status or a room code goes through :func:`printable` first.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["printable"]

#: C0 and C1 control characters: a terminal's escape sequences start with one.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(value: object) -> str:
    """``value`` as text with each control character shown as ``?``."""
    return _CONTROL.sub("?", str(value))
