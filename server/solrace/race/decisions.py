"""What a room does next: pure functions from (state, request, clock) to new events.

A node decides against the state it has folded up to version v and appends the events
only if the room is still at v (Redis compare-and-append); if another node got there
first, it folds the newer events and decides again. So every decision here must be
correct for *any* state, and deciding twice from the same state gives the same answer.
Functions raise :class:`RaceError` to refuse a request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .errors import RaceError
from .state import (
    COUNTDOWN,
    DONE,
    FINISHED,
    LEFT,
    LOBBY,
    OUT_STATUSES,
    PLAYING,
    RACING,
    RESIGNED,
    TIMEOUT,
    RoomState,
    standings,
)

Event = dict[str, Any]

COUNTDOWN_MS: Final = 3_000
QUICK_LOBBY_MS: Final = 20_000
DISCONNECT_GRACE_MS: Final = 30_000
MAX_NAME: Final = 24


def event(kind: str, **data: Any) -> Event:
    return {"t": kind, "d": data}


def check_name(name: object) -> str:
    if not isinstance(name, str):
        raise RaceError("bad_message", "name must be a string")
    name = " ".join(name.split())
    if not 1 <= len(name) <= MAX_NAME or not name.isprintable():
        raise RaceError("bad_message", f"a name is 1 to {MAX_NAME} printable characters")
    return name


def join(state: RoomState, racer: str, name: str, now_ms: int) -> list[Event]:
    if state.phase(now_ms) != LOBBY:
        raise RaceError("wrong_phase", "this race has already started; you can watch it")
    if len(state.racers) >= state.settings.max_racers:
        raise RaceError("room_full", f"the room is full ({state.settings.max_racers} racers)")
    deadline = None
    if state.settings.quick and len(state.racers) == 1:
        deadline = now_ms + QUICK_LOBBY_MS
    return [event("racer_joined", racer=racer, name=check_name(name), lobby_deadline_ms=deadline)]


def ready(state: RoomState, racer: str, flag: bool, now_ms: int) -> list[Event]:
    _racer(state, racer)
    if state.phase(now_ms) != LOBBY:
        raise RaceError("wrong_phase", "ready flags only count in the lobby")
    if not isinstance(flag, bool):
        raise RaceError("bad_message", "ready must be true or false")
    return [event("ready_changed", racer=racer, ready=flag)]


def start(
    state: RoomState, racer: str, now_ms: int, commit: Callable[[int], tuple[str, int]]
) -> list[Event]:
    """The host starts the countdown. ``commit(round)`` gives the round's seed
    commitment and the deal's face-down count (known only to the server)."""
    _racer(state, racer)
    if state.phase(now_ms) != LOBBY:
        raise RaceError("wrong_phase", "the race has already started")
    if racer != state.host:
        raise RaceError("not_host", "only the host can start the race")
    if len(state.racers) < 2:
        raise RaceError("wrong_phase", "a race needs at least two racers")
    return [_countdown(state, now_ms, commit)]


def _countdown(
    state: RoomState, now_ms: int, commit: Callable[[int], tuple[str, int]]
) -> Event:
    round_no = state.round or 1  # a rematch's room_reset has already numbered it
    digest, face_down = commit(round_no)
    return event(
        "countdown",
        round=round_no,
        start_at_ms=now_ms + COUNTDOWN_MS,
        commitment=digest,
        face_down=face_down,
    )


def resign(state: RoomState, racer: str, now_ms: int) -> list[Event]:
    member = _racer(state, racer)
    if state.phase(now_ms) != RACING or member.status != PLAYING:
        raise RaceError("wrong_phase", "you can only resign while racing")
    return [_status(state, member.racer, RESIGNED, now_ms)]


def leave(state: RoomState, racer: str, now_ms: int) -> list[Event]:
    member = _racer(state, racer)
    phase = state.phase(now_ms)
    if phase in (RACING, COUNTDOWN) and member.status == PLAYING:
        return [_status(state, racer, LEFT, now_ms)]
    if phase in (LOBBY, FINISHED):
        return [event("racer_left", racer=racer)]
    return []


def presence(state: RoomState, racer: str, online: bool, now_ms: int) -> list[Event]:
    member = state.racers.get(racer)
    if member is None or member.online == online:
        return []
    return [event("presence", racer=racer, online=online, at_ms=now_ms)]


def rematch(
    state: RoomState, racer: str, now_ms: int
) -> list[Event]:
    _racer(state, racer)
    if state.phase(now_ms) != FINISHED:
        raise RaceError("wrong_phase", "a rematch follows a finished race")
    return [event("room_reset", round=state.round + 1)]


def _status(state: RoomState, racer: str, status: str, now_ms: int) -> Event:
    member = state.racers[racer]
    return event(
        "progress",
        racer=racer,
        foundation=member.foundation,
        moves=member.moves,
        face_down=member.face_down,
        status=status,
        at_ms=state.race_clock(now_ms),
    )


def _racer(state: RoomState, racer: str) -> Any:
    member = state.racers.get(racer)
    if member is None:
        raise RaceError("not_racer", "you are not a racer in this room")
    return member


def tick(
    state: RoomState,
    now_ms: int,
    commit: Callable[[int], tuple[str, int]],
    reveal: Callable[[int], tuple[int, str]],
) -> list[Event]:
    """Everything the clock decides: the quick lobby timer and all-ready start, the
    disconnect grace, the time limit, and the end of the race when nobody is playing.
    ``reveal(round)`` gives the seed and salt (hex) to publish at the end."""
    phase = state.phase(now_ms)
    if phase == LOBBY:
        racers = list(state.racers.values())
        all_ready = len(racers) >= 2 and all(r.ready for r in racers)
        timer_out = (
            state.settings.quick
            and len(racers) >= 2
            and state.lobby_deadline_ms is not None
            and now_ms >= state.lobby_deadline_ms
        )
        if all_ready or timer_out:
            return [_countdown(state, now_ms, commit)]
        return []
    if phase not in (RACING, COUNTDOWN):
        return []
    events: list[Event] = []
    deadline = state.deadline_ms()
    timed_out = deadline is not None and now_ms >= deadline
    for member in state.playing():
        if timed_out:
            events.append(_status(state, member.racer, TIMEOUT, now_ms))
        elif (
            not member.online
            and member.offline_since_ms is not None
            and now_ms >= member.offline_since_ms + DISCONNECT_GRACE_MS
        ):
            events.append(_status(state, member.racer, LEFT, now_ms))
    if events:
        return events
    if phase == RACING and not state.playing():
        return [race_over(state, now_ms, reveal)]
    return []


def race_over(
    state: RoomState, now_ms: int, reveal: Callable[[int], tuple[int, str]]
) -> Event:
    seed, salt = reveal(state.round)
    table = standings(state)
    reason = "time" if any(r["status"] == TIMEOUT for r in table) else "all_done"
    return event(
        "race_over",
        round=state.round,
        standings=table,
        seed=seed,
        salt=salt,
        commitment=state.commitment,
        reason=reason,
        ended_at_ms=state.race_clock(now_ms),
    )


def next_wakeup(state: RoomState, now_ms: int) -> int | None:
    """When :func:`tick` may next have something to decide, for the node's timer."""
    phase = state.phase(now_ms)
    times: list[int] = []
    if phase == LOBBY and state.settings.quick and state.lobby_deadline_ms is not None:
        times.append(state.lobby_deadline_ms)
    if phase == COUNTDOWN and state.start_at_ms is not None:
        times.append(state.start_at_ms)
    if phase in (COUNTDOWN, RACING):
        deadline = state.deadline_ms()
        if deadline is not None:
            times.append(deadline)
        for member in state.playing():
            if not member.online and member.offline_since_ms is not None:
                times.append(member.offline_since_ms + DISCONNECT_GRACE_MS)
    return min(times) if times else None


__all__ = [
    "COUNTDOWN_MS",
    "DISCONNECT_GRACE_MS",
    "DONE",
    "OUT_STATUSES",
    "QUICK_LOBBY_MS",
    "check_name",
    "event",
    "join",
    "leave",
    "next_wakeup",
    "presence",
    "race_over",
    "ready",
    "rematch",
    "resign",
    "start",
    "tick",
]
