"""RaceClient without a server: what a request leaves behind when it fails, and where a
reply is folded among the events."""

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


class _Scripted:
    """A connection that answers the first frame sent with ``frames``, in order."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames
        self.sent = asyncio.Event()

    async def send(self, frame: Any) -> None:
        self.sent.set()

    def __aiter__(self) -> Any:
        return self._frames()

    async def _frames(self) -> Any:
        await self.sent.wait()
        for frame in self.frames:
            yield frame


async def test_a_moved_reply_is_folded_where_it_arrives_among_the_events() -> None:
    """The reply to a move, then ``race_over`` right behind it: the view ends with the
    race's verdict, not with the reply's older ``playing``."""
    from solrace.protocol import Envelope, encode
    from solrace_client.roomview import RoomView

    from tests.client.test_roomview import snapshot

    view = RoomView()
    view.load(snapshot(phase="racing", version=6), racer=1)
    board = {"variant": "yukon", "tableau": []}
    moved = {"seq": 0, "board": board, "status": "playing", "moves": 1, "score": 5}
    standings = [{"place": 1, "racer": 1, "name": "Ann", "status": "timeout"}]
    over = {"reason": "time_limit", "standings": standings}
    frames = [
        encode(Envelope("moved", id=1, d=moved)),
        encode(Envelope("race_over", v=7, d=over)),
    ]
    client = RaceClient(cast(ClientConnection, _Scripted(frames)), view=view)
    reply = await client.move("1>F")
    await client.closed
    assert reply["seq"] == 0 and client.seq == 1 and client.board == board
    assert view.my_status == "timeout" and view.phase == "finished" and client.version == 7
    assert (await client.next_event()).t == "race_over"
