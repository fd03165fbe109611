"""One WebSocket connection: its role (idle, racer, spectator), its rate limit, and
the receive loop that turns frames into requests for the node.

Frames go out with ``websockets``' synchronous ``broadcast`` writer, never ``await
send``: a write then happens exactly when it is called, so the order in which the node
emits replies and events is the order on the wire, and one slow client can never stall
the node. A client whose unread output grows past a limit is disconnected instead.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.exceptions import ConnectionClosed

from solrace.protocol import (
    BadMessage,
    CloseCode,
    CloseReason,
    ErrorCode,
    ProtocolError,
    RateLimited,
    TokenBucket,
    decode,
    encode,
)
from solrace.protocol.envelope import Envelope
from solrace.protocol.errors import RETRY_MOVE_MS, RETRY_STORE_MS
from solrace.protocol.messages import (
    CreateRoom,
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
    error_reply,
    ok_reply,
    parse_client_message,
    pong_reply,
    rooms_reply,
)
from solrace.race import RaceError
from solrace.store.errors import StoreUnavailable

from . import lobby, moves
from .node import refuse

if TYPE_CHECKING:
    from .node import Node
    from .room import LiveRoom

log = logging.getLogger("solrace.session")

#: Unread output after which a connection is dropped as too slow.
MAX_BUFFERED_BYTES = 4 * 1024 * 1024


class Session:
    def __init__(self, ws: ServerConnection, node: Node) -> None:
        self.ws = ws
        self.node = node
        self.room: LiveRoom | None = None
        self.racer: int | None = None
        loop = asyncio.get_running_loop()
        self.bucket = TokenBucket(loop.time(), node.rate_per_s, node.rate_burst)
        self.closed = False
        #: Tells this connection from the racer's other ones, on any node.
        self.conn_id = secrets.token_hex(8)
        self._closing: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- output
    def send(self, envelope: Envelope) -> None:
        self.send_bytes(encode(envelope))

    def send_bytes(self, frame: bytes) -> None:
        if self.closed:
            return
        transport = self.ws.transport
        if transport is not None and transport.get_write_buffer_size() > MAX_BUFFERED_BYTES:
            log.warning("dropping a connection that does not read", extra=self._ids())
            self.close_later(CloseCode.POLICY_VIOLATION, CloseReason.TOO_SLOW)
            return
        broadcast([self.ws], frame)
        self.node.metrics.frames_out.inc()

    def close_later(self, code: int, reason: str) -> None:
        self.closed = True
        self._closing = asyncio.ensure_future(self.ws.close(code, reason))

    # ------------------------------------------------------------------ role
    def attach_racer(self, room: LiveRoom, racer: int) -> None:
        self.room, self.racer = room, racer

    def attach_spectator(self, room: LiveRoom) -> None:
        self.room, self.racer = room, None

    def detach(self) -> None:
        self.room, self.racer = None, None

    def racer_room(self) -> tuple[LiveRoom, int]:
        if self.room is None:
            raise BadMessage(ErrorCode.NOT_RACER)
        if self.racer is None:
            raise BadMessage(ErrorCode.SPECTATOR_CANNOT_ACT)
        return self.room, self.racer

    def _ids(self) -> dict[str, Any]:
        return {
            "room": self.room.room_id if self.room else None,
            "racer": self.racer,
            "peer": str(self.ws.remote_address),
        }

    # ----------------------------------------------------------------- input
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        metrics = self.node.metrics
        try:
            async for frame in self.ws:
                metrics.frames_in.inc()
                try:
                    self.bucket.require(loop.time())
                    envelope = decode(frame)
                except RateLimited as err:
                    log.info("rate limited", extra=self._ids())
                    await self._close_for(err.close_code or 1008, err.close_reason)
                    return
                except ProtocolError as err:
                    await self._close_for(err.close_code or 1007, err.close_reason)
                    return
                await self._handle(envelope)
        except ConnectionClosed:
            pass

    async def _close_for(self, code: int, reason: str) -> None:
        """Close for bad input. Frames the peer already sent are read and dropped
        meanwhile: a flooder fills the receive queue, and websockets stops reading the
        socket while it is full, so the peer's closing frame would otherwise never be
        read and the close would hang until its timeout."""
        self.node.metrics.closes.labels(str(code)).inc()
        self.closed = True
        closing = asyncio.ensure_future(self.ws.close(code, reason))
        try:
            async for _ in self.ws:
                pass
        except ConnectionClosed:
            pass
        await closing

    async def _handle(self, envelope: Envelope) -> None:
        request_id = envelope.id
        try:
            message = parse_client_message(envelope)
            if self.node.draining:
                raise BadMessage(
                    ErrorCode.UNAVAILABLE, "server draining", retry_after_ms=RETRY_MOVE_MS
                )
            await self._dispatch(message, request_id)
        except BadMessage as err:
            self.send(error_reply(err, request_id))
        except RaceError as err:
            self.send(error_reply(refuse(err), request_id))
        except StoreUnavailable:
            log.warning("store unavailable", extra=self._ids())
            unavailable = BadMessage(ErrorCode.UNAVAILABLE, retry_after_ms=RETRY_STORE_MS)
            self.send(error_reply(unavailable, request_id))
        except Exception:
            log.exception("internal error", extra=self._ids())
            self.send(error_reply(BadMessage(ErrorCode.INTERNAL), request_id))

    async def _dispatch(self, message: object, request_id: int | None) -> None:
        node = self.node
        if isinstance(message, PlayMove):
            await moves.move(node, self, message.seq, message.move, request_id)
        elif isinstance(message, Ping):
            self.send(pong_reply(request_id, now_ms=node.clock()))
        elif isinstance(message, ListRooms):
            rooms = await lobby.list_rooms(node, message.variant)
            self.send(rooms_reply(request_id, rooms))  # type: ignore[arg-type]
        elif isinstance(message, CreateRoom | JoinRoom | QuickRace | Watch):
            if self.room is not None:
                raise BadMessage(ErrorCode.ALREADY_IN_ROOM)
            if isinstance(message, CreateRoom):
                await lobby.create(node, self, message, request_id)
            elif isinstance(message, JoinRoom):
                await lobby.join(node, self, message, request_id)
            elif isinstance(message, QuickRace):
                await lobby.quick(node, self, message, request_id)
            else:
                await lobby.watch(node, self, message, request_id)
        elif isinstance(message, Resume):
            await lobby.resume(node, self, message, request_id)
        elif isinstance(message, SetReady):
            await lobby.ready(node, self, message.ready, message.spectators == "open")
            self.send(ok_reply(request_id))
        elif isinstance(message, StartRace):
            await lobby.start_race(node, self)
            self.send(ok_reply(request_id))
        elif isinstance(message, Resign):
            await lobby.resign(node, self)
            self.send(ok_reply(request_id))
        elif isinstance(message, Rematch):
            await lobby.rematch(node, self)
            self.send(ok_reply(request_id))
        elif isinstance(message, Leave):
            await lobby.leave(node, self)
            self.send(ok_reply(request_id))
        else:  # pragma: no cover - parse_client_message knows every type
            raise BadMessage(ErrorCode.UNKNOWN_TYPE)
