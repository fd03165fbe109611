"""One WebSocket connection as a :class:`~solrace.rooms.peer.Peer`: its rate limit,
and the receive loop that turns frames into requests for the room core.

Frames go out with ``websockets``' synchronous ``broadcast`` writer, never ``await
send``: a write then happens exactly when it is called, so the order in which the node
emits replies and events is the order on the wire, and one slow client can never stall
the node. A client whose unread output grows past a limit is disconnected instead.
"""

from __future__ import annotations

import asyncio
import logging

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.exceptions import ConnectionClosed

from solrace.protocol import CloseCode, CloseReason, ProtocolError, RateLimited, TokenBucket, decode
from solrace.rooms import requests
from solrace.rooms.node import Node
from solrace.rooms.peer import Peer

from .metrics import Metrics

log = logging.getLogger("solrace.session")

#: Unread output after which a connection is dropped as too slow.
MAX_BUFFERED_BYTES = 4 * 1024 * 1024


class Session(Peer):
    def __init__(self, ws: ServerConnection, node: Node, metrics: Metrics) -> None:
        super().__init__()
        self.ws = ws
        self.node = node
        self.metrics = metrics
        loop = asyncio.get_running_loop()
        self.bucket = TokenBucket(loop.time(), node.rate_per_s, node.rate_burst)
        self._closing: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- output
    def send_bytes(self, frame: bytes) -> None:
        if self.closed:
            return
        transport = self.ws.transport
        if transport is not None and transport.get_write_buffer_size() > MAX_BUFFERED_BYTES:
            log.warning("dropping a connection that does not read", extra=self.ids())
            self.close_later(CloseCode.POLICY_VIOLATION, CloseReason.TOO_SLOW)
            return
        broadcast([self.ws], frame)
        self.metrics.frames_out.inc()

    def close_later(self, code: int, reason: str) -> None:
        self.closed = True
        self._closing = asyncio.ensure_future(self.ws.close(code, reason))

    def ids(self) -> dict[str, object]:
        return {**super().ids(), "peer": str(self.ws.remote_address)}

    # ----------------------------------------------------------------- input
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for frame in self.ws:
                self.metrics.frames_in.inc()
                try:
                    self.bucket.require(loop.time())
                    envelope = decode(frame)
                except RateLimited as err:
                    log.info("rate limited", extra=self.ids())
                    await self._close_for(err.close_code or 1008, err.close_reason)
                    return
                except ProtocolError as err:
                    await self._close_for(err.close_code or 1007, err.close_reason)
                    return
                await requests.handle(self.node, self, envelope)
        except ConnectionClosed:
            pass

    async def _close_for(self, code: int, reason: str) -> None:
        """Close for bad input. Frames the peer already sent are read and dropped
        meanwhile: a flooder fills the receive queue, and websockets stops reading the
        socket while it is full, so the peer's closing frame would otherwise never be
        read and the close would hang until its timeout."""
        self.metrics.closes.labels(str(code)).inc()
        self.closed = True
        closing = asyncio.ensure_future(self.ws.close(code, reason))
        try:
            async for _ in self.ws:
                pass
        except ConnectionClosed:
            pass
        await closing
