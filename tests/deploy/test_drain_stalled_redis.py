"""A node stopped (SIGTERM) while its Redis stalls — a network partition, a Redis
frozen by a fork or a failover: what deploy/'s files allow a drain (the systemd unit's
``TimeoutStopSec=20``, compose's ``stop_grace_period: 20s``, the Deployment's 30 s of
which its ``preStop`` takes 5) and what the node says meanwhile (an operator audit).

The stall is made by a TCP proxy between the node and the machine's Redis
(tests/support/flaky_link.py), so the shared Redis itself is never disturbed."""

from __future__ import annotations

import asyncio
import signal
import time
import urllib.parse

from solrace.store import Store, StoreUnavailable
from solrace_client import RaceClient

from tests.support.flaky_link import FlakyLink
from tests.support.redis import REDIS_URL, delete_prefix, new_prefix
from tests.support.server_process import solrace_server

#: What deploy/solrace@.service (TimeoutStopSec) and deploy/compose.yaml
#: (stop_grace_period) give a node's drain before SIGKILL.
STOP_TIMEOUT_S = 20


def _through(proxy: FlakyLink) -> str:
    url = urllib.parse.urlsplit(REDIS_URL)
    return url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()


async def test_a_drain_on_a_stalled_redis_ends_before_the_unit_kills_it() -> None:
    """Four racers in one lobby on a node, Redis stalls, the node gets SIGTERM.
    docs/server.md ("Shutdown") and deploy/README.md say a drain takes at most 10 s.
    Found: each racer's "offline" waited out the store's 5 s timeout one after another
    (``could not record a racer offline: retrying`` every 5 s), then the hand-off 5 s
    more: 25 s for four racers, 45 s for a full room of eight — past the 20 s the unit
    and compose allow, so the node was SIGKILLed (the unit then "failed"). Now the
    drain stops at DRAIN_LIMIT_S (15 s) and says so; the hand-off gets a second."""
    url = urllib.parse.urlsplit(REDIS_URL)
    prefix = new_prefix("drain")
    try:
        async with FlakyLink(url.port or 6379, seed=0) as proxy:
            args = ["--redis-url", _through(proxy), "--key-prefix", prefix]
            async with solrace_server("none", args=args) as server:
                server.expect_clean_exit = False  # the test stops it and judges the status
                host = await RaceClient.connect(server.url)
                guests = [await RaceClient.connect(server.url) for _ in range(3)]
                clients = [host, *guests]
                try:
                    await host.create("yukon", "host", deals="random", max_racers=8)
                    for i, guest in enumerate(guests):
                        await guest.join(host.code or "", f"guest{i}")
                    proxy.stall(new_too=True)
                    began = time.monotonic()
                    server.proc.send_signal(signal.SIGTERM)
                    # every client is told to go at once (1001), whatever Redis does
                    for client in clients:
                        await asyncio.wait_for(client.closed, 5)
                    assert {c.close_code for c in clients} == {1001}
                    status = await asyncio.wait_for(server.proc.wait(), STOP_TIMEOUT_S + 30)
                    took = time.monotonic() - began
                finally:
                    for client in clients:
                        await client.close()
                    proxy.flow()
                assert status == 0, server.log
                assert "the drain's time is up" in server.log, server.log
                assert took < STOP_TIMEOUT_S, (
                    f"the drain took {took:.1f} s: a unit with TimeoutStopSec={STOP_TIMEOUT_S}"
                    f" would have SIGKILLed it\n{server.log}"
                )
    finally:
        await delete_prefix(prefix)


async def test_a_timed_out_wake_up_read_says_what_timed_out() -> None:
    """The node's read of its wake-ups, timed out on a stalled Redis, logged
    ``reading this node's wake-ups failed: … error=redis unavailable: TimeoutError: ``
    — asyncio's timeout has no message. docs/deploy.md ("A Redis far away") says the
    tail read's timeout now reads ``Timeout reading from Redis: no answer to a blocking
    read in 5.5 s``; the wake-up read, on the same blocking connection, did not."""
    url = urllib.parse.urlsplit(REDIS_URL)
    prefix = new_prefix("wakes")
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        store = await Store.connect(_through(proxy), prefix=prefix, timeout=0.5)
        try:
            await store.wakes("n1", "0-0", block_ms=10)  # connected, nothing to read
            proxy.stall(new_too=True)
            try:
                await store.wakes("n1", "0-0", block_ms=100)
            except StoreUnavailable as exc:
                said = str(exc)
            else:
                raise AssertionError("a stalled Redis answered")
            assert not said.rstrip().endswith("TimeoutError:"), said
            assert "Timeout reading from Redis" in said, said
        finally:
            proxy.flow()
            await store.close()
            await delete_prefix(prefix)
