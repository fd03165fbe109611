"""Mapping redis-py exceptions onto the store's own (see :mod:`solrace.store.errors`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import StoreError, StoreUnavailable

__all__ = ["redis_errors", "translate"]

# OSError covers socket errors redis-py did not wrap and asyncio/builtin TimeoutError.
_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)


def translate(exc: BaseException) -> StoreError:
    """A fresh store exception for ``exc`` (fresh so each waiting caller owns its own)."""
    err: StoreError
    if isinstance(exc, StoreUnavailable):
        err = StoreUnavailable(*exc.args)
    elif isinstance(exc, _UNAVAILABLE):
        err = StoreUnavailable(f"redis unavailable: {type(exc).__name__}: {exc}")
    elif isinstance(exc, asyncio.CancelledError):
        err = StoreUnavailable("store flush was cancelled (store closing?)")
    elif isinstance(exc, RedisError):
        err = StoreError(f"redis error: {type(exc).__name__}: {exc}")
    else:
        err = StoreError(f"unexpected store failure: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def _still_cancelled() -> None:
    """Raise CancelledError if the running task was asked to stop during the call.

    redis-py (seen with 8.1 and hiredis, on Redis and on the embedded engine alike)
    sometimes swallows a cancellation that arrives while a command is on the wire: the
    command returns, or fails with a connection error, as if nobody had cancelled. A
    node's background loops (``while True: await store.…``) then never stop, and
    ``Node.stop`` waits for them forever. A store call made by a cancelled task must end
    cancelled, so it is re-raised here, at the one place every call goes through.
    """
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        return
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


@contextmanager
def redis_errors() -> Iterator[None]:
    """Let store errors through; turn redis (and socket) errors into store errors; a
    cancelled caller gets CancelledError whatever redis-py did with it."""
    try:
        yield
    except StoreError:
        raise
    except (RedisError, OSError) as exc:
        _still_cancelled()
        raise translate(exc) from exc
    _still_cancelled()
