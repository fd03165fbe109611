"""The counters the room core keeps, as an interface.

The core counts moves, refusals, retries, races, lost writes and defects; where the counts go is
the adapter's business (Prometheus in ``solrace.net.metrics``). :class:`Tally` keeps
them in plain numbers, so a node built without a server (unit tests, tools) still
counts and can be asked.
"""

from __future__ import annotations

import math
import random
from collections import Counter as _Bag
from enum import StrEnum
from typing import Final, Protocol

from solrace.protocol import ErrorCode


class Defect(StrEnum):
    """Where an unexpected error (a defect) was caught: the ``where`` label of
    ``solrace_defects_total``. Each is logged with its traceback and survived (the
    request answered ``internal``, the tick retried, a node loop run again)."""

    REQUEST = "request"  # a request, answered ``internal``
    TICK = "tick"  # a room's clock decision, retried (Node.tick)
    TAIL = "tail"  # the tail of other nodes' events, read again (Node._tail_loop)
    WATCH = "watch"  # the lease and room checks, run again (Node._watch_loop, _check_loop)
    WAKE = "wake"  # the wake-ups from other nodes, read again (Node._wake_loop)
    SWEEP = "sweep"  # the orphan sweep, or one room of it (Node._sweep_loop)
    TASK = "task"  # a background task of the node (Node.spawn)


#: The ``reason`` labels of ``solrace_moves_refused_total``: the codes a move is refused
#: with. Each is exported from a node's start (at 0), so a rate or an alert on one
#: has a series before the first refusal of its kind.
MOVE_REFUSALS: Final = (
    ErrorCode.WRONG_PHASE,
    ErrorCode.BAD_SEQ,
    ErrorCode.MOVE_LIMIT,
    ErrorCode.ILLEGAL_MOVE,
    ErrorCode.BAD_NOTATION,
    ErrorCode.UNAVAILABLE,
)


#: The ``code`` labels of ``solrace_requests_refused_total``: every code a request is
#: answered ``error`` with (the others close the connection or refuse a handshake).
REQUEST_REFUSALS: Final = tuple(
    code
    for code in ErrorCode
    if code
    not in (
        ErrorCode.BAD_FRAME,
        ErrorCode.TOO_LARGE,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.SERVER_FULL,
        ErrorCode.TOO_MANY_CONNECTIONS,
        ErrorCode.CONNECTING_TOO_FAST,
    )
)


class Count(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class LabelledCount(Protocol):
    def labels(self, *values: str) -> Count: ...


class Observations(Protocol):
    def observe(self, amount: float) -> None: ...


class RoomMetrics(Protocol):
    """What the room core records (names as in docs/server.md, "Metrics")."""

    @property
    def races_started(self) -> Count: ...

    @property
    def moves_accepted(self) -> Count: ...

    @property
    def moves_refused(self) -> LabelledCount: ...

    @property
    def requests_refused(self) -> LabelledCount: ...

    @property
    def moves_retried(self) -> Count: ...

    @property
    def finishes_floored(self) -> Count: ...

    @property
    def finishes_unreplicated(self) -> Count: ...

    @property
    def move_latency(self) -> Observations: ...

    @property
    def lost_writes(self) -> Count: ...

    @property
    def defects(self) -> LabelledCount: ...


class _Number:
    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class _ByLabel:
    def __init__(self) -> None:
        self.values: dict[tuple[str, ...], _Number] = {}

    def labels(self, *values: str) -> _Number:
        return self.values.setdefault(values, _Number())


#: How many observations :class:`_Samples` keeps: enough for a median and a 99th
#: percentile to within a few per cent, 8 KB of floats however long the node runs.
RESERVOIR_SIZE: Final = 1024


class _Samples:
    """Observations as their exact count, sum and maximum, and a uniform sample of at
    most :data:`RESERVOIR_SIZE` of them (Vitter's algorithm L: one random draw per
    replacement, none per observation — the core bench counts this in the
    instructions of a move). It kept every observation before: a long bench's node
    grew by a float a move, for as long as it ran."""

    def __init__(self, size: int = RESERVOIR_SIZE) -> None:
        self.size = size
        self.samples: list[float] = []
        self.count = 0
        self.total = 0.0
        self.max = -math.inf
        #: Whose draws pick the kept observations (a test sets a seeded one).
        self.rng = random.Random()
        self._weight = 1.0
        self._next = size  # the count at which the next observation replaces one

    def observe(self, amount: float) -> None:
        self.count += 1
        self.total += amount
        if amount > self.max:
            self.max = amount
        if self.count <= self.size:
            self.samples.append(amount)
            if self.count == self.size:
                self._skip()
        elif self.count == self._next:
            self.samples[self.rng.randrange(self.size)] = amount
            self._skip()

    def _skip(self) -> None:
        """Draw the count of the next observation to keep (algorithm L)."""
        rng = self.rng
        self._weight *= math.exp(math.log(1.0 - rng.random()) / self.size)
        gap = math.log(1.0 - rng.random()) / math.log1p(-self._weight)
        self._next += int(gap) + 1


class Tally:
    """:class:`RoomMetrics` in plain numbers (the default of a bare node)."""

    def __init__(self) -> None:
        self.races_started = _Number()
        self.moves_accepted = _Number()
        self.moves_refused = _ByLabel()
        self.requests_refused = _ByLabel()
        self.moves_retried = _Number()
        self.finishes_floored = _Number()
        self.finishes_unreplicated = _Number()
        self.move_latency = _Samples()
        self.lost_writes = _Number()
        self.defects = _ByLabel()

    def refused(self) -> _Bag[str]:
        """Refused moves by reason, e.g. ``{"bad_seq": 2}``."""
        return _Bag({k[0]: int(v.value) for k, v in self.moves_refused.values.items()})

    def requests_refused_by_code(self) -> _Bag[str]:
        """Requests answered ``error``, by code, e.g. ``{"too_many_rooms": 1}``."""
        return _Bag({k[0]: int(v.value) for k, v in self.requests_refused.values.items()})


__all__ = ["MOVE_REFUSALS", "REQUEST_REFUSALS", "RESERVOIR_SIZE", "Defect", "RoomMetrics", "Tally"]
