"""The real Redis (and Redis Cluster) that tests use, and cleaning up after them.

Tests share the machine's Redis with other runs, so each test uses its own key prefix
and deletes exactly that prefix's keys afterwards (never FLUSHDB).

The cluster is a local three-master Redis Cluster, ``SOLRACE_TEST_CLUSTER_URL``
(default ``redis+cluster://127.0.0.1:7101``): ``.ci/run`` starts one with
``deploy/redis-cluster.sh``, and so can a developer (docs/store.md, "Redis Cluster").
Like Redis, it must be there: the tests on it fail, never skip, without it.
"""

from __future__ import annotations

import os

import pytest
from solrace.store import Store

REDIS_URL = os.environ.get("SOLRACE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
CLUSTER_URL = os.environ.get("SOLRACE_TEST_CLUSTER_URL", "redis+cluster://127.0.0.1:7101")

#: What each real backend of the parametrized fixtures connects to.
BACKEND_URLS = {"redis": REDIS_URL, "cluster": CLUSTER_URL}

_HOW_TO_START = {
    "redis": "set SOLRACE_TEST_REDIS_URL, or run bash .ci/run",
    "cluster": "start one: bash deploy/redis-cluster.sh start /tmp/solrace-cluster "
    "7101 7102 7103, or set SOLRACE_TEST_CLUSTER_URL",
}


async def connect_or_fail(backend: str, prefix: str) -> Store:
    """A store on the real ``backend`` ("redis" or "cluster") that answers, or a test
    failure saying how to provide it (never a skip: a green run must mean the store
    ran on that server)."""
    url = BACKEND_URLS[backend]
    store = await Store.connect(url, prefix=prefix)
    if not await store.ping():
        await store.close()
        pytest.fail(f"{backend} is not reachable at {url} ({_HOW_TO_START[backend]})")
    return store


async def delete_prefix(prefix: str, url: str = REDIS_URL) -> None:
    """Delete the prefix's keys (on a cluster: on every master)."""
    store = await Store.connect(url, prefix)
    try:
        await store.delete_all()
    finally:
        await store.close()
