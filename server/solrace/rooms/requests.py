"""Client requests: one handler per message type, and exactly one reply per request.

:func:`handle` turns a decoded envelope into a call on the room core and every failure
into the documented ``error`` reply (docs/protocol.md §9): refusals with their code, a
store outage as ``unavailable`` with a retry hint, anything unexpected as ``internal``
(logged with its traceback here, never shown to the user).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from solrace.protocol import BadMessage, ErrorCode
from solrace.protocol.envelope import Envelope
from solrace.protocol.errors import RETRY_MOVE_MS, RETRY_STORE_MS
from solrace.protocol.limits import RESULT_COST
from solrace.protocol.messages import (
    CreateRoom,
    FetchResult,
    JoinRoom,
    Leave,
    ListRooms,
    Ping,
    PlayMove,
    QuickRace,
    Rematch,
    Resign,
    Resume,
    SetReady,
    StartRace,
    Watch,
    archived_reply,
    error_reply,
    ok_reply,
    parse_client_message,
    pong_reply,
    rooms_reply,
)
from solrace.race import RaceError
from solrace.store.errors import StoreUnavailable

from . import lobby, moves
from .counters import MOVE_REFUSALS, Defect
from .node import Node, refuse
from .peer import Peer
from .records import unpack

log = logging.getLogger("solrace.requests")

Handler = Callable[[Node, Peer, Any, int | None], Awaitable[None]]


async def _move(node: Node, peer: Peer, msg: PlayMove, request_id: int | None) -> None:
    await moves.move(node, peer, msg.seq, msg.move, request_id)


async def _ping(node: Node, peer: Peer, msg: Ping, request_id: int | None) -> None:
    peer.send(pong_reply(request_id, now_ms=node.clock()))


async def _list(node: Node, peer: Peer, msg: ListRooms, request_id: int | None) -> None:
    rooms = await lobby.list_rooms(node, peer, msg.variant)
    peer.send(rooms_reply(request_id, rooms))


async def _result(node: Node, peer: Peer, msg: FetchResult, request_id: int | None) -> None:
    """The result the node archived when the race ended (Node._archive), as it was
    saved: the race's own word, to compare a result file with (docs/client.md,
    "fetch"). Works in every connection state, like ``list``."""
    peer.charge(RESULT_COST)
    stored = await node.store.load_result(msg.race)
    if stored is None:  # never archived here, expired (--keep-results), or made up
        raise BadMessage(ErrorCode.UNKNOWN_RACE, field="race")
    record = unpack(stored)
    await lobby.prove_archived(node, peer, record)
    reply = archived_reply(
        request_id,
        race=msg.race,
        room=record["room"],
        settings=record["settings"],
        deal=record.get("deal"),
        result=record["result"],
    )
    peer.send(reply)


def _entering(
    enter: Callable[[Node, Peer, Any, int | None], Awaitable[None]],
) -> Handler:
    """A request that puts an idle connection in a room (create, join, quick, watch)."""

    async def handler(node: Node, peer: Peer, msg: Any, request_id: int | None) -> None:
        if peer.room is not None:
            raise BadMessage(ErrorCode.ALREADY_IN_ROOM)
        await enter(node, peer, msg, request_id)

    return handler


def _acknowledged(act: Callable[[Node, Peer, Any], Awaitable[None]]) -> Handler:
    """A racer's request answered with a plain ``ok`` once done."""

    async def handler(node: Node, peer: Peer, msg: Any, request_id: int | None) -> None:
        await act(node, peer, msg)
        peer.send(ok_reply(request_id))

    return handler


async def _resume(node: Node, peer: Peer, msg: Resume, request_id: int | None) -> None:
    """``resume`` needs an idle connection, except to resynchronise the racer this
    connection already is (docs/protocol.md §4): a spectator, or a racer of another
    room, is refused ``already_in_room`` before any room is loaded or token looked up
    (not ``bad_token``/``unknown_room``, as for an idle connection's stale token)."""
    room = peer.room
    if room is not None and (peer.racer is None or room.room_id != msg.room):
        raise BadMessage(ErrorCode.ALREADY_IN_ROOM)
    await lobby.resume(node, peer, msg, request_id)


async def _ready(node: Node, peer: Peer, msg: SetReady) -> None:
    await lobby.ready(node, peer, msg.ready, msg.spectators == "open")


#: Every client request type and its handler (parse_client_message knows no others).
HANDLERS: dict[type, Handler] = {
    PlayMove: _move,
    Ping: _ping,
    ListRooms: _list,
    FetchResult: _result,
    CreateRoom: _entering(lobby.create),
    JoinRoom: _entering(lobby.join),
    QuickRace: _entering(lobby.quick),
    Watch: _entering(lobby.watch),
    Resume: _resume,
    SetReady: _acknowledged(_ready),
    StartRace: _acknowledged(lambda node, peer, _msg: lobby.start_race(node, peer)),
    Resign: _acknowledged(lambda node, peer, _msg: lobby.resign(node, peer)),
    Rematch: _acknowledged(lambda node, peer, _msg: lobby.rematch(node, peer)),
    Leave: _acknowledged(lambda node, peer, _msg: lobby.leave(node, peer)),
}


async def handle(node: Node, peer: Peer, envelope: Envelope) -> None:
    """Answer one decoded request; never raises (the reply says what went wrong)."""
    request_id = envelope.id
    try:
        message = parse_client_message(envelope)
        if node.draining:
            raise BadMessage(ErrorCode.UNAVAILABLE, "server draining", retry_after_ms=RETRY_MOVE_MS)
        await HANDLERS[type(message)](node, peer, message, request_id)
    except BadMessage as err:
        _refuse(node, peer, err, envelope)
    except RaceError as err:
        _refuse(node, peer, refuse(err), envelope)
    except StoreUnavailable:
        # The outage is the node's to log, once (Node.store_failed): a line per
        # refused request was 40-76 lines in half a minute with two racers.
        log.debug("store unavailable", extra=peer.ids())
        unavailable = BadMessage(ErrorCode.UNAVAILABLE, retry_after_ms=RETRY_STORE_MS)
        _refuse(node, peer, unavailable, envelope)
    except Exception:
        log.exception("internal error", extra=peer.ids())
        node.metrics.defects.labels(Defect.REQUEST).inc()
        _refuse(node, peer, BadMessage(ErrorCode.INTERNAL), envelope)


def _refuse(node: Node, peer: Peer, err: BadMessage, envelope: Envelope) -> None:
    """Answer ``error``, counted by code (solrace_requests_refused_total): how an
    operator sees addresses held at their room limit (too_many_rooms), clients that
    keep sending bad messages, or an outage's unavailable replies. A ``move`` refused
    for a move's reason counts in solrace_moves_refused_total too, here, whichever
    step refused it: counted where the engine or the store refused it, a move whose
    notation the protocol could not read (``bad_notation``), one refused
    ``unavailable`` while the racer's engine was rebuilt or the node drained, were
    missing from it (the operator audit)."""
    node.metrics.requests_refused.labels(err.code).inc()
    if envelope.t == PlayMove.TYPE and err.code in MOVE_REFUSALS:
        node.metrics.moves_refused.labels(err.code).inc()
    peer.send(error_reply(err, envelope.id))


__all__ = ["HANDLERS", "handle"]
