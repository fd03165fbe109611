"""Fixtures: servers on real sockets, over real Redis, a real Redis Cluster AND the
embedded engine.

``cluster`` starts as many server nodes as a test asks for, all on one backend (one
Redis or Redis Cluster key prefix, or one embedded engine — the private valkey-server
solrace-server runs without a Redis URL — on the test's own data directory), so a test
can put racers of one room on different nodes or restart a node mid-race. Real Redis
and the test cluster (tests/support/redis.py) must be running: if they are not, these
tests fail, they never skip.

Nodes lift the rate limit (tests race fast), so clients do not pace themselves either
(``pacing.SERVER_DEFAULT_PACE`` is None while a cluster lives) — unless a test asks for
a node with the server's default limit, ``cluster.node(rate=None)``: then clients pace
as they do for a user, against the limit a user's server has.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import uvloop
from solrace.net.admission import Admission
from solrace.net.server import RaceServer
from solrace.rooms.node import Node
from solrace.store import Store
from solrace_client import pacing

from tests.support.frames import keep_every_frame
from tests.support.redis import BACKEND_URLS, connect_or_fail, delete_prefix, new_prefix

#: A room secret whose round-1 Yukon deal the test solver wins quickly (checked by
#: the tests that use it: they fail, loudly, if it ever stops being solvable).
SOLVABLE_SECRET = bytes([2]) * 32


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Servers in these tests run on uvloop, the loop ``solrace-server`` runs on where
    it is installed (as it is wherever these tests run: a dependency). The room core's
    tests (tests/rooms) run on asyncio's own loop as well, the fallback."""
    return {"uvloop": uvloop.new_event_loop}


class Cluster:
    def __init__(self, backend: str, prefix: str, data_dir: Path) -> None:
        self.backend = backend
        self.data_dir = data_dir
        self._unpaced = pytest.MonkeyPatch()  # undone by close() or a default-limit node
        self._unpaced.setattr(pacing, "SERVER_DEFAULT_PACE", None)
        self.prefix = prefix
        self.stores: list[Store] = []
        self.servers: list[RaceServer] = []
        #: Every node started, those a test killed or crashed too (tests/support/faults.py
        #: takes a crashed one out of ``servers`` and never stops it).
        self.started: list[RaceServer] = []
        self._first: Store | None = None

    async def store(self) -> Store:
        if self.backend == "embedded":
            engine = self._first.engine if self._first is not None else None
            if self._first is None or engine is None or engine.stopped:
                # The first node, or every node so far has stopped, and the engine with
                # them: start it again on the same data directory, as a restart would.
                self._first = await Store.start_embedded(self.data_dir, prefix=self.prefix)
                store = self._first
            else:
                store = await self._first.sibling()
        else:
            store = await connect_or_fail(self.backend, self.prefix)
        self.stores.append(store)
        return store

    async def node(
        self,
        secret: bytes | Callable[[], bytes] = SOLVABLE_SECRET,
        rate: float | None = 100_000.0,
        admission: Admission | None = None,
        burst: float | None = None,
        **node_args: object,
    ) -> RaceServer:
        """A started server node on this cluster's backend. Tests race fast: the rate
        limit is lifted unless a test sets it (None: the server's default limit, and
        clients pace themselves again; ``burst``: its bucket, ``rate`` unless given),
        countdowns last 0.2 s, and a certification solves one candidate at a time, so
        the deal is the known one, announced as soon as it is found (unless a test
        of that passes ``announce_step_s``)."""
        store = await self.store()
        source = secret if callable(secret) else (lambda: secret)
        if rate is None:
            self._unpaced.undo()  # clients pace again, as against a user's server
            limits: dict[str, float] = {}
        else:
            limits = {"rate_per_s": rate, "rate_burst": rate if burst is None else burst}
        node = Node(
            store,
            name=f"node{len(self.servers)}",
            room_secret=source,
            **limits,
            # The known deal: candidate 0, the first won in order (unless a test asks).
            **{"candidates_in_flight": 1, "countdown_ms": 200, "announce_step_s": 0.0, **node_args},  # type: ignore[arg-type]
        )
        server = RaceServer(node, "127.0.0.1", 0, admission)
        await server.start()
        self.servers.append(server)
        self.started.append(server)
        return server

    async def kill(self, server: RaceServer) -> None:
        """Stop a node abruptly-ish: close its connections (as a crash would drop
        them) without draining."""
        self.servers.remove(server)
        if server.server is not None:
            server.server.close(close_connections=True)
            await server.server.wait_closed()
        await server.node.stop()

    async def close(self) -> None:
        """Drain the nodes, stop the ones killed or crashed, close the stores, then
        delete the prefix's keys: once no task of any node can write again (a crashed
        node's retries ran on after the fixture), and whatever failed before (a drain
        that raised skipped the delete, and left the test's rooms in Redis)."""
        self._unpaced.undo()
        failed: list[BaseException] = []
        for server in list(self.servers):
            try:
                await server.drain()
            except Exception as exc:
                failed.append(exc)
        for server in self.started:
            if server not in self.servers:  # killed (stopped once) or crashed (never)
                await server.node.stop()
        for store in self.stores:  # killed nodes' too; the engine stops with the last
            try:
                await store.close()
            except Exception as exc:
                failed.append(exc)
        if self.backend in BACKEND_URLS:
            await delete_prefix(self.prefix, BACKEND_URLS[self.backend])
        if failed:
            raise failed[0]


async def stop_own_server(server: RaceServer) -> None:
    """Stop a server a test made itself, not the ``cluster`` fixture: its connections
    closed, its node stopped, then its store closed."""
    if server.server is not None:
        server.server.close(close_connections=True)
    await server.node.stop()
    await server.node.store.close()


@contextlib.asynccontextmanager
async def cluster_on(backend: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A :class:`Cluster` on ``backend`` (its nodes started as the test asks), closed
    on the way out."""
    c = Cluster(backend, new_prefix(), tmp_path / "engine")
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(autouse=True)
def _every_frame_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests here check the frames servers send, each of them (a leaked card, the
    order, the refusals): their clients keep every frame they read."""
    keep_every_frame(monkeypatch)


@pytest.fixture(params=["redis", "cluster", "embedded"])
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster_on(request.param, tmp_path) as c:
        yield c
