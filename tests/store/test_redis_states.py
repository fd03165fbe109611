"""A Redis that answers but will not keep a node's writes, for a state of its own: out
of memory under ``maxmemory`` (``noeviction``: OOM), a read-only replica (READONLY),
and the start-up and run-time checks of what INFO says about it (a replica; a
``maxmemory-policy`` that evicts keys).

OOM and READONLY were plain StoreErrors: every request answered ``internal`` (a bug's
code, no retry_after_ms), each loop turn of the node logged a traceback and counted a
defect, and /healthz said 200 (the memory audit, F1). They are :class:`StoreRefusing`
now, a :class:`StoreUnavailable`: an outage, with its reason in one line. A replica or
an evicting Redis was used without a word (F2): ``Store.replica`` and
``Store.eviction`` say so, from INFO (CONFIG may be forbidden, as on managed Redis).

Private redis-servers only: these tests reconfigure them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis.asyncio
from solrace.store import Store, StoreRefusing, StoreUnavailable
from solrace.store.keeping import Replica

from tests.support.redis import CLUSTER_URL, REDIS_URL, new_prefix

from .conftest import make_rooms


@pytest.fixture
async def admin_and_store(
    private_redis: Callable[..., str],
) -> AsyncIterator[tuple[redis.asyncio.Redis, Store]]:
    """A private Redis (an admin client on it) and a store on it."""
    url = private_redis()
    admin = redis.asyncio.from_url(url)
    store = await Store.connect(url, prefix=new_prefix())
    try:
        await make_rooms(store, "r")
        yield admin, store
    finally:
        await store.close()
        await admin.aclose()


async def _writes(store: Store, n: int) -> list[BaseException | object]:
    """One write of each path the store has: a script through the group commit (a
    move), a script on its own (an event), a plain command and a pipeline (a room)."""
    results: list[BaseException | object] = []
    for call in (
        lambda: store.append_move("r", "p", n, b"m", b"e", round_no=1),
        lambda: store.append_event("r", b"e"),
        lambda: store.create_room(f"room{n}", f"CODE{n}", b"meta", True, 1),
        lambda: store.renew_lease("node", 10_000),
    ):
        try:
            results.append(await call())
        except Exception as exc:  # what each raised, for the assertions
            results.append(exc)
    return results


async def test_out_of_memory_is_an_outage_that_says_so_and_ends(
    admin_and_store: tuple[redis.asyncio.Redis, Store],
) -> None:
    admin, store = admin_and_store
    assert not any(isinstance(r, Exception) for r in await _writes(store, 0))
    await admin.config_set("maxmemory-policy", "noeviction")
    await admin.config_set("maxmemory", 1)
    try:
        refused = await _writes(store, 1)
        assert all(isinstance(r, StoreRefusing) for r in refused), refused
        assert all(isinstance(r, StoreUnavailable) for r in refused)
        assert {str(r) for r in refused} == {
            "Redis is out of memory (maxmemory reached; maxmemory-policy noeviction refuses "
            "writes): free memory or raise maxmemory"
        }
        assert await store.version("r") == 2  # reads still work; nothing was written
    finally:
        await admin.config_set("maxmemory", 0)
    assert not any(isinstance(r, Exception) for r in await _writes(store, 1))


async def test_a_read_only_replica_is_an_outage_that_says_so_and_ends(
    private_redis: Callable[..., str],
    admin_and_store: tuple[redis.asyncio.Redis, Store],
) -> None:
    """A master demoted under a running node (a failover the node was not told of,
    an operator's REPLICAOF): writes get READONLY."""
    admin, store = admin_and_store
    master = redis.asyncio.from_url(private_redis())
    assert not any(isinstance(r, Exception) for r in await _writes(store, 0))
    port = master.connection_pool.connection_kwargs["port"]
    await admin.execute_command("REPLICAOF", "127.0.0.1", port)
    try:
        refused = await _writes(store, 1)
        assert all(isinstance(r, StoreRefusing) for r in refused), refused
        assert {str(r) for r in refused} == {
            "Redis is a read-only replica (READONLY): point --redis-url at the master"
        }
    finally:
        await admin.execute_command("REPLICAOF", "NO", "ONE")
        await master.aclose()
    assert not any(isinstance(r, Exception) for r in await _writes(store, 1))


async def test_a_replica_is_read_from_info(
    private_redis: Callable[..., str],
    admin_and_store: tuple[redis.asyncio.Redis, Store],
) -> None:
    admin, store = admin_and_store
    assert await store.replica() is None
    master = redis.asyncio.from_url(private_redis())
    port = master.connection_pool.connection_kwargs["port"]
    await admin.execute_command("REPLICAOF", "127.0.0.1", port)
    try:
        assert await store.replica() == Replica("", f"127.0.0.1:{port}")
    finally:
        await admin.execute_command("REPLICAOF", "NO", "ONE")
        await master.aclose()


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru", "allkeys-random"])
async def test_an_evicting_policy_is_read_from_info(
    admin_and_store: tuple[redis.asyncio.Redis, Store], policy: str
) -> None:
    """volatile-* evicts live rooms too: every room key carries the room's expiry."""
    admin, store = admin_and_store
    found = await store.eviction()
    assert (found.policy, found.evicts) == ("noeviction", False)
    await admin.config_set("maxmemory-policy", policy)
    found = await store.eviction()
    assert (found.policy, found.evicts) == (policy, True)
    assert found.detail == f"maxmemory-policy {policy}: Redis may delete a race's keys"


async def test_a_redis_that_refuses_info_cannot_be_checked(
    private_redis: Callable[..., str],
) -> None:
    store = await Store.connect(private_redis("--rename-command", "INFO", ""))
    try:
        found = await store.eviction()
        assert (found.policy, found.evicts) == ("unknown", False)
        assert found.detail.startswith("cannot check: Redis refused INFO")
        assert await store.replica() is None
    finally:
        await store.close()


async def test_the_shared_redis_and_every_master_of_the_cluster_are_read() -> None:
    for url, detail in ((REDIS_URL, "maxmemory-policy noeviction"), (CLUSTER_URL, "every master")):
        store = await Store.connect(url)
        try:
            found = await store.eviction()
            assert found.policy == "noeviction", found
            assert found.detail.startswith(detail), found
            assert await store.replica() is None
        finally:
            await store.close()


async def test_the_embedded_engine_never_evicts(tmp_path: Path) -> None:
    store = await Store.start_embedded(tmp_path / "data")
    try:
        found = await store.eviction()
        assert (found.policy, found.evicts) == ("noeviction", False)
        assert await store.replica() is None
    finally:
        await store.close()
