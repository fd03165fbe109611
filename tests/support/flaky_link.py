"""A misbehaving network between a client and a server, for the flaky-link audit: an
asyncio TCP proxy on 127.0.0.1 whose faults a test turns on and off while racers play
through it.

Racers play over home Wi-Fi and mobile links. What such a link does to a connection,
seen from either end, is what this proxy does to the connections it carries:

- **cut** it at a chosen or random byte — in the middle of a WebSocket frame as often
  as not, in either direction — with a TCP reset to both ends (:meth:`FlakyLink.cut_all`,
  or ``cut_within`` for every new connection);
- **stall** one direction, or both, for a while or for good: no byte passes and none is
  read, and no reset is sent either (a half-open link, a blackhole: :meth:`stall`);
- **delay** each chunk by ``latency_s`` plus up to ``jitter_s`` (in order: TCP's);
- deliver bytes in **tiny chunks** of at most ``chunk`` bytes, each written on its own;
- **refuse** new connections (``refusing``): each is accepted and reset at once, as a
  link with no route answers;
- go **silent** on new connections (``silent``), both ways and for good: from their
  first byte (``"connect"``: the handshake goes unanswered), or once the server's
  answer to the WebSocket handshake has passed (``"handshake"``: the server was
  reached, then nothing more comes).

Every random choice comes from the proxy's own ``random.Random(seed)``, so a test run
with one seed cuts the same links at the same bytes (the racers' timing may still
differ). :attr:`FlakyLink.stats` counts what was done, for the test's figures."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
from typing import Literal


class Direction(StrEnum):
    """Which way bytes go: client to server (``UP``) or server to client (``DOWN``)."""

    UP = "up"
    DOWN = "down"


BOTH = (Direction.UP, Direction.DOWN)
READ_SIZE = 65536
#: Where an HTTP answer's head ends: the WebSocket handshake's, here.
HEAD_END = b"\r\n\r\n"


@dataclass
class Stats:
    """What the proxy did: connections carried and refused, cuts (and how many of them
    fell inside a chunk, i.e. mid-write, mostly mid-frame), stalls, bytes by direction."""

    connections: int = 0
    refused: int = 0
    cuts: int = 0
    cuts_mid_chunk: int = 0
    stalls: int = 0
    bytes: dict[Direction, int] = field(default_factory=lambda: dict.fromkeys(BOTH, 0))


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a dropped route or a NAT does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Link:
    """One client connection and its connection to the server: two pumps."""

    def __init__(
        self,
        proxy: FlakyLink,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.ends = {Direction.UP: (client[0], server[1]), Direction.DOWN: (server[0], client[1])}
        self.writers = (client[1], server[1])
        self.flowing = {d: asyncio.Event() for d in BOTH}
        for event in self.flowing.values():
            event.set()
        #: Bytes still to pass before the cut, by direction (None: no cut armed).
        self.cut_in: dict[Direction, int | None] = dict.fromkeys(BOTH)
        self.done = asyncio.Event()
        #: Silent once the server's handshake answer has passed; the bytes of it seen.
        self.silent_after_head = proxy.silent == "handshake"
        self.head = b""
        if proxy.silent == "connect":
            self.go_silent()
        self.tasks = [asyncio.create_task(self._pump(d)) for d in BOTH]

    def go_silent(self) -> None:
        """Stall both directions for good (until :meth:`FlakyLink.flow`)."""
        self.proxy.stats.stalls += 1
        for event in self.flowing.values():
            event.clear()

    def _head_end(self, data: bytes) -> int | None:
        """Where in ``data`` (the next bytes from the server) its handshake answer ends,
        once it does; None before that."""
        seen = len(self.head)
        self.head += data
        end = self.head.find(HEAD_END)
        return None if end < 0 else end + len(HEAD_END) - seen

    def cut_now(self) -> None:
        if not self.done.is_set():
            self._end()
            for writer in self.writers:
                _reset(writer)

    def _end(self) -> None:
        self.done.set()
        for event in self.flowing.values():
            event.set()  # a stalled pump wakes, and stops

    async def _pump(self, direction: Direction) -> None:
        reader, writer = self.ends[direction]
        proxy, flowing = self.proxy, self.flowing[direction]
        due = 0.0  # when the previous chunk was delivered: chunks stay in order
        try:
            while not self.done.is_set():
                await flowing.wait()  # stalled: read nothing, send nothing, reset nothing
                data = await reader.read(READ_SIZE)
                await flowing.wait()
                if self.done.is_set():
                    return
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()  # a half-close passes through
                    return
                delay = proxy.latency_s + proxy.rng.uniform(0, proxy.jitter_s)
                due = max(due, time.monotonic() + delay)
                if due > time.monotonic():
                    await asyncio.sleep(due - time.monotonic())
                    await flowing.wait()
                    if self.done.is_set():
                        return
                if direction is Direction.DOWN and self.silent_after_head:
                    end = self._head_end(data)
                    if end is not None:  # the answer passes; what follows waits for good
                        self.silent_after_head = False
                        await self._write(writer, direction, data[:end])
                        self.go_silent()
                        data = data[end:]
                        await flowing.wait()
                        if self.done.is_set() or not data:
                            continue
                left = self.cut_in[direction]
                if left is not None and left < len(data):
                    await self._write(writer, direction, data[:left])
                    proxy.stats.cuts += 1
                    proxy.stats.cuts_mid_chunk += left > 0
                    self.cut_now()
                    return
                if left is not None:
                    self.cut_in[direction] = left - len(data)
                await self._write(writer, direction, data)
        except OSError:
            self.cut_now()  # one end reset: so is the other, as through a real link
        finally:
            if all(task.done() for task in self.tasks if task is not asyncio.current_task()):
                self.close()

    def close(self) -> None:
        """Both ends are done (each sent its EOF through): close them gently."""
        if not self.done.is_set():
            self._end()
            for writer in self.writers:
                writer.close()

    async def _write(self, writer: asyncio.StreamWriter, direction: Direction, data: bytes) -> None:
        proxy = self.proxy
        while data:
            size = len(data) if proxy.chunk is None else proxy.rng.randint(1, proxy.chunk)
            piece, data = data[:size], data[size:]
            writer.write(piece)
            await writer.drain()
            proxy.stats.bytes[direction] += len(piece)
            if proxy.chunk is not None:
                await asyncio.sleep(0)  # the reader may take this piece alone


class FlakyLink:
    """A TCP proxy from a port of its own to ``target_port`` (on 127.0.0.1); use it as an
    async context manager, and give clients :attr:`url` instead of the server's."""

    def __init__(self, target_port: int, *, seed: int, port: int = 0) -> None:
        self.target_port = target_port
        self.rng = random.Random(seed)
        self.latency_s = 0.0
        self.jitter_s = 0.0
        #: At most this many bytes per write (None: as they come).
        self.chunk: int | None = None
        #: New connections are reset at once.
        self.refusing = False
        #: Directions a new connection starts stalled in, until :meth:`flow` (a stall
        #: of the far end itself, a Redis frozen: ``stall(..., new_too=True)``).
        self.stalling: tuple[Direction, ...] = ()
        #: New connections go silent for good: from the start, or after the handshake.
        self.silent: Literal["connect", "handshake"] | None = None
        #: Each new connection is cut after a random number of bytes in this range, in
        #: a random direction (None: not cut).
        self.cut_within: tuple[int, int] | None = None
        #: ... in one of these directions.
        self.cut_directions: tuple[Direction, ...] = BOTH
        self.stats = Stats()
        self.links: list[_Link] = []
        self._server: asyncio.Server | None = None
        #: The port it listens on (0 until entered: any free one, unless given).
        self.port = port

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def live(self) -> list[_Link]:
        return [link for link in self.links if not link.done.is_set()]

    async def __aenter__(self) -> FlakyLink:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for link in self.links:
            link.cut_now()
        tasks = [task for link in self.links for task in link.tasks]
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.stats.refused += 1
            _reset(writer)
            return
        try:
            upstream = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            _reset(writer)
            return
        self.stats.connections += 1
        link = _Link(self, (reader, writer), upstream)
        for direction in self.stalling:
            self.stats.stalls += 1
            link.flowing[direction].clear()
        if self.cut_within is not None:
            after = self.rng.randint(*self.cut_within)
            link.cut_in[self.rng.choice(self.cut_directions)] = after
        self.links.append(link)

    def cut_all(self, within: int = 0, directions: tuple[Direction, ...] = BOTH) -> int:
        """Cut every live connection: at once (``within`` 0), or after a random number of
        bytes up to ``within`` in a random one of ``directions`` (mid-frame, mostly).
        Returns how many were armed or cut."""
        links = self.live
        for link in links:
            if within <= 0:
                self.stats.cuts += 1
                link.cut_now()
            else:
                link.cut_in[self.rng.choice(directions)] = self.rng.randint(1, within)
        return len(links)

    def stall(
        self,
        directions: tuple[Direction, ...] = BOTH,
        seconds: float | None = None,
        *,
        new_too: bool = False,
    ) -> int:
        """Stall ``directions`` of every live connection for ``seconds`` (None: until
        :meth:`flow`, or for good): nothing passes, nothing is read, nothing is reset.
        ``new_too``: connections opened meanwhile stall too (the server behind the
        proxy is frozen, not one link). Returns how many connections."""
        links = self.live
        if new_too:
            self.stalling = directions
        for link in links:
            self.stats.stalls += 1
            for direction in directions:
                link.flowing[direction].clear()
        if seconds is not None:
            asyncio.get_running_loop().call_later(seconds, self.flow)
        return len(links)

    def flow(self) -> None:
        """End every stall."""
        self.stalling = ()
        for link in self.links:
            for event in link.flowing.values():
                event.set()

    def refuse_for(self, seconds: float) -> None:
        """Refuse new connections from now on, for ``seconds``."""
        self.refusing = True
        asyncio.get_running_loop().call_later(seconds, setattr, self, "refusing", False)
