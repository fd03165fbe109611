"""Prometheus metrics of one server node (``GET /metrics``).

Each node owns a registry rather than using the process-global one, so several nodes
can run in one process (the tests run two) without their counters colliding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from solrace.protocol.errors import BAD_INPUT_CLOSES
from solrace.protocol.views import Phase
from solrace.rooms.clock import offset_ms, store_offset_ms
from solrace.rooms.counters import MOVE_REFUSALS, REQUEST_REFUSALS, Defect

from .admission import REFUSAL_REASONS

#: How long a failed store call keeps ``solrace_store_up`` at 0: a scrape interval's
#: worth (Prometheus' usual 15 s), so that a scrape sees an outage that came and went
#: since the one before, and a store failing calls now and then reads 0, not up.
STORE_FAILED_RECENTLY_S: Final = 15.0

if TYPE_CHECKING:
    from solrace.rooms.node import Node

    from .admission import Admission

# prometheus_client adds a ``<name>_created`` gauge (the Unix time it was made) to every
# counter and histogram, each repeating its counter's HELP: 13 undocumented series a
# node exported, which no alert or dashboard here reads (process start time says the
# same). Process-wide: it applies to the metrics made after it, so before any is.
# The function is untyped in prometheus_client: called through a typed name.
_disable_created: Callable[[], None] = disable_created_metrics
_disable_created()


class Metrics:
    """Every counter of a node: the room core's (solrace.rooms.counters.RoomMetrics)
    and the connections' (frames, protocol closes), with gauges read from the node."""

    def __init__(self, node: Node) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # Gauges are read from the node at each scrape, never kept by inc/dec, so they
        # cannot drift from what the node really holds.
        self.connections = Gauge("solrace_connections", "Open WebSocket connections", registry=r)
        self.connections.set_function(lambda: len(node.peers))
        self.rooms = Gauge("solrace_rooms", "Rooms with a connection on this node", registry=r)
        self.rooms.set_function(lambda: sum(1 for x in node.rooms.values() if x.has_peers()))
        self.races = Gauge("solrace_races_running", "Races running on this node", registry=r)
        self.races.set_function(
            lambda: sum(
                1 for x in node.rooms.values() if x.served() and x.state.phase == Phase.RACING
            )
        )
        self.clock_offset = Gauge(
            "solrace_clock_offset_seconds",
            "The system's wall clock minus this node's race clock, which never steps "
            "and follows the store's (docs/deploy.md, Clocks)",
            registry=r,
        )
        self.clock_offset.set_function(lambda: offset_ms(node.clock) / 1000)
        self.store_clock_offset = Gauge(
            "solrace_clock_store_offset_seconds",
            "The store's clock minus this node's race clock at the last sample: what the "
            "node has left to slew (NaN before the first sample; docs/deploy.md, Clocks)",
            registry=r,
        )
        self.store_clock_offset.set_function(lambda: _seconds(store_offset_ms(node.clock)))
        # The node's own word (Node.store_down: its loops found the store down; the lease
        # renewal, every LEASE_RENEW_S whatever the traffic, notices within a second)
        # and the store's record of every call (a request's, a write's): a Redis that
        # answers reads and refuses every write failed requests and ticks while the
        # node's flag, cleared by each read that answered, said up (a review: 60 of 60
        # samples). No probe of its own: a scrape never waits on the store.
        self.store_up = Gauge(
            "solrace_store_up",
            "1 while this node's store (Redis, or its embedded engine) answers its calls, "
            f"0 while it fails them and {STORE_FAILED_RECENTLY_S:g} s after the last "
            "failure (docs/server.md, Metrics)",
            registry=r,
        )
        store = node.store
        self.store_up.set_function(
            lambda: 0 if node.store_down or store.failed_within(STORE_FAILED_RECENTLY_S) else 1
        )
        self.races_started = Counter(
            "solrace_races_started", "Countdowns started by this node", registry=r
        )
        self.moves_accepted = Counter(
            "solrace_moves_accepted", "Moves checked, stored and acknowledged", registry=r
        )
        self.moves_refused = Counter(
            "solrace_moves_refused", "Moves refused", ["reason"], registry=r
        )
        self.requests_refused = Counter(
            "solrace_requests_refused",
            "Requests answered with an error, by code (moves included)",
            ["code"],
            registry=r,
        )
        self.move_latency = Histogram(
            "solrace_move_latency_seconds",
            "From a move frame's arrival to its acknowledgement",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.moves_retried = Counter(
            "solrace_moves_retried",
            "Retries of stored moves answered with their stored outcome",
            registry=r,
        )
        self.finishes_floored = Counter(
            "solrace_finishes_floored",
            "Finishes given the later time of a finish stored before them",
            registry=r,
        )
        self.finishes_unreplicated = Counter(
            "solrace_finishes_unreplicated",
            "Finishes acknowledged before a replica of their master held them",
            registry=r,
        )
        self.lost_writes = Counter(
            "solrace_lost_writes",
            "Times Redis held less than this node had acknowledged or delivered",
            registry=r,
        )
        self.defects = Counter(
            "solrace_defects",
            "Unexpected errors (a defect, logged with its traceback), by where they happened",
            ["where"],
            registry=r,
        )
        self.frames_in = Counter("solrace_frames_in", "Frames received", registry=r)
        self.frames_out = Counter("solrace_frames_out", "Frames sent", registry=r)
        self.closes = Counter(
            "solrace_protocol_closes", "Connections closed for bad input", ["code"], registry=r
        )
        self.work_waits = Counter(
            "solrace_work_waits",
            "Times a connection's requests cost more work (replays, listings) than its"
            " work bucket held, so it was not read until the bucket was back in credit",
            registry=r,
        )
        self.connections_refused = Counter(
            "solrace_connections_refused",
            "Connections refused for the node's limits (server_full, too_many_connections, "
            "connecting_too_fast), or dropped unanswered past them (dropped)",
            ["reason"],
            registry=r,
        )
        self.sockets = Gauge(
            "solrace_sockets_open", "Client sockets open (connections, handshakes)", registry=r
        )
        self.max_connections = Gauge(
            "solrace_connections_max", "Connections this node takes at most", registry=r
        )
        # Every label known in advance is exported at 0 from the start: a rate() or an
        # alert on a kind of refusal has a series before the first one happens.
        for reason in MOVE_REFUSALS:
            self.moves_refused.labels(reason)
        for refusal in REQUEST_REFUSALS:
            self.requests_refused.labels(refusal)
        for where in Defect:
            self.defects.labels(where)
        for code in BAD_INPUT_CLOSES:
            self.closes.labels(str(int(code)))
        for refused in REFUSAL_REASONS:
            self.connections_refused.labels(refused)

    def watch_admission(self, admission: Admission) -> None:
        """Read the gauges of the connection limits from ``admission`` at each scrape."""
        self.sockets.set_function(lambda: admission.open)
        self.max_connections.set_function(lambda: admission.max_connections)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _seconds(ms: int | None) -> float:
    """Milliseconds as a gauge's seconds; NaN for a figure not known yet."""
    return math.nan if ms is None else ms / 1000
