"""A protocol client for solrace (``solrace.v1``): the library the terminal client,
the bot and the tests are built on.

One :class:`RaceClient` is one WebSocket connection. Requests are coroutines that
return the reply's data or raise :class:`ServerError`; room events and notices are
queued in arrival order for :meth:`RaceClient.next_event`. Every frame is folded, as it
arrives, into the client's :class:`~solrace_client.roomview.RoomView` (``client.view``):
the room, its version, this racer's board and the ``seq`` of its next move. With the
token, that is what a resume needs. A connection that drops is not repaired here:
:class:`~solrace_client.session.Session` reconnects and resumes, onto the same view.

Requests are paced (:mod:`solrace_client.pacing`) to stay inside the rate limit every
server applies by default, or inside the lower one a server says it runs in its
handshake (``Solrace-Rate-Limit``), so a program may play as fast as it likes without
being disconnected; ``connect(..., pace=None)`` turns that off (for servers whose limit
was raised), ``pace=Pace(...)`` sets another (still kept inside a server's lower limit).

    client = await RaceClient.connect("ws://127.0.0.1:8765")
    joined = await client.create("yukon", "Ann")
    await client.ready()
    ...
    moved = await client.move("4:3>1")
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, ClassVar, Final, Literal, TypeVar

from solrace.argtypes import DEFAULT_PORT
from solrace.environ import variable
from solrace.protocol import (
    MAX_SERVER_FRAME_BYTES,
    SERVER_FRAME_LIMITS,
    SUBPROTOCOL,
    CloseCode,
    Envelope,
    ErrorCode,
    MalformedFrame,
    decode,
    encode,
    limits,
)
from solrace.protocol.handshake import RATE_LIMIT_HEADER, parse_rate_limit
from solrace.protocol.messages import REPLY_TYPES
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from . import pacing, wire
from .errors import (
    CONNECT_ERRORS,
    CONNECTION_CLOSED,
    ConnectionLost,
    closed_in_words,
    lost_reason,
)
from .errors import NoReply as NoReply  # raised here; defined beside the words for it
from .pacing import Pace, Pacer
from .roomview import Fold, RoomView

DEFAULT_SERVER = f"ws://127.0.0.1:{DEFAULT_PORT}"
#: The environment variable naming the server when ``--server`` is not given.
ENV_SERVER: Final = "SOLRACE_SERVER"


def server_flag(server: str) -> str:
    """`` --server URL`` for a command printed for the user to run next (``solrace
    watch CODE`` after a full room), so that it works as printed: empty where
    ``server`` is the one that command would ask by itself (``$SOLRACE_SERVER``, else
    :data:`DEFAULT_SERVER`). A hint without it asked ws://127.0.0.1:8765 of a room on
    the server the user had typed (a newcomer audit)."""
    default = env_server() or DEFAULT_SERVER
    return "" if server == default else f" --server {server}"


def env_server() -> str | None:
    """``$SOLRACE_SERVER`` without the spaces around it, or None when unset or blank:
    the one place it is read. As written (``export SOLRACE_SERVER="$URL "``) it never
    equalled the URL that answered, and every hint added a needless ``--server``."""
    return variable(ENV_SERVER)


_T = TypeVar("_T")


#: The most servers a ``--server`` list (or ``$SOLRACE_SERVER``) may name, and the
#: most of a race file's ``server`` list ``fetch`` tries: they are tried one after
#: another, and a host that does not answer takes 5 s each.
MAX_SERVERS: Final = 8


def server_list(servers: str) -> list[str]:
    """``--server``/``$SOLRACE_SERVER`` as the URLs to try in turn: one URL, or several
    separated by commas (nodes of one deployment; the first that answers is used)."""
    return [url.strip() for url in servers.split(",") if url.strip()]


async def first_answer(servers: str, ask: Callable[[str], Awaitable[_T]]) -> tuple[str, _T]:
    """The first of ``servers`` (:func:`server_list`) that ``ask`` reaches, and its
    answer; when none does, the last one's connection error. A refusal (ServerError)
    is an answer: it is raised at once, not tried on the next node."""
    *others, last = server_list(servers)
    for url in others:
        with contextlib.suppress(*CONNECT_ERRORS):
            return url, await ask(url)
    return last, await ask(last)


#: How long a request waits for its reply before the link is taken for dead (a
#: ``start`` waits :data:`limits.START_WAIT_S` longer: the server may hold it that long
#: while the deal is certified).
REQUEST_TIMEOUT_S: Final = 10.0

#: The client's own keepalive: a WebSocket ping every CLIENT_PING_INTERVAL_S, the link
#: taken for dead when one is not answered within CLIENT_PING_TIMEOUT_S, and then at
#: most :data:`CLOSE_WAIT_S` for the server's side of the close. websockets' defaults
#: (20 + 20 + 10 s, the server's own, docs/protocol.md) let a link that died without a
#: close (a laptop's Wi-Fi gone, a paused server) pass for live for 50 s; these notice
#: it in at most 14 s, so a racer's `Session` resumes well inside the server's 30 s
#: disconnect grace, and a watcher's screen says "reconnecting" instead of "live".
CLIENT_PING_INTERVAL_S: Final = 5.0
CLIENT_PING_TIMEOUT_S: Final = 7.0

#: How many times a ``create``/``join``/``quick`` refused ``unavailable`` is tried again
#: while the server's store stays down (each after the refusal's ``retry_after_ms``):
#: sent again, or the seat it named resumed, before the refusal goes to the caller
#: (:meth:`RaceClient._enter`).
SEAT_ATTEMPTS: Final = 10
#: How many times a ``resume`` refused ``rate_limited`` (the racer resumed less than
#: the server's interval ago, limits.RESUME_INTERVAL_S: 2 s) is sent again on the same
#: connection, each after the refusal's ``retry_after_ms``, before the refusal goes to
#: the caller. Once is enough unless another connection of the racer resumes meanwhile.
RESUME_WAITS: Final = 3
#: The pause before a retry when a refusal gives no ``retry_after_ms`` (or not a
#: whole number of milliseconds).
RETRY_DEFAULT_MS: Final = 200
#: The longest pause a refusal gets: a solrace server asks for a second at most, and a
#: hostile one asking for 10**12 ms kept the client asleep for decades.
RETRY_MAX_MS: Final = 10_000


#: How long a client that closes a connection (a frame it cannot read) waits for the
#: server's close frame.
CLOSE_WAIT_S: Final = 2.0

#: The reply whose data the view folds, by the request it answers: a snapshot for an
#: entry (``joined``, ``watching``), this racer's move for a ``move`` (``moved``). Any
#: other reply, or one to no request still waiting, is not folded.
_FOLDED_REPLY: Final = {
    "create": "joined",
    "join": "joined",
    "quick": "joined",
    "resume": "joined",
    "watch": "watching",
    "move": "moved",
}

#: The reply each request that is not folded is answered with (any other: ``ok``).
#: One answered otherwise (``ok`` to a ``list``) is a frame no fold expects: read as
#: the one asked for, `solrace rooms` ended with a KeyError traceback.
_REPLY: Final = {**_FOLDED_REPLY, "list": "rooms", "result": "archived", "ping": "pong"}

#: ``connect``'s default pace: :data:`pacing.SERVER_DEFAULT_PACE`, read when connecting.
SERVER_DEFAULT: Final = "server-default"


def advertised_limit(ws: ClientConnection) -> tuple[float, float] | None:
    """The rate limit the server advertised in its handshake answer, ``(rate_per_s,
    burst)``; None when it sent no :data:`RATE_LIMIT_HEADER` (a server older than the
    header), sent it twice, or sent one :func:`parse_rate_limit` cannot read — the
    client then paces as it would without it, never fails to connect for it."""
    response = ws.response
    if response is None:
        return None
    values = response.headers.get_all(RATE_LIMIT_HEADER)
    return parse_rate_limit(values[0]) if len(values) == 1 else None


class ServerError(Exception):
    """The server refused a request: ``code`` is the protocol's error code."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(f"{data.get('code')}: {data.get('message')}")
        self.code: str = str(data.get("code"))
        self.message: str = str(data.get("message"))
        self.data = dict(data)


def retry_after_s(err: ServerError) -> float:
    """How long a refusal (``unavailable``, a resume's ``rate_limited``) asks to wait before a
    retry, in seconds: its
    ``retry_after_ms``, at most :data:`RETRY_MAX_MS`; :data:`RETRY_DEFAULT_MS` when it
    gives none, or not a positive whole number."""
    asked = err.data.get("retry_after_ms")
    if not isinstance(asked, int) or isinstance(asked, bool) or asked <= 0:
        asked = RETRY_DEFAULT_MS
    return min(asked, RETRY_MAX_MS) / 1000


def _refuses_field(err: ServerError, name: str) -> bool:
    """Whether ``err`` refuses the request for its field ``name`` (``bad_message``)."""
    return err.code == "bad_message" and err.data.get("field") == name


class RaceClient:
    #: Keep every frame read in :attr:`received`, in order: the tests that check each
    #: frame a server sends for a card or seed it must not tell turn it on. Off, as a
    #: user's client is: a client kept connected kept every frame it ever read — a
    #: racer's every ``moved`` reply with its board, some 150 KB a round of 200 moves,
    #: round after round (a long-session audit).
    keep_received: ClassVar[bool] = False

    def __init__(
        self, ws: ClientConnection, pace: Pace | None = None, view: RoomView | None = None
    ) -> None:
        self.ws = ws
        #: The room folded from this connection's frames (a session passes the same
        #: view to each connection it opens).
        self.view = view if view is not None else RoomView()
        self._pacer = Pacer(pace) if pace is not None else None
        self._ids = itertools.count(1)
        #: Requests awaiting their reply: id -> (request type, the reply's future).
        #: Each request waiting for its reply: its type, the wait, and what it sent.
        self._pending: dict[int, tuple[str, asyncio.Future[Envelope], dict[str, Any]]] = {}
        self.events: asyncio.Queue[Envelope] = asyncio.Queue()
        #: Every frame read, decoded, in order, while :attr:`keep_received` (else none).
        self.received: list[Envelope] = []
        self.room: str | None = None
        self.code: str | None = None
        self.racer: int | None = None
        self.token: str | None = None
        #: The token this connection proposed for a seat whose ``joined`` has not come
        #: (None once it came, or the request was refused): if the connection drops
        #: meanwhile, the seat may be stored, and a resume by this token alone takes it
        #: (:meth:`Session.enter <solrace_client.session.Session.enter>`).
        self.proposed: str | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: Why this client closed the connection itself: the server sent a frame it
        #: cannot read (None while it has not).
        self.failure: str | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(
        cls,
        url: str = DEFAULT_SERVER,
        *,
        pace: Pace | Literal["server-default"] | None = SERVER_DEFAULT,
        view: RoomView | None = None,
        **kwargs: Any,
    ) -> RaceClient:
        """Connect to ``url``. Requests are paced to ``pace``: by default inside the
        rate limit a server applies unless configured otherwise; None: not at all. A
        pace is kept inside the limit the server advertises in its handshake, when
        that is lower (:func:`pacing.pace_for`)."""
        if pace == SERVER_DEFAULT:
            pace = pacing.SERVER_DEFAULT_PACE
        kwargs.setdefault("ping_interval", CLIENT_PING_INTERVAL_S)
        kwargs.setdefault("ping_timeout", CLIENT_PING_TIMEOUT_S)
        kwargs.setdefault("close_timeout", CLOSE_WAIT_S)
        ws = await connect(
            url,
            subprotocols=[Subprotocol(SUBPROTOCOL)],
            max_size=MAX_SERVER_FRAME_BYTES,
            compression=None,
            **kwargs,
        )
        paced = pacing.pace_for(advertised_limit(ws), pace) if isinstance(pace, Pace) else None
        return cls(ws, paced, view)

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.gather(self._reader, return_exceptions=True)

    def abort(self) -> None:
        """Drop the connection now, without a closing handshake: the caller takes the
        link for dead (a request's reply never came: :class:`NoReply`), and a handshake
        on it would only wait :data:`CLOSE_WAIT_S` for an answer that cannot come. The
        connection counts as closed at once (``closed``): nothing more is sent on it,
        and a :class:`~solrace_client.session.Session` reconnects and resumes."""
        if not self.closed.done():
            self.closed.set_result(None)
        self.ws.transport.abort()

    @property
    def pace(self) -> Pace | None:
        """The pace this connection's requests keep (None: not paced)."""
        return None if self._pacer is None else self._pacer.pace

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code

    # The view's state under the names the library has always had.
    @property
    def version(self) -> int:
        """The last room event version folded."""
        return self.view.version

    @property
    def seq(self) -> int:
        """The ``seq`` of this racer's next move."""
        return self.view.next_seq

    @seq.setter
    def seq(self, seq: int) -> None:
        self.view.next_seq = seq

    @property
    def board(self) -> dict[str, Any] | None:
        """This racer's own board view."""
        return self.view.my_board

    @property
    def snapshot(self) -> dict[str, Any] | None:
        """The snapshot last loaded (entry, resume, watch or resync)."""
        return self.view.snapshot

    # ------------------------------------------------------------------ input
    async def _read(self) -> None:
        close: tuple[int, str] | None = None
        try:
            async for frame in self.ws:
                try:
                    self._take(frame)
                except MalformedFrame as exc:
                    self.failure = f"the server sent an unreadable frame: {exc.message}"
                    close = (exc.close_code or CloseCode.INVALID_DATA, str(exc.code))
                    break
                except Exception as exc:  # a frame of a shape no fold expects
                    what = f"{type(exc).__name__}: {exc}"[:200]
                    self.failure = f"the server sent a frame this client cannot fold ({what})"
                    close = (CloseCode.INVALID_DATA, str(ErrorCode.BAD_FRAME))
                    break
        except ConnectionClosed:
            pass
        finally:
            protocol = getattr(self.ws, "protocol", None)  # never raise before `closed`
            if self.failure is None and protocol is not None:  # a close frame, in words
                self.failure = closed_in_words(
                    protocol.close_rcvd, protocol.close_sent, protocol.close_rcvd_then_sent
                )
            # The reader is the only one to read replies: once it stops, so does the
            # connection (an audit: a frame it could not read ended it and left the
            # socket open, so the next request waited its whole timeout for nothing).
            for _, future, _ in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionLost(self.failure or CONNECTION_CLOSED))
            self._pending.clear()
            if not self.closed.done():
                self.closed.set_result(None)
        if close is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(*close), CLOSE_WAIT_S)

    def _take(self, frame: Any) -> None:
        """Decode and fold one frame (raises MalformedFrame, or what a fold raises on a
        shape it does not expect)."""
        envelope = decode(frame, limits=SERVER_FRAME_LIMITS)
        if self.keep_received:
            self.received.append(envelope)
        if envelope.id is not None and envelope.t in REPLY_TYPES:
            asked = self._pending.get(envelope.id)
            if asked is None:
                # A reply to nothing this connection is waiting for: a ``moved`` that
                # no move asked for set the view's next seq and stalled the bot (an
                # audit with a hostile server). It changes nothing.
                return
            request, future, sent = asked
            expected = _REPLY.get(request, "ok")
            if envelope.t not in (expected, "error"):
                # A move or an entry answered with another reply (a faulty or hostile
                # server's ``ok`` to a ``resume``), read as the one asked for, ended
                # `solrace bot` with a KeyError traceback: a frame of a shape no fold
                # expects, which closes the connection (docs/client.md).
                raise ValueError(f"a {request} answered {envelope.t!r}, not {expected!r}")
            # Folded here, in arrival order: the events after a snapshot are
            # compared with its version, and a ``moved`` reply never overwrites
            # an event that came after it. Only the reply its request gets is; and
            # before the request stops waiting, so that a fold that raises (a snapshot
            # of another shape) fails it with the connection, at once.
            if expected == envelope.t == "moved":
                self.view.on_moved(envelope.d, sent.get("move"))
            elif _FOLDED_REPLY.get(request) == envelope.t:
                snapshot, racer = envelope.d.get("snapshot"), envelope.d.get("racer")
                if not isinstance(snapshot, Mapping) or not isinstance(envelope.d.get("room"), str):
                    raise ValueError(f"a {envelope.t} reply names no room and its snapshot")
                self.view.load(snapshot, racer if isinstance(racer, int) else None)
            del self._pending[envelope.id]
            if not future.done():
                future.set_result(envelope)
            return
        if self.view.apply(envelope) is Fold.OLD:
            return  # replayed: already in the snapshot
        self.events.put_nowait(envelope)

    async def next_event(self, *types: str, timeout: float = 10.0) -> Envelope:
        """The next queued event or notice (of one of ``types``, skipping others)."""
        async with asyncio.timeout(timeout):
            while True:
                envelope = await self.events.get()
                if not types or envelope.t in types:
                    return envelope

    async def wait_started(self, timeout: float = 30.0) -> dict[str, Any] | None:
        """Wait for ``started`` and, for a racer, its own board (the notice that
        follows it); returns that board."""
        await self.next_event("started", timeout=timeout)
        if self.racer is not None:
            await self.wait_for(
                lambda e: e.t == "board" and e.d.get("racer") == self.racer, timeout
            )
        return self.board

    async def wait_for(
        self, predicate: Callable[[Envelope], bool], timeout: float = 10.0
    ) -> Envelope:
        async with asyncio.timeout(timeout):
            while True:
                envelope = await self.events.get()
                if predicate(envelope):
                    return envelope

    # --------------------------------------------------------------- requests
    async def send_raw(self, frame: bytes | str) -> None:
        """Send ``frame`` as it is, now: never paced (tests of the server's limits)."""
        await self.ws.send(frame)

    async def request(self, t: str, timeout: float | None = None, **d: Any) -> dict[str, Any]:
        """Send request ``t`` and return its reply's data; raise ServerError on error,
        :class:`NoReply` (a TimeoutError) after ``timeout`` (default
        :data:`REQUEST_TIMEOUT_S`). Waits first if sending now would outrun the pace."""
        return await (await self.send(t, timeout, **d))

    async def send(
        self, t: str, timeout: float | None = None, **d: Any
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """Send request ``t`` now (paced, as :meth:`request`) and return, without waiting
        for it, the wait for its reply (:meth:`request`'s result and errors; its timeout
        runs from when it is awaited): requests sent one after another leave in that
        order, which pipelined moves need (docs/protocol.md §11). The caller must await
        what it gets."""
        if self._pacer is not None:
            await self._pacer.wait()
        request_id = next(self._ids)
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        data = {k: v for k, v in d.items() if v is not None}
        self._pending[request_id] = (t, future, data)
        try:
            if self.closed.done():  # no reader: no reply would ever be read
                raise ConnectionLost(self.failure or CONNECTION_CLOSED)
            await self.ws.send(encode(Envelope(t, id=request_id, d=data)))
        except ConnectionClosed as exc:
            # The socket saw the close before the reader did: lost, as the reader would
            # have said, not websockets' own error, which no command caught (a server
            # closing right after its handshake made `fetch` and `rooms` a traceback).
            self._forget(request_id, future)
            raise ConnectionLost(self.failure or lost_reason(exc)) from None
        except BaseException:
            self._forget(request_id, future)
            raise
        return self._reply(t, request_id, future, timeout)

    async def _reply(
        self, t: str, request_id: int, future: asyncio.Future[Envelope], timeout: float | None
    ) -> dict[str, Any]:
        seconds = REQUEST_TIMEOUT_S if timeout is None else timeout
        try:
            try:
                async with asyncio.timeout(seconds):
                    reply = await future
            except TimeoutError:
                raise NoReply(t, seconds) from None
        finally:
            self._forget(request_id, future)
        if reply.t == "error":
            raise ServerError(reply.d)
        return dict(reply.d)

    def _forget(self, request_id: int, future: asyncio.Future[Envelope]) -> None:
        """A send that failed or a wait given up leaves no future behind for the reader
        to fail later ("Future exception was never retrieved"); nor one the reader
        failed already, while the send was under way (the server closed the
        connection): the send's own error says what happened."""
        self._pending.pop(request_id, None)
        if future.done() and not future.cancelled():
            future.exception()

    def _entered(
        self, reply: dict[str, Any], proof: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Who this connection is in the room (the reader has loaded the snapshot).
        ``proof``: the ``revealed`` a resume or watch sent; a view holding no pair of
        the room keeps it, to send again on the next entry — a new window given the
        saved pair, entering a snapshot with no result (the rematch's lobby), kept
        none, saved its race with none and proved nothing on a reconnect (a review).
        A race_over or a snapshot's result replaces it (:meth:`RoomView._keep_over`)."""
        if proof is not None and self.view.room == reply["room"] and self.view.revealed is None:
            self.view.revealed = dict(proof)
        self.room = reply["room"]
        self.code = reply["snapshot"].get("code")
        if "racer" in reply:
            self.racer = reply["racer"]
            self.token = reply.get("token")
        return reply

    async def list_rooms(self, variant: str | None = None) -> list[dict[str, Any]]:
        # Maps only: a faulty server's rooms of another shape were a traceback.
        return [
            dict(room)
            for room in wire.maps((await self.request("list", variant=variant)).get("rooms"))
        ]

    async def fetch_result(self, race: str) -> dict[str, Any]:
        """The server's archived result of finished race ``race`` (``archived``:
        race, room, settings, deal, result); ServerError ``unknown_race`` if it has none."""
        return await self.request("result", race=race)

    async def create(self, variant: str, name: str, **settings: Any) -> dict[str, Any]:
        return await self._enter("create", variant=variant, name=name, **settings)

    async def join(self, code: str, name: str) -> dict[str, Any]:
        return await self._enter("join", code=code, name=name)

    async def quick(self, variant: str, name: str) -> dict[str, Any]:
        return await self._enter("quick", variant=variant, name=name)

    async def _enter(self, t: str, **d: Any) -> dict[str, Any]:
        """Request ``t`` (``create``, ``join``, ``quick``), which takes a seat, while the
        server's store is down at most :data:`SEAT_ATTEMPTS` times more, each after the
        refusal's ``retry_after_ms``.

        The seat's token is drawn here and proposed with the request (:attr:`proposed`
        until the reply comes), so a reply lost with the connection costs a resume by
        that token, not a second seat. A server of an earlier release refuses the field
        (``bad_message`` naming ``token``, nothing stored): the request goes again
        without it, and the server draws the token as before.

        Refused ``unavailable`` with no seat named, nothing of this racer was stored,
        and the request is sent again, with a fresh token (the first one's claim may be
        left: docs/protocol.md §5). With the seat named (``room``, ``token``), its
        outcome is unknown: the store failed after the racer may have been stored, and
        asking again would take a second seat. So the seat is resumed instead; a seat
        the server refuses otherwise (``bad_token``: it was never stored, or its grace
        ran out) leaves the first refusal standing: asking again is then safe."""
        proposed: str | None = secrets.token_urlsafe(limits.TOKEN_BYTES)
        seat: tuple[str, str] | None = None
        first: ServerError | None = None  # the refusal to give if none succeeds
        refused: ServerError | None = None  # the last one: its retry_after_ms
        attempts = 0
        while attempts <= SEAT_ATTEMPTS:
            if refused is not None:
                await asyncio.sleep(retry_after_s(refused))
            try:
                if seat is None:
                    self.proposed = proposed
                    reply = await self.request(t, token=proposed, **d)
                    self.proposed = None
                    return self._entered(reply)
                return await self.resume(*seat, since=None)
            except ServerError as err:
                if proposed is not None and seat is None and _refuses_field(err, "token"):
                    proposed = self.proposed = None  # an earlier release: it draws one
                    continue
                attempts += 1
                if err.code != "unavailable":
                    self.proposed = None  # refused: nothing was stored
                    if seat is not None and first is not None:
                        raise first from None
                    raise
                first = first or err
                room, token = err.data.get("room"), err.data.get("token")
                if seat is None and isinstance(room, str) and isinstance(token, str):
                    seat = (room, token)
                elif seat is None and proposed is not None:
                    # Nothing stored, but the claim the request took of its token may
                    # be left (the store failed before it could let it go), and a
                    # claim is taken once: token_in_use. A fresh one, which none holds.
                    proposed = secrets.token_urlsafe(limits.TOKEN_BYTES)
                refused = err
        assert first is not None
        raise first

    async def resume(
        self,
        room: str | None = None,
        token: str | None = None,
        since: int | Literal["last"] | None = "last",
        revealed: Mapping[str, Any] | Literal["last"] | None = "last",
    ) -> dict[str, Any]:
        """Become this racer again. ``since`` is the last event version applied:
        by default the last one this client saw; None means "I have no state".
        ``revealed``: the ``{seed, salt}`` of the room's last ``race_over`` seen, by
        default the view's (:attr:`RoomView.revealed`): a node that lost it with its
        store learns the round's seed went out (docs/protocol.md, ``resume``).

        A server resumes a racer at most every few seconds (docs/protocol.md §14): a
        resume sooner is refused ``rate_limited`` with ``retry_after_ms``, and is sent
        again, on this connection, once that has passed (at most :data:`RESUME_WAITS`
        times): a link that drops just after a resume costs its racer a short wait,
        not an error."""
        proof = self._proof(room or self.room, None, revealed)
        waits = 0
        while True:
            try:
                reply = await self.request(
                    "resume",
                    room=room or self.room,
                    token=token or self.token,
                    since=self.version if since == "last" else since,
                    code=self.code,
                    revealed=proof,
                )
            except ServerError as err:
                if proof is not None and _refuses_field(err, "revealed"):
                    proof = None  # a server of an earlier release: it knows no proof
                    continue
                if err.code != "rate_limited" or waits >= RESUME_WAITS:
                    raise
                waits += 1
                await asyncio.sleep(retry_after_s(err))
                continue
            return self._entered(reply, proof)

    async def watch(
        self,
        code: str | None = None,
        room: str | None = None,
        since: int | None = None,
        revealed: Mapping[str, Any] | Literal["last"] | None = "last",
    ) -> dict[str, Any]:
        """Watch a room by ``code`` or ``room`` id; ``since`` and ``revealed`` as in
        :meth:`resume` (``revealed`` by default the view's, when it is this room)."""
        proof = self._proof(room, code, revealed)
        try:
            reply = await self.request("watch", code=code, room=room, since=since, revealed=proof)
        except ServerError as err:
            if proof is None or not _refuses_field(err, "revealed"):
                raise
            reply = await self.request("watch", code=code, room=room, since=since)
            proof = None
        return self._entered(reply, proof)

    def _proof(
        self,
        room: str | None,
        code: str | None,
        revealed: Mapping[str, Any] | Literal["last"] | None,
    ) -> dict[str, Any] | None:
        """What a resume or watch of the room named by ``room`` or ``code`` sends as
        ``revealed``: given, or (``"last"``) the view's when the view is that room."""
        if revealed != "last":
            return None if revealed is None else dict(revealed)
        view = self.view
        if view.room is None or view.revealed is None:
            return None
        if (room is not None and room == view.room) or (code is not None and code == view.code):
            return dict(view.revealed)
        return None

    async def ready(self, flag: bool = True, spectators: str | None = None) -> None:
        """Set the ready flag; ``spectators="open"`` also agrees to open spectating."""
        await self.request("ready", ready=flag, spectators=spectators)

    async def start(self) -> None:
        """Start the room (its host). The server holds the reply while the deal is
        still being certified (at most ``START_WAIT_S``): a slow certification is no
        dead link."""
        await self.request("start", timeout=limits.START_WAIT_S + REQUEST_TIMEOUT_S)

    async def move(self, move: str) -> dict[str, Any]:
        """Play ``move`` (notation or "undo") with the next seq; the reply is folded
        into the view (``board``, ``seq``) when it arrives."""
        return await self.request("move", seq=self.seq, move=move)

    async def send_move(self, move: str, seq: int) -> Coroutine[Any, Any, dict[str, Any]]:
        """Send ``move`` as ``seq`` now, and return the wait for its ``moved`` (folded as
        :meth:`move`'s): a move sent before the previous one's reply has come is
        pipelined (docs/protocol.md §11), judged after it."""
        return await self.send("move", seq=seq, move=move)

    async def undo(self) -> dict[str, Any]:
        return await self.move("undo")

    async def resign(self) -> None:
        await self.request("resign")

    async def leave(self) -> None:
        await self.request("leave")

    async def rematch(self) -> None:
        await self.request("rematch")

    async def ping(self) -> int:
        return int((await self.request("ping"))["now_ms"])
