"""A whole race as a server sends it to one racer, built with the server's own checked
builders (solrace.protocol.messages), for the client's tests of frames a faulty or
hostile server bends one field at a time (tests/client/test_roomview.py and the
terminal UI's tests/client/tui/test_hostile.py).

Racer 1 ("Me") joins a lobby of racer 2 ("Rival", the host); racer 3 ("Third") joins
and leaves; the race runs (countdown, deal, start, boards, progress, three moves of
racer 1's acknowledged ``moved``), racer 2 finishes, the race ends (``race_over`` with
the true seed, salt and logs) and a rematch resets the room.
"""

from __future__ import annotations

from typing import Any

from solrace.protocol import Envelope, commitment
from solrace.protocol.messages import (
    board_notice,
    countdown_event,
    deal_chosen_event,
    finished_event,
    joined_reply,
    moved_reply,
    presence_event,
    progress_event,
    race_over_event,
    racer_joined_event,
    racer_left_event,
    ready_changed_event,
    room_reset_event,
    started_event,
)
from solrace.rules import deal, view
from solrace.rules.log import apply_entry

from tests.support.fake_server import SEED, SETTINGS, VARIANT

SALT = "cd" * 32
COMMITMENT = commitment(SEED, SALT)
ROOM = "r_frames000001"
START_MS = 1_700_000_000_000
#: Racer 1's moves (draws from the stock: legal from the deal on).
MOVES = ("D", "D", "D")


def _racer(racer: int, name: str, *, ready: bool, online: bool = True) -> dict[str, Any]:
    return {"racer": racer, "name": name, "ready": ready, "status": "waiting",
            "foundation": 0, "moves": 0, "face_down": 0, "place": None,
            "online": online}  # fmt: skip


def race_frames() -> list[tuple[str, Envelope]]:
    """The frames, in order, each with how the client takes it: ``"load"`` (an entry
    reply: its snapshot is loaded), ``"moved"`` (a move's reply) or ``"apply"``."""
    board = deal(VARIANT, SEED, SETTINGS["options"])
    snapshot: Any = {
        "room": ROOM, "code": "FRAMES", "version": 2, "phase": "lobby",
        "settings": dict(SETTINGS), "host": 2,
        "racers": [_racer(2, "Rival", ready=True), _racer(1, "Me", ready=False)],
        "spectators": 0, "now_ms": START_MS - 5_000, "start_at_ms": None,
        "ends_at_ms": None, "commitment": None, "result": None, "deal": None,
        "you": {"racer": 1, "board": None, "next_seq": 0, "moves": 0, "score": 0,
                "status": "waiting"},
    }  # fmt: skip
    third: Any = {k: v for k, v in _racer(3, "Third", ready=False).items() if k != "online"}
    frames: list[tuple[str, Envelope]] = [
        (
            "load",
            joined_reply(1, room=ROOM, code="FRAMES", racer=1, token="T" * 24, snapshot=snapshot),
        ),
        ("apply", racer_joined_event(3, third)),
        ("apply", racer_left_event(4, racer=3, host=2)),
        ("apply", presence_event(5, racer=2, online=False)),
        ("apply", presence_event(6, racer=2, online=True)),
        ("apply", ready_changed_event(7, racer=1, ready=True)),
        ("apply", countdown_event(8, start_at_ms=START_MS, commitment=COMMITMENT)),
        ("apply", deal_chosen_event(9, certified=False, moves=None, difficulty=None)),
        (
            "apply",
            started_event(
                10, start_at_ms=START_MS, ends_at_ms=START_MS + 600_000, commitment=COMMITMENT
            ),
        ),
        (
            "apply",
            board_notice(racer=1, at_ms=START_MS, view=view(board, owner=True), owner=True),
        ),
        (
            "apply",
            board_notice(racer=2, at_ms=START_MS, view=view(board, owner=False), owner=False),
        ),
    ]
    version = 10
    for seq, move in enumerate(MOVES):
        apply_entry(board, move)
        frames.append(
            (
                "moved",
                moved_reply(
                    seq + 2,
                    seq=seq,
                    board=view(board, owner=True),
                    status="playing",
                    moves=board.move_count,
                    score=board.score,
                ),
            )
        )
        version += 1
        progress: Any = {"racer": 1, "foundation": board.foundation_count(),
                         "moves": board.move_count, "face_down": board.face_down_count(),
                         "status": "playing", "place": None}  # fmt: skip
        frames.append(("apply", progress_event(version, progress)))
    rival: Any = {"racer": 2, "foundation": 3, "moves": 9, "face_down": 12,
                  "status": "playing", "place": None}  # fmt: skip
    frames.append(("apply", progress_event(version + 1, rival)))
    frames.append(("apply", finished_event(version + 2, racer=2, place=1, elapsed_ms=61_234,
                                           foundation=52, moves=120)))  # fmt: skip
    result: Any = {
        "reason": "time_limit", "seed": SEED, "salt": SALT, "commitment": COMMITMENT,
        "certificate": None,
        "standings": [
            {"place": 1, "racer": 2, "name": "Rival", "status": "finished",
             "foundation": 52, "moves": 120, "score": 700, "elapsed_ms": 61_234,
             "reached_ms": 61_234, "log": [], "times": []},
            {"place": 2, "racer": 1, "name": "Me", "status": "timeout",
             "foundation": board.foundation_count(), "moves": board.move_count,
             "score": board.score, "elapsed_ms": None, "reached_ms": None,
             "log": list(MOVES), "times": [1_000, 2_000, 3_000]},
        ],
    }  # fmt: skip
    frames.append(("apply", race_over_event(version + 3, result)))
    lobby: Any = [{k: v for k, v in _racer(r, n, ready=False).items() if k != "online"}
                  for r, n in ((2, "Rival"), (1, "Me"))]  # fmt: skip
    frames.append(("apply", room_reset_event(version + 4, host=2, racers=lobby)))
    return frames
