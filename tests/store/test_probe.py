"""The start-up checks of a Redis that answers PING but cannot serve a node
(``solrace.store.probe``): a user whose ACL forbids what the store does, and a
``redis://`` URL naming a Redis Cluster node. Both started, then failed every loop
turn or every request (the operator audit); solrace-server now exits 2 on each
(tests/net/test_server_cli.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis.asyncio
from solrace.store import Store, StoreForbidden, StoreUnavailable
from solrace.store.probe import ACCESS_PROBE_TTL_MS, cluster_node

from tests.support.redis import CLUSTER_URL, REDIS_URL, new_prefix

from .conftest import make_rooms


async def test_a_user_who_may_do_everything_is_refused_nothing_and_no_key_is_left(
    store: Store,
) -> None:
    """On Redis, a cluster and the embedded engine: the probe passes, and its key is
    gone (on a cluster its script is loaded on the key's master, as the store's are)."""
    assert await store.refused_access() is None
    assert await store.delete_all() == 0


#: ACL rules of a user, what the probe says it may not do, and the rule it needs.
_ACLS = [
    (("~other:*", "+@all"), "write keys under the prefix", "~{prefix}*"),
    (("%R~{prefix}*", "+@all"), "write keys under the prefix", "~{prefix}*"),
    (("%W~{prefix}*", "+@all"), "read keys under the prefix", "~{prefix}*"),
    (("~*", "+@all", "-del"), "delete keys under the prefix", "~{prefix}*"),
    (("~*", "+@all", "-@stream"), "use streams (XADD, PEXPIRE, XREAD)", "+@stream"),
    (("~*", "+@all", "-@scripting"), "load Lua scripts (SCRIPT LOAD)", "+@scripting"),
    (("~*", "+@all", "-evalsha"), "run Lua scripts (EVALSHA)", "+@scripting"),
]


@pytest.mark.parametrize(("rules", "doing", "grant"), _ACLS)
async def test_what_an_acl_forbids_the_node_is_named(
    private_redis: Callable[..., str], rules: tuple[str, ...], doing: str, grant: str
) -> None:
    """PING passed whatever the ACL: a node with such a user started, then logged a
    NOPERM traceback each loop turn (keys) or answered "internal server error" (no
    scripts). The probe names the first thing refused, and leaves no key behind that
    does not expire by itself."""
    url = private_redis()
    prefix = new_prefix()
    admin = redis.asyncio.from_url(url)
    try:
        acl = [r.format(prefix=prefix) for r in rules]
        await admin.execute_command("ACL", "SETUSER", "probed", "on", ">pw", "&*", *acl)
        store = await Store.connect(url.replace("://", "://probed:pw@"), prefix=prefix)
        try:
            refused = await store.refused_access()
        finally:
            await store.close()
        assert refused is not None
        assert refused.doing.startswith(doing), refused
        assert refused.grant == grant.format(prefix=prefix)
        assert "no permissions" in refused.said, refused
        for key in await admin.keys(f"{prefix}*"):  # only where DEL is refused
            assert 0 < await admin.pttl(key) <= ACCESS_PROBE_TTL_MS, key
    finally:
        await admin.aclose()


def _first_node(cluster_url: str) -> str:
    """host:port of the first node a cluster URL names."""
    return cluster_url.split("://", 1)[1].split(",", 1)[0].split("/", 1)[0]


async def test_a_plain_url_naming_a_cluster_node_says_use_the_cluster_scheme() -> None:
    """redis:// to a cluster node answered PING: the node served, and every request
    failed "store is down". cluster_node says which node and the URL to use."""
    node = _first_node(CLUSTER_URL)
    wrong = await cluster_node(f"redis://{node}/0")
    assert wrong is not None
    assert (wrong.node, wrong.says, wrong.use) == (
        node,
        "is a Redis Cluster node",
        f"redis+cluster://{node}",
    )


async def test_a_plain_url_naming_a_standalone_redis_is_not_a_cluster_node() -> None:
    assert await cluster_node(REDIS_URL) is None
    assert await cluster_node(CLUSTER_URL) is None  # the right scheme: nothing to say


async def test_an_acl_changed_under_a_running_store_is_an_outage_with_its_reason(
    private_redis: Callable[..., str],
) -> None:
    """Start-up checks the user's ACL; one changed while a node runs raised a plain
    StoreError, and every loop turn of the node logged a traceback and counted a
    defect (the operator audit). It is StoreForbidden now, a StoreUnavailable — what
    the node's loops treat as an outage, logged once with its reason — and serving
    resumes when the ACL is mended."""
    assert issubclass(StoreForbidden, StoreUnavailable)
    url = private_redis()
    prefix = new_prefix()
    admin = redis.asyncio.from_url(url)
    await admin.execute_command("ACL", "SETUSER", "node", "on", ">pw", "&*", "~*", "+@all")
    store = await Store.connect(url.replace("://", "://node:pw@"), prefix=prefix)
    try:
        await make_rooms(store, "r")
        assert await store.append_event("r", b"e1") == 1
        await admin.execute_command("ACL", "SETUSER", "node", "resetkeys", "~other:*")
        with pytest.raises(StoreForbidden, match=r"redis refused the node's user \(its ACL\)"):
            await store.append_event("r", b"e2")
        await admin.execute_command("ACL", "SETUSER", "node", "~*")
        assert await store.append_event("r", b"e2") == 2
    finally:
        await store.close()
        await admin.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "redis+cluster://127.0.0.1:1?read_from_replicas=true",  # the cluster client's own
        "redis+cluster://127.0.0.1:1?ssl_cert_reqs=none",  # one it drops without TLS
        "rediss+cluster://127.0.0.1:1,127.0.0.1:2?read_from_replicas=true",
    ],
)
async def test_a_cluster_urls_own_options_do_not_break_the_one_node_probes(url: str) -> None:
    """A cluster that did not answer at start-up (the node serves on, requests failing
    until it does) was probed one node at a time, each node's URL carrying the cluster
    URL's query: an option the cluster client takes and a one-node one does not raised
    TypeError as the probe connected, and solrace-server died with a traceback."""
    from solrace.net.main import auth_refused
    from solrace.store.probe import wrong_kind

    assert await wrong_kind(url, timeout=0.5) is None
    assert await auth_refused(url) is None


def test_a_one_node_url_keeps_the_options_a_one_node_client_takes() -> None:
    from solrace.store.probe import one_node_options

    assert one_node_options("rediss://u:p@h:1/0?socket_timeout=2&read_from_replicas=true") == (
        "rediss://u:p@h:1/0?socket_timeout=2"
    )
    assert one_node_options("redis://h:1/0?ssl_cert_reqs=none") == "redis://h:1/0"
    assert one_node_options("redis://h:1/0") == "redis://h:1/0"
