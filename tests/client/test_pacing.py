"""The client library paces itself: a program sending requests as fast as it can stays
inside the rate limit a server applies by default (20 messages/s, bursts of 40), on a
node with exactly that default; the same flood, unpaced, is disconnected (1008). A
server whose operator lowered the limit says so in its handshake, and clients pace
inside that instead."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from solrace.protocol import SUBPROTOCOL
from solrace.protocol.handshake import RATE_LIMIT_HEADER
from solrace.protocol.limits import RATE_BURST, RATE_PER_S
from solrace_client import RaceClient
from solrace_client.bot import BotHooks, run_bot
from solrace_client.pacing import MIN_PACE_PER_S, SERVER_DEFAULT_PACE, Pace, pace_for
from solrace_client.results import load_result, race_id
from solrace_client.verify import verify_result
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from tests.net.conftest import Cluster
from tests.support.server_process import solrace_server

from .conftest import bot_entered


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
    first, _joined = await bot_entered(
        server.url, quick_variant="yukon", name="Ann", max_moves=120, rng_seed=1
    )
    second = run_bot(
        server.url, quick_variant="yukon", name="Bob", strategy="random", max_moves=120, rng_seed=2
    )
    async with asyncio.timeout(60):
        result, _ = await asyncio.gather(first, second)
    assert [s["name"] for s in result["standings"]] != []
    assert {s["status"] for s in result["standings"]} <= {"finished", "resigned", "stuck"}


async def test_bots_race_to_the_end_on_a_server_whose_limit_was_lowered() -> None:
    """A newcomer audit: an operator who lowered the limit (``--rate-per-s 2
    --rate-burst 4``) made every client unusable — paced to the default 18/s, two bots
    were closed 1008 and looped on "connection lost (too many requests); reconnecting"
    until killed. The server now tells each connection its limit at the handshake, and
    the client paces inside it: the race runs to its end, nothing is rate limited, and
    it verifies."""
    said: list[str] = []
    hooks = BotHooks(say=said.append)
    lowered = ["--rate-per-s", "2", "--rate-burst", "4"]
    async with solrace_server(args=lowered) as server:
        joined: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        host = asyncio.create_task(
            run_bot(
                server.url,
                create={"variant": "yukon", "max_racers": 2},
                host_start=True,
                name="Ann",
                max_moves=8,
                rng_seed=1,
                reconnect_attempts=2,
                hooks=dataclasses.replace(hooks, joined=joined.set_result),
            )
        )
        try:
            entered = await asyncio.wait_for(asyncio.shield(joined), 15)
            guest = run_bot(
                server.url,
                code=entered["code"],
                name="Bob",
                strategy="random",
                max_moves=8,
                rng_seed=2,
                reconnect_attempts=2,
                hooks=hooks,
            )
            async with asyncio.timeout(90):
                result = (await asyncio.gather(host, guest))[0]
        finally:
            host.cancel()
    assert not [line for line in said if "reconnecting" in line or "lost" in line], said
    assert "rate limited" not in server.log, server.log
    # each played its 8 moves (over 2 s, at a pace of 1.8/s) and resigned, unless the deal
    # ran out of moves first
    assert result["reason"] == "all_done"
    for standing in result["standings"]:
        assert standing["status"] in ("resigned", "stuck", "finished"), standing
        assert standing["status"] != "resigned" or standing["moves"] == 8, standing
    assert verify_result(load_result(race_id(entered["room"], result))).ok


def test_the_pace_is_the_stricter_of_the_default_and_the_servers_limit() -> None:
    default = SERVER_DEFAULT_PACE
    assert pace_for(None, default) == default  # a server older than the header
    assert pace_for((2.0, 4.0), default) == Pace.within(2.0, 4.0) == Pace(1.8, 2.0)
    assert pace_for((RATE_PER_S, RATE_BURST), default) == default
    assert pace_for((1e9, 1e9), default) == default  # a raised limit: the default still
    assert pace_for((1e9, 1.0), default) == Pace(default.rate_per_s, 1.0)  # each apart
    # absurdly low: one request every 10 s at the slowest, never a wait for ever
    assert pace_for((1e-300, 1.0), default) == Pace(MIN_PACE_PER_S, 1.0)
    assert pace_for((1e-300, 1.0), Pace(0.01, 1.0)) == Pace(0.01, 1.0)  # asked slower


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], SERVER_DEFAULT_PACE),  # no header: an older server
        (["2 4"], Pace(1.8, 2.0)),
        (["garbage"], SERVER_DEFAULT_PACE),
        (["nan nan"], SERVER_DEFAULT_PACE),
        (["-5 4"], SERVER_DEFAULT_PACE),
        (["2 4", "3 6"], SERVER_DEFAULT_PACE),  # said twice: which? neither
        (["1e-300 1"], Pace(MIN_PACE_PER_S, 1.0)),
    ],
)
async def test_connect_paces_to_the_limit_a_server_advertises(
    values: list[str], expected: Pace
) -> None:
    """Whatever a server puts in its handshake's ``Solrace-Rate-Limit``, connecting
    succeeds, and a header that cannot be read is ignored."""

    def advertise(ws: ServerConnection, request: Request, response: Response) -> None:
        for value in values:
            response.headers[RATE_LIMIT_HEADER] = value  # appends: Headers is a multidict

    async def silent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with serve(
        silent,
        "127.0.0.1",
        0,
        subprotocols=[Subprotocol(SUBPROTOCOL)],
        process_response=advertise,
    ) as fake:
        port = fake.sockets[0].getsockname()[1]
        client = await RaceClient.connect(f"ws://127.0.0.1:{port}", pace=SERVER_DEFAULT_PACE)
        assert client.pace == expected
        await client.close()


async def test_a_solrace_server_advertises_the_limit_it_runs(cluster: Cluster) -> None:
    """The node's own ``--rate-per-s``/``--rate-burst``, on every connection it takes."""
    server = await cluster.node(rate=2, burst=4)
    client = await RaceClient.connect(server.url, pace=SERVER_DEFAULT_PACE)
    assert client.ws.response is not None
    assert client.ws.response.headers[RATE_LIMIT_HEADER] == "2 4"
    assert client.pace == Pace.within(2, 4)
    await client.close()
