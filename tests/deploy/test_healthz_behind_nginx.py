"""``/healthz`` behind the real nginx of each of deploy/'s configurations: public there,
and answered by a node whatever its connection limits, so nginx caps it per client
address (``limit_req``). A flood of probes gets 429 from nginx past the burst, and the
node sees only the requests nginx let through; a monitor's probe still gets ``ok``.

The node runs in the test (its requests counted as they reach it), on the shared
Redis; nginx runs each configuration as deployed but for its ports, upstream and
certificate (deploy/tls/make-example-cert.sh's), on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from solrace.net.server import RaceServer
from solrace.protocol.handshake import HEALTHZ_PATH
from solrace.rooms.node import Node
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from tests.net.conftest import stop_own_server
from tests.support.redis import connect_or_fail, delete_prefix, new_prefix, spare_port
from tests.support.stack import Managed

from .conftest import DEPLOY

#: Probes sent at once: well past any burst the configurations allow.
FLOOD = 60


def _limits(text: str) -> tuple[float, int]:
    """The /healthz zone's rate (requests a second) and its location's burst."""
    rate = re.search(
        r"limit_req_zone \$binary_remote_addr zone=solrace_healthz:\S+ rate=(\d+)r/s;", text
    )
    burst = re.search(r"limit_req zone=solrace_healthz burst=(\d+) nodelay;", text)
    assert rate and burst, "no per-address limit on /healthz"
    assert "limit_req_status 429;" in text
    return float(rate.group(1)), int(burst.group(1))


def _runnable(conf: str, work: Path, port: int, node_port: int) -> tuple[str, bool]:
    """deploy/``conf`` as nginx runs it here, and whether it takes TLS: the host's and
    compose's site files inside an ``http {}`` block (conf.d is included there), on
    ``port`` for 443 (80 only redirects), the example certificate, every upstream
    server the node; local.sh's template filled in as local.sh fills it."""
    text = (DEPLOY / conf).read_text()
    text = re.sub(r"server [\w.\-]+:\d+ ", f"server 127.0.0.1:{node_port} ", text)
    if conf.endswith(".template"):
        upstream = f"        server 127.0.0.1:{node_port} max_fails=2 fail_timeout=5s;"
        for name, value in (("UPSTREAM", upstream), ("WORK", str(work)), ("LB_PORT", str(port))):
            text = text.replace(f"@{name}@", value)
        return text, False
    subprocess.run(
        ["bash", str(DEPLOY / "tls" / "make-example-cert.sh"), str(work / "tls")],
        check=True,
        capture_output=True,
    )
    text = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {work}/tls/example.crt;", text)
    text = re.sub(
        r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {work}/tls/example.key;", text
    )
    text = re.sub(r"\s*listen \[::\]:\d+( ssl)?;", "", text)
    text = text.replace("listen 80;", f"listen 127.0.0.1:{spare_port()};")
    text = text.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
    return (
        f"daemon off;\npid {work}/nginx/nginx.pid;\nerror_log {work}/nginx/error.log;\n"
        f"events {{}}\nhttp {{\n{text}\n}}\n",
        True,
    )


async def _get(port: int, tls: bool) -> tuple[int, bytes]:
    """``GET /healthz`` on 127.0.0.1:port, as ``curl -k`` sends it: (status, body)."""
    context = None
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    async with asyncio.timeout(10):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            raw = await reader.read()
        finally:
            writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@contextlib.asynccontextmanager
async def _nginx(conf: str, node_port: int) -> AsyncIterator[tuple[int, bool]]:
    """nginx running deploy/``conf`` in front of the node: its port, and whether TLS."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():  # .ci/run installs it: missing is a failure
        pytest.fail("nginx is not installed (bash .ci/run installs it)")
    work = Path(tempfile.mkdtemp(prefix="solrace-healthz."))
    work.chmod(0o711)  # nginx workers (another user) only traverse it
    (work / "nginx").mkdir(mode=0o755)
    port = spare_port()
    text, tls = _runnable(conf, work, port, node_port)
    (work / "nginx" / "nginx.conf").write_text(text)
    argv = [nginx, "-p", str(work / "nginx"), "-c", str(work / "nginx" / "nginx.conf")]
    managed = Managed("nginx", argv, work / "nginx.out")
    try:
        managed.start()
        deadline = time.monotonic() + 10
        while True:  # until it listens: the connection, not a probe (the limit counts those)
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                assert managed.running, (work / "nginx.out").read_text(errors="replace")
                assert time.monotonic() < deadline, "nginx did not listen within 10 s"
                await asyncio.sleep(0.05)
        yield port, tls
    finally:
        managed.stop()
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize("conf", ["nginx.conf", "nginx/compose.conf", "nginx/local.conf.template"])
async def test_a_flood_of_healthz_gets_429_past_the_burst_and_never_reaches_the_node(
    conf: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A security audit: a flood of /healthz through deploy/'s nginx reached the node at
    4,200 probes a second (93 % of its core), each a PING to the Redis every node
    shares. Now nginx lets one client address through at its rate past a burst, and
    answers the rest 429 itself; what the docs promise — a probe gets ``ok`` — holds."""
    rate, burst = _limits((DEPLOY / conf).read_text())
    prefix = new_prefix()
    server = RaceServer(Node(await connect_or_fail("redis", prefix), name="probed"), "127.0.0.1", 0)
    reached: list[str] = []
    answer = server._http

    async def counted(connection: ServerConnection, request: Request) -> Response | None:
        if request.path == HEALTHZ_PATH:
            reached.append(request.path)
        return await answer(connection, request)

    monkeypatch.setattr(server, "_http", counted)
    await server.start()
    try:
        async with _nginx(conf, server.port) as (port, tls):
            began = time.monotonic()
            assert await _get(port, tls) == (200, b"ok\n")  # a monitor's probe
            answers = await asyncio.gather(*(_get(port, tls) for _ in range(FLOOD)))
            took = time.monotonic() - began
    finally:
        await stop_own_server(server)
        await delete_prefix(prefix)
    let_through = 1 + burst + math.ceil(took * rate)  # the first probe, the burst, the rate
    statuses = [status for status, _ in answers]
    assert set(statuses) <= {200, 429}, statuses
    assert [body for status, body in answers if status == 200] == [b"ok\n"] * statuses.count(200)
    assert len(reached) == 1 + statuses.count(200) <= let_through, (len(reached), took)
    assert statuses.count(429) >= FLOOD + 1 - let_through, statuses
