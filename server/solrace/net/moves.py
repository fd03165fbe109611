"""A racer's move: check it on the racer's engine, store it, then acknowledge it.

The order is the contract (docs/server.md, "How a move flows"): the engine checks the
one move; the store appends it under its sequence number together with its progress
event (group-committed with other racers' moves); only then is ``moved`` sent and the
event fanned out. If the store refuses or fails, the engine is dropped and rebuilt from
the store on the next request, so a move is never applied in memory but not stored.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from solrace.protocol import BadMessage, ErrorCode
from solrace.protocol.messages import moved_reply
from solrace.race import RaceError
from solrace.race.state import COUNTDOWN, DONE, PLAYING, RACING, STUCK
from solrace.store.errors import StoreUnavailable

from .node import refuse
from .records import pack, pack_entry

if TYPE_CHECKING:
    from .node import Node
    from .session import Session

log = logging.getLogger("solrace.moves")


async def move(node: Node, session: Session, seq: int, entry: str, request_id: int | None) -> None:
    received = time.perf_counter()
    room, racer = session.racer_room()
    state = room.state
    start_at = state.start_at_ms
    if state.phase == COUNTDOWN and start_at is not None and node.clock() >= start_at:
        await node.tick(room)  # the start instant has passed: start now
    member = state.racers.get(racer)
    if state.phase != RACING or member is None or member.status not in (PLAYING, STUCK):
        node.metrics.moves_refused.labels("wrong_phase").inc()
        raise BadMessage(ErrorCode.WRONG_PHASE, "you are not racing now", seq=seq)
    game = await node.game(room, racer)
    if seq != game.seq:
        node.metrics.moves_refused.labels("bad_seq").inc()
        raise BadMessage(ErrorCode.BAD_SEQ, seq=seq, expected=game.seq)
    at = state.race_clock(node.clock())
    try:
        applied = game.apply(entry, at)
    except RaceError as exc:
        node.metrics.moves_refused.labels(exc.code).inc()
        field = "move" if exc.code == "bad_notation" else None
        raise refuse(exc, seq=seq, field=field) from None
    progress = game.progress()
    status = applied.status
    event = {
        "t": "progress",
        "d": {"racer": racer, **progress, "status": status, "place": None},
        "at": node.clock(),
    }
    node.inflight += 1
    try:
        result = await node.store.append_move(
            room.room_id,
            room.log_name(racer),
            seq,
            pack_entry(entry, at),
            pack(event),
            finish_counter=str(state.round) if status == DONE else None,
        )
    except StoreUnavailable:
        # Outcome unknown: forget this engine; the next request rebuilds it from
        # the store, which holds the truth.
        room.games.pop(racer, None)
        node.metrics.moves_refused.labels("unavailable").inc()
        raise BadMessage(ErrorCode.UNAVAILABLE, seq=seq, retry_after_ms=500) from None
    finally:
        node.inflight -= 1
    if not result.accepted:
        room.games.pop(racer, None)
        node.metrics.moves_refused.labels("bad_seq").inc()
        raise BadMessage(ErrorCode.BAD_SEQ, seq=seq, expected=result.log_length)
    board = game.board
    session.send(
        moved_reply(
            request_id,
            seq=seq,
            board=game.view(),
            status=status,
            moves=board.move_count,
            score=board.score,
        )
    )
    node.metrics.moves_accepted.inc()
    node.metrics.move_latency.observe(time.perf_counter() - received)
    if result.version is not None:
        await node.ingest(room, result.version, event)
    if result.place is not None:
        finished = {
            "t": "finished",
            "d": {
                "racer": racer,
                "place": result.place,
                "elapsed_ms": at,
                "foundation": progress["foundation"],
                "moves": progress["moves"],
            },
            "at": node.clock(),
        }
        version = await node.store.append_event(room.room_id, pack(finished))
        await node.ingest(room, version, finished)
        ids = {"room": room.room_id, "racer": racer, "place": result.place}
        log.info("racer finished", extra=ids)
    if status != PLAYING:
        await node.tick(room)
