"""One WebSocket connection as a :class:`~solrace.rooms.peer.Peer`: its rate limit,
and the receive loop that turns frames into requests for the room core.

Frames go out through the connection's sans-I/O protocol, never ``await send``: a
frame is framed (``protocol.send_binary``) exactly when the core emits it, so the order
in which the node emits replies and events is the order on the wire, and one slow
client can never stall the node. A client whose unread output grows past a limit is
disconnected instead.

The bytes of all the frames a connection gets in one turn of the event loop go to the
socket in **one** write, at the end of that turn: a move's reply and its own progress
event, or the progress events of the moves one group commit acknowledged together, cost
one system call, not one each (the profile of issue 9: writes were the largest single
cost of a move, docs/performance.md). Nothing a racer or an idle connection gets waits
longer for it than the rest of the loop turn that produced it.

A spectator's frames wait up to ``SPECTATOR_WRITE_S`` and go out together: a room's
events reach each of its spectators, so their writes are what a popular race costs its
node, one per event per spectator (1,000 spectators of 8 racers at 10 moves/s each: half
the node's samples in ``transport.write``, its racers' ack p99 125 ms; "One popular
race" in docs/performance.md). A spectator's boards go out at most ten times a second
anyway (rooms/spectators.py), and nothing it is sent asks for an answer in time.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Final, Protocol

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import OPEN

from solrace.protocol import (
    BadMessage,
    CloseCode,
    ErrorCode,
    ProtocolError,
    RateLimited,
    TokenBucket,
    decode,
)
from solrace.protocol.limits import MAX_UNREAD_BYTES
from solrace.rooms import requests
from solrace.rooms.node import Node
from solrace.rooms.peer import Peer

from . import logs
from .admission import CodeTries, counted_as
from .metrics import Metrics
from .stalls import LoopStalls

log = logging.getLogger("solrace.session")

#: Longest a spectator's frame waits for others to go out in the same write (module
#: docstring): at most one write per spectator per interval, whatever the room's pace.
SPECTATOR_WRITE_S: Final = 0.05
MIB: Final = 1024 * 1024

#: Close codes websockets sends on its own for bad input (counted as protocol closes).
REFUSED_BY_WEBSOCKETS = frozenset(
    {CloseCode.INVALID_DATA, CloseCode.MESSAGE_TOO_BIG, CloseCode.PROTOCOL_ERROR}
)


class Holder(Protocol):
    """A connection whose unread output the budget counts (a Session)."""

    def unread_bytes(self) -> int:
        """Output waiting in the node's buffer for this connection now."""
        ...


class UnreadBudget:
    """The node's budget for output its clients leave unread, all connections together.

    Each connection may leave up to ``MAX_UNREAD_BYTES`` (4 MiB) unread in the node's
    buffer before it is dropped (:meth:`Session._write`), and up to 40 s may pass before
    a client that stopped reading is dropped for it (server.py). Alone, that let N
    clients that never read pin N × 4 MiB of the node's memory: a node takes up to
    20,000 connections by default, and 200 clients asking for an archived race's result
    31 times each and never reading took one node from 65 MB to 522 MB of memory, which
    it kept after they were gone (docs/server.md, "Connection limits"). So the node
    keeps a budget for all of them (``MAX_UNREAD_BYTES_PER_NODE``,
    ``--max-unread-mib``): past it, the connection holding the most is dropped — the
    one that costs the node the most, and the first an attacker fills — exactly as the
    per-connection limit drops one.

    What each connection holds is noted after each write to it (the only time it grows);
    it only shrinks as its client reads, unseen, so the sum may be stale-high: it is
    measured again, every connection that held some, before anyone is dropped.
    """

    __slots__ = ("budget", "held", "total")

    def __init__(self, budget: int) -> None:
        #: Bytes all connections together may leave unread; 0: no budget.
        self.budget = budget
        #: What each connection that holds some held at its last write.
        self.held: dict[Holder, int] = {}
        self.total = 0

    def note(self, holder: Holder, size: int) -> None:
        """``holder`` holds ``size`` unread bytes now (after a write, or 0 when gone)."""
        old = self.held.pop(holder, 0)
        if size > 0:
            self.held[holder] = size
        self.total += size - old

    def forget(self, holder: Holder) -> None:
        self.note(holder, 0)

    def over(self) -> bool:
        return 0 < self.budget < self.total

    def to_drop(self) -> tuple[int, list[Holder]]:
        """What all connections hold, measured afresh (clients that read since their
        last write hold less than was noted), and the connections to drop, most unread
        first, so that what is left fits the budget; those are noted as gone."""
        for holder in list(self.held):
            self.note(holder, holder.unread_bytes())
        measured = self.total
        dropped: list[Holder] = []
        by_size = sorted(self.held.items(), key=lambda item: item[1], reverse=True)
        for holder, _ in by_size:
            if not self.over():
                break
            self.forget(holder)
            dropped.append(holder)
        return measured, dropped


class Session(Peer):
    def __init__(
        self,
        ws: ServerConnection,
        node: Node,
        metrics: Metrics,
        client: str | None = None,
        stalls: LoopStalls | None = None,
        open_room: Callable[[float], float | None] | None = None,
        address: str | None = None,
        unread: UnreadBudget | None = None,
        code_tries: CodeTries | None = None,
    ) -> None:
        super().__init__()
        self.address = address
        self.ws = ws
        #: The client a trusted proxy named, if any: the peer is then the proxy.
        self.client = client
        #: Admission.open_room for this connection's address (None: not counted).
        self._open_room = open_room
        #: The room codes this connection's address may still try (None: not counted).
        self._code_tries = code_tries
        self.node = node
        self.metrics = metrics
        loop = asyncio.get_running_loop()
        self.bucket = TokenBucket(loop.time(), node.rate_per_s, node.rate_burst)
        #: What the connection's requests make the node do beyond one message each
        #: (limits.py, "work"): in debt, the connection is not read until it is paid.
        self.work_bucket = TokenBucket(loop.time(), node.work_per_s, node.work_burst)
        #: The event loop's stalls (stalls.py), counted as busy time by the bucket.
        self.stalls = stalls
        self._closing: asyncio.Future[None] | None = None
        #: Frames framed since the last write to the socket (see the module docstring).
        self._unwritten = 0
        self._loop = loop
        #: The node's budget for unread output, all connections together (UnreadBudget).
        self.unread = unread

    # ---------------------------------------------------------------- output
    def send_bytes(self, frame: bytes) -> None:
        if self.closed or self.ws.protocol.state is not OPEN:
            return
        self.ws.protocol.send_binary(frame)
        self._unwritten += 1
        if self._unwritten == 1:
            if self.room is not None and self.racer is None:  # a spectator
                self._loop.call_later(SPECTATOR_WRITE_S, self._write)
            else:
                self._loop.call_soon(self._write)

    def _write(self) -> None:
        """Write what was framed this loop turn in one go (websockets' own writes, e.g.
        a pong, may have taken it already: the protocol keeps one ordered buffer)."""
        frames, self._unwritten = self._unwritten, 0
        transport = self.ws.transport
        if self.closed or transport is None or transport.is_closing():
            return
        chunks = self.ws.protocol.data_to_send()
        if all(chunks):  # no end-of-stream marker: plain bytes, joined into one write
            if chunks:
                transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        else:
            for chunk in chunks:  # as websockets does it (the marker half-closes)
                if chunk:
                    transport.write(chunk)
                elif transport.can_write_eof():
                    transport.write_eof()
                else:
                    transport.close()
        self.metrics.frames_out.inc(frames)
        unread = transport.get_write_buffer_size()
        if unread > MAX_UNREAD_BYTES:
            # Checked after the write, not before the next one: a connection that went
            # past the limit and is sent nothing more was held.
            self.drop_for_not_reading("dropping a connection that does not read")
        elif self.unread is not None:
            self.unread.note(self, unread)
            if self.unread.over():
                self._drop_most_unread(self.unread)

    def _drop_most_unread(self, budget: UnreadBudget) -> None:
        """The node's connections together hold more unread output than its budget:
        drop the ones holding the most (UnreadBudget), as the per-connection limit does."""
        total, dropped = budget.to_drop()
        for holder in dropped:
            if isinstance(holder, Session):
                holder.drop_for_not_reading(
                    "dropping the connection with the most unread output: the node's "
                    f"connections held {total / MIB:.1f} MiB unread, more than its "
                    f"{budget.budget / MIB:g} MiB"
                )

    def unread_bytes(self) -> int:
        """Output waiting in the node's buffer for this connection (a Holder)."""
        transport = self.ws.transport
        if transport is None or transport.is_closing():
            return 0
        return transport.get_write_buffer_size()

    def drop_for_not_reading(self, why: str) -> None:
        """Drop the connection: not closed, since a close frame would wait behind what
        the client has not read (it could never see it), and websockets' close waits
        for that output to drain first — for ever (the connection stayed open).
        Counted as a 1008 close (docs/protocol.md §13)."""
        if self.unread is not None:
            self.unread.forget(self)
        self.closed = True
        transport = self.ws.transport
        if transport is None or transport.is_closing():
            return
        log.warning(why, extra=self.ids())
        self.metrics.closes.labels(str(int(CloseCode.POLICY_VIOLATION))).inc()
        transport.abort()

    def close_later(self, code: int, reason: str) -> None:
        self.closed = True
        self._closing = asyncio.ensure_future(self.ws.close(code, reason))

    def may_open_room(self) -> None:
        if self._open_room is None:
            return
        wait_s = self._open_room(self._loop.time())
        if wait_s is not None:
            self.node.repeated.note(log, "too many rooms from one address", *self._said())
            raise BadMessage(ErrorCode.TOO_MANY_ROOMS, retry_after_ms=math.ceil(wait_s * 1000))

    def may_try_code(self) -> None:
        if self._code_tries is None:
            return
        wait_s = self._code_tries.wait_s(self._loop.time())
        if wait_s is not None:
            line = "too many unknown room codes from one address"
            self.node.repeated.note(log, line, *self._said())
            wait_ms = math.ceil(wait_s * 1000)
            raise BadMessage(
                ErrorCode.RATE_LIMITED,
                "your address tried too many room codes that name no room: try again in"
                f" {wait_ms} ms",
                retry_after_ms=wait_ms,
            )

    def missed_code(self) -> None:
        if self._code_tries is not None:
            self._code_tries.missed(self._loop.time())

    def origin(self) -> str | None:
        if self.client is not None:
            return counted_as(self.client)
        peer = self.ws.remote_address
        return counted_as(str(peer[0])) if isinstance(peer, tuple) else None

    def _said(self) -> tuple[str | None, dict[str, object]]:
        """This connection's address and fields, for a repeated line about it."""
        return self.origin(), self.ids()

    def ids(self) -> dict[str, object]:
        peer = {"peer": logs.address(self.ws.remote_address)}
        if self.client is not None:  # behind a proxy, the peer is the proxy
            peer["client"] = self.client
        return {**super().ids(), **peer}

    # ----------------------------------------------------------------- input
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for frame in self.ws:
                self.metrics.frames_in.inc()
                if self.stalls is not None:
                    self.bucket.stalled(*self.stalls.last)
                try:
                    self.bucket.require(loop.time())
                    envelope = decode(frame)
                except RateLimited as err:
                    self.node.repeated.note(log, "rate limited", *self._said())
                    await self._close_for(
                        err.close_code or CloseCode.POLICY_VIOLATION, err.close_reason
                    )
                    return
                except ProtocolError as err:
                    await self._close_for(
                        err.close_code or CloseCode.INVALID_DATA, err.close_reason
                    )
                    return
                # Not read from here until idle(): what the client sends meanwhile
                # queues, and the tokens earned meanwhile pay for it (limits.py).
                self.bucket.busy(loop.time())
                await requests.handle(self.node, self, envelope)
                await self._pay_for_work(loop)
                self.bucket.idle(loop.time())
        except ConnectionClosed as closed:
            # websockets itself refused the peer's bytes (a frame over the size limit,
            # text that is not UTF-8, a frame that breaks RFC 6455): bad input too.
            code = None if closed.sent is None else closed.sent.code
            if code in REFUSED_BY_WEBSOCKETS and not closed.rcvd_then_sent:
                self.metrics.closes.labels(str(code)).inc()
                self._bad_input(code)

    async def _pay_for_work(self, loop: asyncio.AbstractEventLoop) -> None:
        """Charge the request's work (a replay, a listing) and, if that puts the
        connection in debt, wait it out before reading its next frame: its requests
        then cost the node no more than the work bucket's rate, and it is throttled,
        not closed (an honest client reconnecting with a long replay is no abuse)."""
        work = self.take_work()
        if work <= 0:
            return
        self.work_bucket.charge(loop.time(), work)
        wait = self.work_bucket.wait_s(loop.time())
        if wait > 0:
            self.metrics.work_waits.inc()
            await asyncio.sleep(wait)

    def _bad_input(self, code: int) -> None:
        """Say that this connection was closed for bad input (a frame that is not
        msgpack, too large, not a WebSocket frame): counted by code in
        solrace_protocol_closes_total, but the log said nothing, so nothing told the
        operator which address sent it. A repeated line: any client can send it."""
        origin, ids = self._said()
        self.node.repeated.note(log, "closed for bad input", origin, {**ids, "code": int(code)})

    async def _close_for(self, code: int, reason: str) -> None:
        """Close for bad input. Frames the peer already sent are read and dropped
        meanwhile: a flooder fills the receive queue, and websockets stops reading the
        socket while it is full, so the peer's closing frame would otherwise never be
        read and the close would hang until its timeout."""
        self.metrics.closes.labels(str(code)).inc()
        if code != CloseCode.POLICY_VIOLATION:  # 1008: rate limited, said above
            self._bad_input(code)
        self.closed = True
        closing = asyncio.ensure_future(self.ws.close(code, reason))
        try:
            async for _ in self.ws:
                pass
        except ConnectionClosed:
            pass
        await closing
