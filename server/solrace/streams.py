"""Standard output and error that any encoding can take.

The commands print a few symbols (``·``, ``—``, ``…``, ``▶``, the suits, the race
screen's box drawing). Where standard output or error cannot encode them — an ASCII
or Latin-1 locale (``LC_ALL=C PYTHONUTF8=0``), ``PYTHONIOENCODING=ascii`` — a print
raised UnicodeEncodeError, a traceback with status 1 where every failure is meant to
be one line, and standard error (backslashreplace) showed ``yukon \\xb7 up to 4``.
Every entry point calls :func:`degrade_gracefully` first: such a character is then
written as its ASCII stand-in, one character for one where the race screen's layout
counts cells (``▶`` → ``>``, ``♠`` → ``S``), else ``?``. Standard library only: the
console scripts call it before their own modules load.
"""

from __future__ import annotations

import codecs
import io
import sys
import unicodedata
from typing import Final

__all__ = ["ERRORS", "ascii_for", "degrade_gracefully", "encodes"]

#: The codec error handler :func:`degrade_gracefully` registers and gives the streams.
ERRORS: Final = "solrace-ascii"

#: The stand-ins of the symbols the commands print. One character each, so that the
#: race screen keeps its columns; ``≤`` and ``≥`` alone need two to keep their meaning
#: (help text, a refused option). tests/test_encodings.py checks every symbol in the
#: code's strings has one: ``✓`` (a move taken), ``◀`` (the bot's own row) and ``↺``
#: (an empty stock that may be turned over: ``R``, its move) were ``?``.
STAND_INS: Final = {
    "·": "-",
    "—": "-",
    "–": "-",
    "…": ".",
    "▶": ">",
    "◀": "<",
    "→": ">",
    "←": "<",
    "↑": "^",
    "↓": "v",
    "‖": "|",
    "⋮": ":",
    "×": "x",
    "✔": "+",
    "✓": "+",
    "✘": "x",
    "♠": "S",
    "♥": "H",
    "♦": "D",
    "♣": "C",
    "░": ":",
    "▒": "#",
    "█": "#",
    "↺": "R",
    "≤": "<=",
    "≥": ">=",
}


def ascii_for(char: str) -> str:
    """``char`` in ASCII: its stand-in, a box-drawing line as ``-``, ``|`` or ``+``, a
    letter without its accent (``é`` → ``e``), else ``?``."""
    if char in STAND_INS:
        return STAND_INS[char]
    if "\u2500" <= char <= "\u257f":  # box drawing: tables, the race screen's frames
        name = unicodedata.name(char, "")
        if " AND " in name:  # a corner or a crossing
            return "+"
        return "-" if "HORIZONTAL" in name else "|" if "VERTICAL" in name else "+"
    bare = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
    return bare if len(bare) == 1 else "?"


def encodes(text: str, stream: object) -> bool:
    """Whether ``stream`` writes ``text`` as it is rather than as stand-ins: a symbol
    whose stand-in would say something else (the footer's ``⏎`` would be ``?``, the
    help key) is then worded otherwise. True for a stream with no encoding of its own
    (a test's capture)."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _stand_in(error: UnicodeError) -> tuple[str, int]:
    """The codec error handler: the unencodable run as :func:`ascii_for` writes it."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    run = error.object[error.start : error.end]
    return "".join(map(ascii_for, run)), error.end


def degrade_gracefully() -> None:
    """Write what standard output and error cannot encode as ASCII stand-ins instead of
    failing (or, on standard error, as ``\\u2014`` escapes). A stream that is closed
    (``>&-``), or not a text file of its own (a test's capture), is left as it is."""
    codecs.register_error(ERRORS, _stand_in)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not stream.closed:
            stream.reconfigure(errors=ERRORS)
