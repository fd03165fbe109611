"""A dead or hung Redis: StoreUnavailable for every caller, promptly, never a hang."""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import AsyncIterator

import pytest
from solrace.store import Store, StoreUnavailable, token_digest

from tests.support.faults import NOT_STORE_CALLS, STORE_CALLS
from tests.support.redis import REDIS_URL, new_prefix

from .conftest import make_rooms

DEAD_URL = "redis://127.0.0.1:1/0"


async def test_real_redis_is_reachable() -> None:
    """Fails (not skips) without Redis: the suite must have run the Lua on a real server."""
    store = await Store.connect(REDIS_URL, prefix=new_prefix())
    try:
        assert await store.ping(), f"Redis not reachable at {REDIS_URL}"
        assert not store.embedded
    finally:
        await store.close()


async def _every_call(store: Store) -> list[object]:
    calls = [
        *(store.append_move("r", f"p{i}", 0, b"m", b"e", round_no=1) for i in range(20)),
        store.append_event("r", b"e"),
        store.append_event("r", b"e", expected_version=0),
        store.create_room("r", "CODE", b"m", True, 1),
        store.load_meta("r"),
        store.save_meta("r", b"m"),
        store.room_for_code("CODE"),
        store.listed_rooms(),
        store.unlist("r"),
        store.expire_room("r", 10),
        store.settle_expiry("r", unlist=True),
        store.events_since("r", 0),
        store.version("r"),
        store.move_log("r", "p"),
        store.log_length("r", "p"),
        store.tail({"r": 0}, block_ms=100),
        store.append_event("r", b"joins", token=("p", token_digest("t"))),
        store.racer_for_token("r", token_digest("t")),
        store.claim_seat(token_digest("t"), "r", 0, 300),
        store.claimed_seat(token_digest("t")),
        store.release_seat_claim(token_digest("t")),
        store.save_result("x", b""),
        store.load_result("x"),
        store.reveal_round("r", 1),
        store.round_over("r"),
        store.round_ended("r"),
        store.time_ms(),
        store.older_nodes(),
    ]
    return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)


def test_the_fault_helpers_know_every_call_of_the_store() -> None:
    """StoreFaults fails the calls it knows: one it does not know would go on while a
    test says Redis is down (list_behind_lobbies and the wake-ups did)."""
    coroutines = {
        name
        for name, member in inspect.getmembers(Store)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }
    assert coroutines - set(NOT_STORE_CALLS) == set(STORE_CALLS)


async def test_dead_redis_url() -> None:
    store = await Store.connect(DEAD_URL, timeout=1)
    try:
        assert not await store.ping()
        results = await _every_call(store)
        assert all(isinstance(r, StoreUnavailable) for r in results), results
        # each waiting caller got its own exception object
        assert len({id(r) for r in results}) == len(results)
    finally:
        await store.close()


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """A TCP server that accepts connections and never answers (a hung Redis)."""
    held: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await reader.read()  # until the client hangs up

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        for w in held:
            w.close()
        server.close()


async def test_hung_redis_times_out(silent_server: str) -> None:
    store = await Store.connect(silent_server, timeout=0.3)
    try:
        results = await asyncio.wait_for(
            asyncio.gather(
                *(store.append_move("r", f"p{i}", 0, b"m", b"e", round_no=1) for i in range(10)),
                store.tail({"r": 0}, block_ms=100),
                store.version("r"),
                return_exceptions=True,
            ),
            5,
        )
        assert all(isinstance(r, StoreUnavailable) for r in results), results
        # Each says what happened: the node logs it as its one line about the outage
        # ("store unavailable error=…"); the tail's said "redis unavailable:
        # TimeoutError: " and nothing more.
        assert all("Timeout" in str(r).split("TimeoutError:", 1)[-1] for r in results), results
    finally:
        await store.close()


async def test_outage_and_recovery_on_the_fake() -> None:
    """fakeredis can switch its connection off and on between two commands, which no
    real engine can (a stopped one may apply a command it never answered): the test
    double stays for exactly this."""
    store = Store.fake()
    try:
        assert store.embedded
        await make_rooms(store, "r")
        assert (await store.append_move("r", "a", 0, b"m", b"e", round_no=1)).accepted
        store._fake_server.connected = False
        assert not await store.ping()
        results = await asyncio.wait_for(
            asyncio.gather(
                *(store.append_move("r", "a", 1, b"m", b"e", round_no=1) for _ in range(5)),
                return_exceptions=True,
            ),
            5,
        )
        assert all(isinstance(r, StoreUnavailable) for r in results)
        store._fake_server.connected = True
        assert await store.ping()
        # the outage wrote nothing; the flusher is alive again
        assert (await store.append_move("r", "a", 1, b"m", b"e", round_no=1)).accepted
        assert await store.log_length("r", "a") == 2
    finally:
        await store.close()


async def test_a_cancelled_caller_ends_cancelled_even_when_redis_py_swallows_it(
    store: Store,
) -> None:
    """redis-py sometimes swallows a cancellation that arrives mid-command; a node's
    background loop then never stopped (Node.stop hung). Each try cancels a loop of
    store calls at a random moment: the loop must end, cancelled, every time."""
    rng = random.Random(5)

    calls = [0]

    async def loop(sibling: Store) -> None:
        while True:
            calls[0] += 1
            await sibling.renew_lease("n1", 5000)

    for _ in range(30):
        sibling = await store.sibling()  # fresh connections, as a new node has
        task = asyncio.create_task(loop(sibling))
        await asyncio.sleep(rng.random() * 0.003)
        task.cancel()
        at_cancel = calls[0]
        done, _ = await asyncio.wait({task}, timeout=2)
        # Said in full if it fails (seen once, in a CI run under heavy load): whether
        # the loop went on calling (a cancellation swallowed) or one call hung, and where.
        assert done and task.cancelled(), (
            f"a cancelled store caller kept running: {calls[0] - at_cancel} calls since"
            f" the cancel, cancelling() = {task.cancelling()}, at {task.get_stack()}"
        )
        await sibling.close()


#: More commands at once than redis-py's connection pool holds by default (100).
BURST = 300


async def test_a_burst_of_commands_waits_for_a_connection_instead_of_failing(store: Store) -> None:
    """Many requests at once (a reconnect storm after a drain: every racer resumes)
    once made redis-py's pool refuse the 101st command ("Too many connections"), which
    the node took for an outage: 50 of 150 concurrent ``leave``s were answered
    ``unavailable`` from a healthy Redis. Commands past the pool's size now wait for a
    connection, as long as the store's timeout."""
    results = await asyncio.gather(
        *(store.listed_rooms() for _ in range(BURST)), return_exceptions=True
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    assert failures == []
