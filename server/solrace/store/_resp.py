"""Two per-command costs of redis-py's asyncio connections, taken off the move path.

- **Packing.** redis-py's synchronous client packs commands with
  ``hiredis.pack_command`` when hiredis is installed; its asyncio client does not, and
  packing a move's EVALSHA (a dozen arguments) cost about 10 µs of Python against
  1.6 µs in hiredis. The bytes on the wire are the same.
- **Sending.** With a socket timeout set (the store always sets one), every send is
  ``asyncio.wait_for(writelines + drain)``, which creates a task per command. When the
  socket takes the bytes at once — nearly always — there is nothing to wait for, so the
  send returns without a task; only a send that leaves bytes in the transport's buffer
  waits for it to drain, through redis-py's own path (its timeout and error handling).
  A group commit of one move cost about 30–50 µs less CPU (docs/performance.md).

:func:`speed_up` switches a client's connection pool to a subclass of its own
connection class (TCP, TLS or Unix socket alike) with both changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import hiredis
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.exceptions import DataError

__all__ = ["speed_up"]


class _HiredisPacking(AbstractConnection):
    """``pack_command`` as redis-py's own ``HiredisRespSerializer.pack``; sends that
    need no wait done without a task."""

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        writer = self._writer
        if (
            writer is None
            or self._reader is None
            or (check_health and self.health_check_interval)
            or isinstance(command, str)
        ):
            return await super().send_packed_command(command, check_health)
        writer.writelines([command] if isinstance(command, bytes) else command)
        if writer.transport.get_write_buffer_size():
            await super().send_packed_command([], False)  # drain, with the timeout

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        if isinstance(first, str):
            args = (*first.encode().split(), *args[1:])
        elif b" " in first:
            args = (*first.split(), *args[1:])
        args = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
        try:
            return [hiredis.pack_command(args)]
        except TypeError as exc:
            raise DataError(str(exc)) from exc


_PACKING: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def _packing(base: type[AbstractConnection]) -> type[AbstractConnection]:
    if issubclass(base, _HiredisPacking):
        return base
    if base not in _PACKING:
        _PACKING[base] = type(f"Hiredis{base.__name__}", (_HiredisPacking, base), {})
    return _PACKING[base]


def speed_up(pool: ConnectionPool) -> None:
    """Make the pool's future connections pack with hiredis and send without a task
    when nothing needs waiting for (call it before the first command: connections are
    made on first use)."""
    pool.connection_class = _packing(pool.connection_class)
