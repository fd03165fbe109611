"""A benchmark stopped mid-run — SIGTERM (``timeout``, a CI job cancelled) or SIGINT
(Ctrl-C) — stops, deletes its run's keys and nobody else's, stops every process it
started, and says so in one line with its status (bench/stopping.py).

Each run is a real ``python -m solrace.bench`` process on the test Redis, signalled
once it has written keys (seen under its run's prefix, which begins with its process
id: bench/runkeys.py) or started the children the case is about — not after a fixed
sleep. Its children, and theirs, are found by a mark in their environment, which they
inherit: one re-parented to init is found too (the server benchmark's solrace-server
after a SIGTERM ran on with its keys for 12 minutes, until stopped by hand)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as redis
from solrace.argtypes import EXIT_INTERRUPTED, EXIT_TERMINATED
from solrace.bench import stopping
from solrace.bench.runkeys import BENCH_FAMILY, CORE_FAMILY

from tests.support.redis import REDIS_URL, delete_prefix
from tests.support.terminal import signals_as_a_shell_gives

ROOT = Path(__file__).parents[2]
PROG = "python -m solrace.bench"
#: The environment variable whose value marks the benchmark's processes (test's own).
MARK = "SOLRACE_BENCH_TEST_MARK"
#: How long the run may take to show what the case waits for (a callgrind child
#: starting under valgrind takes 20-30 s on the 2-core CI machines).
EVIDENCE_TIMEOUT_S = 120.0
#: How long a stopped run may take to end: stopping its children (5 s each at most,
#: at once) and deleting its keys.
STOP_TIMEOUT_S = 60.0
#: How long after the benchmark ended a process it started may still be going: an
#: embedded engine asked to stop by its parent's death (PR_SET_PDEATHSIG) exits at
#: its next cron tick, ~0.1 s.
GRACE_S = 5.0
#: A line a node child logs on the benchmark's standard error (bench/server.py lets
#: its warnings through, on purpose: a node's trouble shows when a run goes wrong).
NODE_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (WARNING|ERROR|CRITICAL) solrace")


@dataclass(frozen=True)
class Case:
    argv: list[str]
    #: The run's key family (bench/runkeys.py), or None for a suite without Redis.
    family: str | None
    #: What is under the run's prefix once the part of the run the case is about runs.
    keys_under: str = "*"
    #: Processes besides the benchmark to wait for before signalling.
    children: int = 0


CASES = {
    "store": Case(["store"], BENCH_FAMILY),
    "core": Case(["core"], CORE_FAMILY),
    # the callgrind child's keys: its own store, its own embedded engine's process
    "core-callgrind": Case(
        ["core", "--callgrind", "--rooms", "1", "--moves", "11"], CORE_FAMILY, "callgrind-*"
    ),
    # the solrace-server child's keys (after the echo's short run)
    "server": Case(
        ["server", "--racers", "4", "--seconds", "5", "--warmup", "0"], BENCH_FAMILY, "server-*"
    ),
    "solver": Case(
        ["solver", "--deals", "100000", "--workers", "2", "--certify", "0"], None, "", 2
    ),
}


def _redis(case: Case) -> list[str]:
    """The test Redis, for a suite that runs on one: the solver takes no --redis-url."""
    return [] if case.family is None else ["--redis-url", REDIS_URL]


def _marked(mark: str) -> list[int]:
    """Every process still there with ``MARK=mark`` in its environment (zombies
    included: one nobody reaps is a leak too)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if f"{MARK}={mark}".encode() in environ.split(b"\0"):
            found.append(int(entry))
    return found


def _described(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            out.append(f"{pid} (gone)")
    return out


async def _count(pattern: str, url: str = REDIS_URL) -> int:
    client = redis.Redis.from_url(url)
    try:
        return len([key async for key in client.scan_iter(match=pattern, count=1000)])
    finally:
        await client.aclose()


def _wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + EVIDENCE_TIMEOUT_S
    while not ready():
        assert proc.poll() is None, f"the benchmark ended before {what}: {proc.returncode}"
        assert time.monotonic() < deadline, f"no {what} within {EVIDENCE_TIMEOUT_S} s"
        time.sleep(0.05)


@dataclass
class Stopped:
    status: int
    out: str
    err: str
    #: Keys left under the run's prefix.
    left: int
    #: The benchmark's processes still there GRACE_S after it ended.
    survivors: list[str]
    #: What it left in its temporary directory ($TMPDIR).
    files: list[str]
    #: How long it took to end once signalled.
    seconds: float


def _sigint_ignored() -> None:
    """A ``preexec_fn``: SIGINT ignored, as a script's background job (``&``) gets it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_mid_run(
    case: Case,
    sig: signal.Signals,
    group: bool,
    tmp: Path,
    preexec: Callable[[], None] = signals_as_a_shell_gives,
    meanwhile: Callable[[list[int]], None] = lambda children: None,
) -> Stopped:
    """Start the benchmark, wait for the case's evidence, send ``sig`` to it (or to its
    process group, as a terminal's Ctrl-C and ``timeout`` do), and see what is left.
    Its output goes to files: a child left running would hold a pipe open. ``preexec``:
    the signals it starts with (by default Ctrl-C's default, even in a background job).
    ``meanwhile`` is given the benchmark's children just before the signal."""
    mark = uuid.uuid4().hex
    out_path, err_path, tmpdir = tmp / "out", tmp / "err", tmp / "tmp"
    tmpdir.mkdir()
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "solrace.bench", *case.argv, *_redis(case)],
            stdout=out_file,
            stderr=err_file,
            env={**os.environ, MARK: mark, "TMPDIR": str(tmpdir)},
            start_new_session=True,
            preexec_fn=preexec,
        )
    run_keys = f"{case.family}{proc.pid}-"
    try:
        if case.family is not None:
            pattern = f"{run_keys}*:{case.keys_under}"
            _wait_for(f"key {pattern}", lambda: asyncio.run(_count(pattern)) > 0, proc)
        if case.children:
            children = lambda: len(_marked(mark)) > case.children  # noqa: E731
            _wait_for(f"{case.children} child processes", children, proc)
        meanwhile([pid for pid in _marked(mark) if pid != proc.pid])
        signalled = time.monotonic()
        (os.killpg if group else os.kill)(proc.pid, sig)
        proc.wait(timeout=STOP_TIMEOUT_S)
        seconds = time.monotonic() - signalled
        out, err = out_path.read_text(), err_path.read_text()
        deadline = time.monotonic() + GRACE_S
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = asyncio.run(_count(f"{run_keys}*")) if case.family is not None else 0
        files = sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*"))
        survivors = _described(_marked(mark))
        return Stopped(proc.returncode, out, err, left, survivors, files, seconds)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _marked(mark):  # what this test started, whatever became of it
            os.kill(pid, signal.SIGKILL)
        if case.family is not None:
            asyncio.run(delete_prefix(run_keys))


def _own_lines(err: str) -> list[str]:
    """Standard error without the node children's log lines."""
    return [line for line in err.splitlines() if not NODE_LOG.match(line)]


@pytest.fixture
def anothers_key() -> Iterator[Callable[[str], str]]:
    """A key of another run of the same family (a run meanwhile, or one killed): a
    stopped run must leave it alone."""
    made: list[str] = []

    async def put(key: str) -> None:
        client = redis.Redis.from_url(REDIS_URL)
        try:
            await client.set(key, b"another run's")
        finally:
            await client.aclose()

    def make(family: str) -> str:
        key = f"{family}1-{uuid.uuid4().hex[:12]}:x"
        asyncio.run(put(key))
        made.append(key)
        return key

    yield make
    for key in made:
        asyncio.run(delete_prefix(key))


HOW = {
    "SIGTERM": (signal.SIGTERM, False),
    "Ctrl-C": (signal.SIGINT, True),
    "timeout": (signal.SIGTERM, True),  # SIGTERM to the whole group, as timeout sends it
}
SAID = {
    signal.SIGTERM: (EXIT_TERMINATED, f"{PROG}: terminated (SIGTERM)"),
    signal.SIGINT: (EXIT_INTERRUPTED, f"{PROG}: interrupted"),
}


@pytest.mark.parametrize(
    ("name", "how"),
    [
        *((name, how) for name in ("store", "core", "server") for how in ("SIGTERM", "Ctrl-C")),
        # A callgrind run takes 20 s of CPU under valgrind to get as far as its child's
        # keys, so it is stopped one way only: Ctrl-C, the way that left them. SIGTERM
        # stops the run as Ctrl-C does (solrace/bench/stopping.py), and the run stops
        # its child the same way after either (the plain core run's cases show both).
        ("core-callgrind", "Ctrl-C"),
    ],
)
def test_a_run_stopped_mid_way_leaves_no_key_no_process_and_says_one_line(
    name: str, how: str, anothers_key: Callable[[str], str], tmp_path: Path
) -> None:
    """Before: SIGTERM left every suite's keys (a core run killed at 25 s: 4,674; the
    server suite's solrace-server ran on, orphaned, with its own), and Ctrl-C left the
    keys of a core --callgrind run's child, killed 0.25 s after the Ctrl-C."""
    case = CASES[name]
    assert case.family is not None
    other = anothers_key(case.family)
    sig, group = HOW[how]
    stopped = _stop_mid_run(case, sig, group, tmp_path)
    status, line = SAID[sig]
    assert (stopped.left, stopped.survivors, stopped.files) == (0, [], [])
    assert (stopped.status, stopped.out, _own_lines(stopped.err)) == (status, "", [line])
    assert stopped.err.endswith(line + "\n")  # the last word is the benchmark's
    assert asyncio.run(_count(other)) == 1  # another run's key is still there


def test_timeout_sigterm_to_the_whole_group_is_one_stop(
    anothers_key: Callable[[str], str], tmp_path: Path
) -> None:
    """``timeout`` sends SIGTERM to the benchmark and then to its whole process group:
    the benchmark may see it twice, which is still one stop."""
    other = anothers_key(CORE_FAMILY)
    stopped = _stop_mid_run(CASES["core"], signal.SIGTERM, True, tmp_path)
    assert (stopped.left, stopped.survivors, stopped.files) == (0, [], [])
    assert (stopped.status, stopped.out, stopped.err) == (
        EXIT_TERMINATED,
        "",
        f"{PROG}: terminated (SIGTERM)\n",
    )
    assert asyncio.run(_count(other)) == 1


@pytest.mark.parametrize("name", ["store", "core", "server"])
def test_sigterm_stops_a_run_started_with_sigint_ignored(
    name: str, anothers_key: Callable[[str], str], tmp_path: Path
) -> None:
    """A script's background job (``bench … &``) starts with SIGINT ignored, and asyncio
    then handles no signal: SIGTERM raising KeyboardInterrupt wherever the loop was
    printed the tracebacks of the callbacks it went through (store, server), and the
    server run ended with status 1, "rooms did not start". SIGINT stays ignored."""
    case = CASES[name]
    assert case.family is not None
    other = anothers_key(case.family)
    stopped = _stop_mid_run(case, signal.SIGTERM, False, tmp_path, _sigint_ignored)
    assert (stopped.left, stopped.survivors, stopped.files) == (0, [], [])
    line = f"{PROG}: terminated (SIGTERM)"
    assert (stopped.status, stopped.out, _own_lines(stopped.err)) == (EXIT_TERMINATED, "", [line])
    assert asyncio.run(_count(other)) == 1


@pytest.mark.parametrize("how", list(HOW))
def test_a_stopped_solver_run_leaves_no_worker(how: str, tmp_path: Path) -> None:
    """Before: SIGTERM ended the benchmark and left its two solver workers waiting for
    work, for ever (re-parented to init), and a Ctrl-C took tens of seconds (the
    workers finished the chunks they had taken). Workers killed instead broke the pool,
    whose thread printed an InvalidStateError traceback (Python 3.11)."""
    sig, group = HOW[how]
    stopped = _stop_mid_run(CASES["solver"], sig, group, tmp_path)
    status, line = SAID[sig]
    assert (stopped.survivors, stopped.files) == ([], [])
    assert (stopped.status, stopped.out, stopped.err) == (status, "", line + "\n")


def test_a_solver_run_with_a_paused_worker_still_stops(tmp_path: Path) -> None:
    """A worker that does not answer the stop (paused by SIGSTOP: a debugger, a
    container frozen in part) is waited for ``stopping.STOP_TIMEOUT_S``, then killed.
    Before, the benchmark waited for its pool for ever with SIGINT and SIGTERM ignored
    (bench/stopping.py's ``shielded``): still there 60 s after the SIGTERM, SIGKILL the
    only way out."""

    def pause_one(children: list[int]) -> None:
        os.kill(children[0], signal.SIGSTOP)

    stopped = _stop_mid_run(CASES["solver"], signal.SIGTERM, False, tmp_path, meanwhile=pause_one)
    status, line = SAID[signal.SIGTERM]
    assert (stopped.survivors, stopped.files) == ([], [])
    assert (stopped.status, stopped.out, stopped.err) == (status, "", line + "\n")
    # The wait, and not twice it: the killing itself is not another wait.
    assert stopping.STOP_TIMEOUT_S <= stopped.seconds < 1.5 * stopping.STOP_TIMEOUT_S


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_sigterm_cancels_a_loop_between_callbacks_not_inside_one(sigint: str) -> None:
    """In process: SIGTERM cancels the running coroutine at its next await, as Ctrl-C
    does under asyncio — the callback running when it came finishes first. With SIGINT
    ignored (a script's background job) asyncio handles no signal, and SIGTERM raised
    KeyboardInterrupt inside whatever callback ran: here the callback never finished
    (the runs: tracebacks from the store's group commit and a transport's
    connection_lost, and a server run that said its rooms did not start). SIGINT is
    ignored again afterwards, and not left blocked."""
    handler = signal.default_int_handler if sigint == "default" else signal.SIG_IGN
    previous = signal.signal(signal.SIGINT, handler)
    done: list[str] = []

    async def run() -> None:
        def busy() -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before the sleep
            time.sleep(0.1)
            done.append("callback")

        asyncio.get_running_loop().call_soon(busy)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            done.append("cancelled")
            raise

    try:
        with stopping.sigterm_as_interrupt() as stop, pytest.raises(KeyboardInterrupt):
            asyncio.run(run())
        assert done == ["callback", "cancelled"]
        assert (stop.signal, stop.words, stop.status) == (
            signal.SIGTERM,
            "terminated (SIGTERM)",
            EXIT_TERMINATED,
        )
        assert signal.getsignal(signal.SIGINT) is handler
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, previous)


#: docs/performance.md's command for a run killed by SIGKILL: its keys, by its
#: process id (URL and PID in the environment).
DELETE_A_KILLED_RUNS_KEYS = (
    'for family in solrace-bench solrace-bench-core; do redis-cli -u "$URL" --scan '
    '--pattern "$family:$PID-*" | xargs -r redis-cli -u "$URL" unlink; done'
)
#: How long a killed run's children may take to end: the server benchmark's
#: solrace-server drains (SIGTERM from its parent's death), up to a few seconds.
KILLED_GRACE_S = 30.0


@pytest.mark.parametrize("name", ["core-callgrind", "server", "solver"])
def test_sigkill_leaves_only_keys_which_the_documented_command_deletes(
    name: str, anothers_key: Callable[[str], str], tmp_path: Path
) -> None:
    """SIGKILL cannot be caught: the run's keys stay, but no process of it goes on (each
    child dies with it: before, the server benchmark's solrace-server and the solver's
    workers ran on), and docs/performance.md's command deletes exactly its keys."""
    assert DELETE_A_KILLED_RUNS_KEYS in (ROOT / "docs" / "performance.md").read_text()
    case = CASES[name]
    other = anothers_key(case.family or BENCH_FAMILY)
    mark = uuid.uuid4().hex
    proc = subprocess.Popen(
        [sys.executable, "-m", "solrace.bench", *case.argv, *_redis(case)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, MARK: mark, "TMPDIR": str(tmp_path)},  # what it leaves, pytest's
        start_new_session=True,
    )
    try:
        if case.family is not None:
            pattern = f"{case.family}{proc.pid}-*:{case.keys_under}"
            _wait_for(f"key {pattern}", lambda: asyncio.run(_count(pattern)) > 0, proc)
        if case.children:
            _wait_for("the workers", lambda: len(_marked(mark)) > case.children, proc)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(STOP_TIMEOUT_S) == -signal.SIGKILL
        deadline = time.monotonic() + KILLED_GRACE_S
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _described(_marked(mark)) == []
        subprocess.run(
            ["bash", "-c", DELETE_A_KILLED_RUNS_KEYS],
            env={**os.environ, "URL": REDIS_URL, "PID": str(proc.pid)},
            check=True,
            timeout=60,
        )
        for family in (BENCH_FAMILY, CORE_FAMILY):
            assert asyncio.run(_count(f"{family}{proc.pid}-*")) == 0
        assert asyncio.run(_count(other)) == 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        for family in (BENCH_FAMILY, CORE_FAMILY):
            asyncio.run(delete_prefix(f"{family}{proc.pid}-"))


async def _redis_pid(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int((await client.info("server"))["process_id"])
    finally:
        await client.aclose()


def test_keys_that_cannot_be_deleted_are_named_in_the_line(
    private_redis: Callable[..., str], tmp_path: Path
) -> None:
    """A Redis that stops answering while the run stops (a private one, paused with
    SIGSTOP) keeps the run's keys: the one line says so and names their prefix — what
    to delete once it answers again — and the status is still SIGTERM's."""
    url = private_redis()
    redis_pid = asyncio.run(_redis_pid(url))
    err_path = tmp_path / "err"
    with err_path.open("w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "solrace.bench", "core", "--redis-url", url],
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            env={**os.environ, "TMPDIR": str(tmp_path)},
            start_new_session=True,
        )
    try:
        pattern = f"{CORE_FAMILY}{proc.pid}-*"
        _wait_for(f"key {pattern}", lambda: asyncio.run(_count(pattern, url)) > 0, proc)
        os.kill(redis_pid, signal.SIGSTOP)
        try:
            os.kill(proc.pid, signal.SIGTERM)
            status = proc.wait(STOP_TIMEOUT_S)
        finally:
            os.kill(redis_pid, signal.SIGCONT)
        err = err_path.read_text()
        said = re.fullmatch(
            rf"{PROG}: terminated \(SIGTERM\); its keys could not be deleted \(.+\): "
            rf"delete those under ({CORE_FAMILY}{proc.pid}-[0-9a-f]{{12}}:)\n",
            err,
        )
        assert (status, said is not None) == (EXIT_TERMINATED, True), err
        # Whether the keys are still there once Redis runs again is not the run's to
        # say: the delete it sent before it gave up may sit in Redis's socket buffer and
        # run on SIGCONT (a loaded CI run found none left). The line names the run's
        # own prefix, whose keys were there (waited for above).
        assert said is not None and said.group(1).startswith(pattern[:-1])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
