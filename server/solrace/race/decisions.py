"""What a room does next: pure functions from (state, request, clock) to new events.

A node decides against the state it has folded up to version v and appends the events
only if the room is still at v (Redis compare-and-append); if another node got there
first, it folds the newer events and decides again. So each decision must be right for
*any* state it is given, and deciding twice from the same state gives the same answer.
Functions return :class:`~solrace.race.events.RoomEvent` lists and raise
:class:`RaceError` to refuse a request.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Final

from solrace.protocol.errors import ErrorCode
from solrace.protocol.limits import (
    JOIN_BURST,
    MAX_NAME_LEN,
    MAX_UNREADY,
    MIN_RACERS_TO_START,
    RESUME_BURST,
)
from solrace.protocol.messages import DRAWS_NOTHING
from solrace.protocol.views import LeaveReason, Phase, RacerStatus, end_reason

from .errors import RaceError
from .events import EventType, RoomEvent, event, progress
from .state import (
    JOIN_INTERVAL_MS,
    RESUME_INTERVAL_MS,
    RacerState,
    RoomState,
    carried_into,
    join_bucket_ms,
    resume_bucket_ms,
    standings,
    takes_back,
)

Event = RoomEvent

COUNTDOWN_MS: Final = 3_000
DISCONNECT_GRACE_MS: Final = 30_000


def _member(state: RoomState, racer: int) -> RacerState:
    member = state.racers.get(racer)
    if member is None:
        raise RaceError("not_racer", "you are not a racer in this room")
    return member


def join(
    state: RoomState,
    name: str,
    origin: str | None = None,
    seats_per_origin: int = 0,
    now_ms: int | None = None,
    slew_ms_per_s: int = 0,
) -> list[Event]:
    """A new racer; its id is the next never-used id of the room.

    A lobby everyone left is closed: it expires in ten minutes and takes nobody new.
    Its keys expire with it, so a race begun there by a late join by code would lose
    them mid-race. (A room nobody has joined yet — a create whose join failed — takes
    racers: a quick race may fill it.)

    ``origin`` is a digest of the joining client's address (None: not counted); a
    public room seats at most ``seats_per_origin`` racers of one origin (0: any
    number): every racer gets the same deal, so a second seat is a scout that turns
    cards up for the first (docs/fairness.md). Decided on the folded room like every
    join, so two nodes seating one address at once cannot both succeed. With
    ``now_ms``, an origin past its join bucket is refused (:func:`join_too_soon`; the
    wait it says stretched by ``slew_ms_per_s``: :func:`client_wait_ms`)."""
    if state.phase == Phase.FINISHED:
        # Not "already started": a racer of it may still ask for a rematch (whose
        # lobby takes joins), unless everyone has left (it then expires).
        raise RaceError("wrong_phase", _race_over_refusal(state))
    if state.phase != Phase.LOBBY:
        raise RaceError("wrong_phase", "this race has already started: you can watch it")
    if state.everyone_left():
        raise RaceError("unknown_room", "everyone left that room, so it closed")
    if len(state.racers) >= state.settings.max_racers:
        raise RaceError("room_full", f"the room is full ({state.settings.max_racers} racers)")
    if seats_its_origin(state, origin, seats_per_origin):
        raise RaceError("same_address", ErrorCode.SAME_ADDRESS.message)
    too_soon = (
        None
        if origin is None or now_ms is None
        else join_too_soon(state, origin, now_ms, slew_ms_per_s)
    )
    if too_soon is not None:
        raise too_soon
    info = RacerState(state.next_racer, distinct_name(state, name)).info()
    return [event(EventType.RACER_JOINED, **info)]


def join_too_soon(
    state: RoomState, origin: str, now_ms: int, slew_ms_per_s: int = 0
) -> RaceError | None:
    """The refusal of a join from ``origin`` (a seat digest) at ``now_ms`` past its
    address's join bucket this round — JOIN_BURST at once, then one every
    JOIN_INTERVAL_S (limits.py) — or None. A join and its leave are two events kept
    in the room's stream until its next rematch, and a token kept until it expires;
    a client looping join and leave in a lobby its host keeps open stored 20 events a
    second (a soak audit). Folded state timed by the store's clock, as the resume
    bucket (:func:`resume_too_soon`), so it holds whichever node each join reaches;
    the wait it says is the bucket's shortfall as the client counts it
    (:func:`client_wait_ms`)."""
    left = join_bucket_ms(state, origin, now_ms)
    return _bucket_refusal(
        left, JOIN_BURST, JOIN_INTERVAL_MS, slew_ms_per_s, "joined this room", "join"
    )


def client_wait_ms(shortfall_ms: int, slew_ms_per_s: int) -> int:
    """The ``retry_after_ms`` to say for a bucket ``shortfall_ms`` short, in the node's
    ms. The client waits it out by its own clock, and the node's may count
    ``slew_ms_per_s`` less of each second (slewing back toward the store's, at most
    rooms/clock.py's SLEW_MS_PER_S): the shortfall alone, waited out to the ms, found
    the retry a few ms short again (a loaded CI run, a second refusal on the same
    connection; tests/rooms/test_resume_bucket.py, test_join_churn.py), so it is
    stretched by as much, rounded up."""
    return -(-shortfall_ms * 1000 // (1000 - slew_ms_per_s))


def _bucket_refusal(
    left_ms: int, burst: int, interval_ms: int, slew_ms_per_s: int, did: str, do: str
) -> RaceError | None:
    """The ``rate_limited`` refusal of a bucket holding ``left_ms`` (``burst`` at once,
    then one every ``interval_ms``), None if it holds one more: the join and resume
    buckets' one wording and wait (:func:`client_wait_ms`)."""
    if left_ms >= interval_ms:
        return None
    wait_ms = client_wait_ms(interval_ms - left_ms, slew_ms_per_s)
    return RaceError(
        "rate_limited",
        f"you {did} too often ({burst} in a row, then one every {interval_ms / 1000:g} s):"
        f" {do} again in {wait_ms} ms",
        retry_after_ms=wait_ms,
    )


def _race_over_refusal(state: RoomState) -> str:
    """What a join of a finished room is told."""
    if not state.racers:
        return "this race is over and everyone left the room: you can watch its result"
    return (
        "this race is over: you can watch its result, or join its rematch's lobby "
        "once one of its racers asks for a rematch"
    )


def seats_its_origin(state: RoomState, origin: str | None, seats_per_origin: int) -> bool:
    """Whether a public room already seats racers of ``origin`` as often as it may
    (:func:`join`; 0 or an origin of None: no cap; a private room: none)."""
    if origin is None or not seats_per_origin or state.settings.private:
        return False
    seated = sum(1 for racer in state.racers.values() if racer.origin == origin)
    return seated >= seats_per_origin


def distinct_name(state: RoomState, name: str) -> str:
    """``name``, or ``name (2)``, ``(3)``, ... (cut to fit MAX_NAME_LEN) if a racer of
    the room already goes by it, compared case-folded and NFKC-normalised: two racers
    called by the client's default name, or a stranger taking the leader's, could not
    be told apart in the standings, the lists or a spectator's boards."""
    taken = {name_key(racer.name) for racer in state.racers.values()}
    candidate, number = name, 1
    while name_key(candidate) in taken:
        number += 1
        suffix = f" ({number})"
        candidate = name[: MAX_NAME_LEN - len(suffix)].rstrip() + suffix
    return candidate


def name_key(name: str) -> str:
    """What two racers' names are compared by: one name per key in a room (``solrace
    verify`` holds a result's standings to it too). Without the characters that draw
    nothing (protocol.messages.DRAWS_NOTHING, and the white space they left doubled):
    ``Ann`` with a zero-width joiner in it looks like ``Ann`` wherever names are shown,
    and a stranger seated as the first kept it beside the second (a security audit)."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return " ".join("".join(c for c in folded if c not in DRAWS_NOTHING).split())


def ready(state: RoomState, racer: int, flag: bool, open_boards: bool = False) -> list[Event]:
    """A racer's ready flag; ``open_boards`` agrees to open spectating, which only a
    private room that offers it accepts."""
    member = _member(state, racer)
    if state.phase != Phase.LOBBY:
        raise RaceError("wrong_phase", "ready flags only count in the lobby")
    if open_boards and state.settings.spectators != "open":
        raise RaceError("bad_message", "this room does not offer open spectating")
    agrees = flag and open_boards
    if member.ready == flag and member.open_boards == agrees:
        return []
    if takes_back(member, flag, agrees) and member.unready >= MAX_UNREADY:
        raise RaceError(
            "rate_limited",
            f"you took your ready flag back {MAX_UNREADY} times this round: it stays set",
            field="ready",
        )
    extra = {"open_boards": True} if agrees else {}
    return [event(EventType.READY_CHANGED, racer=racer, ready=flag, **extra)]


def start(
    state: RoomState,
    racer: int,
    now_ms: int,
    commitment: str,
    countdown_ms: int = COUNTDOWN_MS,
) -> list[Event]:
    """The host starts the countdown; everyone else must be ready. The host's start
    once the race is under way is its retry (its reply lost): already done."""
    _member(state, racer)
    if state.phase in (Phase.COUNTDOWN, Phase.RACING) and racer == state.host:
        return []
    if state.phase == Phase.FINISHED:  # what the racer can do now, not what happened
        raise RaceError("wrong_phase", "the race is over: ask for a rematch to race again")
    if state.phase != Phase.LOBBY:
        raise RaceError("wrong_phase", "the race has already started")
    if racer != state.host:
        raise RaceError("not_host", "only the host can start the race")
    if len(state.racers) < MIN_RACERS_TO_START:
        raise RaceError("not_ready", "a race needs at least two racers")
    waiting = [r.name for r in state.racers.values() if not r.ready and r.racer != racer]
    if waiting:
        raise RaceError("not_ready", f"not ready yet: {', '.join(waiting)}")
    if not state.deal_ready():
        raise RaceError("not_ready", "the deal is still being certified winnable: a moment")
    return [countdown(now_ms, commitment, countdown_ms, _open_boards(state))]


def _open_boards(state: RoomState) -> bool:
    """Open spectating only where offered (a private room) and every racer agreed."""
    racers = state.racers.values()
    return state.settings.spectators == "open" and all(r.open_boards for r in racers)


def deal_chosen(state: RoomState, round_no: int, deal: dict[str, Any]) -> list[Event]:
    """The round's deal, once (a second node certifying the same round is too late),
    and only for a lobby someone is still in: one everyone left expires, and a write
    to it after its keys are gone would read as Redis having lost the room."""
    if state.round != round_no or state.deal is not None or state.phase != Phase.LOBBY:
        return []
    if not state.racers:
        return []
    return [event(EventType.DEAL_CHOSEN, **deal)]


def countdown(
    now_ms: int, commitment: str, countdown_ms: int = COUNTDOWN_MS, open_boards: bool = False
) -> Event:
    extra = {"open_boards": True} if open_boards else {}
    return event(
        EventType.COUNTDOWN, start_at_ms=now_ms + countdown_ms, commitment=commitment, **extra
    )


def resign(state: RoomState, racer: int) -> list[Event]:
    """A racer gives up. Asked again once resigned (a retry whose reply was lost), it
    is already done."""
    member = _member(state, racer)
    if member.status == RacerStatus.RESIGNED:
        return []
    if state.phase != Phase.RACING or member.status not in (RacerStatus.PLAYING, RacerStatus.STUCK):
        raise RaceError("wrong_phase", "you can only resign while racing")
    return [_status(member, RacerStatus.RESIGNED)]


#: Statuses whose race is over for that racer: a leave changes none of them.
_DONE_RACING = frozenset(
    {RacerStatus.LEFT, RacerStatus.FINISHED, RacerStatus.RESIGNED, RacerStatus.TIMEOUT}
)


def leave(
    state: RoomState,
    racer: int,
    reason: LeaveReason = LeaveReason.LEFT,
    conn: str | None = None,
) -> list[Event]:
    """Leaving the lobby removes the racer; from the countdown on it is a forfeit —
    for a racer still in the race. One whose race is over (finished, resigned, timed
    out: the other racers are still at it) goes, and its result stays: a winner who
    closed the window after finishing was recorded ``left``, placed behind every
    finisher, and ``solrace verify`` failed the honest race.
    ``reason`` is ``left`` (the racer asked) or ``grace`` (away too long); ``conn``
    the connection that asked (a done racer's other connection stays online)."""
    member = _member(state, racer)
    if state.phase in (Phase.COUNTDOWN, Phase.RACING) and member.status in _DONE_RACING:
        return presence(state, racer, online=False, conn=conn)  # gone, its result kept
    remaining = [r for r in state.racers if r != racer]
    if state.phase in (Phase.COUNTDOWN, Phase.RACING):
        remaining = [r for r in remaining if state.racers[r].status != RacerStatus.LEFT]
    host = state.host if state.host != racer else (remaining[0] if remaining else None)
    return [event(EventType.RACER_LEFT, racer=racer, host=host, reason=reason)]


def presence(state: RoomState, racer: int, online: bool, conn: str | None = None) -> list[Event]:
    """A connection of ``racer`` (``conn``) came or went. An "offline" about a
    connection the racer has since replaced (a resume, maybe on another node) is no
    news and writes nothing: presence is ordered per racer by connection."""
    member = state.racers.get(racer)
    if member is None:
        return []
    if not online and conn is not None and member.conn is not None and member.conn != conn:
        return []
    if member.online == online and (not online or member.conn == conn):
        return []
    return [event(EventType.PRESENCE, racer=racer, online=online)]


def resumed(state: RoomState, racer: int, now_ms: int, slew_ms_per_s: int = 0) -> list[Event]:
    """A racer's new connection: announced even if the racer never looked offline, so
    that the node holding its previous connection (maybe another node) closes it.
    Refused ``rate_limited`` past the racer's resume bucket (:func:`resume_too_soon`)."""
    member = state.racers.get(racer)
    if member is None:
        return []
    too_soon = resume_too_soon(member, now_ms, slew_ms_per_s)
    if too_soon is not None:
        raise too_soon
    return [event(EventType.PRESENCE, racer=racer, online=True)]


def resume_too_soon(member: RacerState, now_ms: int, slew_ms_per_s: int = 0) -> RaceError | None:
    """The refusal of a resume of ``member`` at ``now_ms`` past its resume bucket —
    RESUME_BURST at once, then one every RESUME_INTERVAL_S (limits.py) — or None.

    Each resume stores a presence online, and its connection's close an offline:
    events sent to everyone in the room, kept in its stream until a round begins, and
    folded by every node taking the room up. A racer reconnecting in a loop (each
    connection with a fresh rate limit) stored 630 a second. The bucket is folded
    state, timed by the store's clock every node shares, so it holds whichever node
    each resume reaches; ``retry_after_ms`` says when the next may (at most the
    interval: a node's clock a moment behind the one that stored the last counts
    no time since it), as the client counts it (:func:`client_wait_ms`)."""
    left = resume_bucket_ms(member, now_ms)
    return _bucket_refusal(
        left, RESUME_BURST, RESUME_INTERVAL_MS, slew_ms_per_s, "resumed", "resume"
    )


def rematch(state: RoomState, racer: int) -> list[Event]:
    """A new round for whoever stays. Asked again in that round's lobby (a retry
    whose reply was lost), it is already done. A host who does not stay is followed,
    as when a host leaves (:func:`leave`), by the earliest-joined racer who stays
    (the asker became host, whoever had joined before it)."""
    _member(state, racer)
    if state.phase == Phase.LOBBY and state.round > 1:
        return []
    if state.phase != Phase.FINISHED:
        raise RaceError("wrong_phase", "a rematch follows a finished race")
    staying = [
        r
        for r in state.racers.values()
        if (r.status != RacerStatus.LEFT and r.online) or r.racer == racer
    ]
    host = state.host if any(r.racer == state.host for r in staying) else staying[0].racer
    racers = [RacerState(r.racer, r.name).info() for r in staying]
    reset = event(EventType.ROOM_RESET, host=host, racers=racers)
    return [reset.but(carried=carried_into(state, racers, state.round + 1))]


def _status(member: RacerState, status: RacerStatus) -> Event:
    """The racer's counts as folded, with a new status (resigned, timed out)."""
    counts = {"foundation": member.foundation, "moves": member.moves, "face_down": member.face_down}
    return progress(member.racer, counts, status, member.place)


def grace_ends(member: RacerState, grace_floor_ms: int = 0) -> int | None:
    """When an offline racer's grace runs out. Grace only counts time during which the
    racer could have come back: ``grace_floor_ms`` is when the deciding node last
    (re)gained a working store — its start, or the end of a Redis outage — so an
    outage re-arms the grace instead of forfeiting everyone who was away."""
    if member.online or member.offline_since_ms is None:
        return None
    return max(member.offline_since_ms, grace_floor_ms) + DISCONNECT_GRACE_MS


def tick(
    state: RoomState,
    now_ms: int,
    commitment: Callable[[], str],
    result: Callable[[list[dict[str, Any]], str], dict[str, Any]],
    countdown_ms: int = COUNTDOWN_MS,
    grace_floor_ms: int = 0,
    seed_revealed: bool = False,
) -> list[Event]:
    """Everything the clock decides: a room's start when everyone is ready (or a quick
    room's lobby timer runs out), the start instant, the disconnect grace, the time
    limit, and the end of the race once nobody is playing.

    ``commitment()`` gives the round's seed commitment; ``result(standings, reason)``
    completes the RaceResult (scores, logs, seed and salt: the node has them).
    ``seed_revealed``: the round's seed already went out in a race_over the store has
    since lost (LiveRoom.seed_revealed): its time is up now, the countdown's start too.
    """
    phase = state.phase
    if phase == Phase.LOBBY:
        for member in state.racers.values():
            ends = grace_ends(member, grace_floor_ms)
            if ends is not None and now_ms >= ends:
                return leave(state, member.racer, LeaveReason.GRACE)  # a lobby ghost frees its seat
        racers = list(state.racers.values())
        if len(racers) >= 2:
            # Any room starts once everyone (its host included) is ready; a quick
            # room also when its lobby timer runs out.
            all_ready = all(r.ready for r in racers)
            deadline = state.lobby_deadline_ms if state.settings.quick else None
            timer_out = deadline is not None and now_ms >= deadline
            if (all_ready or timer_out) and state.deal_ready():
                return [countdown(now_ms, commitment(), countdown_ms, _open_boards(state))]
        return []
    if phase == Phase.COUNTDOWN:
        assert state.start_at_ms is not None
        if now_ms < state.start_at_ms and not seed_revealed:
            return []
        ends = state.start_at_ms + state.settings.time_limit_s * 1000
        return [
            event(
                EventType.STARTED,
                start_at_ms=state.start_at_ms,
                ends_at_ms=ends,
                commitment=state.commitment,
            )
        ]
    if phase != Phase.RACING:
        return []
    ends_at = state.ends_at_ms
    if seed_revealed or (ends_at is not None and now_ms >= ends_at):
        events = [_status(r, RacerStatus.TIMEOUT) for r in state.playing()]
        if events:
            return events
    for member in state.racers.values():
        ends = grace_ends(member, grace_floor_ms)
        if (
            member.status in (RacerStatus.PLAYING, RacerStatus.STUCK)
            and ends is not None
            and now_ms >= ends
        ):
            return leave(state, member.racer, LeaveReason.GRACE)
    if not state.playing():
        return [race_over(state, now_ms, result)]
    return []


def out_again(state: RoomState, back: Mapping[int, str]) -> list[Event]:
    """End again the race of a racer whose end the store lost (a rewind) and who is
    racing in it again: ``back`` maps such racers to how each went out (``resigned``,
    ``stuck``, or a leave's reason; LiveRoom.back_in_race). Out, it was no longer
    counted by fair spectating, so it may know cards of its deal it never turned up.
    One decision a tick, as the others: a racer who had left leaves again; any other
    resigns (a stuck racer's board, rewound, may have moves again: only a status that
    closes its log keeps them out). In the countdown, where nobody resigns, it leaves.
    The first of ``back`` only: the next tick takes the next."""
    if not back:
        return []
    racer, how = next(iter(back.items()))
    member = _member(state, racer)
    if state.phase == Phase.RACING and how in (RacerStatus.RESIGNED, RacerStatus.STUCK):
        return [_status(member, RacerStatus.RESIGNED)]
    reason = LeaveReason.GRACE if how == LeaveReason.GRACE else LeaveReason.LEFT
    return leave(state, racer, reason)


def race_over(
    state: RoomState,
    now_ms: int,
    result: Callable[[list[dict[str, Any]], str], dict[str, Any]],
) -> Event:
    table = standings(state)
    reason = end_reason([r["status"] for r in table])
    return event(EventType.RACE_OVER, **result(table, reason))


def next_wakeup(state: RoomState, grace_floor_ms: int = 0, end_due: bool = False) -> int | None:
    """When :func:`tick` may next have something to decide, for the node's timer.
    A time in the past means "now" (e.g. nobody can move any more: the race ends; or
    ``end_due``: its seed was revealed, as ``seed_revealed`` for :func:`tick`, or a
    racer whose end a rewind lost is racing again, :func:`out_again`)."""
    times: list[int] = []
    phase = state.phase
    if end_due and phase in (Phase.COUNTDOWN, Phase.RACING):
        return 0
    if (
        phase == Phase.LOBBY
        and state.settings.quick
        and state.lobby_deadline_ms is not None
        and state.deal_ready()
    ):
        # Only once the deal is ready, as :func:`tick` starts the race only then (the
        # deal's fold arms the timer again). Run out before it, the deadline was "now"
        # until the deal came: the timer fired every millisecond, each a tick that
        # read the room from the store and decided nothing.
        times.append(state.lobby_deadline_ms)
    if phase == Phase.LOBBY:
        for member in state.racers.values():
            ends = grace_ends(member, grace_floor_ms)
            if ends is not None:
                times.append(ends)
    if phase == Phase.COUNTDOWN and state.start_at_ms is not None:
        times.append(state.start_at_ms)
    if phase == Phase.RACING:
        if not state.playing():
            return 0
        if state.ends_at_ms is not None:
            times.append(state.ends_at_ms)
        for member in state.racers.values():
            ends = grace_ends(member, grace_floor_ms)
            if member.status in (RacerStatus.PLAYING, RacerStatus.STUCK) and ends is not None:
                times.append(ends)
    return min(times) if times else None
