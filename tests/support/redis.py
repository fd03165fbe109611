"""The real Redis (and Redis Cluster) that tests use, and cleaning up after them.

Tests share the machine's Redis with other runs, so each test uses its own key prefix
(:func:`new_prefix`, the only place one is made) and deletes exactly that prefix's keys
afterwards (never FLUSHDB). A test that leaves any behind fails, by name
(tests/support/leaks.py).

The cluster is a local three-master Redis Cluster, ``SOLRACE_TEST_CLUSTER_URL``
(default ``redis+cluster://127.0.0.1:7101``): ``.ci/run`` starts one with
``deploy/redis-cluster.sh``, and so can a developer (docs/store.md, "Redis Cluster").
Like Redis, it must be there: the tests on it fail, never skip, without it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from solrace.store import Store

REDIS_URL = os.environ.get("SOLRACE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
CLUSTER_URL = os.environ.get("SOLRACE_TEST_CLUSTER_URL", "redis+cluster://127.0.0.1:7101")

#: What each real backend of the parametrized fixtures connects to.
BACKEND_URLS = {"redis": REDIS_URL, "cluster": CLUSTER_URL}

#: What every test's key prefix begins with: the leak guard (tests/support/leaks.py)
#: scans for it, and nothing else in the shared Redis is its business.
TEST_PREFIX = "solrace-test"

#: Every prefix :func:`new_prefix` made in this process, in order (what the leak guard
#: checks: this run's own keys, never another run's).
ISSUED: list[str] = []


def new_prefix(kind: str = "") -> str:
    """A key prefix of the test's own, ``solrace-test[-KIND]:<random>:``: for a store,
    a server's ``--key-prefix`` or a raw key. Made here only, so the leak guard knows
    it and fails the test that leaves one of its keys behind."""
    prefix = f"{TEST_PREFIX}{f'-{kind}' if kind else ''}:{uuid.uuid4().hex}:"
    ISSUED.append(prefix)
    return prefix


_HOW_TO_START = {
    "redis": "set SOLRACE_TEST_REDIS_URL, or run bash .ci/run",
    "cluster": "start one: bash deploy/redis-cluster.sh start /tmp/solrace-cluster "
    "7101 7102 7103, or set SOLRACE_TEST_CLUSTER_URL",
}


async def connect_or_fail(backend: str, prefix: str) -> Store:
    """A store on the real ``backend`` ("redis" or "cluster") that answers, or a test
    failure saying how to provide it (never a skip: a green run must mean the store
    ran on that server)."""
    url = BACKEND_URLS[backend]
    store = await Store.connect(url, prefix=prefix)
    if not await store.ping():
        await store.close()
        pytest.fail(f"{backend} is not reachable at {url} ({_HOW_TO_START[backend]})")
    return store


async def delete_prefix(prefix: str, url: str = REDIS_URL) -> None:
    """Delete the prefix's keys (on a cluster: on every master)."""
    store = await Store.connect(url, prefix)
    try:
        await store.delete_all()
    finally:
        await store.close()


def spare_port() -> int:
    """A loopback port nothing listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def answers(port: int) -> bool:
    """Whether a Redis on the loopback ``port`` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_process(
    data_dir: Path, args: Sequence[str] = (), *, port: int | None = None
) -> Iterator[str]:
    """``redis-server [args] --port SPARE --bind 127.0.0.1 --dir DATA_DIR``; its URL.
    ``args`` may start with a configuration file (the later flags override it);
    ``port``: that one instead of a spare one (a Redis stopped and started again where
    its clients left it).

    For a test that must do to Redis what would disturb the other tests sharing the
    machine's (pause it, kill its clients, stop it, configure it as an operator would)."""
    binary = shutil.which("redis-server")
    if binary is None:  # .ci/run installs it: a missing one is a failure, not a skip
        pytest.fail("redis-server is not installed (bash .ci/run installs it)")
    port = spare_port() if port is None else port
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [binary, *args, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir)]
    argv += ["--daemonize", "no", "--save", "", "--logfile", str(data_dir / "redis.log")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (data_dir / "redis.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"redis-server did not start: {argv}\n{log}")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start private Redis servers: ``url = private_redis("--appendonly", "yes")``."""
    with ExitStack() as stack:
        counter = iter(range(1000))

        def start(*args: str) -> str:
            return stack.enter_context(redis_process(tmp_path / f"redis{next(counter)}", args))

        yield start
