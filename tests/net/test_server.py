"""The ``solrace-server`` process: first log line, HTTP endpoints, SIGTERM drain."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from solrace.net.admission import REFUSAL_REASONS
from solrace.net.server import (
    HEALTHZ_ANSWER_REUSE_S,
    HEALTHZ_PING_TIMEOUT_S,
    RaceServer,
    upgrade_stripped,
)
from solrace.protocol.errors import BAD_INPUT_CLOSES
from solrace.rooms.counters import MOVE_REFUSALS, REQUEST_REFUSALS, Defect
from solrace.rooms.node import Node
from solrace.store import Store
from solrace_client import RaceClient
from websockets.datastructures import Headers

from tests.net.conftest import Cluster, stop_own_server
from tests.support.redis import CLUSTER_URL, REDIS_URL, delete_prefix, new_prefix
from tests.support.terminal import signals_as_a_shell_gives


class ServerProcess:
    def __init__(self, proc: asyncio.subprocess.Process, url: str, first_line: str) -> None:
        self.proc = proc
        self.url = url
        self.http = url.replace("ws://", "http://")
        self.first_line = first_line
        self.lines: list[str] = [first_line]


async def _start(
    *args: str, env: dict[str, str] | None = None, wrapper: Sequence[str] = ()
) -> ServerProcess:
    """``[WRAPPER] solrace-server --port 0 ARGS``, once it listens; its signals as a
    shell gives them (the suite may run under ``nohup``), then as ``wrapper`` sets them."""
    # Never the user's data directory: a Redis URL, or a data directory of the test's own.
    assert {"--redis-url", "--data-dir"} & set(args) or "SOLRACE_REDIS_URL" in (env or {})
    proc = await asyncio.create_subprocess_exec(
        *wrapper,
        sys.executable,
        "-m",
        "solrace.net.main",
        "--port",
        "0",
        *args,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
        preexec_fn=signals_as_a_shell_gives,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(15):
            while True:
                line = (await proc.stderr.readline()).decode()
                assert line, f"server exited early: {lines}"
                lines.append(line)
                match = re.search(r"url\W+(ws://[^\"\s]+)", line)
                if match:
                    server = ServerProcess(proc, match.group(1), lines[0])
                    server.lines = lines
                    return server
    except BaseException:
        if proc.returncode is None:  # never leave a server behind a failed start
            proc.kill()
            await proc.wait()
        raise


@pytest.fixture
async def embedded_server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    server = await _start("--data-dir", str(tmp_path / "data"))
    yield server
    if server.proc.returncode is None:
        server.proc.kill()
        await server.proc.wait()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_without_redis_its_first_log_line_says_where_the_durable_data_lives(
    embedded_server: ServerProcess, tmp_path: Path
) -> None:
    line = embedded_server.first_line
    assert "store: embedded valkey-server" in line
    assert f"data in {tmp_path / 'data'};" in line
    assert "durable" in line and "NOT durable" not in line
    assert "durability: aof-always" in embedded_server.lines[1]


async def test_healthz_and_metrics_on_the_websocket_port(embedded_server: ServerProcess) -> None:
    status, body = await asyncio.to_thread(_get, embedded_server.http + "/healthz")
    assert (status, body) == (200, "ok\n")
    client = await RaceClient.connect(embedded_server.url)
    await client.create("yukon", "Ann")
    status, metrics = await asyncio.to_thread(_get, embedded_server.http + "/metrics")
    assert status == 200
    assert "solrace_connections 1.0" in metrics
    assert "solrace_moves_accepted_total" in metrics
    assert "solrace_move_latency_seconds_bucket" in metrics
    await client.close()


async def test_healthz_answers_503_within_a_second_when_redis_accepts_and_never_replies() -> None:
    """A Redis that accepts connections and never answers held /healthz for the
    store's whole 5 s timeout (here 3 s): Docker's HEALTHCHECK and the Kubernetes
    probe (3 s each, deploy/) saw timeouts, not 503. The ping is capped at 1 s."""
    accepted: list[asyncio.StreamWriter] = []

    async def mute(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # held open, never written to

    listener = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    store = await Store.connect(f"redis://127.0.0.1:{port}/0", timeout=3.0)
    server = RaceServer(Node(store, name="mute"), "127.0.0.1", 0)
    try:
        await store.durability()  # as the node's start-up does: unknown, after 3 s
        await server.start()
        began = time.monotonic()
        status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{server.port}/healthz")
        took = time.monotonic() - began
        assert (status, body) == (503, "unavailable\n")
        assert took < HEALTHZ_PING_TIMEOUT_S + 0.5, took
    finally:
        await stop_own_server(server)
        listener.close()
        for writer in accepted:
            writer.close()


async def _redis_info(url: str, section: str) -> dict[str, Any]:
    """``INFO section`` of the Redis at ``url``, on a connection of its own."""
    client = Redis.from_url(url)
    try:
        info: dict[str, Any] = await client.info(section)
        return info
    finally:
        await client.aclose()


async def _pings(url: str) -> int:
    """How many PINGs the Redis at ``url`` has answered (``cmdstat_ping``): a private
    one, which nothing but the test's node talks to."""
    stats = await _redis_info(url, "commandstats")
    return int(stats.get("cmdstat_ping", {}).get("calls", 0))


async def test_concurrent_and_repeated_healthz_probes_share_one_redis_ping(
    private_redis: Callable[..., str],
) -> None:
    """A security audit: /healthz is public through deploy/'s nginx and answered whatever
    the connection limits, and every probe sent a PING to the Redis all nodes share: one
    client's flood (4,200 probes a second) loaded that Redis for every node. Probes asked
    while a PING is in flight share it, and its answer serves those of the next
    HEALTHZ_ANSWER_REUSE_S: PINGs counted by the Redis itself."""
    url = private_redis()
    store = await Store.connect(url, prefix=new_prefix())
    server = RaceServer(Node(store, name="probed"), "127.0.0.1", 0)
    await server.start()
    try:
        before = await _pings(url)
        began = time.monotonic()
        answers = list(
            await asyncio.gather(*(_raw_http(server.url, "GET", "/healthz") for _ in range(50)))
        )
        for _ in range(20):
            answers.append(await _raw_http(server.url, "GET", "/healthz"))
        took = time.monotonic() - began
        pinged = await _pings(url) - before
    finally:
        await stop_own_server(server)
    assert [(status, body) for status, _, body in answers] == [(200, b"ok\n")] * 70
    # A new PING is sent only once the last one is answered and HEALTHZ_ANSWER_REUSE_S old.
    assert 1 <= pinged <= 1 + int(took / HEALTHZ_ANSWER_REUSE_S), (pinged, took)


async def test_healthz_is_503_soon_after_redis_stops_answering_despite_the_reused_answer(
    private_redis: Callable[..., str],
) -> None:
    """The reuse of a PING's answer (HEALTHZ_ANSWER_REUSE_S) delays a stalled Redis'
    503 by at most that long: a Redis stopped (SIGSTOP: alive, answering nothing) right
    after a probe that answered 200 is a 503 within the reuse and the PING's timeout,
    and no probe meanwhile waits longer than the PING's timeout (a reused answer must
    not send CONFIG or INFO to the stalled Redis, which would wait out the store's)."""
    url = private_redis()
    pid = int((await _redis_info(url, "server"))["process_id"])
    store = await Store.connect(url, prefix=new_prefix(), timeout=5.0)
    server = RaceServer(Node(store, name="stalled"), "127.0.0.1", 0)
    await server.start()
    limit = HEALTHZ_ANSWER_REUSE_S + HEALTHZ_PING_TIMEOUT_S + 0.5
    slowest = 0.0
    try:
        status, _, _ = await _raw_http(server.url, "GET", "/healthz")
        assert status == 200
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            while status == 200 and time.monotonic() - stopped < limit + 5:
                asked = time.monotonic()
                status, _, body = await _raw_http(server.url, "GET", "/healthz")
                slowest = max(slowest, time.monotonic() - asked)
                await asyncio.sleep(0.05)  # a probe every 50 ms
            took = time.monotonic() - stopped
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        await stop_own_server(server)
    assert (status, body) == (503, b"unavailable\n")
    assert took < limit, took
    assert slowest < HEALTHZ_PING_TIMEOUT_S + 0.5, slowest


async def test_every_known_label_is_exported_at_zero_from_the_start(
    embedded_server: ServerProcess,
) -> None:
    """A labelled counter had no series until its first event: an alert on
    ``rate(solrace_moves_refused_total{reason="unavailable"}[5m])`` or on a defect saw
    nothing rather than 0 on a healthy node, and its first event was no increase."""
    _, metrics = await asyncio.to_thread(_get, embedded_server.http + "/metrics")
    expected = [
        *(f'solrace_moves_refused_total{{reason="{r}"}} 0.0' for r in MOVE_REFUSALS),
        *(f'solrace_requests_refused_total{{code="{c}"}} 0.0' for c in REQUEST_REFUSALS),
        *(f'solrace_defects_total{{where="{w}"}} 0.0' for w in Defect),
        *(f'solrace_protocol_closes_total{{code="{int(c)}"}} 0.0' for c in BAD_INPUT_CLOSES),
        *(f'solrace_connections_refused_total{{reason="{r}"}} 0.0' for r in REFUSAL_REASONS),
    ]
    assert [line for line in expected if line not in metrics.splitlines()] == []
    assert 'reason="unavailable"' in metrics and 'reason="server_full"' in metrics
    assert 'code="too_many_rooms"' in metrics and 'code="bad_frame"' not in metrics
    assert 'where="tick"' in metrics and 'code="1008"' in metrics


async def _drained_by(server: ServerProcess, sig: signal.Signals) -> None:
    """A racer in a room; ``sig`` to the node: it closes her connection 1001 (it
    drains) and exits 0."""
    client = await RaceClient.connect(server.url)
    await client.create("yukon", "Ann")
    server.proc.send_signal(sig)
    await asyncio.wait_for(client.closed, 10)
    assert client.close_code == 1001
    assert await asyncio.wait_for(server.proc.wait(), 10) == 0


async def test_sigterm_drains_closes_1001_and_exits_cleanly(
    embedded_server: ServerProcess,
) -> None:
    await _drained_by(embedded_server, signal.SIGTERM)


async def test_a_hangup_drains_as_sigterm_does(embedded_server: ServerProcess) -> None:
    """A node run from a terminal or an ssh session gets SIGHUP when that session
    ends (and ``kill -HUP`` is many operators' habit for "reload"): its default action
    killed the node at once — no drain, no log line, its racers left to its lease's
    lapse (an operator audit: the log ended at "listening", the engine gone with it)."""
    await _drained_by(embedded_server, signal.SIGHUP)
    assert embedded_server.proc.stderr is not None
    rest = (await embedded_server.proc.stderr.read()).decode()
    assert "draining" in rest and "stopped" in rest, rest


async def test_a_node_started_ignoring_hangups_outlives_its_terminal(tmp_path: Path) -> None:
    """``nohup solrace-server &`` asks the node to outlive the terminal it was started
    from: the SIGHUP it was started ignoring is still ignored. Handled like SIGTERM
    (the drain above), that node stopped when its terminal closed (a review)."""
    server = await _start("--data-dir", str(tmp_path / "data"), wrapper=("nohup",))
    try:
        server.proc.send_signal(signal.SIGHUP)
        client = await RaceClient.connect(server.url)  # still serving, not draining
        assert (await client.create("yukon", "Ann"))["snapshot"]["phase"] == "lobby"
        assert server.proc.returncode is None and client.close_code is None
        await client.close()
        server.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(server.proc.wait(), 10) == 0
    finally:
        if server.proc.returncode is None:
            server.proc.kill()
            await server.proc.wait()


async def _stop(server: ServerProcess) -> None:
    """SIGTERM; SIGKILL (and TimeoutError) if it has not exited within 10 s."""
    if server.proc.returncode is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(server.proc.wait(), 10)
        except TimeoutError:
            server.proc.kill()
            await server.proc.wait()
            raise


@contextlib.asynccontextmanager
async def _servers(url: str, kind: str) -> AsyncIterator[Callable[..., Awaitable[ServerProcess]]]:
    """``start(**env)`` starts a server process on the Redis at ``url``, under a prefix
    of the test's own (``new_prefix(kind)``). Afterwards every one is stopped, then the
    prefix's keys are deleted, whatever failed on the way (a stop that timed out
    skipped the delete, and left the test's room behind with its server running)."""
    prefix = new_prefix(kind)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(delete_prefix, prefix, url)

        async def start(**env: str) -> ServerProcess:
            environment = {"SOLRACE_REDIS_URL": url, "SOLRACE_KEY_PREFIX": prefix, **env}
            server = await _start(env=environment)
            stack.push_async_callback(_stop, server)
            return server

        yield start


async def _stopped(server: ServerProcess) -> int:
    """SIGTERM, and the exit status (within 10 s)."""
    server.proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(server.proc.wait(), 10)


async def test_configured_by_environment_with_redis() -> None:
    async with _servers(REDIS_URL, "env") as start:
        server = await start(SOLRACE_LOG_FORMAT="json")
        assert '"store: redis"' in server.first_line or "store: redis" in server.first_line
        assert server.first_line.startswith("{")
        status, _ = await asyncio.to_thread(_get, server.http + "/healthz")
        assert status == 200
        assert await _stopped(server) == 0


async def test_configured_by_environment_with_a_redis_cluster() -> None:
    async with _servers(CLUSTER_URL, "env") as start:
        server = await start()
        assert "store: redis cluster" in server.first_line, server.first_line
        status, _ = await asyncio.to_thread(_get, server.http + "/healthz")
        assert status == 200, f"is the test cluster up at {CLUSTER_URL}? {server.lines}"
        client = await RaceClient.connect(server.url)
        await client.create("yukon", "Ann")  # MOVED replies made this `internal` before
        await client.close()
        assert await _stopped(server) == 0


async def _random_moves(client: RaceClient, count: int) -> int:
    """Play up to ``count`` legal moves chosen from the racer's own view."""
    from solrace_client.boardview import board_from_view

    played = 0
    for _ in range(count):
        moves = sorted(str(m) for m in board_from_view(client.board or {}).legal_moves())
        if not moves:
            break
        reply = await client.move(moves[played % len(moves)])
        played += 1
        if reply["status"] != "playing":
            break
    return played


async def test_two_server_processes_on_one_redis_race_one_room() -> None:
    async with _servers(REDIS_URL, "procs") as start:
        one, two = await start(), await start()
        ann = await RaceClient.connect(one.url)
        bob = await RaceClient.connect(two.url)
        await ann.create("yukon", "Ann")
        await bob.join(ann.code or "", "Bob")
        await bob.ready()
        await ann.wait_for(lambda e: e.t == "ready_changed")
        await ann.start()
        await ann.wait_started()
        await bob.wait_started()
        played = await _random_moves(bob, 15)
        seen = await ann.wait_for(lambda e: e.t == "progress" and e.d["moves"] == played)
        assert seen.d["racer"] == bob.racer
        await _random_moves(ann, 10)
        await ann.resign()
        await bob.resign()
        over = await ann.next_event("race_over", timeout=15)
        assert {s["name"] for s in over.d["standings"]} == {"Ann", "Bob"}
        for client in (ann, bob):
            await client.close()


async def test_a_killed_server_process_loses_no_acknowledged_move() -> None:
    async with _servers(REDIS_URL, "kill") as start:
        first = await start()
        ann = await RaceClient.connect(first.url)
        bob = await RaceClient.connect(first.url)
        await ann.create("yukon", "Ann")
        await bob.join(ann.code or "", "Bob")
        await bob.ready()
        await ann.start()
        await ann.wait_started()
        played = await _random_moves(ann, 20)
        acknowledged = ann.board
        first.proc.kill()  # SIGKILL: no drain, no goodbye
        await first.proc.wait()
        await asyncio.wait_for(ann.closed, 10)
        second = await start()
        again = await RaceClient.connect(second.url)
        joined = await again.resume(room=ann.room, token=ann.token, since=ann.version)
        assert joined["snapshot"]["you"]["next_seq"] == played
        assert joined["snapshot"]["you"]["board"] == acknowledged
        await again.close()


async def test_a_closed_connection_is_freed_at_once_not_left_for_the_cyclic_collector(
    cluster: Cluster,
) -> None:
    """websockets' handshake left a closure over the connection on its protocol: every
    closed connection stayed in a reference cycle until a full collection, which under
    load stalled the node for 60-330 ms (docs/performance.md, round 8). With the cycle
    broken, the connection's last reference goes when it closes — abrupt or clean."""
    import gc
    import weakref

    server = await cluster.node()
    gc.collect()
    gc.disable()
    try:
        for abrupt in (False, True):
            client = await RaceClient.connect(server.url)
            await client.create("yukon", "Ann", deals="random")
            (session,) = server.node.peers
            freed = weakref.ref(session.ws)
            del session
            if abrupt:
                client.ws.transport.abort()  # a dropped network: no close frame
            await client.close()
            for _ in range(200):
                if freed() is None:
                    break
                await asyncio.sleep(0.01)
            assert freed() is None, f"a {'dropped' if abrupt else 'closed'} connection lives on"
    finally:
        gc.enable()


@pytest.mark.parametrize("step_s", [600.0, -5.0])
async def test_a_step_of_the_system_clock_shows_in_healthz_and_metrics_and_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, step_s: float
) -> None:
    """The system clock is stepped while the node runs. The node's race clock goes on
    unbroken (tests/rooms/test_clock.py); the operator sees the step: one warning with
    its size, ``clock_offset_ms`` in /healthz and the ``solrace_clock_offset_seconds``
    gauge. /healthz stays 200: the node serves as well as before (docs/server.md). The
    store's clock was not stepped: the node's race clock still agrees with it
    (``store_clock_offset_ms``, ``solrace_clock_store_offset_seconds``)."""
    caplog.set_level(logging.WARNING, logger="solrace.clock")
    prefix = new_prefix()
    store = await Store.connect(REDIS_URL, prefix=prefix)
    server = RaceServer(Node(store, name="clock"), "127.0.0.1", 0)
    try:
        await server.start()
        await server.node.sample_clock()
        http = f"http://127.0.0.1:{server.port}"
        before = server.node.clock()
        real_time_ns = time.time_ns
        monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + int(step_s * 1e9))
        assert 0 <= server.node.clock() - before < 1000  # no step
        status, body = await asyncio.to_thread(_get, http + "/healthz?format=json")
        assert status == 200, body
        report = json.loads(body)
        assert abs(report["clock_offset_ms"] - step_s * 1000) < 100, report
        assert abs(report["store_clock_offset_ms"]) < 100, report
        status, metrics = await asyncio.to_thread(_get, http + "/metrics")
        (offset_s,) = [
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("solrace_clock_offset_seconds ")
        ]
        assert abs(offset_s - step_s) < 0.1, offset_s
        (store_offset_s,) = [
            float(line.split()[1])
            for line in metrics.splitlines()
            if line.startswith("solrace_clock_store_offset_seconds ")
        ]
        assert abs(store_offset_s) < 0.1, store_offset_s
        warnings = [r.getMessage() for r in caplog.records if r.name == "solrace.clock"]
        assert warnings == [
            f"the system clock is {step_s:+.1f} s from this node's race clock; races in"
            " progress are not affected (check NTP on this machine)"
        ]
    finally:
        monkeypatch.undo()
        if server.server is not None:
            server.server.close(close_connections=True)
        await server.node.stop()
        await store.close()
        await delete_prefix(prefix, REDIS_URL)


async def test_healthz_is_503_draining_while_the_node_drains_and_alive_to_the_live_probe() -> None:
    """docs/server.md: ``/healthz`` is 503 while the node drains (its load balancer takes
    it out before its connections are closed), with ``"draining": true``, whatever the
    store says; the liveness probe stays ``200 alive`` (the operator audit: each other
    condition of the status had a test, the drain none)."""
    prefix = new_prefix()
    store = await Store.connect(REDIS_URL, prefix=prefix)
    server = RaceServer(Node(store, name="draining"), "127.0.0.1", 0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}/healthz"
    try:
        assert await asyncio.to_thread(_get, base) == (200, "ok\n")
        server.node.draining = True  # what drain() sets first, before it waits for moves
        assert await asyncio.to_thread(_get, base) == (503, "unavailable\n")
        status, body = await asyncio.to_thread(_get, base + "?format=json")
        report = json.loads(body)
        assert (status, report["status"], report["draining"]) == (503, "unavailable", True)
        assert (report["store_answers"], report["store_failing"]) == (True, False)
        assert await asyncio.to_thread(_get, base + "?probe=live") == (200, "alive\n")
    finally:
        await server.drain()
        await delete_prefix(prefix)


def test_a_handshake_is_upgrade_stripped_only_when_a_proxy_dropped_its_upgrade_headers() -> None:
    """What the node warns about (tests/deploy/test_nginx_without_upgrade.py runs the
    real nginx): a client's handshake without ``Upgrade``/``Connection: upgrade``; not
    a whole one (header case and lists as clients and proxies write them), nor a
    request that is no WebSocket handshake at all (a browser, a scanner)."""
    key = ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
    whole = [("Upgrade", "websocket"), ("Connection", "Upgrade"), key]
    assert not upgrade_stripped(Headers(whole))
    assert not upgrade_stripped(
        Headers([("upgrade", "WebSocket"), ("connection", "keep-alive, Upgrade"), key])
    )
    assert upgrade_stripped(Headers([("Connection", "close"), key]))  # nginx, as deployed wrong
    assert upgrade_stripped(Headers([("Upgrade", "websocket"), ("Connection", "close"), key]))
    assert not upgrade_stripped(Headers([("Connection", "close")]))


async def _raw_http(url: str, method: str, path: str) -> tuple[int, Headers, bytes]:
    """One HTTP/1.1 request as any client sends it (``urllib`` would send no body-less
    PUT), and the answer's status line, headers and body."""
    host, _, port = url.removeprefix("ws://").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n"
        writer.write(head.encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    header_block, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = header_block.decode().split("\r\n")
    headers = Headers(line.split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
@pytest.mark.parametrize("path", ["/healthz", "/healthz?probe=live", "/metrics"])
async def test_a_probe_asked_with_another_method_than_get_is_405_with_allow(
    cluster: Cluster, method: str, path: str
) -> None:
    """A newcomer audit: ``POST /healthz`` answered 200, as if the method meant nothing
    (a monitor misconfigured to POST passed). The probes take GET and HEAD; anything
    else is 405 with ``Allow: GET, HEAD`` (RFC 9110 §15.5.6), docs/server.md."""
    server = await cluster.node()
    status, headers, _ = await _raw_http(server.url, method, path)
    assert (status, headers.get("Allow")) == (405, "GET, HEAD")
    status, _, body = await _raw_http(server.url, "GET", path)
    assert status == 200 and body
