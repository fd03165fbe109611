"""The benchmarks' lean WebSocket client against a real websockets server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from solrace.bench.wire import WireClient
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import InvalidStatus
from websockets.http11 import Request, Response

pytestmark = pytest.mark.asyncio

closed_with: list[int | None] = []


async def _handler(ws: ServerConnection) -> None:
    async for message in ws:
        if message == b"split":  # one message in three frames
            await ws.send([b"a", b"b", b"c"])
        elif message == b"bye":
            await ws.close(1001, "going away")
        else:
            assert isinstance(message, bytes)
            await ws.send(message[::-1])
    closed_with.append(ws.close_code)


def _refuse_some(ws: ServerConnection, request: Request) -> Response | None:
    if request.path == "/refused":
        return ws.respond(403, "no\n")
    return None


@pytest.fixture
async def server() -> AsyncIterator[str]:
    closed_with.clear()
    async with serve(
        _handler, "127.0.0.1", 0, process_request=_refuse_some, subprotocols=["p1"]
    ) as srv:
        yield _url(srv)


def _url(srv: Server) -> str:
    port = next(iter(srv.sockets)).getsockname()[1]
    return f"ws://127.0.0.1:{port}"


async def _next(queue: asyncio.Queue[bytes]) -> bytes:
    return await asyncio.wait_for(queue.get(), 5)


async def test_messages_go_both_ways_in_order_and_fragments_are_joined(server: str) -> None:
    got: asyncio.Queue[bytes] = asyncio.Queue()
    client = await WireClient.connect(server, got.put_nowait, ["p1"])
    assert client.open
    for i in range(50):
        client.send(f"m{i}".encode())
    assert [await _next(got) for _ in range(50)] == [f"m{i}".encode()[::-1] for i in range(50)]
    client.send(b"split")
    assert await _next(got) == b"abc"
    await client.close()
    assert not client.open
    await asyncio.sleep(0.05)
    assert closed_with == [1000]  # a clean close handshake, as the asyncio client does


async def test_a_refused_handshake_raises(server: str) -> None:
    with pytest.raises(InvalidStatus):
        await WireClient.connect(server + "/refused", lambda _: None, ["p1"])


async def test_a_server_that_closes_ends_the_connection(server: str) -> None:
    client = await WireClient.connect(server, lambda _: None, ["p1"])
    client.send(b"bye")
    for _ in range(100):
        if not client.open:
            break
        await asyncio.sleep(0.01)
    assert not client.open
    with pytest.raises(ConnectionError):
        client.send(b"more")
    await client.close()  # after the server closed: returns at once


async def test_only_plain_ws_urls() -> None:
    with pytest.raises(ValueError, match="ws://"):
        await WireClient.connect("wss://127.0.0.1:1", lambda _: None)
