"""Subprotocol negotiation: which protocol version a connection speaks.

The version is chosen once, at the WebSocket handshake (``Sec-WebSocket-Protocol``),
rather than carried in every frame: a server can then run ``solrace.v1`` and a future
``solrace.v2`` side by side, and a client that speaks neither is refused before it
costs a connection. This module is the pure decision; ``net/`` wires it into
websockets' ``select_subprotocol`` hook and turns :class:`UnsupportedVersion` into
websockets' ``NegotiationError`` (an HTTP 400 whose body is the error's message).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Final

from .errors import UnsupportedVersion
from .limits import SUPPORTED_SUBPROTOCOLS

#: The node's plain-HTTP probes on its own port (docs/server.md, "HTTP on the same
#: port"): every other path of that port is its WebSocket. A client given one of these
#: as its server URL says so, rather than "is that the right port?" (it is).
HEALTHZ_PATH: Final = "/healthz"
METRICS_PATH: Final = "/metrics"
PROBE_PATHS: Final = (HEALTHZ_PATH, METRICS_PATH)

#: The handshake response header in which a server tells each connection its rate
#: limit (docs/protocol.md §1): ``<rate_per_s> <burst>``, e.g. ``20 40``. A client
#: paces inside it; an operator who lowered the limit (``--rate-per-s 2``) otherwise
#: made every client that paced to the default be closed 1008 ``rate_limited`` and
#: reconnect in a loop (a newcomer audit). Older servers send none: a client then
#: paces to the default limit, as before.
RATE_LIMIT_HEADER: Final = "Solrace-Rate-Limit"
#: Longest :data:`RATE_LIMIT_HEADER` value a client reads (two numbers, a space): a
#: longer one is malformed, not parsed.
RATE_LIMIT_HEADER_MAX_CHARS: Final = 64


def format_rate_limit(rate_per_s: float, burst: float) -> str:
    """The :data:`RATE_LIMIT_HEADER` value for a limit of ``rate_per_s`` messages a
    second, bursts of ``burst``: each the shortest text that reads back as the same
    float (``20``, ``0.5``, ``19.9999999``). Six digits (``:g``) announced a limit of
    19.9999999 as 20, and a client pacing to that ran over it."""
    return f"{exact_number(rate_per_s)} {exact_number(burst)}"


def exact_number(number: float) -> str:
    """The shortest text that reads back as the same float, without a trailing
    ``.0``: how the header and a node's log lines say a limit (``:g`` rounds to six
    digits, and a log saying 20 of a node limiting at 19.9999999 misled its operator)."""
    text = repr(float(number))
    return text.removesuffix(".0")


def parse_rate_limit(value: str) -> tuple[float, float] | None:
    """The ``(rate_per_s, burst)`` a :data:`RATE_LIMIT_HEADER` value says, or None when
    it is malformed: not two finite numbers, a rate that is not above 0, a burst below
    1 (no server runs such a limit) or over :data:`RATE_LIMIT_HEADER_MAX_CHARS`. Never
    raises: a header is whatever the peer sent, and a client ignores one it cannot
    read rather than fail to connect."""
    if len(value) > RATE_LIMIT_HEADER_MAX_CHARS:
        return None
    fields = value.split()
    if len(fields) != 2:
        return None
    try:
        rate, burst = float(fields[0]), float(fields[1])
    except ValueError:
        return None
    if not (math.isfinite(rate) and math.isfinite(burst)) or rate <= 0 or burst < 1:
        return None
    return rate, burst


def parse_subprotocol_header(values: Iterable[str]) -> list[str]:
    """The subprotocols offered in one or more ``Sec-WebSocket-Protocol`` header values
    (comma-separated tokens, RFC 6455 §11.3.4), in the client's order."""
    offered: list[str] = []
    for value in values:
        offered.extend(token.strip() for token in value.split(",") if token.strip())
    return offered


def select_subprotocol(
    offered: Sequence[str], supported: Sequence[str] = SUPPORTED_SUBPROTOCOLS
) -> str:
    """The server's most preferred version among those the client ``offered``.

    Raises :class:`UnsupportedVersion` — whose message names the supported versions, so
    whoever reads the HTTP 400 body knows what to offer — when there is none, including
    when the client offered nothing at all.
    """
    for version in supported:
        if version in offered:
            return version
    wanted = ", ".join(supported)
    if not offered:
        raise UnsupportedVersion(
            f"unsupported_version: no subprotocol offered; this server speaks {wanted} "
            "(send it in Sec-WebSocket-Protocol)"
        )
    shown = ", ".join(o[:32] for o in offered[:8])
    raise UnsupportedVersion(f"unsupported_version: offered {shown}; this server speaks {wanted}")
