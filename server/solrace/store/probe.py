"""Start-up check of a Redis URL whose Redis answers, but not the way the URL says.

A node that cannot use Redis at start serves anyway, and requests fail with
``unavailable`` until Redis answers (docs/server.md): an outage passes. Two failures
look the same to the store's client but are no outage — the URL names the wrong kind
of Redis, and no wait mends it — so ``solrace-server`` says which and exits 2, as for a
URL Redis refuses:

- ``redis+cluster://`` naming a Redis whose cluster support is disabled (a standalone
  Redis): the cluster client's ``CLUSTER SLOTS`` is refused, which redis-py reports as
  "cannot be connected", as it reports a cluster nobody answers for;
- ``rediss://`` (TLS) naming a Redis that speaks plain text: the TLS handshake gets no
  answer until the connect timeout (or bytes that are not TLS);
- ``redis://`` (plain text) naming a Redis that speaks only TLS, as managed Redis
  services often do: it closes the connection at the first byte that is not TLS;
- ``rediss://`` naming a Redis whose certificate this machine does not trust (a
  self-signed one, or one for another host name): the handshake fails and redis-py
  says only "ConnectionError", which reads as an outage.

:func:`wrong_kind` asks only what settles each case — ``PING`` without TLS, ``PING``
with TLS, ``INFO cluster`` — and only after the URL's own connection failed; a Redis
that answers none is unreachable, which is not its business.

Two more mistakes show only once Redis answers, and are checked then:

- ``redis://`` (or ``rediss://``) naming a node of a Redis Cluster: PING answers, and
  most keys are then MOVED elsewhere, so every request failed "store is down" while
  ``/healthz`` said 200 — :func:`cluster_node` asks ``INFO cluster``;
- a Redis user whose ACL forbids what a node does (keys outside its key patterns,
  ``-@scripting``): PING answers, and every loop turn then failed with NOPERM (a
  traceback each, 1,200 lines in 10 s) — :func:`access_refused` does once, on one key
  under the node's prefix, what the store does: write, read, delete, a stream, a
  script.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from solrace.argtypes import REDIS_DEFAULT_PORT

from ._cluster import CLUSTER_SCHEMES, parse_cluster_url
from ._lua import ACCESS_PROBE

__all__ = [
    "AccessRefused",
    "WrongKind",
    "access_refused",
    "cluster_node",
    "one_node_options",
    "wrong_kind",
]

#: Seconds each question may take: a Redis that answers does so at once.
PROBE_TIMEOUT_S = 2.0
_TLS_SCHEMES = ("rediss", "rediss+cluster")
#: The access probe's key lives this long at most: it is deleted at once, and goes by
#: itself if the node dies first (or its user may write but not delete).
ACCESS_PROBE_TTL_MS = 60_000


@dataclass(frozen=True)
class WrongKind:
    """``node`` (host:port) ``says`` (e.g. "answers without TLS"): ``use`` instead (a
    URL; its password, if any, is the given URL's: redact it before logging)."""

    node: str
    says: str
    use: str


def one_node_options(url: str) -> str:
    """A one-node ``redis://`` or ``rediss://`` URL made from a cluster URL, without the
    options of its query a one-node client does not take: the cluster client's own
    (``?read_from_replicas=true``) or one it drops (``?ssl_cert_reqs=none`` without
    TLS). A one-node client refuses them only as it connects, with a TypeError: a
    cluster that did not answer at start-up, probed node by node, ended solrace-server
    in a traceback."""
    parts = urlsplit(url)
    kept = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        alone = urlunsplit((parts.scheme, "h:1", "/0", urlencode({name: value}), ""))
        try:
            pool = Redis.from_url(alone).connection_pool
            # redis-py leaves make_connection untyped; it builds (never opens) one
            cast("Callable[[], object]", pool.make_connection)()
        except TypeError:
            continue
        except (ValueError, RedisError):
            pass  # a value it cannot read: refused where the URL is checked
        kept.append((name, value))
    return urlunsplit((*parts[:3], urlencode(kept), parts.fragment))


def _nodes(url: str) -> list[tuple[str, str]]:
    """(host:port, a one-node URL of the same scheme family, credentials and database)
    for each node the URL names; none for ``unix://``."""
    parts = urlsplit(url)
    if parts.scheme in CLUSTER_SCHEMES:
        first, others = parse_cluster_url(url)
        head = urlsplit(first)
        credentials = head.netloc.rpartition("@")[0]
        at = "@" if credentials else ""
        nodes = [(head.hostname or "", head.port or 0), *others]
        return [
            (
                f"{_host(host)}:{port}",
                one_node_options(
                    urlunsplit(
                        (
                            head.scheme,
                            f"{credentials}{at}{_host(host)}:{port}",
                            "/0",
                            head.query,
                            "",
                        )
                    )
                ),
            )
            for host, port in nodes
        ]
    if parts.scheme in ("redis", "rediss"):
        return [(f"{_host(parts.hostname or 'localhost')}:{parts.port or REDIS_DEFAULT_PORT}", url)]
    return []


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _plain(url: str) -> str:
    """``url`` without TLS: scheme ``redis``, no query (its options may be TLS ones)."""
    parts = urlsplit(url)
    return urlunsplit(("redis", parts.netloc, parts.path, "", ""))


def _tls(url: str) -> str:
    """``url`` with TLS that takes any certificate: whether the other end speaks TLS at
    all is the question here, not whom it proves to be."""
    parts = urlsplit(url)
    return urlunsplit(("rediss", parts.netloc, parts.path, "ssl_cert_reqs=none", ""))


def _client(url: str, timeout: float) -> Redis:
    client: Redis = Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )
    return client


async def _answers_in_plain_text(url: str, timeout: float) -> bool:
    """True if the Redis at ``url`` answers a plain-text PING (any reply: a refusal
    such as NOAUTH is an answer too)."""
    return await _answers(_plain(url), timeout)


async def _answers_with_tls(url: str, timeout: float) -> bool:
    """True if the Redis at ``url`` answers a PING over TLS (any reply)."""
    return await _answers(_tls(url), timeout)


async def _answers(url: str, timeout: float) -> bool:
    client = _client(url, timeout)
    try:
        await client.ping()
    except (RedisConnectionError, RedisTimeoutError, OSError):
        return False
    except RedisError:
        return True
    finally:
        await client.aclose()
    return True


async def _certificate_refused(url: str, timeout: float) -> str | None:
    """Why this machine refused the certificate of the Redis at ``url`` (a TLS URL,
    as given), or None if that is not why a PING fails."""
    client = _client(url, timeout)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, ssl.SSLCertVerificationError):
                return str(cause.verify_message or cause.reason or "certificate verify failed")
            cause = cause.__cause__ or cause.__context__
        return None
    finally:
        await client.aclose()
    return None


def _with_ca(url: str) -> str:
    """``url`` naming a CA file to trust, for the operator to fill in."""
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, "ssl_ca_certs=/path/to/its-ca.pem") if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


async def _cluster_enabled(url: str, timeout: float) -> str | None:
    """``cluster_enabled`` ("0" or "1") as the Redis at ``url`` (one node) says it in
    ``INFO cluster``; None if it does not say (unreachable, INFO refused)."""
    client = _client(url, timeout)
    try:
        info = await client.info("cluster")
    except (RedisError, OSError):
        return None
    finally:
        await client.aclose()
    found = info.get("cluster_enabled")
    return None if found is None else str(found)


async def cluster_node(url: str, timeout: float = PROBE_TIMEOUT_S) -> WrongKind | None:
    """A ``redis://`` or ``rediss://`` URL (a standalone Redis, as the node will use
    it) naming a node of a Redis Cluster, or None. Such a node answers PING, so the
    node served, and every request touching a key of another node's slots failed."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return None
    if await _cluster_enabled(url, timeout) != "1":
        return None
    node = _nodes(url)[0][0]
    use = urlunsplit((f"{parts.scheme}+cluster", parts.netloc, "", parts.query, ""))
    return WrongKind(node, "is a Redis Cluster node", use)


@dataclass(frozen=True)
class AccessRefused:
    """The Redis user may not ``doing`` (words for an operator), as Redis ``said`` (its
    NOPERM reply); ``grant`` is the ACL rule that would let it."""

    doing: str
    said: str
    grant: str


#: One step of the access probe: what it does, in words; the ACL rule it needs; the call.
_Step = tuple[str, str, Callable[[], Awaitable[object]]]


def _access_steps(client: Redis | RedisCluster, key: str, prefix: str) -> list[_Step]:
    """What a node does to Redis, one command a step (so a refusal names the thing
    refused), on ``key`` only: its kinds of keys, its streams, its Lua scripts."""
    keys = f"~{prefix}*"
    under = f"keys under the prefix {prefix!r}"

    async def stream() -> None:
        await client.xadd(key, {b"p": b"1"}, maxlen=1)
        await client.pexpire(key, ACCESS_PROBE_TTL_MS)
        await client.xread({key: "0-0"}, count=1)

    return [
        (f"write {under}", keys, lambda: client.set(key, b"1", px=ACCESS_PROBE_TTL_MS)),
        (f"read {under}", keys, lambda: client.get(key)),
        (f"delete {under}", keys, lambda: client.delete(key)),
        ("use streams (XADD, PEXPIRE, XREAD)", "+@stream", stream),
        (
            "load Lua scripts (SCRIPT LOAD)",
            "+@scripting",
            lambda: client.script_load(ACCESS_PROBE.source),
        ),
        (
            "run Lua scripts (EVALSHA)",
            "+@scripting",
            lambda: client.evalsha(ACCESS_PROBE.sha, 1, key),
        ),
    ]


async def access_refused(
    client: Redis | RedisCluster, key: str, prefix: str
) -> AccessRefused | None:
    """The first thing a node needs of Redis that an ACL forbids its user, or None:
    each step of :func:`_access_steps` on ``key`` (under ``prefix``), which is gone
    afterwards. Any other failure (Redis stops answering, …) is None: not an ACL's."""
    try:
        for doing, grant, step in _access_steps(client, key, prefix):
            try:
                await step()
            except NoPermissionError as exc:
                return AccessRefused(doing, str(exc), grant)
    except (RedisError, RedisClusterException, OSError):
        return None
    finally:
        with contextlib.suppress(RedisError, RedisClusterException, OSError):
            await client.delete(key)
    return None


async def wrong_kind(url: str, timeout: float = PROBE_TIMEOUT_S) -> WrongKind | None:
    """Why the Redis that ``url`` (a URL the checks of solrace-server accepted) names
    cannot be used as the URL says although it answers, or None when nothing such is
    found (it is unreachable, or the failure was something else)."""
    scheme = urlsplit(url).scheme
    for node, node_url in _nodes(url):
        if scheme in _TLS_SCHEMES and await _answers_in_plain_text(node_url, timeout):
            plain = scheme.removeprefix("rediss")
            return WrongKind(node, "answers without TLS", f"redis{plain}{url[len(scheme) :]}")
        if scheme not in _TLS_SCHEMES and await _answers_with_tls(node_url, timeout):
            return WrongKind(node, "answers only with TLS", f"rediss{url[len('redis') :]}")
        if scheme in _TLS_SCHEMES:
            why = await _certificate_refused(node_url, timeout)
            if why is not None:
                says = f"sent a TLS certificate this machine does not trust ({why})"
                return WrongKind(node, says, _with_ca(url))
        if scheme in CLUSTER_SCHEMES and await _cluster_enabled(node_url, timeout) == "0":
            return WrongKind(node, "is not a Redis Cluster (cluster support disabled)", node_url)
    return None
