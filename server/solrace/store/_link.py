"""The group commit's own connection to one Redis: pipelined, no task, no pool.

Every accepted move is one EVALSHA in a group commit (:mod:`._commit`). Sent through
redis-py's pipeline, one flush cost about 70 µs of the node's CPU (a pipeline object,
a pool checkout, a retry wrapper, a stream reader, and a timeout context per reply)
where the bytes on the wire need about 10 (measured in one process against the local
Redis, docs/performance.md). At the benchmark's load a flush carries 1.3 moves, so
that overhead was paid by nearly every move.

A :class:`RespLink` is one connection as an :class:`asyncio.Protocol`: a flush is one
``transport.write`` of the commands packed by hiredis, and one future resolved from
``data_received`` once hiredis has parsed as many replies. Flushes may overlap (Redis
answers in the order it reads), each with its own timeout. Errors keep redis-py's
types (its own error parser maps each reply), so the store's translation stays one:
a reply error is that call's exception; a lost connection, a timeout or unparsable
bytes fail every flush in flight with a redis-py ``ConnectionError`` or
``TimeoutError`` (outcome unknown: :class:`~.errors.StoreUnavailable`), and the next
flush connects again.

Only for ``redis://`` and ``unix://`` (the embedded engine's socket); a TLS or
cluster store keeps redis-py's pipelines.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import ConnectionPool, SSLConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, InvalidResponse
from redis.exceptions import TimeoutError as RedisTimeoutError

from solrace.argtypes import REDIS_DEFAULT_PORT

__all__ = ["RespLink"]

Arg = bytes | str | int

#: The link's name in ``CLIENT LIST``.
CLIENT_NAME = "solrace-commit"


def _pack(command: Sequence[Arg]) -> bytes:
    args: Any = tuple(command)  # hiredis' stub types the tuple as one element
    packed: bytes = hiredis.pack_command(args)
    return packed


@dataclass(slots=True)
class _Flush:
    """A flush in flight: how many replies it waits for, and who waits."""

    expected: int
    future: asyncio.Future[list[Any]]
    timer: asyncio.Handle | None = None  # uvloop may give a plain Handle (no when())
    replies: list[Any] = field(default_factory=list)


class _RespProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader(
            protocolError=InvalidResponse, replyError=BaseParser.parse_error
        )
        self.transport: asyncio.Transport | None = None
        self.flushes: deque[_Flush] = deque()
        self.failure: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport by contract; not an ``asyncio.Transport`` subclass on every
        # event loop (uvloop's is not), so the type is asserted, not checked.
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        flushes = self.flushes
        while True:
            try:
                reply = self.reader.gets()
            except InvalidResponse as exc:
                self.fail(RedisConnectionError(f"unparsable reply from Redis: {exc}"))
                return
            if reply is False:
                return
            if not flushes:
                self.fail(RedisConnectionError("a reply from Redis nobody asked for"))
                return
            head = flushes[0]
            head.replies.append(reply)
            if len(head.replies) == head.expected:
                flushes.popleft()
                if head.timer is not None:
                    head.timer.cancel()
                if not head.future.done():  # done: its waiter was cancelled
                    head.future.set_result(head.replies)

    def closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(RedisConnectionError(f"connection to Redis lost: {exc or 'closed by server'}"))

    def time_out(self) -> None:
        """A flush's reply did not come in time (its error is built only then, not
        for every flush)."""
        self.fail(RedisTimeoutError("Timeout reading from Redis"))

    def fail(self, exc: BaseException) -> None:
        """Fail every flush in flight and drop the connection (once)."""
        if self.failure is None:
            self.failure = exc
        while self.flushes:
            flush = self.flushes.popleft()
            if flush.timer is not None:
                flush.timer.cancel()
            if not flush.future.done():
                flush.future.set_exception(self.failure)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()


class RespLink:
    """One pipelined connection for script calls; see the module docstring."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = REDIS_DEFAULT_PORT,
        path: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
    ) -> None:
        self._host, self._port, self._path = host, port, path
        self._db, self._username, self._password = db, username, password
        self._timeout, self._connect_timeout = timeout, connect_timeout
        self._protocol: _RespProtocol | None = None
        self._connecting = asyncio.Lock()
        self._closed = False

    @classmethod
    def for_pool(cls, pool: ConnectionPool) -> RespLink | None:
        """A link to where ``pool`` connects, with its timeouts and credentials; None
        for TLS (redis-py's pipelines stay in charge there)."""
        if issubclass(pool.connection_class, SSLConnection):
            return None
        kw = pool.connection_kwargs
        return cls(
            host=str(kw.get("host", "127.0.0.1")),
            port=int(kw.get("port", REDIS_DEFAULT_PORT)),
            path=kw.get("path"),
            db=int(kw.get("db", 0) or 0),
            username=kw.get("username"),
            password=kw.get("password"),
            timeout=kw.get("socket_timeout"),
            connect_timeout=kw.get("socket_connect_timeout"),
        )

    async def execute(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """Each command's reply, in order; a reply error is returned as its redis-py
        exception. Raises redis-py's ConnectionError or TimeoutError when the link
        fails before every reply came (which commands ran is then unknown)."""
        try:
            packed = [_pack(command) for command in commands]
        except TypeError as exc:
            raise DataError(str(exc)) from exc
        protocol = self._protocol
        if protocol is None or protocol.failure is not None or protocol.closing():
            protocol = await self._connect()
        return await self._send(protocol, packed)

    def _send(self, protocol: _RespProtocol, packed: list[bytes]) -> asyncio.Future[list[Any]]:
        assert protocol.transport is not None
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        flush = _Flush(len(packed), future)
        if self._timeout is not None:
            flush.timer = asyncio.get_running_loop().call_later(self._timeout, protocol.time_out)
        protocol.flushes.append(flush)
        protocol.transport.write(packed[0] if len(packed) == 1 else b"".join(packed))
        return future

    async def _connect(self) -> _RespProtocol:
        async with self._connecting:
            if self._closed:
                raise RedisConnectionError("the store is closed")
            protocol = self._protocol
            if protocol is not None and protocol.failure is None and not protocol.closing():
                return protocol  # another flush connected meanwhile
            if protocol is not None:
                protocol.fail(RedisConnectionError("connection to Redis dropped"))
            self._protocol = None
            loop = asyncio.get_running_loop()
            where = self._path or f"{self._host}:{self._port}"
            try:
                async with asyncio.timeout(self._connect_timeout):
                    if self._path is not None:
                        _, protocol = await loop.create_unix_connection(_RespProtocol, self._path)
                    else:
                        _, protocol = await loop.create_connection(
                            _RespProtocol, self._host, self._port
                        )
                    await self._handshake(protocol)
            except TimeoutError as exc:
                raise RedisTimeoutError(f"Timeout connecting to Redis at {where}") from exc
            except OSError as exc:
                raise RedisConnectionError(f"Error connecting to Redis at {where}: {exc}") from exc
            self._protocol = protocol
            return protocol

    async def _handshake(self, protocol: _RespProtocol) -> None:
        """Credentials and database as the URL says; the name lets an operator find
        the connection in ``CLIENT LIST``."""
        commands: list[tuple[Arg, ...]] = []
        if self._password is not None:
            commands.append(
                ("AUTH", self._password)
                if self._username is None
                else ("AUTH", self._username, self._password)
            )
        if self._db:
            commands.append(("SELECT", self._db))
        commands.append(("CLIENT", "SETNAME", CLIENT_NAME))
        replies = await self._send(protocol, [_pack(c) for c in commands])
        # A refused name (an ACL without CLIENT SETNAME) costs only the name.
        for reply in replies[:-1]:
            if isinstance(reply, Exception):  # e.g. AuthenticationError, a ConnectionError
                protocol.fail(RedisConnectionError(f"Redis refused the connection: {reply}"))
                raise RedisConnectionError(f"Redis refused the connection: {reply}")

    async def close(self) -> None:
        """Close the connection; flushes still in flight fail."""
        self._closed = True
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.fail(RedisConnectionError("the store is closed"))
