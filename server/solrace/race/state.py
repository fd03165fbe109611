"""A room's state, folded from its event stream (event sourcing, DESIGN.md).

Every node that serves a room keeps one :class:`RoomState`, built by :meth:`apply`-ing
the room's events in version order, and nothing else changes it. Two nodes that have
applied the same versions hold the same state, which is what lets any node take any
decision (see :mod:`solrace.race.decisions`) and lets Redis arbitrate races between
nodes with one compare-and-append.

Events are plain dicts ``{"t": type, "d": data}``: public by construction (they are
broadcast to racers and spectators), so none ever holds a card or the seed — except
``race_over``, which reveals the seed once the race has ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from .settings import RoomSettings

LOBBY: Final = "lobby"
COUNTDOWN: Final = "countdown"
RACING: Final = "racing"
FINISHED: Final = "finished"

# Racer statuses.
WAITING: Final = "waiting"  # in the lobby
PLAYING: Final = "playing"
DONE: Final = "finished"  # completed all foundations
STUCK: Final = "stuck"
RESIGNED: Final = "resigned"
LEFT: Final = "left"
TIMEOUT: Final = "timeout"
OUT_STATUSES: Final = frozenset({DONE, STUCK, RESIGNED, LEFT, TIMEOUT})


@dataclass
class RacerState:
    racer: str
    name: str
    ready: bool = False
    online: bool = True
    offline_since_ms: int | None = None
    status: str = WAITING
    foundation: int = 0
    moves: int = 0
    face_down: int = 0
    #: Race clock (ms since the start) when ``foundation`` last changed.
    count_at_ms: int = 0
    #: Race clock when the racer finished, stopped, or its status last changed.
    status_at_ms: int | None = None
    place: int | None = None

    def public(self) -> dict[str, Any]:
        return {
            "racer": self.racer,
            "name": self.name,
            "ready": self.ready,
            "online": self.online,
            "status": self.status,
            "foundation": self.foundation,
            "moves": self.moves,
            "face_down": self.face_down,
            "place": self.place,
        }


@dataclass
class RoomState:
    room: str
    code: str = ""
    settings: RoomSettings = field(default_factory=RoomSettings)
    version: int = 0
    round: int = 0
    host: str | None = None
    racers: dict[str, RacerState] = field(default_factory=dict)
    start_at_ms: int | None = None
    commitment: str | None = None
    #: When a quick room's lobby timer runs out (set once two racers are in).
    lobby_deadline_ms: int | None = None
    over: bool = False
    result: dict[str, Any] | None = None
    created_ms: int = 0

    # ----------------------------------------------------------------- phase
    def phase(self, now_ms: int) -> str:
        if self.over:
            return FINISHED
        if self.start_at_ms is None:
            return LOBBY
        return RACING if now_ms >= self.start_at_ms else COUNTDOWN

    def race_clock(self, now_ms: int) -> int:
        """Milliseconds since the start (0 before it): the race's only clock."""
        return 0 if self.start_at_ms is None else max(0, now_ms - self.start_at_ms)

    def deadline_ms(self) -> int | None:
        if self.start_at_ms is None:
            return None
        return self.start_at_ms + self.settings.time_limit_s * 1000

    def playing(self) -> list[RacerState]:
        return [r for r in self.racers.values() if r.status == PLAYING]

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        """Public room state for a snapshot frame: no seed, no cards, no tokens."""
        return {
            "room": self.room,
            "code": self.code,
            "settings": self.settings.to_dict(),
            "version": self.version,
            "round": self.round,
            "phase": self.phase(now_ms),
            "host": self.host,
            "racers": [r.public() for r in self.racers.values()],
            "start_at_ms": self.start_at_ms,
            "commitment": self.commitment,
            "lobby_deadline_ms": self.lobby_deadline_ms,
            "result": self.result,
            "server_ms": now_ms,
        }

    # ------------------------------------------------------------------ fold
    def apply(self, version: int, event: dict[str, Any]) -> None:
        """Fold one event. Versions must arrive in order, each exactly once."""
        if version != self.version + 1:
            raise ValueError(f"room {self.room}: event {version} after {self.version}")
        self.version = version
        kind = event["t"]
        data = event["d"]
        handler = getattr(self, "_on_" + kind, None)
        if handler is not None:
            handler(data)

    def _on_room_created(self, d: dict[str, Any]) -> None:
        self.settings = RoomSettings.from_dict(d["settings"])
        self.code = d["code"]
        self.created_ms = d.get("created_ms", 0)

    def _on_racer_joined(self, d: dict[str, Any]) -> None:
        self.racers[d["racer"]] = RacerState(d["racer"], d["name"])
        if self.host is None:
            self.host = d["racer"]
        if d.get("lobby_deadline_ms") is not None:
            self.lobby_deadline_ms = d["lobby_deadline_ms"]

    def _on_racer_left(self, d: dict[str, Any]) -> None:
        self.racers.pop(d["racer"], None)
        if self.host == d["racer"]:
            self.host = next(iter(self.racers), None)
        if len(self.racers) < 2:
            self.lobby_deadline_ms = None

    def _on_presence(self, d: dict[str, Any]) -> None:
        racer = self.racers.get(d["racer"])
        if racer is not None:
            racer.online = d["online"]
            racer.offline_since_ms = None if d["online"] else d["at_ms"]

    def _on_ready_changed(self, d: dict[str, Any]) -> None:
        racer = self.racers.get(d["racer"])
        if racer is not None:
            racer.ready = d["ready"]

    def _on_countdown(self, d: dict[str, Any]) -> None:
        self.round = d["round"]
        self.start_at_ms = d["start_at_ms"]
        self.commitment = d["commitment"]
        for racer in self.racers.values():
            racer.status = PLAYING
            racer.status_at_ms = 0
            racer.face_down = d.get("face_down", 0)

    def _on_progress(self, d: dict[str, Any]) -> None:
        racer = self.racers.get(d["racer"])
        if racer is None:
            return
        if d["foundation"] != racer.foundation:
            racer.count_at_ms = d["at_ms"]
        racer.foundation = d["foundation"]
        racer.moves = d["moves"]
        racer.face_down = d["face_down"]
        if d["status"] != racer.status:
            racer.status_at_ms = d["at_ms"]
        racer.status = d["status"]

    def _on_finished(self, d: dict[str, Any]) -> None:
        racer = self.racers.get(d["racer"])
        if racer is not None:
            racer.place = d["place"]
            racer.status = DONE

    def _on_race_over(self, d: dict[str, Any]) -> None:
        self.over = True
        self.result = d
        for entry in d["standings"]:
            racer = self.racers.get(entry["racer"])
            if racer is not None:
                racer.place = entry["place"]
                racer.status = entry["status"]

    def _on_room_reset(self, d: dict[str, Any]) -> None:
        self.over = False
        self.result = None
        self.start_at_ms = None
        self.commitment = None
        self.round = d["round"]
        self.lobby_deadline_ms = None
        for racer_id in [r for r, s in self.racers.items() if s.status == LEFT or not s.online]:
            del self.racers[racer_id]
        if self.host not in self.racers:
            self.host = next(iter(self.racers), None)
        for racer in self.racers.values():
            racer.ready = False
            racer.status = WAITING
            racer.foundation = racer.moves = racer.face_down = racer.count_at_ms = 0
            racer.status_at_ms = None
            racer.place = None


def standings(state: RoomState) -> list[dict[str, Any]]:
    """RULES.md race rules: finishers by place (finish order); everyone else after them,
    by cards on foundations (more first), then by the earlier time they reached that
    count."""
    racers = list(state.racers.values())
    finishers = sorted(
        (r for r in racers if r.place is not None), key=lambda r: r.place or 0
    )
    others = sorted(
        (r for r in racers if r.place is None),
        key=lambda r: (-r.foundation, r.count_at_ms, r.name),
    )
    table = []
    for place, racer in enumerate(finishers + others, start=1):
        table.append(
            {
                "place": place,
                "racer": racer.racer,
                "name": racer.name,
                "status": racer.status if racer.status != PLAYING else TIMEOUT,
                "foundation": racer.foundation,
                "moves": racer.moves,
                "time_ms": racer.status_at_ms,
            }
        )
    return table
