"""A node's race clock: Unix milliseconds that never step.

Every race decision a node makes reads its clock: a move's time, the start, the time
limit, a racer's grace. It read the system's wall clock, which steps when it is set
(by hand, or by an NTP client told to step): a step of +10 minutes ended every race on
the node at its next move ("the time limit has passed"), a step back put a racer's
log out of time order, and nothing said why. :class:`SteadyClock` reads the wall clock
once, at the node's start, and counts on from it with ``CLOCK_MONOTONIC`` — which NTP
slews like the wall clock but never steps — so a node's races run on one unbroken
clock until the node restarts.

When the wall clock and the node's clock come more than :data:`APART_MS` apart (a
step, or a drift NTP should have slewed away), one warning says by how much, once per
episode; the difference itself is exported (``solrace_clock_offset_seconds``,
``/healthz``'s ``clock_offset_ms``: docs/deploy.md, "Clocks"). The node keeps its own
time: its races in progress rely on it, and a restart (after a drain) takes the
wall clock's new time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("solrace.clock")

#: The wall clock and a node's clock this far apart (ms) is a step, warned about once:
#: NTP's slewing keeps them within milliseconds, and nodes' clocks must agree well
#: within a second (docs/deploy.md, "Clocks").
APART_MS = 1000
#: An episode ends when they are back within this (ms): half the limit, so a wall
#: clock hovering at the limit is one warning, not a warning at every reading.
TOGETHER_MS = APART_MS // 2


def wall_ms() -> int:
    """The system's wall clock (Unix ms), which steps whenever it is set."""
    return time.time_ns() // 1_000_000


def offset_ms(clock: Callable[[], int]) -> int:
    """The wall clock minus ``clock``, now: what a node's gauge and /healthz show (a
    test's injected clock has one too)."""
    now = clock()
    return wall_ms() - now


class SteadyClock:
    """Unix milliseconds: the wall clock read at construction, plus the monotonic
    time elapsed since. Callable: a node's ``clock``."""

    def __init__(self) -> None:
        self._origin_ms = wall_ms()
        self._origin_ns = time.monotonic_ns()
        #: Whether the wall clock is apart from this one now (an episode is on).
        self._apart = False

    def __call__(self) -> int:
        now = self._origin_ms + (time.monotonic_ns() - self._origin_ns) // 1_000_000
        self._watch(wall_ms() - now)
        return now

    def _watch(self, offset_ms: int) -> None:
        """Say once when the wall clock comes apart from this one, and once when it
        agrees again (a new step after that is a new warning)."""
        if not self._apart and abs(offset_ms) > APART_MS:
            self._apart = True
            log.warning(
                "the system clock stepped by %+.1f s; this node keeps its own time until"
                " restarted: races in progress are not affected",
                offset_ms / 1000,
            )
        elif self._apart and abs(offset_ms) <= TOGETHER_MS:
            self._apart = False
            log.info(
                "the system clock agrees with this node's again (%+.1f s apart)",
                offset_ms / 1000,
            )
