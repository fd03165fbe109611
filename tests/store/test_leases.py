"""Node leases say their release's store format (Store.renew_lease), so that a node
can find the live nodes of earlier releases on its store (Store.older_nodes), whose
leases said 1: a rolling upgrade from a release that cannot read what this one writes
(docs/deploy.md, "Upgrading"; tests/rooms/test_upgrade.py)."""

from __future__ import annotations

from solrace.store import STORE_FORMAT, Store


async def test_older_nodes_are_the_live_leases_of_an_earlier_format(
    store: Store, node2: Store
) -> None:
    await store.renew_lease("new-1", 10_000)
    assert await store._redis.get(store.keys.lease("new-1")) == str(STORE_FORMAT).encode()
    assert await store.older_nodes() == {}
    await node2._redis.set(node2.keys.lease("old-1"), b"1", px=10_000)
    await node2._redis.set(node2.keys.lease("odd-1"), b"what", px=10_000)
    await node2._redis.set(node2.keys.lease("later-1"), str(STORE_FORMAT + 1), px=10_000)
    assert await store.older_nodes() == {"old-1": 1, "odd-1": 1}
    await node2.drop_lease("old-1")
    await node2.drop_lease("odd-1")
    assert await store.older_nodes() == {}


async def test_a_renewal_says_whether_the_lease_was_still_current(store: Store) -> None:
    """A node whose lease lapsed and that renews it again learns so from the renewal
    (Node._rejoin_rooms): at its first renewal too, and never while it is current."""
    assert await store.renew_lease("n-1", 10_000) is False
    assert await store.renew_lease("n-1", 10_000) is True
    await store.drop_lease("n-1")  # what a lapse does
    assert await store.renew_lease("n-1", 10_000) is False
    assert await store.renew_lease("n-1", 10_000) is True
