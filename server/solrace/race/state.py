"""A room's state, folded from its event stream (event sourcing, docs/design.md).

Every node that serves a room keeps one :class:`RoomState`, built by :meth:`apply`-ing
the room's events in version order, and nothing else changes it. Two nodes that have
applied the same versions hold the same state, which is what lets any node take any
decision (:mod:`solrace.race.decisions`) and lets Redis arbitrate between nodes with one
compare-and-append.

Events are :class:`~solrace.race.events.RoomEvent`: ``t`` and ``d`` are exactly the
protocol's room event (docs/protocol.md §7), broadcast as they are, so they never hold
a card or — before ``race_over`` — the seed; ``at`` stays on the server and gives every
node the same clock for timers (lobby timer, disconnect grace, reach times).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from solrace.protocol.limits import (
    FIRST_RACER_ID,
    JOIN_BURST,
    JOIN_INTERVAL_S,
    MIN_RACERS_TO_START,
    RESUME_BURST,
    RESUME_INTERVAL_S,
)
from solrace.protocol.views import (
    Deal,
    Phase,
    RaceResult,
    RacerInfo,
    RacerStatus,
    RoomSummary,
    Snapshot,
)
from solrace.rules import deal

from .events import Carried, EventType, Presence, RoomEvent
from .settings import RoomSettings

#: A quick room's lobby timer: the countdown starts this long after a second racer
#: arrives even if not everyone is ready.
QUICK_LOBBY_MS: Final = 20_000
#: What one resume costs a racer's resume bucket, and what the bucket holds full (ms:
#: the bucket refills 1 ms a ms, so a resume is due every RESUME_INTERVAL_S).
RESUME_INTERVAL_MS: Final = int(RESUME_INTERVAL_S * 1000)
RESUME_BUCKET_MS: Final = RESUME_BURST * RESUME_INTERVAL_MS
#: An address's join bucket (limits.JOIN_BURST), in ms of join interval, likewise.
JOIN_INTERVAL_MS: Final = int(JOIN_INTERVAL_S * 1000)
JOIN_BUCKET_MS: Final = JOIN_BURST * JOIN_INTERVAL_MS

# The members :attr:`RoomState.phase` and :meth:`RoomState.can_move` answer with, read
# once: on Python 3.11 every ``Phase.X`` read through its class goes through
# ``EnumType.__getattr__``'s lookup hook (about 1,100 instructions), and both are asked
# several times a move (5.5 reads a move; docs/performance.md, round 27).
_LOBBY, _COUNTDOWN, _RACING, _FINISHED = Phase.LOBBY, Phase.COUNTDOWN, Phase.RACING, Phase.FINISHED
_PLAYING, _STUCK = RacerStatus.PLAYING, RacerStatus.STUCK


@dataclass
class RacerState:
    racer: int
    name: str
    ready: bool = False
    #: The ready flag names open spectating (``ready`` with ``spectators: "open"``).
    open_boards: bool = False
    status: str = RacerStatus.WAITING
    foundation: int = 0
    moves: int = 0
    face_down: int = 0
    place: int | None = None
    online: bool = True
    offline_since_ms: int | None = None
    #: Race clock (ms since the start) when ``foundation`` last changed; None if never.
    reached_ms: int | None = None
    #: Race clock when the racer finished.
    elapsed_ms: int | None = None
    #: Server-only: the racer's current connection and the node holding it, from the
    #: last ``presence`` event. An "offline" about an older connection is ignored, so
    #: a stale disconnect can never override a newer resume (on any node).
    conn: str | None = None
    node: str | None = None
    #: Server-only: a digest of the client address the racer joined from (None: not
    #: counted), from its ``racer_joined``: a public room seats an address once.
    origin: str | None = None
    #: Why the racer left: ``left`` (asked to), ``grace`` (away too long).
    left_reason: str | None = None
    #: Server-only: entries in the racer's move log as of the folded events.
    log_length: int = 0
    #: Server-only: times the racer took its ready flag back this round (MAX_UNREADY).
    unready: int = 0
    #: Server-only: the racer's resume bucket (limits.RESUME_BURST), in ms of resume
    #: interval, as of the last ``presence`` that recorded it online (a resume, on any
    #: node) at ``online_at_ms``; None: none has this round, the bucket is full
    #: (decisions.resume_too_soon). Not carried by a reset: a rematch follows a whole
    #: race, so no loop is quicker than one.
    online_at_ms: int | None = None
    resumes_left_ms: int = 0

    def info(self) -> RacerInfo:
        """The protocol's RacerInfo."""
        return {
            "racer": self.racer,
            "name": self.name,
            "ready": self.ready,
            "status": self.status,
            "foundation": self.foundation,
            "moves": self.moves,
            "face_down": self.face_down,
            "place": self.place,
        }


@dataclass
class RoomState:
    room: str
    code: str
    settings: RoomSettings
    version: int = 0
    #: The round being prepared or played: 1 for the first race, +1 per rematch.
    round: int = 1
    #: The version of the ``room_reset`` that began the round (0 in the first, or if
    #: that reset did not carry the room's past: RoomEvent.carried): the rematch
    #: after this round trims the room's stream before it (docs/store.md).
    round_began: int = 0
    host: int | None = None
    racers: dict[int, RacerState] = field(default_factory=dict)
    next_racer: int = FIRST_RACER_ID
    start_at_ms: int | None = None
    started: bool = False
    commitment: str | None = None
    lobby_deadline_ms: int | None = None
    result: RaceResult | None = None
    #: Spectators see whole boards this round: the room offers it and every racer's
    #: ready flag agreed when the countdown began (docs/fairness.md).
    open_boards: bool = False
    #: The round's deal once chosen (the protocol's Deal: certified, moves, difficulty).
    deal: Deal | None = None
    #: Server-only: which candidate seed the round deals, and the certificate (the
    #: winning line), from the ``deal_chosen`` event. Secret until the race is over.
    deal_attempt: int = 0
    certificate: list[str] | None = None
    #: Server-only: each joining address's join bucket this round (limits.JOIN_BURST),
    #: by seat digest: (the last join's time, ms of interval it left), as
    #: ``resumes_left_ms`` (decisions.join_too_soon). Emptied by a reset: a rematch
    #: follows a whole race, so no loop is quicker than one.
    join_buckets: dict[str, tuple[int, int]] = field(default_factory=dict)

    # ----------------------------------------------------------------- phase
    @property
    def phase(self) -> str:
        if self.result is not None:
            return _FINISHED
        if self.started:
            return _RACING
        if self.start_at_ms is not None:
            return _COUNTDOWN
        return _LOBBY

    @property
    def ends_at_ms(self) -> int | None:
        if not self.started or self.start_at_ms is None:
            return None
        return self.start_at_ms + self.settings.time_limit_s * 1000

    def race_clock(self, now_ms: int) -> int:
        """Milliseconds since the start (0 before it): the race's only clock."""
        return 0 if self.start_at_ms is None else max(0, now_ms - self.start_at_ms)

    def playing(self) -> list[RacerState]:
        """Racers who can still move (see :meth:`can_move`): the race goes on while
        there is one, and only their knowledge matters to fair spectating."""
        return [r for r in self.racers.values() if self.can_move(r)]

    def can_move(self, member: RacerState) -> bool:
        """Playing, or stuck in a room that allows undo (an undo is a move)."""
        status = member.status
        if status == _PLAYING:
            return True
        return status == _STUCK and bool(self.settings.options.get("undo", False))

    def snapshot(self, now_ms: int, spectators: int = 0) -> Snapshot:
        """The public part of the protocol's Snapshot (``you`` is added per racer)."""
        return {
            "room": self.room,
            "code": self.code,
            "version": self.version,
            "phase": self.phase,
            "settings": self.settings.to_dict(),
            "host": self.host,
            "racers": [{**r.info(), "online": r.online} for r in self.racers.values()],
            "spectators": spectators,
            "now_ms": now_ms,
            "start_at_ms": self.start_at_ms,
            "ends_at_ms": self.ends_at_ms,
            "commitment": self.commitment,
            "you": None,
            "result": self.result,
            "deal": self.deal,
        }

    def summary(self) -> RoomSummary:
        """The protocol's RoomSummary, for ``list``."""
        host = self.racers.get(self.host) if self.host is not None else None
        return {
            "room": self.room,
            "code": self.code,
            "variant": self.settings.variant,
            "options": dict(self.settings.options),
            "phase": self.phase,
            "racers": len(self.racers),
            "max_racers": self.settings.max_racers,
            "time_limit_s": self.settings.time_limit_s,
            "spectator_delay_s": self.settings.spectator_delay_s,
            "quick": self.settings.quick,
            "host": host.name if host else None,
        }

    # ------------------------------------------------------------------ fold
    def follows(self, version: int, event: RoomEvent) -> bool:
        """Whether ``event``, stored at ``version``, may be folded next (:meth:`apply`):
        the next version, or a reset that begins the fold after any earlier one. A
        later version that is not such a reset follows a gap in the stream: the events
        between are gone, and no fold can rebuild what was decided on them
        (Node.history_broken)."""
        return version == self.version + 1 or (version > self.version and begins_fold(event))

    def apply(self, version: int, event: RoomEvent) -> None:
        """Fold one event. Versions must arrive in order, each exactly once — except
        that a ``room_reset`` carrying what the room keeps from before it may follow
        any earlier version: it alone sets everything the rounds before it had, and
        the stream is trimmed to begin at one (a node taking the room up, or one that
        had not read the trimmed events yet, folds from it)."""
        if not self.follows(version, event):
            raise ValueError(f"room {self.room}: event {version} after {self.version}")
        self.version = version
        d, at = event.d, event.at
        kind = event.t
        if kind == EventType.PRESENCE:
            self._on_presence(d, at, event)
            return
        if kind == EventType.ROOM_RESET:
            self._on_room_reset(d, at, event)
            # Only a reset that carries what came before may begin the fold: a
            # reset stored before resets carried it is never trimmed to.
            self.round_began = version if begins_fold(event) else 0
            return
        if kind == EventType.PROGRESS and event.entry is not None:
            # A move's times are its log entry's (race clock), the ones the result
            # lists beside the log and `solrace verify` checks the standings against;
            # the event's own time is when the server got round to appending it.
            at = (self.start_at_ms or 0) + event.entry[1]
        handler = getattr(self, "_on_" + kind, None)
        if handler is not None:
            handler(d, at)
        if kind == EventType.DEAL_CHOSEN:
            self.deal_attempt = event.attempt
            self.certificate = None if event.line is None else list(event.line)
        elif kind == EventType.RACER_JOINED:
            joined = self.racers[d["racer"]]
            joined.conn, joined.node, joined.origin = event.conn, event.node, event.origin
            if event.origin is not None:
                left = join_bucket_ms(self, event.origin, at) - JOIN_INTERVAL_MS
                self.join_buckets[event.origin] = (at, max(0, left))
        elif kind == EventType.PROGRESS and event.log_length is not None:
            racer = self.racers.get(d["racer"])
            if racer is not None:
                racer.log_length = event.log_length

    def _on_racer_joined(self, d: Mapping[str, Any], at: int) -> None:
        self.racers[d["racer"]] = RacerState(d["racer"], d["name"])
        self.next_racer = max(self.next_racer, d["racer"] + 1)
        if self.host is None:
            self.host = d["racer"]
        if self.settings.quick and len(self.racers) == 2:
            self.lobby_deadline_ms = at + QUICK_LOBBY_MS

    def _on_racer_left(self, d: Mapping[str, Any], at: int) -> None:
        racer = self.racers.get(d["racer"])
        if racer is not None:
            if self.phase in (Phase.LOBBY, Phase.FINISHED):
                del self.racers[d["racer"]]
            else:
                racer.status = RacerStatus.LEFT
                racer.place = None
                racer.left_reason = d.get("reason", RacerStatus.LEFT)
        self.host = d["host"]
        if len(self.racers) < MIN_RACERS_TO_START:
            self.lobby_deadline_ms = None

    def _on_presence(self, d: Mapping[str, Any], at: int, event: RoomEvent) -> None:
        racer = self.racers.get(d["racer"])
        if racer is None:
            return
        conn = event.conn
        if not d["online"] and conn is not None and racer.conn is not None and conn != racer.conn:
            return  # about a connection the racer has already replaced
        racer.online = d["online"]
        racer.offline_since_ms = None if d["online"] else at
        if d["online"]:
            racer.conn, racer.node = conn, event.node
            racer.resumes_left_ms = max(0, resume_bucket_ms(racer, at) - RESUME_INTERVAL_MS)
            racer.online_at_ms = at

    def _on_ready_changed(self, d: Mapping[str, Any], at: int) -> None:
        racer = self.racers.get(d["racer"])
        if racer is not None:
            agrees = d["ready"] and d.get("open_boards", False)
            if takes_back(racer, d["ready"], agrees):
                racer.unready += 1
            racer.ready, racer.open_boards = d["ready"], agrees

    def _on_countdown(self, d: Mapping[str, Any], at: int) -> None:
        self.start_at_ms = d["start_at_ms"]
        self.commitment = d["commitment"]
        self.open_boards = d.get("open_boards", False)

    def _on_started(self, d: Mapping[str, Any], at: int) -> None:
        self.started = True
        dealt = dealt_face_down(self.settings)
        for racer in self.racers.values():
            if racer.status == RacerStatus.WAITING:
                racer.status = RacerStatus.PLAYING
                racer.face_down = dealt

    def _on_progress(self, d: Mapping[str, Any], at: int) -> None:
        racer = self.racers.get(d["racer"])
        if racer is None:
            return
        if d["foundation"] != racer.foundation:
            racer.reached_ms = self.race_clock(at)
        racer.foundation = d["foundation"]
        racer.moves = d["moves"]
        racer.face_down = d["face_down"]
        racer.status = d["status"]
        if d["status"] == RacerStatus.FINISHED and racer.elapsed_ms is None:
            racer.elapsed_ms = self.race_clock(at)

    def _on_finished(self, d: Mapping[str, Any], at: int) -> None:
        racer = self.racers.get(d["racer"])
        if racer is not None:
            racer.place = d["place"]
            racer.status = RacerStatus.FINISHED
            racer.elapsed_ms = d["elapsed_ms"]
            racer.foundation = d["foundation"]
            racer.moves = d["moves"]
            racer.face_down = 0

    def _on_race_over(self, d: Mapping[str, Any], at: int) -> None:
        # Built by decisions.tick from the standings and the reveal: a RaceResult.
        self.result = cast(RaceResult, d)
        for entry in d["standings"]:
            racer = self.racers.get(entry["racer"])
            if racer is not None:
                racer.place = entry["place"]
                racer.status = entry["status"]

    def _on_deal_chosen(self, d: Mapping[str, Any], at: int) -> None:
        self.deal = Deal(certified=d["certified"], moves=d["moves"], difficulty=d["difficulty"])

    def everyone_left(self) -> bool:
        """A lobby everyone left is closed: it takes nobody new (decisions.join) and
        expires. Not a room nobody has joined yet (a create whose join failed)."""
        return not self.racers and self.next_racer > FIRST_RACER_ID

    def deal_ready(self) -> bool:
        """A winnable room waits for its certified deal; a random one never waits."""
        return self.settings.deals != "winnable" or self.deal is not None

    def _on_room_reset(self, d: Mapping[str, Any], at: int, event: RoomEvent) -> None:
        carried = event.carried
        if carried is None:  # stored before resets carried it: the state has it
            carried = carried_into(self, d["racers"], self.round + 1)
        self.round = carried.round
        self.next_racer = carried.next_racer
        self.join_buckets = {}
        self.open_boards = False
        self.deal = None
        self.deal_attempt = 0
        self.certificate = None
        self.result = None
        self.start_at_ms = None
        self.started = False
        self.commitment = None
        self.lobby_deadline_ms = None
        self.host = d["host"]
        self.racers = {}
        for info in d["racers"]:
            racer = RacerState(info["racer"], info["name"])
            presence = carried.presence.get(info["racer"])
            if presence is not None:  # presence carries over, with what orders it
                racer.online = presence.online
                racer.offline_since_ms = presence.offline_since_ms
                racer.conn, racer.node = presence.conn, presence.node
                racer.origin = presence.origin
            self.racers[racer.racer] = racer
        if self.settings.quick and len(self.racers) >= 2:
            self.lobby_deadline_ms = at + QUICK_LOBBY_MS


def begins_fold(event: RoomEvent) -> bool:
    """Whether the room's fold may begin at ``event``: a ``room_reset`` that carries
    what the room keeps from the rounds before it (RoomEvent.carried)."""
    return event.t == EventType.ROOM_RESET and event.carried is not None


def resume_bucket_ms(racer: RacerState, now_ms: int) -> int:
    """What ``racer``'s resume bucket holds at ``now_ms``: what its last online left,
    plus the time since (none if ``now_ms`` is earlier: a node's clock a moment behind
    the one that stored it), at most full. A resume takes RESUME_INTERVAL_MS of it.
    Integers only, so that every node folds the same bucket from the same events."""
    if racer.online_at_ms is None:
        return RESUME_BUCKET_MS
    elapsed = max(0, now_ms - racer.online_at_ms)
    return min(RESUME_BUCKET_MS, racer.resumes_left_ms + elapsed)


def join_bucket_ms(state: RoomState, origin: str, now_ms: int) -> int:
    """What the join bucket of the address whose seat digest is ``origin`` holds at
    ``now_ms`` this round, as :func:`resume_bucket_ms`; a join takes JOIN_INTERVAL_MS."""
    last = state.join_buckets.get(origin)
    if last is None:
        return JOIN_BUCKET_MS
    at_ms, left_ms = last
    return min(JOIN_BUCKET_MS, left_ms + max(0, now_ms - at_ms))


def carried_into(state: RoomState, racers: Iterable[Mapping[str, Any]], round_no: int) -> Carried:
    """What a reset beginning round ``round_no`` for ``racers`` (RacerInfo rows)
    carries from ``state``: the round, the next racer id, each racer's presence."""
    presence = {}
    for info in racers:
        old = state.racers.get(info["racer"])
        if old is not None:
            presence[old.racer] = Presence(
                old.online, old.offline_since_ms, old.conn, old.node, old.origin
            )
    return Carried(round_no, state.next_racer, presence)


def takes_back(racer: RacerState, ready: bool, open_boards: bool) -> bool:
    """Whether setting ``racer``'s flag to ``ready`` (agreeing to ``open_boards``)
    takes back something it had said: its readiness, or its agreement to open
    spectating. Counted against MAX_UNREADY; the other way is always allowed."""
    return racer.ready and (not ready or (racer.open_boards and not open_boards))


def dealt_face_down(settings: RoomSettings) -> int:
    """Face-down tableau cards of a fresh deal: the same for every seed of a variant
    and options, so every racer's count is right from ``started`` on."""
    return deal(settings.variant, 0, dict(settings.options)).face_down_count()


def standings(state: RoomState) -> list[dict[str, Any]]:
    """docs/rules.md race rules: finishers first, by place (finish order); everyone else
    after them by cards on foundations (more first), then by the earlier time they
    reached that count. Score, log and times are filled in by the caller, which has them."""
    racers = list(state.racers.values())
    finishers = sorted((r for r in racers if r.place is not None), key=lambda r: r.place or 0)
    others = sorted(
        (r for r in racers if r.place is None),
        key=lambda r: (
            -r.foundation,
            r.reached_ms if r.reached_ms is not None else 1 << 62,
            r.racer,
        ),
    )
    return [
        {
            "place": place,
            "racer": r.racer,
            "name": r.name,
            "status": RacerStatus.TIMEOUT if r.status == RacerStatus.PLAYING else r.status,
            "foundation": r.foundation,
            "moves": r.moves,
            "score": 0,
            "elapsed_ms": r.elapsed_ms if r.status == RacerStatus.FINISHED else None,
            "reached_ms": r.reached_ms,
            "log": [],
            "times": [],
        }
        for place, r in enumerate(finishers + others, start=1)
    ]
