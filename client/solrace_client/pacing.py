"""Client-side pacing: never send faster than a server's rate limit allows.

A server closes a connection that sends more than 20 messages/s sustained (bursts of
40) with 1008 ``rate_limited`` (docs/protocol.md §14). A program that plays as fast
as it can — a bot, a script like docs/examples/two_racers.py — would trip that in
seconds, so :class:`~solrace_client.connection.RaceClient` waits before each request
instead. It keeps well inside the server's bucket (90 % of its rate, half its burst):
frames sent on time can still arrive bunched after network jitter, and the slack
absorbs that. Humans never notice; a bot plays at 18 moves/s.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

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
