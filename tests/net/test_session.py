"""net/session.py and the server's keepalive: what a client that does not read gets
(docs/protocol.md §13), seen from a raw TCP client that stops reading its socket.

An audit's client that stopped reading while it asked for replays never got the
documented 1008 ``too_slow``: the keepalive closed it first, and the close frame could
not reach it (a TCP reset). These tests pin both ways a non-reading client is closed
and what it sees of each."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import time

import pytest
from solrace.protocol import Envelope, encode
from solrace.protocol.limits import (
    CLOSE_TIMEOUT_S,
    KEEPALIVE_INTERVAL_S,
    KEEPALIVE_TIMEOUT_S,
    MAX_UNREAD_BYTES,
    SUBPROTOCOL,
)

from .conftest import Cluster
from .test_refusals import _ws_frame

#: A receive buffer the size of a slow link's: the kernel holds little for the client.
SMALL_BUFFER = 4096


async def _raw_client(
    url: str,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket client by hand, whose socket takes little before it is read."""
    host, port = url.removeprefix("ws://").rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 26)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n".encode()
    )
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    return reader, writer


async def _read_all(reader: asyncio.StreamReader, quiet_s: float = 5) -> tuple[bytes, str]:
    """Everything left to read (none for ``quiet_s``: a failure), and how it ended."""
    data = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(1 << 20), quiet_s):
            data += chunk
    except ConnectionResetError:
        return data, "reset"
    return data, "end of stream"


def _server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(opcode, payload) of the server's (unmasked) frames in ``data``."""
    frames, i = [], 0
    while i + 2 <= len(data):
        size, j = data[i + 1] & 0x7F, i + 2
        if size == 126:
            size, j = struct.unpack("!H", data[j : j + 2])[0], j + 2
        elif size == 127:
            size, j = struct.unpack("!Q", data[j : j + 8])[0], j + 8
        frames.append((data[i] & 0x0F, data[j : j + size]))
        i = j + size
    return frames


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)  # no store involved
async def test_a_client_that_answers_no_ping_is_closed_1011_by_the_keepalive(
    cluster: Cluster,
) -> None:
    """The server pings every KEEPALIVE_INTERVAL_S and closes a connection whose ping
    is unanswered for KEEPALIVE_TIMEOUT_S: 1011 ``keepalive ping timeout``. A client
    that reads (this one does, and answers nothing) gets the close frame."""
    server = await cluster.node()
    reader, writer = await _raw_client(server.url)
    started = time.monotonic()
    data, _ = await _read_all(reader, KEEPALIVE_INTERVAL_S + KEEPALIVE_TIMEOUT_S)
    took = time.monotonic() - started
    frames = _server_frames(data)
    assert [op for op, _ in frames] == [0x9, 0x8]  # one ping, unanswered; then the close
    close = frames[-1][1]
    assert (struct.unpack("!H", close[:2])[0], close[2:]) == (1011, b"keepalive ping timeout")
    assert took > KEEPALIVE_INTERVAL_S + KEEPALIVE_TIMEOUT_S - 1
    assert took < KEEPALIVE_INTERVAL_S + KEEPALIVE_TIMEOUT_S + CLOSE_TIMEOUT_S + 2
    writer.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)  # no store involved
async def test_a_client_that_leaves_its_output_unread_is_closed_too_slow_unseen(
    cluster: Cluster,
) -> None:
    """A client that stops reading and keeps asking (pings: the rate limit is lifted
    here, as fast as a racer may ask they would take hours) is closed 1008 ``too_slow``
    once MAX_UNREAD_BYTES wait in the node's buffer, counted in
    ``solrace_protocol_closes_total{code="1008"}``. The close frame waits behind what
    it has not read: it never sees it, and the connection is dropped (its stream ends,
    or is reset) once the close has waited CLOSE_TIMEOUT_S for its answer."""
    server = await cluster.node()

    def too_slow() -> float:
        sample = server.metrics.registry.get_sample_value(
            "solrace_protocol_closes_total", {"code": "1008"}
        )
        return sample or 0.0

    reader, writer = await _raw_client(server.url)
    writer.transport.pause_reading()  # the client reads nothing from here on
    # Each pong is ~30 bytes: enough pings for the node's buffer and the kernels'.
    ping = _ws_frame(0x2, encode(Envelope("ping", id=1)))
    pings = 3 * MAX_UNREAD_BYTES // 30
    sent = 0
    while too_slow() == 0 and sent < pings:
        writer.write(ping * 2000)
        sent += 2000
        await asyncio.sleep(0)  # the node reads as it goes; it is this process
        try:
            await asyncio.wait_for(writer.drain(), 1)
        except (TimeoutError, ConnectionError):
            break
    for _ in range(100):  # the last frames it read may still be handled
        if too_slow():
            break
        await asyncio.sleep(0.1)
    assert too_slow() == 1
    closed_at = time.monotonic()
    # The node drops the connection when its close has waited CLOSE_TIMEOUT_S; the
    # client, reading now, finds its stream cut short: no close frame ever comes.
    while server.admission.open and time.monotonic() < closed_at + CLOSE_TIMEOUT_S + 5:
        await asyncio.sleep(0.2)
    assert not server.admission.open
    assert time.monotonic() - closed_at > CLOSE_TIMEOUT_S - 1
    writer.transport.resume_reading()
    data, ended = await _read_all(reader)
    # Cut short: what the kernels held arrives (some MiB), the node's buffer never does.
    assert ended in ("reset", "end of stream") and len(data) < MAX_UNREAD_BYTES
    assert 0x8 not in [op for op, _ in _server_frames(data)]
    writer.close()
