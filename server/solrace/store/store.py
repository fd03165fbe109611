"""The :class:`Store`: every Redis command solrace sends goes through here.

The store is deliberately opaque about payloads. Events, move-log entries, room
metadata and results are ``bytes`` encoded by the caller (msgpack); the store only
orders, numbers and atomically appends them. That keeps the game rules and the wire
protocol out of Lua, where they could not be tested with the rest of the code.

Writes that must be atomic across keys (append an event with a gap-free version,
append a move under its sequence number, hand out finishing places) are Lua scripts on
keys that share the room's hash tag, so they stay atomic on Redis Cluster. See
``docs/store.md`` for the layout and the argument for each script.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import hmac
import importlib.util
import itertools
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

import redis.asyncio
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, SlotNotCoveredError
from redis.exceptions import TimeoutError as RedisTimeoutError

from solrace.digits import is_digits

from ._cluster import cluster_client, is_cluster_url
from ._commit import GroupCommit
from ._errors import redis_errors, translate
from ._link import RespLink
from ._lua import (
    APPEND_EVENT,
    APPEND_MOVE,
    CLEAR_ARCHIVE_NOTE,
    CLOCK,
    EXPIRE_CODE,
    EXPIRE_ROOM,
    JOIN_ROOM_NODES,
    REVEAL_ROUND,
    ROUND_ENDED,
    SCRIPT_LOADS,
    SETTLE_EXPIRY,
    LuaScript,
)
from ._resp import speed_up
from .embedded import EmbeddedEngine
from .errors import (
    CodeTaken,
    HeadLost,
    StoreClosed,
    StoreError,
    StoreForbidden,
    StoreUnavailable,
    VersionConflict,
)
from .keeping import NOEVICTION, UNKNOWN, Eviction, Info, Replica, eviction_of, replica_among
from .keys import Keys
from .probe import AccessRefused, access_refused

__all__ = [
    "Durability",
    "Finish",
    "Listing",
    "MoveAppend",
    "Store",
    "StoredEvent",
    "TailRead",
    "Trim",
]

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
#: Racers whose move-append key names are kept ready (a live racer's every move needs
#: the same six names; built and checked once instead of per move).
_MOVE_KEYS_CACHED = 4096


@functools.lru_cache(maxsize=_MOVE_KEYS_CACHED)
def _move_keys(keys: Keys, room_id: str, log_name: str) -> tuple[str, ...]:
    """The keys of ``append_move.lua`` but those of a finish (places, finish_at), in
    its order."""
    rk = keys.room(room_id)
    return (
        rk.meta,
        rk.ver,
        rk.events,
        rk.keyset,
        rk.log(log_name),
        rk.chain,
        rk.over,
        rk.closed,
    )


#: Entries a node's wake-up stream keeps (Store.wake); it only needs the unread ones.
WAKE_KEEP = 1000
#: A wake-up stream expires this long after its last entry.
WAKE_TTL_MS = 24 * 3600 * 1000


class StoredEvent(NamedTuple):
    """One entry of a room's event stream.

    ``chain`` is the event's own random id and ``prev`` the id of the event before it
    (``lib.lua``): a reader that folded an event with id X and next reads one whose
    ``prev`` is not X knows the stream lost what it had read.
    """

    version: int
    data: bytes
    prev: str = ""
    chain: str = ""


@dataclass(frozen=True)
class TailRead:
    """What one :meth:`Store.tail` read: the events, and the rooms it could not read.

    Only on Redis Cluster is a read partial: a master that hangs or fails holds back
    its own rooms, not the others' (docs/store.md, "Redis Cluster"). On one Redis (or
    the embedded engine) a read is whole or raises."""

    #: ``(room_id, event)`` in version order per room.
    entries: list[tuple[str, StoredEvent]]
    #: Rooms whose master did not answer this read: its read failed, is still out (a
    #: master that hangs, until the command timeout) or rests after failing. Read
    #: again at the next call, from the positions given then.
    unread: frozenset[str] = frozenset()
    #: Why a master's read failed during this call, if one did (its rooms are unread).
    failed: StoreUnavailable | None = None


@dataclass(frozen=True, slots=True)
class _MasterPoll:
    """One cluster master's share of a :meth:`Store.tail` call: what each of its polls
    reads (Store._tail_master, Store._read_master)."""

    rc: RedisCluster
    #: The master's node name (host:port), the key of its rest and its read in flight.
    name: str
    node: ClusterNode
    #: Its streams' keys by hash slot: one XREAD per slot.
    slots: dict[int, list[str]]
    #: Every stream of the call and the entry id it is read after.
    streams: dict[str, str]
    count: int | None


class SeatClaim(NamedTuple):
    """Where a client-proposed token is being seated, and since when (Store.claim_seat)."""

    room_id: str
    at_ms: int


class MoveAppend(NamedTuple):
    """Outcome of :meth:`Store.append_move`.

    A named tuple, not a frozen dataclass: made on every move, and a frozen
    dataclass's ``__init__`` sets each of its 11 fields through ``object.__setattr__``
    (about 1,300 instructions a field on Python 3.11; docs/performance.md, round 27).

    ``accepted`` False means nothing was written: ``log_length`` is then the log's
    current length, i.e. the sequence number the next move must carry — unless
    ``finish_floor`` is set: then the sequence number was right but a finish stored
    before this one has a later time (another node's clock, a slower commit), and the
    move must be offered again with a finish time of at least ``finish_floor``, so
    that places and finish times always agree. When accepted,
    ``log_length`` is the new length, ``version`` the room version of the appended
    event and ``place`` the finishing place if a ``finish_counter`` was given.
    """

    accepted: bool
    log_length: int
    version: int | None
    place: int | None
    #: Event ids (see StoredEvent): of the event before the progress event, of the
    #: progress event, and of the finished event ("" when there is none).
    links: tuple[str, str, str] = ("", "", "")
    #: Refused for its finish time: the earliest time this finish may be given.
    finish_floor: int | None = None
    #: Refused because the move's round has its ``race_over`` stored.
    race_over: bool = False
    #: Refused because the log is closed: its racer's race is over (finished,
    #: resigned, timed out, gone past the grace), whatever the caller's copy of the
    #: room said.
    log_closed: bool = False
    #: Refused because the room's meta key is gone: Redis lost the room whole (a
    #: restart without persistence, an eviction, an operator's DEL). Nothing written:
    #: keys written then had no TTL to inherit and stayed in Redis for ever.
    room_gone: bool = False
    #: For an accepted finish on a cluster whose master has a replica: how many
    #: replicas held it when it was answered (0: none within REPLICA_WAIT_MS, so a
    #: failover now could lose it). None when there was no replica to ask.
    replicas: int | None = None
    #: Accepted after restoring the room's version or chain key from its stream:
    #: what Redis had lost ("" if nothing), a lost write the caller announces.
    head_lost: str = ""

    @property
    def finished_version(self) -> int | None:
        """The version of the ``finished`` event written with the move, if any."""
        if self.place is None or self.version is None:
            return None
        return self.version + 1


#: The stored formats this release reads and writes, as a number its nodes' leases
#: hold (Store.renew_lease), so that a node can tell a live node of an earlier
#: release on its store (Store.older_nodes). Releases before the number was written
#: wrote 1 in their leases; 2 is the first to write it. Raise it when a stored format
#: changes in a way an earlier release cannot read (docs/deploy.md, "Upgrading").
STORE_FORMAT: Final = 2


@dataclass(frozen=True, slots=True)
class Trim:
    """What an event that begins a round lets go of (:meth:`Store.append_event`):
    the stream before ``before_version``, the logs, place counters and finish times of
    the rounds before ``first_round`` (with their closed marks), and the token of every
    racer but ``racers`` (the room's racers as the rematch is decided, those it drops
    too): a racer who left
    before it can no longer resume, and a room rematched for ever kept the digest of
    every racer it had ever had, all read by each join and resume (a resource audit)."""

    before_version: int
    first_round: int
    racers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Finish:
    """What :meth:`Store.append_move` needs when a move finishes the racer's game.

    ``counter`` names the finishing-place counter (one per round); ``events[i]`` is
    the ``finished`` event to store if the racer gets place ``i + 1``. The place is
    only known inside the script, so the caller offers one event per possible place
    and the script stores the right one in the same atomic step as the move.
    ``at_ms`` is the finish time the events carry (race clock): the script refuses it
    if an earlier place was given a later one (:attr:`MoveAppend.finish_floor`).
    """

    counter: str
    events: tuple[bytes, ...]
    at_ms: int

    def __post_init__(self) -> None:
        if not self.events:
            raise ValueError("a Finish needs the finished event for at least place 1")
        _check_nonneg("at_ms", self.at_ms)


DurabilityLevel = Literal["aof-always", "aof-everysec", "aof-no", "none", "unknown"]

#: Weakest first: on a cluster the deployment keeps what its weakest master keeps.
_STRENGTH: dict[str, int] = {
    "unknown": 0,
    "none": 1,
    "aof-no": 2,
    "aof-everysec": 3,
    "aof-always": 4,
}


@dataclass(frozen=True, slots=True)
class Durability:
    """What the Redis behind a store promises about acknowledged writes.

    ``level`` is ``aof-always`` (an acknowledged move survives a Redis crash: the
    AOF is fsynced before Redis replies), ``aof-everysec`` (a crash of the Redis
    *host* may lose about the last second), ``aof-no`` (the OS decides when the AOF
    reaches the disk), ``none`` (no AOF: a restart goes back to the last snapshot,
    if any; also the fakeredis test double) or ``unknown`` (Redis refused ``CONFIG GET`` —
    a managed Redis — or did not answer). ``detail`` says why, in words.
    See docs/deploy.md, "Durability".
    """

    level: DurabilityLevel
    detail: str

    @property
    def keeps_promise(self) -> bool:
        """True only when an acknowledged move survives a Redis crash."""
        return self.level == "aof-always"


def _ttl_ms(ttl_s: float) -> int:
    """An expiry in the milliseconds Redis takes; refuses none or a negative one."""
    ttl_ms = int(ttl_s * 1000)
    if ttl_ms <= 0:
        raise ValueError("ttl_s must be positive")
    return ttl_ms


def _why_refused(exc: StoreError) -> str:
    """Why a Redis refused ``CONFIG GET``, in words: Redis' own reply to a renamed
    command ("unknown command 'CONFIG', with args beginning with: 'GET' 'appendonly' ")
    read, cut at its last colon, as a garbled "('GET' 'appendonly' )"."""
    text = str(exc)
    if "unknown command" in text.lower():
        return "the command is disabled or renamed there (managed services often do)"
    return text.rpartition("Error: ")[2].strip() or "refused"


def _config_value(reply: Any, name: str) -> str | None:
    """``CONFIG GET name`` → its value (a dict in redis-py; bytes or str values)."""
    if not isinstance(reply, dict):
        return None
    for key, value in reply.items():
        if _as_text(key) == name:
            return _as_text(value)
    return None


#: What a room's listing score (its creation time, ms) loses once its race begins: more
#: than any creation time, so every race sorts behind every lobby.
RUNNING_LISTING_OFFSET_MS: Final = 10**14
#: What it loses while it is a lobby whose every racer is offline (its creator hung up):
#: more again, so such a lobby sorts behind every race, out of the lobbies ``quick``
#: reads (a hundred junk lobbies, each from a connection that sent ``create`` and hung
#: up, hid a quick room waiting for its fourth racer: an audit).
IDLE_LISTING_OFFSET_MS: Final = 2 * 10**14


class Listing(enum.IntEnum):
    """Where a listed room sorts (:meth:`Store.move_listing`), by what its creation time
    loses: a lobby with someone in it, a race under way, a lobby nobody is in."""

    LOBBY = 0
    RACE = RUNNING_LISTING_OFFSET_MS
    IDLE = IDLE_LISTING_OFFSET_MS


#: How long a store waits for one command's answer before it calls the store failed
#: (``StoreUnavailable``): the default of every way to open a store. Decisions that
#: wait on several calls are bounded by multiples of it (a seat's settle window,
#: protocol.limits.SEAT_SETTLE_S; a node's lease).
COMMAND_TIMEOUT_S: Final = 5.0

#: How long a reader leaves the store alone after a read of it failed: a node's loops
#: (tail, wake-ups, sweeps: solrace.rooms.node) before they read again, and ``tail``
#: one Cluster master (its rooms unread meanwhile: the other masters' rooms are read
#: on, and a master refusing connections is not asked, nor the slot map fetched again,
#: at every call). One figure for both: they were two constants of the same value.
RETRY_AFTER_FAILURE_S: Final = 0.5


#: Connections a store opens to Redis at most, for commands (and as many for blocking
#: reads). A command past them waits for one to come free, up to the store's timeout.
#: redis-py's own pool refuses the command instead ("Too many connections"), which a
#: node took for an outage: 50 of 150 concurrent ``leave``s were answered
#: ``unavailable`` by a healthy Redis (tests/store/test_unavailable.py).
POOL_CONNECTIONS: Final = 100


def _client(url: str, timeout: float, *, socket_timeout: float | None) -> redis.asyncio.Redis:
    """A client on a pool of :data:`POOL_CONNECTIONS` whose commands wait for a free
    connection (``timeout`` at most, then StoreUnavailable) rather than fail."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        max_connections=POOL_CONNECTIONS,
        timeout=timeout,
        decode_responses=False,
        socket_timeout=socket_timeout,
        socket_connect_timeout=timeout,
        retry=_no_retry(),
    )
    return redis.asyncio.Redis.from_pool(pool)


def _no_retry() -> Retry:
    # redis-py retries failed commands by default (10 times here). Retrying a script
    # whose reply was lost would re-run it: the retry of an applied move would come
    # back "stale" and the caller would reject a move that is in the log. Failing fast
    # with StoreUnavailable ("outcome unknown, re-read") is the honest answer.
    return Retry(NoBackoff(), 0)


def _as_bytes(value: bytes | str | None) -> bytes | None:
    """Replies are bytes (decode_responses=False); typed as either by redis-py."""
    if value is None or isinstance(value, bytes):
        return value
    return value.encode()


def _as_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _version_of(entry_id: Any) -> int:
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.partition("-")[2])


def _entry_of(entry_id: Any, fields: Any) -> StoredEvent:
    if not isinstance(fields, dict):  # flat [field, value, ...] list
        fields = dict(zip(fields[::2], fields[1::2], strict=True))
    value = fields.get(b"e")
    if not isinstance(value, bytes):
        raise StoreError("malformed stream entry")
    prev, chain = fields.get(b"p", b""), fields.get(b"c", b"")
    return StoredEvent(_version_of(entry_id), value, _as_text(prev), _as_text(chain))


def _xread_streams(reply: Any) -> list[tuple[Any, list[Any]]]:
    """``(stream key, entries)`` pairs from an XREAD reply, whatever the protocol.

    RESP2: ``[[key, entries], ...]``; RESP3: ``{key: entries}``, and redis-py's legacy
    RESP3 shape wraps each value once more, ``{key: [entries]}``. Decoding all three
    keeps the store correct whatever ``protocol=`` the URL asks for.
    """
    if not reply:
        return []
    if not isinstance(reply, dict):
        return [(key, list(entries or [])) for key, entries in reply]
    pairs: list[tuple[Any, list[Any]]] = []
    for key, value in reply.items():
        entries = list(value or [])
        if entries and isinstance(entries[0], list):  # legacy wrap; an entry is a tuple
            entries = [e for inner in entries for e in inner]
        pairs.append((key, entries))
    return pairs


#: This process's part of every event id it makes: random, drawn once (a system call per
#: event was 2 % of a move's cost), so no two processes — nor two runs of one — share it.
_EVENT_ID_PREFIX = secrets.token_hex(6)
_event_serial = itertools.count()


def new_event_id() -> str:
    """A new event's id, linking the stream (StoredEvent): unique — a random prefix per
    process and a counter — so an event appended after Redis lost writes never carries
    the id of one that was lost; and an append whose reply was lost can be told from
    another append of the same bytes (Store.append_event's ``event_id``)."""
    return f"{_EVENT_ID_PREFIX}{next(_event_serial):x}"


def _retrieved(task: asyncio.Task[Any]) -> None:
    """Take a finished task's exception, so that asyncio does not log it as "never
    retrieved" (a tail read whose call had returned: the next call reads again)."""
    if not task.cancelled():
        task.exception()


def _check_round(round_no: int) -> int:
    """Rounds count from 1 (0 would read as "no round is over" in the scripts)."""
    if round_no < 1:
        raise ValueError(f"round_no must be >= 1, not {round_no}")
    return round_no


def _check_token(racer_id: str, token_sha256_hex: str) -> tuple[str, str]:
    """A racer's token as stored: its SHA-256 (hex); anything that is not 64 lowercase
    hex digits is refused, so a raw token cannot be stored by mistake."""
    if not isinstance(token_sha256_hex, str) or not _SHA256_HEX.fullmatch(token_sha256_hex):
        raise ValueError("token must be given as a lowercase sha256 hex digest")
    if not racer_id:
        raise ValueError("racer_id must be non-empty")
    return racer_id, token_sha256_hex


def _check_nonneg(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0")


class Store:
    """Room state in Redis: metadata, event streams, move logs, places, tokens.

    Build one with :meth:`connect` (a Redis URL), :meth:`start_embedded` (a private engine on
    a data directory) or, in tests, :meth:`fake`. One instance per process (per event loop) is
    meant to be shared by every room on the node: the group commit only batches calls
    made on the same instance.
    """

    def __init__(
        self,
        client: Redis | RedisCluster,
        blocking_client: Redis | RedisCluster,
        *,
        prefix: str = "solrace:",
        embedded: bool = False,
        timeout: float = COMMAND_TIMEOUT_S,
        url: str | None = None,
        fake_server: Any = None,
        max_batch: int = 1024,
        tail_poll_ms: int = 10,
    ) -> None:
        """Wrap two redis.asyncio clients; prefer :meth:`connect`.

        ``client`` carries every command; ``blocking_client`` only blocking XREADs, on
        its own connections, so a node's fan-out loop never sits on a connection the
        command path needs. On Redis Cluster both are ``RedisCluster`` clients (they
        may be the same one: ``tail`` polls there instead of blocking, every
        ``tail_poll_ms``; see :meth:`tail`).
        """
        self._redis = client
        self._blocking = blocking_client
        self.keys = Keys(prefix)
        self.embedded = embedded
        """True when this process runs the store's engine itself: the embedded
        valkey-server (:meth:`start_embedded`) or the fakeredis test double (:meth:`fake`)."""
        self._timeout = timeout
        #: When (time.monotonic) the store last failed a call: down, refusing or
        #: forbidden (StoreUnavailable); None: never. Any call, whoever made it.
        self._failed_at: float | None = None
        self._url = url
        self._fake_server = fake_server
        #: The private engine this store runs on (:meth:`start_embedded`), released by close().
        self.engine: EmbeddedEngine | None = None
        self._commit = GroupCommit(
            client,
            max_batch=max_batch,
            link=(
                RespLink.for_pool(client.connection_pool)
                if fake_server is None and not isinstance(client, RedisCluster)
                else None
            ),
        )
        self._tail_poll_s = tail_poll_ms / 1000
        #: Redis Cluster: each master's tail read still out (a master that hangs; one a
        #: call that returned left), by master name: a master is read once at a time.
        self._tail_reads: dict[str, asyncio.Task[list[tuple[Any, list[Any]]]]] = {}
        #: Redis Cluster: until when (loop time) a master whose tail read failed rests.
        self._tail_rests: dict[str, float] = {}
        #: Redis Cluster: masters set aside until they answer a tail read again: one
        #: whose read failed, or that held a call past its ``block_ms`` without a first
        #: answer (a master that hangs). Their reads hold no call.
        self._tail_aside: set[str] = set()
        self._closed = False
        self._durability: tuple[float, Durability] | None = None
        self._eviction: tuple[float, Eviction] | None = None

    def __repr__(self) -> str:
        if self._fake_server is not None:
            backend = "fake (not durable)"
        elif self.cluster:
            backend = "redis cluster"
        else:
            backend = "embedded" if self.embedded else "redis"
        return f"<Store {backend} prefix={self.keys.prefix!r}>"

    @property
    def cluster(self) -> bool:
        """True when the store runs on Redis Cluster (a ``redis+cluster://`` URL)."""
        return isinstance(self._redis, RedisCluster)

    # -- construction --------------------------------------------------------------

    @classmethod
    async def connect(
        cls, url: str, prefix: str = "solrace:", *, timeout: float = COMMAND_TIMEOUT_S
    ) -> Store:
        """A store on Redis at ``url``.

        Does not contact Redis (connections are made on first use); call
        :meth:`ping` to check reachability. ``timeout`` bounds connecting and every
        non-blocking command, so a dead or hung Redis surfaces as StoreUnavailable
        instead of a hang. Options in the URL's query string override it.

        ``redis+cluster://host:port[,host:port…]`` (or ``rediss+cluster://``) is a Redis
        Cluster (:mod:`solrace.store._cluster`): one ``RedisCluster`` client, with the
        same no-retry policy, serves commands and ``tail``. A malformed URL raises
        ValueError, as redis-py does for a bad ``redis://`` URL.
        """
        if not url:  # None once meant fakeredis; a silent fallback would hide a missing URL
            raise ValueError("Store.connect needs a Redis URL (else Store.start_embedded)")
        if is_cluster_url(url):
            rc = cluster_client(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=_no_retry(),
            )
            return cls(rc, rc, prefix=prefix, timeout=timeout, url=url)
        client = _client(url, timeout, socket_timeout=timeout)
        # No socket timeout on the blocking connection: XREAD BLOCK legitimately waits
        # longer than any command timeout. tail() bounds the wait itself.
        blocking = _client(url, timeout, socket_timeout=None)
        for pool in (client.connection_pool, blocking.connection_pool):
            speed_up(pool)
        return cls(client, blocking, prefix=prefix, timeout=timeout, url=url)

    @classmethod
    async def start_embedded(
        cls,
        data_dir: str | os.PathLike[str],
        prefix: str = "solrace:",
        *,
        timeout: float = COMMAND_TIMEOUT_S,
    ) -> Store:
        """A store on a private valkey-server this process starts on ``data_dir``
        (:mod:`solrace.store.embedded`: Unix socket, AOF fsynced on every write), so
        state survives a restart on the same directory. The engine stops when the
        store (and every :meth:`sibling`) is closed. Raises ``EngineError`` (and its
        ``DataDirUnusable`` / ``DataDirBusy``) with a one-line message."""
        engine = await EmbeddedEngine.start(data_dir)
        try:
            store = await cls.connect(engine.url, prefix, timeout=timeout)
        except BaseException:
            await engine.release()
            raise
        store.embedded, store.engine = True, engine
        return store

    @classmethod
    def fake(cls, prefix: str = "solrace:", *, timeout: float = COMMAND_TIMEOUT_S) -> Store:
        """The test double: this class and its Lua scripts on an in-process fakeredis
        server. Never durable, never a default; for tests that need what a real engine
        cannot give (e.g. a switchable outage). Needs the ``test`` extra (fakeredis[lua])."""
        try:
            import fakeredis
        except ImportError:
            raise RuntimeError("Store.fake() needs fakeredis[lua] (the test extra)") from None
        return cls._on_fake_server(fakeredis.FakeServer(), prefix, timeout)

    @classmethod
    def _on_fake_server(cls, server: Any, prefix: str, timeout: float) -> Store:
        # fakeredis runs Lua through lupa; without it every script would fail at the
        # first move, so say so at once instead.
        if importlib.util.find_spec("lupa") is None:
            raise RuntimeError("Store.fake() needs fakeredis[lua] (the lupa package)")
        import fakeredis.aioredis

        def client() -> Redis:
            fake: Redis = fakeredis.aioredis.FakeRedis(server=server, retry=_no_retry())
            return fake

        return cls(
            client(),
            client(),
            prefix=prefix,
            embedded=True,
            timeout=timeout,
            fake_server=server,
        )

    async def sibling(self) -> Store:
        """Another store on the same backend, as a second node would have.

        Same Redis URL (or the same embedded engine or fake server) and prefix, but
        its own connections and its own group-commit queue. Lets tests, and an
        embedded multi-node setup, exercise cross-node behaviour in one process.
        """
        if self._fake_server is not None:
            return self._on_fake_server(self._fake_server, self.keys.prefix, self._timeout)
        assert self._url is not None
        sibling = await self.connect(self._url, self.keys.prefix, timeout=self._timeout)
        if self.engine is not None:  # the engine stops when the last of them closes
            sibling.embedded, sibling.engine = True, self.engine.share()
        return sibling

    async def close(self) -> None:
        """Flush what is queued, then close both clients. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for read in self._tail_reads.values():
            read.cancel()
        try:
            await self._commit.close()
        finally:
            try:
                await self._redis.aclose()
                if self._blocking is not self._redis:
                    await self._blocking.aclose()
            finally:
                if self.engine is not None:
                    await self.engine.release()

    def _refuse_closed(self) -> None:
        """Raise :class:`StoreClosed` once the store is closed: every write method's
        first act (moves: the group commit's), and every read's (:meth:`_errors`)."""
        if self._closed:
            raise StoreClosed

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """:func:`redis_errors`, noting a failure's time (:meth:`failed_within`). A call
        on a closed store is refused at once (:class:`StoreClosed`): redis-py reconnects
        a closed client, so a read ran, and on a cluster reconnecting to every master
        held a write retried after the node stopped (its decision reads first) past
        the node's end. One failing once the store is closed (the embedded engine's
        socket is gone with it) is StoreClosed too, so that no caller retries it as an
        outage."""
        self._refuse_closed()
        try:
            with redis_errors(self._note_failure):
                yield
        except StoreUnavailable as exc:
            if self._closed and not isinstance(exc, StoreClosed):
                raise StoreClosed from exc
            raise

    def _note_failure(self) -> None:
        self._failed_at = time.monotonic()

    def failed_within(self, seconds: float) -> bool:
        """Whether a call to this store failed (StoreUnavailable) in the last
        ``seconds``: any call, a request's or a loop's, a read or a write. A node's
        own flag (Node.store_down) is cleared by the next read that answers, so a
        Redis that answers reads and refuses every write looked up to an operator."""
        at = self._failed_at
        return at is not None and time.monotonic() - at < seconds

    @property
    def timeout_s(self) -> float:
        """How long one command may take before it counts as failed (StoreUnavailable)."""
        return self._timeout

    async def ping(self) -> bool:
        """True if Redis answers; never raises for an unreachable Redis."""
        try:
            with self._errors():
                return bool(await self._redis.ping())
        except StoreUnavailable:
            return False

    async def refused_access(self) -> AccessRefused | None:
        """The first thing this node needs of Redis that its user may not do (an ACL:
        keys under the prefix, streams, Lua scripts), or None. A start-up check
        (:func:`solrace.store.probe.access_refused`): PING passes whatever the ACL,
        and a node that started anyway failed every loop turn on NOPERM. It writes one
        key under the prefix and deletes it."""
        self._refuse_closed()
        key = self.keys.probe(secrets.token_hex(8))
        return await access_refused(self._redis, key, self.keys.prefix)

    async def durability(self, max_age_s: float = 0.0) -> Durability:
        """What this store's Redis promises about acknowledged writes (:class:`Durability`).

        Asks ``CONFIG GET appendonly`` and ``appendfsync``; never raises. A Redis that
        refuses CONFIG (managed services often do) gives ``unknown``, as does one that
        does not answer. An answer younger than ``max_age_s`` is reused (``/healthz``
        asks on every probe).
        """
        now = time.monotonic()
        if self._durability is not None and now - self._durability[0] < max_age_s:
            return self._durability[1]
        found = await self._check_durability()
        if found.level != "unknown" or self._durability is None:
            self._durability = (now, found)
        else:  # keep a known answer through an outage, but ask again next time
            self._durability = (now - max_age_s, found)
        return found

    async def eviction(self, max_age_s: float = 0.0) -> Eviction:
        """Whether this store's Redis may delete a race's keys by itself (its
        ``maxmemory-policy``, from INFO: :mod:`solrace.store.keeping`); never raises.
        An answer younger than ``max_age_s`` is reused, as :meth:`durability` does."""
        now = time.monotonic()
        if self._eviction is not None and now - self._eviction[0] < max_age_s:
            return self._eviction[1]
        if self._fake_server is not None:
            found = Eviction(NOEVICTION, "fakeredis test double: never deletes a key")
        else:
            try:
                found = await eviction_of(await self._masters())
            except StoreError:
                found = Eviction(UNKNOWN, "cannot check: the cluster does not answer")
        self._eviction = (now, found)
        return found

    @property
    def last_eviction(self) -> Eviction | None:
        """The last answer of :meth:`eviction`, without asking (None: never asked):
        what ``/healthz`` says while Redis does not answer, instead of waiting out
        the store's timeout on INFO."""
        return None if self._eviction is None else self._eviction[1]

    async def replica(self) -> Replica | None:
        """The Redis (on a cluster: the master) of this store that is a replica, or
        None: a start-up check (``solrace-server`` refuses one); never raises."""
        if self._fake_server is not None:
            return None
        try:
            return await replica_among(await self._masters())
        except StoreError:
            return None

    async def _masters(self) -> list[tuple[str, Info]]:
        """(host:port, its INFO) of the Redis this store writes to: on a cluster every
        master, else its one Redis (no name). StoreError if the cluster does not say."""
        if not isinstance(self._redis, RedisCluster):
            return [("", self._redis.info)]
        rc = self._redis
        with self._errors():
            await rc.initialize()
        masters: list[tuple[str, Info]] = []
        for node in sorted(rc.get_primaries(), key=lambda n: n.name):

            async def info(section: str, node: ClusterNode = node) -> Mapping[str, Any]:
                found: Mapping[str, Any] = await rc.info(section, target_nodes=node)
                return found

            masters.append((node.name, info))
        return masters

    async def _check_durability(self) -> Durability:
        if self._fake_server is not None:
            return Durability("none", "fakeredis test double: state lives only in memory")
        if isinstance(self._redis, RedisCluster):
            return await self._check_cluster_durability(self._redis)
        return await self._check_node_durability(self._redis.config_get)

    async def _check_cluster_durability(self, rc: RedisCluster) -> Durability:
        """The weakest promise of the cluster's masters: a room lives on one master, so
        the deployment keeps only the promise every master keeps."""
        try:
            with self._errors():
                await rc.initialize()
                primaries = sorted(rc.get_primaries(), key=lambda n: n.name)
        except StoreUnavailable:
            return Durability("unknown", "cannot check: the cluster does not answer")
        except StoreError as exc:
            return Durability("unknown", f"cannot check: {exc}")
        found: list[tuple[int, str, Durability]] = []
        for node in primaries:

            async def config_get(name: str, node: ClusterNode = node) -> Any:
                return await rc.config_get(name, target_nodes=node)

            level = await self._check_node_durability(config_get)
            found.append((_STRENGTH[level.level], node.name, level))
        if not found:
            return Durability("unknown", "cannot check: the cluster has no master")
        _, name, weakest = min(found)
        if all(d.level == weakest.level for _, _, d in found):
            return Durability(weakest.level, f"every master: {weakest.detail}")
        return Durability(weakest.level, f"master {name}: {weakest.detail}")

    async def _check_node_durability(
        self, config_get: Callable[[str], Awaitable[Any]]
    ) -> Durability:
        """One Redis' promise, asking it with ``config_get`` (a client's method, or a
        call aimed at one cluster master)."""
        try:
            with self._errors():
                appendonly = _config_value(await config_get("appendonly"), "appendonly")
                fsync = _config_value(await config_get("appendfsync"), "appendfsync")
        except StoreForbidden:  # NOPERM: the user's ACL
            return Durability(
                "unknown",
                "cannot check: Redis refused CONFIG GET: this user may not run it (an ACL)",
            )
        except StoreUnavailable:
            return Durability("unknown", "cannot check: Redis does not answer")
        except StoreError as exc:
            return Durability(
                "unknown", f"cannot check: Redis refused CONFIG GET: {_why_refused(exc)}"
            )
        if appendonly is None or fsync is None:
            return Durability("unknown", "cannot check: CONFIG GET did not name appendonly")
        if appendonly != "yes":
            return Durability("none", "appendonly no: no AOF")
        if fsync == "always":
            return Durability("aof-always", "AOF fsynced before every reply")
        if fsync == "everysec":
            return Durability("aof-everysec", "AOF fsynced once a second")
        return Durability("aof-no", f"AOF with appendfsync {fsync}: the OS decides when")

    # -- group-commit counters ----------------------------------------------------

    @property
    def flushes(self) -> int:
        """Group-commit batches sent so far (for tests and metrics)."""
        return self._commit.flushes

    @property
    def flushed_moves(self) -> int:
        """Moves sent in those batches; ``flushed_moves / flushes`` is the batch size."""
        return self._commit.flushed_calls

    # -- rooms ---------------------------------------------------------------------

    async def create_room(
        self,
        room_id: str,
        code: str,
        meta: bytes,
        listed: bool,
        now_ms: int,
        ttl_s: float | None = None,
        *,
        quick: str | None = None,
    ) -> None:
        """Claim ``code`` for a new room, store its meta and maybe list it; with
        ``ttl_s``, the room's lifetime cap is set by the same writes (every key the room
        writes later inherits it from the meta), so no fault can leave a room that never
        expires (a node killed between the create and a separate expiry did).

        The code is claimed first with SET NX: that is the only contended step (two
        rooms drawing the same code), and losing it raises CodeTaken with nothing else
        written. Then the room's keys, and only then the listing (a listed room is
        never one whose meta is not written yet). If either step fails, the code is
        released on a best-effort basis. ``room_id``
        must be fresh (the caller draws it at random); it is not checked. ``quick``:
        the variant of a listed quick room, which joins that variant's quick lobbies
        (:meth:`quick_lobbies`) in the same pipeline. A room not ``listed`` (private)
        is noted among the unlisted lobbies (:meth:`note_unlisted`) at that step
        instead, for the orphan sweep: its only way to find it.
        """
        self._refuse_closed()
        rk = self.keys.room(room_id)
        code_key = self.keys.code(code)
        px = None if ttl_s is None else _ttl_ms(ttl_s)
        with self._errors():
            if not await self._redis.set(code_key, room_id, nx=True, px=px):
                raise CodeTaken(code)
            try:
                pipe = self._redis.pipeline(transaction=False)
                pipe.set(rk.meta, meta, px=px)
                pipe.set(rk.code, code, px=px)
                await pipe.execute()
                if listed:
                    # Once the room's keys are written: a listed room whose meta is
                    # gone is one whose keys expired, and is unlisted (``list``, the
                    # orphan sweep). In one pipeline, a Cluster's masters applied
                    # their parts at once, the listing's maybe first, and a room read
                    # there was unlisted for good as it was being created.
                    pipe = self._redis.pipeline(transaction=False)
                    pipe.zadd(self.keys.listed, {room_id: now_ms})
                    if quick is not None:
                        pipe.zadd(self.keys.quick(quick), {room_id: now_ms})
                    await pipe.execute()
                else:
                    # Of no round past any the sweep reads (0): a rematch notes the
                    # round it begins (note_unlisted).
                    await self._redis.zadd(self.keys.unlisted, {room_id: 0}, gt=True)
            except BaseException:
                with contextlib.suppress(Exception):  # best effort; the first error matters
                    await self._redis.delete(code_key)
                raise

    async def load_meta(self, room_id: str) -> bytes | None:
        """The room's metadata bytes, or None if the room does not exist (or expired)."""
        with self._errors():
            return _as_bytes(await self._redis.get(self.keys.room(room_id).meta))

    async def save_meta(self, room_id: str, meta: bytes) -> None:
        """Overwrite the room's metadata, keeping its TTL if it is expiring (KEEPTTL)."""
        self._refuse_closed()
        with self._errors():
            await self._redis.set(self.keys.room(room_id).meta, meta, keepttl=True)

    async def room_for_code(self, code: str) -> str | None:
        """The room a join code names, or None."""
        with self._errors():
            value = await self._redis.get(self.keys.code(code))
        return None if value is None else _as_text(value)

    async def listed_rooms(self, limit: int = 100) -> list[str]:
        """Listed open rooms: lobbies newest first, then races under way newest first
        (:meth:`list_behind_lobbies`)."""
        if limit <= 0:
            return []
        with self._errors():
            members: list[Any] = await self._redis.zrevrange(self.keys.listed, 0, limit - 1)
        return [_as_text(m) for m in members]

    async def listed_lobbies(self, limit: int = 100) -> list[str]:
        """The listed rooms whose race has not begun, newest first (a room whose
        :meth:`list_behind_lobbies` Redis failed is among them: callers check)."""
        if limit <= 0:
            return []
        with self._errors():
            members: list[Any] = await self._redis.zrevrangebyscore(
                self.keys.listed, "+inf", 0, start=0, num=limit
            )
        return [_as_text(m) for m in members]

    async def list_behind_lobbies(
        self, room_id: str, created_ms: int, *, quick: str | None = None
    ) -> None:
        """Move a listed room whose race has begun behind every lobby in the listing
        (newest first among races too), so the lobbies a ``list`` or ``quick`` looks
        for come first; a room no longer listed stays unlisted (``XX``)."""
        await self.move_listing(room_id, created_ms, Listing.RACE, quick=quick)

    async def move_listing(
        self, room_id: str, created_ms: int, listing: Listing, *, quick: str | None = None
    ) -> None:
        """Sort a listed room as ``listing`` says: lobbies newest first, then races, then
        lobbies nobody is in (each newest first); a room no longer listed stays unlisted
        (``XX``: a late move cannot list again a room that closed, or began a rematch).
        ``quick``: a quick room's variant, whose quick lobbies it leaves, or joins again
        as a lobby if it is still listed (the caller checks what it reads there)."""
        self._refuse_closed()
        with self._errors():
            await self._redis.zadd(self.keys.listed, {room_id: created_ms - listing}, xx=True)
            if quick is None:
                return
            if listing != Listing.LOBBY:
                await self._redis.zrem(self.keys.quick(quick), room_id)
            elif await self._redis.zscore(self.keys.listed, room_id) is not None:
                await self._redis.zadd(self.keys.quick(quick), {room_id: created_ms})

    async def quick_lobbies(self, variant: str, limit: int = 100) -> list[str]:
        """The variant's quick rooms listed as lobbies somebody is in, oldest first
        (:meth:`move_listing`; one that has moved on since may be among them: callers
        check, and :meth:`drop_quick` it)."""
        if limit <= 0:
            return []
        with self._errors():
            members: list[Any] = await self._redis.zrange(self.keys.quick(variant), 0, limit - 1)
        return [_as_text(m) for m in members]

    async def drop_quick(self, variant: str, room_id: str) -> None:
        """Take a room out of the variant's quick lobbies (it is no longer one)."""
        self._refuse_closed()
        with self._errors():
            await self._redis.zrem(self.keys.quick(variant), room_id)

    async def is_listed(self, room_id: str) -> bool:
        """Whether the room is in the public listing."""
        with self._errors():
            return await self._redis.zscore(self.keys.listed, room_id) is not None

    async def idle_lobbies(self, limit: int = 100) -> list[str]:
        """The listed lobbies nobody is in (:data:`Listing.IDLE`), newest first."""
        if limit <= 0:
            return []
        with self._errors():
            members: list[Any] = await self._redis.zrevrangebyscore(
                self.keys.listed, -Listing.RACE, "-inf", start=0, num=limit
            )
        return [_as_text(m) for m in members]

    async def unlist(self, room_id: str) -> None:
        """Remove the room from the public listing (it started, filled up, or closed)."""
        self._refuse_closed()
        with self._errors():
            await self._redis.zrem(self.keys.listed, room_id)

    async def expire_room(self, room_id: str, ttl_s: float, *, unlist: bool = True) -> None:
        """Make every key of the room expire in ``ttl_s`` seconds; unlist it now
        (unless ``unlist`` is False: a new room gets a lifetime cap while listed).

        Race-free without one script spanning keys it cannot name in advance:
        step 1 is a script (``expire_room.lua``) that sets the TTL on the fixed keys
        (meta first: it is the TTL anchor) and reads the key set in the same atomic
        step. Any log or counter created before step 1 is in that set (scripts add
        keys in the same atomic step that creates them); any created after it sees the
        anchor's TTL and inherits it inside its script. Step 2 gives the set's members
        and the join code the anchor's TTL (:meth:`settle_expiry`). Writes after this
        keep the TTL, so a finished room can still receive its last events.
        """
        self._refuse_closed()
        rk = self.keys.room(room_id)
        members, code = await self._eval(EXPIRE_ROOM, rk.fixed(), (_ttl_ms(ttl_s),))
        await self._settle(room_id, members, code, unlist, shorten_code=True)

    async def settle_expiry(
        self, room_id: str, *, unlist: bool = False, final: bool = False
    ) -> None:
        """Give the room's key set members the expiry its fixed keys have now (an event
        appended with ``ttl_s`` set those), and its join code that expiry if it is
        longer than the code's; unlist the room too if ``unlist``. Idempotent, and
        never carries an expiry of its own: run late (after another node's rematch gave
        the room its lifetime back), it copies the newer one. The code only ever gets
        longer (another slot: read and written in two steps, between which a late
        settle could otherwise shorten a newer round's code; a code outliving its room
        names a room that is gone) — unless ``final``: the room's expiry can never
        grow again (everyone left it: it takes no join and no rematch), so no newer
        round's code can be cut short, and the code gets exactly the room's expiry
        (it kept its 24-hour cap, a key left behind a day by every room: a soak
        audit). A fault before it leaves members on their earlier expiry until the
        next settle (the room's next decision that sets an expiry, or its next
        countdown)."""
        self._refuse_closed()
        rk = self.keys.room(room_id)
        with self._errors():
            pipe = self._redis.pipeline(transaction=False)
            pipe.smembers(rk.keyset)
            pipe.get(rk.code)
            members, code = await pipe.execute()
        await self._settle(room_id, members, code, unlist, shorten_code=final)

    async def _settle(
        self, room_id: str, members: Any, code: Any, unlist: bool, *, shorten_code: bool = False
    ) -> None:
        rk = self.keys.room(room_id)
        names = tuple(sorted(_as_text(m) for m in members or ()))
        ttl_ms = int(await self._eval(SETTLE_EXPIRY, (rk.meta, *names), ()))
        if ttl_ms > 0 and code is not None:
            # Another slot on a cluster: the code's own script, which checks that the
            # code still names this room.
            code_key = self.keys.code(_as_text(code))
            mode = "set" if shorten_code else "extend"
            await self._eval(EXPIRE_CODE, (code_key,), (room_id, ttl_ms, mode))
        if unlist:
            # Last: a room still listed (a lobby everyone left), or still noted as
            # awaiting its archive, is settled again by a node's orphan sweep
            # (Node.sweep_orphans), so what a fault cut before this write is
            # finished there.
            await self.unlist(room_id)

    # -- events --------------------------------------------------------------------

    async def append_event(
        self,
        room_id: str,
        event: bytes,
        expected_version: int | None = None,
        *,
        ends_round: int | None = None,
        token: tuple[str, str] | None = None,
        ttl_s: float | None = None,
        closes_log: str | None = None,
        trim: Trim | None = None,
        event_id: str | None = None,
    ) -> int:
        """Append a room-level event; return its version (1, 2, 3, ... gap-free).

        With ``expected_version``, the append happens only if the room is still at
        that version, else VersionConflict(current) and nothing is written: two nodes
        deciding from the same state (both start the countdown) cannot both win.
        A room whose meta key is gone (Redis lost it whole) is refused, nothing written,
        with VersionConflict(0): its keys, written, had no TTL to inherit.
        If Redis had lost the room's version or chain key (its stream whole), they are
        restored from the stream and :class:`HeadLost` (a VersionConflict) says what
        was lost, nothing appended: announce it, then decide again.
        With ``ends_round`` (the event is that round's ``race_over``), the same atomic
        step closes the round: :meth:`append_move` refuses its moves from then on.
        With ``token`` (racer id, the SHA-256 hex of its token — never the token
        itself: anything but 64 lowercase hex digits is refused — with that racer's
        ``racer_joined``), the same atomic step records the racer's token, so a join
        stores its racer and its token together or neither.
        With ``ttl_s`` the event sets the room's expiry in the same atomic step (its
        fixed keys; :meth:`settle_expiry` then gives the key set's members the same).
        With ``closes_log`` (a move log's name: the event ends its racer's race), the
        same atomic step closes that log: :meth:`append_move` refuses its moves from
        then on, however stale the appending node's copy of the room.
        With ``trim`` (the event begins a round: a rematch), the same atomic step
        trims the stream before ``trim.before_version``, deletes the key set's
        members of rounds before ``trim.first_round`` (move logs, place counters and
        finish times, whose names begin with their round; with their closed marks, and
        the marks of such logs never written) and the tokens of every racer but
        ``trim.racers``: a room's history is its last two rounds, however many it runs
        (docs/store.md, "A room's history"). Their rounds are over, so no move can
        write them again.
        ``event_id`` (:func:`new_event_id`; None: one drawn here) is the id the entry
        stores (StoredEvent.chain): a caller whose append failed with its outcome unknown
        finds by it whether the event at that version is its own — its bytes are not
        enough, another node deciding the same for the same millisecond sends the same.
        """
        self._refuse_closed()
        if expected_version is not None:
            _check_nonneg("expected_version", expected_version)
        rk = self.keys.room(room_id)
        expected = "" if expected_version is None else str(expected_version)
        ends = "" if ends_round is None else str(_check_round(ends_round))
        racer, digest = ("", "") if token is None else _check_token(*token)
        ttl = "" if ttl_s is None else str(_ttl_ms(ttl_s))
        closed_log = "" if closes_log is None else rk.log(closes_log)
        keys: tuple[str, ...] = (
            rk.meta,
            rk.ver,
            rk.events,
            rk.chain,
            rk.over,
            rk.tokens,
            rk.code,
            rk.nodes,
            rk.keyset,
            rk.closed,
        )
        trim_from = ""
        kept_racers: tuple[str, ...] = ()
        if trim is not None:
            _check_nonneg("trim.before_version", trim.before_version)
            trim_from = str(trim.before_version)
            for kept in trim.racers:
                _check_nonneg("trim.racers", kept)
            kept_racers = tuple(str(kept) for kept in trim.racers)
            with self._errors():
                members = await self._redis.smembers(rk.keyset)
                # A log closed before it was written (its racer resigned, left or was
                # gone before its first move) is marked, but in no key set.
                marked = await self._redis.hkeys(rk.closed)
            for member in sorted({_as_text(m) for m in (*members, *marked)}):
                round_no = rk.round_of(member)
                if round_no is not None and round_no < trim.first_round:
                    keys += (member,)
        own_id = new_event_id() if event_id is None else event_id
        args: tuple[bytes | str, ...] = (
            expected,
            event,
            own_id,
            ends,
            racer,
            digest,
            ttl,
            closed_log,
            trim_from,
            *kept_racers,
        )
        reply = await self._eval(APPEND_EVENT, keys, args)
        ok, version = int(reply[0]), int(reply[1])
        if not ok and len(reply) > 2:
            raise HeadLost(version, expected_version, _as_text(reply[2]))
        if not ok:
            raise VersionConflict(version, expected_version)
        return version

    async def events_since(
        self, room_id: str, after_version: int, limit: int | None = None
    ) -> list[StoredEvent]:
        """Events with version > ``after_version`` in order: how clients resume."""
        _check_nonneg("after_version", after_version)
        if limit is not None and limit <= 0:
            return []
        key = self.keys.room(room_id).events
        with self._errors():
            entries: list[Any] = (
                await self._redis.xrange(key, f"0-{after_version + 1}", "+", count=limit) or []
            )
        return [_entry_of(eid, fields) for eid, fields in entries]

    async def version(self, room_id: str) -> int:
        """The room's current version (0 before the first event)."""
        with self._errors():
            value = await self._redis.get(self.keys.room(room_id).ver)
        return 0 if value is None else int(value)

    async def tail(
        self, positions: Mapping[str, int], block_ms: int, *, count: int | None = None
    ) -> TailRead:
        """Events after each room's given version, waiting up to ``block_ms`` for some.

        Returns ``(room_id, event)`` in version order per room (:class:`TailRead`);
        none after the wait if nothing came. ``block_ms=0`` does not wait (unlike Redis'
        BLOCK 0, which waits forever: a store call must not be able to hang). Runs on
        the dedicated blocking connection. How a node fans out events other nodes
        append.

        On Redis Cluster one XREAD may only name streams of one slot, and a blocking
        read per room would hold one connection per room. So there the rooms are
        grouped by slot, and each master is polled on its own — one pipeline of
        non-blocking XREADs per poll, every ``tail_poll_ms`` — until some master has an
        event or ``block_ms`` has passed: a cross-node event reaches the node within
        about ``tail_poll_ms``. A master that hangs or fails holds back its own rooms
        only (``TailRead.unread``, ``failed``); the call raises only when no master
        answered and one failed (docs/store.md, "Redis Cluster").
        """
        _check_nonneg("block_ms", block_ms)
        if not positions:
            await asyncio.sleep(block_ms / 1000)
            return TailRead([])
        streams: dict[Any, Any] = {}
        room_of: dict[bytes, str] = {}
        for room_id, after in positions.items():
            _check_nonneg("position", after)
            key = self.keys.room(room_id).events
            streams[key] = f"0-{after}"
            room_of[key.encode()] = room_id
        if isinstance(self._redis, RedisCluster):
            pairs, unread, failed = await self._tail_cluster(self._redis, streams, block_ms, count)
            return TailRead(
                [
                    (room_of[_as_bytes(key) or b""], _entry_of(eid, fields))
                    for key, entries in pairs
                    for eid, fields in entries
                ],
                frozenset(room_of[key.encode()] for key in unread),
                failed,
            )
        with self._errors():
            reply = await self._blocking_xread(streams, block_ms, count)
        return TailRead(
            [
                (room_of[_as_bytes(key) or b""], _entry_of(eid, fields))
                for key, entries in _xread_streams(reply)
                for eid, fields in entries
            ]
        )

    # -- which nodes serve a room ----------------------------------------------------

    async def join_room_nodes(self, room_id: str, node_id: str) -> set[str]:
        """Record that ``node_id`` serves the room; return the other nodes that have.
        Only a room whose meta key Redis still holds (no set is left without a TTL).

        A node need not read a room's stream back for the events it appended itself:
        only events of other nodes are news to it. So a node tails a room only once
        another node serves it too. Joining and reading the set are one atomic step,
        so of two nodes joining at once the later one sees the earlier and must
        :meth:`wake` it: between them, every node in a shared room tails it.
        """
        self._refuse_closed()
        rk = self.keys.room(room_id)
        members = await self._eval(JOIN_ROOM_NODES, (rk.meta, rk.nodes), (node_id,))
        return {_as_text(m) for m in members or ()} - {node_id}

    async def reveal_round(self, room_id: str, round_no: int) -> int:
        """Note that round ``round_no``'s seed went out (a client proved it: the store
        lost the ``race_over`` that revealed it): ``over`` rises to it, never falls, so
        :meth:`append_move` refuses every move of the rounds up to it from this one
        atomic step on, on every node. Returns ``over`` as it was before: at or past
        ``round_no``, the store knew it already (docs/store.md, "Key layout"). A node
        that takes the room up reads it back (:meth:`round_over`)."""
        self._refuse_closed()
        if round_no < 1:
            raise ValueError("round_no must be a round number (1 or more)")
        rk = self.keys.room(room_id)
        return int(await self._eval(REVEAL_ROUND, (rk.meta, rk.over, rk.closed), (str(round_no),)))

    async def round_over(self, room_id: str) -> int:
        """The last round whose race is over or whose seed was proved revealed
        (``over``; 0: none): what a node taking the room up knows went out."""
        with self._errors():
            raw = await self._redis.get(self.keys.room(room_id).over)
        return int(raw) if raw is not None else 0

    async def round_ended(self, room_id: str) -> int:
        """The last round whose ``race_over`` is stored (0: none known): ``over``, but
        where a proof raised it (:meth:`reveal_round`), the round a race_over had
        raised it to before that proof (kept by the proof: without it, a result of a
        round long over took the room up, and was refused while the proved round
        could not end). A later round's proof raises ``over`` past the round the
        store holds under way, whose race_over may never come if Redis fails its
        ending; read as over, that round's archived result went out with the round
        under way (lobby.prove_archived). One read, as :meth:`round_over`."""
        rk = self.keys.room(room_id)
        return int(await self._eval(ROUND_ENDED, (rk.over, rk.closed), ()))

    async def leave_room_nodes(self, room_id: str, node_ids: Collection[str]) -> None:
        """Take ``node_ids`` out of the room's set of serving nodes: a node that took
        the room up after they left it (Node._adopt) replaces them, so the next node
        to take it up judges only those that served it since (did they drain or die?)."""
        self._refuse_closed()
        if not node_ids:
            return
        with self._errors():
            await self._redis.srem(self.keys.room(room_id).nodes, *sorted(node_ids))

    async def leave_rooms(self, leaving: Mapping[str, Collection[str]]) -> set[str]:
        """Take each room's nodes in ``leaving`` out of its set of serving nodes; return
        the rooms whose SREM Redis answered (the nodes are out of the set now, whether
        or not they were in it). A node that drains leaves the rooms another
        live node serves (Node._leave_shared_rooms), having first taken out of its rooms'
        sets the nodes that died while it served on (Node._replace_dead_co_servers); a
        node leaves the rooms it no longer serves (Node.leave_unserved). One SREM a
        room, in a pipeline (the rooms hash to any slot): one round trip for them all,
        not one a room. A room whose SREM Redis refuses is left as it was, and not
        returned; the others are left (as :meth:`heads` reads them): one room's slot
        left open failed the whole pipeline, and no room was left."""
        self._refuse_closed()
        ids = sorted(r for r, nodes in leaving.items() if nodes)
        if not ids:
            return set()
        with self._errors():
            pipe = self._redis.pipeline(transaction=False)
            for room_id in ids:
                pipe.srem(self.keys.room(room_id).nodes, *sorted(leaving[room_id]))
            done: list[Any] = await pipe.execute(raise_on_error=False)
        return {r for r, d in zip(ids, done, strict=True) if not isinstance(d, Exception)}

    async def rooms_nodes(self, room_ids: Collection[str]) -> dict[str, set[str]]:
        """:meth:`room_nodes` of each of ``room_ids``, in one round trip (pipelined). A
        room whose read Redis refuses is left out, as in :meth:`heads`."""
        ids = sorted(room_ids)
        if not ids:
            return {}
        with self._errors():
            pipe = self._redis.pipeline(transaction=False)
            for room_id in ids:
                pipe.smembers(self.keys.room(room_id).nodes)
            found: list[Any] = await pipe.execute(raise_on_error=False)
        return {
            room_id: {_as_text(m) for m in members or ()}
            for room_id, members in zip(ids, found, strict=True)
            if not isinstance(members, Exception)
        }

    async def room_nodes(self, room_id: str) -> set[str]:
        """The nodes that serve the room, or served it and were not yet replaced by a
        node that took it up (:meth:`join_room_nodes`, :meth:`leave_room_nodes`)."""
        with self._errors():
            members: Any = await self._redis.smembers(self.keys.room(room_id).nodes)
        return {_as_text(m) for m in members or ()}

    async def wake(self, node_ids: Collection[str], room_id: str) -> None:
        """Tell each of ``node_ids`` that another node now serves ``room_id`` (so it
        starts tailing the room's stream). One single-key XADD per node; a wake-up
        stream keeps its last ``WAKE_KEEP`` entries and expires a day after the last
        one (a node that died leaves nothing behind for long)."""
        self._refuse_closed()
        if not node_ids:
            return
        with self._errors():
            pipe = self._redis.pipeline(transaction=False)
            for node_id in sorted(node_ids):
                key = self.keys.wake(node_id)
                pipe.xadd(key, {b"r": room_id.encode()}, maxlen=WAKE_KEEP, approximate=True)
                pipe.pexpire(key, WAKE_TTL_MS)
            await pipe.execute()

    async def _blocking_xread(
        self, streams: dict[Any, Any], block_ms: int, count: int | None = None
    ) -> Any:
        """XREAD on the blocking connection, waiting up to ``block_ms`` for an entry,
        bounded by that and the store's timeout. A read that outlasts the bound says
        what timed out: asyncio's own timeout says nothing, and the node's lines read
        "store unavailable error=redis unavailable: TimeoutError: " (the tail) and
        "reading this node's wake-ups failed … TimeoutError: " (an audit)."""
        limit_s = block_ms / 1000 + self._timeout
        try:
            async with asyncio.timeout(limit_s):
                return await self._blocking.xread(
                    streams, count=count, block=block_ms if block_ms > 0 else None
                )
        except TimeoutError as exc:
            raise RedisTimeoutError(
                f"Timeout reading from Redis: no answer to a blocking read in {limit_s:g} s"
            ) from exc

    async def wakes(self, node_id: str, after: str, block_ms: int) -> tuple[str, list[str]]:
        """Room ids written to ``node_id``'s wake-up stream after entry ``after``
        (``"0-0"`` at first), waiting up to ``block_ms`` for one; and the id to pass
        as ``after`` next time. Runs on the blocking connection."""
        _check_nonneg("block_ms", block_ms)
        key = self.keys.wake(node_id)
        with self._errors():
            reply = await self._blocking_xread({key: after}, block_ms)
        rooms: list[str] = []
        for _key, entries in _xread_streams(reply):
            for entry_id, fields in entries:
                after = _as_text(entry_id)
                if not isinstance(fields, dict):
                    fields = dict(zip(fields[::2], fields[1::2], strict=True))
                room = fields.get(b"r")
                if room is not None:
                    rooms.append(_as_text(room))
        return after, rooms

    async def _tail_cluster(
        self, rc: RedisCluster, streams: dict[str, str], block_ms: int, count: int | None
    ) -> tuple[list[tuple[Any, list[Any]]], list[str], StoreUnavailable | None]:
        """``tail`` on a cluster: poll each master's streams on its own
        (:meth:`_tail_master`), side by side, until some have entries, or ``block_ms``
        is over, and every master has answered once; a master that has not by then is
        set aside (so is one whose read failed) and holds no call until it answers
        again. ``block_ms=0`` waits for every first answer (each bounded by the command
        timeout). Returns what the masters read, the keys of those that did not answer,
        and why one failed; raises if none answered and one failed.

        One pipeline per master for all of them, as before, held the call as long as
        the slowest master: one that hung held every room's events for the command
        timeout (5 s) and then failed the call, one that failed failed it at once, and
        the node read nothing of any room while it lasted."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + block_ms / 1000
        with self._errors():
            await rc.initialize()
            masters: dict[str, tuple[ClusterNode, dict[int, list[str]]]] = {}
            for key in streams:
                node = rc.get_node_from_key(key)  # raises for a slot no master serves
                if node is None:
                    raise SlotNotCoveredError(f"no master serves the slot of {key!r}")
                slots = masters.setdefault(node.name, (node, {}))[1]
                slots.setdefault(rc.keyslot(key), []).append(key)
        answered: set[str] = set()
        aside = self._tail_aside & masters.keys()
        polls = {
            loop.create_task(
                self._tail_master(
                    _MasterPoll(rc, name, node, slots, streams, count), deadline, answered, aside
                )
            ): name
            for name, (node, slots) in masters.items()
        }
        pending, found = set(polls), False
        try:
            while pending:
                past = loop.time() >= deadline
                held = any(polls[p] not in answered | aside for p in pending)
                if (found or past) and not held:
                    break  # the others poll on: nothing came meanwhile
                if past and block_ms > 0:
                    # A master's first answer holds a call no longer than block_ms (one
                    # that hangs held every call for the command timeout): set aside,
                    # it holds none until it answers again.
                    self._tail_aside.update(polls[p] for p in pending if polls[p] not in answered)
                    break
                # Until the deadline, a master's events end the wait; then, and once
                # some came, look every poll whether the masters' first answers are in.
                wait_s = self._tail_poll_s if found or past else deadline - loop.time()
                done, pending = await asyncio.wait(
                    pending, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
                )
                found = found or any(p.exception() is None and p.result() for p in done)
        finally:
            for poll in pending:  # its read, if one is out, is left to the next call
                poll.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        pairs: list[tuple[Any, list[Any]]] = []
        unread: list[str] = []
        failed: StoreUnavailable | None = None
        for poll, name in polls.items():
            exc = None if poll.cancelled() else poll.exception()
            if exc is None and name in answered:
                if not poll.cancelled():  # cancelled: it had found nothing yet
                    pairs += poll.result() or []
                continue
            unread += (key for keys in masters[name][1].values() for key in keys)
            if isinstance(exc, StoreUnavailable):
                failed = failed or exc
            elif exc is not None:
                raise exc  # a defect, not one master's outage
        if failed is not None and not answered:
            raise failed
        return pairs, unread, failed

    async def _tail_master(
        self, master: _MasterPoll, deadline: float, answered: set[str], aside: set[str]
    ) -> list[tuple[Any, list[Any]]] | None:
        """Poll one master's streams until they have entries (or the call ends it,
        :meth:`_tail_cluster`), adding its name to ``answered`` once the master
        answers; None if it rests (:data:`RETRY_AFTER_FAILURE_S`), or is ``aside`` and busy with
        an earlier call's read, until ``deadline`` (loop time).

        A master is read once at a time: a read still out when its call ended (a
        master that hangs; a poll under way as another master's events came) is waited
        for — a master set aside's only until ``deadline`` — and its reply, read from
        that call's positions, dropped. Cancelling this leaves the read out, so a
        master that hangs costs one read per command timeout, not one per call."""
        loop = asyncio.get_running_loop()
        name = master.name
        rest = min(self._tail_rests.get(name, 0.0), deadline) - loop.time()
        if rest > 0:
            await asyncio.sleep(rest)
        if self._tail_rests.get(name, 0.0) > loop.time():
            return None
        while True:
            read = self._tail_reads.get(name)
            if read is not None:  # an earlier call's
                until = max(deadline - loop.time(), 0.0) if name in aside else None
                await asyncio.wait({read}, timeout=until)
                if not read.done():
                    return None
                if self._tail_reads.get(name) is read:  # cancelled before it ran (close)
                    del self._tail_reads[name]
                if not read.cancelled() and isinstance(exc := read.exception(), StoreUnavailable):
                    raise translate(exc)  # its own may be raised to another call too
                continue
            read = loop.create_task(self._read_master(master))
            read.add_done_callback(_retrieved)
            self._tail_reads[name] = read
            pairs = await asyncio.shield(read)
            answered.add(name)
            if pairs:
                return pairs
            await asyncio.sleep(self._tail_poll_s)

    async def _read_master(self, master: _MasterPoll) -> list[tuple[Any, list[Any]]]:
        """One poll of one master (:meth:`_tail_master`): its streams' entries, one
        non-blocking XREAD per slot in one pipeline; a failure rests the master."""
        name, streams = master.name, master.streams
        try:
            with self._errors():
                pipe = master.rc.pipeline(transaction=False)
                head = ("COUNT", master.count) if master.count is not None else ()
                for keys in master.slots.values():
                    # Naming the node saves redis-py a COMMAND GETKEYS round trip per
                    # XREAD (its keys are "movable"); MOVED is still followed.
                    pipe.execute_command(
                        "XREAD",
                        *head,
                        "STREAMS",
                        *keys,
                        *(streams[k] for k in keys),
                        target_nodes=master.node,
                    )
                async with asyncio.timeout(self._timeout):
                    replies = await pipe.execute(raise_on_error=False)
                # A slot Redis refuses (left open by an interrupted reshard) withholds
                # its own rooms' events, nothing more: one failing XREAD failed the
                # whole poll, each poll, and the node took it for an outage a second
                # (re-arming every offline racer's grace each time: an audit's grace of
                # 30 s ended after 74 s). A connection lost or timing out fails the read.
                for reply in replies:
                    if isinstance(reply, (RedisConnectionError, RedisTimeoutError)):
                        raise reply
                read = [reply for reply in replies if not isinstance(reply, Exception)]
                pairs = [pair for reply in read for pair in _xread_streams(reply)]
                self._tail_aside.discard(name)  # it answers
                return [(key, entries) for key, entries in pairs if entries]
        except StoreUnavailable:
            self._tail_rests[name] = asyncio.get_running_loop().time() + RETRY_AFTER_FAILURE_S
            self._tail_aside.add(name)
            raise
        finally:
            if self._tail_reads.get(name) is asyncio.current_task():
                del self._tail_reads[name]

    # -- moves ---------------------------------------------------------------------

    async def append_move(
        self,
        room_id: str,
        log_name: str,
        expected_seq: int,
        entry: bytes,
        event: bytes,
        finish: Finish | None = None,
        *,
        round_no: int,
    ) -> MoveAppend:
        """Append ``entry`` to a move log iff the log has exactly ``expected_seq`` entries
        and round ``round_no``'s race is not over (``race_over`` then, nothing written)
        and the log is not closed (``log_closed``: :meth:`append_event`'s ``closes_log``,
        or a finish: its append closes its log)
        and the room's meta key exists (``room_gone``: Redis lost the room whole).

        In the same atomic script: append ``event`` to the room stream, and with
        ``finish`` hand out the next finishing place (1 = winner) exactly once and
        append that place's ``finished`` event — so a finisher's place can never be
        lost between two writes — unless an earlier place has a later finish time
        (then nothing is written and ``finish_floor`` says the least time). A stale or
        duplicate sequence number writes nothing (``accepted=False``). Calls are
        group-committed: everything queued while a flush is pending goes in one
        pipeline — but a finish on a cluster whose master has a replica returns only
        once the replica holds it (``replicas``; store/_commit.py says why).
        Acknowledge the move only after this returns accepted; on StoreUnavailable the
        outcome is unknown (re-read the log).
        """
        _check_nonneg("expected_seq", expected_seq)
        keys = _move_keys(self.keys, room_id, log_name)
        args: tuple[bytes | int | str, ...] = (
            expected_seq,
            entry,
            event,
            new_event_id(),
            new_event_id(),
            _check_round(round_no),
        )
        if finish is not None:
            rk = self.keys.room(room_id)
            keys += (rk.places(finish.counter), rk.finish_time(finish.counter))
            args += (finish.at_ms, *finish.events)
        replicas = None
        try:
            if finish is None:
                reply = await self._commit.call(APPEND_MOVE, keys, args)
            else:  # a place is decided: answered once a replica holds it (see _commit)
                reply, replicas = await self._commit.call_replicated(APPEND_MOVE, keys, args)
        except StoreUnavailable:  # the commit's failures are store errors already
            self._note_failure()
            raise
        accepted, length, version, place = (int(x) for x in reply[:4])
        if not accepted:
            floor, refusal = int(reply[7]), int(reply[8])
            return MoveAppend(
                False,
                length,
                None,
                None,
                finish_floor=floor if floor else None,
                race_over=refusal == 1,
                log_closed=refusal == 2,
                room_gone=refusal == 3,
            )
        prev, chain, after, lost = (_as_text(x) for x in (*reply[4:7], reply[9]))
        placed = place if finish is not None else None
        return MoveAppend(
            True,
            length,
            version,
            placed,
            (prev, chain, after),
            replicas=replicas,
            head_lost=lost,
        )

    async def move_log(self, room_id: str, log_name: str, start: int = 0) -> list[bytes]:
        """The entries of a move log from index ``start`` on, in order: replay them to
        rebuild the racer's game (or, from where a replica is, to bring it up to date)."""
        if start < 0:
            raise ValueError("start must be >= 0")
        with self._errors():
            entries: list[Any] = await self._redis.lrange(
                self.keys.room(room_id).log(log_name), start, -1
            )
        return [e for e in (_as_bytes(x) for x in entries) if e is not None]

    async def log_length(self, room_id: str, log_name: str) -> int:
        """Entries in a move log = the sequence number the next move must carry."""
        with self._errors():
            return int(await self._redis.llen(self.keys.room(room_id).log(log_name)))

    async def delete_all(self) -> int:
        """Delete every key under this store's prefix (a benchmark's or a test's own
        keys, never anyone else's: no FLUSHDB). Returns how many were deleted."""
        self._refuse_closed()
        with self._errors():
            pattern = f"{self.keys.prefix}*"
            keys = [k async for k in self._redis.scan_iter(match=pattern, count=1000)]
            if keys:
                await self._redis.delete(*keys)
        return len(keys)

    # -- the clock -----------------------------------------------------------------

    async def time_ms(self) -> int:
        """The store's clock (Unix ms): what every node sharing this store steers its
        race clock toward (solrace.rooms.clock). One master answers for every node,
        on a cluster too (the script names :attr:`Keys.clock`)."""
        seconds, micros = await self._eval(CLOCK, (self.keys.clock,), ())
        return int(seconds) * 1000 + int(micros) // 1000

    # -- node leases ---------------------------------------------------------------

    async def renew_lease(self, node_id: str, ttl_ms: int) -> bool:
        """Say that node ``node_id`` is alive for the next ``ttl_ms``. A node that stops
        renewing (crash, partition) loses its lease, and other nodes serving its rooms
        then mark its racers offline (docs/server.md, "Presence"). Returns whether the
        lease was still current (one ``SET … GET``): False at a node's first renewal,
        and after a lapse, when another node may have taken its rooms up meanwhile and
        replaced it in their sets of serving nodes (Node._rejoin_rooms)."""
        self._refuse_closed()
        if ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive")
        with self._errors():
            was = await self._redis.set(
                self.keys.lease(node_id), str(STORE_FORMAT), px=ttl_ms, get=True
            )
        return was is not None

    async def older_nodes(self) -> dict[str, int]:
        """The live nodes of releases whose stored formats are older than this one's
        (:data:`STORE_FORMAT`), by node id, with the format their lease says (1: a
        release before leases said one). One SCAN of the key space, so a node asks at
        start only (Node.check_older_nodes)."""
        with self._errors():
            found = [k async for k in self._redis.scan_iter(match=self.keys.leases, count=1000)]
            if not found:
                return {}
            pipe = self._redis.pipeline(transaction=False)
            for key in found:
                pipe.get(key)
            values = await pipe.execute()
        older: dict[str, int] = {}
        for key, value in zip(found, values, strict=True):
            name = key.decode() if isinstance(key, bytes) else str(key)
            if value is None:
                continue  # it lapsed meanwhile
            raw = _as_bytes(value) or b""
            fmt = int(raw) if raw.isdigit() else 1  # bytes: isdigit is 0-9 only
            if fmt < STORE_FORMAT:
                older[self.keys.node_of(name)] = fmt
        return older

    async def drop_lease(self, node_id: str) -> None:
        """Give the lease up at once (a drained node's racers are already offline)."""
        self._refuse_closed()
        with self._errors():
            await self._redis.delete(self.keys.lease(node_id))

    async def hand_off(self, node_id: str, keep_ms: int) -> None:
        """A drained node stops: its hand-off is noted for ``keep_ms`` (as long as its
        rooms may live), then its lease is given up. Noted first, so that no node sees
        the lease gone without the note and takes the node for dead."""
        if keep_ms <= 0:
            raise ValueError("keep_ms must be positive")
        self._refuse_closed()
        with self._errors():
            await self._redis.set(self.keys.handed_off(node_id), b"1", px=keep_ms)
            await self._redis.delete(self.keys.lease(node_id))

    async def forget_hand_offs(self, node_ids: Collection[str]) -> None:
        """Delete the hand-off notes of ``node_ids``: their rooms were taken up. One
        single-key DEL each, in a pipeline (the notes hash to any slot)."""
        self._refuse_closed()
        if not node_ids:
            return
        with self._errors():
            pipe = self._redis.pipeline(transaction=False)
            for node_id in sorted(node_ids):
                pipe.delete(self.keys.handed_off(node_id))
            await pipe.execute()

    async def handed_off(self, node_ids: Collection[str]) -> set[str]:
        """Those of ``node_ids`` that stopped after a drain (:meth:`hand_off`)."""
        return await self._nodes_with(self.keys.handed_off, node_ids)

    async def live_nodes(self, node_ids: Collection[str]) -> set[str]:
        """Those of ``node_ids`` whose lease is current."""
        return await self._nodes_with(self.keys.lease, node_ids)

    async def _nodes_with(self, key: Callable[[str], str], node_ids: Collection[str]) -> set[str]:
        """Those of ``node_ids`` whose ``key`` exists, in one round trip."""
        ids = sorted(node_ids)
        if not ids:
            return set()
        with self._errors():
            pipe = self._redis.pipeline(transaction=False)
            for node_id in ids:
                pipe.exists(key(node_id))
            found = await pipe.execute()
        return {node_id for node_id, n in zip(ids, found, strict=True) if int(n)}

    async def heads(self, room_ids: Collection[str]) -> dict[str, tuple[int, str]]:
        """Each room's current version and last event's id (see :class:`StoredEvent`).

        How a node checks that Redis still holds what the node has delivered: a
        version below the node's, or the same version with another chain, means Redis
        lost acknowledged writes (e.g. it restarted from an AOF missing its last
        second) — which must be announced, never papered over. A higher version is
        checked link by link as the node folds the new events.

        Both are read from the stream's last entry, not from the version and chain
        keys that cache it for appends: those can be lost alone (evicted), which the
        next append restores and reports (``HeadLost``, ``MoveAppend.head_lost``);
        read here, a lost version key read as version 0 was taken for the room
        rewound, rebuilt and announced every second until a write restored it.

        A room whose read Redis refuses is left out (the pipeline's connection
        failing is still :class:`StoreUnavailable`): one room's slot left open by an
        interrupted reshard on a Cluster failed every node's check of every room it
        served, each turn; the node counted an outage a second, and each end of one
        re-armed every offline racer's grace, so nobody in any room was forfeited
        while it lasted (an audit: a grace of 30 s ended after 74 s, then 100 s).
        """
        rooms = sorted(room_ids)
        if not rooms:
            return {}
        with self._errors():
            pipe = self._redis.pipeline(transaction=False)
            for room_id in rooms:
                pipe.xrevrange(self.keys.room(room_id).events, count=1)
            replies = await pipe.execute(raise_on_error=False)
        heads: dict[str, tuple[int, str]] = {}
        for room_id, top in zip(rooms, replies, strict=True):
            if isinstance(top, Exception):
                continue  # this room's slot (or keys) in trouble, not the store
            last = _entry_of(*top[0]) if top else StoredEvent(0, b"")
            heads[room_id] = (last.version, last.chain)
        return heads

    # -- tokens --------------------------------------------------------------------

    async def racer_for_token(self, room_id: str, token_sha256_hex: str) -> str | None:
        """The racer whose token has this digest, or None.

        Compares every entry in constant time (a room has at most a handful of
        racers), so response timing says nothing about how close a guess was.
        """
        wanted = token_sha256_hex.encode()
        with self._errors():
            table: dict[Any, Any] = await self._redis.hgetall(self.keys.room(room_id).tokens)
        found: str | None = None
        for racer, digest in table.items():
            if hmac.compare_digest(_as_bytes(digest) or b"", wanted):
                found = _as_text(racer)
        return found

    async def claim_seat(self, token_sha256_hex: str, room_id: str, at_ms: int, ttl_s: int) -> bool:
        """Remember for ``ttl_s`` seconds that the client-proposed token with this
        digest is being seated in ``room_id`` since ``at_ms`` (the race clock), unless
        a claim of it is there already: whether this call took the claim (False: another
        request proposing the token holds it — in flight, or seated — and nothing was
        written). One ``SET … NX``: of two requests proposing one token at once, on any
        nodes, exactly one gets it (a check before a plain SET let both through, and
        both were seated). Written before the seat (the room's ``racer_joined`` and
        token): a claim without its seat is a seat still being written, or one never
        stored (the resume tells them apart by the claim's age); a seat without its
        claim could not be found by a client that lost its reply. Global and
        single-key (cluster: another slot than the room's), so it cannot be part of
        the room's atomic write."""
        self._refuse_closed()
        _check_token("claim", token_sha256_hex)
        key = self.keys.seat(token_sha256_hex)
        with self._errors():
            taken = await self._redis.set(key, f"{room_id} {at_ms}", ex=ttl_s, nx=True)
        return bool(taken)

    async def claimed_seat(self, token_sha256_hex: str) -> SeatClaim | None:
        """The claim :meth:`claim_seat` wrote for this token digest, while it lasts."""
        _check_token("claim", token_sha256_hex)
        with self._errors():
            value = await self._redis.get(self.keys.seat(token_sha256_hex))
        if value is None:
            return None
        room_id, _, at_ms = _as_text(value).partition(" ")
        return SeatClaim(room_id, int(at_ms) if is_digits(at_ms) else 0)

    async def release_seat_claim(self, token_sha256_hex: str) -> None:
        """Forget the claim of a seat its request was refused (room full, too many
        joins, …) or never decided: a refused request leaves no key behind, and a
        resume by its token says ``bad_token`` at once. Only the request that took the
        claim (:meth:`claim_seat` True) releases it."""
        self._refuse_closed()
        _check_token("claim", token_sha256_hex)
        with self._errors():
            await self._redis.delete(self.keys.seat(token_sha256_hex))

    # -- results -------------------------------------------------------------------

    async def save_result(self, race_id: str, data: bytes, ttl_s: int | None = None) -> bool:
        """Store a finished race's result, for ``ttl_s`` seconds (None: for ever, the
        default: results stay when their rooms expire), unless one is stored under
        that race id already (``SET NX``): whether it was written. The first result
        of a race stands: a store rewound to before its ``race_over`` ends the race
        again (a round's race id is its commitment's, the same), and that second end
        — everyone timed out — replaced the true result in the archive."""
        self._refuse_closed()
        with self._errors():
            return bool(await self._redis.set(self.keys.result(race_id), data, ex=ttl_s, nx=True))

    async def load_result(self, race_id: str) -> bytes | None:
        """A race's stored result, or None."""
        with self._errors():
            return _as_bytes(await self._redis.get(self.keys.result(race_id)))

    async def mark_unarchived(self, room_id: str, round_no: int) -> None:
        """Note that room ``room_id`` runs or ended the race of round ``round_no``,
        whose result is not archived yet. Written before the countdown and again
        before the race_over, so that a node started later finds the room even if
        every node that served it died before its race ended or before its result was
        archived. The note keeps the highest round noted (ZADD GT): a node deciding
        on a stale fold cannot lower it."""
        self._refuse_closed()
        with self._errors():
            await self._redis.zadd(self.keys.archive_notes, {room_id: round_no}, gt=True)

    async def unarchived_rooms(self, limit: int = 100) -> list[str]:
        """Up to ``limit`` rooms noted by :meth:`mark_unarchived` and not cleared, at
        random, and up to ``limit`` rooms an earlier release noted (Keys.unarchived).
        Each kind its own ``limit``: every running race holds a note, so with as many
        races as the limit, an earlier release's notes read only to make up a short
        count were never read — a race an old node noted, its nodes dead during a
        rolling upgrade, never adopted or archived. Once no node of an earlier release
        is left, that set only empties (nothing writes it)."""
        if limit <= 0:
            return []
        with self._errors():
            noted: Any = await self._redis.zrandmember(self.keys.archive_notes, limit)
            older: Any = await self._redis.srandmember(self.keys.unarchived, limit)
        return sorted({_as_text(m) for m in (*(noted or ()), *(older or ()))})

    async def clear_unarchived(self, room_id: str, through_round: int | None = None) -> None:
        """The room's results are archived up to round ``through_round``: forget its
        note unless it notes a later round (a countdown that noted the room for its
        next race before its own write: one script, clear_archive_note.lua). None:
        its keys are gone, and the note goes whatever it says (an earlier release's
        too)."""
        self._refuse_closed()
        if through_round is None:
            with self._errors():
                await self._redis.zrem(self.keys.archive_notes, room_id)
            await self.clear_legacy_note(room_id)
            return
        await self._eval(CLEAR_ARCHIVE_NOTE, (self.keys.archive_notes,), (room_id, through_round))

    async def archive_note(self, room_id: str) -> int | None:
        """The round the room's note names (:meth:`mark_unarchived`), None if it has
        none (an earlier release's note, Keys.unarchived, names no round: not read)."""
        with self._errors():
            score: Any = await self._redis.zscore(self.keys.archive_notes, room_id)
        return None if score is None else int(score)

    async def clear_legacy_note(self, room_id: str) -> None:
        """Forget the room's note in the set an earlier release wrote (Keys.unarchived),
        which names no race: the caller judges it done (Node._clear_note)."""
        self._refuse_closed()
        with self._errors():
            await self._redis.srem(self.keys.unarchived, room_id)

    async def note_unlisted(self, room_id: str, round_no: int) -> None:
        """Note that room ``room_id`` may be a lobby the listing does not hold in round
        ``round_no`` (a rematch, before the reset that begins that round: Keys.unlisted),
        so that a node's orphan sweep finds it if every node that served it dies. The
        note keeps the highest round noted (ZADD GT)."""
        self._refuse_closed()
        with self._errors():
            await self._redis.zadd(self.keys.unlisted, {room_id: round_no}, gt=True)

    async def unlisted_lobbies(self, limit: int = 100) -> list[str]:
        """Up to ``limit`` rooms noted by :meth:`note_unlisted` and not forgotten,
        drawn at random (a sweep's share: every one is drawn in time, however many)."""
        if limit <= 0:
            return []
        with self._errors():
            members: Any = await self._redis.zrandmember(self.keys.unlisted, limit)
        return sorted(_as_text(m) for m in members or ())

    async def forget_unlisted(self, room_id: str, through_round: int | None = None) -> None:
        """The room is no unlisted lobby up to round ``through_round`` (its race began
        or ended): forget its note unless it notes a later round — a rematch that noted
        the room before its reset, which may be storing itself now (one script, the
        archive notes' clear_archive_note.lua). Checked apart (the room's version, then
        the forget), a rematch noted in between lost its note. None: the room is no
        such lobby for good (everyone left it, nobody ever joined it, its keys are
        gone), and the note goes whatever it says."""
        self._refuse_closed()
        if through_round is None:
            with self._errors():
                await self._redis.zrem(self.keys.unlisted, room_id)
            return
        await self._eval(CLEAR_ARCHIVE_NOTE, (self.keys.unlisted,), (room_id, through_round))

    # -- internals -----------------------------------------------------------------

    async def _eval(
        self, script: LuaScript, keys: tuple[str, ...], args: tuple[bytes | str | int, ...]
    ) -> Any:
        """EVALSHA, loading the script if Redis does not know it (NOSCRIPT), at most
        SCRIPT_LOADS times.

        NOSCRIPT means the script did not run, so another EVALSHA cannot apply
        anything twice.
        """
        with self._errors():
            for loads in range(SCRIPT_LOADS + 1):
                try:
                    return await self._redis.evalsha(script.sha, len(keys), *keys, *args)
                except NoScriptError:
                    if loads == SCRIPT_LOADS:
                        raise
                    await self._redis.script_load(script.source)
            raise AssertionError("unreachable")
