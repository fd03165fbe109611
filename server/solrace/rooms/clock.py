"""A node's race clock: Unix milliseconds that never step, and that every node sharing
a store agrees on.

Every race decision a node makes reads its clock: a move's time, the start, the time
limit, a racer's grace. It read the system's wall clock, which steps when it is set
(by hand, or by an NTP client told to step): a step of +10 minutes ended every race on
the node at its next move ("the time limit has passed"), a step back put a racer's
log out of time order, and nothing said why. :class:`SteadyClock` reads a clock once,
at the node's start, and counts on from it with ``CLOCK_MONOTONIC`` — which NTP slews
like the wall clock but never steps — so a node's races run on one unbroken clock.

Nodes share rooms, and a room's timed decisions were made by the first node whose
clock said they were due: the fastest clock among its nodes. Machines whose clocks
were 2 s apart gave every racer of a room a 1 s countdown, or ended its race 2 s early
(an audit, docs/deploy.md "Clocks"). So the clock a node starts from is the **store's**
(Redis's ``TIME``, one server for every node: :meth:`solrace.store.Store.time_ms`),
sampled before the node serves (:meth:`SteadyClock.anchor`), and the node keeps
sampling it and **slews** toward it (:meth:`SteadyClock.steer`, at most
:data:`SLEW_MS_PER_S`): never a step, never backwards, and every node moves toward the
same reference at the same rate. The machine's own clock then only has to be roughly
right (the offset below says how far it is).

When the wall clock and the node's clock come more than :data:`APART_MS` apart (a
step, a machine without NTP), one warning says by how much, once per episode; the
difference itself is exported (``solrace_clock_offset_seconds``, ``/healthz``'s
``clock_offset_ms``: docs/deploy.md, "Clocks"); the same for the store's clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

log = logging.getLogger("solrace.clock")

#: The wall clock (or the store's) and a node's clock this far apart (ms) is warned
#: about once: NTP's slewing keeps a machine's clock within milliseconds of true time,
#: and a node's clock follows the store's within a few (docs/deploy.md, "Clocks").
APART_MS = 1000
#: An episode ends when they are back within this (ms): half the limit, so a wall
#: clock hovering at the limit is one warning, not a warning at every reading.
TOGETHER_MS = APART_MS // 2
#: How fast a node's clock is steered toward the store's: 5 ms a second (0.5 %), so a
#: 60 s race lasts between 59.7 and 60.3 s while a node catches up. Enough for what a
#: running node meets (a monotonic clock's drift, some ppm; a Redis failover to a
#: machine whose clock is 100 ms apart: 20 s), slow enough that no racer notices.
SLEW_MS_PER_S = 5
#: A sample of the store's clock is trusted to within half its round trip; one that
#: took longer than this (a loaded node, a slow network) is not used...
SAMPLE_RTT_MAX_MS = 100
#: ... unless the node is that far from its Redis: a sample whose round trip is within
#: this factor of the shortest of the node's last RTT_WINDOW samples (once it has
#: taken FAR_SAMPLES_NEEDED) is as good as the node gets, and is used. A node 120 ms
#: away dropped every sample and ran on its machine's clock, unsaid; a stall's sample,
#: slower than the node's recent ones, is still dropped.
FAR_SAMPLE_SLACK = 1.25
FAR_SAMPLES_NEEDED = 3
RTT_WINDOW = 12


def sample_usable(rtt_ms: float, recent_ms: Sequence[float]) -> bool:
    """Whether a sample of the store's clock whose round trip took ``rtt_ms`` is used,
    given the round trips of the node's recent samples (``recent_ms``, this one
    included): a fast one always; a slow one only when the node's samples are all
    about that slow (a Redis far away), never when it is slower than they are."""
    if rtt_ms <= SAMPLE_RTT_MAX_MS:
        return True
    return len(recent_ms) >= FAR_SAMPLES_NEEDED and rtt_ms <= FAR_SAMPLE_SLACK * min(recent_ms)


def wall_ms() -> int:
    """The system's wall clock (Unix ms), which steps whenever it is set."""
    return time.time_ns() // 1_000_000


def offset_ms(clock: Callable[[], int]) -> int:
    """The machine's wall clock minus ``clock``, now: what a node's gauge and /healthz
    show (a test's injected clock has one too)."""
    now = clock()
    wall: Callable[[], int] = getattr(clock, "wall", wall_ms)
    return wall() - now


def store_offset_ms(clock: Callable[[], int]) -> int | None:
    """The store's clock minus ``clock`` at its last sample: what the node has left
    to slew (None: not sampled yet, or a test's injected clock, which is not steered)."""
    offset: int | None = getattr(clock, "store_offset_ms", None)
    return offset


class SteadyClock:
    """Unix milliseconds: a clock read at construction (the wall clock, until
    :meth:`anchor` sets it to the store's), plus the monotonic time elapsed since,
    plus the corrections :meth:`steer` slews in. Callable: a node's ``clock``.

    ``wall`` is the machine's clock (a test gives a machine whose clock is off)."""

    def __init__(self, wall: Callable[[], int] = wall_ms) -> None:
        self.wall = wall
        self._origin_ms = wall()
        self._origin_ns = time.monotonic_ns()
        #: Corrections slewed in so far, and what is left to slew (ns: whole numbers,
        #: so a reading is one floor of one sum, and never goes back).
        self._slewed_ns = 0
        self._to_slew_ns = 0
        self._slewed_at_ns = self._origin_ns
        #: Whether the clock was set to the store's (:meth:`anchor`).
        self.anchored = False
        #: The store's clock minus this one at the last sample (None: none yet).
        self.store_offset_ms: int | None = None
        #: Whether the wall clock, and the store's, are apart from this one now.
        self._apart = False
        self._store_apart = False

    def __call__(self) -> int:
        now_ns = time.monotonic_ns()
        if self._to_slew_ns:
            # At most SLEW_MS_PER_S for each second since the last reading: the
            # reading still grows (by at least 99.5 % of the time elapsed).
            most = (now_ns - self._slewed_at_ns) * SLEW_MS_PER_S // 1000
            step = max(-most, min(most, self._to_slew_ns))
            self._slewed_ns += step
            self._to_slew_ns -= step
            self._slewed_at_ns = now_ns
        now = self._origin_ms + (now_ns - self._origin_ns + self._slewed_ns) // 1_000_000
        self._watch(self.wall() - now)
        return now

    def anchor(self, offset_ms: int) -> None:
        """Set the clock ``offset_ms`` ahead (the store's clock minus this one, just
        sampled): a step, which only a node that serves no room yet may take (it moves
        what it read from the clock before by as much)."""
        self._origin_ms += offset_ms
        self._to_slew_ns = 0
        self.anchored = True
        self.store_offset_ms = 0

    def steer(self, offset_ms: int) -> None:
        """Slew toward the store's clock, ``offset_ms`` ahead of this one (just
        sampled), at :data:`SLEW_MS_PER_S`. The sample includes what was slewed so
        far: it replaces what was left of the last one."""
        self()  # what is due from the last correction is slewed in first
        self._to_slew_ns = offset_ms * 1_000_000
        self._slewed_at_ns = time.monotonic_ns()
        self.store_offset_ms = offset_ms
        if not self._store_apart and abs(offset_ms) > APART_MS:
            self._store_apart = True
            log.warning(
                "this node's race clock is %+.1f s from the store's; slewing toward it,"
                " %d ms a second",
                -offset_ms / 1000,
                SLEW_MS_PER_S,
            )
        elif self._store_apart and abs(offset_ms) <= TOGETHER_MS:
            self._store_apart = False
            log.info(
                "this node's race clock agrees with the store's again (%+.1f s apart)",
                -offset_ms / 1000,
            )

    def _watch(self, offset_ms: int) -> None:
        """Say once when the wall clock comes apart from this one, and once when it
        agrees again (a new step after that is a new warning)."""
        if not self._apart and abs(offset_ms) > APART_MS:
            self._apart = True
            log.warning(
                "the system clock is %+.1f s from this node's race clock; races in"
                " progress are not affected (check NTP on this machine)",
                offset_ms / 1000,
            )
        elif self._apart and abs(offset_ms) <= TOGETHER_MS:
            self._apart = False
            log.info(
                "the system clock agrees with this node's again (%+.1f s apart)",
                offset_ms / 1000,
            )
