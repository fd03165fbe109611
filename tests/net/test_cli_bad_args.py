"""Bad arguments to the command lines — ``solrace-server``, ``solrace-rules``,
``python -m solrace.bench`` — found by the bad-input audit: each is one line on
standard error and the documented exit status, never a traceback, never a server that
starts and cannot serve (docs/server.md, "Command line")."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from solrace.rules import deal, dump_position
from solrace.rules.cli import MAX_PERFT_DEPTH, PERFT_GROWS
from solrace.rules.cli import main as rules_main
from solrace.store.embedded import EmbeddedEngine, find_engine

from tests.support.redis import CLUSTER_URL, REDIS_URL
from tests.support.server_process import SERVER_SCRIPT


def _server(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SERVER_SCRIPT), "--port", "0", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
    )


def _one_line(stderr: str, says: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert says in lines[0], stderr


# ------------------------------------------------------------------ solrace-server
@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        # The engine started there, but the unix:// URL of its socket lost the newline:
        # the node served "unavailable" forever.
        (["--data-dir", "/tmp/solrace\nfuzz"], {}, "--data-dir: must not contain a control"),
        ([], {"SOLRACE_DATA_DIR": "/tmp/solrace\tfuzz"}, "$SOLRACE_DATA_DIR: must not contain"),
        # redis-py handed ?bogus=1 to its connection class: a TypeError traceback, exit 1.
        (
            ["--redis-url", REDIS_URL + "?bogus=1"],
            {},
            "--redis-url: the Redis client takes no option 'bogus'",
        ),
        (
            ["--redis-url", CLUSTER_URL + "?bogus=1"],
            {},
            "--redis-url: the Redis client takes no option 'bogus'",
        ),
        (
            ["--redis-url", REDIS_URL + "?ssl_certfile=x.pem"],
            {},
            "takes no option 'ssl_certfile'",
        ),
        (["--redis-url", "unix:///tmp/x.sock?bogus=1"], {}, "takes no option 'bogus'"),
        (["--redis-url", REDIS_URL + "?socket_timeout=abc"], {}, "Invalid value"),
        # redis-py takes the query's db over the path's: the node ran on database 3
        # while its "store: redis url=…/14?db=3" line named 14 first (an operator audit).
        (
            ["--redis-url", "redis://127.0.0.1:6379/14?db=3"],
            {},
            "--redis-url: the database is given twice ('14' in the path, '3' in the query)",
        ),
        # redis-py takes a repeated option's first value, silently: the node ran on
        # database 3 of a URL whose last word was 4.
        (
            ["--redis-url", "redis://127.0.0.1:6379?db=3&db=4"],
            {},
            "--redis-url: the option 'db' is given twice in the query ('3', '4')",
        ),
        (
            ["--redis-url", "redis://127.0.0.1:6379/0?db=3&db=4"],
            {},
            "--redis-url: the option 'db' is given twice in the query ('3', '4')",
        ),
        (
            ["--redis-url", CLUSTER_URL + "?socket_timeout=2&socket_timeout=3"],
            {},
            "--redis-url: the option 'socket_timeout' is given twice in the query ('2', '3')",
        ),
        # On the embedded engine the store's ValueError was a traceback (status 1); with a
        # Redis URL it was blamed on --redis-url.
        (["--key-prefix", "a{b"], {}, "--key-prefix: must not contain braces"),
        # An escape character was taken into every key (a newcomer walk).
        (["--key-prefix", "x\x1by"], {}, "--key-prefix: must be printable: 'x\\x1by'"),
        (
            ["--redis-url", REDIS_URL],
            {"SOLRACE_KEY_PREFIX": "x}"},
            "$SOLRACE_KEY_PREFIX: must not contain braces",
        ),
        # An empty prefix was taken: the node's keys (node:…, rooms:listed, code:…)
        # mixed with every other key of the database (an operator audit).
        (
            ["--key-prefix", "", "--redis-url", REDIS_URL],
            {},
            "--key-prefix: must not be empty",
        ),
    ],
)
def test_a_bad_flag_found_by_the_audit_is_one_line_and_status_2(
    args: list[str], env: dict[str, str], says: str
) -> None:
    done = _server(*args, env=env)
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, says)


@pytest.mark.parametrize("deep", [False, True], ids=["in its data dir", "in a temporary dir"])
async def test_another_nodes_embedded_engine_is_refused_as_a_redis_url(
    tmp_path: Path, deep: bool
) -> None:
    """``--redis-url unix://DATA_DIR/engine.sock`` ran a second node on another node's
    embedded engine, which stopped with its owner (an operator audit): the second node
    then failed every request. The embedded store is one node's; it is refused, one
    line, status 2, saying whose it is and that several nodes share a Redis. Its
    socket is found in the data directory, or (a data directory too long for a socket
    address) in the private temporary directory the engine listens in instead."""
    data = tmp_path / ("d" * 60) / ("e" * 60) if deep else tmp_path / "data"
    engine = await EmbeddedEngine.start(data)
    try:
        assert engine.socket_path.startswith(str(data)) != deep
        done = await asyncio.to_thread(_server, "--redis-url", engine.url)
    finally:
        await engine.stop()
    assert done.returncode == 2, done.stderr
    _one_line(
        done.stderr,
        f"--redis-url: {engine.url} is the embedded engine of the solrace-server on {data} "
        f"(pid {os.getpid()}): it is that node's alone and stops with it; several nodes "
        "share a Redis of their own",
    )


def test_a_plain_redis_on_a_socket_named_like_the_engines_is_not_refused(tmp_path: Path) -> None:
    """Only the embedded engine's socket is refused: an operator's Redis may listen on
    any path, ``engine.sock`` included, in a directory that holds no node's lock."""
    from solrace.store.embedded import embedded_data_dir

    (tmp_path / "engine.sock").touch()
    assert embedded_data_dir(str(tmp_path / "engine.sock")) is None
    assert embedded_data_dir("/run/redis/redis-server.sock") is None


def test_a_redis_url_query_option_redis_py_takes_still_starts() -> None:
    """The check builds the client the store builds: known options pass."""
    from solrace.net.main import check_redis_url

    for url in (
        REDIS_URL + "?socket_timeout=2&client_name=solrace",
        "rediss://127.0.0.1:6379/0?ssl_cert_reqs=none",
        CLUSTER_URL + "?socket_timeout=2",
    ):
        assert check_redis_url(url) == url


@pytest.fixture
def password_redis(tmp_path: Path) -> Iterator[str]:
    """A Redis (the embedded engine's binary) that requires the password "sekret",
    on a unix socket; its URL without credentials."""
    socket_path = tmp_path / "r.sock"
    engine = [str(find_engine()), "--port", "0", "--unixsocket", str(socket_path)]
    settings_ = ["--requirepass", "sekret", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(
        [*engine, *settings_, "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(500):
            if socket_path.exists():
                break
            time.sleep(0.01)
        yield f"unix://{socket_path}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_redis_that_refuses_the_credentials_is_status_2_not_served(password_redis: str) -> None:
    """Redis answered "NOAUTH"/"WRONGPASS"; redis-py calls that a connection error, so
    the node said "redis does not answer; serving anyway" and served nothing, forever."""
    path = password_redis.removeprefix("unix://")
    for url, says in [
        (password_redis, "it requires a password"),
        (f"unix://:wrong@{path}", "invalid username-password pair"),
        (f"unix://bob:wrong@{path}", "invalid username-password pair"),
    ]:
        done = _server("--redis-url", url)
        assert done.returncode == 2, done.stderr
        _one_line(done.stderr, "--redis-url: Redis refused unix://")
        assert says in done.stderr and ":wrong@" not in done.stderr  # the password is hidden


def _without_file_permissions() -> list[str]:
    """A prefix that runs a command without root's power to ignore file permissions
    (the test must see what a user sees), or nothing when not root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file permissions cannot be tested")
    drop = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}"]


def test_a_data_dir_inside_an_unreadable_directory_is_status_2(tmp_path: Path) -> None:
    """After mkdir failed with EACCES, the lock's own 'is it a file?' check raised
    PermissionError, which escaped as 'cannot start: [Errno 13] …' and status 1."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0)
    try:
        done = subprocess.run(
            [
                *_without_file_permissions(),
                *(str(SERVER_SCRIPT), "--port", "0", "--data-dir", str(locked / "solrace")),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        locked.chmod(0o700)
    _one_line(done.stderr, "--data-dir: cannot use data directory")
    assert done.returncode == 2


# ------------------------------------------------------------------ solrace-rules
_POSITIONS = [json.loads(dump_position(deal(v, 7))) for v in ("yukon", "klondike", "alaska")]
_ODD = [None, True, 0, -1, 2**70, 1.5, "", "AS", "as", "ZZ", "10H", [], {}, [None], {"a": 1}]
#: A fresh copy of one of them (a later step may walk into it and change it).
_odd = st.sampled_from(_ODD).map(copy.deepcopy)


@st.composite
def _spoilt_positions(draw: st.DrawFn) -> str:
    """A real position with one to three of its values replaced, removed or added."""
    position: Any = json.loads(json.dumps(draw(st.sampled_from(_POSITIONS))))
    for _ in range(draw(st.integers(1, 3))):
        parent, key = position, None
        while True:  # walk down to a random value
            keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            child = parent[key]
            if not isinstance(child, dict | list) or not child or draw(st.booleans()):
                break
            parent = child
        if key is None:
            continue
        action = draw(st.integers(0, 2))
        if action == 0 or isinstance(parent, list):
            parent[key] = draw(_odd)
        elif action == 1:
            del parent[key]
        else:
            parent["x_" + str(key)] = draw(_odd)
    return json.dumps(position)


@settings(max_examples=150, deadline=None)
@given(
    text=_spoilt_positions(),
    command=st.sampled_from(
        [["moves"], ["perft", "1"], ["play", "D"], ["play", "1>F"], ["hint", "--budget", "30"]]
    ),
)
def test_solrace_rules_on_a_spoilt_position_says_one_line(text: str, command: list[str]) -> None:
    argv = [command[0], "-", *command[1:]]
    out, err = io.StringIO(), io.StringIO()
    stdin = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = rules_main(argv)
            except SystemExit as exit_:
                status = exit_.code  # type: ignore[assignment]
    finally:
        sys.stdin = stdin
    if err.getvalue():
        assert status in (1, 2, 3, 4), (status, err.getvalue())
        _one_line(err.getvalue(), "solrace-rules: ")
    else:
        assert status in (0, 3, 4), (status, text)


@pytest.mark.parametrize(
    ("args", "stdin", "status", "says"),
    [
        (["moves", "-"], "{", 1, "solrace-rules: standard input: not JSON"),
        (["moves", "-"], "[]", 1, "a position is a JSON object"),
        (["deal", "klondikee", "1"], None, 2, "unknown variant 'klondikee'"),
        (["deal", "yukon", "-1"], None, 2, "a seed is a whole number"),
        (["deal", "yukon", "1.5"], None, 2, "not a whole number: '1.5'"),
        (["deal", "yukon", str(2**64)], None, 2, "a seed is a whole number"),
        (["perft", "-", "x"], "{}", 2, "argument depth: not a whole number"),
        # Deeper than Python's recursion limit: a RecursionError traceback, status 1.
        (
            ["perft", "-", "2000"],
            dump_position(deal("yukon", 7)),
            2,
            f"argument depth: must be 0 to {MAX_PERFT_DEPTH}, got 2000: {PERFT_GROWS}",
        ),
    ],
)
def test_solrace_rules_refuses_bad_input_in_one_line(
    args: list[str], stdin: str | None, status: int, says: str
) -> None:
    done = subprocess.run(
        [str(SERVER_SCRIPT.parent / "solrace-rules"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == status, done.stderr
    _one_line(done.stderr, says)


# ------------------------------------------------------------------ the benchmark
def test_the_benchmark_refuses_an_unknown_redis_url_option_in_one_line() -> None:
    """It shares solrace-server's check of --redis-url: redis-py's TypeError was a
    traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "solrace.bench", "store", "--redis-url", REDIS_URL + "?bogus=1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, "--redis-url: the Redis client takes no option 'bogus'")


def test_a_default_data_dir_that_cannot_be_made_says_no_redis_url_was_given(
    tmp_path: Path,
) -> None:
    """The systemd unit of deploy/ with SOLRACE_REDIS_URL missing from its environment
    file (a typo, a line commented out): the node fell back to the embedded store in
    its user's home, which ProtectSystem=strict makes read-only, and said only
    "--data-dir: cannot use data directory /opt/solrace/.local/share/solrace:
    Read-only file system" — a flag nobody gave, and not the Redis URL nobody gave
    (an operator audit)."""
    home = tmp_path / "home"
    home.write_text("a file: no directory can be made under it\n")
    env = {"HOME": str(home), "XDG_DATA_HOME": "", "SOLRACE_DATA_DIR": "", "SOLRACE_REDIS_URL": ""}
    done = _server(env=env)
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, f"cannot use data directory {home}/.local/share/solrace")
    assert "no --redis-url or $SOLRACE_REDIS_URL" in done.stderr, done.stderr
    assert "--data-dir: " not in done.stderr, done.stderr  # not a flag it was given
    # Given by the operator, it is that flag's fault, as before.
    done = _server("--data-dir", str(home / "data"), env=env)
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, f"--data-dir: cannot use data directory {home}/data")


def test_a_password_in_the_redis_url_query_is_hidden_and_not_called_missing(
    password_redis: str,
) -> None:
    """redis-py takes the password from the query too (``?password=…``, a form many
    tools write): the refusal quoted the URL whole, password and all, and said the
    password was missing although one was given (an operator audit)."""
    done = _server("--redis-url", f"{password_redis}?password=wr0ngpw")
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, "--redis-url: Redis refused unix://")
    assert "wr0ngpw" not in done.stderr  # the password is hidden
    assert "it requires a password" not in done.stderr  # one was given: it is wrong


@pytest.mark.parametrize(
    "option", ["socket_timeout=0", "socket_timeout=-1", "socket_connect_timeout=0"]
)
def test_a_redis_timeout_of_zero_is_refused_not_served_unavailable(
    password_redis: str, option: str
) -> None:
    """``?socket_timeout=0`` (0 often means "no timeout") is a timeout of nothing to
    redis-py: every call fails at once. The node said ``redis does not answer; serving
    anyway`` of a Redis that answers ``PING`` and refused every request ``unavailable``
    for as long as it ran (an operator audit)."""
    path = password_redis.removeprefix("unix://")
    try:
        done = _server("--redis-url", f"unix://:sekret@{path}?{option}")
    except subprocess.TimeoutExpired:
        pytest.fail(f"?{option}: the node started and served a Redis it could never reach")
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, "--redis-url:")
