"""The real Redis that tests use, and cleaning up after them.

Tests share the machine's Redis with other runs, so each test uses its own key prefix
and deletes exactly that prefix's keys afterwards (never FLUSHDB)."""

from __future__ import annotations

import os

from solrace.store import Store

REDIS_URL = os.environ.get("SOLRACE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


async def delete_prefix(prefix: str) -> None:
    store = await Store.connect(REDIS_URL, prefix)
    try:
        await store.delete_all()
    finally:
        await store.close()
