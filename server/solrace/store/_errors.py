"""Mapping redis-py exceptions onto the store's own (see :mod:`solrace.store.errors`)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterDownError,
    ClusterError,
    MasterDownError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import AUTH_REFUSALS, StoreError, StoreForbidden, StoreRefusing, StoreUnavailable

__all__ = ["redis_errors", "refusal", "translate"]

# OSError covers socket errors redis-py did not wrap and asyncio/builtin TimeoutError.
_UNAVAILABLE: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

# Redis Cluster replies and client errors that mean "the cluster is moving under us"
# (a failover, a resharding, a node the client cannot reach): CLUSTERDOWN/MASTERDOWN,
# TRYAGAIN, MOVED/ASK left over after redis-py's own redirects ("TTL exhausted" is a
# ClusterError), an uncovered slot, or no startup node answering. Each means the command
# did not run, but a caller cannot always tell which command of a batch got it, so they
# are reported like an outage: StoreUnavailable, outcome unknown, re-read and retry
# (every write is idempotent by sequence number or expected version).
_CLUSTER_UNAVAILABLE: tuple[type[BaseException], ...] = (
    ClusterDownError,
    ClusterError,
    TryAgainError,
    AskError,  # MovedError is an AskError
    SlotNotCoveredError,
)


# Redis' refusals for a state of its own (errors.StoreRefusing), by the class redis-py
# parses the reply into, then by the reply's code for those it leaves a plain
# ResponseError: the reason an operator reads, in one line. Redis' own words add
# nothing but a script's sha and line (a script's write refused mid-script).
_REFUSING_CLASSES: tuple[tuple[type[RedisError], str], ...] = (
    (
        OutOfMemoryError,
        "Redis is out of memory (maxmemory reached; maxmemory-policy noeviction refuses "
        "writes): free memory or raise maxmemory",
    ),
    (ReadOnlyError, "Redis is a read-only replica (READONLY): point --redis-url at the master"),
    (MasterDownError, "Redis is a replica whose link to its master is down (MASTERDOWN)"),
)
_REFUSING_CODES: dict[str, str] = {
    "MISCONF": "Redis cannot save to its disk and refuses writes (MISCONF): see its log",
    "NOREPLICAS": "Redis has too few replicas to accept writes (NOREPLICAS, min-replicas-to-write)",
    "BUSY": "Redis is busy running a script (BUSY)",
    # A blocking read (XREAD BLOCK) that Redis ends when its role changes.
    "UNBLOCKED": "Redis changed its role (UNBLOCKED: a master demoted to a replica?)",
}
# A reply's code: its first word, or the first after redis-py's note on a pipeline's
# failed command ("Command # 1 (…) of pipeline caused error: MISCONF …").
_REPLY_CODE = re.compile(r"(?:^|caused error: )([A-Z]+) ")


def refusal(exc: BaseException) -> str | None:
    """The reason Redis refused a command for a state of its own (errors.StoreRefusing),
    or None if ``exc`` is no such refusal."""
    for cls, reason in _REFUSING_CLASSES:
        if isinstance(exc, cls):
            return reason
    if type(exc) is ResponseError:
        found = _REPLY_CODE.search(str(exc))
        if found is not None:
            return _REFUSING_CODES.get(found.group(1))
    return None


def translate(exc: BaseException) -> StoreError:
    """A fresh store exception for ``exc`` (fresh so each waiting caller owns its own)."""
    err: StoreError
    if isinstance(exc, StoreUnavailable):
        err = type(exc)(*exc.args)
    elif (reason := refusal(exc)) is not None:
        err = StoreRefusing(reason)
    elif isinstance(exc, AuthenticationError) or (
        isinstance(exc, RedisConnectionError) and any(w in str(exc) for w in AUTH_REFUSALS)
    ):
        # Redis is up but refuses the node's password or user (changed under it: the
        # start-up check refuses it, probe.py). redis-py calls that a connection error;
        # said so, the operator looked for a Redis that did not answer.
        err = StoreUnavailable(
            f"Redis refused the node's credentials ({exc}): the password or user in "
            "--redis-url is no longer accepted"
        )
    elif isinstance(exc, _UNAVAILABLE + _CLUSTER_UNAVAILABLE):
        err = StoreUnavailable(f"redis unavailable: {type(exc).__name__}: {exc}")
    elif isinstance(exc, RedisClusterException) and "cannot be connected" in str(exc):
        err = StoreUnavailable(f"redis cluster unavailable: {exc}")
    elif isinstance(exc, NoPermissionError):
        # The user's ACL changed under a running node (start-up checks it: probe.py):
        # the store cannot serve until an operator mends it, as in an outage. Raised as
        # a plain error, every loop turn logged a traceback and counted a defect.
        err = StoreForbidden(f"redis refused the node's user (its ACL): {exc}")
    elif isinstance(exc, asyncio.CancelledError):
        err = StoreUnavailable("store flush was cancelled (store closing?)")
    elif isinstance(exc, (RedisError, RedisClusterException)):
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
def redis_errors(failed: Callable[[], None] | None = None) -> Iterator[None]:
    """Let store errors through; turn redis (and socket) errors into store errors; a
    cancelled caller gets CancelledError whatever redis-py did with it. ``failed`` is
    called when the store failed the call (StoreUnavailable: down, refusing, or
    forbidden): a store's own record of its outages (Store.failed_within).

    ``RedisClusterException`` is not a ``RedisError`` in redis-py (it is what the
    cluster client raises when no node answers, or for a cross-slot command), so it is
    caught by name."""
    try:
        yield
    except StoreUnavailable:
        if failed is not None:
            failed()
        raise
    except StoreError:
        raise
    except (RedisError, RedisClusterException, OSError) as exc:
        _still_cancelled()
        err = translate(exc)
        if failed is not None and isinstance(err, StoreUnavailable):
            failed()
        raise err from exc
    _still_cancelled()
