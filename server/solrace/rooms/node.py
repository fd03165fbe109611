"""One server node: its rooms' folded state, the event tail, timers and decisions —
the core that :mod:`.lobby` (room requests), :mod:`.moves` (moves) and
:mod:`.spectators` (boards for spectators) build on.

Every state change goes the same way: decide from the folded state (pure functions of
:mod:`solrace.race.decisions`), append to the store (compare-and-append for room
decisions; the move script for moves), then fold what the store accepted and fan it
out. Nothing is broadcast that is not stored, and nothing stored is missed: each node
also tails the streams of its rooms for what other nodes appended.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from solrace.protocol import BadMessage, CloseCode, CloseReason, ErrorCode, race_id
from solrace.protocol.errors import RETRY_BUSY_MS
from solrace.protocol.limits import (
    FIRST_RACER_ID,
    RATE_BURST,
    RATE_PER_S,
    SEATS_PER_ADDRESS,
    SPECTATORS_PER_ROOM,
    WORK_BURST,
    WORK_PER_S,
)
from solrace.protocol.views import Phase, RacerStatus
from solrace.race import RaceError, RacerGame
from solrace.race import decisions as decide_
from solrace.race.events import EventType, RoomEvent
from solrace.race.fairness import round_salt
from solrace.store import RETRY_AFTER_FAILURE_S, Store, StoredEvent, Trim, new_event_id
from solrace.store.errors import (
    HeadLost,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    VersionConflict,
)

from . import certify, listing, spectators
from .clock import RTT_WINDOW, SAMPLE_RTT_MAX_MS, SteadyClock, sample_usable
from .counters import Defect, RoomMetrics, Tally
from .listing_cache import ListingCache
from .records import (
    RoomMeta,
    log_name,
    pack,
    pack_event,
    unpack,
    unpack_entries,
    unpack_event,
)
from .repeats import RepeatedLines
from .room import LiveRoom
from .snapshots import resync_clients

if TYPE_CHECKING:
    from solrace.race.state import RoomState

    from .peer import Peer

log = logging.getLogger("solrace.node")

#: What a draining node logs when it leaves dead co-servers in its rooms' sets, its own
#: outage or lapse too recent to read their leases (:meth:`Node._replace_dead_co_servers`).
DRAIN_REPLACEMENT_SKIPPED = (
    "did not take dead nodes out of the rooms handed off: this node's own outage or "
    "lapse is too recent to read their leases (a later take-up of those rooms may warn)"
)

#: A lifetime cap on a room's keys, so a room abandoned mid-race cannot stay forever.
ROOM_TTL_S = 24 * 3600
IDLE_ROOM_MS = 10 * 60 * 1000
FINISHED_ROOM_TTL_S = 3600
#: How long the keys of a lobby that everyone left are kept (and it leaves the list),
#: and a new room's until its first racer's join gives it ROOM_TTL_S in the join's own
#: write (expiry_set_by): a create cut before that join (Redis failing, its node
#: killed) left its meta and join code for the whole day, private or not.
EMPTY_ROOM_TTL_S = 600


DECIDE_ATTEMPTS = 20
#: A node's lease in Redis; it renews it every LEASE_RENEW_S. When a node dies, the
#: nodes serving its rooms mark its racers offline within LEASE_MS + ROOM_CHECK_S.
LEASE_MS = 5_000
LEASE_RENEW_S = 1.0
#: How often a node checks the rooms it serves (Node._check_loop: writes Redis lost,
#: dead nodes' racers, rooms no longer served), after the last check ended. In a loop
#: of its own, not the lease's: a check's call that waited out the command timeout
#: (COMMAND_TIMEOUT_S, the lease's own length) held the next renewal past its lapse.
ROOM_CHECK_S = 1.0
#: How often a node samples the store's clock to steer its own toward it (clock.py), in
#: the room checks' loop (Node._check_loop).
CLOCK_SAMPLE_S = 5.0
#: A racer marked offline while connected here is marked online again; a failed
#: attempt is retried after this, doubling up to RETRY_MAX_S.
REASSERT_RETRY_S = 0.1
#: Saving a finished race's result (Node._archive), when Redis failed it, is retried
#: after this, doubling up to RETRY_MAX_S.
ARCHIVE_RETRY_S = 0.2
#: Any other write a node has decided and must make (Node.insist) is retried after this.
WRITE_RETRY_S = 0.1
#: A room's clock decisions (Node.tick) are retried after this when Redis failed them,
#: and after BUG_RETRY_S when they failed on anything else (a defect, logged with its
#: traceback each time): never left unarmed, or a race would wait for ever.
TICK_RETRY_S = 0.5
BUG_RETRY_S = 5.0
RETRY_MAX_S = 2.0
#: How often a node looks for rooms no live node looks after (Node.sweep_orphans): at
#: its start, once its predecessor's lease has lapsed, then this often after the last
#: sweep ended. In a loop of its own (Node._sweep_loop), not the lease's: a sweep's read
#: that waited out the command timeout (COMMAND_TIMEOUT_S, the lease's own length) held
#: the next renewal past the lease's lapse.
ORPHAN_SWEEP_S = 60.0
#: A sweep (Node.sweep_orphans) passes over a room it cannot finish, but this many
#: rooms in a row failed by Redis are likely Redis down: it stops there rather than
#: wait for each room's timeout in turn. Whether the store is down for the node is the
#: lease loop's to say, not the sweep's (Node._sweep_loop).
SWEEP_OUTAGE_ROOMS = 3
#: The longest a drained node's hand-off note (Node.hand_off) is kept when nothing takes
#: its rooms up; taken up, the note goes at once (Node.sweep_orphans). It is read only
#: by the first sweep after the node's lease is gone: another live node's within
#: ORPHAN_SWEEP_S, or a restarted node's at its start. Not the lease (5 s): a note that
#: short lapsed before the other nodes' next sweep, and before a restart slower than
#: 5 s, and every scale-down warned. Five sweeps cover a slow sweep and a stop, upgrade
#: and start of some minutes; a room left unserved longer than that (its racers' grace
#: and its timers unheeded) is worth the warning anyway. Before, a day (ROOM_TTL_S):
#: each drain left its key that long.
HAND_OFF_KEEP_MS = int(5 * ORPHAN_SWEEP_S * 1000)
#: The tail and wake loops: how long a read blocks in Redis waiting for another node's
#: events (or wake-ups), and how long the tail waits while no room is shared. After
#: the store failed, every loop waits RETRY_AFTER_FAILURE_S (solrace.store) before it
#: reads again.
TAIL_BLOCK_MS = 250
WAKE_BLOCK_MS = 1000
TAIL_IDLE_S = 0.1
#: Reasons an outage is logged with at most ("store unavailable error=…"): its first,
#: then each new one as it changes. A Redis restarted with another password was logged
#: as "Connection closed by server" only, and its refused reconnects never: the operator
#: read a Redis that did not answer. Bounded, as reasons may alternate (a timeout, a
#: refusal) for as long as the outage lasts.
OUTAGE_REASONS_LOGGED = 4
#: How often a draining node looks whether its moves in flight are stored.
DRAIN_POLL_S = 0.01
#: Events after which every spectator board may change (the withholding does).
_BOARDS_CHANGE = frozenset(
    {EventType.FINISHED, EventType.STARTED, EventType.RACER_LEFT, EventType.RACE_OVER}
)
#: A room's armed timer is kept when its new wake-up is this close to the old one.
TIMER_SLACK_S = 0.005


def expiry_set_by(state: RoomState, event: RoomEvent) -> float | None:
    """The expiry ``event`` gives its room (``state``: before it), set by the event's
    own write: a race_over leaves the room an hour, a rematch gives it its lifetime
    back, the last racer leaving a lobby (or a finished room) leaves it ten minutes (a
    lobby everyone left takes nobody new), and the first racer ever to join a room
    gives it its lifetime cap (created with ten minutes: a create cut before its
    creator's join is stored leaves nothing for longer). None: the event keeps the
    room's expiry."""
    kind = event.t
    if kind == EventType.RACE_OVER:
        return FINISHED_ROOM_TTL_S
    if kind == EventType.ROOM_RESET or first_join(event):
        return ROOM_TTL_S
    if (
        kind == EventType.RACER_LEFT
        and state.phase in (Phase.LOBBY, Phase.FINISHED)
        and set(state.racers) <= {event.d["racer"]}
    ):
        return EMPTY_ROOM_TTL_S
    return None


def first_join(event: RoomEvent) -> bool:
    """Whether ``event`` seats the first racer a room ever had (:func:`first_racer`)."""
    return event.t == EventType.RACER_JOINED and first_racer(event.d["racer"])


def first_racer(racer: int) -> bool:
    """Whether ``racer`` is the first a room ever had, whose join gives a new room its
    lifetime cap (racer ids are never reused, a rematch's included:
    RoomState.next_racer starts at FIRST_RACER_ID)."""
    return racer == FIRST_RACER_ID


#: The statuses a progress event sets that end a racer's race by decision (a finish
#: is the racer's own last move: its append closes its log, append_move.lua).
_ENDING_STATUSES = frozenset({RacerStatus.RESIGNED, RacerStatus.TIMEOUT})


def no_longer_exists(name: str = "this room") -> BadMessage:
    """The answer about a room whose keys are gone (``unknown_room``): to a decision
    about it, and to a resume (which names the room by the code its client gave)."""
    return BadMessage(ErrorCode.UNKNOWN_ROOM, f"{name} no longer exists (it ended or expired)")


def racer_done_by(state: RoomState, event: RoomEvent) -> int | None:
    """The racer whose race ``event`` ends (``state``: before it) — resigned, timed
    out, gone from the countdown or the race — or None. Its write closes that racer's
    move log in the store (Store.append_event's ``closes_log``): a node that checked a
    move on a stale copy of the room (paused, or cut off from Redis past the grace)
    stored the finishing move of a racer who had left, and that racer won. A lobby's
    leave removes the racer: it has no log yet, and its seat's racer id is never
    given again (ids only grow), so there is nothing to close."""
    if event.t == EventType.PROGRESS and event.d["status"] in _ENDING_STATUSES:
        return int(event.d["racer"])
    if event.t == EventType.RACER_LEFT and state.phase in (Phase.COUNTDOWN, Phase.RACING):
        return int(event.d["racer"])
    return None


def _keeps_wakeup(event: RoomEvent) -> bool:
    """Whether folding ``event`` leaves the room's next wake-up where it was: a
    racer still playing after a move changes no deadline (the race's end, a grace, a
    countdown) and cannot end the race, so the timer need not be recomputed — most
    of a room's events (docs/performance.md, round 12). (A clock jump is still
    caught: the timer, when it fires, recomputes the instant.)"""
    return event.t == EventType.PROGRESS and event.d["status"] == RacerStatus.PLAYING


def refuse(error: RaceError, **extra: Any) -> BadMessage:
    """The protocol refusal for a race-layer refusal (same code, same words, and the
    field and ``retry_after_ms`` it names unless ``extra`` names them)."""
    if error.field is not None:
        extra.setdefault("field", error.field)
    if error.retry_after_ms is not None:
        extra.setdefault("retry_after_ms", error.retry_after_ms)
    return BadMessage(ErrorCode(error.code), error.message, **extra)


async def _until_done(
    attempt: Callable[[], Awaitable[None]],
    what: str,
    extra: dict[str, Any],
    first_s: float,
    *,
    failed: bool = False,
) -> None:
    """Run ``attempt`` until Redis lets it finish: after a failure (logged as ``what``)
    wait ``first_s``, doubling up to RETRY_MAX_S. For a write that must happen once the
    node has decided it, where no request is waiting to be told it failed — unless its
    room no longer exists (:func:`_gone`): then it ends. ``failed``:
    the caller's own attempt failed (and was logged), so this one waits first — it
    tried again at once, and the same failure was logged twice in a millisecond.

    Only :meth:`Node.stop` cancels it (it runs in a task the node keeps): cancelled
    once a try has failed, it says it gave up. A drain with Redis down logged "could
    not record a racer offline: retrying", then "stopped": an operator could not tell
    the write was dropped, not pending (docs/server.md, "Shutdown")."""
    delay = first_s
    try:
        if failed:
            await asyncio.sleep(delay)
            delay = min(2 * delay, RETRY_MAX_S)
        while True:
            try:
                await attempt()
                return
            except (StoreUnavailable, BadMessage) as exc:
                if _gone(exc, what, extra):
                    return
                log.warning(f"{what}: retrying", extra={**extra, "error": str(exc)})
                failed = True
            await asyncio.sleep(delay)
            delay = min(2 * delay, RETRY_MAX_S)
    except asyncio.CancelledError:
        if failed:
            log.warning(f"{what}: given up, the node stopped first", extra=extra)
        raise


def no_longer_there(exc: BaseException) -> bool:
    """Whether ``exc`` says the room no longer exists (:func:`no_longer_exists`: its keys
    expired, or Redis lost it — Node.room_lost, Node.history_broken — which closed it):
    nothing is left to decide or write for it, and it is no defect."""
    return isinstance(exc, BadMessage) and exc.code == ErrorCode.UNKNOWN_ROOM


def _gone(exc: StoreUnavailable | BadMessage, what: str, extra: dict[str, Any]) -> bool:
    """Whether a write that must follow a decision failed because its room no longer
    exists (``unknown_room``: its keys expired, or Redis lost it whole — which the
    node has handled then): there is nothing left to write it to, so it is dropped
    with one line. Retried, a room that expired with its racers still connected had
    each node log "could not record a racer offline: retrying" every 2 s for every
    racer who then hung up, until the node restarted (168 lines per node in 5 minutes:
    a lifecycle audit). Nor is a write to a closed store (the node stopped: a task
    that outlived :meth:`Node.stop` would otherwise retry it every 2 s for ever)."""
    if isinstance(exc, StoreClosed):
        log.info(f"{what}: the store is closed (the node stopped)", extra=extra)
        return True
    if not no_longer_there(exc):
        return False
    log.info(f"{what}: the room no longer exists", extra=extra)
    return True


def _free(lock: asyncio.Lock) -> bool:
    """Whether ``lock.acquire()`` would take ``lock`` at once: nobody holds it and no
    task waits for it. A released lock that a task still waits for reads as unlocked
    (Python 3.11), and taking it then waits until that task is done with it."""
    return not lock.locked() and not any(not w.cancelled() for w in lock._waiters or ())


def _last_race(room: LiveRoom) -> str | None:
    """The id of the last race the room ended, if any."""
    result = room.state.result
    return None if result is None else race_id(room.room_id, result.get("commitment"))


class _Final(NamedTuple):
    """A racer's end, read from its log for the standings: the score, the log, and
    each entry's time on the race clock (which `solrace verify` checks the standings'
    times against)."""

    score: int
    log: list[str]
    times: list[int]


class _Archive(NamedTuple):
    """A finished race's archive: its id and its result record, packed only when it
    is saved (every node folding the race_over builds one; usually it is saved)."""

    race: str
    record: dict[str, Any]


#: A sweep's work on one room, its answer the rooms it adopted (Node._sweep_noted,
#: Node._sweep_listed).
_RoomWork = Callable[[str], Awaitable[int]]


class _SweepFailures:
    """How a sweep (Node.sweep_orphans) goes on past a room it cannot finish: Redis
    failing for that room alone (a Cluster master down), at once or after its command
    timeout, or a defect in it. Raised out of the sweep, one such room — the first of
    the listing, read first every time — stopped every sweep before the rooms after it,
    which no node finished while it failed: each passed-over room is said once a sweep,
    as a warning (a defect with its traceback), and waits for the next sweep. Not
    SWEEP_OUTAGE_ROOMS rooms in a row failed by Redis, which stop the sweep (raised:
    likely an outage, which the sweep's loop leaves the lease's loop to find); nor a
    closed store. A room's timeout stopped the sweep too while the sweep ran in the
    loop that renews the lease (two held the renewal past the lease's lapse); in a
    loop of its own (Node._sweep_loop) it only makes that sweep slower, and the rooms
    after it are finished by it."""

    def __init__(self, node: Node, *, last: Collection[str] = ()) -> None:
        self._node = node
        self._in_a_row = 0
        #: The rooms it could not finish, the one that stopped it included: the next
        #: sweep takes them last (Node.sweep_orphans).
        self.failed: set[str] = set()
        #: The rooms the previous sweep could not finish (its unfinished()).
        self._last = last
        #: The rooms of ``last`` held back to the end of this sweep, with their work,
        #: and how many of them it has reached (then).
        self._later: list[tuple[str, _RoomWork]] = []
        self._reached = 0
        #: Every room its listings named, and whether it read them all (then).
        self._seen: set[str] = set()
        self._read_all = False

    def first(self, room_ids: list[str], work: _RoomWork) -> list[str]:
        """``room_ids`` but those in ``last`` (the rooms the previous sweep could not
        finish), held back for :meth:`then`, after every listing's other rooms: a room
        that times out every sweep stops each one, and first in the listing it stopped
        them before every room after it — a noted race first in the sweep, before every
        lobby."""
        self._seen.update(room_ids)
        self._later += [(room_id, work) for room_id in room_ids if room_id in self._last]
        return [room_id for room_id in room_ids if room_id not in self._last]

    async def then(self) -> int:
        """The rooms :meth:`first` held back, swept in turn (the rooms they adopted):
        called once every listing was read."""
        self._read_all = True
        adopted = 0
        for room_id, work in self._later:
            adopted += await self.over(room_id, work(room_id))
            self._reached += 1
        return adopted

    def unfinished(self) -> set[str]:
        """The rooms the next sweep takes last: those this one could not finish, and
        those of ``last`` it did not reach — held back and stopped before, or not in a
        listing it read. Only the failed were kept: two rooms that time out every sweep
        took turns first and stopped every sweep before the rooms after them. A room of
        ``last`` its listings, all read, no longer name is dropped."""
        owed = {room_id for room_id, _ in self._later[self._reached :]}
        unseen = set() if self._read_all else set(self._last) - self._seen
        return self.failed | owed | unseen

    async def over(self, room_id: str, work: Awaitable[int]) -> int:
        """``work``'s answer (the rooms it adopted), or 0 if it failed."""
        try:
            done = await work
        except StoreClosed:
            raise
        except StoreUnavailable as exc:
            self.failed.add(room_id)
            self._in_a_row += 1
            if self._in_a_row >= SWEEP_OUTAGE_ROOMS:
                raise
            log.warning(_PASSED_OVER, extra={"room": room_id, "error": str(exc)})
            return 0
        except Exception as exc:
            self.failed.add(room_id)
            log.warning(_PASSED_OVER, extra={"room": room_id, "error": repr(exc)}, exc_info=exc)
            self._node.metrics.defects.labels(Defect.SWEEP).inc()
            return 0
        self._in_a_row = 0
        return done


class _ReadFailures:
    """A run of reads Redis failed of one of the node's reading loops — the tail of
    other nodes' events (Node._tail_loop), the wake-ups (Node._wake_loop) —, said once
    (``said``, a warning) unless the store was down for the node meanwhile: the lease's
    loop says that (Node._store_failed_since), and only it (Node.store_failed).

    The loops said the store down themselves, and a read Redis failed every time (a
    shared room's slot's master down, on which the tail's poll waits out its timeout;
    reads that time out) made an outage of the node every RETRY_AFTER_FAILURE_S. The next
    renewal said it back, and each end re-armed every offline racer's grace in every
    room: a race whose racers left never ended while it lasted
    (tests/rooms/test_tail_faults.py). Judged in a task of its own: the lease's verdict
    may take a renewal's timeout, and the loop reads again meanwhile, so what it missed
    is read as soon as Redis answers it."""

    def __init__(self, node: Node, said: str) -> None:
        self._node = node
        self._said_line = said
        self._judging: asyncio.Future[Any] | None = None
        self._said = False

    def failed(self, error: StoreUnavailable, mark: tuple[float, int, bool]) -> None:
        """A read begun at ``mark`` (Node._store_failed_since's arguments) failed."""
        judging = self._judging
        if judging is None or (judging.done() and not self._said):
            self._judging = self._node.spawn(self._judge(error, mark))

    async def _judge(self, error: StoreUnavailable, mark: tuple[float, int, bool]) -> None:
        if not await self._node._store_failed_since(*mark):
            log.warning(self._said_line, extra={"error": str(error)})
            self._said = True

    def ended(self) -> None:
        """A read went through: the run is over."""
        if self._judging is not None:
            self._judging.cancel()
            self._judging, self._said = None, False


_PASSED_OVER = "the orphan sweep passed over a room it could not finish"
#: Said once per run of sweeps Redis stopped (Node._sweep_loop): the rooms that stop
#: every sweep (a Cluster master down for their slots) stop the next one as well.
_SWEEP_STOPPED = "the orphan sweep stopped: Redis failed rooms in a row"
#: Said once per run of room checks Redis failed while the store was up for the node
#: (Node._check_loop): a room whose keys Redis fails (a Cluster master down for its
#: slot) fails every check, and is no outage of the node.
_CHECK_FAILED = "the room check failed: Redis failed it, not the node's lease"
#: Said once per run of tail reads Redis failed while the store was up for the node
#: (Node._tail_loop): a shared room whose stream Redis fails (a Cluster master down for
#: its slot) fails every read, and is no outage of the node.
_TAIL_FAILED = "the tail of other nodes' events failed: Redis failed it, not the node's lease"
#: The same for the reads of the node's wake-ups (Node._wake_loop): one stream, on one
#: Cluster slot, which may be down while the lease's answers.
_WAKE_FAILED = "reading this node's wake-ups failed: Redis failed it, not the node's lease"


class Node:
    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], int] | None = None,
        name: str = "node",
        room_secret: Callable[[], bytes] = lambda: secrets.token_bytes(32),
        rate_per_s: float = RATE_PER_S,
        rate_burst: float = RATE_BURST,
        work_per_s: float = WORK_PER_S,
        work_burst: float = WORK_BURST,
        countdown_ms: int = decide_.COUNTDOWN_MS,
        candidates_in_flight: int = certify.CANDIDATES_IN_FLIGHT,
        announce_step_s: float = certify.ANNOUNCE_STEP_S,
        results_ttl_s: int | None = None,
        seats_per_address: int = SEATS_PER_ADDRESS,
        spectators_per_room: int = SPECTATORS_PER_ROOM,
    ) -> None:
        """``clock``: the node's race clock, Unix ms (by default a
        :class:`~.clock.SteadyClock`, which never steps; tests inject one they can
        move); ``room_secret`` draws each new room's secret (tests pin it to get a known
        deal); ``rate_per_s``/``rate_burst`` set every connection's token bucket,
        ``work_per_s``/``work_burst`` its work bucket (solrace.protocol.limits);
        ``candidates_in_flight``: candidate deals a certification solves at once (the
        first won is dealt, so which one is a matter of timing; tests that play a known
        deal set 1: the deal is then the first candidate won in order);
        ``announce_step_s``: a certified deal is announced a whole number of these
        after its walk began (certify.ANNOUNCE_STEP_S; tests of other things set 0);
        ``results_ttl_s``: how long a race's saved result is kept (None: for ever);
        ``seats_per_address``: seats one client address may take in a public room
        (0: any number; decisions.join); ``spectators_per_room``: spectators this
        node lets watch one room at once (0: any number; lobby.watch)."""
        self.store = store
        self.clock: Callable[[], int] = SteadyClock() if clock is None else clock
        self.name = name
        self.room_secret = room_secret
        self.rate_per_s = rate_per_s
        self.rate_burst = rate_burst
        self.work_per_s = work_per_s
        self.work_burst = work_burst
        self.countdown_ms = countdown_ms
        self.candidates_in_flight = candidates_in_flight
        self.announce_step_s = announce_step_s
        self.results_ttl_s = results_ttl_s
        self.seats_per_address = seats_per_address
        self.spectators_per_room = spectators_per_room
        self.rooms: dict[str, LiveRoom] = {}
        #: The public listing, read at most once a second for all connections.
        self.listing_cache = ListingCache()
        self.peers: set[Peer] = set()
        #: What the core counts; a server swaps in its Prometheus metrics.
        self.metrics: RoomMetrics = Tally()
        #: Log lines a client can cause at will, written at most every 10 s each.
        self.repeated = RepeatedLines()
        self.inflight = 0
        self.draining = False
        #: This node's id in leases and presence events (unique per process start).
        self.node_id = f"{name}-{secrets.token_hex(4)}"
        #: When this node last gained a working store (its start, or the end of a
        #: Redis outage): disconnect grace only counts from here (decisions.grace_ends).
        self.grace_floor_ms = self.clock()
        #: When the store last answered again after an outage (never: 0).
        self.store_back_ms = 0
        #: When a renewal last found this node's lease lapsed (Node._lapsed; never: 0):
        #: the store kept no lease, so every other node's may have lapsed too, as in
        #: an outage (Node._outage_settled).
        self._lapse_found_ms = 0
        self._store_down = False
        #: The reasons the current outage was logged with (Node.store_failed).
        self._outage_reasons: list[str] = []
        #: Live nodes of earlier releases on this store, found at start
        #: (check_older_nodes; None: not asked yet): while any lives, no rematch here
        #: trims a room's history (_history_to_trim).
        self.older_nodes: set[str] | None = None
        self._asking_older = False
        #: Nodes whose handed-off rooms this node took up in the sweep under way: their
        #: hand-off notes are deleted when it ends (sweep_orphans).
        self.taken_up: set[str] = set()
        #: The rooms the last orphan sweep could not finish: last in the next.
        self._sweep_failed: set[str] = set()
        #: The sweep under way left rooms whose nodes' leases it could not judge yet
        #: (Node._orphan: right after this node's outage or lapse): the next sweep
        #: comes once that has settled (Node._sweep_loop).
        self._sweep_deferred = False
        #: Rooms this node found with a broken history (history_broken): said once.
        self._broken: set[str] = set()
        #: This node has held a lease (renewed it once): a renewal that finds none then
        #: finds a lapse (Node._lapsed), and the task joining its rooms' sets again.
        self._leased = False
        #: When the last renewal Redis answered was sent (monotonic): a lease older
        #: than that may have lapsed, whatever the next renewal finds (_watch_loop).
        self._renewed_at = 0.0
        #: Set once a renewal went through (_watch_loop): the first sweep and the first
        #: room check wait for it.
        self._lease_held = asyncio.Event()
        #: Set when the store answers this node (its start, the end of an outage),
        #: cleared when it is down for it (store_ok, store_failed): what a sweep the
        #: store stopped waits for (_sweep_loop), and each room check (_check_loop).
        self._store_up = asyncio.Event()
        self._store_up.set()
        #: The outages this node has found (store_failed), for a sweep or a room check to
        #: tell whether one began while it ran (_store_failed_since).
        self._outages = 0
        #: When the renewal of the lease loop's last finished turn was sent
        #: (monotonic), and the event its next turn sets as it ends (_watch_loop):
        #: a sweep the store stopped, or a room check it failed, asks that loop
        #: whether the store is down.
        self._lease_turn_sent = 0.0
        self._lease_turn = asyncio.Event()
        #: A renewal is out (_watch_loop): a room check's read of the leases that ends
        #: meanwhile waits for its verdict (check_rooms).
        self._renewing = False
        self._rejoining: asyncio.Future[Any] | None = None
        #: The runs of reads Redis failed of the tail and the wake loop, said once each
        #: unless the lease loop found the store down meanwhile (_ReadFailures).
        self._tail_failures = _ReadFailures(self, _TAIL_FAILED)
        self._wake_failures = _ReadFailures(self, _WAKE_FAILED)
        #: Round trips (ms) of the last samples of the store's clock (clock.py), and
        #: whether a sample slower than SAMPLE_RTT_MAX_MS was used yet (said once).
        self._clock_rtts: deque[float] = deque(maxlen=RTT_WINDOW)
        self._far_said = False
        self._tail_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._check_task: asyncio.Task[None] | None = None
        self._wake_task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Set once :meth:`stop` is done: :meth:`spawn` starts nothing after it.
        self._stopped = False
        #: Rounds this node is certifying a deal for (certify.py), by (room, round).
        self.certifying: dict[tuple[str, int], asyncio.Future[None]] = {}
        #: The task retrying each round's certified deal whose write Redis failed
        #: (certify.py), by (room, round): one per round, however many walks failed.
        self.deal_writes: dict[tuple[str, int], asyncio.Future[Any]] = {}

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._stopped = False
        loop = asyncio.get_running_loop()
        self._tail_task = loop.create_task(self._forever(Defect.TAIL, self._tail_loop))
        self._watch_task = loop.create_task(self._forever(Defect.WATCH, self._watch_loop))
        self._check_task = loop.create_task(self._forever(Defect.WATCH, self._check_loop))
        self._wake_task = loop.create_task(self._forever(Defect.WAKE, self._wake_loop))
        self._sweep_task = loop.create_task(self._forever(Defect.SWEEP, self._sweep_loop))

    async def _forever(self, where: Defect, run: Callable[[], Awaitable[None]]) -> None:
        """Run one of the node's loops for as long as the node runs. Each survives a
        failing store by itself; one that ends on anything else (a defect) is logged,
        counted and started again: a node whose tail had ended never folded another
        node's events again, and its racers waited for frames nobody sent."""
        while True:
            try:
                await run()
            except Exception:
                log.exception("a node loop failed; restarting it", extra={"loop": str(where)})
                self.metrics.defects.labels(where).inc()
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)

    async def stop(self) -> None:
        """Stop everything the node started: its loops, its tasks, its rooms' timers.
        Cancelled tasks run their handlers, which may start more — a retry spawned, a
        tick armed, a certification begun by a fold — so the node cancels again until
        a round ends with nothing left, then stops the rooms' timers once more. Before,
        only the tasks there when the stop began were cancelled: one started while they
        drained outlived the node."""
        loops = [
            self._tail_task,
            self._watch_task,
            self._check_task,
            self._wake_task,
            self._sweep_task,
        ]
        for loop_task in loops:
            if loop_task is not None:
                loop_task.cancel()
        await asyncio.gather(*(t for t in loops if t is not None), return_exceptions=True)
        while True:
            for room in self.rooms.values():
                room.cancel_timers()
            pending = [
                t
                for t in (*self._tasks, *self.certifying.values(), *self.listing_cache.tasks())
                if not t.done()
            ]
            if not pending:
                break
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self._stopped = True
        self.repeated.stop()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run ``coro`` as a task the node keeps (and cancels when it stops). One that
        fails is logged with its traceback when it ends (a defect: asyncio would say
        so only when the task is collected, if ever).

        A node that has stopped starts nothing: the coroutine is closed and a
        cancelled future returned. A request still running when the node stopped
        (its store closed under it) spawned a tick after the stop had cancelled the
        last task (moves._store: a move whose reply is lost ticks its room at once):
        nobody cancelled it, the loop closed with it pending ("Task was destroyed but
        it is pending!") and its handler printed a traceback on a stopped benchmark's
        standard error."""
        if self._stopped:
            if asyncio.iscoroutine(coro):
                coro.close()
            refused: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            refused.cancel()
            return refused
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("background task failed", exc_info=error)
            self.metrics.defects.labels(Defect.TASK).inc()

    async def insist(
        self, attempt: Callable[[], Awaitable[None]], what: str, extra: dict[str, Any]
    ) -> None:
        """Make a write that follows from a decision already stored: now, or, if Redis
        fails it, in a task that retries until Redis lets it (:func:`_until_done`).
        Never raises StoreUnavailable: the decision stands, so the request that made
        it must not be told it failed, and a write given up on leaves the room wrong
        (a racer online for ever, a room whose keys expire mid-race)."""
        try:
            await attempt()
        except (StoreUnavailable, BadMessage) as exc:
            self.keep_trying(attempt, exc, what, extra)

    def keep_trying(
        self,
        attempt: Callable[[], Awaitable[None]],
        exc: StoreUnavailable | BadMessage,
        what: str,
        extra: dict[str, Any],
    ) -> asyncio.Future[Any] | None:
        """``attempt`` has just failed with ``exc``: unless its room is gone or the
        store closed (:func:`_gone`), say so and retry it in a task until Redis lets it
        (:func:`_until_done`). The task, for a caller that keeps one retrier per write
        (certify._retry_the_deal); None if nothing is left to retry."""
        if _gone(exc, what, extra):
            return None
        log.warning(f"{what}: retrying", extra={**extra, "error": str(exc)})
        return self.spawn(_until_done(attempt, what, extra, WRITE_RETRY_S, failed=True))

    async def record_offline(self, room: LiveRoom, racer: int, conn: str) -> None:
        """Record that ``racer``'s connection ``conn`` is gone, retrying until Redis
        lets it: a racer recorded online with no connection anywhere would never start
        its disconnect grace, so a race (or a lobby) would wait for it for ever. Safe to
        retry late: an offline about a connection the racer has since replaced (a
        resume, on any node) writes nothing (decisions.presence)."""
        await self.insist(
            lambda: self.presence(room, racer, False, conn),
            "could not record a racer offline",
            {"room": room.room_id, "racer": racer},
        )

    async def _tail_loop(self) -> None:
        """Fold what other nodes append to the streams of the rooms served here that
        another node serves too (and now and then forget rooms long idle here). A
        room served here alone is not tailed: every event in it is this node's own,
        folded when appended, and reading it back would double the cost of a move.

        A read Redis fails does not say the store down: the lease loop is the judge of
        that (:class:`_ReadFailures`). The tail reads again RETRY_AFTER_FAILURE_S later from each
        room's folded version, whatever the verdict, so what it missed is folded once
        Redis answers it, once and in order. On a Cluster, a read one master failed or
        still holds (Store.tail) is folded at once for the rooms of the others."""
        # The sweep's interval is this node's alone: on the monotonic clock. On the
        # race clock, its first due time was read before the node took the store's
        # clock, and a machine an hour ahead swept nothing for that hour.
        next_sweep = time.monotonic() + IDLE_ROOM_MS / 10_000
        while True:
            positions = {
                rid: room.state.version
                for rid, room in self.rooms.items()
                if room.shared and room.has_peers()
            }
            if time.monotonic() >= next_sweep:
                self._sweep()
                next_sweep = time.monotonic() + IDLE_ROOM_MS / 10_000
            if not positions:
                await asyncio.sleep(TAIL_IDLE_S)
                continue
            mark = (time.monotonic(), self._outages, self._store_down)
            try:
                read = await self.store.tail(positions, block_ms=TAIL_BLOCK_MS)
            except StoreUnavailable as exc:
                self._tail_failures.failed(exc, mark)
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
                continue
            # On a Cluster a master that hangs or fails holds back its own rooms only
            # (Store.tail): what the others read is folded now, the rest read again
            # next turn from each room's folded version. The run of failed reads ends
            # once every room was read.
            if read.failed is not None:
                self._tail_failures.failed(read.failed, mark)
            elif not read.unread:
                self._tail_failures.ended()
            folding: LiveRoom | None = None
            try:
                for room_id, event in read.entries:
                    folding = room = self.rooms.get(room_id)
                    if room is not None and event.version > room.state.version:
                        links = (event.prev, event.chain)
                        with contextlib.suppress(BadMessage):  # lost: closed (history_broken)
                            await self.ingest(room, event.version, unpack_event(event.data), links)
            except StoreUnavailable as exc:
                # A fold may read Redis too (a rebuild after lost writes, a gap): the
                # room's trouble, and what was not folded is read again from each
                # room's folded version. Let through, this ended the tail for good:
                # the node never folded another node's events again, and its racers
                # waited for frames nobody sent.
                if folding is not None:
                    self.store_failed(room=folding)
                self._tail_failures.failed(exc, mark)
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            except Exception:  # the loop must survive anything one room does
                log.exception("folding another node's events failed")
                self.metrics.defects.labels(Defect.TAIL).inc()
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)

    async def join_room(self, room: LiveRoom) -> None:
        """Enter the room's set of serving nodes before serving or appending to it.

        If other nodes are in it, this node tails the room and wakes them so they
        tail it too (Store.join_room_nodes): from then on each sees the other's
        events. Called under the room lock, before the sync that precedes serving.
        """
        if room.joined:
            return
        # Applied with its reply lost (or the call cancelled once sent), the join left
        # this node in the set unserved: no other node's sweep took the room up
        # (leave_unserved leaves it).
        room.maybe_joined = True
        others = await self.store.join_room_nodes(room.room_id, self.node_id)
        room.maybe_joined = False
        # Joined once in the set, whatever the wake does: a take-up whose wake Redis
        # failed was in the set, so no live node's sweep took the room up, but not
        # joined, so not served — nobody served it until this node's next sweep, a
        # minute later (a review, shown). The wake is retried until Redis takes it.
        room.joined = True
        if others:
            room.shared = True
            await self.insist(
                lambda: self.store.wake(others, room.room_id),
                "could not wake the nodes serving a room",
                {"room": room.room_id},
            )

    async def _wake_loop(self) -> None:
        """Start tailing the rooms another node has started serving (Store.wake), after
        catching up with what it may have appended before this node tailed them."""
        after = "0-0"
        while True:
            mark = (time.monotonic(), self._outages, self._store_down)
            try:
                after, room_ids = await self.store.wakes(
                    self.node_id, after, block_ms=WAKE_BLOCK_MS
                )
            except StoreUnavailable as exc:
                # Not the node's outage (_ReadFailures): the wake-ups are read again
                # from the last one read, and the room checks share a room Redis is
                # ahead of meanwhile (_check_alone).
                self._wake_failures.failed(exc, mark)
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
                continue
            self._wake_failures.ended()
            for room_id in room_ids:
                self._share(room_id)

    def _share(self, room_id: str) -> None:
        room = self.rooms.get(room_id)
        if room is not None and not room.shared:
            room.shared = True
            self.spawn(self._catch_up(room))

    async def _catch_up(self, room: LiveRoom) -> None:
        try:
            await self.sync(room)
        except StoreUnavailable:
            self.store_failed(room=room)  # the tail and the room checks catch up later
        except BadMessage:
            pass  # lost, and closed (history_broken)

    # ------------------------------------------------------- leases, rewinds
    @property
    def store_down(self) -> bool:
        """Whether the store failed this node's last call (until it answers again)."""
        return self._store_down

    def store_failed(
        self, error: StoreUnavailable | None = None, room: LiveRoom | None = None
    ) -> None:
        """The store failed a call (``error``, where the caller has it: its words go in
        the line logged per outage, so an operator reads why — Redis unreachable,
        or its user's ACL changed —, and again when the reason changes: Redis back
        but refusing the node's password). A call about one ``room`` is that room's trouble
        until its timer reads it again, when its graces restart (Node.tick): not the
        node's, whose loops notice a store that is down for it. A Cluster slot left
        open failed its rooms' calls every second, and each "outage" of the node
        re-armed every offline racer's grace in every room (nobody was forfeited). Nor
        is a sweep the store stopped (:meth:`_sweep_loop`), a room check it failed
        (:meth:`_check_loop`), nor a read of the tail or the wake-ups it failed
        (:class:`_ReadFailures`): rooms that fail every sweep stopped each one, a room
        that fails every check or tail read failed each one, and each made an outage
        of the node every second. The lease's loop says it (:meth:`_watch_loop`)."""
        if room is not None:
            if not room.store_down:
                room.store_down = True
                self._tick_later(room, TICK_RETRY_S)  # its trouble ends when it reads
            return
        reason = str(error) if error else None
        reasons = self._outage_reasons
        if not self._store_down:
            self._outages += 1
            reasons.clear()
            log.warning("store unavailable", extra={"error": reason})
            reasons.append(reason or "")
        elif reason and reason not in reasons and len(reasons) < OUTAGE_REASONS_LOGGED:
            log.warning("store unavailable", extra={"error": reason})  # its reason changed
            reasons.append(reason)
        self._store_down = True
        self._store_up.clear()

    def store_ok(self) -> None:
        """The store answers again: re-arm every offline racer's grace from now, as
        nobody could reconnect while it was down (an outage is not a forfeit)."""
        if self._store_down:
            self._store_down = False
            self._store_up.set()
            self.grace_floor_ms = self.store_back_ms = self.clock()
            log.warning("store available again: disconnect grace re-armed")
            for room in self.rooms.values():
                self.schedule(room)

    async def sample_clock(self) -> None:
        """Read the store's clock and bring this node's toward it: set to it (a
        step) while the node serves no room yet, else slewed (clock.py). Every node
        of a deployment does, so a room's timed decisions, made by whichever of its
        nodes finds them due first, fall due at one time. A test's injected clock is
        left as it is; a store that does not answer is asked again next time."""
        clock = self.clock
        if not isinstance(clock, SteadyClock):
            return
        anchored = clock.anchored
        before_ns, before_ms = time.monotonic_ns(), clock()
        try:
            reference_ms = await self.store.time_ms()
        except StoreError as exc:
            log.debug("the store's clock was not read: %s", exc)
            return
        after_ns, after_ms = time.monotonic_ns(), clock()
        if clock.anchored != anchored:
            # Another sample (a room request's, the room checks' loop's) set the clock while
            # this one waited: its readings straddle that step, and its midpoint was
            # half the step off (22.5 s of 45), slewed toward and warned about.
            return
        rtt_ms = (after_ns - before_ns) / 1e6
        self._clock_rtts.append(rtt_ms)
        if not sample_usable(rtt_ms, self._clock_rtts):
            return  # the midpoint could be off by half of that: a stall, a busy node
        if rtt_ms > SAMPLE_RTT_MAX_MS and not self._far_said:
            self._far_said = True
            log.warning(
                "Redis is %.0f ms from this node (a round trip): its race clock follows"
                " the store's to within %.0f ms, and every move waits as long"
                ' (docs/deploy.md, "A Redis far away")',
                rtt_ms,
                rtt_ms / 2,
            )
        offset = reference_ms - (before_ms + after_ms) // 2
        if clock.anchored or self.rooms:
            clock.steer(offset)
            return
        clock.anchor(offset)
        self.grace_floor_ms += offset
        if self.store_back_ms:
            self.store_back_ms += offset
        if self._lapse_found_ms:
            self._lapse_found_ms += offset
        log.info("race clock set to the store's: %+.3f s from the system clock", offset / 1000)

    async def clock_before_serving(self) -> None:
        """Take the store's clock now if this node serves no room yet and has not
        taken it (its start-up sample found Redis down, or too far to trust): the
        first room served may only be slewed toward it afterwards (5 ms a second).
        A room request that reached the node once Redis answered, before the watch
        loop's next sample, had it serve a room on its machine's clock — 45 s off,
        its countdowns, time limits and graces followed that clock for hours
        (tests/rooms/test_clock.py). Two round trips, before the first room only.

        The store is asked once unmeasured first: after an outage the node has no
        connection to Redis left, and a sample that timed a new one's set-up (some
        four round trips: 170 ms for a Redis 40 ms away) was dropped as too slow,
        for a Redis whose samples on a live connection are fast enough. A store that
        does not answer raises StoreUnavailable there (the request is refused
        ``unavailable``) after one command timeout: the sample swallowed its failure,
        and the room's own read waited a second timeout."""
        clock = self.clock
        if not self.rooms and isinstance(clock, SteadyClock) and not clock.anchored:
            await self.store.time_ms()
            await self.sample_clock()

    def grace_floor(self, room: LiveRoom) -> int:
        """The earliest a grace of ``room`` counts from: the end of this node's last
        outage, or of the room's own trouble with the store, whichever is later."""
        return max(self.grace_floor_ms, room.grace_floor_ms)

    async def _watch_loop(self) -> None:
        """Renew this node's lease every LEASE_RENEW_S, and judge from the renewals
        whether the store is down for the node (:meth:`store_failed`,
        :meth:`store_ok`). Nothing else runs in this loop: the room checks
        (:meth:`_check_loop`) and the orphan sweep (:meth:`_sweep_loop`) each run in a
        loop of their own, for any of their calls may wait out the store's command
        timeout — the lease's own length — and a renewal held past LEASE_MS finds the
        lease lapsed (:meth:`_lapsed`), other nodes taking this one for dead meanwhile.
        Each turn's end is what a loop Redis failed asks about (:meth:`_store_failed_since`)."""
        while True:
            sent = time.monotonic()
            self._renewing = True
            try:
                current = await self.store.renew_lease(self.node_id, LEASE_MS)
                # Lapsed if Redis says so, or if the last renewal known to have been
                # taken is a lease old: the renewal that re-created the lease may
                # have been taken with its reply lost (a timeout), and the next one
                # found it current — the lapse went unnoticed (a review, shown). A
                # false alarm only joins the rooms' sets again.
                late = time.monotonic() - self._renewed_at > LEASE_MS / 1000
                if (not current or late) and self._leased:
                    self._lapsed()
                self._leased, self._renewed_at = True, sent
                self._lease_held.set()
                self.store_ok()
                if self.older_nodes is None and not self._asking_older:
                    self._asking_older = True
                    self.spawn(self._ask_older_nodes())
            except StoreUnavailable as exc:
                self.store_failed(exc)
            except Exception:  # the loop must survive anything
                log.exception("lease renewal failed")
                self.metrics.defects.labels(Defect.WATCH).inc()
            finally:  # a check waiting for this verdict is not left waiting by a stop
                self._renewing = False
                self._lease_turn_sent = sent
                self._lease_turn.set()
                self._lease_turn = asyncio.Event()
            await asyncio.sleep(LEASE_RENEW_S)

    async def _check_loop(self) -> None:
        """Check the rooms served here (:meth:`check_rooms`), leave those no longer
        served (:meth:`leave_unserved`), and sample the store's clock every
        CLOCK_SAMPLE_S (:meth:`sample_clock`): ROOM_CHECK_S after each check ends, one
        at a time, while the store is up for the node. Apart from the loop that renews
        the lease (:meth:`_watch_loop`), as the sweep is: any of those calls may wait out
        the store's command timeout (the lease's own length) — a room's keys on a
        Cluster master that is down, a slow read, a rebuild waiting for a busy room's
        lock — and in the lease's loop one such wait held the next renewal 6 s after the
        last: Redis let the lease go, other nodes read this one as dead meanwhile, and it
        found its lease lapsed (:meth:`_lapsed`; tests/rooms/test_check_faults.py).

        A check Redis failed does not say the store down: the lease loop is the judge
        of that (:meth:`_store_failed_since`). Said by the check, a room Redis fails
        every time (its slot's master down) made an outage of the node every second,
        the next renewal ended it, and each end re-armed every offline racer's grace:
        nobody was forfeited while it lasted. If the store was down for the node while
        the check ran, the next check comes as soon as it is back (what the outage lost
        is found then); else the check's trouble is said once until a check goes
        through, and the next comes in its turn.

        The first waits for the node's first renewal, as it ran after it in the lease's
        loop. A check marks another node's racers offline only once this node's own
        outage has settled (:meth:`check_rooms`), judged again after the read of the
        leases: run beside the renewals, that read can span an outage they find."""
        await self._lease_held.wait()
        next_clock_sample = 0.0
        failing = False  # said for the run of checks Redis failed
        while True:
            await self._store_up.wait()
            mark = (time.monotonic(), self._outages, self._store_down)
            try:
                if time.monotonic() >= next_clock_sample:
                    await self.sample_clock()
                    next_clock_sample = time.monotonic() + CLOCK_SAMPLE_S
                await self.check_rooms()
                await self.leave_unserved()
                failing = False
            except StoreUnavailable as exc:
                if await self._store_failed_since(*mark):
                    continue  # the next check once the store is back
                if not failing:
                    log.warning(_CHECK_FAILED, extra={"error": str(exc)})
                failing = True
            except Exception:  # the loop must survive anything one room does
                log.exception("room check failed")
                self.metrics.defects.labels(Defect.WATCH).inc()
            await asyncio.sleep(ROOM_CHECK_S)

    async def _sweep_loop(self) -> None:
        """Sweep for orphaned rooms (:meth:`sweep_orphans`): at the node's start, again
        once the lease of a node this one replaces (a restart after a crash) has lapsed
        — its rooms are adopted then, not a minute later —, then ORPHAN_SWEEP_S after
        each sweep ends: one sweep at a time, however long one takes. Apart from the
        loop that renews the lease (:meth:`_watch_loop`): a sweep's read that waited
        out its command timeout (the lease's own length) held the next renewal past
        the lease's lapse, and the node found its lease lapsed. A defect is logged,
        counted, and the next sweep comes in its turn.

        A sweep the store stopped (SWEEP_OUTAGE_ROOMS rooms in a row, or a listing,
        failed by Redis) is said once until a sweep goes through, and does not say the
        store down: the lease loop is the judge of that (:meth:`_store_failed_since`).
        Rooms that fail every sweep (a Cluster master down for their slots, reads that
        time out) stop every sweep, and the sweep said the store down, the next
        renewal a second later said it back, and every offline racer's grace was
        re-armed each time: nobody was forfeited, a race whose racer left never ended.
        If the store is down for the node, the next sweep comes as soon as it is back
        (the orphans of a real outage adopted then); else in its turn, not a second
        later (rooms that fail every time are not read again and again).

        The first waits for the node's first renewal, as it did in the lease's loop: a
        room it takes up names this node among its serving nodes, and another node's
        sweep that read that set before the lease was there could take this node for a
        dead one and take it out (reasoned, not seen). A sweep that left rooms because
        this node's own outage, or lapse, had not settled (:meth:`_orphan`) is followed
        by the next as soon as it has."""
        await self._lease_held.wait()
        wait = LEASE_MS / 1000 + LEASE_RENEW_S
        stopped = False  # said for the run of sweeps the store stopped
        while True:
            mark = (time.monotonic(), self._outages, self._store_down)
            self._sweep_deferred = False
            try:
                await self.sweep_orphans()
                stopped = False
            except StoreUnavailable as exc:
                if not stopped:
                    log.warning(_SWEEP_STOPPED, extra={"error": str(exc)})
                stopped = True
                if await self._store_failed_since(*mark):
                    await self._store_up.wait()
                    continue
            except Exception:
                log.exception("orphan sweep failed")
                self.metrics.defects.labels(Defect.SWEEP).inc()
            if self._sweep_deferred:
                # Rooms whose nodes' leases could not be judged yet (_orphan): swept
                # again as soon as this node's outage, or lapse, has settled.
                while not self._outage_settled():
                    await asyncio.sleep(LEASE_RENEW_S)
                continue
            await asyncio.sleep(wait)
            wait = ORPHAN_SWEEP_S

    async def _store_failed_since(self, since: float, outages: int, down: bool) -> bool:
        """Whether the store was down for this node at some time from ``since``
        (monotonic; it had found ``outages`` outages then, and was ``down`` or not)
        to the end of the lease loop's first turn whose renewal was sent after it: an
        outage that has just begun may fail a sweep (or a room check) before it fails a
        renewal, and one shorter than a turn may be over by then (a test's was). Taken
        for rooms' trouble, its orphans waited a whole turn after Redis came back."""
        while self._lease_turn_sent < since:
            await self._lease_turn.wait()
        return down or self._store_down or self._outages != outages

    async def check_rooms(self) -> None:
        """Check the rooms served here against Redis (Store.heads): one whose version
        there is below what this node delivered, or the same with another last event,
        lost writes and is rebuilt (:meth:`lost_writes`); one Redis is ahead of while
        this node thinks it serves it alone is tailed (:meth:`_check_alone`). Then mark
        offline the racers recorded online on nodes whose lease is gone (dead), once
        this node's own outage has settled (:meth:`_outage_settled`)."""
        served = {rid: room for rid, room in self.rooms.items() if room.served()}
        # What each room had delivered when asked (it may fold more meanwhile), and
        # whether its keys were set to expire then (LiveRoom.expiring).
        delivered = {
            rid: (room.state.version, room.chain, room.expiring()) for rid, room in served.items()
        }
        heads = await self.store.heads(list(delivered))
        for room_id, (version, chain) in heads.items():
            room = served[room_id]
            mine, link, expiring = delivered[room_id]
            if expiring and (version == 0 or not chain):
                # Its keys expired (or are expiring: not all go at the same instant).
                # A version that is there is still checked: a finished race's keys that
                # came back older (Redis restored from a snapshot taken before its
                # race_over) went unnoticed, and another node later archived another
                # result under the race's id (an audit, reproduced).
                continue
            if version < mine:
                await self._rebuild_checked(room, f"Redis is at version {version}, not {mine}")
            elif version == mine and chain != link:
                await self._rebuild_checked(room, f"event {mine} is not the one delivered")
            elif not room.shared:
                self._check_alone(room, version)
        others = {
            r.node
            for room in served.values()
            for r in room.state.racers.values()
            if r.online and r.node is not None and r.node != self.node_id
        }
        if not others:
            return
        live = await self._live_if_settled(others)
        if live is None:
            return
        dead = others - live
        for room in served.values():
            for member in list(room.state.racers.values()):
                if member.online and member.node in dead:
                    log.warning(
                        "racer's node lost its lease: offline",
                        extra={"room": room.room_id, "racer": member.racer, "node": member.node},
                    )
                    try:
                        await self.presence(room, member.racer, False, member.conn)
                    except BadMessage as exc:
                        if not no_longer_there(exc):
                            raise
                        break  # lost meanwhile (history_broken, room_lost): closed

    async def _live_if_settled(self, nodes: set[str]) -> set[str] | None:
        """The nodes of ``nodes`` whose lease Redis holds (Store.live_nodes), or None
        while this node may not take a missing lease for a death (:meth:`_outage_settled`),
        judged before the read and again after it: the read, out beside the renewals,
        can span an outage they find, or a stall that ends with a renewal finding this
        node's lease lapsed. What such a read found is not acted on. What the room
        checks (:meth:`check_rooms`), the orphan sweep (:meth:`_orphan`,
        :meth:`_adopt`) and a draining node (:meth:`_replace_dead_co_servers`) read a
        death from.

        A lease missing is read again, once the first read's answer is in: only what
        both reads miss is gone. Redis answers what a stall held all at once as it
        ends, in no set order, so a read out in a stall shorter than the command
        timeout but longer than another node's lease's remainder may be answered
        before that node's renewal, held in the same stall — while this node's own
        lease, renewed a little later, outlives the stall: its renewal finds no lapse,
        no outage, and that node's racers were marked offline (a flash: it renews a
        moment later; tests/rooms/test_check_faults.py). With the real lengths that
        happens: renewed every LEASE_RENEW_S (1 s), a lease (LEASE_MS, 5 s) has 4 to 5 s
        left, so a stall of 4 to 5 s, within the command timeout (5 s), can outlast one
        node's lease and not another's. A read sent once the first one's answer is in
        comes after every call Redis held then, that renewal among them. Not a limit on
        the read's round trip: a read sent late in the stall is answered in the same
        go, its round trip short. One round trip more, only when a lease is missing."""
        if not self._outage_settled():
            return None
        live = await self.store.live_nodes(nodes)
        if live != nodes:
            live = live | await self.store.live_nodes(nodes - live)
        if self._renewing:
            # A renewal out while the leases were read: its verdict first. A stall of
            # Redis shorter than the command timeout answers both as it ends, the
            # read perhaps first, and before other nodes' renewals it held: the
            # renewal finds this node's lease lapsed, and the read other nodes' gone.
            await self._lease_turn.wait()
        if not self._outage_settled():
            # The lease loop found the store down, or this node's lease lapsed, while
            # the leases were read (the read waited out a stall the renewal timed out
            # in, or was answered with it): what it read may be leases that lapsed in
            # that stall (tests/rooms/test_check_faults.py).
            return None
        return live

    def _outage_settled(self) -> bool:
        """Whether this node may take another node's missing lease for its death: the
        store is up for it, and its last outage ended, and the last lapse of its own
        lease was found, _outage_settle_ms ago. Right after an outage every other node's
        lease may have lapsed too: they renew once their own calls see Redis again, and
        were marked dead (their racers offline, then online again a moment later) by
        whichever node came back first. So after a lapse of this node's own lease
        without an outage (a stall of Redis shorter than the command timeout: every
        call out in it answered late): a check's read of the leases, out beside the
        renewal, was answered before other nodes' renewals the stall held (a review,
        shown). A node really dead is still dead once that time has passed."""
        if self._store_down:
            return False
        since = max(self.store_back_ms, self._lapse_found_ms)
        return self.clock() - since >= self._outage_settle_ms()

    def _outage_settle_ms(self) -> float:
        """How long after its own outage ends a node waits before it takes another
        node's missing lease for its death: the other node's renewal may be a call
        that waits out the store's command timeout, then a renewal interval, before its
        lease is back (a partition healing: Redis answered this node first); and a
        lease more, so that a lease renewed at the last moment is seen."""
        return LEASE_MS + (self.store.timeout_s + LEASE_RENEW_S) * 1000

    async def leave_unserved(self) -> None:
        """Leave the set of serving nodes of each room this node is in but no longer
        serves (:meth:`LiveRoom.served`): a spectator of it left, a request decided on
        it (a refused join) and went, its race ended, or the node stopped serving it
        idle (:meth:`_sweep`). Every other node's sweep reads a live node in the set as
        serving the room: kept in, two such nodes each left the room to the other, and
        a race whose serving node died was never taken up — it never ended, never was
        archived (a fault test). This node's own sweep still takes the room up if it is
        orphaned, as any node's does.

        Each room under its lock, taken only if nobody holds it or waits for it (a
        room in use is asked again a second later): taken without yielding, so no
        request joins the set in between and finds itself out of it — a waiting watch
        that went first served the room from outside its set (a review, shown). Nor a
        room whose join again after a lapse is out (:meth:`_rejoin_room`, not under the
        lock): left first, that join could land after the leave. Not a
        room with a racer recorded online here (:meth:`_joining_here`: its attachment
        is coming). One round trip for them all (Store.leave_rooms). Marked out of the
        set before the leave and unsure of it until Redis answers: a leave applied with
        its reply lost, or refused, is asked again at the next check, and a request
        meanwhile joins again (a leave left "joined" out of the set had every later
        request skip the join)."""
        held: list[LiveRoom] = []
        try:
            for room in list(self.rooms.values()):
                if (
                    (room.joined or room.maybe_joined)
                    and not room.served()
                    and not self._joining_here(room)
                    and not room.rejoining
                    and _free(room.lock)
                ):
                    await room.lock.acquire()  # free: taken without yielding
                    held.append(room)
            if not held:
                return
            for room in held:
                room.joined = room.shared = False
                room.maybe_joined = True
            left = await self.store.leave_rooms({r.room_id: {self.node_id} for r in held})
            for room in held:
                if room.room_id in left:
                    room.maybe_joined = False
        finally:
            for room in held:
                room.lock.release()

    async def sweep_orphans(self) -> None:
        """Look after the rooms no live node looks after: every node that served them
        died, and nobody asks for them again (their racers did not come back).

        Races: a room is noted, with the race's round, before its countdown and before
        its race_over are decided (Store.mark_unarchived), and the note is cleared
        once that round's result is saved (:meth:`_clear_note`). A running race is
        adopted (:meth:`_adopt`): otherwise it would run on, unarchived, until its keys
        expired a day later. An ended race whose result is missing is archived:
        loading the room folds its events, which archives every race it ended
        (:meth:`_archive`) and decides a race_over that is due. A note is cleared here
        only once the room's last result is saved (a lobby's: the rounds before its
        own) or its keys are gone; a lobby noted for its own round, a countdown its
        node died before storing, is adopted (its racers leave, its keys go).

        Lobbies: a listed lobby is adopted too, so its dead racers leave when their
        grace ends instead of sitting in the list, ready to be joined, for a day; one
        everyone left, its node dead before it was unlisted, is unlisted, its code and
        logs given the room's expiry. So is a lobby no listing holds (a private room, a
        rematch: Store.note_unlisted), found by its note."""
        passing = _SweepFailures(self, last=self._sweep_failed)
        adopted = 0
        try:
            noted = await self.store.unarchived_rooms()
            for room_id in passing.first(noted, self._sweep_noted):
                adopted += await passing.over(room_id, self._sweep_noted(room_id))
            # Lobbies nobody is in sort behind the races: read apart, or a dead node's
            # idle lobbies past the newest hundred rooms were never adopted.
            lobbies = [*await self.store.listed_rooms(), *await self.store.idle_lobbies()]
            for room_id in passing.first(lobbies, self._sweep_listed):
                adopted += await passing.over(room_id, self._sweep_listed(room_id))
            # Lobbies no listing holds (private rooms, rematches): noted apart, or a
            # dead node's private lobby waited for its racers for a day.
            unlisted = await self.store.unlisted_lobbies()
            for room_id in passing.first(unlisted, self._sweep_unlisted):
                adopted += await passing.over(room_id, self._sweep_unlisted(room_id))
            adopted += await passing.then()
        finally:
            self._sweep_failed = passing.unfinished()
        if adopted:
            await self.check_rooms()  # the dead nodes' racers go offline: their grace starts
        if self.taken_up:
            # Every room those nodes handed off that no live node serves was taken up
            # by this sweep (or is served by the node that took it up meanwhile): their
            # notes have done their work. Kept, each drain left a key behind. (Another
            # node sweeping the same rooms at that instant may take one up with the
            # warning instead: a log line, never a room left or served twice.)
            await self.store.forget_hand_offs(self.taken_up)
            self.taken_up.clear()

    async def _sweep_noted(self, room_id: str) -> int:
        """The sweep's work on a room noted as awaiting its archive (:meth:`sweep_orphans`):
        1 if it adopted the room, else 0."""
        try:
            room = await self._orphan(room_id)
        except BadMessage as exc:
            if exc.code == ErrorCode.UNKNOWN_ROOM:
                await self.store.clear_unarchived(room_id)  # its keys expired
            return 0
        if room is None:
            return 0
        if room.state.phase in (Phase.COUNTDOWN, Phase.RACING):
            return int(await self._adopt(room))
        race = _last_race(room)
        if room.state.phase == Phase.LOBBY:
            # Back in the lobby (a rematch begun before the deciding node's clear):
            # the races before this round are archived (a rematch saves its race's
            # result first: _history_to_trim), so a note of theirs goes. Kept, every
            # sweep loaded the room until its keys expired. A note of this round
            # stays: a countdown noted it, and may be storing itself now (its node
            # paused past its lease stores it when it wakes). (A rematch's lobby is
            # taken up by its own note too, written before its reset: _sweep_unlisted.)
            await self._clear_note(room, room.state.round - 1, room.state.version)
            if room.expiring() or await self.store.archive_note(room.room_id) is None:
                return 0
            # That countdown's node died before storing it: the lobby is adopted,
            # so its dead racers leave when their grace ends and its keys (and the
            # note with them) go ten minutes later — or a countdown stored after all
            # runs on this node, noted. Left, every sweep of every node loaded the
            # room once a minute for its day (a private lobby: no listing adopts it).
            return int(await self._adopt(room))
        if race is None or room.state.phase != Phase.FINISHED:
            return 0
        if await self.store.load_result(race) is not None:
            await self._archived_last(room, swept=True)
        return 0

    async def _sweep_listed(self, room_id: str) -> int:
        """The sweep's work on a listed room or an idle lobby (:meth:`sweep_orphans`): 1
        if it adopted the room, else 0."""
        try:
            room = await self._orphan(room_id)
        except BadMessage as exc:
            if exc.code == ErrorCode.UNKNOWN_ROOM and await self.store.load_meta(room_id) is None:
                # Its keys expired while it was listed (a fault cut its unlisting
                # and Redis, or every node, was down past its ten minutes): as a
                # ``list`` does. Skipped, it stayed listed as long as nobody
                # listed, read again by every sweep. Only once its meta is seen
                # gone: a room still there is never unlisted on a passing refusal.
                await self.store.unlist(room_id)
            return 0
        if room is None:
            return 0
        if room.state.everyone_left():
            # Its last leave is stored, with the room's ten minutes, but not what
            # follows it (its node died between: unlisted, its code and logs on
            # the room's expiry, Node._after_decision). Nothing else would: a
            # ghost lobby listed until its keys expired and a ``list`` read found
            # it gone, its join code kept for its day-long cap. Final: a room
            # everyone left takes nobody new, so nothing can lengthen its expiry.
            await self.store.settle_expiry(room_id, unlist=True, final=True)
            return 0
        if listing.never_joined(room.state, room.meta.created_ms, self.clock()):
            # Its create was cut after its listing, its creator's join never stored
            # and its code told to nobody: as a ``list`` does (its keys expire on a
            # new room's ten minutes). Adopted instead, it stayed listed, with nobody
            # in it, as long as nobody listed. A quick room leaves its variant's
            # quick lobbies first, the listing last: a fault between leaves it
            # listed for the next sweep (and the next quick drops it too).
            await listing.drop_never_joined(self, room)
            return 0
        if not room.expiring():
            await self._settle_first_join(room)
            return int(await self._adopt(room))
        return 0

    async def _sweep_unlisted(self, room_id: str) -> int:
        """The sweep's work on a room noted as a lobby no listing holds
        (Store.note_unlisted: a private room, a rematch): 1 if it adopted the room,
        else 0. Its note goes once the room is no such lobby: its race began (noted
        for its archive then) or ended, everyone left it, nobody ever joined it, or
        its keys are gone."""
        try:
            room = await self._orphan(room_id)
        except BadMessage as exc:
            if exc.code == ErrorCode.UNKNOWN_ROOM and await self.store.load_meta(room_id) is None:
                await self.store.forget_unlisted(room_id)  # its keys expired
            return 0
        if room is None:
            return 0
        state = room.state
        if state.phase != Phase.LOBBY:
            # Unless a rematch noted the room for a later round: decided by another
            # node meanwhile (its note, then its reset), or cut between the two (the
            # note goes with the finished room's keys, within its hour). A check of
            # the stream's version, then the forget, lost the note of a rematch
            # decided between the two (a review).
            await self.store.forget_unlisted(room_id, state.round)
            return 0
        if state.everyone_left():
            # Its last leave is stored, with the room's ten minutes; what follows it
            # (its code and logs on that expiry) may not be (its node died between).
            await self.store.settle_expiry(room_id, final=True)
            await self.store.forget_unlisted(room_id)
            return 0
        if listing.never_joined(state, room.meta.created_ms, self.clock()):
            # A create cut before its creator's join: its keys expire on a new
            # room's ten minutes by themselves, and nobody can join it by a code
            # told to nobody.
            await self.store.forget_unlisted(room_id)
            return 0
        if not state.racers:
            # Being created (its note is written before its creator's join, and
            # before its node joins the room's nodes): nobody in it to take up, as
            # a listed one (_sweep_listed). Taken up, a sweep warned of adopting a
            # room no live node serves, and served it beside its node.
            return 0
        await self._settle_first_join(room)
        return int(await self._adopt(room))

    async def _settle_first_join(self, room: LiveRoom) -> None:
        """Before a lobby is taken up: its join code given the room's expiry, in case
        its node died between its first racer's join, which gave the room its day, and
        the code's settle (Node._after_decision), and the code would go with a new
        room's ten minutes. Idempotent (the code's expiry only grows)."""
        await self.store.settle_expiry(room.room_id)

    async def _orphan(self, room_id: str) -> LiveRoom | None:
        """The room, loaded, if no live node looks after it; else None. Raises
        BadMessage (unknown_room) if its keys are gone."""
        known = self.rooms.get(room_id)
        if known is not None and known.served():
            return None  # this node's own timers and archive look after it
        others = await self.store.room_nodes(room_id) - {self.node_id}
        if others:
            live = await self._live_if_settled(others)
            if live is None:
                # Right after this node's outage, or a lapse of its own lease, the
                # nodes that served it may be alive, their renewals held in the same
                # stall: taken up, a live node's room was served by two nodes, and it
                # was taken out of the room's set (tests/rooms/test_sweep_settle.py).
                # Swept again once that has settled (_sweep_loop).
                self._sweep_deferred = True
                return None
            if live:
                return None  # a live node that served it does
        room = await self.room(room_id)
        return None if self._joining_here(room) else room

    def _joining_here(self, room: LiveRoom) -> bool:
        """Whether a racer of ``room`` is recorded online on this node: its join (a new
        room's creator's too) or resume is between its decision and its attachment
        (lobby._enter_as_racer), after which this node serves the room. Adopted in
        between, a room being opened was logged as one no live node serves (a soak
        audit, one node, none dead). Not a join that failed: its racer is recorded
        offline (lobby._join), and nobody runs its grace unless the sweep adopts it."""
        return any(r.online and r.node == self.node_id for r in room.state.racers.values())

    async def _adopt(self, room: LiveRoom) -> bool:
        """Serve a room every node serving it has left (see :meth:`sweep_orphans`): its
        checks mark the dead nodes' racers offline, and its timers let them leave when
        their grace ends and end the race (or its time limit does). False if this node
        serves it already. Said at INFO when every node that served it drained
        (:meth:`hand_off`: a clean restart's own rooms), else as a dead node's, a
        warning: a restart warned of the rooms it had itself drained (an audit).

        The nodes it takes the room over from leave the room's set of serving nodes
        (Store.leave_room_nodes), once this node is in it: the next take-up judges the
        nodes that served the room since. Kept, a node that crashed long before made
        every later take-up warn, after a drain too (an audit). Only nodes still not
        live are taken out: one that joined meanwhile serves it."""
        async with room.lock:
            # Asked under the lock: two sweeps at once (the loop's, and one a caller
            # asked for) both saw the room unserved before either joined it, and it
            # was adopted, logged and joined twice (a CI run under load).
            if room.served():
                return False
            served_by = await self.store.room_nodes(room.room_id) - {self.node_id}
            handed_off = await self.store.handed_off(served_by)
            if served_by and handed_off == served_by:
                log.info(
                    "taking up a room its node handed off when it stopped",
                    extra={"room": room.room_id, "nodes": ",".join(sorted(served_by))},
                )
                self.taken_up |= handed_off
            else:
                log.warning("adopting a room no live node serves", extra={"room": room.room_id})
            await self.join_room(room)
            room.serving = True
            # Armed as soon as it is served: armed after the replacement below, a
            # room whose replacement Redis failed was served here (so no sweep took
            # it up again) but never ticked — its racers' graces, already running,
            # never ran out, and its race never ended (a fault test). The replacement
            # failing only leaves the nodes it replaces to be judged again.
            self.schedule(room)
            live = await self._live_if_settled(served_by)
            gone = set() if live is None else served_by - live  # unsettled: judged again
            await self.store.leave_room_nodes(room.room_id, gone)
        return True

    def _lapsed(self) -> None:
        """This node's lease had lapsed (a stall, a partition) and is renewed: another
        node's sweep may have taken its rooms up meanwhile and replaced it in their sets
        of serving nodes (:meth:`_adopt`, Store.leave_room_nodes). Left out, this node
        served on a room whose set no longer named it: the next take-up of it (the other
        node drained) made a second node serve it, its INFO a hand-off while this node
        was live, and a node joining it later did not wake this one. So it joins them
        again (:meth:`_rejoin_after_lapse`), in a task of its own: one round trip a
        room, which must not hold up the next renewal. A new lapse starts it over.
        Other nodes' leases may have lapsed with this one's: none is taken for a death
        until the lapse has settled (:meth:`_outage_settled`)."""
        self._lapse_found_ms = self.clock()
        if self._rejoining is not None:
            self._rejoining.cancel()
        self._rejoining = self.spawn(self._rejoin_after_lapse())

    async def _rejoin_after_lapse(self) -> None:
        """Join the rooms' sets at once, and once more when a take-up that read this
        node's lease as gone just before the renewal has made its removal (it does at
        once, within the store's command timeout): that removal may come after the
        first join. Each room until Redis takes it, on its own: one room's failure (a
        Cluster slot left open) is that room's trouble (``store_failed(room=…)``), and
        the rooms after it are joined meanwhile. Counted as the node's outage, it
        re-armed every offline racer's grace at each renewal, and retried in order,
        the rooms after the failing one were never joined (a review, shown)."""
        for delay in (0.0, self.store.timeout_s + LEASE_RENEW_S):
            await asyncio.sleep(delay)
            left = [room.room_id for room in self.rooms.values()]
            while left:
                left = await self._rejoin_rooms(left)
                if left:
                    await asyncio.sleep(RETRY_AFTER_FAILURE_S)

    async def _rejoin_rooms(self, room_ids: list[str] | None = None) -> list[str]:
        """Join again the sets of serving nodes of the rooms this node serves (of
        ``room_ids``, else all). Each is a join (:meth:`join_room`): the other nodes
        are woken, so they tail the room. Returns the rooms Redis failed."""
        failed = []
        ids = list(self.rooms) if room_ids is None else room_ids
        for room_id in ids:
            room = self.rooms.get(room_id)
            if room is None:
                continue
            try:
                await self._rejoin_room(room)
            except StoreUnavailable:
                self.store_failed(room=room)
                failed.append(room_id)
        return failed

    async def _rejoin_room(self, room: LiveRoom) -> None:
        """Join the room's set again if this node serves it and is in it by its own
        reckoning (``joined``). Marked ``rejoining`` while the join is out, which
        :meth:`leave_unserved` leaves alone (it asks again at its next check): a join
        read as served, then written after the node stopped serving the room and left
        its set, would put it back there for good. Judged and marked without yielding,
        so no leave is under way (it would have made the room not ``joined``).

        Not under the room's lock: a Redis that took the SADD and never answered held
        it up to the store's command timeout, and every request of the room — a move's
        fold, and so its racer's next move — waited for it (a review, shown). The node
        serves the room all along, as it did while out of the set after its lapse."""
        if not (room.joined and room.served()):
            return
        room.rejoining += 1
        try:
            others = await self.store.join_room_nodes(room.room_id, self.node_id)
        finally:
            room.rejoining -= 1
        if others:
            await self.store.wake(others, room.room_id)
            self._share(room.room_id)

    def _check_alone(self, room: LiveRoom, version: int) -> None:
        """A room this node thinks it serves alone: if Redis is ahead of what it has
        folded two checks running — by more than this node's own appends in flight,
        which it folds within milliseconds — another node appends to it (its wake-up
        was lost, e.g. in a Redis restart): tail the room from now on. One check is not
        enough: a move of this node's own is often between its append and its fold."""
        behind = version > room.state.version
        if behind and room.ahead_seen is not None and room.state.version < room.ahead_seen:
            self._share(room.room_id)
        room.ahead_seen = version if behind else None

    async def presence(self, room: LiveRoom, racer: int, online: bool, conn: str | None) -> None:
        """Record a connection of ``racer`` coming (on this node) or going."""
        await self.decide(
            room,
            lambda: decide_.presence(room.state, racer, online, conn),
            conn=conn,
            node=self.node_id if online else None,
        )

    async def _rebuild_checked(self, room: LiveRoom, what: str) -> None:
        """:meth:`lost_writes`, for the room check: a room whose rebuild finds its
        history broken is lost and closed by then (:meth:`history_broken`), and the
        check goes on to the next room."""
        with contextlib.suppress(BadMessage):
            await self.lost_writes(room, what)

    async def lost_writes(self, room: LiveRoom, what: str) -> None:
        """Redis holds less than this node acknowledged or delivered: say so loudly,
        rebuild the room from what Redis has, and resynchronise every client here from
        a fresh snapshot with a notice naming what was lost. Not for a room closed
        while this waited for its lock (no longer this node's, as :meth:`room_lost`):
        two room checks that both read the lost room's head before either closed it
        counted the loss twice and closed the room twice (CI under load)."""
        async with room.lock:
            if self.rooms.get(room.room_id) is not room:
                return
            await self._resync_locked(room, what)

    def client_ahead(self, room: LiveRoom, since: int) -> None:
        """A client had seen version ``since`` of the room, which the store does not
        hold: writes were lost before this node knew the room (lobby._rewound tells the
        client). Said and counted once per room while this node holds it: every client
        of the room may bring the same news, and a client may also just be wrong."""
        if room.ahead_reported:
            return
        room.ahead_reported = True
        log.error(
            "Redis lost acknowledged writes: resynchronising clients",
            extra={
                "room": room.room_id,
                "version": room.state.version,
                "detail": f"a client had seen version {since}",
            },
        )
        self.metrics.lost_writes.inc()

    async def _resync_locked(self, room: LiveRoom, what: str) -> None:
        if room.rebuilding:
            # Called again from within the rebuild (it folds what Redis holds, and
            # announces it once): a rebuild that re-checked the history it was
            # folding found a stored break again and rebuilt again, without end —
            # RecursionError, 20,000 log lines in 5 s (an audit: a lost chain key).
            return
        before = room.state.version
        log.error(
            "Redis lost acknowledged writes: resynchronising clients",
            extra={"room": room.room_id, "version": before, "detail": what},
        )
        self.metrics.lost_writes.inc()
        room.rebuilding = True
        try:
            # Read before the fold is forgotten: if Redis fails the read, the room
            # stays as its clients saw it, and the tail or the room check that found
            # the loss finds it again. Forgotten first, a later sync folded the whole
            # history again as live events, and no client was told to resynchronise.
            entries = await self.store.events_since(room.room_id, 0)
            if not entries and await self.store.load_meta(room.room_id) is None:
                self._room_gone(room)
                return
            room.reset()
            await self._fold_entries(room, entries, live=False)
        finally:
            room.rebuilding = False
        after = room.state.version
        lost = max(0, before - after)
        message = (
            f"the server lost its last changes to this room ({what}); "
            f"continuing from version {after}"
        )
        try:
            await resync_clients(self, room, message, lost)
        except StoreUnavailable:
            # The room is rebuilt, so nothing finds the loss again: its clients (whose
            # view Redis no longer holds) must still get their notices.
            self.store_failed(room=room)
            resync = functools.partial(resync_clients, self, room, message, lost)
            self.retry_locked(room, "could not resynchronise clients", resync)

    def room_lost(self, room: LiveRoom) -> None:
        """A write found the room's meta key gone (the store refused it): a lost write,
        counted once, and the room closed as :meth:`_room_gone` closes it. Not again
        for a room closed meanwhile (no longer this node's): a move's append that was
        out while the room check found the loss counted it a second time. Nor for a
        room being rebuilt (:meth:`_resync_locked`): the rebuild counted the loss, and
        closes the room if it finds nothing left; an append that came back refused
        while it read the room back counted it again (CI under load,
        tests/rooms/test_core.py)."""
        if self.rooms.get(room.room_id) is not room or room.rebuilding:
            return
        self.metrics.lost_writes.inc()
        self._room_gone(room)

    def history_broken(self, room: LiveRoom, detail: str) -> None:
        """The room's stream jumps a version (1..5, then 13), or ends below its version
        key (1..5, the key at 13: the next move is stored at 14), as ``detail`` says: a
        restore of the room's keys one by one under a node's writes, or an
        operator's partial one, left an event stored past events that are gone. No
        Redis rewind makes one (a restart or a promoted replica gives back a prefix of
        the stream), and no fold can mend it: folding on across the gap invents the
        state the missing events decided, and trimming the stream back to before it
        drops what was decided since — a finish, a winner — which must stand. So the
        room is lost, as one whose meta key is gone (:meth:`room_lost`): its
        connections closed ``room_gone``, a resume answered ``unknown_room``, and its
        stream left as it is, to expire with the room. Folded on, every node stopped
        at the gap: each request refused, each tick retried for ever, the race never
        ended (a CI run's partial restore, reproduced in
        tests/rooms/test_broken_history.py)."""
        if room.room_id not in self._broken:
            # Once a node: each load of the room finds it again (a join by its code,
            # a sweep), which logged and counted it every minute until its keys expired.
            self._broken.add(room.room_id)
            log.error(
                "Redis holds the room's history with a gap: closing its connections",
                extra={"room": room.room_id, "version": room.state.version, "detail": detail},
            )
            self.metrics.lost_writes.inc()
            # Out of the listing, which every sweep (listed lobbies) and every list read.
            self.spawn(self._unlist_broken(room.room_id))
        self._close_room(room)

    async def _unlist_broken(self, room_id: str) -> None:
        """Take a room whose history is broken out of the listing (a listing write, not
        the room's): best effort, ``list`` unlists a room it cannot load too."""
        with contextlib.suppress(StoreUnavailable):
            await self.store.unlist(room_id)

    def _room_gone(self, room: LiveRoom) -> None:
        """Redis holds nothing of the room any more (it restarted empty, without
        persistence): there is no state to resynchronise to. Every connection of the
        room is closed ``room_gone`` (1001: reconnect and resume — the resume then
        answers that the room no longer exists, the end a client shows) and the room
        is forgotten. Sent a resync instead, racers got an empty lobby that Redis did
        not hold either, refused every move and never saw an end (an audit)."""
        log.error(
            "Redis lost the whole room: closing its connections", extra={"room": room.room_id}
        )
        self._close_room(room)

    def _close_room(self, room: LiveRoom) -> None:
        """Close every connection of a room Redis lost ``room_gone`` and forget it."""
        for peer in [*room.racers.values(), *room.spectators]:
            peer.detach()  # its close must not write about a room Redis no longer has
            peer.close_later(CloseCode.GOING_AWAY, CloseReason.ROOM_GONE)
        room.racers.clear()
        room.spectators.clear()
        room.cancel_timers()
        if self.rooms.get(room.room_id) is room:  # not a newer load of it
            del self.rooms[room.room_id]

    def retry_locked(
        self, room: LiveRoom, what: str, body: Callable[[], Awaitable[None]], **extra: object
    ) -> None:
        """Run ``body()`` under the room's lock in a task of its own, again and again
        until Redis lets it finish (:func:`_until_done`; failures logged as ``what``):
        for what must still happen after a stored event whose read Redis failed, when
        nothing else would do it (a racer's board, clients' resync notices, a
        decision's writes)."""

        async def attempt() -> None:
            async with room.lock:
                await body()

        self.spawn(_until_done(attempt, what, {"room": room.room_id, **extra}, WRITE_RETRY_S))

    # ---------------------------------------------------------------- rooms
    async def room(self, room_id: str) -> LiveRoom:
        room = self.rooms.get(room_id)
        if room is None:
            await self.clock_before_serving()
            raw = await self.store.load_meta(room_id)
            if raw is None:
                raise BadMessage(ErrorCode.UNKNOWN_ROOM, f"no room {room_id}")
            # The rounds whose seed went out, as the store knows them: a client's proof
            # given to any node (lobby._proof) outlives that node's memory of the room.
            over = await self.store.round_over(room_id)
            room = self.rooms.setdefault(room_id, LiveRoom(RoomMeta.decode(raw)))
            room.revealed_round = max(room.revealed_round, over)
        room.last_used_ms = self.clock()
        await self.sync(room)
        await self._archived_already(room)
        wake = decide_.next_wakeup(room.state, self.grace_floor(room), room.end_due())
        if wake is not None and wake <= self.clock():
            # A timer nobody ran (every node serving the room had gone): catch up now.
            await self.tick(room)
        return room

    async def _archived_already(self, room: LiveRoom) -> None:
        """A room taken up under way whose round's result is archived: the store lost
        the race_over (its keys rewound; on a Cluster the archive lives in another
        slot) and the seed went out with it. The archive is the proof a client's resume
        would bring (lobby._proof), held by the store itself: the round is closed to
        moves in the store (Store.reveal_round) and ends at once, as at its time limit.
        Before, only a client that sent the proof back ended it, and one that did not
        (an audit's racer, holding the seed) played the revealed deal on: 528 moves,
        finished. One read a round: when a node takes up a room under way, and when a
        countdown's start is decided (:meth:`tick`): a room taken up between rounds (its
        keys rewound to a results screen) re-deals the lost round, whose seed and salt
        are its number's, and looked at only on taking up, that round was raced with its
        seed known (a review, shown). Again on the next request or tick if Redis failed
        it: StoreUnavailable."""
        state = room.state
        commitment = state.commitment
        if (
            state.phase not in (Phase.COUNTDOWN, Phase.RACING)
            or room.seed_revealed()
            or commitment is None
            or commitment == room.archive_checked
        ):
            return
        stored = await self.store.load_result(race_id(room.room_id, commitment))
        if stored is None or unpack(stored)["result"].get("commitment") != commitment:
            room.archive_checked = commitment
            return
        round_no = state.round
        before = await self.store.reveal_round(room.room_id, round_no)
        room.revealed_round = max(room.revealed_round, round_no, before)
        room.archive_checked = commitment
        if before < round_no:
            log.warning(
                "the round's result is archived: its seed was already revealed (a store"
                " rewind): the race ends now, as at its time limit",
                extra={"room": room.room_id, "detail": f"round {round_no}"},
            )

    def _sweep(self) -> None:
        """Forget rooms this node has not served for a while; the store keeps
        everything, and :meth:`room` reloads them on demand. Only long-idle rooms go,
        so no request in progress can still hold one (which would leave its peer
        attached to a room object the node no longer folds events into). Nor a room
        whose timer this node keeps for a decision still to come — a grace, a lobby's
        start: forgotten, its timer went with it, and a private lobby whose creator hung
        up kept its racer and its day-long expiry (a soak audit), as nothing else ever
        looks at it."""
        cutoff = self.clock() - IDLE_ROOM_MS
        for room_id, room in list(self.rooms.items()):
            running = room.state.phase in (Phase.COUNTDOWN, Phase.RACING) and room.serving
            wake = decide_.next_wakeup(room.state, self.grace_floor(room), room.end_due())
            due = room.serving and wake
            if not room.has_peers() and not running and not due and room.last_used_ms < cutoff:
                room.cancel_timers()
                if room.joined or room.maybe_joined:
                    # Forgotten while in the room's set, it was served by nobody here
                    # yet read as served by every other node's sweep: it stops serving
                    # it, leaves the set (leave_unserved), and is forgotten next time.
                    room.serving = False
                    continue
                del self.rooms[room_id]

    async def room_by_code(self, code: str) -> LiveRoom:
        room_id = await self.store.room_for_code(code.upper())
        if room_id is None:
            raise BadMessage(ErrorCode.UNKNOWN_ROOM, f"no room with code {code}")
        return await self.room(room_id)

    async def sync(self, room: LiveRoom) -> None:
        async with room.lock:
            await self.sync_locked(room)

    async def sync_locked(self, room: LiveRoom, live: bool = True) -> None:
        """Fold what the store has beyond the folded version. ``live`` False folds
        without fanning out or checking links (a rebuild after lost writes)."""
        entries = await self.store.events_since(room.room_id, room.state.version)
        await self._fold_entries(room, entries, live)

    async def _fold_entries(self, room: LiveRoom, entries: list[StoredEvent], live: bool) -> None:
        """Fold stored events read from the room's folded version, then re-arm its timer.
        Raises BadMessage (``unknown_room``) if they jump a version: the room is lost
        (:meth:`history_broken`)."""
        for event in entries:
            unpacked = unpack_event(event.data)
            state = room.state
            if event.version > state.version and not state.follows(event.version, unpacked):
                self.history_broken(room, f"event {event.version} follows event {state.version}")
                raise no_longer_exists()
            links = (event.prev, event.chain)
            if not await self._fold_locked(room, event.version, unpacked, links, live):
                break  # the room was rebuilt from the store meanwhile
        self.schedule(room)

    async def ingest(
        self, room: LiveRoom, version: int, event: RoomEvent, links: tuple[str, str]
    ) -> None:
        """Fold an event this node just appended (or tailed), or catch up if it is not
        the next one. The move path passes the event it built, so it never decodes
        what it has just encoded; ``links`` are its chain values before and after."""
        async with room.lock:
            if version == room.state.version + 1:
                await self._fold_locked(room, version, event, links)
                if not _keeps_wakeup(event):
                    self.schedule(room)
            elif version > room.state.version:
                await self.sync_locked(room)

    async def _fold_locked(
        self,
        room: LiveRoom,
        version: int,
        event: RoomEvent,
        links: tuple[str, str],
        live: bool = True,
    ) -> bool:
        """Fold one stored event; False if, instead, the room had to be rebuilt
        because the event does not follow the one folded before it. A rebuild
        (``live`` False) folds what Redis holds as it is: its links are not checked
        against the state the node is rebuilding, which a break stored in the history
        (an event appended after Redis lost the chain key) would fail again."""
        prev, chain = links
        if live and version == room.state.version + 1 and chain and prev != room.chain:
            # Redis no longer holds the event this node folded last: it lost writes,
            # and this version now names another event.
            await self._resync_locked(room, f"event {room.state.version} is not the one delivered")
            return False
        if not room.fold(version, event, chain, live):
            return True
        kind = event.t
        if kind == EventType.PROGRESS:
            spectators.fold_move(room, event)
        else:  # may change what the listing says of the room (a move cannot)
            self.listing_cache.forget()
        if not live:
            return True
        if kind == EventType.RACE_OVER:
            # Every node that folds a race's end makes sure its result is archived:
            # the node that decided it does at once (Node._after_decision); if it died
            # or Redis failed between the race_over and the archive, another one does.
            self.spawn(self._archive(room, self._archive_record(room, event.d)))
        if kind == EventType.PRESENCE:
            self._presence_folded(room, event)
        if kind == EventType.STARTED:
            await self._send_start_boards(room)
        if kind == EventType.PROGRESS:
            await spectators.refresh(self, room, event.racer)
        elif kind in _BOARDS_CHANGE:
            await spectators.refresh(self, room)
        return True

    async def _send_start_boards(self, room: LiveRoom) -> None:
        """Every local racer's board at the start: each engine read from the store
        first, all at once, then every board in one pass. One after the other, racer 1
        had its board 2.5-7.6 ms before racer 8 (8 racers; more with a farther Redis),
        and its first move was stored before racer 8 could see the deal (an audit).
        Caller holds the room's lock."""
        racers = list(room.racers)
        built = await asyncio.gather(
            *(self.game(room, racer) for racer in racers), return_exceptions=True
        )
        defect: BaseException | None = None
        for racer, got in zip(racers, built, strict=True):
            if isinstance(got, StoreUnavailable):
                # The race has started (stored, folded, broadcast): a racer whose
                # engine Redis failed to give now must still get its board, or its
                # client waits for it for ever (nothing else sends it).
                self.store_failed(room=room)
                board = functools.partial(
                    self._start_board, room, racer, room.state.round, room.racers.get(racer)
                )
                self.retry_locked(room, "could not send a racer its board", board, racer=racer)
            elif isinstance(got, BaseException):
                defect = defect or got  # the others still get their boards
            else:
                room.send_own_board(racer, room.state.start_at_ms or self.clock())
        if defect is not None:
            raise defect

    async def _start_board(
        self, room: LiveRoom, racer: int, round_no: int, peer: Peer | None
    ) -> None:
        """Send ``racer`` (on ``peer``) its board at the start of round ``round_no``'s
        race, which :meth:`_fold_locked` could not (Redis failed to give its engine):
        unless the race is over or that connection is gone by now (a new one gets a
        snapshot). Caller holds the room's lock."""
        state = room.state
        if state.round != round_no or state.phase != Phase.RACING:
            return
        if peer is None or room.racers.get(racer) is not peer:
            return
        game = await self.game(room, racer)
        start = state.start_at_ms
        room.send_own_board(racer, start if start and not game.seq else self.clock())

    def _presence_folded(self, room: LiveRoom, event: RoomEvent) -> None:
        racer, conn = event.racer, event.conn
        peer = room.racers.get(racer)
        if peer is None or conn is None:
            return
        if event.d["online"]:
            # Another connection's online is a later one than ``peer``'s own: a resume
            # records it before attaching its connection, under the room's lock
            # (lobby._resumed_locked), so every online folded after is newer.
            self._replaced(room, racer, conn)
        elif peer.conn_id == conn and not peer.closed:
            # Marked offline while connected here (a lease lost in a Redis outage):
            # say again that the racer is here, before its grace can run out.
            self.spawn(self.reassert(room, racer, conn))

    async def reassert(self, room: LiveRoom, racer: int, conn: str) -> None:
        """Record ``racer`` online again for as long as ``conn`` is its connection
        here: an attempt that fails (the first command after a Redis outage may) is
        retried, or a racer still racing here would be forfeited when its grace ran out."""

        def holds() -> bool:
            peer = room.racers.get(racer)
            return peer is not None and peer.conn_id == conn and not peer.closed

        def decision() -> list[RoomEvent]:
            # Asked again under the lock, after the fold of what other nodes stored:
            # the racer may have resumed elsewhere meanwhile (that fold closed ``conn``
            # here). Written then, this online took the racer back for a connection
            # that no longer existed, and the new one was closed on every node: a
            # ghost, online with no connection, its grace never begun (an audit of
            # several nodes, a node paused past its lease: the race waited 10 minutes).
            if not holds():
                return []
            return decide_.presence(room.state, racer, True, conn)

        async def attempt() -> None:
            if not holds():
                return  # gone or replaced: its own close or resume says the rest
            await self.decide(room, decision, conn=conn, node=self.node_id)

        extra = {"room": room.room_id, "racer": racer}
        await _until_done(attempt, "could not re-assert presence", extra, REASSERT_RETRY_S)

    def _replaced(self, room: LiveRoom, racer: int, conn: str) -> None:
        """The racer connected again (``conn``, on whichever node): close its older
        connection here, if any, so two windows never play one racer."""
        peer = room.racers.get(racer)
        if peer is not None and peer.conn_id != conn:
            del room.racers[racer]
            room.games.pop(racer, None)
            peer.detach()
            peer.close_later(CloseCode.NORMAL, CloseReason.REPLACED)

    def schedule(self, room: LiveRoom) -> None:
        """Arm the room's timer for its next wake-up. Most folds (a move) leave that
        instant where it was: the armed timer is then kept rather than replaced (a
        jump of the clock moves the instant, and re-arms it)."""
        if not room.served():
            self._disarm(room)
            return
        if room.retry_due is not None:
            # A tick that failed asked for a retry in TICK_RETRY_S: that retry ticks
            # the room and arms its timer again. Armed here meanwhile, a decision due
            # now fired at once after every read the failing tick made: a Redis that
            # answered reads and refused writes had a room tick 500-750 times a
            # second, a WARNING each (a review: up to 2,245 lines in 3 s).
            self._disarm(room)
            return
        certify.ensure(self, room)
        wake = decide_.next_wakeup(room.state, self.grace_floor(room), room.end_due())
        if wake is None:
            self._disarm(room)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + max(0.0, (wake - self.clock()) / 1000) + 0.001
        if room.timer is not None and abs(room.timer_at - due) < TIMER_SLACK_S:
            return
        self._disarm(room)
        room.timer, room.timer_at = loop.call_at(due, self._fire, room), due

    def _fire(self, room: LiveRoom) -> None:
        room.timer = None
        self.spawn(self.tick(room))

    @staticmethod
    def _disarm(room: LiveRoom) -> None:
        if room.timer is not None:
            room.timer.cancel()
            room.timer = None

    # ------------------------------------------------------------ decisions
    async def decide(
        self,
        room: LiveRoom,
        decision: Callable[[], list[RoomEvent]],
        prepare: Callable[[], Awaitable[None]] | None = None,
        token: Callable[[list[RoomEvent]], tuple[str, str]] | None = None,
        **server_only: Any,
    ) -> list[RoomEvent]:
        """Append ``decision()``'s events if the room is still where it was when
        deciding; otherwise fold what changed and decide again; the events stored (none
        if the decision was to do nothing). ``prepare`` reads
        what the decision needs from the store, under the lock, before each try;
        ``token(events)`` is the (racer id, token digest) a join stores in the same
        atomic step as its first event (Store.append_event): a racer stored without
        its token could never resume, and a token written apart could land on the id
        another node's join took meanwhile.
        ``server_only`` sets RoomEvent fields that are stored but never sent (the
        connection and node of a presence, the candidate of a deal)."""
        async with room.lock:
            return await self.decide_locked(room, decision, prepare, token, **server_only)

    async def decide_locked(
        self,
        room: LiveRoom,
        decision: Callable[[], list[RoomEvent]],
        prepare: Callable[[], Awaitable[None]] | None = None,
        token: Callable[[list[RoomEvent]], tuple[str, str]] | None = None,
        **server_only: Any,
    ) -> list[RoomEvent]:
        """:meth:`decide`, for a caller that holds the room's lock: what it does next
        under the same lock (a resume sending its ``joined``) follows the decision with
        no other decision folded in between."""
        await self.join_room(room)
        conflicted = 0  # the version the last try conflicted with, past the folded one
        short = 0  # tries in a row whose fold fell short of the version conflicted with
        for _ in range(DECIDE_ATTEMPTS):
            await self.sync_locked(room)
            short = short + 1 if room.state.version < conflicted else 0
            self._reached(room, conflicted, short)
            if prepare is not None:
                await prepare()
            events = decision()
            if not events:
                return events
            expected = room.state.version
            if any(ev.t == EventType.COUNTDOWN for ev in events):
                # Noted before the race begins, so that if every node serving it
                # dies, another finds it, ends it and archives it (sweep_orphans):
                # noted for its round, which no clear of an earlier race's touches.
                await self.store.mark_unarchived(room.room_id, room.state.round)
            if any(ev.t == EventType.ROOM_RESET for ev in events):
                # Back in its lobby, which no listing holds (a rematch is for its
                # racers): noted first, so that if every node serving it dies the
                # sweep finds it and takes it up (_sweep_unlisted), instead of its
                # dead racers holding it for the day the reset gives it.
                await self.store.note_unlisted(room.room_id, room.state.round + 1)
            racer_token = None if token is None else token(events)
            ended: _Archive | None = None  # the race a race_over in ``events`` ends
            sent = 0  # the events handed to append_event, the last one's reply awaited
            try:
                for ev in events:
                    reset = ev.t == EventType.ROOM_RESET
                    trim = await self._history_to_trim(room) if reset else None
                    stamped = ev.but(at=self.clock(), **server_only)
                    # A race_over closes its round for moves in the same write.
                    ends = room.state.round if ev.t == EventType.RACE_OVER else None
                    done = racer_done_by(room.state, ev)
                    packed = pack_event(stamped)
                    line = _decision_line(room, ev)
                    if ev.t == EventType.RACE_OVER:
                        # Its archive, from the room as it stands before the race_over
                        # and the event as any fold reads it back: the read-back may
                        # fold another node's rematch too, which clears the result.
                        ended = self._archive_record(room, unpack_event(packed).d)
                    sent += 1
                    # Its own id, not its bytes, tells whether a stored event is this
                    # append if its reply is lost: another node deciding the same for
                    # the same millisecond stores the same bytes.
                    event_id = new_event_id()
                    try:
                        await self.store.append_event(
                            room.room_id,
                            packed,
                            expected,
                            ends_round=ends,
                            token=racer_token,
                            ttl_s=expiry_set_by(room.state, ev),
                            closes_log=None if done is None else room.log_name(done),
                            trim=trim,
                            event_id=event_id,
                        )
                    except StoreUnavailable:
                        self._after_unknown_append(
                            room, events[:sent], expected + 1, event_id, ended, line
                        )
                        raise
                    racer_token = None  # with the first event only
                    expected += 1
                    _say(line)
            except HeadLost as lost:
                # Redis had lost the room's version or chain key; the append
                # restored them from the stream and wrote nothing: say so, and
                # decide again on what Redis now holds.
                await self._resync_locked(room, lost.what)
                conflicted = 0  # judged again on what Redis now holds (a rewind too)
                continue
            except VersionConflict as conflict:
                current = conflict.current_version
                if current == 0 and room.expiring():
                    # Its keys expired (an hour after its race_over, ten minutes
                    # after everyone left): no lost writes, and nothing to decide.
                    raise no_longer_exists() from None
                if current == 0 and await self.store.load_meta(room.room_id) is None:
                    # Redis lost the room (its meta key; the store writes nothing to
                    # a room without one), whatever of its stream is left: a rebuild
                    # from that stream would only conflict again on every try.
                    self.room_lost(room)
                    raise no_longer_exists() from None
                if current < room.state.version:
                    await self._resync_locked(room, f"Redis is at version {current}")
                    if self.rooms.get(room.room_id) is not room:  # Redis lost it whole
                        raise no_longer_exists() from None
                conflicted = current
                continue
            try:
                await self.sync_locked(room)
            except StoreUnavailable:
                # Stored, not read back. The request is told so (``unavailable``:
                # its outcome unknown, its retry finds the decision made), but the
                # writes that follow the decision must not go with the read: a
                # rematch kept its race_over's one-hour expiry, an emptied lobby
                # stayed listed.
                self.store_failed(room=room)
                # The round the events leave the room in (a reset begins one).
                round_no = room.state.round + sum(ev.t == EventType.ROOM_RESET for ev in events)
                writes = functools.partial(
                    self._after_decision_late, room, events, expected, round_no, ended
                )
                self.retry_locked(room, "could not make a decision's writes", writes)
                raise
            await self._after_decision(room, events, ended)
            return events
        raise BadMessage(
            ErrorCode.UNAVAILABLE, "the room is busy: retry", retry_after_ms=RETRY_BUSY_MS
        )

    def _reached(self, room: LiveRoom, conflicted: int, short: int) -> None:
        """After a decision conflicted with version ``conflicted`` (0: it did not) and
        the room was folded again, the fold must have reached it: the version key and
        the stream are written in one step. A stream that ends below it (the key ahead
        of it: the events between gone, history_broken) conflicted with every
        decision for ever, "the room is busy"; the room is lost instead (BadMessage
        ``unknown_room``). Unless its keys are expiring: one may go before another.

        Only once the fold fell short twice in a row (``short``): the conflict and
        the read are two round trips, and Redis rewound between them (a restart from
        an append-only file missing its last second) gives a fold short of the
        conflict once — the next try is stored at the rewound version, as before.
        Judged on one look, a healthy room was closed as lost (a review, shown)."""
        if short < 2:
            return
        if not room.expiring():
            detail = f"its version key at {conflicted}, its stream at {room.state.version}"
            self.history_broken(room, detail)
        raise no_longer_exists()

    async def after_countdown(self, room: LiveRoom) -> None:
        """What follows a countdown's write (also after a ``start`` retried because
        its reply was lost, which finds the countdown stored). Cosmetic if Redis fails
        them: a room sorted as a lobby; logs on an earlier expiry (a settle a fault cut
        short) until the race_over's."""
        with contextlib.suppress(StoreUnavailable):
            await self.store.settle_expiry(room.room_id)
            if not room.meta.settings.private:
                # Behind the lobbies in the listing, which list and quick scan the
                # newest of: a hundred rooms racing hid an older lobby.
                quick = listing.quick_of(room.meta.settings)
                await self.store.list_behind_lobbies(
                    room.room_id, room.meta.created_ms, quick=quick
                )

    async def _after_decision_late(
        self,
        room: LiveRoom,
        events: list[RoomEvent],
        version: int,
        round_no: int,
        ended: _Archive | None,
        sent: str | None = None,
        line: _Line | None = None,
    ) -> None:
        """:meth:`_after_decision` for ``events`` (stored up to ``version``, leaving the
        room in round ``round_no``) that :meth:`decide` could not read back: unless a
        round has begun since, whose own decisions the late writes would undo (a
        rematch's lifetime cap set again over its race_over's one-hour expiry).
        ``sent``: the id of the last event, sent and its reply lost
        (:meth:`_after_unknown_append`), so it may not be stored: only if the event
        stored at ``version`` is that very append (another decision stored there
        instead has writes of its own to make — even in the same bytes: another node's
        same countdown for the same millisecond, whose writes and count are its own);
        and then its log ``line``, unsaid so far (:func:`_decision_line`).
        Caller holds the room's lock."""
        await self.sync_locked(room)
        if room.state.version < version or room.state.round != round_no:
            return
        if sent is not None:
            stored = await self.store.events_since(room.room_id, version - 1, limit=1)
            if not stored or stored[0].version != version or stored[0].chain != sent:
                return
            _say(line)
        await self._after_decision(room, events, ended)

    def _after_unknown_append(
        self,
        room: LiveRoom,
        events: list[RoomEvent],
        version: int,
        sent: str,
        ended: _Archive | None,
        line: _Line | None,
    ) -> None:
        """The append of ``events``' last one (its id ``sent``, at ``version``) failed with
        its outcome unknown: Redis may have taken it and lost the reply. Its request is
        told so (``unavailable``), and a client's retry finds the decision made; but a
        decision the room's timer made (a countdown once everyone is ready, a grace's
        leave, a race_over) has no client to ask again, and its retry finds it made and
        decides nothing: what follows it was never written (a countdown left its race
        sorted as a lobby and among the quick lobbies until its race_over; an audit).
        Once Redis answers, the node looks for the event and, if it was stored, makes
        those writes (:meth:`_after_decision_late`), its log ``line`` said first. Each
        is idempotent, so a client's retry making them too costs a write. Caller holds
        the room's lock."""
        round_no = room.state.round + sum(ev.t == EventType.ROOM_RESET for ev in events)
        writes = functools.partial(
            self._after_decision_late, room, events, version, round_no, ended, sent, line
        )
        self.retry_locked(room, "could not make a decision's writes", writes)

    async def _after_decision(
        self, room: LiveRoom, events: list[RoomEvent], ended: _Archive | None = None
    ) -> None:
        """The writes that follow a stored decision. None of them may fail the request
        that made it (it was made): a write Redis fails is retried (:meth:`insist`).
        ``ended`` is the archive of the race a race_over in ``events`` ends, made before
        it was stored: the room as read back may be past it (another node's rematch
        folded with it clears its result), and then the race went unlogged, its room
        unsettled, its archive left to the fold's task alone."""
        extra = {"room": room.room_id}
        if listing.moves_listing(room.state, events):
            # A lobby whose last racer online went sorts behind the races (out of what
            # quick and list read), and back when one returns (rooms/listing.py).
            try:
                await listing.sort_locked(self, room)
            except StoreUnavailable:
                self.store_failed(room=room)
                sort = functools.partial(listing.sort_locked, self, room)
                self.retry_locked(room, "could not sort a room in the listing", sort)
        for ev in events:
            if ev.t == EventType.RACER_LEFT and not room.state.racers:
                # Everyone left: the leave set the room's short expiry; it leaves the
                # list, and its logs and code follow the expiry (final: nothing can
                # give it a longer one, so the code may be shortened).
                await self.insist(
                    lambda: self.store.settle_expiry(room.room_id, unlist=True, final=True),
                    "could not expire an empty room",
                    extra,
                )
            elif ev.t == EventType.RACE_OVER and ended is not None:
                record = ended
                _log_race_over(room.room_id, record.race, record.record["result"])
                room.archived.add(record.race)  # claimed: the fold's own check stands by
                try:
                    # The race_over set the room's hour in its own write; the logs
                    # follow (settle copies the room's expiry now, never an older one:
                    # run after another node's rematch, it cannot cut the round short).
                    await self.store.settle_expiry(room.room_id, unlist=True)
                    await self._save_result(record)
                    await self._clear_note(room, record.record["round"])
                except StoreUnavailable:
                    room.archived.discard(record.race)
                    self.spawn(self._archive(room, record))  # the race_over is stored
            elif ev.t == EventType.COUNTDOWN:
                self.metrics.races_started.inc()
                settings = room.meta.settings
                log.info(
                    "race starting",
                    extra={
                        **extra,
                        "round": room.state.round,
                        "variant": settings.variant,
                        "racers": len(room.state.racers),
                        "private": settings.private,
                    },
                )
                await self.after_countdown(room)
            elif ev.t == EventType.ROOM_RESET:
                # The reset gave the room its lifetime back in its own write (the
                # race_over had shortened it); the logs and the code follow.
                await self.insist(
                    lambda: self.store.settle_expiry(room.room_id),
                    "could not extend a rematch's expiry",
                    extra,
                )
            elif first_join(ev):
                # The join gave the new room its lifetime cap in its own write; the
                # join code (another slot) follows. Its node killed before this, the
                # code keeps its ten minutes until the sweep that takes the room up
                # settles it (Node._sweep_lobby).
                await self.insist(
                    lambda: self.store.settle_expiry(room.room_id),
                    "could not extend a new room's expiry",
                    extra,
                )

    async def _history_to_trim(self, room: LiveRoom) -> Trim | None:
        """What a rematch lets go of: the rounds before the one just ended (docs/store.md,
        "A room's history"). The race just ended is archived first, if no node has
        yet: the rematch after next trims its race_over, the last trace of it a node
        could archive it from (Node.sweep_orphans loads rooms and folds their
        race_overs). Raises StoreUnavailable if Redis fails, which refuses the
        rematch (``unavailable``: retry)."""
        state = room.state
        if state.result is not None:
            await self._save_unless_saved(self._archive_record(room, state.result))
        if state.round_began == 0:
            return None  # the first round: nothing before it
        if await self._older_nodes_live():
            return None  # they could not read the room trimmed: the next rematch will
        return Trim(
            before_version=state.round_began, first_round=state.round, racers=tuple(state.racers)
        )

    async def check_older_nodes(self) -> None:
        """Find the live nodes of earlier releases on this store (their leases' store
        format: Store.older_nodes), once, at start. A release before trims folds a
        room only from its first event: a node of it taking up a room this release had
        rematched twice refused every request for it ``internal`` ("event 679 after
        0"), its racers unable to resume there (an audit's rolling upgrade from
        094c8a7). So while any of them lives, rematches here trim nothing — the first
        rematch after they are gone trims what was kept — and the node says so once.
        A node of an earlier release started after this one is not seen: that is a
        rollback (docs/deploy.md, "Upgrading"). A store that refuses the SCAN (an ACL)
        is taken to hold none, and said so. Raises StoreUnavailable (asked again)."""
        try:
            older = await self.store.older_nodes()
        except StoreUnavailable:
            raise
        except StoreError as exc:
            self.older_nodes = set()
            log.warning(
                "could not list the nodes sharing this store (%s): a node of an earlier"
                " release running beside this one would not be noticed",
                exc,
            )
            return
        self.older_nodes = set(older)
        if older:
            named = ", ".join(sorted(older)[:3]) + (" …" if len(older) > 3 else "")
            log.warning(
                "%d node(s) of an earlier release share this store (%s): rematches on this"
                " node trim no room's history while they run; stop them (SIGTERM) once"
                ' this release serves (docs/deploy.md, "Upgrading")',
                len(older),
                named,
            )

    async def _ask_older_nodes(self) -> None:
        """:meth:`check_older_nodes` beside the lease loop, not in it: one SCAN of the
        whole key space (results are kept for good), which on a large store far away
        could outlast the lease (LEASE_MS) the loop must renew. Asked again on the
        loop's next turn if the store failed it."""
        try:
            await self.check_older_nodes()
        except StoreUnavailable as exc:
            self.store_failed(exc)
        finally:
            self._asking_older = False

    async def _older_nodes_live(self) -> bool:
        """Whether a node of an earlier release found at start still holds its lease
        (one round trip, only while some were found) — or may: until the start-up look
        (:meth:`check_older_nodes`, beside the lease loop) has answered, a rematch here
        trims nothing (a review: one just after start, or while the store failed the
        look, trimmed a room a live older node could then not take up). The next
        rematch trims what was kept. Raises StoreUnavailable."""
        if self.older_nodes is None:
            return True
        if not self.older_nodes:
            return False
        live = await self.store.live_nodes(self.older_nodes)
        if not live:
            log.info("the nodes of earlier releases are gone: rematches trim again")
        self.older_nodes = live
        return bool(live)

    def _archive_record(self, room: LiveRoom, result: Mapping[str, Any]) -> _Archive:
        """What archiving the race that ``result`` (a race_over's data) ends writes,
        taken from the room as folded up to that race_over."""
        record = {
            "room": room.room_id,
            "code": room.meta.code,
            "round": room.state.round,
            "settings": room.meta.settings.to_dict(),
            # How the deal was made, as the lobby was told (rooms.certify.announced).
            "deal": room.state.deal,
            "result": dict(result),
        }
        race = race_id(room.room_id, result.get("commitment"))
        return _Archive(race, record)

    async def _save_unless_saved(self, archive: _Archive) -> None:
        """Save a finished race's result unless the archive has it (any node may have
        saved it: the result is the race_over's, whoever writes it)."""
        if await self.store.load_result(archive.race) is None:
            await self._save_result(archive)

    async def _save_result(self, archive: _Archive) -> None:
        """Archive a race's result unless one is archived under its id already: the
        first stands (Store.save_result). Another one there is a retry's (the same
        bytes), or the race ended a second time — the store rewound to before its
        race_over, and the round ended again, everyone timed out — which replaced the
        true result in the archive before; said as a warning."""
        data = pack(archive.record)
        if await self.store.save_result(archive.race, data, self.results_ttl_s):
            return
        if await self.store.load_result(archive.race) not in (None, data):
            log.warning(
                "a race ended again (a store rewind): its first archived result stands",
                extra={"room": archive.record["room"], "race": archive.race},
            )

    async def _archive_once(self, room: LiveRoom, archive: _Archive) -> None:
        """Save a finished race's result unless it is saved or this node has claimed
        it already. Raises StoreUnavailable (the claim released) if Redis fails.

        Any node may do this, late: the result is the race_over's, whatever happened
        since. The room's expiry needs nothing here: the race_over set it in its own
        write, and whatever settles the room next gives its logs the same."""
        if archive.race in room.archived:
            return
        room.archived.add(archive.race)
        try:
            await self._save_unless_saved(archive)
            if _last_race(room) == archive.race:
                await self._archived_last(room)
        except StoreUnavailable:
            room.archived.discard(archive.race)
            raise

    async def _archived_last(self, room: LiveRoom, swept: bool = False) -> None:
        """Clear the note that the room awaits its archive (Store.mark_unarchived), its
        last race's result saved: once the room is unlisted and its logs follow the
        race_over's hour, the writes that follow a race_over (:meth:`_after_decision`).
        Its node killed right after the race_over, the sweep that archived the race
        (:meth:`sweep_orphans`) cleared the note and nothing else: a public race stayed
        listed until its keys expired an hour later and a ``list`` read it gone, and
        every room's logs kept their day. The note goes last: while it stands, any
        node's sweep loads the room and makes both again (idempotent). ``swept``: the
        sweep's, which clears an earlier release's note too (:meth:`_clear_note`)."""
        through, version = room.state.round, room.state.version
        await self.store.settle_expiry(room.room_id, unlist=True)
        await self._clear_note(room, through, version if swept else None)

    async def _clear_note(self, room: LiveRoom, through: int, version: int | None = None) -> None:
        """Clear the room's note (Store.mark_unarchived), its races up to round
        ``through`` archived, unless it notes a later round: a countdown decided
        meanwhile (a rematch's, any node's) noted the room for its new race before
        storing itself, and clearing that note — judged before on the room's stream
        not having moved, which the countdown had not yet made it do — left the new
        race, its nodes dying, adopted by no sweep (Store.clear_unarchived: one
        script). Both the deciding node (:meth:`_after_decision`) and a late archive
        or sweep (:meth:`_archived_last`) clear through here.

        ``version`` (the sweep's: the room's stream as it folded it) clears an earlier
        release's note too (Store.clear_legacy_note), which names no round: by that
        release's own rule, only if the stream has not moved past ``version``. Only
        the sweep: it is what finds those notes, once a minute; the deciding node would
        pay a read for it on every race. First, so that the note of this release
        goes last."""
        if version is not None and await self.store.version(room.room_id) == version:
            await self.store.clear_legacy_note(room.room_id)
        await self.store.clear_unarchived(room.room_id, through)

    async def _archive(self, room: LiveRoom, archive: _Archive) -> None:
        """:meth:`_archive_once` until Redis lets it (a task the node keeps)."""
        extra = {"room": room.room_id, "race": archive.race}
        await _until_done(
            lambda: self._archive_once(room, archive),
            "could not archive a finished race",
            extra,
            ARCHIVE_RETRY_S,
        )

    async def tick(self, room: LiveRoom) -> None:
        """The clock's decisions for a room (start, time limit, grace, end)."""
        finals: dict[int, _Final] = {}

        async def prepare() -> None:
            # The store has just answered (the room was folded): if it had been down,
            # for the node or for this room alone, re-arm grace before deciding
            # anything about who stayed away too long.
            self.store_ok()
            if room.store_down:
                room.store_down = False
                room.grace_floor_ms = self.clock()
            # A round re-dealt after a rewind: its archived result ends it as it starts.
            await self._archived_already(room)
            # Under the room lock, after folding: if the race may end now, read every
            # racer's log for the standings. A move stored meanwhile bumps the version,
            # so the append below conflicts and this runs again on fresh logs.
            state = room.state
            ends = state.ends_at_ms
            if state.phase == Phase.RACING and (
                not state.playing()
                or room.seed_revealed()
                or (ends is not None and self.clock() >= ends)
            ):
                finals.clear()
                finals.update(await self._finals(room))
                # Noted before the race_over is stored, so that a node started later
                # archives its result even if this one dies in between (sweep_orphans).
                await self.store.mark_unarchived(room.room_id, state.round)

        def decision() -> list[RoomEvent]:
            state = room.state
            # A rewind lost a racer's end: it ends again before anything else — unless
            # the round's seed went out, when the whole race ends at once anyway.
            back = {} if room.seed_revealed() else room.back_in_race()
            if back:
                return decide_.out_again(state, back)
            return decide_.tick(
                state,
                self.clock(),
                room.commitment,
                lambda table, reason: self._result(room, table, reason, finals),
                self.countdown_ms,
                self.grace_floor(room),
                room.seed_revealed(),
            )

        try:
            await self.decide(room, decision, prepare)
        except (StoreUnavailable, BadMessage) as exc:
            if self.rooms.get(room.room_id) is not room:
                # Lost meanwhile (history_broken, room_lost: closed and forgotten) or
                # forgotten idle: nothing here ticks it again. Retried, a room whose
                # stream had a gap was read, and its loss logged, every second for ever.
                return
            # One line a retry: a tick armed by the failing one's own read (its fold
            # schedules the decision due now) fails beside it, and asks for the retry
            # already pending.
            pending = room.retry_due is not None
            if isinstance(exc, StoreUnavailable):
                self.store_failed(exc, room)
            if not pending:
                log.warning("tick failed; retrying", extra={"room": room.room_id})
            self._tick_later(room, TICK_RETRY_S)
        except Exception:
            log.exception(
                "tick failed on an unexpected error; retrying", extra={"room": room.room_id}
            )
            self.metrics.defects.labels(Defect.TICK).inc()
            self._tick_later(room, BUG_RETRY_S)

    def _tick_later(self, room: LiveRoom, delay_s: float) -> None:
        """Tick ``room`` again in ``delay_s``, unless a retry is already pending: a
        tick that failed on the store marked the room's trouble (which asks for a
        retry) and asked for its own, so every failing room was read on two timer
        chains at once, twice the store calls and log lines of an outage (a disk
        audit: 21 lines in 15 s for one room)."""
        if room.retry_due is not None:
            return

        def retry() -> None:
            room.retry_due = None
            self.spawn(self.tick(room))

        room.retry_due = asyncio.get_running_loop().call_later(delay_s, retry)

    async def _finals(self, room: LiveRoom) -> dict[int, _Final]:
        """Every racer's score, move log and its moves' times, for the standings."""
        finals: dict[int, _Final] = {}
        for racer in room.state.racers:
            raw = await self.store.move_log(room.room_id, room.log_name(racer))
            entries = unpack_entries(raw)
            game = RacerGame.rebuild(
                room.meta.settings.variant, room.seed(), room.meta.settings.options, entries
            )
            finals[racer] = _Final(
                game.board.score, [e for e, _ in entries], [at for _, at in entries]
            )
        return finals

    def _result(
        self,
        room: LiveRoom,
        table: list[dict[str, Any]],
        reason: str,
        finals: dict[int, _Final],
    ) -> dict[str, Any]:
        if set(finals) != {row["racer"] for row in table}:
            raise RuntimeError("race_over decided without every racer's log")
        for row in table:
            final = finals[row["racer"]]
            row["score"] = final.score
            row["log"] = final.log
            row["times"] = final.times
        secret, round_no = room.meta.secret, room.state.round
        return {
            "reason": reason,
            "standings": table,
            "seed": room.seed(),
            "salt": round_salt(secret, round_no),
            "commitment": room.state.commitment or room.commitment(),
            "certificate": room.state.certificate,
        }

    # ------------------------------------------------------------- engines
    async def game(self, room: LiveRoom, racer: int) -> RacerGame:
        """This node's engine for a local racer, rebuilt from the store if needed.

        Two rebuilds may overlap (a racer's move and a start board sent late): the one
        whose read returns last may have read the log before the other's engine took a
        move and stored it, so an engine cached meanwhile is kept, never replaced.

        The round's log, seed and state are taken before the read: a move's rebuild
        (not under the room's lock) may see a rematch, or a rebuild after lost writes,
        folded while its read was out. Its engine is then of a round, or a fold, that
        is gone: returned to its caller (whose move is refused: not racing now), never
        kept. Kept, it was round 1's log replayed on round 2's deal, and round 2's
        first move was answered ``moved`` as a retry of an entry no log held."""
        game = room.games.get(racer)
        if game is None:
            state, round_no, seed = room.state, room.state.round, room.seed()
            raw = await self.store.move_log(room.room_id, log_name(round_no, racer))
            settings = room.meta.settings
            if room.state is not state or state.round != round_no:
                return RacerGame.rebuild(
                    settings.variant, seed, settings.options, unpack_entries(raw)
                )
            game = room.games.get(racer)
            if game is None:
                game = RacerGame.rebuild(
                    settings.variant, seed, settings.options, unpack_entries(raw)
                )
                room.games[racer] = game
        return game

    # ----------------------------------------------------------------- drain
    async def hand_off(self) -> None:
        """The last word of a drained node: its rooms are handed off, not orphaned by a
        death (Store.hand_off, noted until they are taken up, at most
        HAND_OFF_KEEP_MS), and its lease goes. First it takes the nodes that died beside
        it out of its shared rooms' sets (:meth:`_replace_dead_co_servers`); last it
        leaves the serving sets of the rooms another live node serves too
        (:meth:`_leave_shared_rooms`).

        The sets and the leases are read for each (:meth:`_shared_sets`), not once for
        both: the dead are told apart while this node's lease is current, the live ones
        it leaves to once its lease is gone. Judged on one read, two nodes draining at
        once each took the other out, or each left seeing the other live: the room lost
        every node from its set (tests/net/test_take_up.py). And the sets read late see
        the nodes its racers resumed on meanwhile (their connections were closed first):
        unseen, this node stayed in the set beside them."""
        await self._replace_dead_co_servers()
        await self.store.hand_off(self.node_id, HAND_OFF_KEEP_MS)
        await self._leave_shared_rooms()

    async def _replace_dead_co_servers(self) -> None:
        """Before handing off, while its lease is current, take out of its shared rooms'
        sets the nodes whose lease is gone: they died (or drained) while this node
        served on, so this node took the rooms over from them, as a take-up would
        (:meth:`_adopt`). Kept, a node that crashed while this one served with it stayed
        in the set, and the take-up after this node's drain read the room as a dead
        node's and warned, not a hand-off at INFO (a review). Done while this node is
        live and in the set, so no set loses its last node; a node only stalled joins
        again when it renews (:meth:`_lapsed`), as after a take-up. Redis failing it
        costs a log line at most: the hand-off goes on.

        The leases are judged as the room checks and the sweep judge them
        (:meth:`_live_if_settled`): right after this node's outage, or a lapse of its
        own lease, every other node's may read gone, their renewals held in the same
        stall. Read directly, a drain then took live nodes out of the rooms they served
        (tests/rooms/test_sweep_settle.py). Unsettled, nobody is taken out: the
        replacement only makes a later take-up's log line right, and the skip is logged
        (:data:`DRAIN_REPLACEMENT_SKIPPED`: it was silent, and the later warning unexplained)."""
        try:
            others = await self._shared_sets()
            if not any(others.values()):
                return  # no other node to judge (and no line to log)
            live = await self._live_if_settled(set().union(*others.values()))
            if live is None:
                log.info(DRAIN_REPLACEMENT_SKIPPED)
                return
            await self.store.leave_rooms({rid: nodes - live for rid, nodes in others.items()})
        except StoreUnavailable:
            log.warning("could not take dead nodes out of the rooms handed off")

    async def _leave_shared_rooms(self) -> None:
        """Leave the set of serving nodes of each shared room that another node, live
        now, still serves: that node goes on serving it, and whoever takes the room up
        after it judges only it (and those that joined since). Kept in the set, this
        node made a rolling restart warn: by the time the other node drained too and
        its room was taken up, this node's hand-off note had been deleted (a sweep took
        up this node's own rooms) or had lapsed, and the room read as a dead node's.

        Asked after the lease is gone (Store.hand_off), so of nodes draining at once
        the one whose lease went last sees no other live and stays: a room never loses
        every node it was served by from its set. A fault midway leaves the rest of the
        rooms as before: the next take-up of those may warn, a log line only. Only the
        rooms this node shares: one it serves alone (by its own reckoning) has nobody
        else to be judged by. Three round trips, however many rooms (pipelined)."""
        others = await self._shared_sets()
        live = await self.store.live_nodes(set().union(*others.values()))
        await self.store.leave_rooms(
            {r: {self.node_id} for r, nodes in others.items() if nodes & live}
        )

    async def _shared_sets(self) -> dict[str, set[str]]:
        """The other nodes in the sets of the rooms this node shares, by room: one
        round trip, however many rooms (pipelined)."""
        shared = [rid for rid, room in self.rooms.items() if room.joined and room.shared]
        return {
            rid: nodes - {self.node_id}
            for rid, nodes in (await self.store.rooms_nodes(shared)).items()
        }

    async def first_renewal(self) -> None:
        """Return once the node has renewed its lease (at once if it has): the store
        answered it and took a write — what a node started while Redis did not answer
        waits for before it says what Redis promises (net/main.py)."""
        await self._lease_held.wait()

    async def drained(self, timeout: float = 10.0) -> None:
        """Wait until no move is between its engine check and its store append."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.inflight and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(DRAIN_POLL_S)


__all__ = ["Node"]


#: A decision's log line (:func:`_decision_line`): its message and its fields.
_Line = tuple[str, dict[str, object]]


def _say(line: _Line | None) -> None:
    """Log a decision's line (:func:`_decision_line`), if it has one."""
    if line is not None:
        log.info(line[0], extra=line[1])


def _decision_line(room: LiveRoom, event: RoomEvent) -> _Line | None:
    """One line for each decision about a racer, from the node that stored it (so
    once in a cluster): with "race starting", "racer finished" and "race over", an
    operator can tell from the log alone why each racer ended as it did — a race's
    log said only who joined and that nobody won (an audit). Racer numbers, no names.
    Made from the room as it was decided on, before the event is stored: said once it
    is, which for an append whose reply was lost is only once the node finds it stored
    (Node._after_decision_late) — its retry decides nothing, so it went unsaid."""
    kind, d = event.t, event.d
    extra: dict[str, object] = {"room": room.room_id}
    if kind == EventType.RACER_LEFT:
        what = "racer left"
        extra.update(racer=d["racer"], reason=d.get("reason"), phase=room.state.phase)
    elif kind == EventType.PROGRESS and d["status"] in _ENDING_STATUSES:
        what = "racer resigned" if d["status"] == RacerStatus.RESIGNED else "racer timed out"
        extra.update(racer=d["racer"], cards=d.get("foundation"), moves=d.get("moves"))
    elif kind == EventType.PRESENCE:
        what = "racer online" if d["online"] else "racer offline"
        extra.update(racer=d["racer"])
    elif kind == EventType.ROOM_RESET:
        what = "rematch"
        extra.update(round=room.state.round + 1, racers=len(d.get("racers") or ()))
    else:
        return None
    return what, extra


def _log_race_over(room_id: str, race: str, result: Mapping[str, Any]) -> None:
    """One line per race, from the node that decided its end: which race, why it
    ended, who won (the racer's number; no name, no seed, in the log)."""
    standings = result.get("standings", ())
    winner = next(
        (s["racer"] for s in standings if s["place"] == 1 and s["status"] == RacerStatus.FINISHED),
        None,
    )
    log.info(
        "race over",
        extra={
            "room": room_id,
            "race": race,
            "reason": result.get("reason"),
            "winner": winner,
            "finished": sum(s["status"] == RacerStatus.FINISHED for s in standings),
            "racers": len(standings),
        },
    )
