"""The event loop's own stalls, for the connections' rate limits.

A session counts the time it spends on a connection's own request as time the client's
frames queue (TokenBucket.busy/idle). When the whole event loop stalls — the process
starved of CPU, a long collection, a burst of work — a session waiting for a frame does
not notice: the frames sent meanwhile arrive together when the loop runs again, and
were counted as a burst (after the audit's replays stalled a node, 60 connections
sending a legal 18 frames/s were closed 1008 at once). A timer that runs every
STALL_TICK_S sees how late it ran: a lateness past STALL_MIN_S is a stall, and every
session counts it as busy time before it reads its next frame.
"""

from __future__ import annotations

import asyncio
from typing import Final

#: How often the loop's lateness is measured.
STALL_TICK_S: Final = 0.1
#: Lateness below this is ordinary scheduling jitter, not a stall.
STALL_MIN_S: Final = 0.25


class LoopStalls:
    """The last stall of this event loop: ``last`` = (start, end), loop time."""

    def __init__(self) -> None:
        self.last = (0.0, 0.0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self._loop.time() + STALL_TICK_S
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        # A plain timer callback, not a task: it runs in the first turn of the loop
        # after a stall, before the sessions woken by the frames that arrived in it.
        assert self._loop is not None
        now = self._loop.time()
        if now - self._due >= STALL_MIN_S:
            self.last = (self._due, now)
        self._schedule()


__all__ = ["STALL_MIN_S", "STALL_TICK_S", "LoopStalls"]
