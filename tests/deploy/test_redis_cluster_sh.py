"""deploy/redis-cluster.sh, the local Redis Cluster that .ci/run (and a developer)
starts: three masters on spare ports that agree on cluster_state:ok, a URL solrace
accepts, and nothing left behind — no process, no file — after ``stop``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from solrace.store import Store

from tests.deploy.conftest import REDIS_CLUSTER_SH as SCRIPT
from tests.support.redis import answers
from tests.support.terminal import signals_as_a_shell_gives


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def test_start_gives_a_working_cluster_and_stop_removes_it(tmp_path: Path) -> None:
    """DIR relative, as a developer types it: ``start cluster …`` failed, each server
    refusing its --logfile (``Can't open the log file``) — redis-server changes to its
    --dir first, and took the relative log file's path from there."""
    ports = _run("spare-ports", "3").stdout.split()
    assert len(ports) == 3
    work = tmp_path / "cluster"
    started = _run("start", "cluster", *ports, cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        assert url == "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
        for port in ports:
            info = subprocess.run(
                ["redis-cli", "-p", port, "cluster", "info"], capture_output=True, text=True
            ).stdout
            assert "cluster_state:ok" in info and "cluster_known_nodes:3" in info

        async def race_step() -> None:
            store = await Store.connect(url, prefix="t:")
            try:
                await store.save_meta("r", b"meta")  # a room: the store writes no other
                assert await store.append_event("r", b"e") == 1
                assert await store.version("r") == 1
            finally:
                await store.close()

        asyncio.run(race_step())
        # a second start on the same ports is refused, and leaves the cluster alone
        again = _run("start", str(tmp_path / "other"), *ports)
        assert again.returncode == 1 and "already answers" in again.stderr
    finally:
        stopped = _run("stop", "cluster", cwd=tmp_path)
    assert (stopped.returncode, stopped.stderr) == (0, "")
    assert not work.exists()
    assert not any(answers(int(p)) for p in ports)


def test_usage_and_url() -> None:
    assert _run().returncode == 2
    assert _run("start", "/tmp/x", "1", "2").returncode == 2  # fewer than 3 masters
    assert _run("bogus").returncode == 2
    assert _run("url", "7101", "7102").stdout.strip() == (
        "redis+cluster://127.0.0.1:7101,127.0.0.1:7102"
    )
    usage = _run("--help").stdout
    assert "start DIR PORT" in usage and "set -euo" not in usage


_NOT_A_PORT = "1 to 55535: its cluster bus port, PORT+10000, is a port too"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["spare-ports", "abc"], "spare-ports: N must be a whole number, 1 to 100, not 'abc'"),
        (["spare-ports", "0"], "spare-ports: N must be a whole number, 1 to 100, not '0'"),
        (["spare-ports", "-1"], "spare-ports: N must be a whole number, 1 to 100, not '-1'"),
        (
            ["spare-ports", "99999999999999999999"],
            "spare-ports: N must be a whole number, 1 to 100, not '99999999999999999999'",
        ),
        (["start", "DIR", "70000", "7201", "7202"], f"not a port: '70000' ({_NOT_A_PORT})"),
        (["start", "DIR", "0", "7201", "7202"], f"not a port: '0' ({_NOT_A_PORT})"),
        (["start", "DIR", "7201", "7202", "--replicas"], "--replicas needs a value"),
        (
            ["start", "DIR", "--replicas", "x", "7201", "7202"],
            "--replicas must be a whole number, 0 to 5, not 'x'",
        ),
        (["start", "DIR", "7201", "7202", "--conf"], "--conf needs a value"),
        (
            ["start", "DIR", "--conf", "/nonexistent.conf", "7201", "7202"],
            "--conf: cannot read /nonexistent.conf",
        ),
        (["url", "7101", "abc"], f"not a port: 'abc' ({_NOT_A_PORT})"),
    ],
)
def test_a_bad_argument_is_one_line_and_status_2_before_anything_starts(
    args: list[str], says: str, tmp_path: Path
) -> None:
    """A newcomer audit: ``spare-ports abc`` said bash's ``[: abc: integer expression
    expected`` twice, then "no abc spare ports found", status 1 (``-1`` printed a port,
    status 0); ``start DIR 99999 …`` made DIR/99999 and printed redis-server's
    three-line refusal, status 1; ``--replicas`` or ``--conf`` typed last said
    ``$2: unbound variable``, status 1; a ``--conf`` that is not there reached
    redis-server; ``url 7101 abc`` printed ``127.0.0.1:abc``."""
    where = tmp_path / "cluster"
    done = _run(*[str(where) if a == "DIR" else a for a in args])
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"redis-cluster.sh: {says}\n")
    assert not where.exists()


def test_spare_ports_and_their_bus_ports_stay_below_the_ephemeral_range() -> None:
    """A bus port in the ephemeral range can be held by any client socket's local end
    (CI once lost a failover test that way: the node could not bind); picks must not
    collide with each other's bus ports either."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(5):
        ports = [int(p) for p in _run("spare-ports", "6").stdout.split()]
        assert len(set(ports)) == 6
        assert all(p > 1024 and p + 10000 < low for p in ports)
        assert not {p + 10000 for p in ports} & set(ports)


def _ctrl_c_once_started(
    where: Path, ports: list[str], path: str | None = None
) -> tuple[subprocess.Popen[str], str, str]:
    """``start`` Ctrl-C'd once its first server has written its pid file: SIGINT to its
    process group, as a terminal sends it, with SIGINT at its default action in the
    script (a suite run in a background job or under ``nohup`` ignores it, and bash
    cannot trap a signal ignored when it started: the start ran on to the end, 0)."""
    start = subprocess.Popen(
        ["bash", str(SCRIPT), "start", str(where), *ports],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,  # a shell's foreground job: Ctrl-C signals the whole group
        preexec_fn=signals_as_a_shell_gives,
        env=None if path is None else {**os.environ, "PATH": path},
    )
    deadline = time.monotonic() + 20
    while not (where / ports[0] / "redis.pid").exists():  # the first server is up
        assert time.monotonic() < deadline and start.poll() is None, start.stderr
        time.sleep(0.005)
    os.killpg(start.pid, signal.SIGINT)
    out, err = start.communicate(timeout=30)
    return start, out, err


def test_ctrl_c_during_start_stops_what_it_started(tmp_path: Path) -> None:
    """A newcomer audit: Ctrl-C while ``start`` waited for the cluster (some 4 s here)
    ended it by the signal without a word and left the servers it had started running,
    daemonized, and DIR behind; the next ``start`` on those ports said "something already
    answers". Now it stops them, removes what it made and says so: one line, 130."""
    ports = _run("spare-ports", "3").stdout.split()
    where = tmp_path / "cluster"
    try:
        start, out, err = _ctrl_c_once_started(where, ports)
        left = ([port for port in ports if answers(int(port))], where.exists())
    finally:
        _run("stop", str(where))  # whatever the script left, in the test that fails
    assert (start.returncode, out, err) == (
        130,
        "",
        "redis-cluster.sh: interrupted: the servers it started are stopped\n",
    )
    assert left == ([], False)  # no server answers, DIR is gone


def test_a_start_that_fails_stops_what_it_started(tmp_path: Path) -> None:
    """The same clean-up as Ctrl-C's on a failure (status 1): here the third server's
    directory cannot be made (a file has its name), after two servers started. A DIR
    that was there before is kept, with what it held."""
    ports = _run("spare-ports", "3").stdout.split()
    where = tmp_path / "cluster"
    where.mkdir()
    (where / ports[2]).write_text("in the way\n")
    done = _run("start", str(where), *ports)
    left = ([port for port in ports if answers(int(port))], sorted(where.iterdir()))
    _run("stop", str(where))  # whatever the script left, in the test that fails
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert left == ([], [where / ports[2]])


def test_a_failed_start_leaves_alone_what_it_did_not_make(tmp_path: Path) -> None:
    """The clean-up of a failed start stops the servers it launched and removes the
    directories it made — nothing else. A port's directory that was there before (a
    cluster's data, AOF and nodes.conf, left by a reboot: the start that tried to bring
    it back failed at ``cluster create``, "not empty") was deleted, its data with it;
    and a stale ``redis.pid`` there, whose server had not replaced it (this one could
    not bind its port), had its pid — now some other process's — killed."""
    ports = _run("spare-ports", "3").stdout.split()
    where = tmp_path / "cluster"
    kept = where / ports[0]
    kept.mkdir(parents=True)
    (kept / "appendonly.aof").write_text("the user's data\n")
    stranger = subprocess.Popen(["sleep", "60"])  # what a stale pid now names
    (kept / "redis.pid").write_text(f"{stranger.pid}\n")
    (where / ports[2]).write_text("in the way\n")  # the start fails at the third port
    held = socket.socket()  # the first server cannot bind: it never writes its pid file
    try:
        held.bind(("127.0.0.1", int(ports[0])))
        done = _run("start", str(where), *ports)
        alive = stranger.poll() is None
        left = [port for port in ports if answers(int(port))]
        data = (kept / "appendonly.aof").read_text() if kept.exists() else None
    finally:
        held.close()
        stranger.kill()
        stranger.wait()
        _run("stop", str(where))  # whatever the script left, in the test that fails
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (alive, left) == (True, [])
    assert data == "the user's data\n"


def test_ctrl_c_cleans_up_once(tmp_path: Path) -> None:
    """The INT trap's clean-up ends in ``exit 130``, which runs the EXIT trap, whose
    status is not 0: it cleaned up a second time, waiting a second per server for the
    pid file the first clean-up had removed (Ctrl-C took some 5 s, not 2). Seen here
    by the removals of DIR: one clean-up, one ``rmdir`` (a shim on PATH counts them)."""
    ports = _run("spare-ports", "3").stdout.split()
    where, shims, calls = tmp_path / "cluster", tmp_path / "bin", tmp_path / "rmdir-calls"
    shims.mkdir()
    rmdir = shims / "rmdir"
    rmdir.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec /bin/rmdir "$@"\n')
    rmdir.chmod(0o755)
    try:
        start, _, _ = _ctrl_c_once_started(where, ports, f"{shims}:{os.environ['PATH']}")
    finally:
        _run("stop", str(where))
    assert (start.returncode, calls.read_text()) == (130, f"{where}\n")


def _posing_as(title: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """A process whose command line reads ``title`` (as a redis-server's process title
    does, ``redis-server 127.0.0.1:PORT [cluster]``), once it does, run from ``cwd`` (a
    redis-server runs from its ``--dir``)."""
    process = subprocess.Popen(["bash", "-c", f'exec -a "{title}" sleep 60'], cwd=cwd)
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    deadline = time.monotonic() + 5
    while not cmdline.read_bytes().startswith(title.encode()):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    return process


def test_stop_kills_no_process_a_stale_pid_file_names(tmp_path: Path) -> None:
    """``stop`` killed whatever pid each ``redis.pid`` held: after a reboot (the
        servers gone, their pid files left) that may be any process of the machine's. It
        now kills a pid only while it is a redis-server on that directory's port, and says
        in one line that it skipped another (a ``sleep``, a redis-server on another port) or
    one that is not running."""
    where = tmp_path / "cluster"
    stranger = subprocess.Popen(["sleep", "60"])
    elsewhere = _posing_as("redis-server 127.0.0.1:7203 [cluster]")
    (where / "7204").mkdir(parents=True)
    own = _posing_as("redis-server 127.0.0.1:7204 [cluster]", cwd=where / "7204")
    for port, process in (("7201", stranger), ("7202", elsewhere), ("7204", own)):
        (where / port).mkdir(parents=True, exist_ok=True)
        (where / port / "redis.pid").write_text(f"{process.pid}\n")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has (for the next ~4 million pids)
    (where / "7205").mkdir()
    (where / "7205" / "redis.pid").write_text(f"{gone.pid}\n")
    try:
        stop = subprocess.Popen(
            ["bash", str(SCRIPT), "stop", str(where)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with contextlib.suppress(subprocess.TimeoutExpired):
            own.wait(timeout=5)  # reaped here, this test's child: stop waits for it to go
        out, err = stop.communicate(timeout=10)
        alive = (stranger.poll() is None, elsewhere.poll() is None, own.poll() is None)
    finally:
        for process in (stranger, elsewhere, own):
            process.kill()
            process.wait()
    assert (stop.returncode, out, alive) == (0, "", (True, True, False)), err
    assert err == (
        f"redis-cluster.sh: {where}/7201/redis.pid: pid {stranger.pid} is not a "
        "redis-server on port 7201 run from its directory (a stale pid file): left running\n"
        f"redis-cluster.sh: {where}/7202/redis.pid: pid {elsewhere.pid} is not a "
        "redis-server on port 7202 run from its directory (a stale pid file): left running\n"
        f"redis-cluster.sh: {where}/7205/redis.pid: pid {gone.pid} is not running (a stale "
        "pid file)\n"
    )
    assert not where.exists()


def test_stop_kills_no_server_of_another_directory(tmp_path: Path) -> None:
    """A pid file copied with its directory (a backup, ``cp -r DIR DIR.bak``) names the
    live cluster's redis-servers, on the right ports: ``stop DIR.bak`` killed them, and
    DIR's cluster was gone. A server runs from its ``--dir``: the one ``stop`` kills
    runs from the pid file's directory."""
    live, copy = tmp_path / "cluster" / "7206", tmp_path / "cluster.bak" / "7206"
    live.mkdir(parents=True)
    copy.mkdir(parents=True)
    server = _posing_as("redis-server 127.0.0.1:7206 [cluster]", cwd=live)
    (copy / "redis.pid").write_text(f"{server.pid}\n")
    try:
        stop = _run("stop", str(copy.parent))
        alive = server.poll() is None
    finally:
        server.kill()
        server.wait()
    assert (stop.returncode, alive) == (0, True), stop.stderr
    assert stop.stderr == (
        f"redis-cluster.sh: {copy}/redis.pid: pid {server.pid} is not a redis-server on "
        "port 7206 run from its directory (a stale pid file): left running\n"
    )
    assert not copy.parent.exists() and live.exists()
