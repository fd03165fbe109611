"""A lean WebSocket client for the benchmarks' load: websockets' sans-I/O protocol
under a bare :class:`asyncio.Protocol`.

Why: the server benchmark's load generator must never be what limits a run, and at
the highest load steps it was near a full core. Profiles put a fifth of its CPU in
the asyncio client's per-frame machinery (a reader task, the message assembler, its
queue, a send context per frame) around the same sans-I/O protocol the server uses.
Here a received message goes straight from ``data_received`` to a callback, and a
send is one ``transport.write``: the protocol (framing, masking, handshake, close)
stays websockets', only the adapter is thin — as websockets itself is built.

Only what the load needs: binary and text messages in, binary messages out, a
subprotocol, no compression, no pings of its own (the server's are answered).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import cast

from websockets.client import ClientProtocol
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

#: How long :meth:`WireClient.close` waits for the server to end the connection.
CLOSE_TIMEOUT_S = 5.0


class WireClient(asyncio.Protocol):
    """One client connection; ``on_message`` gets every complete message's payload
    (bytes), in order, from the event loop's read callback."""

    def __init__(self, url: str, on_message: Callable[[bytes], None], subprotocols: Sequence[str]):
        self._protocol = ClientProtocol(
            parse_uri(url), subprotocols=[Subprotocol(s) for s in subprotocols] or None
        )
        self._on_message = on_message
        self._transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self._opened: asyncio.Future[None] = loop.create_future()
        self._lost: asyncio.Future[None] = loop.create_future()
        self._parts: list[bytes] = []

    @classmethod
    async def connect(
        cls, url: str, on_message: Callable[[bytes], None], subprotocols: Sequence[str] = ()
    ) -> WireClient:
        """Open the connection and complete the handshake (its refusal raises)."""
        uri = parse_uri(url)
        if uri.secure:
            raise ValueError("the benchmark's load client speaks ws:// only")
        client = cls(url, on_message, subprotocols)
        loop = asyncio.get_running_loop()
        await loop.create_connection(lambda: client, uri.host, uri.port)
        await client._opened
        return client

    @property
    def open(self) -> bool:
        return self._protocol.state is State.OPEN and not self._lost.done()

    def send(self, message: bytes) -> None:
        """Queue one binary message on the socket (raises ConnectionError once closed)."""
        if not self.open or self._transport is None:
            raise ConnectionError("the connection is closed")
        self._protocol.send_binary(message)
        self._flush()

    async def close(self) -> None:
        """Close handshake, then wait (bounded) for the server to end the connection."""
        if self._transport is None:
            return
        if self._protocol.state is State.OPEN:
            self._protocol.send_close(CloseCode.NORMAL_CLOSURE)
            self._flush()
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await asyncio.shield(self._lost)
        except TimeoutError:
            self._transport.abort()

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not an asyncio.Transport subclass on uvloop.
        self._transport = cast("asyncio.Transport", transport)
        self._protocol.send_request(self._protocol.connect())
        self._flush()

    def data_received(self, data: bytes) -> None:
        protocol = self._protocol
        protocol.receive_data(data)
        for event in protocol.events_received():
            if isinstance(event, Frame):
                self._frame(event)
            elif isinstance(event, Response) and not self._opened.done():
                if protocol.handshake_exc is not None:
                    self._opened.set_exception(protocol.handshake_exc)
                else:
                    self._opened.set_result(None)
        self._flush()  # pongs and the close handshake's reply

    def connection_lost(self, exc: Exception | None) -> None:
        self._protocol.receive_eof()
        if not self._opened.done():
            self._opened.set_exception(exc or ConnectionError("closed during the handshake"))
        if not self._lost.done():
            self._lost.set_result(None)

    # ------------------------------------------------------------------ internals
    def _frame(self, frame: Frame) -> None:
        if frame.opcode in (Opcode.BINARY, Opcode.TEXT, Opcode.CONT):
            if frame.fin and not self._parts:
                self._on_message(bytes(frame.data))
            elif frame.fin:
                self._parts.append(bytes(frame.data))
                message, self._parts = b"".join(self._parts), []
                self._on_message(message)
            else:
                self._parts.append(bytes(frame.data))

    def _flush(self) -> None:
        transport = self._transport
        if transport is None:
            return
        for chunk in self._protocol.data_to_send():
            if chunk:
                transport.write(chunk)
            elif transport.can_write_eof():
                transport.write_eof()  # the protocol's half-close after the close handshake
        if self._protocol.close_expected() and self._protocol.state is State.CLOSED:
            transport.close()
