"""solrace deployed on one machine as real processes, for the chaos test: a private
``redis-server`` with AOF (deploy/redis.conf) that can be killed and restarted from its
append-only file, ``solrace-server`` nodes (the installed console script, default
settings but for port, Redis URL and key prefix) that can be killed, and nginx in front
as the WebSocket load balancer, configured from deploy/nginx/local.conf.template exactly
as deploy/local.sh does.

Everything listens on 127.0.0.1 and lives in one scratch directory; :func:`local_stack`
stops every process (SIGKILL for anything still running after SIGTERM and a grace) and
removes the directory whatever happens. A missing ``redis-server`` or ``nginx`` is a
failure, never a skip: ``.ci/run`` installs both."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.redis import spare_port

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
SERVER_SCRIPT = BIN / "solrace-server"
#: Where the chaos Redis listens: the first free port of these (never 6379, which the
#: machine's shared Redis uses; the chaos Redis is killed on purpose).
REDIS_PORTS = range(6391, 6400)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_redis_port() -> int:
    for port in REDIS_PORTS:
        if _free(port):
            return port
    pytest.fail(f"no free port for the chaos Redis in {REDIS_PORTS.start}-{REDIS_PORTS.stop - 1}")


def _binary(name: str, *extra: str) -> str:
    found = shutil.which(name) or next((p for p in extra if os.access(p, os.X_OK)), None)
    if found is None:  # .ci/run installs both: a missing one is a failure, not a skip
        pytest.fail(f"{name} is not installed (bash .ci/run installs it)")
    return found


async def http_get(port: int, path: str, timeout: float = 2.0) -> tuple[int, str]:
    """``GET path`` on 127.0.0.1:port: (status, body); (0, error) when nothing answers."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
                )
                await writer.drain()
                raw = await reader.read()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError) as exc:
        return 0, repr(exc)
    head, _, body = raw.decode(errors="replace").partition("\r\n\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3})", head)
    return (int(match.group(1)) if match else 0), body


async def _redis_answers(port: int) -> bool:
    try:
        async with asyncio.timeout(1):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(b"PING\r\n")
                await writer.drain()
                return (await reader.readline()).startswith(b"+PONG")
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path}: no log)"
    return f"--- {path.name}\n" + "\n".join(text.splitlines()[-lines:])


def _group_members(pgid: int) -> list[str]:
    """``pid cmdline`` of each live process in group ``pgid`` (from /proc; zombies,
    which an init that does not reap may keep, do not count)."""
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{entry.name} {cmd.strip()}")
        except (OSError, IndexError, ValueError):
            continue
    return found


@dataclass
class Managed:
    """One child process, its log file, and how it went."""

    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    killed: int = 0
    terminated: bool = False
    #: Processes of its group still alive after it stopped (should stay empty).
    leftovers: list[str] = field(default_factory=list)
    #: The whole log, read just before the scratch directory is removed.
    final: str = ""

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def start(self, env: dict[str, str] | None = None) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # a Ctrl-C to pytest does not reach it first
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def kill(self) -> None:
        """SIGKILL, as a crash: no drain, no clean-up of any kind."""
        assert self.proc is not None and self.running, f"{self.name} is not running"
        self.proc.send_signal(signal.SIGKILL)
        self.killed += 1
        self.terminated = False
        while self.proc.poll() is None:
            await asyncio.sleep(0.01)

    def terminate(self) -> None:
        """SIGTERM, once (a second one during a node's drain would cut it short)."""
        if self.proc is not None and self.proc.poll() is None and not self.terminated:
            self.proc.terminate()
            self.terminated = True

    def stop(self, grace_s: float = 12.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``; always reaps it. Then its process
        group (its own session: a node's solver worker and multiprocessing helper)
        must empty within 3 s; whatever is left is recorded in ``leftovers`` and
        killed."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            self.terminate()
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        deadline = time.monotonic() + 3
        while _group_members(proc.pid):
            if time.monotonic() > deadline:
                self.leftovers = _group_members(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class Stack:
    work: Path
    redis: Managed
    redis_port: int
    nodes: list[Managed]
    node_ports: list[int]
    nginx: Managed
    lb_port: int
    prefix: str
    started: list[Managed] = field(default_factory=list)

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def lb_url(self) -> str:
        return f"ws://127.0.0.1:{self.lb_port}"

    async def restart_redis(self, timeout: float = 20.0) -> float:
        """Start the (dead) Redis again on the same port and directory: it loads its
        AOF. Returns the seconds until it answered PING after loading."""
        assert not self.redis.running, "Redis is still running"
        began = time.monotonic()
        self.redis.start()
        await _wait_until(timeout, lambda: _redis_answers(self.redis_port), "Redis after restart")
        return time.monotonic() - began

    async def connections(self, index: int) -> int:
        """``solrace_connections`` of node ``index``, asked on its own port."""
        status, body = await http_get(self.node_ports[index], "/metrics")
        assert status == 200, f"node {index + 1} /metrics: {status} {body[:200]}"
        match = re.search(r"^solrace_connections (\d+(?:\.\d+)?)$", body, re.M)
        assert match, f"no solrace_connections in node {index + 1}'s metrics"
        return int(float(match.group(1)))

    def logs(self) -> str:
        """The last lines of every log: for assertion messages."""
        paths = [m.log for m in self.started] + [self.work / "nginx" / "error.log"]
        return "\n".join(_tail(p) for p in paths)


async def _wait_until(timeout: float, probe: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if await probe():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not come up within {timeout:.0f} s")
        await asyncio.sleep(0.1)


def _nginx_conf(
    work: Path,
    lb_port: int,
    node_ports: Sequence[int],
    edit: Callable[[str], str] | None = None,
) -> Path:
    """deploy/nginx/local.conf.template filled in as deploy/local.sh fills it (then
    ``edit``ed: a test's misconfiguration)."""
    upstream = "".join(
        f"        server 127.0.0.1:{port} max_fails=2 fail_timeout=5s;\n" for port in node_ports
    )
    text = (DEPLOY / "nginx" / "local.conf.template").read_text()
    for name, value in (("UPSTREAM", upstream), ("WORK", str(work)), ("LB_PORT", str(lb_port))):
        text = text.replace(f"@{name}@", value.rstrip("\n"))
    if edit is not None:
        text = edit(text)
    conf = work / "nginx" / "nginx.conf"
    conf.write_text(text)
    return conf


@contextlib.asynccontextmanager
async def local_stack(
    nodes: int = 3,
    prefix: str = "solrace-chaos:",
    node_env: dict[str, str] | None = None,
    nginx_edit: Callable[[str], str] | None = None,
) -> AsyncIterator[Stack]:
    """Redis (deploy/redis.conf, AOF ``always``), ``nodes`` solrace-server nodes (with
    ``node_env`` added to their environment) and nginx in front (its configuration
    changed by ``nginx_edit``, if given), all started and answering; everything
    stopped and removed after."""
    redis_server = _binary("redis-server")
    nginx = _binary("nginx", "/usr/sbin/nginx")
    assert SERVER_SCRIPT.exists(), f"the console script is not installed: {SERVER_SCRIPT}"
    work = Path(tempfile.mkdtemp(prefix="solrace-chaos."))
    work.chmod(0o711)  # nginx workers (another user) only traverse it
    (work / "redis").mkdir()
    (work / "nginx").mkdir(mode=0o755)
    redis_port = free_redis_port()
    redis = Managed(
        "redis",
        [
            redis_server,
            str(DEPLOY / "redis.conf"),
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(work / "redis"),
            "--daemonize",
            "no",
            "--logfile",
            "",  # to stdout: the Managed log file
        ],
        work / "redis.log",
    )
    node_ports = [spare_port() for _ in range(nodes)]
    servers = [
        Managed(
            f"node{i + 1}",
            [str(SERVER_SCRIPT), "--host", "127.0.0.1", "--port", str(port)],
            work / f"node{i + 1}.log",
        )
        for i, port in enumerate(node_ports)
    ]
    lb_port = spare_port()
    balancer = Managed(
        "nginx",
        [
            nginx,
            "-p",
            str(work / "nginx"),
            "-c",
            str(_nginx_conf(work, lb_port, node_ports, nginx_edit)),
        ],
        work / "nginx.out",
    )
    stack = Stack(work, redis, redis_port, servers, node_ports, balancer, lb_port, prefix)
    try:
        redis.start()
        stack.started.append(redis)
        await _wait_until(10, lambda: _redis_answers(redis_port), "redis-server")
        env = {"SOLRACE_REDIS_URL": stack.redis_url, "SOLRACE_KEY_PREFIX": prefix}
        env.update(node_env or {})
        for index, node in enumerate(servers):
            node.start(env)
            stack.started.append(node)
            port = node_ports[index]

            async def healthy(port: int = port) -> bool:
                return (await http_get(port, "/healthz"))[0] == 200

            await _wait_until(20, healthy, node.name)
        checked = subprocess.run(
            [nginx, "-t", "-q", "-p", str(work / "nginx"), "-c", str(work / "nginx/nginx.conf")],
            capture_output=True,
            text=True,
        )
        assert checked.returncode == 0, f"nginx -t: {checked.stderr}"
        balancer.start()
        stack.started.append(balancer)

        async def balanced() -> bool:
            return (await http_get(lb_port, "/healthz"))[0] == 200

        await _wait_until(10, balanced, "nginx")
        yield stack
    finally:
        # nginx first (no new connections), then the nodes drain together, Redis last.
        balancer.stop()
        for node in servers:
            node.terminate()
        for node in servers:
            node.stop()
        redis.stop()
        for managed in stack.started:
            managed.final = managed.text()
        keep = os.environ.get("SOLRACE_STACK_LOGS")
        if keep:  # a directory to copy every log into (CI artifacts, debugging)
            Path(keep).mkdir(parents=True, exist_ok=True)
            for path in [m.log for m in stack.started] + [work / "nginx" / "error.log"]:
                if path.exists():
                    shutil.copy(path, Path(keep) / path.name)
        shutil.rmtree(work, ignore_errors=True)
