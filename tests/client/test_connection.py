"""RaceClient without a server: what a request leaves behind when it fails."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, cast

import pytest
from solrace_client import RaceClient
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosedError


class _Closing:
    """A connection that refuses every send and whose frames end when ``end`` is set
    (the reader notices the close after the send failed, as on a real socket)."""

    def __init__(self) -> None:
        self.end = asyncio.Event()

    async def send(self, frame: Any) -> None:
        raise ConnectionClosedError(None, None)

    def __aiter__(self) -> _Closing:
        return self

    async def __anext__(self) -> bytes:
        await self.end.wait()
        raise StopAsyncIteration


async def test_a_request_whose_send_fails_leaves_no_unretrieved_future() -> None:
    ws = _Closing()
    client = RaceClient(cast(ClientConnection, ws))
    stray: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: stray.append(context))
    try:
        with pytest.raises(ConnectionClosedError):
            await client.ping()
        ws.end.set()
        await client.closed
        gc.collect()
        await asyncio.sleep(0)
        assert not stray, stray
    finally:
        loop.set_exception_handler(None)
