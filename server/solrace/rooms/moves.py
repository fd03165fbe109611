"""A racer's move: check it on the racer's engine, store it, then acknowledge it.

The order is the contract (docs/server.md, "How a move flows"): the engine checks the
one move; the store appends it under its sequence number together with its progress
event — and, when the move completes the foundations, the racer's place and its
``finished`` event, in the same atomic script — then ``moved`` is sent and the events
are fanned out. If the store refuses or fails, the engine is dropped and rebuilt from
the store on the next request, so a move is never applied in memory but not stored.

Every request gets exactly one reply. A move retried with the same sequence number and
the same move (after ``unavailable`` or a lost reply) gets the stored outcome, so a
client can always retry; a different move under a used number is still refused.

A racer's moves on one node are checked and stored one at a time (LiveRoom.moving):
a resume may leave its old connection's move in flight beside the new connection's.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, NamedTuple

from solrace.protocol import BadMessage, ErrorCode
from solrace.protocol.errors import RETRY_MOVE_MS
from solrace.protocol.limits import MAX_LOG_LEN
from solrace.protocol.messages import moved_reply
from solrace.protocol.views import Phase, RacerStatus
from solrace.race import RaceError, RacerGame, events
from solrace.race.events import RoomEvent
from solrace.rules import NotationError, parse_move
from solrace.rules.log import UNDO
from solrace.store import Finish, MoveAppend
from solrace.store.errors import StoreUnavailable

from .node import no_longer_exists, refuse
from .records import pack_entry, pack_event

if TYPE_CHECKING:
    from .node import Node
    from .peer import Peer
    from .room import LiveRoom

log = logging.getLogger("solrace.moves")


def _canonical(entry: str) -> str:
    """The move an entry names, spelled one way, so a retry matches its stored entry
    however the client spelled it."""
    if entry == UNDO:
        return entry
    try:
        return str(parse_move(entry))
    except NotationError:
        return entry


def _reply(peer: Peer, request_id: int | None, seq: int, game: RacerGame, status: str) -> None:
    board = game.board
    peer.send(
        moved_reply(
            request_id,
            seq=seq,
            board=game.view(),
            status=status,
            moves=board.move_count,
            score=board.score,
        )
    )


async def move(node: Node, peer: Peer, seq: int, entry: str, request_id: int | None) -> None:
    received = time.perf_counter()
    room, racer = peer.racer_room()
    async with room.moving(racer):
        stored = await _checked_and_stored(node, peer, room, racer, seq, entry, request_id)
    if stored is None:
        return  # a retry of a stored move, answered
    result, game = stored.result, stored.game
    if result.replicas == 0:
        # The place stands on the master, but a failover now would lose it (the
        # loss would be detected and announced: docs/deploy.md).
        node.metrics.finishes_unreplicated.inc()
        log.warning(
            "a finish is acknowledged before any replica holds it", extra={"room": room.room_id}
        )
    _reply(peer, request_id, seq, game, stored.status)  # status: legal moves generated once
    node.metrics.moves_accepted.inc()
    node.metrics.move_latency.observe(time.perf_counter() - received)
    # The reply is sent: whatever fails from here on is logged, never a second reply.
    # The tail and the timers catch up with what this node could not fold now.
    try:
        await _after_move(node, room, racer, result, stored.progress, stored.at, stored.counts)
    except (StoreUnavailable, BadMessage):
        log.warning("could not fold a stored move yet", extra={"room": room.room_id})


async def _checked_and_stored(
    node: Node, peer: Peer, room: LiveRoom, racer: int, seq: int, entry: str, request_id: int | None
) -> _Stored | None:
    """The move checked and appended (:func:`_store`), again if the store's answer
    asks for it; None if it was the retry of a stored move (answered)."""
    floor = 0
    while True:
        try:
            stored = await _store(node, peer, room, racer, seq, entry, request_id, floor)
        except _Behind:
            # Checked on an engine behind the racer's stored log: once more, on one
            # rebuilt from the log (a retry of a stored move then gets its outcome).
            stored = await _store(
                node, peer, room, racer, seq, entry, request_id, floor, recheck=False
            )
        if stored is None or stored.result.finish_floor is None:
            return stored
        # Another node stored a finish with a later time than ours: places must agree
        # with times, so this finish is offered again no earlier than that one.
        room.games.pop(racer, None)
        floor = stored.result.finish_floor
        node.metrics.finishes_floored.inc()


class _Behind(Exception):
    """The append found the racer's log longer than the engine that checked the move:
    that engine was behind the store (dropped now), so the move is checked again."""


class _Stored(NamedTuple):
    """A move the store has answered: accepted, or refused for its finish time.

    A named tuple, not a frozen dataclass: made on every move, and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (about
    1,300 instructions a field on Python 3.11; docs/performance.md, round 27)."""

    result: MoveAppend
    game: RacerGame
    progress: RoomEvent
    at: int
    counts: dict[str, int]
    status: str


async def _store(
    node: Node,
    peer: Peer,
    room: LiveRoom,
    racer: int,
    seq: int,
    entry: str,
    request_id: int | None,
    floor: int,
    recheck: bool = True,
) -> _Stored | None:
    """Check the move on the racer's engine and append it, its time no earlier than
    ``floor``. None when it was a retry of a stored move (answered here); raises the
    refusal otherwise, or :class:`_Behind` (with ``recheck``) when the store's log
    shows the engine that checked the move was behind it."""
    state = room.state
    start_at = state.start_at_ms
    if state.phase == Phase.COUNTDOWN and start_at is not None and node.clock() >= start_at:
        await node.tick(room)  # the start instant has passed: start now
    member = state.racers.get(racer)
    if state.phase not in (Phase.RACING, Phase.FINISHED) or member is None:
        raise BadMessage(ErrorCode.WRONG_PHASE, "you are not racing now", seq=seq)
    game = await node.game(room, racer)
    if (
        seq > game.seq
        and await node.store.log_length(room.room_id, room.log_name(racer)) > game.seq
    ):
        # This engine is behind the store (rebuilt from a read older than a move
        # stored since): the store's log decides, not a cached engine. Its length is
        # asked first: a sequence number from the future otherwise cost a read and a
        # replay of the whole log, refused or not (an audit's racers with 5,000-move
        # logs sent them at the rate limit and slowed every room on the node 40-fold).
        room.games.pop(racer, None)
        game = await node.game(room, racer)
    if seq < game.seq and _canonical(game.entries[seq]) == _canonical(entry):
        # A retry of a stored move: its outcome, not a refusal (docs/protocol.md §6).
        node.metrics.moves_retried.inc()
        _reply(peer, request_id, seq, game, game.status())
        return None
    if state.phase != Phase.RACING or not state.can_move(member):
        raise BadMessage(ErrorCode.WRONG_PHASE, "you are not racing now", seq=seq)
    if room.seed_revealed():
        # Its race_over, seed and all, reached the racers before Redis lost it: the
        # room's timer ends the race now (LiveRoom.seed_revealed).
        node.schedule(room)
        raise BadMessage(ErrorCode.WRONG_PHASE, "the race is over", seq=seq)
    if room.is_back(racer):
        # Its end (a resignation, a leave) was lost by a rewind after spectators were
        # shown cards it had not turned up: the room's timer ends its race again now.
        node.schedule(room)
        raise BadMessage(ErrorCode.WRONG_PHASE, "your race is over", seq=seq)
    if seq != game.seq:
        raise BadMessage(ErrorCode.BAD_SEQ, seq=seq, expected=game.seq)
    checked = node.clock()  # the move's one clock reading: its time and the limit's
    ends_at = state.ends_at_ms
    if not floor and ends_at is not None and checked >= ends_at:
        # (A finish offered again at a floor was in time: the floor is an earlier
        # finish's.) The room's timer ends the race now, if it has not yet; one timer
        # per room, however many late moves come in while Redis is down.
        node.schedule(room)
        raise BadMessage(ErrorCode.WRONG_PHASE, "the time limit has passed", seq=seq)
    if seq >= MAX_LOG_LEN:
        # The log is full: race_over, every log in one frame, must stay readable by
        # clients. (After the time limit's check: a race that is over says so first.)
        raise BadMessage(
            ErrorCode.MOVE_LIMIT,
            f"you have made the {MAX_LOG_LEN:,} moves a race allows: resign, or wait for"
            " the race to end",
            seq=seq,
        )
    # Never earlier than the racer's last entry: that one may have been checked on a
    # node whose clock ran ahead of this one's (a resume moves a racer between nodes),
    # and a log whose times go backwards fails `solrace verify`. A finish offered again
    # is stored at ``floor`` itself: its first check, in time and earlier than the
    # floor, is its true time; this one's clock could be past the time limit by now.
    at = max(game.last_ms, floor) if floor else max(state.race_clock(checked), game.last_ms)
    try:
        game.apply(entry, at)
    except RaceError as exc:
        field = "move" if exc.code == ErrorCode.BAD_NOTATION else None
        raise refuse(exc, seq=seq, field=field) from None
    counts = game.progress()
    status = game.status()
    now = node.clock()
    # The move and the log length after it ride along server-side, so that every node
    # folds spectators' boards from the events it has, never re-reading logs.
    progress = events.progress(racer, counts, status, entry=(entry, at), log_length=seq + 1, at=now)
    finish = None
    if status == RacerStatus.FINISHED:
        places = range(1, room.meta.settings.max_racers + 1)
        finish = Finish(
            str(state.round),
            tuple(pack_event(events.finished(racer, p, at, counts).but(at=now)) for p in places),
            at,
        )
    round_no = state.round
    node.inflight += 1
    try:
        result = await node.store.append_move(
            room.room_id,
            room.log_name(racer),
            seq,
            pack_entry(entry, at),
            pack_event(progress),
            finish,
            round_no=round_no,
        )
    except StoreUnavailable:
        # Outcome unknown: forget this engine; the next request rebuilds it from the
        # store, which holds the truth, and a retry of this move gets its outcome.
        room.games.pop(racer, None)
        if status != RacerStatus.PLAYING:
            # Redis may have taken the move (its reply lost), which ends the racer's
            # race (a finish; stuck, in a room without undo), and the race too if it
            # was the last one playing — and nothing here folds it: the node reads
            # back no write of its own, and the racer's retry is answered from its
            # log, deciding nothing. Only the room check ended the race, two checks
            # running finding Redis ahead (1-2 s later), for no reason of
            # correctness. Ticked now, as _after_move ticks a stored one, the room is
            # read and the race ends at once (if Redis did not take the move, or undo
            # frees a stuck racer, the tick finds nothing to do; if Redis fails it, it
            # retries on the room's timer).
            node.spawn(node.tick(room))
        raise BadMessage(ErrorCode.UNAVAILABLE, seq=seq, retry_after_ms=RETRY_MOVE_MS) from None
    except BaseException:
        # Any other failure (a store error that is a bug, a cancellation): the engine
        # has the move applied and the store may not hold it. Kept, it answered the
        # move's retry as stored without asking the store — a move acknowledged that no
        # log held (seen on a Redis Cluster while a slot moved to a new master).
        room.games.pop(racer, None)
        raise
    finally:
        node.inflight -= 1
    if result.room_gone:
        # The room's meta key is gone: the store wrote nothing. Its expiry (keys set
        # to expire go one by one) is no loss; else Redis lost the room, and its
        # connections here are closed ``room_gone``, as a decision finding it gone does.
        room.games.pop(racer, None)
        if not room.expiring():
            node.room_lost(room)
        raise no_longer_exists()
    if result.race_over or result.log_closed:
        # A decision this node had not folded when it checked the move ended the race
        # (another node, or this one while the move was in flight), or this racer's
        # race (resigned, timed out, gone past the grace: this node was paused, or
        # cut off from Redis): the move is not stored. Fold the decision, then say so.
        room.games.pop(racer, None)
        with contextlib.suppress(StoreUnavailable):  # the refusal stands; the tail catches up
            await node.sync(room)
            under_way = room.state.phase in (Phase.COUNTDOWN, Phase.RACING)
            if result.race_over and room.state.round == round_no and under_way:
                # The store closed the round with no race_over to fold: its seed was
                # proved revealed to another node (Store.reveal_round), which may have
                # died before ending it. This node ends it now, as that node would.
                room.revealed_round = max(room.revealed_round, round_no)
                node.schedule(room)
        whose = "the" if result.race_over else "your"
        raise BadMessage(ErrorCode.WRONG_PHASE, f"{whose} race is over", seq=seq)
    if not result.accepted and result.finish_floor is None:
        room.games.pop(racer, None)
        if recheck and result.log_length > seq:
            raise _Behind
        if result.log_length < seq:
            await node.lost_writes(room, f"move log of racer {racer} is shorter than acked")
        raise BadMessage(ErrorCode.BAD_SEQ, seq=seq, expected=result.log_length)
    return _Stored(result, game, progress, at, counts, status)


async def _after_move(
    node: Node,
    room: LiveRoom,
    racer: int,
    result: MoveAppend,
    progress: RoomEvent,
    at: int,
    counts: dict[str, int],
) -> None:
    version, place = result.version, result.place
    before, after_progress, after_finished = result.links
    if version is not None:
        await node.ingest(room, version, progress, (before, after_progress))
    if place is not None and version is not None:
        finished = events.finished(racer, place, at, counts).but(at=progress.at)
        await node.ingest(room, version + 1, finished, (after_progress, after_finished))
        log.info("racer finished", extra={"room": room.room_id, "racer": racer, "place": place})
    if result.head_lost:
        # Stored, after the store restored the room's version or chain key that Redis
        # had lost: a lost write, announced like any other.
        await node.lost_writes(room, result.head_lost)
    if progress.d["status"] != RacerStatus.PLAYING:
        await node.tick(room)
