"""RaceClient without a server: what a request leaves behind when it fails, and where a
reply is folded among the events."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
from collections.abc import AsyncIterator
from typing import Any, cast

import msgpack
import pytest
from solrace.protocol import Envelope, decode, encode
from solrace.protocol.limits import SUPPORTED_SUBPROTOCOLS
from solrace.race.decisions import DISCONNECT_GRACE_MS
from solrace.rules import deal
from solrace.rules import view as view_of
from solrace_client import RaceClient
from solrace_client.connection import (
    CLIENT_PING_INTERVAL_S,
    CLIENT_PING_TIMEOUT_S,
    CLOSE_WAIT_S,
    RETRY_DEFAULT_MS,
    RETRY_MAX_MS,
    ServerError,
    retry_after_s,
)
from solrace_client.errors import ConnectionLost
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosedError
from websockets.protocol import State
from websockets.typing import Subprotocol

from tests.support.fake_server import FakeRace, fake_server


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


@contextlib.asynccontextmanager
async def _no_unretrieved_future() -> AsyncIterator[None]:
    """The block, then a garbage collection: the event loop's exception handler was
    never called (a future whose exception nobody retrieved says so when collected)."""
    stray: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: stray.append(context))
    try:
        yield
        gc.collect()
        await asyncio.sleep(0)
        assert not stray, stray
    finally:
        loop.set_exception_handler(None)


async def test_a_request_whose_send_fails_leaves_no_unretrieved_future() -> None:
    ws = _Closing()
    client = RaceClient(cast(ClientConnection, ws))
    async with _no_unretrieved_future():
        with pytest.raises(ConnectionLost):  # websockets' error, in words
            await client.ping()
        ws.end.set()
        await client.closed


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
    board = view_of(deal("yukon", 1), owner=True)
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


class _ClosedDuringSend(_Closing):
    """A connection the server closes while a frame is being sent: the reader ends
    (and fails the request's future) first, then the send fails."""

    def __init__(self) -> None:
        super().__init__()
        self.reader_done: asyncio.Future[None] | None = None

    async def send(self, frame: Any) -> None:
        self.end.set()
        assert self.reader_done is not None
        await self.reader_done
        raise ConnectionClosedError(None, None)


async def test_a_close_while_a_request_is_sent_leaves_no_unretrieved_future() -> None:
    """An audit: a server closing the connection while the bot sent a move left
    "Future exception was never retrieved … ConnectionError" on stderr, three lines
    after the one line ``solrace`` says."""
    ws = _ClosedDuringSend()
    client = RaceClient(cast(ClientConnection, ws))
    ws.reader_done = client.closed
    async with _no_unretrieved_future():
        with pytest.raises(ConnectionLost):  # websockets' error, in words
            await client.ping()


@pytest.mark.parametrize(
    ("asked", "wait_s"),
    [
        (1000, 1.0),
        (None, RETRY_DEFAULT_MS / 1000),
        (10**12, RETRY_MAX_MS / 1000),  # a hostile server: decades, once
        (-5, RETRY_DEFAULT_MS / 1000),
        ("soon", RETRY_DEFAULT_MS / 1000),  # was a ValueError traceback
        (1e308, RETRY_DEFAULT_MS / 1000),
        (True, RETRY_DEFAULT_MS / 1000),
    ],
)
def test_a_refusals_pause_is_bounded(asked: Any, wait_s: float) -> None:
    err = ServerError({"code": "unavailable", "message": "…", "retry_after_ms": asked})
    assert retry_after_s(err) == wait_s


class _Hostile:
    """A server connection that sends ``frames`` at once, then stays open until the
    client closes it (and refuses sends after that, as a closed socket does)."""

    def __init__(self, frames: list[Any]) -> None:
        self.frames = frames
        self.closed_with: tuple[int, str] | None = None
        self.shut = asyncio.Event()

    async def send(self, frame: Any) -> None:
        """Taken, as websockets takes a frame while its close handshake is under way:
        nothing says it goes nowhere."""

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed_with = (code, reason)
        self.shut.set()

    def __aiter__(self) -> Any:
        return self._frames()

    async def _frames(self) -> Any:
        for frame in self.frames:
            yield frame
        await self.shut.wait()


_LOBBY = {
    "room": "r_1",
    "code": "ABC234",
    "version": 1,
    "phase": "lobby",
    "settings": {"variant": "yukon", "options": {}},
    "host": 1,
    "racers": [{"racer": 1, "name": "Ann", "status": "waiting"}],
    "you": None,
}


@pytest.mark.parametrize(
    ("frames", "closed_with", "says"),
    [
        ([b"\xc1"], (1007, "bad_frame"), "unreadable frame"),
        (["text"], (1003, "bad_frame"), "unreadable frame"),
        (
            [msgpack.packb({"t": "x", "d": {"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}})],
            (1009, "too_large"),
            "unreadable",
        ),
        (
            [encode(Envelope("progress", v=2, d={"racer": [1], "foundation": 1}))],
            (1007, "bad_frame"),
            "cannot fold (TypeError",
        ),
    ],
)
async def test_a_frame_the_client_cannot_read_closes_the_connection(
    frames: list[Any], closed_with: tuple[int, str], says: str
) -> None:
    """An audit (a hostile server): the reader stopped at a frame it could not decode
    or fold, and left the connection open, so the next request waited its 10 s for a
    reply nobody would read, and the bot said "connection lost (TimeoutError)"."""
    ws = _Hostile(frames)
    client = RaceClient(cast(ClientConnection, ws))
    client.view.load(_LOBBY)  # as a watch would have (before the reader's first frame)
    async with asyncio.timeout(1):
        await client.closed
        await ws.shut.wait()
        with pytest.raises(ConnectionError, match=re.escape(client.failure or "?")):
            await client.ping()
    assert ws.closed_with == closed_with
    assert client.failure is not None and says in client.failure, client.failure


async def test_a_reply_to_no_request_waiting_is_not_folded() -> None:
    """An audit (a hostile server): a ``moved`` with an id the client never sent was
    folded as this racer's move (next seq 1, no board), and the bot, its seq now ahead
    of the server's, stalled. Nor does a ``watching`` nobody asked for replace the room."""
    board = view_of(deal("yukon", 1), owner=True)
    you = {"racer": 1, "board": board, "next_seq": 0, "moves": 0, "score": 0}
    racing = {**_LOBBY, "phase": "racing", "you": {**you, "status": "playing"}}
    elsewhere = {**_LOBBY, "room": "r_2", "code": "XYZ789"}
    progress = {"racer": 1, "foundation": 0, "moves": 0, "face_down": 21, "status": "playing"}
    ws = _Hostile(
        [
            encode(Envelope("moved", id=99999, d={"seq": 0})),
            encode(Envelope("watching", id=99998, d={"room": "r_2", "snapshot": elsewhere})),
            encode(Envelope("progress", v=2, d={**progress, "place": None})),
        ]
    )
    client = RaceClient(cast(ClientConnection, ws))
    client.view.load(racing, 1)
    await client.next_event("progress", timeout=1)  # the two replies came before it
    assert client.view.next_seq == 0 and client.view.my_board == board
    assert client.view.room == "r_1" and client.view.code == "ABC234"
    await client.close()


class _Answering(_Hostile):
    """A server connection that answers each request with ``reply(request)``; its
    frames end when the client closes it."""

    def __init__(self, reply: Any) -> None:
        super().__init__([])
        self.reply = reply
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def send(self, frame: Any) -> None:
        if not self.shut.is_set():
            self.queue.put_nowait(encode(self.reply(decode(frame))))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await super().close(code, reason)
        self.queue.put_nowait(None)

    async def _frames(self) -> Any:
        while (frame := await self.queue.get()) is not None:
            yield frame


async def test_a_reply_that_cannot_be_folded_fails_its_request_at_once() -> None:
    """A ``watching`` whose snapshot has racers ``[1, 2]``: its fold raised, the
    connection closed, but the request, no longer counted as waiting, waited its 10 s."""
    garbage = {**_LOBBY, "racers": [1, 2]}
    ws = _Answering(lambda asked: Envelope("watching", id=asked.id, d={"snapshot": garbage}))
    client = RaceClient(cast(ClientConnection, ws))
    async with asyncio.timeout(2):
        with pytest.raises(ConnectionError, match="cannot fold"):
            await client.watch(code="ABC234")
        await ws.shut.wait()
    assert ws.closed_with == (1007, "bad_frame")


async def test_a_server_that_stops_answering_is_noticed_by_the_clients_keepalive() -> None:
    """A watch audit: a server paused with SIGSTOP for 10 s went unnoticed ("boards
    live"), and one paused for 50 s was noticed after about 44 s: websockets' default
    keepalive and close wait (20 + 20 + 10 s) are longer than the server's 30 s
    disconnect grace. Here a server that stops reading its socket once connected: the
    client's pings go unanswered and it gives the link up within 14 s."""
    most = CLIENT_PING_INTERVAL_S + CLIENT_PING_TIMEOUT_S + CLOSE_WAIT_S
    assert most <= DISCONNECT_GRACE_MS / 2000  # half the grace is left to resume in

    async def frozen(ws: ServerConnection) -> None:
        ws.transport.pause_reading()  # the client's pings are never read, never answered
        await ws.wait_closed()

    protocols = [Subprotocol(p) for p in SUPPORTED_SUBPROTOCOLS]
    async with serve(frozen, "127.0.0.1", 0, subprotocols=protocols) as server:
        port = server.sockets[0].getsockname()[1]
        client = await RaceClient.connect(f"ws://127.0.0.1:{port}")
        started = asyncio.get_running_loop().time()
        async with asyncio.timeout(most + 2):
            await client.closed
        took = asyncio.get_running_loop().time() - started
        assert took >= CLIENT_PING_TIMEOUT_S, took


async def test_an_aborted_connection_is_closed_at_once_and_sends_nothing_more() -> None:
    """``abort`` (a reply that never came: the TUI takes the link for dead): the
    connection counts as closed at once, a request after it fails without going out,
    and the reader ends without waiting for a close handshake nobody would answer."""
    received: list[Any] = []

    async def silent(ws: ServerConnection) -> None:
        async for frame in ws:
            received.append(frame)

    protocols = [Subprotocol(p) for p in SUPPORTED_SUBPROTOCOLS]
    async with serve(silent, "127.0.0.1", 0, subprotocols=protocols) as server:
        port = server.sockets[0].getsockname()[1]
        client = await RaceClient.connect(f"ws://127.0.0.1:{port}", pace=None)
        started = asyncio.get_running_loop().time()
        client.abort()
        assert client.closed.done()
        with pytest.raises(ConnectionError):
            await client.send_move("1>F", 0)
        async with asyncio.timeout(CLOSE_WAIT_S):
            await client.close()
        assert asyncio.get_running_loop().time() - started < CLOSE_WAIT_S / 2
        assert received == []


async def test_an_entry_sent_again_after_an_unseated_refusal_proposes_a_fresh_token() -> None:
    """``unavailable`` naming no seat: nothing of this racer was stored, but the claim
    its request took of the token may be left (the store failed before it could let it
    go), and a claim is taken once (a second request proposing that token is refused
    ``token_in_use``): the join goes again with a token of its own, which no claim holds."""
    proposed: list[str] = []

    def reply(request: Envelope) -> Envelope:
        proposed.append(str(request.d["token"]))
        if len(proposed) == 1:
            refusal = {"code": "unavailable", "message": "…", "retry_after_ms": 1}
            return Envelope("error", id=request.id, d=refusal)
        seat = {"room": "r_1", "racer": 2, "token": request.d["token"], "snapshot": _LOBBY}
        return Envelope("joined", id=request.id, d=seat)

    client = RaceClient(cast(ClientConnection, _Answering(reply)))
    joined = await client.join("ABC234", "Bob")
    assert len(proposed) == 2 and proposed[0] != proposed[1], proposed
    assert joined["token"] == client.token == proposed[1] and client.proposed is None
    await client.close()


@pytest.mark.parametrize("how", ["close", "abort"])
async def test_a_request_on_a_connection_the_server_just_closed_fails_as_connection_lost(
    how: str,
) -> None:
    """A newcomer walk: a server that closed the connection right after its handshake
    (a node going down, a proxy dropping it) made ``solrace fetch`` and ``rooms`` a
    traceback ending in ``ConnectionClosedError``, most runs: the socket had seen the
    close, the reader not yet, and the request's send raised websockets' own error,
    which no command catches. It fails as every lost connection does, ConnectionLost,
    in words."""

    async def closing(ws: ServerConnection) -> None:
        if how == "close":
            await ws.close(1011, "boom")
        else:
            ws.transport.abort()

    protocols = [Subprotocol(p) for p in SUPPORTED_SUBPROTOCOLS]
    async with serve(closing, "127.0.0.1", 0, subprotocols=protocols) as server:
        port = server.sockets[0].getsockname()[1]
        client = await RaceClient.connect(f"ws://127.0.0.1:{port}", pace=None)
        while client.ws.protocol.state is not State.CLOSED:  # the socket saw it go
            await asyncio.sleep(0)
        with pytest.raises(ConnectionLost) as lost:
            await client.request("rooms")
        assert str(lost.value) == ("the server failed" if how == "close" else "connection closed")
        await client.close()


async def test_an_entry_answered_with_another_reply_closes_the_connection_saying_why() -> None:
    """A faulty or hostile server that answered a ``resume`` with ``ok`` (no room, no
    snapshot): the client read it as ``joined`` and ``solrace bot``, reconnecting,
    ended with a KeyError traceback. It is a frame of a shape no fold expects: the
    connection closes, the request fails with ConnectionLost saying why."""
    async with fake_server(FakeRace()) as url:
        client = await RaceClient.connect(url, pace=None)
        try:
            with pytest.raises(ConnectionLost, match="a resume answered 'ok', not 'joined'"):
                await client.resume(room="r_fake00000001", token="T" * 24, since=None)
            assert client.failure is not None
            assert "cannot fold" in client.failure
        finally:
            await client.close()
