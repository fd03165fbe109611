"""net/session.py and the server's keepalive: what a client that does not read gets
(docs/protocol.md §13), seen from a raw TCP client that stops reading its socket.

An audit's client that stopped reading while it asked for replays never got the
documented 1008 ``too_slow``, and no close can reach such a client: these tests pin how
a client that answers no ping is closed, and how one that does not read is dropped."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from solrace.net import server as server_module
from solrace.net.session import SPECTATOR_WRITE_S, Session, UnreadBudget
from solrace.protocol import Envelope, encode
from solrace.protocol.limits import (
    CLOSE_TIMEOUT_S,
    KEEPALIVE_INTERVAL_S,
    KEEPALIVE_TIMEOUT_S,
    MAX_UNREAD_BYTES,
    MAX_UNREAD_BYTES_PER_NODE,
    STUCK_OUTPUT_S,
    SUBPROTOCOL,
)
from solrace_client import RaceClient

from tests.support.race import play_until_done, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster
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


def _dropped_for_not_reading(server: Any) -> float:
    """``solrace_protocol_closes_total{code="1008"}``: clients dropped for not reading."""
    sample = server.metrics.registry.get_sample_value(
        "solrace_protocol_closes_total", {"code": "1008"}
    )
    return float(sample or 0.0)


async def _stop_reading_and_ask(
    server: Any, writer: asyncio.StreamWriter, until: Callable[[], bool], most: int
) -> None:
    """Stop reading, and send pings (each answered by a ~30-byte pong: the rate limit
    is lifted here; at a racer's pace they would take hours) until ``until()`` or
    ``most`` pings."""
    writer.transport.pause_reading()  # the client reads nothing from here on
    ping = _ws_frame(0x2, encode(Envelope("ping", id=1)))
    sent = 0
    while not until() and sent < most:
        writer.write(ping * 2000)
        sent += 2000
        await asyncio.sleep(0)  # the node reads as it goes; it is this process
        try:
            await asyncio.wait_for(writer.drain(), 1)
        except (TimeoutError, ConnectionError):
            break


async def _until_closed(server: Any, within_s: float) -> float:
    """Seconds until the node has no connection open (fails after ``within_s``)."""
    started = time.monotonic()
    while server.admission.open and time.monotonic() < started + within_s:
        await asyncio.sleep(0.05)
    assert not server.admission.open, "the connection is still open"
    return time.monotonic() - started


async def _cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The client, reading again, finds its stream cut short: what the kernels held
    arrives (some MiB), the node's buffer never does, and no close frame comes."""
    writer.transport.resume_reading()
    data, ended = await _read_all(reader)
    assert ended in ("reset", "end of stream") and len(data) < MAX_UNREAD_BYTES
    assert 0x8 not in [op for op, _ in _server_frames(data)]
    writer.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)  # no store involved
async def test_a_client_that_leaves_too_much_output_unread_is_dropped_at_once(
    cluster: Cluster,
) -> None:
    """Once more than MAX_UNREAD_BYTES wait in the node's buffer, the connection is
    dropped, counted in ``solrace_protocol_closes_total{code="1008"}``. Not closed: its
    close frame would wait behind what it has not read (it could never see it), and
    websockets' close waits for that output to drain first — the connection stayed
    open after the close (this test, 3 of 3 runs: still open 15 s later).

    The node's output is frames of 64 KiB (a ``result`` is up to some hundred KiB):
    the test once filled the buffer with pongs, 30 bytes each, and on a loaded machine
    (two busy loops beside the suite) the node answered too few of the 140,000 it takes
    within the test's wait, or its keepalive dropped the silent client first."""
    server = await cluster.node()
    known = set(server.node.peers)
    reader, writer = await _raw_client(server.url)
    writer.transport.pause_reading()  # the client reads nothing from here on
    while not (new := [p for p in server.node.peers if p not in known]):
        await asyncio.sleep(0.01)
    (session,) = new
    assert isinstance(session, Session)
    await _fill(session, 2 * MAX_UNREAD_BYTES)  # until dropped: it never holds that much
    assert session.closed and _dropped_for_not_reading(server) == 1
    assert session.unread_bytes() == 0  # its buffer went with it
    assert await _until_closed(server, 2) < 2
    await _cut_short(reader, writer)


async def _fill(session: Session, target: int) -> None:
    """Frames for ``session`` (64 KiB each: a ``result`` is up to some hundred KiB)
    until at least ``target`` bytes wait unread in the node's buffer for it."""
    frame = b"\x00" * (64 * 1024)
    while session.unread_bytes() < target and not session.closed:
        session.send_bytes(frame)
        for _ in range(3):  # its write, at the end of the loop turn
            await asyncio.sleep(0)


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)  # no store involved
async def test_the_node_drops_the_connection_holding_most_once_all_hold_too_much(
    cluster: Cluster,
) -> None:
    """Each connection may leave MAX_UNREAD_BYTES unread; alone, that let N clients
    that never read pin N × 4 MiB of the node (an audit's 200 clients asking for an
    archived race's result and never reading: the node's RSS 65 → 522 MB, which it
    kept). A node's connections together now leave at most MAX_UNREAD_BYTES_PER_NODE
    (64 MiB, the default a user gets) unread: past it, the one holding the most is
    dropped, counted as a 1008 close like the per-connection limit. Clients that do
    not read fill the node's buffer, each below its own limit, the first the most;
    the one that takes the node past the budget is not the one dropped."""
    server = await cluster.node()
    assert MAX_UNREAD_BYTES_PER_NODE == 64 * 1024 * 1024
    clients: list[tuple[Session, asyncio.StreamReader, asyncio.StreamWriter]] = []
    most = MAX_UNREAD_BYTES_PER_NODE // (3 * MAX_UNREAD_BYTES // 4) + 4  # 3 MiB each
    while _dropped_for_not_reading(server) == 0 and len(clients) < most:
        known = set(server.node.peers)
        reader, writer = await _raw_client(server.url)
        writer.transport.pause_reading()  # it never reads
        while not (new := [p for p in server.node.peers if p not in known]):
            await asyncio.sleep(0.01)
        (session,) = new
        assert isinstance(session, Session)
        clients.append((session, reader, writer))
        held = sum(s.unread_bytes() for s, _, _ in clients)
        target = 15 * MAX_UNREAD_BYTES // 16 if len(clients) == 1 else 7 * MAX_UNREAD_BYTES // 8
        await _fill(session, target)
    print(f"{len(clients)} clients, {held / 2**20:.1f} MiB unread before the last one's")
    assert _dropped_for_not_reading(server) == 1, f"none dropped: {held / 2**20:.0f} MiB unread"
    assert held + MAX_UNREAD_BYTES > MAX_UNREAD_BYTES_PER_NODE  # only past the budget
    first, *others = clients
    assert first[0].closed and all(not s.closed for s, _, _ in others)
    left = sum(s.unread_bytes() for s, _, _ in others)
    assert server.unread.budget == MAX_UNREAD_BYTES_PER_NODE  # the default
    assert server.unread.total == left <= MAX_UNREAD_BYTES_PER_NODE
    assert len(server.node.peers) == len(others)
    await _cut_short(first[1], first[2])
    for _, _, writer in others:
        writer.transport.abort()


class _Held:
    """A connection holding ``now`` unread bytes (a session.Holder)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def unread_bytes(self) -> int:
        return self.now


def test_the_unread_budget_measures_again_before_it_drops_anyone() -> None:
    """What a connection held is noted at its writes; its client may read it all
    since, unseen. The budget measures every holder again before it drops one, and
    drops the largest only while the fresh total is over: a client that caught up is
    not dropped for what it once held."""
    mib = 2**20
    budget = UnreadBudget(10 * mib)
    caught_up, slow, stuck = _Held(4 * mib), _Held(3 * mib), _Held(3 * mib)
    for held in (caught_up, slow, stuck):
        budget.note(held, held.now)
    budget.note(stuck, 4 * mib)
    stuck.now = 4 * mib
    assert budget.over() and budget.total == 11 * mib
    caught_up.now = 0  # it read everything since its last write
    assert budget.to_drop() == (7 * mib, []) and budget.total == 7 * mib
    slow.now, caught_up.now = 5 * mib, 3 * mib
    budget.note(slow, slow.now)
    budget.note(caught_up, caught_up.now)
    assert budget.to_drop() == (12 * mib, [slow]) and budget.total == 7 * mib  # the largest
    assert not UnreadBudget(0).over()  # 0: no cap


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)  # no store involved
async def test_a_client_whose_output_stops_moving_is_dropped(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that stops reading with less than MAX_UNREAD_BYTES unread: its output
    waits in the node's buffer (writing paused), where neither the keepalive's ping nor
    a close can pass it. The node drops it STUCK_OUTPUT_S after its writing paused —
    the keepalive's longest wait by default; shortened here to see it (the mechanism,
    not the figure, is under test)."""
    assert STUCK_OUTPUT_S == KEEPALIVE_INTERVAL_S + KEEPALIVE_TIMEOUT_S
    monkeypatch.setattr(server_module, "STUCK_OUTPUT_S", 2.0)
    server = await cluster.node()
    reader, writer = await _raw_client(server.url)

    def paused() -> bool:
        ws_server = server.server
        assert ws_server is not None
        return any(c.paused for c in ws_server.connections)

    await _stop_reading_and_ask(server, writer, paused, 3 * MAX_UNREAD_BYTES // 30)
    assert paused() and _dropped_for_not_reading(server) == 0  # below the limit
    took = await _until_closed(server, 10)
    assert 1 < took < 5, took
    assert _dropped_for_not_reading(server) == 1
    await _cut_short(reader, writer)


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_spectators_frames_of_many_moves_go_out_in_few_writes(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write is a system call, and a spectator had one per event: 1,000 of them
    watching 8 racers at 10 moves/s each put half the node's samples in
    ``transport.write`` (an audit, docs/performance.md "One popular race"). A
    spectator's frames now wait up to SPECTATOR_WRITE_S to go out together; a racer's
    still go at the end of the loop turn that made them."""
    server = await cluster.node()
    ann, bob = await racing(server.url)
    spy = await RaceClient.connect(server.url)
    await spy.watch(code=ann.code)
    (session,) = [
        p for p in server.node.peers if isinstance(p, Session) and p.room and p.racer is None
    ]
    writes = 0
    write = session._write

    def counted() -> None:
        nonlocal writes
        writes += 1
        write()

    monkeypatch.setattr(session, "_write", counted)
    began = time.monotonic()
    await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:10])
    await spy.wait_for(lambda e: e.t == "progress" and e.d["moves"] == 10, timeout=10)
    took = time.monotonic() - began
    assert writes <= took / SPECTATOR_WRITE_S + 2, f"{writes} writes in {took * 1000:.0f} ms"
    for client in (ann, bob, spy):
        await client.close()
