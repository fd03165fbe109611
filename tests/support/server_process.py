"""``solrace-server`` as a user runs it: the installed console script, its default
settings (rate limit, countdown, timers), a real process — for the tests of the
documentation, whose examples must work against exactly that.

Only the port differs: 0 (any free port, read back from the "listening" log line), so
tests never collide with a server the user runs on 8765. For Redis, a key prefix of
the test's own, deleted afterwards; for the embedded engine, a ``--data-dir`` of the
test's own (a temporary directory removed afterwards unless the test gives one, e.g. to
restart a server on it), so tests never write to the user's data directory."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.redis import BACKEND_URLS, delete_prefix, new_prefix

BIN = Path(sys.executable).parent
SERVER_SCRIPT = BIN / "solrace-server"


@dataclass
class ServerProcess:
    proc: asyncio.subprocess.Process
    url: str
    lines: list[str] = field(default_factory=list)
    #: Whether leaving the context must stop the process with exit status 0 (False
    #: once a test killed it on purpose).
    expect_clean_exit: bool = True

    @property
    def log(self) -> str:
        return "".join(self.lines)


async def _read_log(proc: asyncio.subprocess.Process, lines: list[str]) -> None:
    assert proc.stderr is not None
    while line := await proc.stderr.readline():
        lines.append(line.decode())


@asynccontextmanager
async def solrace_server(
    backend: str = "embedded",
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    data_dir: Path | None = None,
    open_files: int | None = None,
    own_group: bool = False,
) -> AsyncIterator[ServerProcess]:
    """A running ``solrace-server --port 0 [args]`` (plus ``--redis-url`` for the
    ``redis`` and ``cluster`` backends, ``--data-dir`` for the embedded one); stopped with SIGTERM
    afterwards, which must exit 0 — unless the test stopped it itself and cleared
    ``expect_clean_exit``. ``open_files``: the process's open-file limit, soft and hard
    (as ``ulimit -n``; a service manager's may be as low as 1,024). ``own_group``: the
    process leads a process group of its own (as a shell's job does), which a test may
    signal as a terminal's Ctrl-C does."""
    assert SERVER_SCRIPT.exists(), f"the console script is not installed: {SERVER_SCRIPT}"
    argv = [str(SERVER_SCRIPT), "--port", "0", *args]
    prefix = new_prefix("doc")
    scratch: str | None = None
    if backend in BACKEND_URLS:
        argv += ["--redis-url", BACKEND_URLS[backend], "--key-prefix", prefix]
    elif "--data-dir" not in args and "--redis-url" not in args:
        if data_dir is None:
            scratch = tempfile.mkdtemp(prefix="solrace-test-data-")
            data_dir = Path(scratch)
        argv += ["--data-dir", str(data_dir)]

    def limit_open_files() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
        preexec_fn=limit_open_files,
        start_new_session=own_group,
    )
    lines: list[str] = []
    reader = asyncio.create_task(_read_log(proc, lines))
    try:
        async with asyncio.timeout(20):
            while not (match := re.search(r"url\W+(ws://[^\"\s]+)", "".join(lines))):
                assert proc.returncode is None and not reader.done(), f"exited: {lines}"
                await asyncio.sleep(0.05)
        server = ServerProcess(proc, match.group(1), lines)
        yield server
        if server.expect_clean_exit:
            if proc.returncode is None:  # else the test stopped it: the status must be 0
                proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 15) == 0, server.log
    finally:
        try:
            if proc.returncode is None:  # never leave a server behind
                proc.kill()
                await proc.wait()
            await asyncio.wait_for(reader, 5)
        finally:  # once it can write no more, and whatever failed
            if backend in BACKEND_URLS:
                await delete_prefix(prefix, BACKEND_URLS[backend])
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
