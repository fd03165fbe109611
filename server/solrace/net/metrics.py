"""Prometheus metrics of one server node (``GET /metrics``).

Each node owns a registry rather than using the process-global one, so several nodes
can run in one process (the tests run two) without their counters colliding.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.connections = Gauge("solrace_connections", "Open WebSocket connections", registry=r)
        self.rooms = Gauge("solrace_rooms", "Rooms with a connection on this node", registry=r)
        self.races = Gauge("solrace_races_running", "Races running on this node", registry=r)
        self.races_started = Counter(
            "solrace_races_started", "Countdowns started by this node", registry=r
        )
        self.moves_accepted = Counter(
            "solrace_moves_accepted", "Moves checked, stored and acknowledged", registry=r
        )
        self.moves_refused = Counter(
            "solrace_moves_refused", "Moves refused", ["reason"], registry=r
        )
        self.move_latency = Histogram(
            "solrace_move_latency_seconds",
            "From a move frame's arrival to its acknowledgement",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.frames_in = Counter("solrace_frames_in", "Frames received", registry=r)
        self.frames_out = Counter("solrace_frames_out", "Frames sent", registry=r)
        self.closes = Counter(
            "solrace_protocol_closes", "Connections closed for bad input", ["code"], registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
