"""Whether the Redis behind a store keeps every key a node writes, as ``INFO`` says.

Two settings of a Redis that answers, and lets the node's user in, lose a race all
the same (the memory audit):

- a ``maxmemory-policy`` other than ``noeviction``: once ``maxmemory`` is reached,
  Redis deletes keys by itself — any key (``allkeys-*``) or any key with an expiry
  (``volatile-*``), and every key of a room carries the room's expiry, so a live
  room's too. A lost stream, move log, places counter or token hash is a race gone,
  a first place given twice, racers who cannot resume;
- a replica: it refuses every write (READONLY), so the node serves nothing; and a
  writable one would have its writes undone by its master.

Both are read from ``INFO memory`` (``maxmemory_policy``) and ``INFO replication``
(``role``, ``master_host``, ``master_port``), not ``CONFIG GET``, which managed Redis
services often forbid; on a Redis Cluster, from every master (a room lives on one).
``solrace-server`` refuses either at start (docs/server.md); at run time a policy
turned evicting is logged and reported by ``/healthz`` (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._errors import redis_errors
from .errors import StoreError, StoreForbidden, StoreUnavailable

__all__ = ["NOEVICTION", "UNKNOWN", "Eviction", "Info", "Replica", "eviction_of", "replica_among"]

#: The one ``maxmemory-policy`` that never deletes a key: writes are refused (OOM).
NOEVICTION: Final = "noeviction"
UNKNOWN: Final = "unknown"

#: What an evicting Redis risks, and the fix: start-up's refusal, the node's error.
EVICTION_ADVICE: Final = "a race's state could vanish; set maxmemory-policy noeviction"

#: ``INFO section`` of one Redis (a client's method, or a call aimed at one master).
Info = Callable[[str], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Eviction:
    """The ``maxmemory-policy`` of the Redis behind a store (on a cluster, the first
    master's that evicts, else theirs): ``noeviction``, one that evicts keys, or
    ``unknown`` (INFO refused, Redis not answering); ``detail`` says it in words;
    ``node`` is the cluster master that evicts (host:port), else empty."""

    policy: str
    detail: str
    node: str = ""

    @property
    def evicts(self) -> bool:
        """True when Redis may delete a race's keys by itself."""
        return self.policy not in (NOEVICTION, UNKNOWN)


@dataclass(frozen=True, slots=True)
class Replica:
    """``node`` (host:port; empty for a store's only Redis) is a replica of ``master``."""

    node: str
    master: str


async def _info(info: Info, section: str) -> Mapping[str, Any] | str:
    """``INFO section``, or why it could not be read (words for ``cannot check: …``)."""
    try:
        with redis_errors():
            return await info(section)
    except StoreForbidden:
        return "Redis refused INFO: this user may not run it (an ACL)"
    except StoreUnavailable:
        return "Redis does not answer"
    except StoreError as exc:
        words = str(exc).rpartition("Error: ")[2].strip()
        if "unknown command" in words.lower():
            words = "the command is disabled or renamed there"
        return f"Redis refused INFO: {words}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def eviction_of(masters: Sequence[tuple[str, Info]]) -> Eviction:
    """The eviction policy of ``masters`` ((host:port, its INFO) each; one with an
    empty name for a standalone Redis). Never raises."""
    policies: list[tuple[str, str]] = []
    for name, info in masters:
        found = await _info(info, "memory")
        where = f"master {name}: " if len(masters) > 1 else ""
        if isinstance(found, str):
            return Eviction(UNKNOWN, f"cannot check: {where}{found}")
        policy = found.get("maxmemory_policy")
        if policy is None:
            return Eviction(UNKNOWN, f"cannot check: {where}INFO memory has no maxmemory_policy")
        policies.append((name, _text(policy)))
    if not policies:
        return Eviction(UNKNOWN, "cannot check: the cluster has no master")
    for name, policy in policies:
        if policy != NOEVICTION:
            where = f"master {name}: " if len(policies) > 1 else ""
            says = f"{where}maxmemory-policy {policy}: Redis may delete a race's keys"
            return Eviction(policy, says, name)
    every = "every master: " if len(policies) > 1 else ""
    return Eviction(NOEVICTION, f"{every}maxmemory-policy noeviction: Redis never deletes a key")


async def replica_among(masters: Sequence[tuple[str, Info]]) -> Replica | None:
    """The first of ``masters`` that says it is a replica (``role:slave``), or None
    (including when INFO cannot be read: the writes will say so)."""
    for name, info in masters:
        found = await _info(info, "replication")
        if isinstance(found, str) or _text(found.get("role", "")) != "slave":
            continue
        host, port = _text(found.get("master_host", "?")), _text(found.get("master_port", "?"))
        return Replica(name, f"{host}:{port}")
    return None
