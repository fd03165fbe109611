"""Client-side pacing: never send faster than a server's rate limit allows.

A server closes a connection that sends more than 20 messages/s sustained (bursts of
40) with 1008 ``rate_limited`` (docs/protocol.md §14). A program that plays as fast
as it can — a bot, a script like docs/examples/two_racers.py — would trip that in
seconds, so :class:`~solrace_client.connection.RaceClient` waits before each request
instead. It keeps well inside the server's bucket (90 % of its rate, half its burst):
frames sent on time can still arrive bunched after network jitter, and the slack
absorbs that. Humans never notice; a bot plays at 18 moves/s.

An operator may lower the limit (``solrace-server --rate-per-s``): a server says its
own in the handshake (``Solrace-Rate-Limit``, docs/protocol.md §1), and the client
paces inside whichever is stricter, that or the default (:func:`pace_for`). Without
it, a lowered limit closed every client, which reconnected in a loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from solrace.protocol.limits import RATE_BURST, RATE_PER_S, TokenBucket


@dataclass(frozen=True)
class Pace:
    """At most ``rate_per_s`` requests per second after a burst of ``burst``."""

    rate_per_s: float
    burst: float

    @classmethod
    def within(cls, rate_per_s: float, burst: float) -> Pace:
        """A pace safely inside a server limit of ``rate_per_s`` (bursts of ``burst``)."""
        return cls(rate_per_s * 0.9, max(1.0, burst / 2))


#: Inside the limit every solrace-server applies unless configured otherwise.
SERVER_DEFAULT_PACE = Pace.within(RATE_PER_S, RATE_BURST)

#: The slowest pace a server's advertised limit brings a client down to: one request
#: every 10 s. No race can be played slower (a move every 10 s), so a lower figure is
#: taken for a mistake or a hostile server's, whose 1e-300/s kept a request waiting
#: for ever rather than being sent, and closed for it if the server meant it.
MIN_PACE_PER_S: Final = 0.1


def pace_for(advertised: tuple[float, float] | None, pace: Pace) -> Pace:
    """The pace to keep on a server that ``advertised`` its limit as ``(rate_per_s,
    burst)`` (None: it said nothing, as servers before the header): ``pace``, or a pace
    inside the advertised limit when that is stricter (rate and burst apart), never
    slower than :data:`MIN_PACE_PER_S` unless ``pace`` is. A limit higher than the
    default changes nothing: the default is what was chosen, and this library never
    paces faster than that unasked (``connect(pace=...)``)."""
    if advertised is None:
        return pace
    inside = Pace.within(*advertised)
    rate = min(pace.rate_per_s, max(inside.rate_per_s, MIN_PACE_PER_S))
    return Pace(rate, min(pace.burst, inside.burst))


class Pacer:
    """Waits, when needed, so that requests leave at the given pace (one token each)."""

    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        loop = asyncio.get_running_loop()
        self._bucket = TokenBucket(loop.time(), pace.rate_per_s, pace.burst)
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        """Return once one more request may be sent (takes its token)."""
        loop = asyncio.get_running_loop()
        async with self._lock:  # first come, first served
            while not self._bucket.take(loop.time()):
                missing = 1.0 - self._bucket.tokens(loop.time())
                await asyncio.sleep(max(missing, 0.0) / self.pace.rate_per_s + 0.001)
