"""A node on a Redis that answers but will not keep its writes (the memory audit): out
of memory under ``maxmemory`` with ``noeviction``, a master demoted to a read-only
replica, a ``maxmemory-policy`` changed to one that evicts keys.

Before, OOM and READONLY were answered ``internal`` (a bug's code, no retry_after_ms),
the node logged a traceback per request and per loop turn and counted each a defect,
/healthz said 200, and a SIGTERM on a replica ended "the drain failed" with status 3.
Now each is an outage: ``unavailable`` with retry_after_ms, /healthz 503
``store_failing``, one log line with the reason, graces re-armed when it ends. A
policy turned evicting while the node runs is one error line and shows in /healthz.

Private redis-servers only: these tests reconfigure them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis.asyncio
from solrace.net import server as server_module
from solrace.net.server import RaceServer
from solrace.rooms.node import LEASE_RENEW_S, OUTAGE_REASONS_LOGGED, Node
from solrace.store import Store
from solrace.store.embedded import find_engine
from solrace_client import RaceClient, ServerError

from tests.support.redis import new_prefix
from tests.support.server_process import solrace_server

if TYPE_CHECKING:
    from solrace.store.keeping import Eviction


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        return exc.code, dict(json.loads(exc.read()))


@dataclass
class Running:
    admin: redis.asyncio.Redis
    server: RaceServer

    @property
    def health(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/healthz?format=json"

    async def report_within(self, seconds: float, status: int) -> dict[str, object]:
        """/healthz's JSON once its status is ``status`` (at most ``seconds`` from now:
        the node notices at its next lease renewal)."""
        deadline = time.monotonic() + seconds
        while True:
            got, report = await asyncio.to_thread(_get, self.health)
            if got == status or time.monotonic() > deadline:
                assert got == status, report
                return report
            await asyncio.sleep(0.1)

    def defects(self) -> float:
        return sum(
            sample.value
            for metric in self.server.metrics.defects.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        )


@contextlib.asynccontextmanager
async def serving(url: str, store_url: str | None = None) -> AsyncIterator[Running]:
    """A node (in this process, with its HTTP endpoints) on the Redis at ``url``,
    connected as ``store_url`` says (another user, say), and an admin client."""
    admin = redis.asyncio.from_url(url)
    store = await Store.connect(store_url or url, prefix=new_prefix())
    server = RaceServer(Node(store, name="states"), "127.0.0.1", 0)
    try:
        await server.start()
        yield Running(admin, server)
    finally:
        if server.server is not None:
            server.server.close(close_connections=True)
        await server.node.stop()
        await store.close()
        await admin.aclose()


@pytest.fixture
async def running(private_redis: Callable[..., str]) -> AsyncIterator[Running]:
    """A node (in this process, with its HTTP endpoints) on a private Redis."""
    async with serving(private_redis()) as node:
        yield node


async def test_healthz_is_503_while_the_redis_user_s_acl_refuses_what_the_node_does(
    private_redis: Callable[..., str],
) -> None:
    """PING passes whatever the ACL: a node whose Redis user lost its keys while it ran
    refused every request ``unavailable`` and /healthz still said 200, so a load
    balancer kept sending racers to it. Now /healthz is 503 (``store_failing``) until
    the node's calls succeed again."""
    url = private_redis()
    async with redis.asyncio.from_url(url) as setup:
        await setup.execute_command("ACL", "SETUSER", "node", "on", ">pw", "&*", "~*", "+@all")
    async with serving(url, url.replace("://", "://node:pw@")) as node:
        report = await node.report_within(5, 200)
        assert (report["store_answers"], report["store_failing"]) == (True, False)
        await node.admin.execute_command("ACL", "SETUSER", "node", "resetkeys", "~other:*")
        report = await node.report_within(LEASE_RENEW_S + 3, 503)
        assert report["status"] == "unavailable"
        assert (report["store_answers"], report["store_failing"]) == (True, True)
        await node.admin.execute_command("ACL", "SETUSER", "node", "~*")
        report = await node.report_within(LEASE_RENEW_S + 3, 200)
        assert report["store_failing"] is False


def _outage_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The node's "store unavailable" lines: those that say why."""
    return [
        r
        for r in caplog.records
        if r.getMessage() == "store unavailable" and getattr(r, "error", None) is not None
    ]


async def test_redis_out_of_memory_is_an_outage_with_its_reason_not_a_defect(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="solrace")
    ann = await RaceClient.connect(running.server.url)
    bob = await RaceClient.connect(running.server.url)
    try:
        await ann.create("klondike", "Ann")
        assert (await running.report_within(5, 200))["store_failing"] is False
        await running.admin.config_set("maxmemory-policy", "noeviction")
        await running.admin.config_set("maxmemory", 1)
        try:
            with pytest.raises(ServerError) as refused:
                await bob.request("create", variant="klondike", name="Bob")
            assert refused.value.code == "unavailable", refused.value.data
            assert refused.value.data.get("retry_after_ms", 0) > 0
            report = await running.report_within(LEASE_RENEW_S + 3, 503)
            assert (report["store_answers"], report["store_failing"]) == (True, True)
            for _ in range(3):  # further requests, further loop turns: still one line
                with pytest.raises(ServerError, match="unavailable"):
                    await ann.ready()
            await asyncio.sleep(LEASE_RENEW_S * 2)  # loop turns that fail again
        finally:
            await running.admin.config_set("maxmemory", 0)
        await running.report_within(LEASE_RENEW_S + 3, 200)
        await ann.ready()  # served again
    finally:
        await ann.close()
        await bob.close()
    lines = _outage_lines(caplog)
    assert [str(r.error) for r in lines] == [  # type: ignore[attr-defined]
        "Redis is out of memory (maxmemory reached; maxmemory-policy noeviction refuses "
        "writes): free memory or raise maxmemory"
    ]
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []  # no traceback
    assert running.defects() == 0
    assert any("disconnect grace re-armed" in r.getMessage() for r in caplog.records)


@pytest.fixture
def eviction_checks(monkeypatch: pytest.MonkeyPatch) -> asyncio.Queue[str]:
    """The policy each of the node's own eviction checks finds, as it finds it (every
    50 ms); installed before the node starts (ask for it before ``running``)."""
    checks = asyncio.Queue[str]()
    real = Store.eviction

    async def counted(store: Store, max_age_s: float = 0.0) -> Eviction:
        found = await real(store, max_age_s)
        if max_age_s == 0.0:  # the node's own check (/healthz reuses its answer)
            checks.put_nowait(found.policy)
        return found

    monkeypatch.setattr(Store, "eviction", counted)
    monkeypatch.setattr(server_module, "EVICTION_CHECK_S", 0.05)
    return checks


async def test_a_policy_turned_evicting_at_run_time_is_one_error_and_shows_in_healthz(
    eviction_checks: asyncio.Queue[str], running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """/healthz's status stays 200 (docs/deploy.md): every node shares that Redis, and
    503 from all of them would turn a risk into an outage."""
    caplog.set_level(logging.INFO, logger="solrace")
    checks = eviction_checks
    assert await checks.get() == "noeviction"
    await running.admin.config_set("maxmemory-policy", "allkeys-lru")
    while await checks.get() != "allkeys-lru":
        pass
    for _ in range(3):  # checks that find it still evicting
        assert await checks.get() == "allkeys-lru"
    report = await running.report_within(1, 200)
    assert (report["eviction"], report["eviction_detail"]) == (
        "allkeys-lru",
        "maxmemory-policy allkeys-lru: Redis may delete a race's keys",
    )
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        "Redis evicts keys now (maxmemory-policy allkeys-lru: Redis may delete a race's "
        "keys): a race's state could vanish; set maxmemory-policy noeviction"
    ]
    await running.admin.config_set("maxmemory-policy", "noeviction")
    while await checks.get() != "noeviction":
        pass
    assert (await running.report_within(1, 200))["eviction"] == "noeviction"
    assert any("no longer evicts keys" in r.getMessage() for r in caplog.records)


async def test_a_master_demoted_under_a_node_is_an_outage_and_sigterm_drains_cleanly(
    private_redis: Callable[..., str],
) -> None:
    """A SIGTERM on a replica ended "the drain failed; stopping anyway", status 3:
    giving the lease up was refused READONLY. solrace_server asserts status 0."""
    url, master_url = private_redis(), private_redis()
    admin = redis.asyncio.from_url(url)
    master_port = redis.asyncio.from_url(master_url).connection_pool.connection_kwargs["port"]
    try:
        async with solrace_server(args=["--redis-url", url]) as server:
            await admin.execute_command("REPLICAOF", "127.0.0.1", master_port)
            ann = await RaceClient.connect(server.url)
            try:
                with pytest.raises(ServerError) as refused:
                    await ann.request("create", variant="klondike", name="Ann")
                assert refused.value.code == "unavailable", refused.value.data
                assert refused.value.data.get("retry_after_ms", 0) > 0
            finally:
                await ann.close()
            health = server.url.replace("ws://", "http://") + "/healthz?format=json"
            deadline = time.monotonic() + LEASE_RENEW_S + 3
            while (got := await asyncio.to_thread(_get, health))[0] != 503:
                assert time.monotonic() < deadline, got  # the node notices at its renewal
                await asyncio.sleep(0.1)
            assert got[1]["store_failing"] is True
        assert "Traceback" not in server.log and "drain failed" not in server.log, server.log
        said = [line for line in server.lines if "store unavailable error=Redis " in line]
        assert len(said) == 1 and "replica" in said[0], server.log
    finally:
        await admin.execute_command("REPLICAOF", "NO", "ONE")
        await admin.aclose()


@contextlib.contextmanager
def _password_engine(socket_path: Path, password: str) -> Iterator[subprocess.Popen[bytes]]:
    """A Redis (the embedded engine's binary) on ``socket_path`` that requires
    ``password``: one started again on the same socket with another stands for a Redis
    whose password was changed and which was restarted under a running node."""
    argv = [str(find_engine()), "--port", "0", "--unixsocket", str(socket_path)]
    argv += ["--requirepass", password, "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(
        [*argv, "--dir", str(socket_path.parent)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no engine"
            time.sleep(0.01)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


async def test_an_outage_that_turns_into_refused_credentials_says_so(tmp_path: Path) -> None:
    """Redis restarted with another password under a running node (an operator rotated
    it and forgot the node's URL): the node logged the outage's first reason only,
    ``Connection closed by server`` (or refused) — and nothing more while Redis, up
    again, refused every reconnect ``invalid username-password pair``: the operator
    read a Redis that does not answer. A changed reason is a line of its own now, and
    a refused password says which setting to mend."""
    socket_path = tmp_path / "r.sock"
    url = f"unix://:old@{socket_path}"
    with _password_engine(socket_path, "old") as first:
        server_cm = solrace_server(args=["--redis-url", url])
        server = await server_cm.__aenter__()
    try:
        first.wait(10)  # stopped: the node's next lease renewal fails
        deadline = time.monotonic() + LEASE_RENEW_S + 5
        while "store unavailable" not in server.log:
            assert time.monotonic() < deadline, server.log
            await asyncio.sleep(0.1)
        with _password_engine(socket_path, "new"):
            deadline = time.monotonic() + LEASE_RENEW_S * 4 + 5
            while "credentials" not in server.log:
                assert time.monotonic() < deadline, server.log
                await asyncio.sleep(0.1)
            await asyncio.sleep(LEASE_RENEW_S * 3)  # more refused renewals: no more lines
    finally:
        await server_cm.__aexit__(None, None, None)
    said = [line.partition(" error=")[2] for line in server.lines if "store unavailable" in line]
    # Closed (or refused: the socket gone), then the credentials: each
    # reason once, and the refused renewals that follow it add no line.
    assert 2 <= len(said) <= OUTAGE_REASONS_LOGGED and len(set(said)) == len(said), said
    assert said[-1].startswith("Redis refused the node's credentials ("), said
    assert "--redis-url" in said[-1] and ":old@" not in server.log, said
    assert "Traceback" not in server.log, server.log
