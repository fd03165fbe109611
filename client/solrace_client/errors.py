"""What the ``solrace`` command says when something goes wrong, and its exit statuses.

One place, so that every command — the plain ones and the terminal UI — uses the same
words and the same table (docs/client.md, "Exit status"):

====  ======================================================================
0     done
1     it ran and the answer is no: a race that does not verify or replay; a
      bot that could not finish its race (connection lost for good, replaced)
2     it could not run: bad arguments, a bad server URL, the server cannot be
      reached or refuses (unknown code, full room…), an unknown race or a
      malformed race file, the UI cannot start
130   interrupted (Ctrl-C)
====  ======================================================================

Users see words, never field paths (``create.max_racers``) or exception names.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from solrace.argtypes import DEFAULT_PORT, REDIS_DEFAULT_PORT, BadText, not_a_host_name, utf8
from solrace.argtypes import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from solrace.argtypes import EXIT_READER_GONE as EXIT_READER_GONE
from solrace.digits import is_digits
from solrace.protocol import CloseCode, CloseReason, ErrorCode
from solrace.protocol.handshake import PROBE_PATHS
from solrace.quoting import as_typed, quoted, url_shown
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidStatus,
    InvalidURI,
)
from websockets.frames import Close

from .printable import printable

EXIT_OK: Final = 0
EXIT_NO: Final = 1
EXIT_FAILED: Final = 2
#: Ended by SIGTERM (``kill PID``): the full-screen UI, the terminal given back, or a
#: bot, which left its race: what a shell reports for a process SIGTERM kills (128 + 15).
EXIT_TERMINATED: Final = 128 + 15
# EXIT_READER_GONE (141, imported above): the reader of standard output went away
# (``| head``); the one definition is the rules CLI's, which ends the same way.


def _start_words(command: str) -> str:
    """The "cannot reach" message's hint, starting a server with ``command``."""
    return f"is solrace-server running? (start one with: {command})"


#: How to start a server, for the "cannot reach" message (:func:`start_hint`).
START_HINT: Final = _start_words("solrace-server")

#: Failures of connecting: the server cannot be reached or is not a solrace server.
CONNECT_ERRORS: Final = (OSError, TimeoutError, InvalidHandshake, InvalidURI)

#: What a lost connection is called when nothing says why (no close frame, or this
#: client closed it): ConnectionLost's text then.
CONNECTION_CLOSED: Final = "connection closed"

#: A connection closed, or reset, before the server answered anything: a network or
#: proxy that drops connections (websockets, too, counts it a network error).
CLOSED_UNANSWERED: Final = (
    "the connection was closed before the server answered (the network, or a proxy, "
    "dropped it): try again"
)

#: What nginx answers (HTTP 400) to plain HTTP on a port of its that takes TLS: the
#: ws:// URL of a deployment behind deploy/nginx.conf's 443.
NGINX_TLS_PORT: Final = "The plain HTTP request was sent to HTTPS port"

#: Request fields as the user knows them: the command's flag, in words.
FIELD_WORDS: Final = {
    "max_racers": "most racers (--racers)",
    "time_limit_s": "time limit (--time-limit)",
    "spectator_delay_s": "spectator delay (--spectator-delay)",
    "name": "name (--name)",
    "code": "room code",
    "variant": "variant (--variant)",
    "options": "options (--option)",
    "private": "private (--private)",
}

#: Refusals of entering a room, in plain words, by (request, code); ``{code}`` is the
#: room code the user gave (``CODE`` when the caller does not know it), ``{message}``
#: the server's own words (which say why, e.g. a grace that ran out), ``{server}`` the
#: `` --server URL`` a command suggested needs to work as printed (connection.server_flag).
ENTRY_WORDS: Final = {
    ("join", "unknown_room"): "no room has that code (or it has expired, or everyone left it)",
    # a full room can be watched, as a started one can (it said only "that room is full")
    ("join", "room_full"): "that room is full: watch it with solrace watch {code}{server}",
    # with a race of that room saved here (else SEAT_HELD, below)
    ("join", "same_address"): (
        "someone from your address already races in that public room (one seat each): to"
        " race each other, one of you opens a private room (solrace create --private{server});"
        " if it is your own seat, from a window that closed, solrace resume takes it back"
    ),
    ("join", "wrong_phase"): (
        "that room takes no racers now (its race has started, or is over): watch it with "
        "solrace watch {code}{server}"
    ),
    ("watch", "unknown_room"): "no room has that code (or it has expired)",
    ("watch", "too_many_spectators"): (
        "that race has as many spectators as the server lets watch it: try again later"
    ),
    ("resume", "unknown_room"): "the saved race's room is gone (it has expired)",
    ("resume", "bad_token"): "you are no longer in the saved race ({message})",
}

#: ``join``'s ``same_address`` when this computer has no race of that room saved: with
#: no token there is nothing to resume. The seat may be the user's own all the same,
#: taken by a join whose ``joined`` reply a cut lost: the server holds it for its 30 s
#: disconnect grace, then frees it. (ENTRY_WORDS' "solrace resume takes it back" was
#: said of that seat too: a flaky-network audit.)
SEAT_HELD: Final = (
    "someone from your address already has a seat in that public room (one seat each): if"
    " it is yours, taken by a join whose reply was lost, it is held for up to 30 s — join"
    " again after that; to race each other, one of you opens a private room (solrace"
    " create --private{server})"
)


def saved_race_over(race: str | None, server: str = "") -> str:
    """A resume refused because the saved race is over (``resume``'s ``bad_token``,
    with the room past that race): where to see how it ended, not "watch it". ``race``
    None: the saved race does not name its round, and the room's latest race may not
    be it, so none is named. ``server``: the `` --server URL`` fetch needs, if any."""
    if race is None:
        return (
            "the saved race is over, and you were no longer in it (it was saved without "
            "its race id, so which of the room's races it was is not known)"
        )
    return (
        "the saved race is over, and you were no longer in it: see how it ended with "
        f"solrace fetch {race}{server}"
    )


class ConnectionLost(ConnectionError):
    """The connection went after the server was reached (a request's reply or the next
    event will not come); its text says why in words (:func:`closed_in_words`, else
    "connection closed"). Its own type, because ConnectionError is an OSError like the
    errors of a server never reached: ``rooms`` said "cannot reach …: the server is
    restarting — is solrace-server running?" of a node that closed 1001 ``draining``."""


class NoReply(TimeoutError):
    """A request's reply did not come within its timeout, on a connection that was up:
    the server was reached (the handshake answered), then said nothing in time. A
    TimeoutError still (a dropped link, to a Session), but not a connect timeout: the
    commands tell the two apart (:func:`no_reply`). Defined here, not in connection.py
    (which raises it, and names it too), so that :func:`lost_during` can tell it apart
    without an import cycle."""

    def __init__(self, request: str, seconds: float) -> None:
        super().__init__(f"no reply to {request} within {seconds:g} s")
        self.request = request


class BadServerURL(ValueError):
    """A ``--server``/``$SOLRACE_SERVER`` value that is not a WebSocket URL."""


def _websocket_form(url: str) -> str | None:
    """The WebSocket URL ``url`` plainly means, or None: ``host:port`` (what the server
    logs, without its ``ws://``) as ``ws://host:port``, ``http(s)://…`` as ``ws(s)://…``.
    The example alone named another port than the one typed."""
    scheme, sep, rest = url.partition("://")
    if sep:
        web = {"http": "ws", "https": "wss"}.get(scheme.lower())
        return None if web is None else f"{web}://{rest}"
    try:
        parts = urlsplit(f"ws://{url}")
        has_port = parts.port is not None
    except ValueError:
        return None
    return f"ws://{url}" if has_port and parts.hostname else None


def check_server_url(url: str) -> str:
    """``url`` if it is a ``ws://``/``wss://`` URL with a host and a valid port, else
    BadServerURL saying what is wrong (connecting would fail with a traceback). A
    character that is not printable (a control character, U+202E) is refused first:
    the URL was tried and then said as typed in "cannot reach …", "no open rooms on
    …", so its escape sequence reached the terminal."""
    example = f"e.g. ws://127.0.0.1:{DEFAULT_PORT}"
    try:
        utf8(url)  # its host and path are encoded to connect: a traceback there
    except BadText as exc:
        raise BadServerURL(f"bad server URL: {exc}") from None
    said = quoted(url)  # at most its start: a URL of 100 KB was said whole
    if not url.isprintable():  # a control character: the URL is said in many lines
        raise BadServerURL(f"bad server URL {said}: it holds a character that is not printable")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise BadServerURL(f"bad server URL {said}: {_lower(str(exc))} ({example})") from None
    try:
        port = parts.port
    except ValueError:  # urllib's words name a cast: say what is wrong with the port
        where = parts.netloc.rpartition("@")[2]
        bracketed = _bracketed(where)
        if bracketed is not None:  # urllib read "::1:8765" as host "" and port ":1:8765"
            scheme = "wss" if parts.scheme == "wss" else "ws"
            raise BadServerURL(
                f"bad server URL {said}: an IPv6 address goes in brackets "
                f"(e.g. {scheme}://{bracketed})"
            ) from None
        text = where.rpartition("]")[2].partition(":")[2]  # as urllib reads it
        why = f"port {as_typed([text])} is out of range (1 to 65535)"  # cut when long
        if not is_digits(text.removeprefix("-")):  # -1: a number, out of range
            why = f"its port {quoted(text)} is not a number"
        raise BadServerURL(f"bad server URL {said}: {why} ({example})") from None
    if parts.scheme not in ("ws", "wss") or "://" not in url:
        meant = _websocket_form(url)
        use = example if meant is None else f"use {meant}"
        raise BadServerURL(f"bad server URL {said}: it must start with ws:// or wss:// ({use})")
    if not parts.hostname:
        raise BadServerURL(f"bad server URL {said}: no host ({example})")
    after = _after_bracket(parts.netloc)
    if after:  # urllib drops it: ws://[::1]x:8765 was tried as ws://[::1]:8765
        raise BadServerURL(
            f"bad server URL {said}: {quoted(after)} follows the IPv6 address's closing "
            f"bracket, where only :PORT may (e.g. ws://[::1]:{DEFAULT_PORT})"
        )
    unnamed = not_a_host_name(parts.hostname)
    if unnamed is not None:
        raise BadServerURL(
            f"bad server URL {said}: {quoted(parts.hostname)} is not a host name ({unnamed}) "
            f"({example})"
        )
    if "@" in parts.netloc:  # websockets would refuse it later, as "cannot reach"
        raise BadServerURL(
            f"bad server URL {said}: a solrace server takes no user name ({example})"
        )
    if port == 0:
        raise BadServerURL(f"bad server URL {said}: port 0 is not a port to connect to")
    if urlsplit(url).fragment:  # websockets refuses it, said as "cannot reach" once tried
        raise BadServerURL(f"bad server URL {said}: a WebSocket URL takes no #fragment ({example})")
    return url


def _after_bracket(netloc: str) -> str:
    """What a URL's bracketed host is followed by other than ``:PORT`` (``x`` of
    ``[::1]x:8765``), else ``""``: urllib reads the host inside the brackets and the
    port after the last colon, and drops what lies between."""
    where = netloc.rpartition("@")[2]
    if not where.startswith("["):
        return ""
    rest = where.partition("]")[2]
    return rest.rpartition(":")[0] if ":" in rest else rest


def _bracketed(where: str) -> str | None:
    """A URL's host and port that are an IPv6 address without its brackets, bracketed
    (``::1:8765`` → ``[::1]:8765``; ``::1`` → ``[::1]:8765``); else None. Told as a
    port out of range — the 8765 of ``ws://::1:8765`` — the user blamed the port."""
    address, _, port = where.rpartition(":")
    if is_digits(port) and _is_ipv6(address):
        return f"[{address}]:{port}"
    return f"[{where}]:{DEFAULT_PORT}" if _is_ipv6(where) else None


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.partition("%")[0]).version == 6
    except ValueError:
        return False


#: Most URLs a "cannot reach" line names when several were tried; past it, the first
#: and how many more.
NAMED_SERVERS: Final = 3


def cannot_reach(urls: str | Sequence[str], exc: BaseException) -> str:
    """One line: why ``urls`` (one URL, or several tried in turn, ``exc`` the last
    one's failure) could not be reached, and what to do about it.

    Several were said as ``cannot reach ws://A, ws://B: unknown host 'A'``: the reason
    was worked out from the URLs joined, so it named the first host for the last one's
    failure, and nothing said how many had been tried. The reason is the last URL's,
    said as such."""
    if isinstance(urls, str):
        urls = [urls]
    reason = connect_reason(urls[-1], exc)
    urls = [url_shown(url) for url in urls]  # a 3,000-character path: cut
    *others, last = urls
    if not others:
        return f"cannot reach {last}: {reason}"
    if len(urls) <= NAMED_SERVERS:
        return f"cannot reach any of {len(urls)} servers ({', '.join(urls)}); the last: {reason}"
    return (
        f"cannot reach any of {len(urls)} servers ({urls[0]} and {len(others)} more); "
        f"the last, {last}: {reason}"
    )


def no_reply(url: str) -> str:
    """One line: ``url`` was reached — the WebSocket handshake answered — but the reply
    to the request did not come in time (connection.NoReply). Through a link that went
    silent after the handshake, ``rooms`` and ``fetch`` said "cannot reach …: no answer
    in time — is solrace-server running?" (a flaky-network audit): the server was
    running; it, or the network, was busy. A connect timeout keeps those words."""
    return (
        f"connected to {url_shown(url)}, but it did not answer in time (the server, or the "
        "network, is busy): try again"
    )


def lost_reason(exc: BaseException | None) -> str:
    """Why a connection that was up went away, in words. The bot said
    ``connection lost during create: ConnectionError('connection closed')`` and
    ``connection lost (TimeoutError); reconnecting`` (an audit through a flaky link):
    an exception's repr, or its bare name where its text is empty."""
    if exc is None:
        return CONNECTION_CLOSED
    if isinstance(exc, ConnectionClosed):
        return closed_in_words(exc.rcvd, exc.sent, exc.rcvd_then_sent) or CONNECTION_CLOSED
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or CONNECTION_CLOSED


#: websockets' close reason when a keepalive ping went unanswered (either side).
KEEPALIVE_TIMEOUT_REASON: Final = "keepalive ping timeout"

#: What a close frame from the server means to a user (docs/protocol.md §13), by code
#: and reason (a reason of None: any other reason of that code).
SERVER_CLOSES: Final[Mapping[tuple[int, str | None], str]] = {
    (CloseCode.NORMAL, CloseReason.REPLACED): "a newer connection of this racer took over",
    (CloseCode.GOING_AWAY, CloseReason.DRAINING): "the server is restarting",
    (CloseCode.GOING_AWAY, CloseReason.ROOM_GONE): "the server lost the room",
    (CloseCode.POLICY_VIOLATION, None): "too many requests",
    (CloseCode.INTERNAL_ERROR, KEEPALIVE_TIMEOUT_REASON): (
        "the server heard nothing from this client in time"
    ),
    (CloseCode.INTERNAL_ERROR, None): "the server failed",
}


def closed_in_words(
    rcvd: Close | None, sent: Close | None, rcvd_then_sent: bool | None
) -> str | None:
    """Why a WebSocket closed, in words, when a close frame says so: the server's
    (``rcvd`` first), or this client's keepalive giving up on a silent server; None
    when the connection just went (no frame) or this client closed it. A bot said
    "connection lost (received 1001 (going away) draining; then sent 1001 (going away)
    draining); reconnecting" when its node was drained (15 of 76 bots in a herd audit):
    websockets' own text."""
    if rcvd is not None and (sent is None or rcvd_then_sent is not False):
        said = SERVER_CLOSES.get((rcvd.code, rcvd.reason)) or SERVER_CLOSES.get((rcvd.code, None))
        if said is not None:
            return said
        # The server's own words, made printable: a hostile server's escape sequences
        # must not reach the terminal (client/printable.py).
        return f"closed by the server ({rcvd.code} {printable(rcvd.reason)})".replace(" )", ")")
    if sent is not None and sent.reason == KEEPALIVE_TIMEOUT_REASON:
        return "no answer from the server in time"
    return None


def lost_during(request: str, exc: BaseException, url: str | None = None) -> str:
    """The connection went before the reply to ``request`` came. The server was
    reached, so this is not "cannot reach … is solrace-server running?", which was said
    of a server that had just made the room (or taken the resume).

    A reply that never came on a connection still up (connection.NoReply) is no lost
    connection either: the bot and the UI said "connection lost during create (no
    answer in time)" of a server that had answered the handshake and then nothing (a
    stalled server, or a network gone silent). It is said as ``rooms`` and ``fetch``
    say it (:func:`no_reply`), naming ``url`` where the caller knows it."""
    if isinstance(exc, NoReply):
        where = "" if url is None else f" to {url_shown(url)}"
        return (
            f"connected{where}, but it did not answer the {request} in time (the server, "
            "or the network, is busy)"
        )
    return f"connection lost during {request} ({lost_reason(exc)})"


def entry_lost(request: str, exc: BaseException, url: str | None = None) -> str:
    """One line: the reply to ``request`` (``create``, ``join``, ``quick``,
    ``resume``, ``watch``) never came from ``url`` (:func:`lost_during`). A seat the
    server may have taken was resumed by its proposed token if it could be
    (Session.enter): said once that failed too, and the user tries again."""
    return f"{lost_during(request, exc, url)}: try again"


#: Closing advice to try again, as reasons end (longest first): said once a retry loop
#: has run out, it is advice already followed.
RETRY_ADVICE: Final = (": try again in a moment", ": try again")


#: How a reason's last clause ends when it is advice to try again after doing
#: something first ("…: wait 1 s, then try again", "…: close yours, then try again").
THEN_RETRY: Final = ", then try again"


def without_retry(reason: str) -> str:
    """``reason`` without its closing "try again" (:data:`RETRY_ADVICE`), or without
    its whole last clause when that is advice ending in one (:data:`THEN_RETRY`): a
    session that gave up on a node's connection limits said "wait 1 s, then try
    again" after 12 attempts that did."""
    for advice in RETRY_ADVICE:
        if reason.endswith(advice):
            return reason.removesuffix(advice)
    if reason.endswith(THEN_RETRY) and ": " in reason:
        return reason.rsplit(": ", 1)[0]
    return reason


def gave_up(attempts: int, url: str, why: str) -> str:
    """One sentence: a session's reconnect attempts ran out, ``why`` the last one (to
    ``url``) failed. A bot's last line read "could not reconnect after 12 attempts:
    cannot reach ws://…: the connection was closed … dropped it): try again" (a
    flaky-network audit): three clauses chained by colons, ending in advice it had
    just followed twelve times."""
    tries = "attempt" if attempts == 1 else "attempts"
    last = url_shown(url)
    return f"could not reconnect in {attempts} {tries}, the last to {last}: {without_retry(why)}"


#: The longest ``Retry-After`` a client waits out (a larger one is read as this): a
#: node asks for a few seconds (docs/protocol.md §1); a reconnect loop does not wait
#: for ever on a proxy's say-so.
MAX_RETRY_AFTER_S: Final = 60.0


def handshake_retry_after_s(exc: BaseException | None) -> float | None:
    """The seconds a handshake's refusal asks the client to wait before it tries again
    (its ``Retry-After``, in seconds, at most :data:`MAX_RETRY_AFTER_S`), or None: no
    refusal, or none that says (an HTTP date is not read)."""
    if not isinstance(exc, InvalidStatus):
        return None
    value = exc.response.headers.get("Retry-After", "").strip()
    if not is_digits(value):
        return None
    return min(float(value), MAX_RETRY_AFTER_S)


def _no_port_hint(url: str) -> str | None:
    """For a URL without a port, where it connected and where a server listens: a
    newcomer's ``ws://127.0.0.1`` went to port 80 and was told only "is solrace-server
    running?", while the server ran on 8765."""
    parts = urlsplit(url)
    if parts.port is not None:
        return None
    # solrace-server speaks plain ws:// (TLS is a proxy's, docs/deploy.md): a wss://
    # URL without a port meant the proxy's 443, and no proxy answered there.
    default = 443 if parts.scheme == "wss" else 80
    # A port left off after its colon (``ws://127.0.0.1:``) is no port to urllib, and
    # the netloc keeps the colon: the hint said ``ws://127.0.0.1::8765`` (an audit).
    direct = f"ws://{parts.netloc.removesuffix(':')}:{DEFAULT_PORT}"
    if parts.scheme == "wss":
        return (
            f"the URL names no port, so port {default} was tried and no TLS proxy answered"
            f" there; solrace-server itself speaks plain ws:// on {DEFAULT_PORT} unless told"
            f" otherwise ({direct})"
        )
    return (
        f"the URL names no port, so port {default} was tried; solrace-server listens on "
        f"{DEFAULT_PORT} unless told otherwise ({direct})"
    )


def _closed_unanswered(url: str) -> str:
    """A connection closed before any answer: the network's doing — unless the URL
    names Redis's port, which closes a WebSocket handshake unanswered every time (a
    newcomer's ``--server ws://127.0.0.1:6379``, the port of the README's
    ``--redis-url``, was told to try again)."""
    parts = urlsplit(url)
    if parts.scheme != "ws" or parts.port != REDIS_DEFAULT_PORT:
        return CLOSED_UNANSWERED
    host = parts.netloc.rpartition(":")[0]  # as written: an IPv6 address keeps its brackets
    return (
        f"the connection was closed unanswered, as Redis closes one — port "
        f"{REDIS_DEFAULT_PORT} is Redis's; solrace-server listens on {DEFAULT_PORT} unless "
        f"told otherwise (ws://{host}:{DEFAULT_PORT}), and the Redis URL is the server's "
        "(solrace-server --redis-url)"
    )


def start_hint(url: str) -> str:
    """:data:`START_HINT`, naming the URL's port where it is not the server's default:
    plain ``solrace-server`` listens on 8765, so "start one with: solrace-server" sent a
    user of ``ws://127.0.0.1:18720`` to start a server it still could not reach (a
    newcomer's audit)."""
    try:
        port = urlsplit(url).port
    except ValueError:
        port = None
    if port is None or port == DEFAULT_PORT:
        return START_HINT
    return _start_words(f"solrace-server --port {port}")


def connect_reason(url: str, exc: BaseException) -> str:
    host = urlsplit(url).hostname or url
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        body = bytes(exc.response.body or b"").decode(errors="replace").strip()
        if ErrorCode.UNSUPPORTED_VERSION.value in body:
            return f"the server does not speak this client's protocol ({body})"
        if body.startswith(ErrorCode.SERVER_FULL.value):
            return "the server is full (it holds as many connections as it may): try again later"
        if body.startswith(ErrorCode.TOO_MANY_CONNECTIONS.value):
            # One address may be many people's (a NAT, a proxy the node does not
            # trust): "close other solrace windows" was wrong for them.
            return (
                "too many connections from your address to this server (yours, and those "
                "of anyone sharing your address: one network, one proxy): close yours, "
                "then try again"
            )
        if body.startswith(ErrorCode.CONNECTING_TOO_FAST.value):
            wait = handshake_retry_after_s(exc)
            when = "a moment" if wait is None else f"{wait:g} s"
            return (
                "too many new connections from your address to this server in a short "
                f"time: wait {when}, then try again"
            )
        if status == 400 and NGINX_TLS_PORT in body:
            return "that port takes TLS only (HTTPS): use wss:// instead of ws://"
        if status == 426:
            # This client always asks for the upgrade: a 426 means someone between
            # dropped it — a proxy that does not pass the headers (an operator audit:
            # "is that the right port?" sent the operator to check the port, which was
            # right).
            return (
                "it answered HTTP 426 Upgrade Required: a WebSocket server is there, but "
                "the Upgrade and Connection headers of this client's handshake did not "
                "reach it — a proxy in front of it that does not pass them? (tell the "
                "server's operator)"
            )
        parts = urlsplit(url)
        # The port is right, if a solrace node's probe answered: "is that the right
        # port?" misled. Any HTTP server's /healthz was taken for one (a review: a 404
        # told "use ws://host:port", the wrong port); the node's health answer carries
        # its durability header, its metrics their solrace_ names.
        probe = "Solrace-Durability" in exc.response.headers or "solrace_" in body
        if parts.path in PROBE_PATHS and probe:
            root = f"{parts.scheme}://{parts.netloc}"
            return f"{parts.path} is the node's HTTP probe, not its WebSocket: use {root}"
        return f"it answered HTTP {status}, not as a solrace server — is that the right port?"
    if isinstance(exc, InvalidMessage) and isinstance(exc.__cause__, EOFError):
        return _closed_unanswered(url)  # through a flaky link it was "is that the right port?"
    if isinstance(exc, InvalidMessage):
        return "it does not answer as a WebSocket server — is that the right port?"
    if isinstance(exc, InvalidURI):
        return redirected(exc) or f"bad server URL ({exc})"
    if isinstance(exc, InvalidHandshake):
        return f"the WebSocket handshake failed ({exc or type(exc).__name__})"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused — {_no_port_hint(url) or start_hint(url)}"
    if isinstance(exc, socket.gaierror):
        return f"unknown host {host!r}"
    if isinstance(exc, TimeoutError):
        return f"no answer in time — {start_hint(url)}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return certificate_refused(host, exc)
    if isinstance(exc, ssl.SSLError) or (
        isinstance(exc, ConnectionResetError) and url.startswith("wss:")
    ):
        return (
            "the TLS handshake failed — a solrace-server speaks plain ws:// unless a proxy "
            "adds TLS; try ws://"
        )
    if isinstance(exc, ConnectionResetError):  # ws:// (wss:// is the TLS hint above)
        return _closed_unanswered(url)  # asyncio's said "Connect call failed ('…', 8765)"
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc or type(exc).__name__} — {start_hint(url)}"
    return str(exc) or type(exc).__name__


#: OpenSSL's verify codes (X509_V_ERR_…) for a chain that ends in no CA this machine
#: trusts — self-signed (18, 19), or an issuer it does not know (2, 20, 21): the only
#: refusals trusting the certificate's file with SSL_CERT_FILE mends.
UNTRUSTED_ISSUER_CODES: Final = frozenset({2, 18, 19, 20, 21})
#: Verify codes for a certificate not made out to the host connected to.
WRONG_HOST_CODES: Final = frozenset({62, 64})
#: What the reason for an untrusted certificate tells the user to do; the same
#: variable as docs/client.md ("TLS") and deploy/README.md document.
TRUST_HINT: Final = (
    "to trust it, run with SSL_CERT_FILE=/path/to/its-ca.pem (its certificate, or its CA's, in PEM)"
)


def certificate_refused(host: str, exc: ssl.SSLCertVerificationError) -> str:
    """Why this machine refused the server's TLS certificate, and the fix that fits.

    A refusal is not a server speaking plain ws:// (that advice sent a user of a
    self-signed proxy to a port that answers HTTP 400): the TLS is fine, the trust is
    missing. Only a missing issuer is mended by trusting the file; a certificate for
    another name, or an expired one, is not, so they are told apart."""
    why = str(exc.verify_message or exc.reason or "certificate verify failed")
    if exc.verify_code in UNTRUSTED_ISSUER_CODES:
        return f"{host} sent a TLS certificate this machine does not trust ({why}): {TRUST_HINT}"
    if exc.verify_code in WRONG_HOST_CODES:
        return (
            f"{host} sent a TLS certificate made out to another name ({why}): connect "
            "with a name the certificate holds"
        )
    return f"this machine refused {host}'s TLS certificate ({why})"


def redirected(exc: InvalidURI) -> str | None:
    """Why a redirect could not be followed, when ``exc`` comes from one, else None.

    The user's URL was checked before connecting (:func:`check_server_url`), so an
    InvalidURI after an HTTP 3xx is the server's ``Location``: nginx's port 80 answers
    ``301 https://HOST/``. Calling that a "bad server URL" blamed the user's typing;
    the fix is the WebSocket form of where it points (https → wss, http → ws)."""
    answer = exc.__context__  # websockets parses the Location while handling the 3xx
    if not (isinstance(answer, InvalidStatus) and 300 <= answer.response.status_code < 400):
        return None
    scheme, sep, rest = exc.uri.partition("://")
    web = {"https": "wss", "http": "ws"}.get(scheme.lower()) if sep else None
    if web is None:
        return f"the server redirects to {exc.uri}, which is not a WebSocket server URL"
    return f"the server redirects to {exc.uri}: use {web}://{rest}"


def refusal(
    code: str,
    message: str,
    field: Any = None,
    request: str | None = None,
    room_code: str | None = None,
    *,
    saved: bool = False,
    server: str = "",
) -> str:
    """A server's ``error`` reply in words: no field paths, no protocol codes.
    ``request`` (``join``, ``resume``…) lets a refusal to enter a room say why, with
    the ``room_code`` the user gave where the words name it. ``saved``: this computer
    has a race of that room saved (a token ``solrace resume`` can take it back with).
    ``server``: the `` --server URL`` a command the words suggest needs (else empty)."""
    if code == "bad_message":
        return _field_in_words(message)
    if (request, code) == ("join", "same_address") and not saved:
        return SEAT_HELD.format(server=server)
    if request is not None and (request, code) in ENTRY_WORDS:
        words = ENTRY_WORDS[request, code]
        return words.format(code=room_code or "CODE", message=message, server=server)
    if code == "unavailable":
        return "the server is busy (its store is down): try again in a moment"
    return message


def refusal_of(
    data: Mapping[str, Any],
    request: str | None = None,
    room_code: str | None = None,
    *,
    saved: bool = False,
    server: str = "",
) -> str:
    """:func:`refusal` of an ``error`` reply's data (a ServerError's ``data``)."""
    code, message = str(data.get("code")), str(data.get("message"))
    field = data.get("field")
    return refusal(code, message, field, request, room_code, saved=saved, server=server)


_PATH = re.compile(r"^[a-z_]+\.(?P<path>[a-z0-9_.]+): ")


def _field_in_words(message: str) -> str:
    """``create.max_racers: must be an integer in 2..8, got 9`` → ``most racers
    (--racers): must be an integer in 2..8, got 9``."""
    match = _PATH.match(message)
    if match is None:
        return message
    path = match.group("path")
    head, _, rest = path.partition(".")
    if head == "options" and rest:
        words = f"option {rest} (--option {rest}=…)"
    else:
        words = FIELD_WORDS.get(head, head.replace("_", " "))
    return f"{words}: {message[match.end() :]}"


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]
