"""Realistic server-side data for the builder tests, made with the real rules engine so
the views are exactly what the server will send."""

from __future__ import annotations

from typing import Any

from solrace.protocol import commitment
from solrace.protocol.views import (
    Phase,
    RaceResult,
    RacerInfo,
    RoomSettings,
    RoomSummary,
    Snapshot,
    SnapshotRacer,
    Standing,
    You,
)
from solrace.rules import deal, view

SEED = 1234567890123
SALT = "3b" * 32
COMMITMENT = commitment(SEED, SALT)
TOKEN = "Vt3mYx0b6n2Qe1r_Lk9wZs4aP7cUoH5Q"


def board_view(variant: str = "yukon", owner: bool = True, **options: Any) -> dict[str, Any]:
    return view(deal(variant, SEED, options or None), owner=owner)


def settings(quick: bool = False) -> RoomSettings:
    return {
        "variant": "yukon",
        "options": {"auto_flip": True, "undo": True},
        "max_racers": 4,
        "time_limit_s": 900,
        "private": False,
        "spectator_delay_s": 30,
        "quick": quick,
        "deals": "winnable",
        "difficulty": None,
        "spectators": "fair",
    }


def racer(racer_id: int = 1, name: str = "Ann", **changes: Any) -> RacerInfo:
    info: RacerInfo = {
        "racer": racer_id,
        "name": name,
        "ready": False,
        "status": "waiting",
        "foundation": 0,
        "moves": 0,
        "face_down": 0,
        "place": None,
    }
    info.update(changes)  # type: ignore[typeddict-item]
    return info


def snapshot_racer(
    racer_id: int = 1, name: str = "Ann", online: bool = True, **changes: Any
) -> SnapshotRacer:
    return {**racer(racer_id, name, **changes), "online": online}


def standing(place: int = 1, racer_id: int = 1) -> Standing:
    return {
        "place": place,
        "racer": racer_id,
        "name": "Ann",
        "status": "finished",
        "foundation": 52,
        "moves": 141,
        "score": 585,
        "elapsed_ms": 312_456,
        "reached_ms": 312_456,
        "log": ["4:3>1", "2>F", "undo", "D"],
        "times": [1_200, 2_950, 4_100, 312_456],
    }


def result() -> RaceResult:
    return {
        "reason": "all_done",
        "standings": [standing(1, 1), standing(2, 2)],
        "seed": SEED,
        "salt": SALT,
        "commitment": COMMITMENT,
        "certificate": None,
    }


def you(racer_id: int = 1, board: bool = True) -> You:
    return {
        "racer": racer_id,
        "board": board_view() if board else None,
        "next_seq": 3,
        "moves": 4,
        "score": 15,
        "status": "playing",
    }


def snapshot(phase: Phase = Phase.RACING, racer_id: int | None = 1) -> Snapshot:
    started = phase != Phase.LOBBY
    return {
        "room": "r_8f3k2",
        "code": "K7QX2M",
        "version": 7,
        "phase": phase.value,
        "settings": settings(),
        "host": 1,
        "racers": [snapshot_racer(1), snapshot_racer(2, "Bob", ready=True)],
        "spectators": 3,
        "now_ms": 1_764_445_200_123,
        "start_at_ms": 1_764_445_205_000 if started else None,
        "ends_at_ms": 1_764_446_105_000 if phase in (Phase.RACING, Phase.FINISHED) else None,
        "commitment": COMMITMENT if started else None,
        "you": None if racer_id is None else you(racer_id),
        "result": result() if phase == Phase.FINISHED else None,
        "deal": {"certified": True, "moves": 97, "difficulty": "easy"},
    }


def room_summary() -> RoomSummary:
    return {
        "room": "r_8f3k2",
        "code": "K7QX2M",
        "variant": "yukon",
        "options": {},
        "phase": "lobby",
        "racers": 2,
        "max_racers": 4,
        "time_limit_s": 900,
        "spectator_delay_s": 0,
        "quick": True,
        "host": "Ann",
    }
