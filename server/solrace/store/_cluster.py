"""Redis Cluster: the ``redis+cluster://`` URL and the client built from it.

A cluster is named by the nodes a client may start from, all in one URL, so that one
setting (``--redis-url`` / ``SOLRACE_REDIS_URL``) still says everything::

    redis+cluster://[user:password@]host:port[,host:port…][/0][?option=value…]
    rediss+cluster://…                                   (TLS, like rediss://)

Any one reachable node is enough (the client asks it for the slot map, ``CLUSTER
SLOTS``); listing more only helps when some are down at start. Query options are the
ones redis-py accepts in a ``redis://`` URL (``socket_timeout``, ``protocol``, …).
A cluster has only database 0.

Why a scheme and not a flag: a URL is what every deployment file already passes around
(env files, ConfigMaps, compose), and a cluster URL must not be mistaken for a
standalone one — a standalone client pointed at a cluster node answers MOVED to most
commands, which is exactly the failure this replaces.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.cluster import PRIMARY
from redis.event import EventDispatcher, EventDispatcherInterface
from redis.exceptions import (
    ClusterDownError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from solrace.digits import digits_value
from solrace.quoting import quoted, without_password

__all__ = ["CLUSTER_SCHEMES", "cluster_client", "is_cluster_url", "parse_cluster_url"]

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster_url(url: str) -> bool:
    """True for ``redis+cluster://…`` and ``rediss+cluster://…``."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def _said(url: str) -> str:
    """``url`` as an error line says it: its password hidden, then quoted."""
    return quoted(without_password(url))


def _host_port(text: str, url: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` → (host, port); the port is required."""
    host, sep, port = text.rpartition(":")
    number = digits_value(port)  # None past int()'s 4,300 digits too: its words, before
    if not sep or not host or number is None or not 0 < number < 65536:
        raise ValueError(f"cluster node {quoted(text)} is not host:port in {_said(url)}")
    return host.removeprefix("[").removesuffix("]"), number


def parse_cluster_url(url: str) -> tuple[str, list[tuple[str, int]]]:
    """Split a cluster URL into a one-node ``redis://`` (or ``rediss://``) URL carrying
    the credentials, database and options, and the other startup nodes.

    Raises ValueError for anything that is not a usable cluster URL (no node, a node
    without a port, a database other than 0)."""
    parts = urlsplit(url)
    if parts.scheme not in CLUSTER_SCHEMES or "://" not in url:
        raise ValueError(f"not a Redis Cluster URL: {_said(url)} (redis+cluster://host:port,…)")
    credentials, at, hosts = parts.netloc.rpartition("@")
    nodes = [_host_port(h.strip(), url) for h in hosts.split(",") if h.strip()]
    if not nodes:
        raise ValueError(f"no cluster node in {_said(url)} (redis+cluster://host:port,…)")
    # The query's ``db`` too: redis-py takes it over the path's, and its cluster client
    # refused one other than 0 with a RedisClusterException (a traceback), not this.
    for db in (parts.path.strip("/"), *parse_qs(parts.query).get("db", [])):
        if db not in ("", "0"):
            raise ValueError(
                f"a Redis Cluster has only database 0, not {quoted(db)} ({_said(url)})"
            )
    scheme = parts.scheme.removesuffix("+cluster")
    host, port = nodes[0]
    netloc = f"{credentials}{at}{f'[{host}]' if ':' in host else host}:{port}"
    first = urlunsplit((scheme, netloc, "/0", parts.query, ""))
    return first, nodes[1:]


#: Failures after which the slot map may be wrong: the node is gone (a master killed
#: and, soon, replaced by its replica) or the cluster says it is reconfiguring.
_STALE_MAP = (RedisConnectionError, RedisTimeoutError, ClusterDownError, SlotNotCoveredError)


class SolraceCluster(RedisCluster):
    """``RedisCluster`` that keeps its slot map fresh through failures.

    Three gaps in redis-py 8's cluster client, all seen on a test cluster:

    - It decides how to route a command *before* it fetches the slot map: on a client
      that has none yet (just built, or reset after a failure), a command is routed as
      if it had no key, and concurrent first commands fail (``AttributeError`` on a
      half-made connection). Initializing first — a flag check once the map is known —
      routes every command by its key.
    - A pipeline that fails to reach a node does not mark the slot map stale when no
      retries are allowed (the store allows none, see ``cluster_client``). After a
      master is killed, every later pipeline — the group commit — went on to the dead
      address forever, even once its replica had taken over. ``pipeline()`` here
      returns a pipeline that marks the map stale on such a failure, as a single
      command already does, so the next command asks the cluster again.
    - It follows an ASK redirection only to a node already in its slot map. A master
      just added to the cluster holds no slot yet, so the map never names it; while the
      first slots move to it (``redis-cli --cluster rebalance``, a reshard), every
      command on a moving slot failed with ``AttributeError`` (a ``None`` node) — a
      traceback and an ``internal`` refusal where the slot in migration is an outage
      for a moment. ``get_node`` here adds such a node, as a MOVED to it already does.
    """

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """Run one command; see the class docstring for why ``initialize`` comes first."""
        await self.initialize()
        return await super().execute_command(*args, **kwargs)

    def get_node(
        self, host: str | None = None, port: int | None = None, node_name: str | None = None
    ) -> ClusterNode | None:
        """The node at ``host:port`` (or named ``node_name``); one asked for by address
        that the slot map does not name (an ASK to a master without slots) is added as
        a master, as redis-py adds the target of a MOVED."""
        node = super().get_node(host, port, node_name)
        if node is None and host and port:
            manager = self.nodes_manager
            node = ClusterNode(host, port, PRIMARY, **manager.connection_kwargs)
            manager.set_nodes(manager.nodes_cache, {node.name: node})
        return node

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> ClusterPipeline:
        """A pipeline that marks the slot map stale when it cannot reach a node."""
        if shard_hint or transaction:
            return super().pipeline(transaction, shard_hint)
        return _Pipeline(self)

    def mark_stale(self) -> None:
        """Ask the cluster for its slot map before the next command (no I/O now)."""
        self._initialize = True


class _Pipeline(ClusterPipeline):
    """A non-transactional cluster pipeline that reports node failures to its client."""

    cluster_client: SolraceCluster

    @property
    def _event_dispatcher(self) -> EventDispatcherInterface:
        """The client's: redis-py's command mixins declare this attribute, and its own
        cluster pipeline never defines it (so its type reads as abstract)."""
        return self.cluster_client._event_dispatcher

    @_event_dispatcher.setter
    def _event_dispatcher(self, dispatcher: EventDispatcherInterface) -> None:
        if not isinstance(dispatcher, EventDispatcher):
            raise TypeError("a cluster client's event dispatcher is an EventDispatcher")
        self.cluster_client._event_dispatcher = dispatcher

    async def execute(
        self, raise_on_error: bool = True, allow_redirections: bool = True
    ) -> list[Any]:
        await self.cluster_client.initialize()
        try:
            replies: list[Any] = await super().execute(raise_on_error, allow_redirections)
        except _STALE_MAP:
            self.cluster_client.mark_stale()
            raise
        if any(isinstance(reply, _STALE_MAP) for reply in replies):
            self.cluster_client.mark_stale()
        return replies


#: Connections per cluster node. redis-py's cluster client raises MaxConnectionsError
#: (it does not wait) when a node's pool is full, and its default, 100, is reached by
#: one busy solrace node; the standalone client's pool is unbounded.
MAX_CONNECTIONS_PER_NODE = 4096


def cluster_client(
    url: str,
    *,
    socket_timeout: float | None,
    socket_connect_timeout: float,
    retry: Retry,
) -> RedisCluster:
    """A ``RedisCluster`` for ``url``; no I/O (the slot map is fetched on first use).

    ``retry`` is the store's no-retry policy: redis-py would otherwise re-send a
    command after a connection error or CLUSTERDOWN, re-running a script whose reply
    was lost. MOVED, ASK and TRYAGAIN are still followed: those replies mean the
    command did not run, so following them cannot apply anything twice.
    """
    first, others = parse_cluster_url(url)
    client: RedisCluster = SolraceCluster.from_url(
        first,
        startup_nodes=[ClusterNode(host, port) for host, port in others],
        max_connections=MAX_CONNECTIONS_PER_NODE,
        decode_responses=False,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_connect_timeout,
        retry=retry,
    )
    return client
