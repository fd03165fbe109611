"""``solrace-server``'s command line: every bad flag or variable is one line on stderr
and exit status 2 (never a traceback); the rate limit is a flag and a variable; the
event loop is uvloop when installed (``auto``), asyncio's own on request."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import pytest
import uvloop
from solrace.net import main as server_main
from solrace.net.main import (
    ASYNCIO,
    AUTO,
    LOOPS,
    UVLOOP,
    LoopUnavailable,
    check_redis_url,
    resolve_loop,
    run_on_loop,
)
from solrace.net.server import RaceServer
from solrace.protocol.limits import MAX_UNREAD_BYTES_PER_NODE, SPECTATORS_PER_ROOM
from solrace.rooms import solver_workers
from solrace_client import RaceClient
from solrace_client.boardview import board_from_view

from tests.support.interrupt import console_script_interrupted, interrupted_while_loading
from tests.support.redis import (
    CLUSTER_URL,
    REDIS_URL,
    delete_prefix,
    new_prefix,
    redis_process,
    spare_port,
)
from tests.support.server_process import SERVER_SCRIPT, solrace_server


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The server with ``args`` (on port 0 unless they or ``env`` set the port)."""
    port = [] if "--port" in args or "SOLRACE_PORT" in env else ["--port", "0"]
    return subprocess.run(
        [str(SERVER_SCRIPT), *port, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--redis-url", "foo"], {}, "--redis-url: not a Redis URL: 'foo'"),
        (["--keep-results", "0"], {}, "--keep-results: must be more than 0 and at most 36500"),
        ([], {"SOLRACE_KEEP_RESULTS": "soon"}, "not a number: 'soon' (or forever)"),
        (["--keep-results", "1e12"], {}, "at most 36500 days, got 1000000000000 days"),
        (["--redis-url", "http://127.0.0.1:6379"], {}, "not a Redis URL"),
        (["--redis-url", REDIS_URL.rsplit("/", 1)[0] + "/99"], {}, "DB index is out of range"),
        (["--redis-url", "redis://127.0.0.1:6379/x"], {}, "database index 'x'"),
        # a digit to str.isdigit, not to redis-py: the node ran on database 0 in silence
        (["--redis-url", "redis://127.0.0.1:6379/²"], {}, "database index '²' is not a number"),
        # Python's words: "invalid literal for int() with base 10: '7²'"
        (
            ["--redis-url", "redis+cluster://127.0.0.1:7²"],
            {},
            "cluster node '127.0.0.1:7²' is not host:port in",
        ),
        (["--redis-url", "redis+cluster://127.0.0.1"], {}, "'127.0.0.1' is not host:port"),
        (["--redis-url", "redis+cluster://h:7101/1"], {}, "a Redis Cluster has only database 0"),
        # a cluster URL's password was said whole in its error line (a unit's log)
        (
            ["--redis-url", "redis+cluster://u:s3cret@127.0.0.1/0"],
            {},
            "'127.0.0.1' is not host:port in 'redis+cluster://***@127.0.0.1/0'",
        ),
        ([], {"SOLRACE_REDIS_URL": "redis+cluster://"}, "$SOLRACE_REDIS_URL: no cluster node"),
        (["--port", "99999"], {}, "--port: port 99999 is out of range"),
        # said whole: 4,000 nines on the line
        (["--port", "9" * 4000], {}, f"--port: port '{'9' * 40}'… (4,000 characters) is out"),
        ([], {"SOLRACE_PORT": "abc"}, "$SOLRACE_PORT: not a port number: 'abc'"),
        (["--rate-per-s", "0"], {}, "--rate-per-s: must be more than 0 and at most 10000, got 0"),
        ([], {"SOLRACE_RATE_BURST": "0.5"}, "$SOLRACE_RATE_BURST: must be 1 to 10000, got 0.5"),
        (["--log-level", "loud"], {}, "--log-level: must be one of debug, info"),
        (["--loop", "fast"], {}, "--loop: must be one of auto, uvloop, asyncio, got 'fast'"),
        ([], {"SOLRACE_LOOP": "trio"}, "$SOLRACE_LOOP: must be one of auto, uvloop, asyncio"),
        (["--bogus"], {}, "unrecognized arguments: --bogus"),
        (
            ["--data-dir", "/dev/null/solrace"],
            {},
            "--data-dir: cannot use data directory /dev/null/solrace: Not a directory",
        ),
        (
            ["--data-dir", __file__],
            {},
            f"--data-dir: cannot use data directory {__file__}: it is a file, not a directory",
        ),
        # a name the system refuses as too long was said whole: a 300-character line
        (
            ["--data-dir", "/tmp/" + "d" * 300],
            {},
            "--data-dir: cannot use data directory '/tmp/"
            + "d" * 35
            + "'… (305 characters): File name too long",
        ),
        (["--host", ""], {}, "--host: must not be empty (0.0.0.0 listens on every IPv4 address)"),
        (
            ["--max-connections", "0"],
            {},
            "--max-connections: must be 1 to 1048576, got 0 (or auto)",
        ),
        ([], {"SOLRACE_MAX_CONNECTIONS": "lots"}, "not a whole number: 'lots' (or auto)"),
        # taken: the node logged "connections=1000000000000000000000000000000 at most"
        (
            ["--max-connections", "1" + "0" * 30],
            {},
            "--max-connections: must be 1 to 1048576, got 1" + "0" * 30 + " (or auto)",
        ),
        # taken: every create of the node failed "internal", an OverflowError in its log
        (
            [],
            {"SOLRACE_ROOMS_PER_MINUTE_PER_ADDRESS": "1" + "0" * 400},
            "$SOLRACE_ROOMS_PER_MINUTE_PER_ADDRESS: must be 0 to 60000, got '1",
        ),
        (["--rate-per-s", "nan"], {}, "--rate-per-s: not a finite number: 'nan'"),
        (
            ["--max-connections-per-address", "-1"],
            {},
            "--max-connections-per-address: must be 0 to 1048576, got -1",
        ),
        (["--seats-per-address", "-1"], {}, "--seats-per-address: must be 0 to 8, got -1"),
        ([], {"SOLRACE_SEATS_PER_ADDRESS": "one"}, "not a whole number: 'one'"),
        (
            ["--spectators-per-room", "-1"],
            {},
            "--spectators-per-room: must be 0 to 1048576, got -1",
        ),
        (
            ["--trusted-proxies", "my-proxy"],
            {},
            "--trusted-proxies: 'my-proxy' is not an address or network",
        ),
        ([], {"SOLRACE_TRUSTED_PROXIES": "10.0.0.0/33"}, "'10.0.0.0/33' is not an address"),
        # bytes that are not UTF-8 ($'\xff' in a shell): a traceback, status 1, once the
        # engine's socket path or the first key was encoded; a Redis URL's host was
        # served (retried for ever); a host's said IDNA's words
        (["--data-dir", "/tmp/d\udcff"], {}, "--data-dir: not UTF-8 text: '/tmp/d\\xff'"),
        (
            ["--key-prefix", "p\udcff:", "--redis-url", REDIS_URL],
            {},
            "--key-prefix: not UTF-8 text: 'p\\xff:'",
        ),
        ([], {"SOLRACE_KEY_PREFIX": "\udcff"}, "$SOLRACE_KEY_PREFIX: not UTF-8 text: '\\xff'"),
        (["--redis-url", "redis://\udcff/0"], {}, "--redis-url: not UTF-8 text"),
        (["--host", "h\udcff"], {}, "--host: not UTF-8 text: 'h\\xff'"),
        (["--host", "a..b"], {}, "--host: 'a..b' is not a host name (label empty or too long)"),
        # an audit: looked up, "names no address to listen on: Name or service not known";
        # a Redis URL's was served, retried for ever
        (["--host", "a b"], {}, "--host: 'a b' is not a host name (it holds a space)"),
        (
            ["--redis-url", "redis+cluster://127.0.0.1:7101,a b:7102"],
            {},
            "--redis-url: 'a b' is not a host name (it holds a space)",
        ),
        # "names no address to listen on: Name or service not known", as in a URL
        (
            ["--host", "[::1]"],
            {},
            "--host: '[::1]' is not a host name: an IPv6 address goes without its brackets "
            "here (--host ::1)",
        ),
        (
            ["--host", "\x1b[2J"],
            {},
            "--host: '\\x1b[2J' is not a host name (it holds a character that is not printable)",
        ),
        (
            ["--redis-url", "redis://a b:6379/0"],
            {},
            "--redis-url: 'a b' is not a host name (it holds a space)",
        ),
        # "--redis-url: Invalid IPv6 URL": urllib's words, and which URL was not said
        (
            ["--redis-url", "redis://\x1b[31m/0"],
            {},
            "--redis-url: not a Redis URL: 'redis://\\x1b[31m/0': it holds a character that "
            "is not printable",
        ),
        (
            ["--redis-url", "redis://[::1/0"],
            {},
            "--redis-url: not a Redis URL: 'redis://[::1/0': invalid IPv6 URL",
        ),
        # the default data directory, from $XDG_DATA_HOME, was not checked as --data-dir
        # is: a traceback (not UTF-8), or an engine whose socket URL lost the newline
        (
            ["--port", "0"],
            {"XDG_DATA_HOME": "/tmp/x\udcff", "SOLRACE_DATA_DIR": ""},
            "--data-dir: not UTF-8 text: '/tmp/x\\xff/solrace' (the default, from "
            "$XDG_DATA_HOME or $HOME: name another with --data-dir)",
        ),
        (
            ["--port", "0"],
            {"XDG_DATA_HOME": "/tmp/x\ny", "SOLRACE_DATA_DIR": ""},
            "--data-dir: must not contain a control character (U+000A) (the default",
        ),
    ],
)
def test_a_bad_flag_or_variable_is_one_line_and_exit_status_2(
    args: list[str], env: dict[str, str], says: str
) -> None:
    done = _run(args, env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert says in lines[0]
    assert "Traceback" not in done.stderr


#: A value each setting takes, as its variable would give it (a test's own data
#: directory and Redis URL aside).
_SPACED = {
    "SOLRACE_HOST": "127.0.0.1",
    "SOLRACE_PORT": "8766",
    "SOLRACE_LOG_LEVEL": "debug",
    "SOLRACE_LOG_FORMAT": "json",
    "SOLRACE_RATE_PER_S": "10",
    "SOLRACE_RATE_BURST": "20",
    "SOLRACE_MAX_CONNECTIONS": "100",
    "SOLRACE_MAX_CONNECTIONS_PER_ADDRESS": "8",
    "SOLRACE_ROOMS_PER_MINUTE_PER_ADDRESS": "3",
    "SOLRACE_CONNECTIONS_PER_SECOND_PER_ADDRESS": "2",
    "SOLRACE_SEATS_PER_ADDRESS": "2",
    "SOLRACE_SPECTATORS_PER_ROOM": "9",
    "SOLRACE_MAX_UNREAD_MIB": "16",
    "SOLRACE_TRUSTED_PROXIES": "10.0.0.0/8",
    "SOLRACE_KEEP_RESULTS": "90",
    "SOLRACE_LOOP": "asyncio",
}


def test_every_variable_is_read_without_the_spaces_around_it(tmp_path: Path) -> None:
    """``SOLRACE_HOST=" 127.0.0.1"`` or ``SOLRACE_LOG_LEVEL="debug "`` (a unit file, a
    quoted shell line) was refused, while the client trims ``$SOLRACE_SERVER``: every
    variable is read trimmed (solrace.environ), each as its value unspaced is, and a
    blank one is unset (its default), as an empty one was."""
    values = {**_SPACED, "SOLRACE_DATA_DIR": str(tmp_path), "SOLRACE_REDIS_URL": REDIS_URL}
    # All but the key prefix, which names keys: refused, not trimmed (below).
    assert {s.variable for s in server_main.settings()} == {*values, "SOLRACE_KEY_PREFIX"}
    parse = server_main.build_parser().parse_args
    spaced = server_main.resolve(parse([]), {k: f" {v}\t " for k, v in values.items()})
    assert spaced == server_main.resolve(parse([]), values)
    assert (spaced.host, spaced.log_level, spaced.port) == ("127.0.0.1", "debug", 8766)
    blank = server_main.resolve(parse([]), {k: " " for k in values})
    assert blank == server_main.resolve(parse([]), {})


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        ([], {"SOLRACE_KEY_PREFIX": "solrace: "}, "$SOLRACE_KEY_PREFIX: "),
        ([], {"SOLRACE_KEY_PREFIX": " "}, "$SOLRACE_KEY_PREFIX: "),
        (["--key-prefix", " app:"], {}, "--key-prefix: "),
    ],
)
def test_a_key_prefix_with_a_space_around_it_is_refused_not_trimmed(
    args: list[str], env: dict[str, str], says: str
) -> None:
    """A key prefix names the node's keys, a space among them: ``solrace: `` was a
    prefix of its own, the flag's as the variable's. Trimmed as the other variables
    are, a node upgraded with ``SOLRACE_KEY_PREFIX="solrace: "`` served other keys
    than its release before, and than a node given it by ``--key-prefix``: every
    room, seat and result out of its sight, without a word. Refused, both ways, with
    the fix (status 2, before anything starts)."""
    parse = server_main.build_parser().parse_args
    with pytest.raises(server_main.UsageError) as refused:
        server_main.resolve(parse(args), env)
    assert str(refused.value).startswith(says), refused.value
    assert "must not begin or end with a space" in str(refused.value), refused.value


@pytest.mark.parametrize("prefix", ["x\x1by", "app:\n", "a\u202eb:", "\x85"])
def test_a_key_prefix_that_is_not_printable_is_refused_in_one_line(prefix: str) -> None:
    """``--key-prefix $'x\\x1by'`` was taken: an escape character in every key, said
    raw in every log line and ``redis-cli`` listing that names one (a newcomer walk).
    Refused as the other bad prefixes are (status 2), the character escaped."""
    parse = server_main.build_parser().parse_args
    with pytest.raises(server_main.UsageError) as refused:
        server_main.resolve(parse(["--redis-url", REDIS_URL, "--key-prefix", prefix]), {})
    said = str(refused.value)
    assert said.startswith("--key-prefix: must be printable"), said
    assert said.isprintable() and "\n" not in said, said


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--key-prefix", " " + "p" * 5000], "--key-prefix: must not begin or end with a space: "),
        (["--trusted-proxies", "10.0.0.0/8," + "p" * 5000], "--trusted-proxies: "),
    ],
    ids=["key-prefix", "trusted-proxies"],
)
def test_a_long_refused_setting_is_quoted_at_most_in_its_first_characters(
    args: list[str], says: str
) -> None:
    """Both were said whole: a 5,000-character value was one 5 KB error line."""
    parse = server_main.build_parser().parse_args
    with pytest.raises(server_main.UsageError) as refused:
        server_main.resolve(parse(["--redis-url", REDIS_URL, *args]), {})
    said = str(refused.value)
    assert said.startswith(says) and "… (5,00" in said, said[:300]
    assert len(said) < 300, said[:300]


async def test_a_server_started_with_spaced_variables_serves() -> None:
    """End to end, as the operator met it: the node starts and listens."""
    env = {"SOLRACE_HOST": " 127.0.0.1 ", "SOLRACE_LOG_LEVEL": "debug "}
    async with solrace_server(env=env) as server:
        assert server.url.startswith("ws://127.0.0.1:"), server.url


def test_a_data_dir_on_a_full_disk_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    """The first write of a start on a full disk (the owner's pid into the lock file;
    here the lock file is /dev/full, which refuses every write with ENOSPC) is the
    documented data-dir refusal, not a bare OSError and status 1."""
    (tmp_path / "solrace.lock").symlink_to("/dev/full")
    done = _run(["--data-dir", str(tmp_path)], {})
    assert (done.returncode, done.stderr) == (
        2,
        f"solrace-server: --data-dir: cannot write to data directory {tmp_path}: "
        "No space left on device\n",
    )


def test_help_names_every_flag_and_variable_and_the_exit_statuses() -> None:
    done = subprocess.run([str(SERVER_SCRIPT), "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for flag in (
        "--rate-per-s",
        "--rate-burst",
        "--redis-url",
        "--key-prefix",
        "--data-dir",
        "--loop",
        "--max-connections",
        "--max-connections-per-address",
        "--seats-per-address",
        "--spectators-per-room",
        "--max-unread-mib",
        "--trusted-proxies",
    ):
        assert flag in text
    assert "redis+cluster://host:port[,host:port…]" in text
    for variable in (
        "SOLRACE_RATE_PER_S",
        "SOLRACE_RATE_BURST",
        "SOLRACE_REDIS_URL",
        "SOLRACE_DATA_DIR",
        "SOLRACE_LOOP",
        "SOLRACE_MAX_CONNECTIONS",
        "SOLRACE_MAX_CONNECTIONS_PER_ADDRESS",
        "SOLRACE_SEATS_PER_ADDRESS",
        "SOLRACE_SPECTATORS_PER_ROOM",
        "SOLRACE_MAX_UNREAD_MIB",
        "SOLRACE_TRUSTED_PROXIES",
    ):
        assert variable in text
    assert "default $XDG_DATA_HOME/solrace, else ~/.local/share/solrace" in text
    assert "1 could not start, 2 a bad flag or variable, 3 the drain failed" in text


def test_the_spectators_cap_a_user_gets_is_the_documented_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``solrace-server`` with no flag lets 500 watch a room (docs/protocol.md §14);
    ``SOLRACE_SPECTATORS_PER_ROOM`` and the flag change it, 0 lifts the cap."""
    monkeypatch.delenv("SOLRACE_SPECTATORS_PER_ROOM", raising=False)
    parse = server_main.build_parser().parse_args
    assert server_main.resolve(parse([])).spectators_per_room == SPECTATORS_PER_ROOM == 500
    assert server_main.resolve(parse(["--spectators-per-room", "0"])).spectators_per_room == 0
    monkeypatch.setenv("SOLRACE_SPECTATORS_PER_ROOM", "40")
    assert server_main.resolve(server_main.build_parser().parse_args([])).spectators_per_room == 40


#: Each number flag of the node, its documented largest value (docs/server.md), and
#: how it says a value past it. A newcomer audit: ``--max-connections 10**30`` was
#: taken and logged ``connections=1000000000000000000000000000000 at most``, and a
#: ``--max-connections-per-address`` or ``--rooms-per-minute-per-address`` of 400
#: digits started a node whose every connection (HTTP 500), or every ``create``
#: (``internal``), failed with an OverflowError, as a traceback in its log.
_NUMBER_FLAGS = [
    ("--max-connections", "1048576", "must be 1 to 1048576, got {} (or auto)"),
    ("--max-connections-per-address", "1048576", "must be 0 to 1048576, got {}"),
    ("--spectators-per-room", "1048576", "must be 0 to 1048576, got {}"),
    ("--rooms-per-minute-per-address", "60000", "must be 0 to 60000, got {}"),
    ("--connections-per-second-per-address", "100000", "must be 0 to 100000, got {}"),
    ("--seats-per-address", "8", "must be 0 to 8, got {}"),
    ("--max-unread-mib", "4194304", "must be 0 to 4194304, got {}"),
    ("--rate-per-s", "10000", "must be more than 0 and at most 10000, got {}"),
    ("--rate-burst", "10000", "must be 1 to 10000, got {}"),
]


#: The flags whose values may have a fraction (solrace.argtypes.real).
_REAL_FLAGS = ("--rate-per-s", "--rate-burst", "--connections-per-second-per-address")


def _resolved(args: list[str]) -> argparse.Namespace:
    return server_main.resolve(server_main.build_parser().parse_args(args), environ={})


@pytest.mark.parametrize(("flag", "most", "says"), _NUMBER_FLAGS)
def test_a_number_flag_past_its_largest_value_is_refused_naming_the_range(
    flag: str, most: str, says: str
) -> None:
    """Its largest value is taken; one past it, 10**30, or 400 digits is refused in the
    words of every number flag (solrace.argtypes), the range said."""
    dest = flag.removeprefix("--").replace("-", "_")
    assert getattr(_resolved([flag, most]), dest) == float(most)
    for value, shown in [
        (str(int(most) + 1), str(int(most) + 1)),
        ("1" + "0" * 30, "1e+30" if flag in _REAL_FLAGS else "1" + "0" * 30),
        ("1" + "0" * 400, "'" + "1" + "0" * 39 + "'… (401 characters)"),
    ]:
        with pytest.raises(server_main.UsageError) as caught:
            _resolved([flag, value])
        assert str(caught.value) == f"{flag}: {says.format(shown)}", value[:50]


@pytest.mark.parametrize(("flag", "most", "says"), _NUMBER_FLAGS)
def test_a_number_flag_that_is_not_a_number_in_its_range_is_refused(
    flag: str, most: str, says: str
) -> None:
    """nan, inf, a word and a negative number: each refused in one line naming the flag."""
    for value, words in [("nan", "not a"), ("inf", "not a"), ("x", "not a"), ("-1", "must be")]:
        with pytest.raises(server_main.UsageError, match=f"^{flag}: {words}"):
            _resolved([flag, value])


def test_docs_server_md_gives_each_number_flag_its_largest_value() -> None:
    """docs/server.md's table says each number flag's largest value, as the node takes it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`"): line
        for line in text.splitlines()
        if line.startswith("| `--")
    }
    for flag, most, _ in _NUMBER_FLAGS:
        assert f"at most {int(most):,}" in rows[flag], flag


def test_the_trusted_proxies_a_user_gets_are_this_machines_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``solrace-server`` with no flag trusts loopback only (docs/server.md, "Behind a
    proxy"): a LAN client's ``X-Forwarded-For`` must not lift its caps."""
    monkeypatch.delenv("SOLRACE_TRUSTED_PROXIES", raising=False)
    parse = server_main.build_parser().parse_args
    trusted = [str(n) for n in server_main.resolve(parse([])).trusted_proxies]
    assert trusted == ["127.0.0.0/8", "::1/128"]
    monkeypatch.setenv("SOLRACE_TRUSTED_PROXIES", "loopback,private")
    assert len(server_main.resolve(parse([])).trusted_proxies) == 6


def test_the_unread_budget_a_user_gets_is_the_documented_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``solrace-server`` with no flag lets its connections together leave 64 MiB
    unread (docs/protocol.md §13); ``SOLRACE_MAX_UNREAD_MIB`` and the flag change it, 0
    lifts the cap, and a bad value is refused naming the flag."""
    monkeypatch.delenv("SOLRACE_MAX_UNREAD_MIB", raising=False)
    parse = server_main.build_parser().parse_args
    assert server_main.resolve(parse([])).max_unread_mib * 2**20 == MAX_UNREAD_BYTES_PER_NODE
    assert server_main.resolve(parse(["--max-unread-mib", "0"])).max_unread_mib == 0
    monkeypatch.setenv("SOLRACE_MAX_UNREAD_MIB", "512")
    assert server_main.resolve(parse([])).max_unread_mib == 512
    with pytest.raises(server_main.UsageError, match="--max-unread-mib: must be 0 to 4194304"):
        server_main.resolve(parse(["--max-unread-mib", "-1"]))


@pytest.mark.parametrize(
    ("broken", "says"),
    [("drain", "the drain failed"), ("workers", "stopping the solver workers failed")],
)
async def test_a_drain_that_fails_exits_3_with_its_traceback_not_cannot_start(
    broken: str, says: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A node that started and then fails while stopping did not fail to start: its
    status is 3 and its log names the error with a traceback (an OSError used to be
    reported as "cannot start" with status 1, and no traceback to tell what broke)."""

    async def broken_drain(self: RaceServer) -> None:
        raise ConnectionResetError("the peer reset the connection")

    def broken_workers() -> None:
        raise ConnectionResetError("the peer reset the connection")

    if broken == "drain":
        monkeypatch.setattr(RaceServer, "drain", broken_drain)
    else:
        monkeypatch.setattr(solver_workers, "shutdown", broken_workers)
    prefix = new_prefix()
    argv = ["--port", "0", "--redis-url", REDIS_URL, "--key-prefix", prefix]
    args = server_main.resolve(server_main.build_parser().parse_args(argv))
    store, _ = await server_main.open_store(args.redis_url, args.key_prefix, args.data_dir)
    loop = asyncio.get_running_loop()
    caplog.set_level(logging.INFO)
    serving = asyncio.create_task(server_main._serve(args, store))
    try:
        async with asyncio.timeout(20):
            while "listening" not in caplog.text:
                assert not serving.done(), caplog.text
                await asyncio.sleep(0.02)
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the node's handler
        os.kill(os.getpid(), signal.SIGTERM)
        status = await asyncio.wait_for(serving, 20)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        serving.cancel()  # and waited for: a node still running renews its lease
        await asyncio.gather(serving, return_exceptions=True)
        try:
            await store.close()
        finally:
            await delete_prefix(prefix)
    assert status == server_main.EXIT_DRAIN_FAILED == 3
    failed = [r for r in caplog.records if r.getMessage().startswith(says)]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert "ConnectionResetError: the peer reset the connection" in caplog.text
    assert "cannot start" not in caplog.text


def _children(pid: int) -> list[int]:
    """The process's children (Linux: every thread's list in /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads a process's children from /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_node_signalled_with_its_process_group_stops_and_its_workers_go(
    sig: signal.Signals,
) -> None:
    """Ctrl-C in a terminal, ``timeout`` and ``kill -- -PGID`` signal the node's whole
    process group, its solver workers included. A worker killed while it waited for
    its next job took the ``multiprocessing.Pool``'s queue lock with it, and the node
    hung in ``Pool.terminate`` (9 runs of 12, SIGTERM and SIGINT alike)."""
    async with solrace_server("redis", own_group=True) as server:
        client = await RaceClient.connect(server.url)
        await client.create("yukon", "ada")
        await client.wait_for(lambda e: e.t == "deal_chosen", timeout=30)
        await client.close()  # the deal is certified: the workers wait for a job
        workers = _children(server.proc.pid)
        assert len(workers) >= solver_workers.SOLVER_WORKERS
        os.killpg(server.proc.pid, sig)
        assert await asyncio.wait_for(server.proc.wait(), 15) == 0, server.log
        for _ in range(100):  # the resource tracker ends when it reads the node's end
            if not (left := [pid for pid in workers if Path(f"/proc/{pid}").exists()]):
                break
            await asyncio.sleep(0.05)
        assert not left, f"left running: {left}"
        assert "stopped" in server.log and "Traceback" not in server.log


async def _flood(url: str, count: int) -> int | None:
    """Send ``count`` pings at once, unpaced; the close code, None if still open."""
    client = await RaceClient.connect(url, pace=None)
    results = await asyncio.gather(*(client.ping() for _ in range(count)), return_exceptions=True)
    if any(isinstance(r, ConnectionError) for r in results):
        await asyncio.wait_for(client.closed, 5)
    code = client.close_code
    await client.close()
    return code


async def test_the_rate_limit_is_a_flag_and_a_variable() -> None:
    async with solrace_server(args=["--rate-per-s", "2", "--rate-burst", "5"]) as server:
        assert "rate=2/s burst 5" in server.log
        assert await _flood(server.url, 10) == 1008
    env = {"SOLRACE_RATE_PER_S": "1000", "SOLRACE_RATE_BURST": "1000"}
    async with solrace_server(env=env) as server:
        assert await _flood(server.url, 100) is None  # over the default, under this one
    async with solrace_server() as server:
        assert "rate=20/s burst 40" in server.log
        assert await _flood(server.url, 100) == 1008  # the default limit
    # Said as the node limits, as its rate-limit header does: six digits (``:g``)
    # logged a node limiting at 19.9999999 a second as one at 20.
    exact = ["--rate-per-s", "19.9999999", "--rate-burst", "40.5"]
    async with solrace_server(args=exact) as server:
        assert "rate=19.9999999/s burst 40.5" in server.log


@pytest.mark.parametrize("backend", ["embedded", "redis"])
async def test_a_taken_port_cannot_start_in_one_error_line_that_names_it(
    backend: str, tmp_path: Path
) -> None:
    """docs/server.md: exit 1 when the port is taken. The error names the port and the
    way out, with no errno, and no "store unavailable" warning from node loops left
    running while the store closed (there was one)."""
    prefix = new_prefix()
    async with solrace_server(backend) as first:
        port = first.url.rsplit(":", 1)[1]
        store = (
            ["--data-dir", str(tmp_path)] if backend == "embedded" else ["--redis-url", REDIS_URL]
        )
        try:
            done = await asyncio.to_thread(
                _run, ["--port", port, *store, "--key-prefix", prefix], {}
            )
        finally:  # its lease: a node that cannot listen has written it (for LEASE_MS)
            await delete_prefix(prefix)
    assert done.returncode == 1
    problems = [line for line in done.stderr.splitlines() if " INFO " not in line]
    problems = [line for line in problems if "durability: none" not in line]  # the dev Redis
    assert len(problems) == 1, done.stderr
    assert problems[0].endswith(
        f"ERROR solrace.server: cannot start: 127.0.0.1:{port}: Address already in use "
        "(another server there? --port chooses another)"
    ), done.stderr
    assert "Traceback" not in done.stderr


async def test_an_ipv6_host_is_bracketed_in_the_url_it_logs_and_in_its_errors() -> None:
    """``--host ::1`` logged ``url=ws://::1:P``, a URL no client can use (the host
    ``:``); the node's URL and its "cannot start" line bracket the address, as a URL
    and a socket address are written."""
    async with solrace_server("redis", ["--host", "::1"]) as server:
        port = server.url.rpartition(":")[2]
        assert server.url == f"ws://[::1]:{port}" and f"url=ws://[::1]:{port} " in server.log
        client = await RaceClient.connect(server.url)
        assert await client.list_rooms() == []
        await client.close()
        prefix = new_prefix()  # not the default one: the node writes its lease
        try:
            argv = ["--host", "::1", "--port", port, "--redis-url", REDIS_URL]
            done = await asyncio.to_thread(_run, [*argv, "--key-prefix", prefix], {})
        finally:
            await delete_prefix(prefix)
    assert done.returncode == 1
    assert f"cannot start: [::1]:{port}: Address already in use" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("host", "loopback", "family"), [("0.0.0.0", "127.0.0.1", "IPv4"), ("::", "[::1]", "IPv6")]
)
async def test_a_node_on_every_address_logs_a_url_a_client_can_use(
    host: str, loopback: str, family: str
) -> None:
    """``--host 0.0.0.0`` logged ``url=ws://0.0.0.0:P`` (``::``: ``ws://[::]:P``), no
    address a client can connect to (an operator audit). The URL is this machine's
    loopback address of that family, and the line says that the node listens on every
    address, and what another machine uses."""
    async with solrace_server("redis", ["--host", host]) as server:
        port = server.url.rpartition(":")[2]
        assert server.url == f"ws://{loopback}:{port}", server.log
        assert f"on=every {family} address ({host}): from another machine" in server.log
        client = await RaceClient.connect(server.url)
        assert await client.list_rooms() == []
        await client.close()


@pytest.mark.parametrize(("args", "loop"), [([], "uvloop"), (["--loop", "asyncio"], "asyncio")])
async def test_the_node_runs_a_race_on_uvloop_by_default_and_on_asyncio_on_request(
    args: list[str], loop: str
) -> None:
    """The listening line names the loop; on either, a room is created, a race starts
    and moves are stored through the group commit (on uvloop, the Redis link once
    failed every move: tests/store/test_link.py)."""
    async with solrace_server("redis", args=args) as server:
        assert f"loop={loop}" in server.log
        host = await RaceClient.connect(server.url)
        guest = await RaceClient.connect(server.url)
        try:
            await host.create("yukon", "host", deals="random")
            await guest.join(host.code or "", "guest")
            await guest.ready()
            await host.start()
            board = await host.wait_started()
            assert board is not None
            first = board_from_view(board).legal_moves()[0]
            reply = await host.move(str(first))
            assert reply["seq"] == 0 and reply["moves"] >= 1
        finally:
            await host.close()
            await guest.close()


def test_auto_is_uvloop_where_installed_and_asyncio_where_not() -> None:
    assert resolve_loop(AUTO, have_uvloop=True) == UVLOOP
    assert resolve_loop(AUTO, have_uvloop=False) == ASYNCIO
    assert resolve_loop(AUTO) == UVLOOP  # this project depends on it on Linux
    assert resolve_loop(ASYNCIO, have_uvloop=True) == ASYNCIO


def test_uvloop_asked_for_where_it_is_missing_is_refused_saying_what_to_do() -> None:
    with pytest.raises(LoopUnavailable, match=r"uvloop is not installed here \(pip install"):
        resolve_loop(UVLOOP, have_uvloop=False)


def test_a_name_not_a_loop_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="must be one of auto, uvloop, asyncio, got 'fast'"):
        resolve_loop("fast")
    assert LOOPS == (AUTO, UVLOOP, ASYNCIO)


@pytest.mark.parametrize(
    ("name", "loop_type"),
    [(UVLOOP, uvloop.Loop), (ASYNCIO, asyncio.BaseEventLoop), (AUTO, uvloop.Loop)],
)
def test_run_runs_the_coroutine_on_the_loop_named(name: str, loop_type: type) -> None:
    async def which() -> asyncio.AbstractEventLoop:
        await asyncio.sleep(0)
        return asyncio.get_running_loop()

    loop = run_on_loop(name, which())
    assert isinstance(loop, loop_type)
    if name == ASYNCIO:
        assert not isinstance(loop, uvloop.Loop)
    assert loop.is_closed()  # run() closes the loop it made, as asyncio.run does


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (
            ["--host", "example.invalid"],
            {},
            "solrace-server: --host: 'example.invalid' names no address to listen on: ",
        ),
        (
            [],
            {"SOLRACE_HOST": "nosuchhost.invalid"},
            "solrace-server: $SOLRACE_HOST: 'nosuchhost.invalid' names no address to listen on: ",
        ),
        (
            ["--host", "192.0.2.1"],  # TEST-NET-1: never an address of this machine
            {},
            "solrace-server: --host: 192.0.2.1 is not an address of this machine",
        ),
    ],
)
def test_a_host_that_names_no_address_here_is_a_bad_flag_said_before_anything_starts(
    args: list[str], env: dict[str, str], says: str, tmp_path: Path
) -> None:
    """A name the resolver does not know failed as "Unknown error -2" (a resolver's code
    read as an errno), then as "cannot start" (status 1) once the embedded engine had
    started. docs/server.md: a bad flag is status 2 — said first, nothing started."""
    data = tmp_path / "data"
    done = _run([*args, "--data-dir", str(data)], env)
    assert done.returncode == 2
    assert done.stderr.startswith(says) and done.stderr.count("\n") == 1, done.stderr
    assert not data.exists()  # the engine did not start: its directory was never made


def _redis_node() -> str:
    """host:port of the test Redis (a standalone one)."""
    parts = urlsplit(REDIS_URL)
    return f"{parts.hostname}:{parts.port or 6379}"


def _cluster_node() -> str:
    """host:port of the first node of the test Redis Cluster."""
    return CLUSTER_URL.split("://", 1)[1].split(",", 1)[0].split("/", 1)[0]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            f"redis+cluster://{_redis_node()}",
            f"--redis-url: {_redis_node()} is not a Redis Cluster (cluster support disabled): "
            f"use redis://{_redis_node()}/0",
        ),
        (
            f"rediss://{_redis_node()}/0",
            f"--redis-url: {_redis_node()} answers without TLS: use redis://{_redis_node()}/0",
        ),
        (
            f"rediss+cluster://{_redis_node()}",
            f"--redis-url: {_redis_node()} answers without TLS: use redis+cluster://{_redis_node()}",
        ),
        (  # it answers PING: the node served, and every request failed "store is down"
            f"redis://{_cluster_node()}/0",
            f"--redis-url: {_cluster_node()} is a Redis Cluster node: "
            f"use redis+cluster://{_cluster_node()}",
        ),
    ],
)
def test_a_redis_that_answers_but_not_as_the_url_says_is_a_bad_flag(url: str, says: str) -> None:
    """A cluster URL for a standalone Redis logged "redis does not answer" and served,
    refusing every request ``unavailable``; TLS to a plain-text Redis stalled and then
    did the same. Redis answers: the URL is wrong, and no wait mends it (status 2)."""
    done = _run(["--redis-url", url, "--key-prefix", new_prefix()], {})
    assert done.returncode == 2, done.stderr
    problems = [line for line in done.stderr.splitlines() if " INFO " not in line]
    assert len(problems) == 1, done.stderr
    assert problems[0] == f"solrace-server: {says}", done.stderr
    assert "does not answer" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        (
            ("~other:*", "+@all"),
            "user 'keyless' may not write keys under the prefix 'solrace:' (this user has "
            "no permissions to access one of the keys used as arguments): its ACL needs "
            "~solrace:*",
        ),
        (
            ("~*", "+@all", "-@scripting"),
            "user 'keyless' may not load Lua scripts (SCRIPT LOAD) (this user has no "
            "permissions to run the 'script|load' command): its ACL needs +@scripting",
        ),
    ],
)
def test_a_redis_user_an_acl_keeps_from_what_the_node_does_is_status_2(
    private_redis: Callable[..., str], rules: tuple[str, ...], says: str
) -> None:
    """PING passes whatever the ACL: the node started, said "listening", then logged a
    NOPERM traceback every loop turn (1,200 lines in 10 s) with /healthz 200, or (no
    scripting) answered every request "internal server error". docs/server.md: a URL
    Redis refuses is one line and status 2."""
    url = private_redis()
    subprocess.run(
        ["redis-cli", "-u", url, "ACL", "SETUSER", "keyless", "on", ">pw", "&*", *rules],
        check=True,
        capture_output=True,
    )
    done = _run(["--redis-url", url.replace("://", "://keyless:pw@")], {})
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    port = urlsplit(url).port
    assert done.stderr == (
        f"solrace-server: --redis-url: Redis refused redis://***@127.0.0.1:{port}/0: {says}\n"
    )


def test_a_read_only_replica_is_status_2_naming_its_master(
    private_redis: Callable[..., str],
) -> None:
    """A replica answers PING: the node started without a word, refused every request
    ``internal`` with a traceback each second, and its drain failed (status 3)."""
    url, master = private_redis(), private_redis()
    master_port = urlsplit(master).port
    subprocess.run(
        ["redis-cli", "-u", url, "REPLICAOF", "127.0.0.1", str(master_port)],
        check=True,
        capture_output=True,
    )
    done = _run(["--redis-url", url], {})
    assert done.returncode == 2, done.stderr
    problems = [line for line in done.stderr.splitlines() if " INFO " not in line]
    assert problems == [
        f"solrace-server: --redis-url: {url} is a read-only replica of 127.0.0.1:"
        f"{master_port}: point --redis-url at its master"
    ], done.stderr


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl"])
def test_a_redis_that_evicts_keys_is_status_2(
    private_redis: Callable[..., str], policy: str
) -> None:
    """Such a Redis deletes keys by itself once full (volatile-* too: every room key
    carries the room's expiry): a race's stream, places or tokens could vanish."""
    url = private_redis("--maxmemory-policy", policy)
    done = _run(["--redis-url", url], {})
    assert done.returncode == 2, done.stderr
    problems = [line for line in done.stderr.splitlines() if " INFO " not in line]
    assert problems == [
        f"solrace-server: --redis-url: {url} evicts keys (maxmemory-policy {policy}): a "
        "race's state could vanish; set maxmemory-policy noeviction"
    ], done.stderr


async def test_a_redis_whose_eviction_cannot_be_read_is_served_with_a_warning(
    private_redis: Callable[..., str],
) -> None:
    url = private_redis("--rename-command", "INFO", "")
    async with solrace_server(args=["--redis-url", url]) as server:
        said = [line for line in server.lines if "maxmemory-policy" in line]
        assert len(said) == 1 and " WARNING " in said[0], server.log
        assert "cannot check whether Redis evicts keys (cannot check: Redis refused INFO" in said[0]


async def test_a_redis_that_answers_after_the_start_is_reported_once_it_does(
    tmp_path: Path,
) -> None:
    """A node started while Redis did not answer said "durability: unknown" and never
    more: a Redis that came back without an AOF went unwarned in the log for the node's
    whole life (an operator's audit; only /healthz said ``none``). Once Redis answers,
    the node says what it promises, as at a start where it answered."""
    port = spare_port()
    async with solrace_server(
        args=["--redis-url", f"redis://127.0.0.1:{port}/0", "--key-prefix", new_prefix("late")]
    ) as server:
        assert "redis does not answer; serving anyway" in server.log
        with redis_process(tmp_path / "redis", ["--appendonly", "no"], port=port):
            async with asyncio.timeout(15):  # a renewal a second, and the store's timeouts
                while "durability: none" not in server.log:
                    await asyncio.sleep(0.1)
            said = [line for line in server.lines if "durability: none" in line]
            assert len(said) == 1 and " WARNING " in said[0], server.log
            assert "a Redis restart loses acknowledged moves" in said[0]


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--data-dir", "D"], {}, "--data-dir is ignored: the store is the Redis at --redis-url"),
        (
            [],
            {"SOLRACE_DATA_DIR": "D"},
            "$SOLRACE_DATA_DIR is ignored: the store is the Redis at --redis-url",
        ),
    ],
)
async def test_a_data_dir_beside_a_redis_url_is_said_ignored_as_it_was_given(
    args: list[str], env: dict[str, str], says: str, tmp_path: Path
) -> None:
    """``SOLRACE_DATA_DIR`` in an environment file beside a Redis URL was said to be
    ``--data-dir is ignored``: the operator looked for a flag nobody typed (an
    operator's audit). Named as it was given."""
    args = [str(tmp_path) if a == "D" else a for a in args]
    env = {k: str(tmp_path) for k in env}
    async with solrace_server("redis", args=args, env=env) as server:
        said = [line for line in server.lines if "is ignored" in line]
        assert len(said) == 1 and says in said[0], server.log


def test_an_unreachable_redis_is_served_and_retried_as_documented() -> None:
    """docs/server.md: an unreachable Redis is not fatal (the probe above finds nothing
    to say about a port nobody listens on), and SIGTERM stops the node with 0. The
    first line names the store, as documented (it was the error, before it)."""
    proc = subprocess.Popen(
        [str(SERVER_SCRIPT), "--port", "0", "--redis-url", "redis+cluster://127.0.0.1:1"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        said = [proc.stderr.readline() for _ in range(2)]
        assert " INFO solrace.server: store: redis cluster " in said[0], said
        assert "ERROR solrace.server: redis does not answer; serving anyway" in said[1], said
        while "listening" not in (line := proc.stderr.readline()):
            assert line, "the node stopped"
        proc.terminate()
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.stderr.close()


def test_importing_the_entry_point_loads_no_module_of_the_node() -> None:
    """The console script imports this module before main() runs: what it loads is
    outside main's Ctrl-C handling (a traceback), so it loads only the standard library
    — the node's modules (store, redis-py, rooms, websockets) are main's to load."""
    code = (
        "import sys, solrace.net.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('redis', 'websockets', 'uvloop', 'msgpack', 'asyncio') "
        "or m.startswith(('solrace.store', 'solrace.rooms', 'solrace.protocol'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


_INTERRUPTED_WHILE_LOADING = interrupted_while_loading("solrace.net.main")


@pytest.mark.parametrize("module", ["solrace.protocol", "solrace.store", "redis"])
def test_ctrl_c_while_the_modules_load_is_one_line_and_130(module: str, tmp_path: Path) -> None:
    """Ctrl-C in the first ~0.3 s of solrace-server, while its modules loaded, printed a
    KeyboardInterrupt traceback."""
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_WHILE_LOADING, module, "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stderr) == (130, "solrace-server: interrupted\n")


@pytest.mark.parametrize("module", ["socket", "logging"])
def test_ctrl_c_while_the_console_script_loads_is_one_line_and_130(
    module: str, tmp_path: Path
) -> None:
    """A newcomer audit: Ctrl-C in solrace-server's first ~0.1-0.2 s printed a
    KeyboardInterrupt traceback and died by the signal. The console script imported
    solrace.net.main, and with it the standard library it needs (socket, logging,
    urllib…), before main's handler was in place; its entry point now loads the
    command-line helpers only, as solrace-rules' and solrace's do."""
    done = console_script_interrupted("solrace-server", module, "--data-dir", str(tmp_path))
    assert (done.returncode, done.stderr) == (130, "solrace-server: interrupted\n")


@pytest.mark.parametrize("module", ["argparse", "gettext", "solrace.quoting"])
def test_ctrl_c_while_the_entry_module_loads_is_one_line_and_130(module: str) -> None:
    """Ctrl-C in solrace-server's first ~20 ms still printed a traceback: its entry
    module imported solrace.argtypes (argparse, math, solrace.quoting…) for its handler,
    before the handler was in place. It now imports only solrace.interrupt (sys), and
    the rest inside the handler. (``--version``: not interrupted, it ends at once.)"""
    done = console_script_interrupted("solrace-server", module, "--version")
    assert (done.returncode, done.stderr) == (130, "solrace-server: interrupted\n")


def test_the_servers_entry_modules_load_only_the_handler() -> None:
    """What solrace-server's and solrace-rules' console scripts import before their
    Ctrl-C handler is in place: the handler's module, nothing else (the standard
    library Python loaded at start-up aside)."""
    code = (
        "import sys; before = set(sys.modules); "
        "import solrace.server_entry, solrace.rules_entry; "
        "print(sorted(set(sys.modules) - before))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    loaded = set(done.stdout.strip().strip("[]").replace("'", "").split(", "))
    at_start_up = {"__future__", "collections.abc"}  # loaded before, where not (-c)
    assert loaded - at_start_up == {
        "solrace",
        "solrace.interrupt",
        "solrace.rules_entry",
        "solrace.server_entry",
    }, done.stderr


def test_a_ctrl_c_as_the_loop_is_made_leaves_no_coroutine_never_awaited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A newcomer audit: Ctrl-C about 0.14 s into solrace-server said its line, then
    Python's "RuntimeWarning: coroutine 'run' was never awaited": the node's coroutine
    was made before the loop, and the interrupt came in between."""

    def interrupted(_name: str) -> NoReturn:
        raise KeyboardInterrupt

    async def node() -> int:
        return 0

    monkeypatch.setattr(server_main, "loop_factory", interrupted)
    coroutine = node()
    with pytest.raises(KeyboardInterrupt):
        run_on_loop(ASYNCIO, coroutine)
    assert coroutine.cr_frame is None  # closed: nothing left to warn about


@pytest.mark.parametrize("module", ["solrace.rooms", "uvloop"])
def test_ctrl_c_before_listening_is_one_line_and_130(tmp_path: Path, module: str) -> None:
    """A Ctrl-C after the embedded engine started but before the node listened ended the
    process with 0 and nothing said, as if it had served and drained. (uvloop: loaded
    as the loop is made; the node's coroutine, made before, was said "never awaited" in
    a RuntimeWarning after the line — a newcomer audit.)"""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _INTERRUPTED_WHILE_LOADING,
            module,  # solrace.rooms: loaded by _serve, the store already open
            "--port",
            "0",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 130, done.stderr
    problems = [line for line in done.stderr.splitlines() if " INFO " not in line]
    said = (
        "ERROR solrace.server: interrupted before listening"
        if module == "solrace.rooms"
        else "solrace-server: interrupted"  # uvloop loads before the logs are set up
    )
    assert len(problems) == 1 and problems[0].endswith(said), done.stderr
    # solrace.rooms: the engine had started; uvloop: nothing had (the loop comes first)
    assert ("store: embedded" in done.stderr) == (module == "solrace.rooms")


def test_docs_server_md_command_line_table_is_every_setting_with_its_default() -> None:
    """docs/server.md's "Command line" table is what an operator configures a node by:
    each row a flag of ``solrace-server`` with its variable and default, and no row for
    a flag the node does not take (the operator audit pins it to :func:`settings`)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
    section = text.split("## Command line", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in section.splitlines()[2:]:
        flag, variable, default = (cell.strip() for cell in line.split("|")[1:4])
        rows[flag.strip("`")] = (variable.strip("`"), default)
    assert sorted(rows) == sorted(s.flag for s in server_main.settings())
    for setting in server_main.settings():
        variable, default = rows[setting.flag]
        assert variable == setting.variable, setting.flag
        if setting.default is not None:
            assert default == f"`{setting.default}`", setting.flag
    # Every variable the server's code reads is there, those without a flag below it.
    server = Path(server_main.__file__).resolve().parents[1]
    read = {
        name
        for path in server.rglob("*.py")
        for name in re.findall(r"SOLRACE_[A-Z_]+", path.read_text())
        if not name.endswith("_")
    }
    assert sorted(name for name in read if f"`{name}" not in text) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--redis-url", "r" * 100_000],
        ["--host", "h" * 100_000],
        ["--port", "p" * 100_000],
        ["--loop", "l" * 100_000],
        ["--key-prefix", "{" * 100_000],
        ["--log-level", "v" * 100_000],
        ["--data-dir", "/tmp/x", "--bogus" + "b" * 100_000],
    ],
    ids=lambda a: a[0],
)
def test_a_huge_value_is_quoted_at_most_in_its_first_characters(args: list[str]) -> None:
    """A newcomer audit: a value of 100,000 characters came back whole in the one error
    line (100 KB); now its first 40 characters and its length (solrace.quoting)."""
    done = _run(args, {})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, done.stderr[:400]
    assert "… (100,00" in lines[0]


#: A part of a Redis URL of 100,000 characters.
_HUGE = "h" * 100_000


@pytest.mark.parametrize(
    "url",
    [
        f"redis://127.0.0.1:6379/0?{_HUGE}=1",  # an option the client does not take
        f"redis://127.0.0.1:6379/0?db={_HUGE}&db=2",  # an option given twice
        f"redis://127.0.0.1:6379/14?db={_HUGE}",  # the database given twice
        f"redis://127.0.0.1:6379/{_HUGE}",  # a database index that is not a number
        f"rediss://127.0.0.1:6379/0?ssl_cert_reqs={_HUGE}",  # a value redis-py refuses
        f"redis+cluster://127.0.0.1:7101?{_HUGE}=1",
        f"redis+cluster://127.0.0.1:7101/5?x={_HUGE}",  # a cluster has only database 0
        f"redis+cluster://127.0.0.1:{_HUGE}",  # a node that is not host:port
        f"redis+cluster://?x={_HUGE}",  # no node
    ],
    ids=lambda url: url[: url.index("h")].rstrip("?=/:"),
)
def test_a_huge_part_of_a_redis_url_is_quoted_at_most_in_its_first_characters(url: str) -> None:
    """A bad query string (or database, or cluster node) was quoted whole in the one
    error line, 100 KB; now at most its first 40 characters and its length, as every
    other value (solrace.quoting)."""
    with pytest.raises(ValueError, match="… \\(100,0") as raised:
        check_redis_url(url)
    assert len(str(raised.value)) < 400, str(raised.value)[:400]


def test_a_cluster_port_of_more_digits_than_int_reads_is_not_host_port() -> None:
    """It was Python's words: "Exceeds the limit (4300 digits) for integer string
    conversion…" (solrace.digits.digits_value)."""
    url = "redis+cluster://127.0.0.1:" + "9" * 5000
    with pytest.raises(ValueError) as raised:
        check_redis_url(url)
    assert str(raised.value).startswith("cluster node '127.0.0.1:999"), str(raised.value)[:200]


@pytest.mark.parametrize(
    ("port", "shown"),
    [
        ("abc", "'abc'"),  # "Port could not be cast to integer value as 'abc'"
        ("99999", "'99999'"),  # "Port out of range 0-65535"
        ("0", "'0'"),  # taken: the node retried a port nothing listens on, for ever
        ("²", "'²'"),
        ("9" * 5000, f"'{'9' * 40}'… (5,000 characters)"),  # int()'s limit, in its words
    ],
)
def test_a_redis_port_that_is_no_port_is_said_so(port: str, shown: str) -> None:
    for url in (f"redis://127.0.0.1:{port}/0", f"rediss://[::1]:{port}"):
        with pytest.raises(ValueError) as raised:
            check_redis_url(url)
        assert str(raised.value) == f"port {shown} is not a port: 1 to 65535 (redis://host:6379/0)"


def test_a_database_index_of_more_digits_than_int_reads_is_refused() -> None:
    """redis-py drops a database index its ``int()`` refuses — past 4,300 digits too
    — and the node ran on database 0 in silence, as it did with ``'²'``."""
    with pytest.raises(ValueError) as raised:
        check_redis_url("redis://127.0.0.1:6379/" + "9" * 5000)
    assert str(raised.value) == (
        f"database index '{'9' * 40}'… (5,000 characters) is too long a number "
        "(redis://host:port/0)"
    )


@pytest.mark.parametrize(
    "url",
    [
        "redis://UUUU:AAAA/BBBB@127.0.0.1:6379/0",  # a raw / (base64 passwords have them)
        "redis://UUUU:AAAA@CCCC/BBBB@127.0.0.1:6379/0",  # a raw @ before it
        "redis+cluster://UUUU:AAAA@CCCC?BBBB@127.0.0.1:7101",
        "redis://UUUU:1234/BBBB@127.0.0.1:6379/0",  # ... after digits: a port, to urlsplit
        "redis://UUUU:AAAA?BBBB@127.0.0.1:6379/0",
        "redis://:AAAA?x=BBBB@127.0.0.1:6379/0",
        "redis://UUUU:AAAA#BBBB@127.0.0.1:6379/0",
        "rediss://UUUU:AAAA/BBBB@127.0.0.1:6379/0",
        "unix://:AAAA/BBBB@/run/redis.sock",
        "redis+cluster://UUUU:AAAA/BBBB@127.0.0.1:7101",
        "redis+cluster://UUUU:AAAA?BBBB@127.0.0.1:7101",
        "redis+cluster://UUUU:AAAA#BBBB@127.0.0.1:7101,127.0.0.1:7102",
        "redis:/UUUU:AAAA@127.0.0.1:6379/0",  # a slash short
        "http://UUUU:AAAA@127.0.0.1:6379/0",  # another scheme
    ],
)
def test_a_refused_url_says_no_part_of_its_password(url: str) -> None:
    """A password with a raw ``/``, ``?`` or ``#`` ends the URL's host part there: the
    error line then quoted the rest as a database index, a port or a cluster node
    (``Port could not be cast to integer value as 'AAAA'``), half the password; a
    mistyped scheme quoted the URL whole. Now what is before its ``@`` is never said."""
    with pytest.raises(ValueError) as refused:
        check_redis_url(url)
    said = str(refused.value)
    assert not {"AAAA", "BBBB", "CCCC", "UUUU"} & set(re.findall(r"[A-Z]{4}", said)), said
    assert len(said.splitlines()) == 1


@pytest.mark.parametrize(
    "url",
    [
        "redis://UUUU:AA\udcffAA@127.0.0.1:6379/0",  # the byte in the password
        "redis://UUUU:AAAA@h\udcff:6379/0",  # in the host: said, as typed
        "rediss+cluster://UUUU:AAAA@127.0.0.1:7101,h\udcff:7102",
    ],
)
def test_a_url_that_is_not_utf8_says_no_part_of_its_password(url: str) -> None:
    """A review: a byte that is not UTF-8 (``$'\\xff'``) anywhere in ``--redis-url``
    or ``$SOLRACE_REDIS_URL`` — the node's, and since 3e332ca the benchmark's — was
    said with the whole URL, password and all: ``not UTF-8 text:
    'redis://UUUU:AA\\xffAA@…'``. The bytes are said as typed, the credentials not."""
    setting = next(s for s in server_main.settings() if s.flag == "--redis-url")
    refusals = []
    with pytest.raises(ValueError) as refused:
        check_redis_url(url)  # the benchmark's --redis-url
    refusals.append(str(refused.value))
    for given, environ in ((url, {}), (None, {"SOLRACE_REDIS_URL": url})):
        with pytest.raises(server_main.UsageError) as refused_too:
            setting.value(given, environ)
        refusals.append(str(refused_too.value))
    for said in refusals:
        assert "not UTF-8 text" in said, said
        assert not {"AAAA", "UUUU"} & set(re.findall(r"[A-Z]{4}", said)), said
        assert "***@" in said, said
    if url.startswith("redis://UUUU:AAAA@h"):  # short enough to be said whole
        assert all("'redis://***@h\\xff:6379/0'" in said for said in refusals), refusals


def test_a_password_of_unicode_digits_before_a_raw_question_mark_is_not_said() -> None:
    """``'²'.isdigit()``: a password ``²²²²?x=…`` passed for a port before its raw
    ``?``, and the line said ``Port could not be cast to integer value as '²²²²'``, the
    password's start; a port is the digits 0-9 (solrace.digits), as everywhere."""
    with pytest.raises(ValueError) as refused:
        check_redis_url("redis://:²²²²?x=BBBB@127.0.0.1:6379/0")
    said = str(refused.value)
    assert "²" not in said and "BBBB" not in said, said
    assert "password holds a raw" in said


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0?client_name=me@home",
        "unix:///run/redis@main.sock",
        "redis://user:AAAA%2FBBBB@127.0.0.1:6379/0",
    ],
)
def test_an_at_sign_after_the_host_part_is_not_taken_for_a_password(url: str) -> None:
    assert check_redis_url(url) == url


def test_a_cluster_url_value_redis_py_refuses_is_refused_at_start() -> None:
    """``rediss+cluster://…?ssl_cert_reqs=bogus`` was taken: the cluster client builds
    its connections as it first connects, so the node served on, every request failing
    (``Invalid SSL Certificate Requirements Flag: bogus`` in its log), where the
    one-node URL's was one line, status 2."""
    with pytest.raises(ValueError, match=r"^Invalid SSL Certificate Requirements Flag: bogus$"):
        check_redis_url("rediss+cluster://127.0.0.1:7101?ssl_cert_reqs=bogus")
    with pytest.raises(ValueError, match="… \\(100,0"):
        check_redis_url(f"rediss+cluster://127.0.0.1:7101?ssl_cert_reqs={_HUGE}")


def test_a_cluster_database_in_the_query_is_one_line_and_status_2() -> None:
    """``redis+cluster://…?db=1``: redis-py's cluster client refused it with a
    RedisClusterException, which solrace-server printed as a traceback."""
    done = _run(["--redis-url", "redis+cluster://u:s3cret@127.0.0.1:7101?db=1"], {})
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-400:]
    assert done.stderr == (
        "solrace-server: --redis-url: a Redis Cluster has only database 0, not '1' "
        "('redis+cluster://***@127.0.0.1:7101?db=1')\n"
    )


def test_a_value_redis_py_refuses_with_its_own_error_is_one_line_and_status_2() -> None:
    """``rediss://…?ssl_cert_reqs=bogus``: redis-py refuses the value with a RedisError,
    not the ValueError of its other options, and solrace-server printed a traceback."""
    done = _run(["--redis-url", "rediss://127.0.0.1:6379/0?ssl_cert_reqs=bogus"], {})
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-400:]
    assert done.stderr == (
        "solrace-server: --redis-url: Invalid SSL Certificate Requirements Flag: bogus\n"
    )
