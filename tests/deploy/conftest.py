"""Private ``redis-server`` processes for the deployment tests: each on a spare
loopback port, its data in the test's temporary directory, stopped afterwards.

They let a test give the server a Redis configured as an operator would (AOF on or
off, CONFIG refused as on managed Redis) without touching the machine's Redis."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


def spare_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_process(data_dir: Path, args: Sequence[str] = ()) -> Iterator[str]:
    """``redis-server [args] --port SPARE --bind 127.0.0.1 --dir DATA_DIR``; its URL.
    ``args`` may start with a configuration file (the later flags override it)."""
    binary = shutil.which("redis-server")
    if binary is None:  # .ci/run installs it: a missing one is a failure, not a skip
        pytest.fail("redis-server is not installed (bash .ci/run installs it)")
    port = spare_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [binary, *args, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir)]
    argv += ["--daemonize", "no", "--save", "", "--logfile", str(data_dir / "redis.log")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not _answers(port):
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
