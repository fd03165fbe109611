"""A Redis that speaks only TLS, as managed Redis services often do, named by a URL
that does not fit it: ``solrace-server`` says what is wrong and what to use, in one
line with exit status 2, instead of serving "unavailable" forever as if Redis were
down (docs/server.md, "Command line")."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from solrace.store import Store
from solrace.store.probe import wrong_kind

from tests.support.redis import spare_port
from tests.support.server_process import SERVER_SCRIPT


class TlsRedis(NamedTuple):
    port: int
    ca: Path


def _speaks_tls(port: int, ca: Path) -> bool:
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=0.5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"PING\r\n")
            return tls.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[TlsRedis]:
    """``redis-server`` on a spare port with TLS only (no plain-text port), its
    certificate self-signed for 127.0.0.1."""
    binary, openssl = shutil.which("redis-server"), shutil.which("openssl")
    if binary is None or openssl is None:  # .ci/run installs them: missing is a failure
        pytest.fail("redis-server and openssl are needed (bash .ci/run installs them)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    port = spare_port()
    argv = [binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
            "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-auth-clients", "no", "--dir", str(tmp_path), "--save", "",
            "--appendonly", "no", "--logfile", str(tmp_path / "redis.log")]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not _speaks_tls(port, cert):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (tmp_path / "redis.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"redis-server with TLS did not start: {argv}\n{log}")
            time.sleep(0.05)
        yield TlsRedis(port, cert)
    finally:
        proc.terminate()
        proc.wait(10)


def _refused(url: str, tmp_path: Path) -> str:
    """What ``solrace-server --redis-url URL`` says before it exits with status 2."""
    done = subprocess.run(
        [str(SERVER_SCRIPT), "--port", "0", "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "does not answer" not in done.stderr and "Traceback" not in done.stderr
    problems = [line for line in done.stderr.splitlines() if " INFO " not in line]
    assert len(problems) == 1, done.stderr
    prefix, _, says = problems[0].partition("solrace-server: ")
    assert not prefix, done.stderr  # said as a bad flag is, not as a log line
    return says


def test_a_plain_text_url_for_a_tls_only_redis_says_use_rediss(
    tls_redis: TlsRedis, tmp_path: Path
) -> None:
    """It logged "redis does not answer" and served, every request ``unavailable``."""
    node = f"127.0.0.1:{tls_redis.port}"
    says = _refused(f"redis://{node}/0", tmp_path)
    assert says == f"--redis-url: {node} answers only with TLS: use rediss://{node}/0"


def test_a_certificate_this_machine_does_not_trust_is_said_with_the_fix(
    tls_redis: TlsRedis, tmp_path: Path
) -> None:
    """The same: the failed handshake read as an outage."""
    node = f"127.0.0.1:{tls_redis.port}"
    says = _refused(f"rediss://{node}/0", tmp_path)
    assert says == (
        f"--redis-url: {node} sent a TLS certificate this machine does not trust "
        f"(self-signed certificate): use rediss://{node}/0?ssl_ca_certs=/path/to/its-ca.pem"
    )


async def test_with_its_ca_the_tls_url_works_and_nothing_is_wrong(tls_redis: TlsRedis) -> None:
    url = f"rediss://127.0.0.1:{tls_redis.port}/0?ssl_ca_certs={tls_redis.ca}"
    assert await wrong_kind(url) is None
    store = await Store.connect(url, prefix="tls-test:")
    try:
        assert await store.ping()
    finally:
        await store.close()
