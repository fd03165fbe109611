"""store/_resp.py: the store's connections pack with hiredis (the same bytes redis-py's
own packer writes) and send without a task unless the socket must drain first."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection, Connection
from solrace.store._resp import speed_up

from tests.support.redis import connect_or_fail, new_prefix

COMMAND = ("EVALSHA", "a" * 40, 2, "k:{r}:1", "k:{r}:2", 7, b"\x92\xa41>F\x05", "caf\u00e9", 2.5)


def test_hiredis_packs_the_bytes_redis_py_packs() -> None:
    pool = ConnectionPool(connection_class=Connection)
    speed_up(pool)
    fast = pool.connection_class()
    assert isinstance(fast, Connection) and type(fast) is not Connection
    assert b"".join(fast.pack_command(*COMMAND)) == b"".join(Connection().pack_command(*COMMAND))
    assert b"".join(fast.pack_command("CONFIG GET", "maxmemory")) == b"".join(
        Connection().pack_command("CONFIG GET", "maxmemory")
    )
    speed_up(pool)  # twice is once
    assert type(pool.connection_class()) is type(fast)


async def _connection(store: Any) -> AbstractConnection:
    conn: AbstractConnection = await store._redis.connection_pool.get_connection()
    await conn.connect()
    return conn


async def test_a_send_the_socket_takes_needs_no_drain_and_one_that_must_drain_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = await connect_or_fail("redis", new_prefix())
    try:
        conn = await _connection(store)
        slow_path: list[Any] = []
        original = AbstractConnection.send_packed_command

        async def spy(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
            slow_path.append(command)
            await original(self, command, check_health)

        monkeypatch.setattr(AbstractConnection, "send_packed_command", spy)
        await conn.send_packed_command(conn.pack_command("PING"), check_health=False)
        assert await conn.read_response() == b"PONG"
        assert slow_path == []  # taken at once: no drain, no task
        assert conn._writer is not None
        transport = conn._writer.transport
        monkeypatch.setattr(transport, "get_write_buffer_size", lambda: 1)
        await conn.send_packed_command(conn.pack_command("PING"), check_health=False)
        assert await conn.read_response() == b"PONG"
        assert slow_path == [[]]  # bytes left behind: redis-py's drain, with its timeout
        await store._redis.connection_pool.release(conn)
    finally:
        await store.close()
