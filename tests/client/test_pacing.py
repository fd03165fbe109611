"""The client library paces itself: a program sending requests as fast as it can stays
inside the rate limit a server applies by default (20 messages/s, bursts of 40), on a
node with exactly that default; the same flood, unpaced, is disconnected (1008)."""

from __future__ import annotations

import asyncio

from solrace_client import RaceClient
from solrace_client.bot import BotHooks, run_bot
from solrace_client.pacing import SERVER_DEFAULT_PACE

from tests.net.conftest import Cluster


async def test_a_flood_of_requests_is_paced_inside_the_default_limit(cluster: Cluster) -> None:
    server = await cluster.node(rate=None)  # the server's default limit
    paced = await RaceClient.connect(server.url)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.gather(*(paced.ping() for _ in range(60)))
    took = loop.time() - began
    assert paced.close_code is None
    # a burst of 20, then 18/s: the other 40 take about 2.2 s
    assert took > (60 - SERVER_DEFAULT_PACE.burst - 1) / SERVER_DEFAULT_PACE.rate_per_s
    await paced.close()

    unpaced = await RaceClient.connect(server.url, pace=None)
    results = await asyncio.gather(*(unpaced.ping() for _ in range(60)), return_exceptions=True)
    assert any(isinstance(r, ConnectionError) for r in results)
    await asyncio.wait_for(unpaced.closed, 5)
    assert unpaced.close_code == 1008


async def test_bots_racing_flat_out_never_trip_the_default_limit(cluster: Cluster) -> None:
    server = await cluster.node(rate=None)
    joined: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
    first = asyncio.create_task(
        run_bot(
            server.url,
            quick_variant="yukon",
            name="Ann",
            max_moves=120,
            rng_seed=1,
            hooks=BotHooks(joined=joined.set_result),
        )
    )
    await asyncio.wait_for(joined, 10)
    second = run_bot(
        server.url, quick_variant="yukon", name="Bob", strategy="random", max_moves=120, rng_seed=2
    )
    async with asyncio.timeout(60):
        result, _ = await asyncio.gather(first, second)
    assert [s["name"] for s in result["standings"]] != []
    assert {s["status"] for s in result["standings"]} <= {"finished", "resigned", "stuck"}
