"""What a person typed, quoted in an error line: at most its first few characters.

An error that quotes the text it refuses (``not a move: '2:1>9'``) quoted all of it: a
100,000-character move given to ``solrace-rules play`` came back as one 100 KB line,
and so did a seed, an option, a variant, a server URL. Every message that quotes user
text quotes it with :func:`quoted`, so the line stays short whatever was typed. It is
called only when a message is made, never on the way to a success, so the engine's
move path (parse_move on the server) pays nothing for it.
"""

from __future__ import annotations

import errno
import json
import re
from typing import Final

__all__ = [
    "MAX_QUOTED",
    "as_typed",
    "file_name",
    "json_quoted",
    "path_shown",
    "quoted",
    "quoted_number",
    "url_shown",
    "without_password",
]

#: The most characters of a text an error line quotes: enough to recognise what was
#: typed (a move, a URL's start), short enough for one terminal line.
MAX_QUOTED: Final = 40


#: The most characters of a server URL a line names whole (:func:`url_shown`): a
#: deployment's ``wss://host:443/path`` runs past :data:`MAX_QUOTED` and is what the
#: user copies, so it is said whole up to this many.
MAX_URL_SHOWN: Final = 120


def quoted(text: object, *, as_is: bool = False, limit: int = MAX_QUOTED) -> str:
    """``text`` as ``repr`` shows it, ``'2:1>4'`` (``as_is``: between single quotes as
    it is, for a text already escaped); past ``limit`` (:data:`MAX_QUOTED`) characters
    its first ones, then ``… (N characters)`` outside the quotes, so that the excerpt is
    not read as what was typed: ``'xxxx'… (100,000 characters)``. Not a string: its
    ``repr``, cut alike."""
    if not isinstance(text, str):
        shown = repr(text)
        return shown if len(shown) <= limit else _cut(shown[:limit], len(shown))
    start = f"'{text[:limit]}'" if as_is else _as_bytes_typed(repr(text[:limit]))
    return start if len(text) <= limit else _cut(start, len(text))


#: ``repr``'s escape of a lone surrogate U+DC80…U+DCFF — how Python reads a command
#: line's byte that is not UTF-8 (``$'\xff'``) — not itself after a backslash
#: (``repr`` writes a typed backslash as two).
_BYTE_READ_AS_SURROGATE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\udc([89a-f][0-9a-f])")


def _as_bytes_typed(shown: str) -> str:
    """``repr``'s text with each byte Python read as a lone surrogate escaped as the
    byte, ``\\xff``: ``'\\udcff'`` named a character nobody typed."""
    return _BYTE_READ_AS_SURROGATE.sub(r"\1\\x\2", shown) if "\\udc" in shown else shown


def url_shown(url: str) -> str:
    """A server URL named in a line (``cannot reach …``, ``no open rooms on …``): as it
    is up to :data:`MAX_URL_SHOWN` characters, else :func:`quoted` at that length —
    a 3,000-character path was said whole, one 3 KB line (a newcomer walk). Said as
    it is, not escaped: a URL the client takes is printable (errors.check_server_url)."""
    return url if len(url) <= MAX_URL_SHOWN else quoted(url, as_is=True, limit=MAX_URL_SHOWN)


def json_quoted(value: object) -> str:
    """``value`` as JSON writes it — ``true``, ``null``, ``"3"``, ``["7H"]`` — for a
    message about what a JSON text held (a position, a room option): Python's repr
    said ``True``, ``None``, ``'3'``. Cut as :func:`quoted` cuts; not JSON (bytes, a
    set): its ``repr``. A character that is not printable is escaped as JSON escapes it
    (``"\\u0085"``), as ``repr`` did: JSON's own escaping, past ASCII, leaves the C1
    controls (U+009B, a terminal's CSI; U+0085, a next line), U+2028 and the
    direction overrides as they are, and a position's ``"variant"`` holding them broke
    the error line or drove the terminal."""
    if isinstance(value, str):
        start = _printable(json.dumps(value[:MAX_QUOTED], ensure_ascii=False))
        return start if len(value) <= MAX_QUOTED else _cut(start, len(value))
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except RecursionError:
        # Nested past the recursion limit (a race file's value: json.loads took it a
        # few frames higher up): ``repr`` recursed as deeply, a traceback.
        return "a value nested too deeply to show"
    except (TypeError, ValueError):
        return quoted(value)
    if len(shown) <= MAX_QUOTED:
        return _printable(shown)
    return _cut(_printable(shown[:MAX_QUOTED]), len(shown))


def _printable(shown: str) -> str:
    """JSON text with each character that is not printable written as its ``\\u``
    escape (still the same JSON: only strings hold such characters)."""
    if shown.isprintable():
        return shown
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in shown)


def quoted_number(value: int | float) -> str:
    """A number in an error line as ``str`` writes it, past :data:`MAX_QUOTED`
    characters cut as :func:`quoted` cuts a text (4,000 nines were said whole, one 4 KB
    line); an integer of more digits than ``str()`` writes (4,300: ``0x`` and 4,000
    ``f``s is read whole) by its size, where ``str()`` failed with a ValueError, a
    traceback."""
    try:
        shown = str(value)
    except ValueError:  # past str()'s limit of digits: only an int gets there
        return f"a number of {int(value).bit_length():,} bits"
    return shown if len(shown) <= MAX_QUOTED else quoted(shown, as_is=True)


def _cut(start: str, length: int) -> str:
    return f"{start}… ({length:,} characters)"


def as_typed(arguments: list[str]) -> str:
    """Command-line arguments as argparse lists those it has no use for, each as typed,
    one past :data:`MAX_QUOTED` characters :func:`quoted` (``unrecognized arguments:
    --budget 9``)."""
    return " ".join(a if len(a) <= MAX_QUOTED and a.isprintable() else quoted(a) for a in arguments)


def file_name(exc: OSError) -> str:
    """The file an OSError names, as given — every file that can exist has a name the
    system takes, said whole — but :func:`quoted` when the system refused it as too
    long (ENAMETOOLONG: a 100,000-character name was said whole)."""
    name = str(exc.filename)
    if exc.errno == errno.ENAMETOOLONG:
        return quoted(name)
    return path_shown(name)


def path_shown(name: str) -> str:
    """A file's name as given, whole, where it is printable; else quoted whole, its
    control characters escaped and its bytes that are not UTF-8 as typed (``\\xff``):
    said as it is, an ESC in the name reached the terminal."""
    return name if name.isprintable() else quoted(name, limit=len(name))


def without_password(url: str) -> str:
    """A server URL with its credentials hidden (``redis://***@host:port/0``), before
    it reaches an error line or a log: a line said on a shared terminal, pasted into an
    issue or kept by a log collector must not carry the Redis password. Everything up
    to the last ``@`` before the query goes — a user name too (half of what a guesser
    needs), and a password with a ``/`` in it, which ends no authority here; an ``@``
    in the query alone hides nothing. A URL without credentials is returned as it is;
    one without its ``://`` (``redis:/:pw@h``, a slash short) loses its scheme with them
    (``***@h``): it was returned whole, and said so as "not a Redis URL". A password or
    user name in the query, which redis-py reads too, loses its value (``?password=***``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    before_query = rest.partition("?")[0].partition("#")[0]
    if "@" in before_query:
        url = f"{scheme}{sep}***@{rest[before_query.rindex('@') + 1 :]}"
    return _QUERY_CREDENTIAL.sub(r"\1***", url)


#: A credential in a URL's query (``?password=…``, ``&username=…``), which redis-py
#: reads as it reads the authority's: the start line logged it whole (an operator
#: audit). Its value goes, up to the next ``&`` or ``#``.
_QUERY_CREDENTIAL: Final = re.compile(r"([?&](?:password|username)=)[^&#]*", re.IGNORECASE)
