"""``solrace-server``: run one node.

Every flag has an environment variable, so containers and process managers configure
it the same way: ``SOLRACE_HOST``, ``SOLRACE_PORT``, ``SOLRACE_REDIS_URL``,
``SOLRACE_LOG_LEVEL``, ``SOLRACE_LOG_FORMAT``, ``SOLRACE_KEY_PREFIX``,
``SOLRACE_RATE_PER_S``, ``SOLRACE_RATE_BURST``, ``SOLRACE_DATA_DIR``, ``SOLRACE_LOOP``,
``SOLRACE_MAX_CONNECTIONS``, ``SOLRACE_MAX_CONNECTIONS_PER_ADDRESS``,
``SOLRACE_TRUSTED_PROXIES``. A
flag wins over its variable. The node runs on uvloop where it is installed (``--loop``,
below: the event loop). Without a Redis URL the node starts its own engine (a private
valkey-server, :mod:`solrace.store.embedded`) on ``--data-dir`` and says where the data
lives first; restarted on the same directory, it resumes the races.

Exit status (docs/server.md): 0 stopped by SIGTERM/SIGINT/SIGHUP after draining; 1 could not
start (the port is taken, the data directory is in use by another node, …); 2 a bad flag
or variable (including a ``--host`` that names no address of this machine, a Redis URL
that is malformed, that Redis refuses, such as a database index it does not have, or
that names the wrong kind of Redis — a cluster URL for a standalone Redis, a plain one
for a cluster node, TLS for one that speaks plain text — or whose user an ACL keeps from
what a node does, or that is another node's embedded engine, and a data directory
that cannot be created or written); 3 the drain
after SIGTERM/SIGINT/SIGHUP failed (a defect: the log holds its traceback); 130
interrupted (Ctrl-C) before it was listening. Every failure to start is one line on
stderr, never a traceback.

Importing this module loads only the standard library: the node's own modules (the
store and redis-py, the rooms, the solver workers, websockets) are loaded by
:func:`main`, where a Ctrl-C while they load is one line too, and a bad flag is said
before any of them is paid for.
"""

from __future__ import annotations

import argparse
import errno
import functools
import gc
import importlib.util
import logging
import os
import socket
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast
from urllib.parse import SplitResult, parse_qs, parse_qsl, unquote, urlsplit

from solrace import __version__
from solrace.argtypes import (
    DEFAULT_PORT,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    BadText,
    OneLineParser,
    add_version,
    not_a_host_name,
    real,
    utf8,
    whole,
    whole_number,
)
from solrace.digits import digits_value, is_digits
from solrace.environ import variable
from solrace.quoting import MAX_QUOTED, as_typed, quoted, quoted_number, without_password
from solrace.streams import degrade_gracefully

from . import logs

if TYPE_CHECKING:  # loaded by main(), not on import (the module docstring)
    import asyncio

    from solrace.rooms.node import Node
    from solrace.store import Store
    from solrace.store.keeping import Eviction
    from solrace.store.store import Durability

    from .admission import Network

log = logging.getLogger("solrace.server")

EXIT_OK, EXIT_CANNOT_START, EXIT_DRAIN_FAILED = 0, 1, 3
# EXIT_INTERRUPTED (argtypes): Ctrl-C before the node listens; once it listens,
# SIGINT drains like SIGTERM (EXIT_OK).
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")


# ------------------------------------------------------------- the event loop
# uvloop where it is installed, else asyncio's own (docs/performance.md, round 7): a
# node's CPU goes mostly to the event loop's socket reads and writes — a move is one
# frame in, the ``moved`` reply and the fan-out out, the group commit's Redis round
# trip — and uvloop (libuv, in C) does that work for 9–14 % less CPU a move than
# asyncio's selector loop, with the same code on top: websockets, redis-py and the
# store's own Redis link use only the standard loop and transport interfaces. It is a
# dependency wherever it has wheels (not Windows, not PyPy: ``pyproject.toml``), so
# ``auto`` is the loop a user gets; ``asyncio`` remains for comparison and for
# platforms without it. The server benchmark runs its echo server on the same loop as
# the node it is compared with, so its ratio compares code, not loops.

T = TypeVar("T")

AUTO, UVLOOP, ASYNCIO = "auto", "uvloop", "asyncio"
#: The values of ``--loop`` / ``SOLRACE_LOOP``.
LOOPS: Final = (AUTO, UVLOOP, ASYNCIO)


class LoopUnavailable(ValueError):
    """The loop asked for is not installed here."""


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def resolve_loop(name: str, *, have_uvloop: bool | None = None) -> str:
    """The loop ``name`` means here: ``auto`` is uvloop when installed, else asyncio.
    Raises :class:`LoopUnavailable` for ``uvloop`` when it is not installed, and
    ``ValueError`` for a name not in :data:`LOOPS`."""
    if name not in LOOPS:
        raise ValueError(f"must be one of {', '.join(LOOPS)}, got {quoted(name)}")
    installed = uvloop_installed() if have_uvloop is None else have_uvloop
    if name == AUTO:
        return UVLOOP if installed else ASYNCIO
    if name == UVLOOP and not installed:
        raise LoopUnavailable("uvloop is not installed here (pip install uvloop), use asyncio")
    return name


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop factory for ``asyncio.Runner`` for a resolved loop name."""
    if resolve_loop(name) == UVLOOP:
        import uvloop

        return uvloop.new_event_loop
    import asyncio

    return asyncio.new_event_loop


def run_on_loop(name: str, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop ``name`` resolves to. ``main`` is closed
    whatever happens: a Ctrl-C while the loop's module loads (uvloop) left it never
    awaited, and Python said so in a RuntimeWarning after the one-line message."""
    try:
        import asyncio

        with asyncio.Runner(loop_factory=loop_factory(name)) as runner:
            return runner.run(main)
    finally:
        main.close()


class UsageError(Exception):
    """A flag or environment variable has a value the server cannot use (exit 2)."""


# ------------------------------------------------------------------ values
def _host(text: str) -> str:
    """A listen address; an empty one is refused, not taken as "every address". It is
    resolved and each of its addresses bound (port 0, closed at once), as the server
    will, so that a name that resolves to nothing, or to no address of this machine, is
    said now — a bad flag, before the embedded engine or anything else starts. Other
    failures (no IPv6 here, …) are left to the real start, which says them."""
    if not text.strip():
        raise ValueError("must not be empty (0.0.0.0 listens on every IPv4 address)")
    if text.startswith("[") and text.endswith("]"):  # as in a URL: looked up, not found
        raise ValueError(
            f"{quoted(text)} is not a host name: an IPv6 address goes without its brackets "
            f"here (--host {as_typed([text[1:-1]])})"
        )
    _check_host(text)
    try:
        found = socket.getaddrinfo(text, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:  # its codes are not errnos
        raise ValueError(f"{quoted(text)} names no address to listen on: {exc.strerror}") from None
    for family, kind, proto, _, address in found:
        try:
            with socket.socket(family, kind, proto) as probe:
                if family == socket.AF_INET6:  # as asyncio binds it: this address only
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                named = text if address[0] == text else f"{text} ({address[0]})"
                raise ValueError(
                    f"{named} is not an address of this machine "
                    "(0.0.0.0 listens on every IPv4 address)"
                ) from None
    return text


def _port(text: str) -> int:
    try:
        port = whole_number(text)
    except ValueError:
        raise ValueError(f"not a port number: {quoted(text)}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {quoted_number(port)} is out of range (0-65535)")
    return port


AUTO_MAX_CONNECTIONS: Final = "auto"
MIB: Final = 1024 * 1024


def _max_connections(most: int) -> Callable[[str], int | None]:
    """A number of connections, 1 to ``most``, or ``auto`` (None: from the open-file
    limit)."""
    count = whole(1, most)

    def check(text: str) -> int | None:
        if text.strip().lower() == AUTO_MAX_CONNECTIONS:
            return None
        try:
            return count(text)
        except ValueError as exc:
            raise ValueError(f"{exc} (or auto)") from None

    return check


#: ``--keep-results``: saved results are kept for ever (docs/design.md: results stay).
KEEP_FOREVER: Final = "forever"
#: A day, in the seconds a Redis expiry takes.
DAY_S: Final = 86_400
#: The longest ``--keep-results`` (a century): Redis refuses an expiry past its
#: limit ("invalid expire time"), and every result's save would then fail.
MAX_KEEP_RESULTS_DAYS: Final = 36_500


def _keep_results(text: str) -> int | None:
    """Days a race's saved result is kept, or ``forever`` (None: no expiry); the
    expiry in whole seconds, at least one."""
    if text.strip().lower() == KEEP_FOREVER:
        return None
    try:
        days = real(0, MAX_KEEP_RESULTS_DAYS, above=True, unit=" days")(text)
    except ValueError as exc:
        raise ValueError(f"{exc} (or {KEEP_FOREVER})") from None
    return max(1, round(days * DAY_S))


def _trusted_proxies(text: str) -> tuple[Network, ...]:
    from .admission import parse_networks

    return parse_networks(text)


def check_redis_url(text: str) -> str:
    """A Redis URL as ``--redis-url`` takes it (the server benchmark's too); raises
    ValueError saying what is wrong. No I/O."""
    from solrace.store import CLUSTER_SCHEMES, parse_cluster_url

    utf8_url(text)  # the benchmark's --redis-url: "Redis does not answer at \udcff", status 1
    not_redis = f"not a Redis URL: {quoted(without_password(text))}"
    if not text.isprintable():  # an ESC's "[" was read as an IPv6 address's bracket
        raise ValueError(f"{not_redis}: it holds a character that is not printable")
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # urllib's "Invalid IPv6 URL", which named no URL
        raise ValueError(f"{not_redis}: {str(exc)[:1].lower()}{str(exc)[1:]}") from None
    if parts.scheme not in ("redis", "rediss", "unix", *CLUSTER_SCHEMES) or "://" not in text:
        raise ValueError(
            f"{not_redis} (redis://host:port/db, "
            "rediss://…, unix:///path, redis+cluster://host:port[,host:port…])"
        )
    if _credentials_cut_short(parts):
        raise ValueError(
            "its user name or password holds a raw '/', '?' or '#', which ends the host "
            "part before its '@': write them %2F, %3F and %23 (redis://user:pass%2Fword@host:port/0)"
        )
    _check_query_once(parts.query)
    if parts.scheme in CLUSTER_SCHEMES:
        first, others = parse_cluster_url(text)  # raises ValueError saying what is wrong
        for host in (urlsplit(first).hostname or "", *(host for host, _ in others)):
            _check_host(host)
    else:
        db = parts.path.strip("/")
        if parts.scheme != "unix":
            _check_port(parts)
            _check_host(parts.hostname or "")
        # digits 0-9, as many as int() reads: redis-py's int() of '²' (or of 5,000
        # nines) failed, and it ran on database 0 in silence
        if parts.scheme != "unix" and db and digits_value(db) is None:
            why = "too long a number" if is_digits(db) else "not a number"
            raise ValueError(f"database index {quoted(db)} is {why} (redis://host:port/0)")
        # redis-py takes the query's db over the path's, silently: a URL naming both
        # ran the node on the query's while its log line showed the path's first.
        query_db = parse_qs(parts.query).get("db")
        if parts.scheme != "unix" and db and query_db:
            raise ValueError(
                f"the database is given twice ({quoted(db)} in the path, "
                f"{quoted(query_db[0])} in the query): give it once (redis://host:port/0)"
            )
    if parts.query:
        _check_query_options(text, cluster=parts.scheme in CLUSTER_SCHEMES)
        _check_query_timeouts(parts.query)
    return text


#: The options of a Redis URL's query that are timeouts, in seconds (redis-py's).
QUERY_TIMEOUTS: Final = ("socket_timeout", "socket_connect_timeout")


def _check_query_timeouts(query: str) -> None:
    """A timeout in the query more than 0 seconds. ``?socket_timeout=0`` (0 often
    means "no timeout") is a timeout of nothing to redis-py: every call failed at
    once, and the node said "redis does not answer; serving anyway" of a Redis that
    answered PING, refusing every request for as long as it ran (an operator audit).
    A value redis-py cannot read is :func:`_check_query_options`' to refuse."""
    from solrace.store.store import COMMAND_TIMEOUT_S

    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in QUERY_TIMEOUTS:
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        if not seconds > 0:  # NaN too
            raise ValueError(
                f"the option {name}={quoted(value, as_is=True)} is no time to wait: every "
                f"call to Redis would fail at once; give seconds more than 0, or leave it "
                f"out (the node then waits {COMMAND_TIMEOUT_S:g} s)"
            )


def utf8_url(text: str) -> str:
    """``text`` if it is UTF-8, else :class:`BadText` with its bytes as typed but not
    its credentials (:func:`without_password`): :func:`utf8` said the URL whole, and a
    byte anywhere put the Redis password on the error line."""
    hidden = without_password(text)
    utf8(hidden)  # a byte outside the credentials: said as typed
    try:
        return utf8(text)
    except BadText:
        raise BadText(f"not UTF-8 text in the credentials of {quoted(hidden)}") from None


def _check_host(host: str) -> None:
    """A Redis URL's host (a cluster URL's, each node's) or ``--host`` is one a lookup
    can find, said in the same words: a Redis host with a space was served, and retried
    for ever (:func:`not_a_host_name`)."""
    unnamed = not_a_host_name(host) if host else None
    if unnamed is not None:
        raise ValueError(f"{quoted(host)} is not a host name ({unnamed})")


def _check_port(parts: SplitResult) -> None:
    """A standalone Redis URL's port, when it has one, is 1 to 65535 in the digits 0-9:
    urllib's words were said (``Port could not be cast to integer value as 'abc'``,
    ``Port out of range 0-65535``, int()'s limit of digits), and port 0 was taken — the
    node retried a port nothing listens on, for ever. Checked after the credentials
    (:func:`_credentials_cut_short`): what is before the ``@`` is never said."""
    port = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    number = digits_value(port)
    if port and (number is None or not 0 < number < 65536):
        raise ValueError(f"port {quoted(port)} is not a port: 1 to 65535 (redis://host:6379/0)")


def _credentials_cut_short(parts: SplitResult) -> bool:
    """Whether a URL's credentials hold a raw ``/``, ``?`` or ``#`` (a base64 password
    often has a ``/``): its host part ends there, and an ``@`` follows —
    in the path (a database index or a socket's path after a host part has none), the
    fragment, an option's name, or a query after a host part whose port is no number.
    Every check after this one said that rest (a database index, a port, a cluster
    node) and with it the password's part: said here, nothing of the URL is."""
    if not parts.netloc:
        return False  # unix:///run/redis@main.sock: a path may hold an @
    port = parts.netloc.rpartition("@")[2].rpartition(":")[2]
    return (
        "@" in parts.path
        or "@" in parts.fragment
        or any("@" in name for name, _ in parse_qsl(parts.query, keep_blank_values=True))
        or ("@" in parts.query and "@" not in parts.netloc and not is_digits(port))
    )


def _check_query_once(query: str) -> None:
    """Each option of a Redis URL's query given once: redis-py takes a repeated one's
    first value without a word (``?db=3&db=4`` ran on database 3)."""
    values: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        values.setdefault(name, []).append(value)
    for name, given in values.items():
        if len(given) > 1:
            shown = ", ".join(quoted(v) for v in given)
            raise ValueError(
                f"the option {quoted(name)} is given twice in the query ({shown}): give it once"
            )


def _check_query_options(text: str, *, cluster: bool) -> None:
    """Build the client the store would, without I/O: redis-py hands every option of
    the URL's query to its client or connection class, which refuses one it does not
    take (``?bogus=1``, ``?ssl_certfile=…`` on a plain-text URL) with a TypeError —
    otherwise only at the first connection, as a traceback. A value it cannot read
    (``?socket_timeout=abc``) is its ValueError, which says so — or, for
    ``?ssl_cert_reqs=bogus``, its RedisError, which was a traceback: both said in its
    words, a value they quote cut as :func:`~solrace.quoting.quoted` cuts one."""
    import re

    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import RedisError

    from solrace.store._cluster import cluster_client

    try:
        if cluster:
            retry = Retry(NoBackoff(), 0)
            client = cluster_client(
                text, socket_timeout=None, socket_connect_timeout=1.0, retry=retry
            )
            # it builds its connections as it first connects: build one, as for one node
            # (?ssl_cert_reqs=bogus on rediss+cluster:// was taken, then failed each request)
            for node in list(client.nodes_manager.startup_nodes.values())[:1]:
                node.connection_class(**node.connection_kwargs)
        else:
            pool = redis.asyncio.from_url(text).connection_pool
            # redis-py leaves make_connection untyped; it builds (never opens) one
            make_connection = cast("Callable[[], object]", pool.make_connection)
            make_connection()
    except TypeError as exc:
        found = re.search(r"keyword argument '([^']*)'", str(exc))
        name = found.group(1) if found else str(exc)
        why = f"the Redis client takes no option {quoted(name)} (in the URL's query)"
        raise ValueError(why) from None
    except (ValueError, RedisError) as exc:
        raise ValueError(_values_cut(str(exc), urlsplit(text).query)) from None


def _values_cut(message: str, query: str) -> str:
    """redis-py's ``message`` about a URL's ``query``, each value of the query it quotes
    cut as :func:`~solrace.quoting.quoted` cuts one (``Invalid SSL Certificate
    Requirements Flag: <100,000 characters>`` was said whole)."""
    for _, value in parse_qsl(query, keep_blank_values=True):
        if len(value) > MAX_QUOTED and value in message:
            message = message.replace(value, quoted(value, as_is=True))
    return message


def _data_dir(text: str) -> str:
    """A data directory's path. One with a control character (a newline, a tab) is
    refused: the engine starts there, but the ``unix://`` URL of its socket cannot
    carry one (URL parsing drops it), so the node would serve with a store that never
    answers."""
    if not text.strip():
        raise ValueError("must name a directory")
    control = next((c for c in text if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if control is not None:
        raise ValueError(f"must not contain a control character (U+{ord(control):04X})")
    return os.path.expanduser(text)


def _key_prefix(text: str) -> str:
    """The store refuses braces in it (solrace.store.keys: a ``{`` would become every
    key's cluster hash tag); said as this flag's fault, before anything starts — not
    as a traceback once the embedded engine runs, nor as the Redis URL's. An empty one
    is refused too: the node's keys (``node:…``, ``rooms:listed``, ``code:…``) would mix
    with every other key of the database, and nothing could tell them apart (an
    operator audit). (An empty ``$SOLRACE_KEY_PREFIX`` is unset: the default.) One
    that is not printable is refused: it reached the terminal in every line naming a
    key."""
    if not text:
        raise ValueError(
            "must not be empty: solrace's keys would mix with every other key of the "
            "database (the default is solrace:)"
        )
    if not text.isprintable():
        # A control character (ESC, a newline) or a direction override in every key:
        # said raw in each log line and key listing that names one (a newcomer walk).
        # First: a prefix ending in a newline is no "space" to its writer.
        raise ValueError(f"must be printable: {quoted(text)} holds a character that is not")
    if text != text.strip():
        # Its variable is not trimmed (Setting.trim): trimmed, ``solrace: `` named
        # other keys than the release before read, and than the flag's, silently.
        raise ValueError(
            f"must not begin or end with a space: {quoted(text)} (a key prefix names keys: "
            "write it without)"
        )
    if "{" in text or "}" in text:
        raise ValueError(
            f"must not contain braces (they are Redis Cluster's hash tag): {quoted(text)}"
        )
    return text


def _choice(options: Sequence[str]) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text not in options:
            raise ValueError(f"must be one of {', '.join(options)}, got {quoted(text)}")
        return text

    return check


@dataclass(frozen=True)
class Setting:
    """One flag with its variable, default and checker."""

    flag: str
    variable: str
    default: str | None
    check: Callable[[str], Any]
    help: str
    #: Its variable read without the spaces around it, a blank one unset
    #: (solrace.environ.variable); else as written, only an empty one unset: the key
    #: prefix, where a space is part of the keys' names.
    trim: bool = True
    #: Its value's check of bytes that are not UTF-8, said as typed (a Redis URL's
    #: without its password: :func:`utf8_url`).
    text: Callable[[str], str] = utf8

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def found(self, environ: Mapping[str, str]) -> str | None:
        """The setting's variable in ``environ``, as :meth:`value` reads it."""
        return variable(self.variable, environ) if self.trim else environ.get(self.variable)

    def source(self, given: str | None, environ: Mapping[str, str]) -> str:
        """Where the setting comes from, in the words a line about it uses: its flag
        (``given``), ``$VARIABLE``, or ``default``."""
        if given is not None:
            return self.flag
        return f"${self.variable}" if self.found(environ) else "default"

    def value(self, given: str | None, environ: Mapping[str, str]) -> Any:
        """The setting from its flag's value ``given``, else its variable in
        ``environ`` (trimmed, :func:`solrace.environ.variable`: a blank one is not
        set; an empty one only, untrimmed, if not :attr:`trim`), else its default;
        checked. Raises
        UsageError naming the flag or the variable that is wrong. The benchmarks read
        ``--loop`` with it too (:data:`LOOP`): the same words for the same mistake."""
        source = self.source(given, environ)
        if given is None:
            given = self.found(environ) or self.default
        if given is None:
            return None
        try:  # bytes that are not UTF-8 first: no check (key, path, URL) can use them
            return self.check(self.text(given))
        except ValueError as exc:
            raise UsageError(f"{source}: {exc}") from None


#: ``--loop`` / ``SOLRACE_LOOP``: the event loop, for the node and for the benchmarks
#: that run one (``python -m solrace.bench server|core``), which take it alike.
LOOP: Final = Setting(
    "--loop",
    "SOLRACE_LOOP",
    AUTO,
    resolve_loop,
    f"event loop: {', '.join(LOOPS)} (auto: uvloop when installed, else asyncio)",
)


@functools.cache
def settings() -> tuple[Setting, ...]:
    """Every setting, in ``--help`` order (built on first use: the rate defaults are
    the protocol's, whose modules :func:`main` loads)."""
    from solrace.protocol.limits import (
        MAX_RACERS,
        MAX_RATE_BURST,
        MAX_RATE_PER_S,
        MAX_UNREAD_BYTES,
        MAX_UNREAD_BYTES_PER_NODE,
        RATE_BURST,
        RATE_PER_S,
        SEATS_PER_ADDRESS,
        SPECTATORS_PER_ROOM,
    )

    from .admission import (
        CONNECTION_BURST,
        DEFAULT_CONNECTIONS_PER_S,
        DEFAULT_MAX_PER_ADDRESS,
        DEFAULT_ROOMS_PER_MINUTE,
        DEFAULT_TRUSTED,
        MAX_CONNECTIONS_CEILING,
        MAX_CONNECTIONS_PER_S,
        MAX_ROOMS_PER_MINUTE,
        MOST_CONNECTIONS,
        SEAT_IPV6_PREFIX,
    )

    # The number flags (solrace.argtypes: the same words as every other command line),
    # each from 0 — no cap — (or its least) to its most, docs/server.md's table: past
    # the most nothing changes but the risk (a bound of 400 digits overflowed a float).
    # A burst below one message would refuse every message; a room seats at most
    # MAX_RACERS, so more seats per address is no cap; an address or a room holds no
    # more connections than a node does; and the node's connections together leave no
    # more unread than each one's MAX_UNREAD_BYTES allows.
    rate_per_s = real(0, MAX_RATE_PER_S, above=True)
    rate_burst = real(1, MAX_RATE_BURST)
    per_address = whole(0, MOST_CONNECTIONS)
    rooms_per_minute = whole(0, MAX_ROOMS_PER_MINUTE)
    connections_per_s = real(0, MAX_CONNECTIONS_PER_S)
    seats_per_address = whole(0, MAX_RACERS)
    spectators_per_room = whole(0, MOST_CONNECTIONS)
    max_unread_mib = whole(0, MOST_CONNECTIONS * MAX_UNREAD_BYTES // MIB)

    return (
        Setting("--host", "SOLRACE_HOST", "127.0.0.1", _host, "listen address"),
        Setting(
            "--port", "SOLRACE_PORT", str(DEFAULT_PORT), _port, "WebSocket and HTTP port (0: any)"
        ),
        Setting(
            "--redis-url",
            "SOLRACE_REDIS_URL",
            None,
            check_redis_url,
            "redis://host:port/db, unix:///path, or a Redis Cluster as "
            "redis+cluster://host:port[,host:port…] (rediss:// and rediss+cluster:// for "
            "TLS); omit to run on the embedded engine under --data-dir",
            text=utf8_url,
        ),
        Setting(
            "--data-dir",
            "SOLRACE_DATA_DIR",
            None,
            _data_dir,
            "where the embedded engine keeps its append-only file when there is no Redis URL "
            "(default $XDG_DATA_HOME/solrace, else ~/.local/share/solrace)",
        ),
        Setting(
            "--log-level", "SOLRACE_LOG_LEVEL", "info", _choice(LOG_LEVELS), "/".join(LOG_LEVELS)
        ),
        Setting(
            "--log-format",
            "SOLRACE_LOG_FORMAT",
            "text",
            _choice(LOG_FORMATS),
            "one line per record, as text or json",
        ),
        Setting(
            "--key-prefix",
            "SOLRACE_KEY_PREFIX",
            "solrace:",
            _key_prefix,
            "prefix of every Redis key (not empty, no braces, no space around it)",
            trim=False,
        ),
        Setting(
            "--rate-per-s",
            "SOLRACE_RATE_PER_S",
            f"{RATE_PER_S:g}",
            rate_per_s,
            "messages per second each connection may send, sustained (over it: close 1008)",
        ),
        Setting(
            "--rate-burst",
            "SOLRACE_RATE_BURST",
            f"{RATE_BURST:g}",
            rate_burst,
            "messages a connection may send at once on top of the sustained rate",
        ),
        Setting(
            "--max-connections",
            "SOLRACE_MAX_CONNECTIONS",
            AUTO_MAX_CONNECTIONS,
            _max_connections(MOST_CONNECTIONS),
            "connections the node takes at most, more get HTTP 503 server_full (auto: its "
            f"open-file limit less a reserve, at most {MAX_CONNECTIONS_CEILING:,})",
        ),
        Setting(
            "--max-connections-per-address",
            "SOLRACE_MAX_CONNECTIONS_PER_ADDRESS",
            str(DEFAULT_MAX_PER_ADDRESS),
            per_address,
            "connections one client address may hold, more get HTTP 429 "
            "too_many_connections (an IPv6 address counts by its /64; 0: no cap)",
        ),
        Setting(
            "--rooms-per-minute-per-address",
            "SOLRACE_ROOMS_PER_MINUTE_PER_ADDRESS",
            str(DEFAULT_ROOMS_PER_MINUTE),
            rooms_per_minute,
            "rooms one client address may open a minute (and at once), more are refused "
            "too_many_rooms (counted as connections are; 0: no cap)",
        ),
        Setting(
            "--connections-per-second-per-address",
            "SOLRACE_CONNECTIONS_PER_SECOND_PER_ADDRESS",
            f"{DEFAULT_CONNECTIONS_PER_S:g}",
            connections_per_s,
            f"new connections one client address may open a second past a burst of "
            f"{CONNECTION_BURST} (or --max-connections-per-address if larger), more get "
            "HTTP 429 connecting_too_fast with Retry-After "
            "(counted as connections are; 0: no cap)",
        ),
        Setting(
            "--seats-per-address",
            "SOLRACE_SEATS_PER_ADDRESS",
            str(SEATS_PER_ADDRESS),
            seats_per_address,
            "seats one client address may take in a public room (listed or quick), more "
            "are refused same_address: a second seat would scout the shared deal "
            f"(counted as connections are, but an IPv6 client by its /{SEAT_IPV6_PREFIX}; "
            "private rooms take any number; 0: no cap)",
        ),
        Setting(
            "--spectators-per-room",
            "SOLRACE_SPECTATORS_PER_ROOM",
            str(SPECTATORS_PER_ROOM),
            spectators_per_room,
            "spectators the node lets watch one room at once, more are refused "
            "too_many_spectators: each one costs the node every frame the room sends "
            "(0: no cap)",
        ),
        Setting(
            "--max-unread-mib",
            "SOLRACE_MAX_UNREAD_MIB",
            str(MAX_UNREAD_BYTES_PER_NODE // MIB),
            max_unread_mib,
            "MiB of output all the node's connections together may leave unread; past "
            "it the connection holding the most is dropped, as one that leaves 4 MiB "
            "unread is (0: no cap)",
        ),
        Setting(
            "--trusted-proxies",
            "SOLRACE_TRUSTED_PROXIES",
            DEFAULT_TRUSTED,
            _trusted_proxies,
            "addresses and networks (or loopback, private; none) whose connections are "
            "not capped per address and whose X-Forwarded-For names the client",
        ),
        Setting(
            "--keep-results",
            "SOLRACE_KEEP_RESULTS",
            KEEP_FOREVER,
            _keep_results,
            "days a finished race's result stays in Redis for solrace fetch (replay and "
            f"verify read the racers' own files), or {KEEP_FOREVER} (each is a few kilobytes)",
        ),
        LOOP,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="solrace-server",
        description="Run one solrace node: WebSocket races, /healthz and /metrics on one "
        "port. Every flag has an environment variable ("
        + ", ".join(s.variable for s in settings())
        + "); a flag wins over its variable. Exit status: 0 stopped (SIGTERM/SIGINT/SIGHUP), "
        "1 could not start, 2 a bad flag or variable, 3 the drain failed, 130 interrupted "
        "before listening.",
    )
    add_version(parser)
    for setting in settings():
        default = f", default {setting.default}" if setting.default else ""
        parser.add_argument(
            setting.flag,
            default=None,
            metavar=setting.flag.removeprefix("--").replace("-", "_").upper(),
            help=f"{setting.help} (${setting.variable}{default})",
        )
    return parser


def resolve(args: argparse.Namespace, environ: dict[str, str] | None = None) -> argparse.Namespace:
    """Each setting from its flag, else its variable, else its default, checked.
    Raises UsageError naming the flag or the variable that is wrong."""
    environ = dict(os.environ) if environ is None else environ
    return argparse.Namespace(
        **{s.dest: s.value(getattr(args, s.dest), environ) for s in settings()},
        # where each came from, for a line about it (``$SOLRACE_DATA_DIR is ignored``)
        sources={s.dest: s.source(getattr(args, s.dest), environ) for s in settings()},
    )


# ------------------------------------------------------------------- run
async def open_store(
    url: str | None, prefix: str, data_dir: str | None = None
) -> tuple[Store, bool]:
    """The store, and whether it answered (the node says so after the store line); a
    URL Redis refuses (bad database index, wrong password…) is a UsageError. An
    unreachable Redis is not: the node serves and requests fail with ``unavailable``
    until it answers. Without a URL, the embedded engine on
    ``data_dir`` (default :func:`default_data_dir`): a directory that cannot be made
    or written is a UsageError, one in use by another node an EngineError (exit 1).
    A Redis that answers, but not as the URL says (:mod:`solrace.store.probe`: a cluster
    URL for a standalone Redis, a plain URL for a cluster node, TLS for a plain-text
    one), or whose user may not do what a node does (an ACL), is a UsageError too."""
    from solrace.store import Store, StoreError, StoreUnavailable
    from solrace.store.embedded import DataDirUnusable, default_data_dir

    if url is None:
        given = data_dir is not None
        if data_dir is None:  # checked as --data-dir is: its variables are a user's too
            try:
                data_dir = _data_dir(utf8(str(default_data_dir())))
            except ValueError as exc:
                raise UsageError(
                    f"--data-dir: {exc} (the default, from $XDG_DATA_HOME or $HOME: name "
                    "another with --data-dir)"
                ) from None
        try:
            return await Store.start_embedded(data_dir, prefix=prefix), True
        except DataDirUnusable as exc:
            if given:
                raise UsageError(f"--data-dir: {exc}") from None
            # Nobody chose the embedded store here: deploy/'s systemd unit with its
            # Redis URL missing from the environment file ended "--data-dir: cannot use
            # … /opt/solrace/.local/share/solrace: Read-only file system".
            raise UsageError(
                f"{exc} (the embedded store's default directory, from $XDG_DATA_HOME or "
                "$HOME: no --redis-url or $SOLRACE_REDIS_URL is given; give one, or a "
                "directory with --data-dir)"
            ) from None
    _refuse_embedded_engine(url)
    try:
        store = await Store.connect(url, prefix=prefix)
    except ValueError as exc:  # redis-py's URL parser
        raise UsageError(f"--redis-url: {exc}") from None
    try:
        answers = await store.ping()
    except StoreUnavailable:
        answers = False
    except StoreError as exc:
        raise UsageError(
            f"--redis-url: Redis refused {without_password(url)}: {_last_words(exc)}"
        ) from None
    if answers:
        await _refuse_unusable(store, url)
    else:
        from solrace.store.probe import wrong_kind

        wrong = await wrong_kind(url)
        if wrong is not None:
            await store.close()
            raise UsageError(
                f"--redis-url: {wrong.node} {wrong.says}: use {without_password(wrong.use)}"
            )
        refused = await auth_refused(url)
        if refused is not None:
            await store.close()
            raise UsageError(f"--redis-url: Redis refused {without_password(url)}: {refused}")
    return store, answers


def _refuse_embedded_engine(url: str) -> None:
    """Raise UsageError if ``url`` is another node's embedded engine's socket
    (``unix://DATA_DIR/engine.sock``). A second node ran on it, and failed every
    request once the owner stopped, its engine with it (an operator audit): the
    embedded store is one node's, and several nodes share a Redis of their own. An
    operator's Redis on a unix socket is not: only the engine's own socket, found by
    the files beside it (:func:`solrace.store.embedded.embedded_data_dir`)."""
    parts = urlsplit(url)
    if parts.scheme != "unix":
        return
    from solrace.store.embedded import data_dir_owner, embedded_data_dir

    data_dir = embedded_data_dir(unquote(parts.path))
    if data_dir is None:
        return
    raise UsageError(
        f"--redis-url: {without_password(url)} is the embedded engine of the solrace-server on "
        f"{data_dir} (pid {data_dir_owner(data_dir)}): it is that node's alone and stops "
        "with it; several nodes share a Redis of their own (redis://host:port/db on "
        "each, docs/deploy.md)"
    )


async def _refuse_unusable(store: Store, url: str) -> None:
    """Raise UsageError (closing ``store``) if the Redis that answers cannot serve the
    node all the same: a node of a Redis Cluster named by a ``redis://`` URL, or a user
    whose ACL forbids what the node does (:mod:`solrace.store.probe`); a read-only
    replica, or a Redis whose ``maxmemory-policy`` evicts keys (on a cluster: any
    master; :mod:`solrace.store.keeping`, from INFO). Each answers PING, and the node
    served, failing every request (a replica, whose drain failed too) or losing races'
    keys (eviction), until someone read its log."""
    from solrace.store.keeping import EVICTION_ADVICE
    from solrace.store.probe import cluster_node

    problem = None
    if not store.cluster and (wrong := await cluster_node(url)) is not None:
        problem = f"{wrong.node} {wrong.says}: use {without_password(wrong.use)}"
    elif (refused := await store.refused_access()) is not None:
        user = _username(url)
        problem = (
            f"Redis refused {without_password(url)}: user {user!r} may not {refused.doing} "
            f"({refused.said}): its ACL needs {refused.grant}"
        )
    elif (replica := await store.replica()) is not None:
        problem = (
            f"{replica.node or without_password(url)} is a read-only replica of {replica.master}: "
            "point --redis-url at its master"
        )
    elif (eviction := await store.eviction()).evicts:
        problem = (
            f"{eviction.node or without_password(url)} evicts keys (maxmemory-policy "
            f"{eviction.policy}): {EVICTION_ADVICE}"
        )
    if problem is not None:
        await store.close()
        raise UsageError(f"--redis-url: {problem}")


def _username(url: str) -> str:
    """The Redis user a URL logs in as (``default`` when it names none)."""
    netloc = urlsplit(url).netloc
    credentials = netloc.rpartition("@")[0] if "@" in netloc else ""
    return unquote(credentials.partition(":")[0]) or "default"


async def auth_refused(url: str) -> str | None:
    """Why Redis at ``url`` refuses its credentials (none where a password is required,
    a wrong password, an unknown user), or None if it does not answer or takes them.

    redis-py reports such a refusal as a connection error (AuthenticationError or, on
    Valkey, a plain ConnectionError), so the store counts it as an outage
    (``unavailable``); at start-up it is a URL Redis refuses (exit 2), not a Redis that
    does not answer: the node would never serve. Told apart by Redis's own words."""
    import redis.asyncio
    from redis.exceptions import AuthenticationError, RedisError

    from solrace.store import CLUSTER_SCHEMES, parse_cluster_url
    from solrace.store.errors import AUTH_REFUSALS
    from solrace.store.probe import one_node_options

    if urlsplit(url).scheme in CLUSTER_SCHEMES:
        # its first node, with the credentials (and the options one node takes)
        url = one_node_options(parse_cluster_url(url)[0])
    client = redis.asyncio.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        why = str(exc)
        if not isinstance(exc, AuthenticationError) and not any(
            words in why for words in AUTH_REFUSALS
        ):
            return None
    else:
        return None
    finally:
        await client.aclose()
    parts = urlsplit(url)
    # redis-py takes a password from the query too: one given there is wrong, not missing
    if parts.password is None and "password" not in parse_qs(parts.query):
        return "it requires a password (redis://:PASSWORD@host:port/db)"
    return why or "authentication failed"


async def run(args: argparse.Namespace) -> int:
    store, answers = await open_store(args.redis_url, args.key_prefix, args.data_dir)
    try:
        return await _serve(args, store, answers=answers)
    finally:
        await store.close()  # idempotent; stops the embedded engine if drain did not


#: Container allocations between two young-generation collections (CPython: 700). A
#: move allocates hundreds (views, frames, events) and nearly all die young without
#: cycles, so at 700 the collector ran every few moves (docs/performance.md).
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Collect less often, and never scan what startup built: everything allocated so
    far (modules, the server) moves to the permanent generation (``gc.freeze``), so
    the rare full collections scan only the rooms' own objects. Cycles are still
    collected; the pauses they cost no longer land on every few moves."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


async def _serve(args: argparse.Namespace, store: Store, *, answers: bool = True) -> int:
    """Run the node on ``store`` until SIGTERM/SIGINT/SIGHUP, then drain; the exit status.
    The first line names the store (docs/server.md), then whether Redis ``answers``."""
    import asyncio
    import signal

    from solrace.protocol.handshake import exact_number
    from solrace.rooms import solver_workers
    from solrace.rooms.node import Node

    from .admission import (
        Admission,
        connection_burst_for,
        connection_rate,
        default_max_connections,
    )
    from .server import RaceServer, raise_open_files_limit

    engine = store.engine
    if engine is not None:
        log.info(
            "store: embedded %s (pid %d, started in %.0f ms), data in %s; durable: every "
            "acknowledged move is in its append-only file before the reply, and a restart "
            "on this directory resumes the races",
            engine.binary.name,
            engine.pid,
            engine.start_ms,
            engine.data_dir,
            extra={"data_dir": str(engine.data_dir)},
        )
        if engine.stale_pid is not None:
            log.warning("stopped the engine a killed run left behind (pid %d)", engine.stale_pid)
    else:
        backend = "redis cluster" if store.cluster else "redis"
        log.info("store: %s", backend, extra={"url": without_password(args.redis_url)})
        if not answers:
            log.error("redis does not answer; serving anyway, requests fail until it does")
        if args.data_dir is not None:  # named as it was given (a variable, say)
            sources = getattr(args, "sources", {})
            log.warning(
                "%s is ignored: the store is the Redis at %s",
                sources.get("data_dir", "--data-dir"),
                sources.get("redis_url", "--redis-url"),
            )
    report_durability(await store.durability())
    if answers:  # else that is said above, and the node's own check says it later
        report_eviction(await store.eviction(max_age_s=float("inf")))  # start-up's answer
    node = Node(
        store,
        name=f"{args.host}:{args.port}",
        rate_per_s=args.rate_per_s,
        rate_burst=args.rate_burst,
        results_ttl_s=args.keep_results,
        seats_per_address=args.seats_per_address,
        spectators_per_room=args.spectators_per_room,
    )
    if answers:  # before it serves: its clock is the store's from the start (else at
        await node.sample_clock()  # its first answer: a dead Redis would hold the start)
    open_files = raise_open_files_limit()
    most = args.max_connections or default_max_connections(open_files)
    admission = Admission(
        most,
        args.max_connections_per_address,
        args.trusted_proxies,
        rooms_per_minute=args.rooms_per_minute_per_address,
        connections_per_s=args.connections_per_second_per_address,
        connection_burst=connection_burst_for(args.max_connections_per_address),
    )
    if admission.drop_at >= open_files:
        log.warning(
            "--max-connections %d leaves no reserve under the open-file limit (%d): the "
            "node could run out of file descriptors; raise the limit (ulimit -n, "
            "LimitNOFILE=) or lower --max-connections",
            most,
            open_files,
        )
    server = RaceServer(node, args.host, args.port, admission, args.max_unread_mib * MIB)
    await server.start()
    tune_gc()
    # SIGTERM/SIGINT drain from here on: before the "listening" line, which a process
    # manager (or a test) may answer with SIGTERM at once — after it, that SIGTERM
    # found the default action and killed the node undrained (status -15). SIGHUP too:
    # the end of the terminal or ssh session the node runs in (or `kill -HUP` meant as
    # a reload) killed it at once, without a drain or a line in its log.
    # Not a SIGHUP the node was started ignoring: ``nohup solrace-server &`` asks for
    # the node to outlive its terminal, and handled, its end stopped the node (a review).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    hangup = () if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else (signal.SIGHUP,)
    for sig in (signal.SIGTERM, signal.SIGINT, *hangup):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "listening",
        extra={
            "url": server.url,
            **({"on": server.listens_on} if server.listens_on else {}),
            "version": __version__,
            "rate": f"{exact_number(args.rate_per_s)}/s burst {exact_number(args.rate_burst)}",
            "loop": args.loop,
            "connections": f"{most} at most (open files {open_files}), "
            f"{args.max_connections_per_address or 'any number'} per address, "
            f"{connection_rate(admission)}",
        },
    )
    # Started while Redis did not answer: what it promises is said once it does.
    reporting = None if answers else asyncio.ensure_future(_report_once_answered(node, store))
    await stop.wait()
    if reporting is not None:
        reporting.cancel()
    # Not "cannot start" (main's error handlers are for startup): a step that fails
    # is logged with its traceback, the next one still runs, and the status says so.
    failed = False
    try:
        await server.drain()
    except Exception:
        log.exception("the drain failed; stopping anyway")
        failed = True
    try:
        solver_workers.shutdown()  # a stopping node waits for no deal
    except Exception:
        log.exception("stopping the solver workers failed")
        failed = True
    if failed:
        return EXIT_DRAIN_FAILED
    log.info("stopped")
    return EXIT_OK


#: What to do about each durability level short of the promise (docs/deploy.md).
_DURABILITY_ADVICE = {
    "aof-everysec": "a crash of the Redis host (power loss, kernel panic) may lose the "
    "last second of acknowledged moves (nodes detect it and resynchronise clients)",
    "aof-no": "a crash of the Redis host may lose the last ~30 s of acknowledged moves",
    "none": "a Redis restart loses acknowledged moves (back to its last snapshot, if any)",
    "unknown": "make sure it persists with an AOF fsynced on every write",
}


async def _report_once_answered(node: Node, store: Store) -> None:
    """Start-up's reports of what Redis promises (:func:`report_durability`,
    :func:`report_eviction`), made once a Redis that did not answer at the start does:
    at the node's first lease renewal (every LEASE_RENEW_S, the node's own watch of
    the store; this task asked PING every 5 s beside it). Said only at the start,
    they said "durability: unknown" for the node's whole life: one whose Redis came
    back without an AOF was never warned of it in its log (an operator's audit; only
    ``/healthz`` said ``none``)."""
    await node.first_renewal()
    report_durability(await store.durability())
    report_eviction(await store.eviction())


def report_eviction(found: Eviction) -> None:
    """Warn if whether Redis evicts keys could not be read (INFO refused): start-up
    refuses one that does (:func:`_refuse_unusable`), so that is all left to say."""
    if found.policy == "unknown":
        log.warning(
            "cannot check whether Redis evicts keys (%s): make sure its maxmemory-policy "
            "is noeviction (docs/deploy.md)",
            found.detail,
        )


def report_durability(found: Durability) -> None:
    """Log whether the Redis given can keep "an acknowledged move survives a Redis
    crash" (AOF, appendfsync always): info if it can, a warning saying what is at
    risk and how to fix it if it cannot or cannot be checked."""
    extra = {"durability": found.level}
    if found.keeps_promise:
        log.info(
            "durability: %s: an acknowledged move survives a Redis crash", found.level, extra=extra
        )
        return
    log.warning(
        "durability: %s (%s): %s; for the guarantee run Redis with appendonly yes, "
        "appendfsync always (deploy/redis.conf, docs/deploy.md)",
        found.level,
        found.detail,
        _DURABILITY_ADVICE[found.level],
        extra=extra,
    )


def _last_words(exc: BaseException) -> str:
    """``redis error: ResponseError: DB index is out of range`` → the last part."""
    return str(exc).rpartition(": ")[2] or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """The ``solrace-server`` command (its console script, :mod:`solrace.server_entry`,
    loads this module under its own Ctrl-C handler). This module loads only the
    standard library, so a Ctrl-C while the node's modules load (the first ~0.3 s)
    lands here: one line and :data:`EXIT_INTERRUPTED`, no traceback."""
    degrade_gracefully()  # before a word is said, --help and the logs included
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("solrace-server: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    from solrace.store.embedded import EngineError

    parser = build_parser()
    try:
        args = resolve(parser.parse_args(argv))
    except UsageError as exc:
        print(f"solrace-server: {exc}", file=sys.stderr)
        return EXIT_USAGE
    logs.configure(args.log_level, args.log_format)
    try:
        return run_on_loop(args.loop, run(args))
    except UsageError as exc:  # found once the flags met the store: said as the above
        print(f"solrace-server: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, EngineError) as exc:
        log.error("cannot start: %s", exc)
        return EXIT_CANNOT_START
    except KeyboardInterrupt:  # before listening: once it listens, SIGINT drains (exit 0)
        log.error("interrupted before listening")
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
