"""What a room does next: pure functions from (state, request, clock) to new events.

A node decides against the state it has folded up to version v and appends the events
only if the room is still at v (Redis compare-and-append); if another node got there
first, it folds the newer events and decides again. So each decision must be right for
*any* state it is given, and deciding twice from the same state gives the same answer.
Functions return protocol room events ``{"t", "d"}`` and raise :class:`RaceError` to
refuse a request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .errors import RaceError
from .state import (
    COUNTDOWN,
    FINISHED,
    LEFT,
    LOBBY,
    PLAYING,
    RACING,
    RESIGNED,
    STUCK,
    TIMEOUT,
    RacerState,
    RoomState,
    standings,
)

Event = dict[str, Any]

COUNTDOWN_MS: Final = 3_000
DISCONNECT_GRACE_MS: Final = 30_000


def event(kind: str, **data: Any) -> Event:
    return {"t": kind, "d": data}


def _member(state: RoomState, racer: int) -> RacerState:
    member = state.racers.get(racer)
    if member is None:
        raise RaceError("not_racer", "you are not a racer in this room")
    return member


def join(state: RoomState, name: str) -> list[Event]:
    """A new racer; its id is the next never-used id of the room."""
    if state.phase != LOBBY:
        raise RaceError("wrong_phase", "this race has already started: you can watch it")
    if len(state.racers) >= state.settings.max_racers:
        raise RaceError("room_full", f"the room is full ({state.settings.max_racers} racers)")
    info = RacerState(state.next_racer, name).info()
    return [event("racer_joined", **info)]


def ready(state: RoomState, racer: int, flag: bool) -> list[Event]:
    member = _member(state, racer)
    if state.phase != LOBBY:
        raise RaceError("wrong_phase", "ready flags only count in the lobby")
    if member.ready == flag:
        return []
    return [event("ready_changed", racer=racer, ready=flag)]


def start(
    state: RoomState,
    racer: int,
    now_ms: int,
    commitment: str,
    countdown_ms: int = COUNTDOWN_MS,
) -> list[Event]:
    """The host starts the countdown; everyone else must be ready."""
    _member(state, racer)
    if state.phase != LOBBY:
        raise RaceError("wrong_phase", "the race has already started")
    if racer != state.host:
        raise RaceError("not_host", "only the host can start the race")
    if len(state.racers) < 2:
        raise RaceError("not_ready", "a race needs at least two racers")
    waiting = [r.name for r in state.racers.values() if not r.ready and r.racer != racer]
    if waiting:
        raise RaceError("not_ready", f"not ready yet: {', '.join(waiting)}")
    return [countdown(now_ms, commitment, countdown_ms)]


def countdown(now_ms: int, commitment: str, countdown_ms: int = COUNTDOWN_MS) -> Event:
    return event("countdown", start_at_ms=now_ms + countdown_ms, commitment=commitment)


def resign(state: RoomState, racer: int) -> list[Event]:
    member = _member(state, racer)
    if state.phase != RACING or member.status not in (PLAYING, STUCK):
        raise RaceError("wrong_phase", "you can only resign while racing")
    return [_status(member, RESIGNED)]


def leave(state: RoomState, racer: int) -> list[Event]:
    """Leaving the lobby removes the racer; from the countdown on it is a forfeit."""
    member = _member(state, racer)
    if state.phase in (COUNTDOWN, RACING) and member.status == LEFT:
        return []
    remaining = [r for r in state.racers if r != racer]
    if state.phase in (COUNTDOWN, RACING):
        remaining = [r for r in remaining if state.racers[r].status != LEFT]
    host = state.host if state.host != racer else (remaining[0] if remaining else None)
    return [event("racer_left", racer=racer, host=host)]


def presence(state: RoomState, racer: int, online: bool) -> list[Event]:
    member = state.racers.get(racer)
    if member is None or member.online == online:
        return []
    return [event("presence", racer=racer, online=online)]


def resumed(state: RoomState, racer: int) -> list[Event]:
    """A racer's new connection: announced even if the racer never looked offline, so
    that the node holding its previous connection (maybe another node) closes it."""
    if racer not in state.racers:
        return []
    return [event("presence", racer=racer, online=True)]


def rematch(state: RoomState, racer: int) -> list[Event]:
    _member(state, racer)
    if state.phase != FINISHED:
        raise RaceError("wrong_phase", "a rematch follows a finished race")
    staying = [
        r for r in state.racers.values() if (r.status != LEFT and r.online) or r.racer == racer
    ]
    host = state.host if any(r.racer == state.host for r in staying) else racer
    racers = [RacerState(r.racer, r.name).info() for r in staying]
    return [event("room_reset", host=host, racers=racers)]


def _status(member: RacerState, status: str) -> Event:
    return event(
        "progress",
        racer=member.racer,
        foundation=member.foundation,
        moves=member.moves,
        face_down=member.face_down,
        status=status,
        place=member.place,
    )


def tick(
    state: RoomState,
    now_ms: int,
    commitment: Callable[[], str],
    result: Callable[[list[dict[str, Any]], str], dict[str, Any]],
    countdown_ms: int = COUNTDOWN_MS,
) -> list[Event]:
    """Everything the clock decides: a room's start when everyone is ready (or a quick
    room's lobby timer runs out), the start instant, the disconnect grace, the time
    limit, and the end of the race once nobody is playing.

    ``commitment()`` gives the round's seed commitment; ``result(standings, reason)``
    completes the RaceResult (scores, logs, seed and salt: the node has them).
    """
    phase = state.phase
    if phase == LOBBY:
        for member in state.racers.values():
            offline = member.offline_since_ms
            gone = offline is not None and now_ms >= offline + DISCONNECT_GRACE_MS
            if not member.online and gone:
                return leave(state, member.racer)  # a lobby ghost frees its seat
        racers = list(state.racers.values())
        if len(racers) >= 2:
            # Any room starts once everyone (its host included) is ready; a quick
            # room also when its lobby timer runs out.
            all_ready = all(r.ready for r in racers)
            deadline = state.lobby_deadline_ms if state.settings.quick else None
            timer_out = deadline is not None and now_ms >= deadline
            if all_ready or timer_out:
                return [countdown(now_ms, commitment(), countdown_ms)]
        return []
    if phase == COUNTDOWN:
        assert state.start_at_ms is not None
        if now_ms < state.start_at_ms:
            return []
        ends = state.start_at_ms + state.settings.time_limit_s * 1000
        return [
            event(
                "started",
                start_at_ms=state.start_at_ms,
                ends_at_ms=ends,
                commitment=state.commitment,
            )
        ]
    if phase != RACING:
        return []
    ends_at = state.ends_at_ms
    if ends_at is not None and now_ms >= ends_at:
        events = [_status(r, TIMEOUT) for r in state.playing()]
        if events:
            return events
    for member in state.racers.values():
        if (
            member.status in (PLAYING, STUCK)
            and not member.online
            and member.offline_since_ms is not None
            and now_ms >= member.offline_since_ms + DISCONNECT_GRACE_MS
        ):
            return leave(state, member.racer)
    if not state.playing():
        return [race_over(state, now_ms, result)]
    return []


def race_over(
    state: RoomState,
    now_ms: int,
    result: Callable[[list[dict[str, Any]], str], dict[str, Any]],
) -> Event:
    table = standings(state)
    if table and all(r["status"] == LEFT for r in table):
        reason = "abandoned"
    elif any(r["status"] == TIMEOUT for r in table):
        reason = "time_limit"
    else:
        reason = "all_done"
    return event("race_over", **result(table, reason))


def next_wakeup(state: RoomState) -> int | None:
    """When :func:`tick` may next have something to decide, for the node's timer."""
    times: list[int] = []
    phase = state.phase
    if phase == LOBBY and state.settings.quick and state.lobby_deadline_ms is not None:
        times.append(state.lobby_deadline_ms)
    if phase == LOBBY:
        for member in state.racers.values():
            offline = member.offline_since_ms
            if not member.online and offline is not None:
                times.append(offline + DISCONNECT_GRACE_MS)
    if phase == COUNTDOWN and state.start_at_ms is not None:
        times.append(state.start_at_ms)
    if phase == RACING:
        if state.ends_at_ms is not None:
            times.append(state.ends_at_ms)
        for member in state.racers.values():
            offline = member.offline_since_ms
            if member.status in (PLAYING, STUCK) and not member.online and offline is not None:
                times.append(offline + DISCONNECT_GRACE_MS)
    return min(times) if times else None
