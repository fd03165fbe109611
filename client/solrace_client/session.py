"""A place in one room that outlives its connections: the client's one reconnect loop.

Connections drop; races do not. A :class:`Session` enters a room once, then owns the
room's :class:`~solrace_client.roomview.RoomView` across every connection it opens:

- when the connection drops it reconnects — trying its servers in turn, with exponential
  backoff and jitter (:class:`Backoff`) — and ``resume``s with the token and the last
  version folded (a spectator ``watch``es again by code), so the snapshot tells it its
  board and the ``seq`` of its next move: a move whose reply was lost is neither lost
  nor repeated;
- when the fold reports a gap (:attr:`RoomView.needs_resync`) it asks for a fresh
  snapshot on the same connection rather than show a room that never existed.

Its user — the terminal client, the bot, a program — reads one stream
(:meth:`Session.next`): the room's events and notices, already folded into
:attr:`Session.view`, and a :class:`Rejoined` each time the view was loaded again.
A connection closed as ``replaced`` (the same racer resumed elsewhere), a resume the
server refuses for good, or running out of attempts ends the session
(:class:`SessionOver`); a refusal that says "try again shortly" (``unavailable``,
``internal``: the server's store is down for a moment; ``rate_limited``: the racer
resumed a moment ago) does not, nor does a handshake refused for the node's connection
limits: the next attempt waits at least its ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from solrace.protocol import CloseReason, Envelope
from solrace.protocol.limits import SEAT_SETTLE_S
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from .connection import RaceClient, ServerError, retry_after_s
from .errors import (
    CONNECT_ERRORS,
    CONNECTION_CLOSED,
    ConnectionLost,
    NoReply,
    connect_reason,
    gave_up,
    handshake_retry_after_s,
    lost_during,
    lost_reason,
    refusal_of,
)
from .roomview import RoomView

#: Failures that mean "this connection is gone": reconnect and resume.
DROPPED: Final = (OSError, TimeoutError, ConnectionError, ConnectionClosed, InvalidHandshake)
#: Refusals of a resume that mean "try again shortly", not "you are out" (``rate_limited``:
#: resumed again too soon, which RaceClient.resume waits out a few times itself).
TRANSIENT: Final = ("unavailable", "internal", "rate_limited")
CONNECT_TIMEOUT_S: Final = 5.0
#: How many new connections a session opens to take back the seat of an entry whose
#: reply was lost (:meth:`Session.enter`): with the backoff's doubling from 0.2 s, the
#: last is some 12 s after the loss, well inside the 30 s grace the seat is held for.
#: Refusals ``unavailable`` — the seat still being written — are not counted while
#: the server may still be writing it (:data:`SEAT_SETTLE_S` since the loss).
ENTRY_RECLAIMS: Final = 6
#: Refusals of a resume by a proposed token that mean "that seat was never stored":
#: asking again is safe. (``unknown_room``: a private room answers a token that is no
#: racer's of it so, and a room gone holds no seat.)
NOT_SEATED: Final = ("bad_token", "unknown_room")
#: How long a user who quits waits for the server to take its ``leave``.
LEAVE_WAIT_S: Final = 2.0

#: The request that enters the room on a fresh connection (create, join, quick, resume
#: or watch), returning the reply.
Entry = Callable[[RaceClient], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Backoff:
    """How long to wait before reconnect attempt ``n``: ``first_s`` doubled each time
    up to ``max_s``, times a random factor in ``1 ± jitter`` (so clients cut off
    together do not come back together). ``attempts``: how many before giving up
    (None: for as long as the user keeps the session).

    The default jitter is the whole delay (a factor in 0–2, the same mean): at ± 20 %
    the 150 sessions of a node killed under them sent the surviving node 61 handshakes
    in one 50 ms (a herd audit, docs/client.md); at ± 100 %, 15–28."""

    first_s: float = 0.2
    max_s: float = 8.0
    jitter: float = 1.0
    attempts: int | None = None

    def delay(self, attempt: int, rng: random.Random) -> float:
        base = min(self.first_s * 2.0 ** max(attempt - 1, 0), self.max_s)
        return base * rng.uniform(1 - self.jitter, 1 + self.jitter)


class Unreachable(Exception):
    """No server answered the first connection (``servers`` were tried in turn)."""

    def __init__(self, servers: Sequence[str], error: BaseException) -> None:
        super().__init__(f"{', '.join(servers)}: {error!r}")
        self.servers = list(servers)
        self.error = error


class SessionEnd(StrEnum):
    """Why a session cannot go on (:attr:`SessionOver.reason`)."""

    REPLACED = "replaced"  # this racer was resumed on another connection
    REFUSED = "refused"  # the server will not let it back (SessionOver.error says why)
    CLOSED = "closed"  # by its user
    GAVE_UP = "gave_up"  # out of reconnect attempts


class SessionOver(Exception):
    """The session cannot go on, for ``reason`` (a :class:`SessionEnd`). ``error``: the
    last failure, the server's refusal for ``refused``."""

    def __init__(
        self, message: str, *, reason: SessionEnd, error: BaseException | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.error = error


@dataclass(frozen=True)
class Rejoined:
    """The view was loaded again from ``reply``'s snapshot: after a reconnect
    (``reconnected``) or, on the same connection, after a gap."""

    reply: dict[str, Any]
    reconnected: bool


class Session:
    """One racer's (or spectator's) place in one room, across connections."""

    def __init__(
        self,
        servers: str | Sequence[str],
        *,
        backoff: Backoff | None = None,
        connected: Callable[[RaceClient], None] | None = None,
        lost: Callable[[int, BaseException | None], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.servers = [servers] if isinstance(servers, str) else list(servers)
        if not self.servers:
            raise ValueError("no server to connect to")
        self.backoff = backoff or Backoff()
        #: Called with every new connection, before it is used.
        self.connected = connected
        #: Called before each reconnect attempt: ``(attempt, why the last one failed)``.
        self.lost = lost
        self.rng = rng or random.Random()
        self.view = RoomView()
        self.client: RaceClient | None = None
        self.server_index = 0
        self.reconnects = 0
        self.closed = False
        self.room: str | None = None
        self.token: str | None = None

    # ------------------------------------------------------------- queries
    @property
    def live(self) -> RaceClient:
        """The current connection; ConnectionError while there is none."""
        if self.client is None:
            raise ConnectionError("not connected")
        return self.client

    @property
    def online(self) -> bool:
        return self.client is not None and not self.client.closed.done()

    @property
    def watching(self) -> bool:
        return self.token is None

    @property
    def server(self) -> str:
        return self.servers[self.server_index]

    # ----------------------------------------------------------- lifecycle
    async def enter(self, entry: Entry) -> dict[str, Any]:
        """Connect (the servers in turn) and enter the room with ``entry``. Raises
        :class:`Unreachable`, :class:`ServerError` (refused), or a connection error.

        An entry lost with its connection (a ``create``/``join``/``quick`` whose reply
        did not come) may have taken a seat. The request proposed that seat's token
        (:attr:`RaceClient.proposed`), so the session reconnects and resumes it by that
        token: the same seat, not a second one nor a ghost held for the grace; refused
        ``bad_token`` (:data:`NOT_SEATED`), it was never stored, and the entry is asked
        again. A connection error is raised only when that fails
        :data:`ENTRY_RECLAIMS` times, or when the entry proposed no token (``resume``,
        ``watch``, a server of an earlier release).

        An entry whose reply did not come in time on a connection still up
        (:class:`NoReply`: the server is busy) may have taken a seat too, stored late:
        its token is resumed the same way (:meth:`_reclaim_unanswered`), but never
        asked for again, and the NoReply is raised unless the seat is found."""
        last: BaseException | None = None
        for index, url in enumerate(self.servers):
            try:
                client = await self._connect(url)
            except DROPPED as exc:
                last = exc
                continue
            except (InvalidURI, ValueError) as exc:  # not a URL at all
                raise Unreachable([url], exc) from None
            self.server_index = index
            break
        else:
            assert last is not None
            raise Unreachable(self.servers, last)
        try:
            reply = await entry(client)
        except DROPPED as exc:
            await _close_quietly(client)
            if client.proposed is None:
                raise
            if isinstance(exc, NoReply):
                return await self._reclaim_unanswered(client.proposed, exc)
            return await self._reclaim(client.proposed, entry, exc)
        except BaseException:
            await _close_quietly(client)
            raise
        self.client = client
        self._entered(client)
        return reply

    async def _reclaim(self, token: str, entry: Entry, lost: BaseException) -> dict[str, Any]:
        """Take back the seat an entry proposed ``token`` for, its reply ``lost``: on new
        connections (the servers in turn, with the backoff), resume by the token alone;
        a seat never stored is asked for again (:meth:`enter`)."""
        proposed: str | None = token
        last = lost
        attempts = _Reclaims()
        while (attempt := attempts.next(last)) is not None:
            delay = self.backoff.delay(attempt, self.rng)
            await asyncio.sleep(max(delay, _asked_wait_s(last)))
            index = (self.server_index + attempt - 1) % len(self.servers)
            client: RaceClient | None = None
            try:
                client = await self._connect(self.servers[index])
                reply: dict[str, Any] | None = None
                if proposed is not None:
                    try:
                        reply = await client.resume(None, proposed, since=None)
                    except ServerError as err:
                        if err.code not in NOT_SEATED:
                            raise
                        proposed = None  # never stored: asking again is safe
                if reply is None:
                    reply = await entry(client)
            except ServerError as err:
                await _close_quietly(client)
                # Still down, or a node of an earlier release that cannot resume by a
                # token alone (bad_message): another attempt, maybe on another node.
                if err.code not in (*TRANSIENT, "bad_message"):
                    raise
                last = err
                continue
            except DROPPED as exc:
                await _close_quietly(client)
                last = exc
                if client is not None and client.proposed is not None:
                    proposed = client.proposed  # asked again, and lost again
                elif client is not None and proposed is None:
                    raise  # asked again with no token proposed (an earlier release)
                continue  # not connected, or the resume's reply lost: resume again
            self.client, self.server_index = client, index
            self._entered(client)
            return reply
        # Out of attempts: said as the loss it is ("connection lost during create"),
        # not as the last refusal of a resume the user never asked for.
        raise lost if isinstance(last, ServerError) else last

    async def _reclaim_unanswered(self, token: str, unanswered: NoReply) -> dict[str, Any]:
        """Take back the seat an entry proposed ``token`` for, whose reply did not come
        in time on a connection still up (``unanswered``): a busy server may store it
        after the client gave up on it — a ghost held for the 30 s grace, which a
        public room counts as this address's one seat (``same_address``), or a second
        seat "Bob (2)" when asked again. On new connections (the servers in turn, with
        the backoff), the token is resumed alone, again while the seat may still be
        being written (``unavailable``: :data:`TRANSIENT`), at most
        :data:`ENTRY_RECLAIMS` times. A busy server is waited for once more, not
        ENTRY_RECLAIMS times: a resume unanswered too, or a connection that fails,
        raises ``unanswered``. So does ``bad_token`` (:data:`NOT_SEATED`), and the
        entry is not asked again: on a busy server it may still be on its way to the
        store (its claim not written yet), and a second entry could take a second
        seat."""
        last: BaseException = unanswered
        attempts = _Reclaims()
        while (attempt := attempts.next(last)) is not None:
            delay = self.backoff.delay(attempt, self.rng)
            await asyncio.sleep(max(delay, _asked_wait_s(last)))
            index = (self.server_index + attempt - 1) % len(self.servers)
            client: RaceClient | None = None
            try:
                client = await self._connect(self.servers[index])
                reply = await client.resume(None, token, since=None)
            except ServerError as err:
                await _close_quietly(client)
                # The seat still being written, or a node of an earlier release that
                # cannot resume by a token alone (bad_message): another attempt.
                if err.code not in (*TRANSIENT, "bad_message"):
                    raise unanswered from None
                last = err
                continue
            except DROPPED:
                await _close_quietly(client)
                raise unanswered from None
            self.client, self.server_index = client, index
            self._entered(client)
            return reply
        raise unanswered

    async def leave(self) -> None:
        """Leave the room, if this session races in it and is connected: a user who
        quits is no racer left behind (in a lobby, a quick race was matched with it).
        Best effort, at most :data:`LEAVE_WAIT_S`: the server's grace forfeits an
        absent racer anyway."""
        client = self.client
        if client is None or self.token is None or client.closed.done():
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.leave(), LEAVE_WAIT_S)

    async def close(self) -> None:
        """End the session (its user is done); ``next`` then raises SessionOver."""
        self.closed = True
        client, self.client = self.client, None
        if client is not None:
            await _close_quietly(client)

    def _entered(self, client: RaceClient) -> None:
        self.room = client.room or self.room
        self.token = client.token or self.token

    async def _connect(self, url: str) -> RaceClient:
        client = await asyncio.wait_for(
            RaceClient.connect(url, view=self.view, open_timeout=CONNECT_TIMEOUT_S),
            CONNECT_TIMEOUT_S,
        )
        if self.connected is not None:
            self.connected(client)
        return client

    # -------------------------------------------------------------- stream
    async def next(self, timeout: float | None = None) -> Envelope | Rejoined | None:
        """The next event or notice (already folded into :attr:`view`), or a
        :class:`Rejoined` once the view was loaded again; None after ``timeout``.
        Reconnects and resynchronises on the way."""
        if self.closed:
            raise SessionOver("the session was closed", reason=SessionEnd.CLOSED)
        client = self.client
        if client is None:
            return await self.reconnect(None)
        if self.view.needs_resync:
            return await self._resync_or_reconnect()
        try:
            envelope = await _receive(client, timeout)
        except ConnectionError as exc:
            return await self.reconnect(exc)
        if envelope is None:
            return None
        if self.view.needs_resync:
            return await self._resync_or_reconnect()
        return envelope

    async def _resync_or_reconnect(self) -> Rejoined | None:
        """After a gap: a fresh snapshot; None when the server asks to wait (the next
        call tries again), a reconnect when the connection went meanwhile."""
        try:
            return Rejoined(await self.resync(), reconnected=False)
        except ServerError as err:
            if err.code not in TRANSIENT:
                raise SessionOver(
                    f"cannot resync: {err}", reason=SessionEnd.REFUSED, error=err
                ) from None
            await asyncio.sleep(retry_after_s(err))
            return None
        except DROPPED as exc:
            return await self.reconnect(exc)

    async def resync(self) -> dict[str, Any]:
        """A fresh snapshot on the current connection (after a gap, a refused ``seq``):
        a racer resumes, a spectator watches again. Raises ServerError or a connection
        error; events it makes stale are dropped from the queue."""
        client, view = self.live, self.view
        if self.watching:
            await client.leave()
            reply = await client.watch(code=view.code, since=view.version)
        else:
            reply = await client.resume(self.room, self.token, since=view.version)
        _drop_folded(client, view.version)
        return reply

    async def reconnect(self, error: BaseException | None) -> Rejoined:
        """Reconnect and re-enter, until it works or cannot (:class:`SessionOver`)."""
        old = self.client
        if old is not None and _replaced(old):  # final: the closed connection stays
            await _close_quietly(old)
            raise SessionOver(
                "replaced: this racer was resumed on another connection", reason=SessionEnd.REPLACED
            )
        self.client = None
        await _close_quietly(old)
        attempt = 0
        last = error
        reached = False  # the last attempt connected, and lost the re-entry's reply
        url = self.servers[self.server_index]
        while self.backoff.attempts is None or attempt < self.backoff.attempts:
            if self.closed:
                raise SessionOver("the session was closed", reason=SessionEnd.CLOSED)
            attempt += 1
            if self.lost is not None:
                self.lost(attempt, last)
            # A node that refused the last handshake for its limits (connecting_too_fast,
            # too_many_connections, server_full) says how long to wait: sooner is
            # refused again (a backoff of 0.2 s met 10 refusals in a 2 s wait), and
            # adds to the load the limit is for.
            delay = self.backoff.delay(attempt, self.rng)
            await asyncio.sleep(max(delay, handshake_retry_after_s(last) or 0.0))
            index = (self.server_index + attempt - 1) % len(self.servers)
            url = self.servers[index]
            client: RaceClient | None = None
            try:
                client = await self._connect(url)
                reply = await self._reenter(client)
            except ServerError as err:
                last, reached = err, False
                if err.code not in TRANSIENT:
                    await _close_quietly(client)
                    raise SessionOver(
                        f"cannot rejoin: {err}", reason=SessionEnd.REFUSED, error=err
                    ) from None
            except DROPPED as exc:
                last, reached = exc, client is not None
            else:
                if self.closed:
                    await _close_quietly(client)
                    raise SessionOver("the session was closed", reason=SessionEnd.CLOSED)
                self.client, self.server_index = client, index
                self._entered(client)
                self.reconnects += 1
                return Rejoined(reply, reconnected=True)
            if client is not None:
                await _close_quietly(client)
        # A server that is gone is said as everywhere else (docs/client.md): the raw
        # "[Errno 111] Connect call failed" was what a bot printed last.
        # One whose re-entry's reply was lost was reached: not "cannot reach" either.
        if reached and last is not None:
            why = lost_during("watch" if self.watching else "resume", last)
        elif isinstance(last, CONNECT_ERRORS):
            why = connect_reason(url, last)
        elif isinstance(last, ServerError):  # a refusal to wait for, every time
            why = refusal_of(last.data, "resume")
        else:
            why = lost_reason(last)
        raise SessionOver(
            gave_up(attempt, url, why),
            reason=SessionEnd.GAVE_UP,
            error=last,
        )

    async def _reenter(self, client: RaceClient) -> dict[str, Any]:
        view = self.view
        if self.watching:  # by code: a private room cannot be watched by id
            return await client.watch(code=view.code, since=view.version)
        return await client.resume(self.room, self.token, since=view.version)


async def _receive(client: RaceClient, timeout: float | None) -> Envelope | None:
    """The next queued envelope, None after ``timeout``; ConnectionError once the
    connection is closed and everything it delivered has been read."""
    if not client.events.empty():
        return client.events.get_nowait()
    if client.closed.done():
        raise ConnectionLost(client.failure or CONNECTION_CLOSED)
    getter = asyncio.ensure_future(client.events.get())
    try:
        waiters: set[asyncio.Future[Any]] = {getter, client.closed}
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getter.done():
            getter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await getter
    if getter.done() and not getter.cancelled():
        return getter.result()
    if client.closed.done():
        raise ConnectionLost(client.failure or CONNECTION_CLOSED)
    return None


class _Reclaims:
    """The attempts of a session taking back an entry's seat: :data:`ENTRY_RECLAIMS`,
    not counting refusals ``unavailable`` while the server may still be writing the
    seat (:data:`SEAT_SETTLE_S` from the loss). Counted, six refusals a second apart
    gave up some 7 s after the loss, while the server answered "still being written"
    for the whole window: a create whose node died between its token's claim and its
    room was never asked again (a review: the bot's session gave up 6.3-7.1 s after
    the loss)."""

    def __init__(self) -> None:
        self.attempt = 0
        self.settle_until = asyncio.get_running_loop().time() + SEAT_SETTLE_S

    def next(self, last: BaseException) -> int | None:
        """The number of the next attempt (its backoff and server), or None when
        they are spent; ``last``: why the one before failed (the loss at first)."""
        settling = (
            isinstance(last, ServerError)
            and last.code == "unavailable"
            and asyncio.get_running_loop().time() < self.settle_until
        )
        if self.attempt == 0 or not settling:
            self.attempt += 1
        return self.attempt if self.attempt <= ENTRY_RECLAIMS else None


def _asked_wait_s(last: BaseException) -> float:
    """How long the server asked to be left before the next attempt: a refusal's
    ``retry_after_ms``, a refused handshake's ``Retry-After`` (else 0)."""
    if isinstance(last, ServerError):
        return retry_after_s(last)
    return handshake_retry_after_s(last) or 0.0


def _drop_folded(client: RaceClient, version: int) -> None:
    """Forget queued events a fresh snapshot at ``version`` already holds (the ones
    that arrived before it, unfolded after a gap)."""
    kept = []
    while not client.events.empty():
        envelope = client.events.get_nowait()
        if envelope.v is None or envelope.v > version:
            kept.append(envelope)
    for envelope in kept:
        client.events.put_nowait(envelope)


def _replaced(client: RaceClient) -> bool:
    """The server closed this connection because the racer resumed on another."""
    received = getattr(client.ws.protocol, "close_rcvd", None)
    return received is not None and received.reason == CloseReason.REPLACED


async def _close_quietly(client: RaceClient | None) -> None:
    if client is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), 2.0)
