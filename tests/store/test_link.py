"""store/_link.py: the group commit's own pipelined connection — replies in order and
of redis-py's types, overlapping flushes, and every way the connection can fail (no
answer, a drop mid-flight, bytes that are not RESP, a refused handshake), after
which the next flush connects again."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
import uvloop
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from solrace.net.main import UVLOOP, run_on_loop
from solrace.store import Store, StoreUnavailable
from solrace.store._commit import FLUSHES_IN_FLIGHT
from solrace.store._link import RespLink

from tests.support.flaky_link import FlakyLink
from tests.support.redis import BACKEND_URLS, new_prefix

from .conftest import make_rooms

REDIS = BACKEND_URLS["redis"]

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _link(url: str = REDIS, **overrides: float) -> RespLink:
    pool = redis.asyncio.ConnectionPool.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    link = RespLink.for_pool(pool)
    assert link is not None
    for name, value in overrides.items():
        setattr(link, f"_{name}", value)
    return link


async def _serve(handle: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}/0"


async def test_replies_come_in_order_with_redis_py_error_types() -> None:
    key = new_prefix("link") + "k"
    link = _link()
    try:
        replies = await link.execute(
            [
                ("SET", key, "v"),
                ("EVALSHA", "0" * 40, 0),  # no such script
                ("INCR", key),  # not a number
                ("GET", key),
            ]
        )
        assert replies[0] == b"OK"
        assert isinstance(replies[1], NoScriptError)
        assert isinstance(replies[2], ResponseError) and "not an integer" in str(replies[2])
        assert replies[3] == b"v"
        # flushes in flight together resolve each with its own replies
        got = await asyncio.gather(*(link.execute([("INCRBY", key + "n", i)]) for i in range(1, 6)))
        assert got == [[1], [3], [6], [10], [15]]
    finally:
        await link.execute([("DEL", key, key + "n")])
        await link.close()
    with pytest.raises(RedisConnectionError, match="closed"):
        await link.execute([("PING",)])


async def test_the_url_decides_database_and_credentials() -> None:
    """The link writes to the URL's database: the test database (it wrote to database 5
    whatever SOLRACE_TEST_REDIS_URL said, where no leak guard looks), and not to the
    one after it (only read there)."""
    key = new_prefix("link") + "k"
    parts = urllib.parse.urlsplit(REDIS)
    next_db = (int(parts.path.strip("/") or 0) + 1) % 16
    link = _link(REDIS)
    other = redis.asyncio.from_url(REDIS)
    elsewhere = redis.asyncio.from_url(parts._replace(path=f"/{next_db}").geturl())
    try:
        await link.execute([("SET", key, "on-the-test-db")])
        assert await other.get(key) == b"on-the-test-db"
        assert await elsewhere.get(key) is None
    finally:
        await other.delete(key)
        await other.aclose()
        await elsewhere.aclose()
        await link.close()
    # the test Redis has no password: AUTH is refused, and so is the connection
    refused = _link(REDIS.replace("redis://", "redis://:wrong@"))
    with pytest.raises(RedisConnectionError, match="refused"):
        await refused.execute([("PING",)])
    assert RespLink.for_pool(redis.asyncio.ConnectionPool.from_url("rediss://h:1/0")) is None


async def test_a_unix_socket_url_is_served_too(tmp_path: Path) -> None:
    store = await Store.start_embedded(tmp_path / "data")
    try:
        assert store._commit._link is not None and store._commit._link._path is not None
        await make_rooms(store, "r")
        assert await store.append_move("r", "p0", 0, b"m", b"e", round_no=1) is not None
    finally:
        await store.close()


async def test_no_answer_times_out_and_the_next_flush_connects_again() -> None:
    """A Redis that takes the handshake, then never answers: both flushes in flight
    fail with the link's timeout, and the next flush opens a new connection."""
    held: list[asyncio.StreamWriter] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await reader.readuntil(b"solrace-commit\r\n")
        writer.write(b"+OK\r\n")
        await reader.read()

    server, url = await _serve(mute)
    link = _link(url, timeout=0.2)
    try:
        first = asyncio.ensure_future(link.execute([("PING",)]))
        second = asyncio.ensure_future(link.execute([("PING",)]))
        for flight in (first, second):
            with pytest.raises(RedisTimeoutError):
                await flight
        assert len(held) == 1
        with pytest.raises(RedisTimeoutError):
            await link.execute([("PING",)])
        assert len(held) == 2
    finally:
        await link.close()
        for w in held:
            w.close()
        server.close()


@pytest.mark.parametrize(
    ("answer", "error"),
    [(b"", "lost"), (b"?not resp\r\n", "unparsable")],
)
async def test_a_broken_connection_fails_its_flushes(answer: bytes, error: str) -> None:
    """The server takes the handshake, reads one command, then hangs up (``b""``),
    answers garbage, or answers twice: the flush fails as a connection error."""

    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"solrace-commit\r\n")
        writer.write(b"+OK\r\n")
        await reader.readuntil(b"PING\r\n")
        if answer:
            writer.write(answer)
            await writer.drain()
            await reader.read()
        writer.close()

    server, url = await _serve(broken)
    link = _link(url)
    try:
        with pytest.raises(RedisConnectionError, match=error):
            await asyncio.wait_for(link.execute([("PING",)]), 2)
    finally:
        await link.close()
        server.close()


async def test_a_reply_nobody_asked_for_drops_the_connection() -> None:
    """A server that answers one PING twice: the flush gets the first reply, the
    second drops the connection (the stream is out of step), and the next flush
    connects again."""
    connections: list[asyncio.StreamWriter] = []

    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await reader.readuntil(b"solrace-commit\r\n")
        writer.write(b"+OK\r\n")
        while await reader.readuntil(b"PING\r\n"):
            writer.write(b"+PONG\r\n+PONG\r\n")

    server, url = await _serve(chatty)
    link = _link(url)
    try:
        assert await link.execute([("PING",)]) == [b"PONG"]
        await asyncio.sleep(0.05)
        assert await link.execute([("PING",)]) == [b"PONG"]
        assert len(connections) == 2
    finally:
        await link.close()
        for w in connections:
            w.close()
        server.close()


async def test_a_move_in_flight_when_the_link_dies_is_unavailable_and_never_applied(
    private_redis: Callable[..., str],
) -> None:
    """Redis holds the move's script (CLIENT PAUSE WRITE) and the commit's connection
    is killed meanwhile: the caller gets StoreUnavailable, nothing was written, and the
    next move goes through on a new connection. On a private Redis: a pause would hold
    every other test's writes, and the shared one has other tests' links."""
    url = private_redis()
    store = await Store.connect(url, prefix=new_prefix())
    admin = redis.asyncio.from_url(url)
    try:
        await make_rooms(store, "r")
        assert (await store.append_move("r", "p0", 0, b"m0", b"e0", round_no=1)).accepted
        [link_id] = [c["id"] for c in await admin.client_list() if c["name"] == "solrace-commit"]
        await admin.execute_command("CLIENT", "PAUSE", "2000", "WRITE")
        try:
            moving = asyncio.ensure_future(
                store.append_move("r", "p0", 1, b"m1", b"e1", round_no=1)
            )
            await asyncio.sleep(0.2)
            assert not moving.done()  # held by the pause
            assert await admin.client_kill_filter(_id=link_id) == 1
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(moving, 2)
        finally:
            await admin.execute_command("CLIENT", "UNPAUSE")
        assert await store.move_log("r", "p0") == [b"m0"]
        again = await store.append_move("r", "p0", 1, b"m1", b"e1", round_no=1)
        assert again.accepted and await store.move_log("r", "p0") == [b"m0", b"m1"]
    finally:
        await store.delete_all()
        await store.close()
        await admin.aclose()


async def test_a_batch_does_not_wait_for_the_round_trip_of_the_one_before() -> None:
    """Redis far away (through a proxy, here stalled: Ann's batch unanswered): Bob's
    move, made a loop turn after Ann's, goes out at once beside hers. It waited for
    Ann's batch to be answered before: two round trips, so two racers moving back to
    back on a distant node each paid two round trips a move. Counted by the batches
    on the wire, not timed (a timed version failed on a loaded CI run)."""
    url = urllib.parse.urlsplit(REDIS)
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        far = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        store = await Store.connect(far, prefix=new_prefix())
        try:
            await make_rooms(store, "r")
            assert (await store.append_move("r", "warm", 0, b"m", b"e", round_no=1)).accepted
            proxy.stall()  # until flow(): nothing is answered
            before = store.flushes
            ann = asyncio.ensure_future(store.append_move("r", "ann", 0, b"m", b"e", round_no=1))
            await asyncio.sleep(0.002)  # a loop turn of its own: a batch of its own
            bob = asyncio.ensure_future(store.append_move("r", "bob", 0, b"m", b"e", round_no=1))
            await asyncio.sleep(0.002)
            assert not ann.done() and not bob.done()
            assert store.flushes == before + 2, "Bob's batch waited for Ann's answer"
            proxy.flow()
            assert (await ann).accepted and (await bob).accepted
            assert await store.version("r") == 3
        finally:
            proxy.flow()
            await store.delete_all()
            await store.close()


async def test_batches_on_the_wire_at_once_are_bounded() -> None:
    """Redis stalled (through the proxy): one batch a loop turn goes out until
    FLUSHES_IN_FLIGHT are on the wire; the calls made after that wait, together, for
    one batch, and every call is answered once Redis is."""
    url = urllib.parse.urlsplit(REDIS)
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        far = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        store = await Store.connect(far, prefix=new_prefix())
        try:
            await make_rooms(store, "r")
            assert (await store.append_move("r", "warm", 0, b"m", b"e", round_no=1)).accepted
            proxy.stall(seconds=0.5)
            calls = []
            for i in range(FLUSHES_IN_FLIGHT + 5):
                calls.append(
                    asyncio.ensure_future(
                        store.append_move("r", f"p{i}", 0, b"m", b"e", round_no=1)
                    )
                )
                await asyncio.sleep(0.002)  # a loop turn of its own: a batch of its own
            assert store.flushes == 1 + FLUSHES_IN_FLIGHT
            assert all(r.accepted for r in await asyncio.gather(*calls))
            assert store.flushes == 1 + FLUSHES_IN_FLIGHT + 1
            assert store.flushed_moves == 1 + FLUSHES_IN_FLIGHT + 5
        finally:
            await store.delete_all()
            await store.close()


async def test_a_refused_client_name_costs_only_the_name() -> None:
    """An ACL may forbid CLIENT SETNAME: the link works without its name."""

    async def strict(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"solrace-commit\r\n")
        writer.write(b"-NOPERM this user has no permissions to run the 'client' command\r\n")
        await reader.readuntil(b"PING\r\n")
        writer.write(b"+PONG\r\n")
        await reader.read()
        writer.close()

    server, url = await _serve(strict)
    link = _link(url)
    try:
        assert await asyncio.wait_for(link.execute([("PING",)]), 2) == [b"PONG"]
    finally:
        await link.close()
        server.close()


def test_the_link_runs_on_uvloop_whose_transports_are_not_asyncio_transports() -> None:
    """``solrace-server`` runs on uvloop where it is installed (solrace/net/main.py).
    uvloop's TCP transport is not an ``asyncio.Transport`` subclass; the link asserted
    it was, so on uvloop every move failed with ``internal`` before this was fixed.
    The same group-commit flush, on uvloop, against the real Redis."""

    async def flush() -> tuple[str, list[object]]:
        key = new_prefix("link") + "k"
        link = _link()
        try:
            replies = await link.execute([("SET", key, "v"), ("GET", key), ("DEL", key)])
        finally:
            await link.close()
        return type(asyncio.get_running_loop()).__module__, replies

    module, replies = run_on_loop(UVLOOP, flush())
    assert module == uvloop.Loop.__module__
    assert replies == [b"OK", b"v", 1]


async def test_batches_resent_after_noscript_still_run_in_their_order(
    private_redis: Callable[..., str],
) -> None:
    """Scripts gone (a Redis restart, SCRIPT FLUSH) while batches overlap on the wire
    (Redis 100 ms away): every batch is answered NOSCRIPT and resent once its scripts
    are loaded. The resends keep the batches' order, as one batch at a time did, even
    when the first batch's SCRIPT LOAD comes back last: racers' moves run in the order
    the node sent them (their room versions), so the first finisher stays first. On a
    private Redis: the shared one's scripts are loaded again at once by other tests."""
    url = urllib.parse.urlsplit(private_redis())
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        proxy.latency_s = 0.05  # each way
        far = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        store = await Store.connect(far, prefix=new_prefix())
        admin = redis.asyncio.from_url(url.geturl())
        commit: Any = store._commit
        real_load = commit._client.script_load
        loads = 0

        async def first_load_slow(source: str) -> Any:
            nonlocal loads
            loads += 1
            if loads == 1:
                await asyncio.sleep(0.3)  # the first batch's load comes back last
            return await real_load(source)

        try:
            await make_rooms(store, "r")
            assert (await store.append_move("r", "warm", 0, b"m", b"e", round_no=1)).accepted
            await admin.script_flush()
            commit._client.script_load = first_load_slow
            racers = [f"racer{i}" for i in range(4)]
            moves = []
            for racer in racers:  # each in a batch of its own, all on the wire at once
                moves.append(
                    asyncio.ensure_future(store.append_move("r", racer, 0, b"m", b"e", round_no=1))
                )
                await asyncio.sleep(0.01)
            results = await asyncio.gather(*moves)
            assert loads >= 2  # (else the test shows nothing)
            versions = [result.version for result in results]
            assert versions == sorted(versions), versions
        finally:
            commit._client.script_load = real_load
            await store.delete_all()
            await store.close()
            await admin.aclose()
