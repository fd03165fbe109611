"""Fault injection for in-process nodes: a store that fails on command, a node that
crashes at a chosen point, and a clock that can jump.

A *crash* is what a SIGKILL does to a node, seen from outside: its sockets drop
without a closing handshake, it writes nothing more (its store is dead, so not even a
"disconnected" presence), its lease stops being renewed, and the request it was
handling goes no further.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from solrace.net.server import RaceServer
from solrace.rooms.node import Node
from solrace.store import Store
from solrace.store.errors import StoreUnavailable

#: The Store methods that talk to Redis and only read (a fault test counting a
#: node's writes passes over them).
STORE_READS = frozenset(
    {
        "archive_note",
        "claimed_seat",
        "events_since",
        "handed_off",
        "heads",
        "idle_lobbies",
        "is_listed",
        "list_behind_lobbies",
        "listed_lobbies",
        "listed_rooms",
        "live_nodes",
        "load_meta",
        "load_result",
        "log_length",
        "move_log",
        "older_nodes",
        "ping",
        "quick_lobbies",
        "racer_for_token",
        "room_for_code",
        "room_nodes",
        "rooms_nodes",
        "round_ended",
        "round_over",
        "tail",
        "time_ms",
        "unarchived_rooms",
        "unlisted_lobbies",
        "version",
        "wakes",
    }
)

#: The Store methods that talk to Redis and write.
STORE_WRITES = frozenset(
    {
        "append_event",
        "append_move",
        "claim_seat",
        "clear_legacy_note",
        "clear_unarchived",
        "create_room",
        "drop_lease",
        "drop_quick",
        "expire_room",
        "forget_hand_offs",
        "forget_unlisted",
        "hand_off",
        "join_room_nodes",
        "leave_room_nodes",
        "leave_rooms",
        "mark_unarchived",
        "move_listing",
        "note_unlisted",
        "release_seat_claim",
        "renew_lease",
        "reveal_round",
        "save_meta",
        "save_result",
        "settle_expiry",
        "unlist",
        "wake",
    }
)

#: Every Store method that talks to Redis.
STORE_CALLS = tuple(sorted(STORE_READS | STORE_WRITES))

#: Store coroutines that are not calls to a room's Redis (opening, closing, checks
#: that never raise — the start-up access probe among them — a test clean-up).
NOT_STORE_CALLS = (
    "close",
    "connect",
    "delete_all",
    "durability",
    "eviction",
    "refused_access",
    "replica",
    "sibling",
    "start_embedded",
)

Hook = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


class StoreFaults:
    """Wraps one node's Store: ``down`` makes every call fail as an unreachable Redis
    would (StoreUnavailable, nothing done); ``on_append_move`` runs around the next
    move append and decides what happens."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = False
        self._move_hook: Hook | None = None
        self._move_log: str | None = None
        self._hooks: dict[str, Hook] = {}
        for name in STORE_CALLS:
            setattr(store, name, self._wrap(name, getattr(store, name)))

    def _wrap(self, name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        @functools.wraps(call)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                if name == "ping":
                    return False
                raise StoreUnavailable(f"{name}: Redis is down (injected)")
            if (
                name == "append_move"
                and self._move_hook is not None
                and (self._move_log is None or args[1] == self._move_log)
            ):
                hook, self._move_hook = self._move_hook, None
                return await hook(lambda: call(*args, **kwargs))
            hook = self._hooks.pop(name, None)
            if hook is not None:
                return await hook(lambda: call(*args, **kwargs))
            return await call(*args, **kwargs)

        return wrapper

    def on_append_move(self, hook: Hook, log: str | None = None) -> None:
        """Let ``hook`` decide the next move append (only the next one to move log
        ``log``, when given: another racer's move may come first)."""
        self._move_hook, self._move_log = hook, log

    def on_call(self, name: str, hook: Hook) -> None:
        """Let ``hook`` decide the next call of the store method ``name``."""
        assert name in STORE_CALLS, name
        self._hooks[name] = hook


#: What a rewind rewrites, in one script: a node's room check reading the keys between
#: two of its writes (the stream rebuilt halfway) saw a rewind to a version no restart
#: gives back (a CI run: "Redis is at version 2, not 12", 9 events lost, not 3).
_REWIND = """
local keep = tonumber(redis.call('GET', KEYS[1])) - tonumber(ARGV[1])
local kept = redis.call('XRANGE', KEYS[2], '-', '0-' .. keep)
redis.call('DEL', KEYS[2])
local chain
for _, entry in ipairs(kept) do
    redis.call('XADD', KEYS[2], entry[1], unpack(entry[2]))
    for i = 1, #entry[2], 2 do
        if entry[2][i] == 'c' then chain = entry[2][i + 1] end
    end
end
redis.call('SET', KEYS[1], keep)
redis.call('SET', KEYS[3], chain)
for _ = 1, tonumber(ARGV[1]) do redis.call('RPOP', KEYS[4]) end
"""


async def rewind(store: Store, room_id: str, log_name: str, n: int) -> None:
    """Make Redis hold what it would after losing its last ``n`` writes: the last n
    events (all moves of one racer, of move log ``log_name``), those n log entries,
    the version counter and the last event id go back — at once, as a restart gives
    them back (one script: the room's keys share a slot)."""
    rk = store.keys.room(room_id)
    keys = (rk.ver, rk.events, rk.chain, rk.log(log_name))
    await store._redis.eval(_REWIND, len(keys), *keys, n)  # the test rewrites the real keys


def crash(server: RaceServer, faults: StoreFaults) -> None:
    """Crash ``server``'s node now (see the module docstring). Synchronous, so it can
    run inside one of the node's own requests."""
    node = server.node
    faults.down = True
    loops = (node._tail_task, node._watch_task, node._check_task, node._wake_task, node._sweep_task)
    for task in loops:
        if task is not None:
            task.cancel()
    for room in node.rooms.values():
        if room.timer is not None:
            room.timer.cancel()
    for session in list(node.peers):
        transport = session.ws.transport
        if transport is not None:
            transport.abort()
    if server.server is not None:
        server.server.close(close_connections=False)


def fault_tail_reads(
    monkeypatch: pytest.MonkeyPatch, store: Store, master: str, fault: str
) -> tuple[asyncio.Event, list[str]]:
    """On Redis Cluster, make ``store``'s tail reads (pipelines of XREADs, Store.tail)
    sent to the master named ``master`` hang — answer nothing until the returned event
    is set, as a master stalled or cut off does until the command timeout — or fail
    (``fail``: the connection lost, as a killed master's is); every other command,
    master and store answers. Returns the release and the list each held or failed
    read adds a line to."""
    rc = store._redis  # the fault is in the store's own cluster client
    assert isinstance(rc, RedisCluster)
    original = ClusterNode.execute_pipeline
    release, faulted = asyncio.Event(), []

    async def execute_pipeline(node: ClusterNode, commands: list[Any]) -> bool:
        ours = rc.nodes_manager.nodes_cache.get(node.name) is node  # a refresh keeps it
        tail = node.name == master and commands[0].args[0] == "XREAD"
        if ours and tail and not release.is_set():
            faulted.append(fault)
            if fault == "fail":
                raise RedisConnectionError("connection lost (injected)")
            await release.wait()
        return await original(node, commands)

    monkeypatch.setattr(ClusterNode, "execute_pipeline", execute_pipeline)
    return release, faulted


class Crashed(asyncio.CancelledError):
    """Raised inside a crashed node's request: nothing after it runs."""


class Clock:
    """Wall-clock milliseconds plus an offset a test can advance: "60 s later" without
    waiting 60 s. Every node of a test shares one, as real nodes share real time."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def advance(self, seconds: float, *nodes: Node) -> None:
        """Jump ahead; each node re-arms its room timers for the new time."""
        self.offset_ms += int(seconds * 1000)
        for node in nodes:
            for room in node.rooms.values():
                node.schedule(room)
