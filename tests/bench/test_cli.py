"""``python -m solrace.bench``'s command line: a bad argument is one line and status 2
before anything runs (it was a traceback, or ~50 lines from a solver worker, or silently
accepted); Redis that does not answer is one line and 1; Ctrl-C is one line and 130.
No benchmark is run to the end here (tests/bench/test_server_bench.py runs a tiny one)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import solrace.bench.cli
import solrace.bench.core
from solrace.argtypes import EXIT_READER_GONE
from solrace.bench import limits
from solrace.bench.__main__ import main
from solrace.bench.cli import _check, build_parser
from solrace.bench.failed import RunFailed
from solrace.solver_budget import MAX_BUDGET

from tests.support.interrupt import interrupted_while_loading, interrupted_while_running
from tests.support.redis import REDIS_URL
from tests.support.terminal import signals_as_a_shell_gives

PROG = "python -m solrace.bench"


def _call(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's error
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def _node() -> str:
    parts = urlsplit(REDIS_URL)
    return f"{parts.hostname}:{parts.port or 6379}"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["rules", "--seconds", "nan"], "argument --seconds: not a finite number: 'nan'"),
        (["rules", "--seconds", "inf"], "argument --seconds: not a finite number: 'inf'"),
        (["rules", "--seconds", "-1"], "--seconds: must be more than 0 and at most 600, got -1"),
        (["rules", "--seconds", "0"], "--seconds: must be more than 0 and at most 600, got 0"),
        (["rules", "--seconds", "soon"], "argument --seconds: not a number: 'soon'"),
        (["solver", "--budget", "0"], "argument --budget: must be 1 to 10000000, got 0"),
        (["solver", "--deals", "-1"], "argument --deals: must be 0 to 100000, got -1"),
        (["solver", "--workers", "0"], "argument --workers: must be 1 to 256, got 0"),
        (["solver", "--workers", "257"], "argument --workers: must be 1 to 256, got 257"),
        # an OverflowError traceback (status 1) as the pool started; 1000 started 1000
        # processes on a 2-core machine
        (
            ["solver", "--workers", "99999999999999999999"],
            "argument --workers: must be 1 to 256, got 99999999999999999999",
        ),
        (["solver", "--start", "-1"], "argument --start: must be 0 or more, got -1"),
        (["solver", "--certify", "-1"], "argument --certify: must be 0 to 10000, got -1"),
        (["solver", "--certify-budget", "0"], "--certify-budget: must be 1 to 10000000, got 0"),
        (["solver", "--deals", "many"], "argument --deals: not a whole number: 'many'"),
        (
            ["solver", "--start", str(2**64 - 1), "--deals", "2"],
            f"--start: the last seed, --start + --deals - 1 = {2**64}, is not below 2**64",
        ),
        (["solver", "--variant", "golf"], "--variant: unknown preset(s): 'golf' (presets: yukon,"),
        # said "unknown preset(s): " and nothing: the empty name did not show
        (["solver", "--variant", ""], "--variant: unknown preset(s): '' (presets: yukon, russian"),
        (
            ["solver", "--log", "/proc/nonexistent/dir/log", "--deals", "1"],
            "--log: cannot open /proc/nonexistent/dir/log: No such file or directory",
        ),
        (["store", "--redis-url", "garbage"], "argument --redis-url: not a Redis URL: 'garbage'"),
        # an audit: the preset, a --log path or a Redis URL that is not UTF-8 said the
        # byte as '\udcff' (the URL as "Redis does not answer at \udcff", status 1); a
        # --log named with an ESC wrote the escape sequence to the terminal; a URL
        # whose ESC[ read as an IPv6 bracket said only "Invalid IPv6 URL"; a host with a
        # space was looked up
        (["solver", "--variant", "\udcff"], "--variant: unknown preset(s): '\\xff' (presets:"),
        (
            ["solver", "--log", "/proc/nonexistent/\udcff", "--deals", "1"],
            "--log: cannot open '/proc/nonexistent/\\xff': No such file or directory",
        ),
        (
            ["solver", "--log", "/proc/nonexistent/\x1b[31m", "--deals", "1"],
            "--log: cannot open '/proc/nonexistent/\\x1b[31m': No such file or directory",
        ),
        (
            ["store", "--redis-url", "redis://\udcff/0"],
            "--redis-url: not UTF-8 text: 'redis://\\xff/0'",
        ),
        (
            ["store", "--redis-url", "redis://\x1b[31m/0"],
            "--redis-url: not a Redis URL: 'redis://\\x1b[31m/0': it holds a character that is "
            "not printable",
        ),
        (
            ["store", "--redis-url", "redis://[::1/0"],
            "--redis-url: not a Redis URL: 'redis://[::1/0': invalid IPv6 URL",
        ),
        (
            ["store", "--redis-url", "redis://a b:6379/0"],
            "--redis-url: 'a b' is not a host name (it holds a space)",
        ),
        (
            ["store", "--redis-url", "redis://127.0.0.1:6379/x"],
            "argument --redis-url: database index 'x' is not a number",
        ),
        (
            ["store", "--redis-url", REDIS_URL.rsplit("/", 1)[0] + "/99"],
            "--redis-url: Redis refused it: ",
        ),
        (
            ["store", "--redis-url", f"redis+cluster://{_node()}"],
            f"--redis-url: {_node()} is not a Redis Cluster (cluster support disabled)",
        ),
        (["server", "--racers", "1"], "argument --racers: must be 2 to 2000, got 1"),
        (["server", "--racers", "6"], "--racers: more than 4 racers fill rooms of 4: 6 is not"),
        (["server", "--rate", "0"], "--rate: must be more than 0 and at most 100, got 0"),
        (["server", "--rate", "nan"], "argument --rate: not a finite number: 'nan'"),
        (["server", "--warmup", "-1"], "argument --warmup: must be 0 to 60, got -1"),
        (["server", "--loop", "trio"], "argument --loop: invalid choice: 'trio'"),
        (["core", "--rooms", "0"], "argument --rooms: must be 1 to 1000, got 0"),
        (["core", "--moves", "x"], "argument --moves: not a whole number: 'x'"),
        (["core", "--callgrind", "--moves", "10"], "--moves: must be above 10 with --callgrind"),
        ([], "the following arguments are required: suite"),
    ],
)
def test_a_bad_argument_is_one_line_and_status_2_before_anything_runs(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    status, out, err = _call(argv, capsys)
    assert (status, out) == (2, "")
    assert err.startswith(f"{PROG}: ") and says in err and err.count("\n") == 1, err
    assert time.monotonic() - began < 10  # said before any measuring


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        # ran the server suite's 200 racers, --rooms unread
        (["server", "--rooms", "3"], "--rooms is an option of core, not of server"),
        (["rules", "--budget", "5"], "--budget is an option of solver, not of rules"),
        (["solver", "--seconds", "5"], "--seconds is an option of rules and server, not of solver"),
        (
            ["rules", "--redis-url", REDIS_URL],
            "--redis-url is an option of store, server and core, not of rules",
        ),
        (["core", "--find-max"], "--find-max is an option of server, not of core"),
        (["store", "--loop", "asyncio"], "--loop is an option of server and core, not of store"),
        # an abbreviation, as argparse takes it, is the option it names
        (["server", "--room", "3"], "--rooms is an option of core, not of server"),
    ],
)
def test_an_option_of_another_suite_is_one_line_and_status_2(
    argv: list[str],
    says: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each option but --json is one suite's or a few's (its help says which): given to
    another it was ignored without a word, and the run measured something else."""

    def ran(*args: object) -> dict[str, object]:
        raise AssertionError(f"{argv} was taken and would run")

    monkeypatch.setattr(solrace.bench.cli, "_run", ran)
    status, out, err = _call(argv, capsys)
    assert (status, out) == (2, "")
    assert err == f"{PROG}: {says} (see {PROG} --help)\n"


def test_the_options_typed_are_known_from_the_one_parse(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The parse itself notes which options were typed (their default given too, and
    abbreviations): they were found by parsing the command line a second time, a
    second definition of it that had to agree with the first."""
    parser = build_parser()
    args = parser.parse_args(["server", "--room", "10", "--racers", "200", "--json"])
    assert args.given == {"rooms", "racers"}
    assert parser.parse_args(["server"]).given == set()  # each parse its own
    with pytest.raises(SystemExit):
        _check(parser, args)
    assert "--rooms is an option of core, not of server" in capsys.readouterr().err

    parses: list[object] = []
    parse = argparse.ArgumentParser.parse_known_args

    def counted(*args: Any, **kwargs: Any) -> Any:
        parses.append(args)
        return parse(*args, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", counted)
    assert _call(["core", "--find-max"], capsys)[0] == 2
    assert len(parses) == 1


def test_every_option_is_checked_for_its_suite_as_its_help_and_the_docs_say() -> None:
    """OPTION_SUITES is what ``_check`` checks: an option missing from it is taken by
    every suite without a word (the defect the check was made for), and its suites are
    said twice more, in the option's --help (``server: …``) and docs/performance.md's
    size table. The three say the same."""
    import re

    from solrace.bench.cli import OPTION_SUITES

    parser = build_parser()
    suites = next(a for a in parser._actions if a.dest == "suite").choices
    assert suites is not None
    options = {
        a.dest: a.help or "" for a in parser._actions if a.dest not in ("help", "suite", "json")
    }
    assert set(options) == set(OPTION_SUITES)
    for dest, text in options.items():
        said = {s for s in suites if re.search(rf"(^|; |, ){s}[:,]", text)}
        assert said == set(OPTION_SUITES[dest]), (dest, text)
    page = (Path(__file__).parents[2] / "docs" / "performance.md").read_text()
    rows = [line.split("|") for line in page.splitlines() if line.startswith("| `--")]
    assert rows
    for row in rows:
        for flag in re.findall(r"`--([a-z-]+)`", row[1]):
            dest = flag.replace("-", "_")
            assert row[2].strip().split(", ") == list(OPTION_SUITES[dest]), row


class _Ran(Exception):
    """The run was reached: its arguments were taken."""


@pytest.mark.parametrize(
    "argv",
    [
        ["rules", "--seconds", "1", "--json"],
        ["server", "--seconds", "1", "--racers", "4", "--rate", "1", "--aligned"],
        ["core", "--rooms", "1", "--redis-url", REDIS_URL, "--loop", "asyncio"],
        ["solver", "--deals", "1", "--budget", "5", "--variant", "yukon"],
    ],
)
def test_every_option_of_its_own_suite_is_taken(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def ran(parser: object, args: argparse.Namespace, keys: object) -> dict[str, object]:
        raise _Ran

    monkeypatch.setattr(solrace.bench.cli, "_run", ran)
    with pytest.raises(_Ran):
        main(argv)


#: Every size option's bound (bench/limits.py; the solver's budget bound,
#: solver_budget.py): (suite, flag, bound, lowest value).
SIZE_BOUNDS = [
    ("rules", "--seconds", limits.MAX_SECONDS, "more than 0 and at most"),
    ("server", "--seconds", limits.MAX_SECONDS, "more than 0 and at most"),
    ("server", "--warmup", limits.MAX_WARMUP_S, "0 to"),
    ("server", "--racers", limits.MAX_RACERS, "2 to"),
    ("server", "--rate", limits.MAX_RATE, "more than 0 and at most"),
    ("core", "--rooms", limits.MAX_ROOMS, "1 to"),
    ("core", "--moves", limits.MAX_MOVES, "1 to"),
    ("solver", "--deals", limits.MAX_DEALS, "0 to"),
    ("solver", "--budget", MAX_BUDGET, "1 to"),
    ("solver", "--certify-budget", MAX_BUDGET, "1 to"),
    ("solver", "--certify", limits.MAX_WALKS, "0 to"),
    ("solver", "--certify-node", limits.MAX_WALKS, "0 to"),
    ("solver", "--workers", limits.MAX_WORKERS, "1 to"),
]


@pytest.mark.parametrize(
    ("suite", "flag", "bound", "low"),
    SIZE_BOUNDS,
    ids=[f"{suite}{flag}" for suite, flag, _, _ in SIZE_BOUNDS],
)
def test_a_size_at_its_bound_is_taken_and_one_past_it_refused_in_one_line(
    suite: str,
    flag: str,
    bound: float,
    low: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unbounded, ``--racers 1000000`` (and every other size) was accepted and the run
    set off to build it (bench/limits.py says why each bound is where it is). Nothing
    runs here: a value the parser takes fails the test instead of running."""

    def ran(*args: object) -> dict[str, object]:
        raise AssertionError(f"{suite} {flag} {past} was taken and would run")

    monkeypatch.setattr(solrace.bench.cli, "_run", ran)
    at, past = (str(int(v)) if float(v).is_integer() else str(v) for v in (bound, bound + 1))
    parser = build_parser()
    args = parser.parse_args([suite, flag, at])
    _check(parser, args)  # the bound itself: a run it would start
    assert getattr(args, flag.removeprefix("--").replace("-", "_")) == bound
    status, out, err = _call([suite, flag, past], capsys)
    assert (status, out) == (2, "")
    assert err == f"{PROG}: argument {flag}: must be {low} {at}, got {past} (see {PROG} --help)\n"


def _table_default(page: str, option: str) -> str:
    """The default column of ``option``'s row of docs/performance.md's size table."""
    for line in page.splitlines():
        if line.startswith(f"| `{option}`"):
            return line.split("|")[3].strip()
    raise AssertionError(f"no row for {option} in docs/performance.md's size table")


def test_a_bare_solver_run_is_a_quick_look_and_the_docs_say_its_defaults() -> None:
    """``python -m solrace.bench solver`` with no sizes ran 200 deals of each of seven
    presets at 100,000 nodes, 200 certify walks and 4 × 100 through the node's workers:
    killed after 10 minutes on a 2-core machine, not half-way (the Australian deals the
    solver leaves unknown cost the whole budget each). A newcomer's first run is a quick
    look at every measure, at the server's budget; docs/winnability.md's studies name
    their sizes (tests/test_docs_commands.py). Its --help and docs/performance.md's
    table say the defaults the parser has."""
    from solrace.bench.solver import DEFAULT_PRESETS
    from solrace.solver import SERVER_BUDGET

    parser = build_parser()
    args = parser.parse_args(["solver"])
    _check(parser, args)
    assert args.budget == SERVER_BUDGET and args.certify_budget is None
    assert len(args.variant) * args.deals <= len(DEFAULT_PRESETS) * 20
    assert args.certify <= 20 and args.certify_node <= 10
    page = (Path(__file__).parents[2] / "docs" / "performance.md").read_text()
    assert _table_default(page, "--deals") == str(args.deals)
    assert _table_default(page, "--budget").startswith(f"{args.budget:,} (the server's")
    assert _table_default(page, "--certify") == f"{args.certify}, {args.certify_node}"
    shown = " ".join(parser.format_help().split())
    assert f"--deals DEALS solver: deals per preset (default {args.deals}," in shown
    assert f"--budget BUDGET solver: node budget (default {args.budget:,}" in shown
    assert f"--certify CERTIFY solver: certify walks (default {args.certify}," in shown
    assert f"per setting (default {args.certify_node}," in shown


@pytest.mark.parametrize("suite", ["core", "server"])
def test_a_bad_solrace_loop_is_refused_as_solrace_server_refuses_it(
    suite: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SOLRACE_LOOP`` is ``--loop``'s variable: ``solrace-server`` refuses a bad one
    (status 2) and the benchmark ran on the default loop as if it were not set (and,
    here, said that Redis does not answer, status 1). Now the same words, said by the
    same definition (solrace.net.main.LOOP), before anything runs."""
    from solrace.net.main import UsageError, resolve
    from solrace.net.main import build_parser as server_parser

    with pytest.raises(UsageError) as server:
        resolve(server_parser().parse_args([]), {"SOLRACE_LOOP": "bogus"})
    assert str(server.value) == "$SOLRACE_LOOP: must be one of auto, uvloop, asyncio, got 'bogus'"
    monkeypatch.setenv("SOLRACE_LOOP", "bogus")
    status, out, err = _call([suite, "--redis-url", "redis://127.0.0.1:1/0"], capsys)
    assert (status, out, err) == (2, "", f"{PROG}: {server.value} (see {PROG} --help)\n")


@pytest.mark.parametrize(
    ("variable", "flag", "loop"),
    [
        (None, [], "uvloop"),  # auto: uvloop where installed, as solrace-server
        ("asyncio", [], "asyncio"),
        ("", [], "uvloop"),  # an empty variable is not set, as for solrace-server
        ("bogus", ["--loop", "asyncio"], "asyncio"),  # the flag wins over the variable
        ("asyncio", ["--loop", "auto"], "uvloop"),
    ],
)
def test_the_loop_comes_from_the_flag_else_solrace_loop_else_auto(
    variable: str | None, flag: list[str], loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if variable is None:
        monkeypatch.delenv("SOLRACE_LOOP", raising=False)
    else:
        monkeypatch.setenv("SOLRACE_LOOP", variable)
    for suite in ("core", "server"):
        parser = build_parser()
        args = parser.parse_args([suite, *flag])
        _check(parser, args)
        assert args.loop == loop, suite


def test_callgrind_without_valgrind_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    status, out, err = _call(["core", "--callgrind"], capsys)
    assert (status, out) == (2, "")
    assert err == (
        f"{PROG}: --callgrind: valgrind is not installed here (apt-get install valgrind)"
        f" (see {PROG} --help)\n"
    )


@pytest.mark.parametrize("suite", ["store", "server", "core"])
def test_a_redis_that_does_not_answer_is_one_line_and_status_1(
    suite: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a StoreUnavailable traceback (the server benchmark: after its echo run)."""
    status, out, err = _call([suite, "--redis-url", "redis://127.0.0.1:1/0"], capsys)
    assert (status, out) == (1, "")
    assert err == f"{PROG}: --redis-url: Redis does not answer at 127.0.0.1:1\n"


def test_a_run_that_cannot_go_on_is_one_line_and_status_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a RuntimeError traceback (the server benchmark's "rooms did not start
    within 20.0 s", 2026-12-04). Here valgrind itself fails under the core benchmark's
    callgrind run: a real failure of the run, not of an argument."""
    fake = tmp_path / "valgrind"
    fake.write_text("#!/bin/sh\necho 'valgrind: the program crashed' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    argv = ["core", "--callgrind", "--rooms", "1", "--moves", "11", "--redis-url", REDIS_URL]
    status, out, err = _call(argv, capsys)
    assert (status, out) == (1, "")
    said = "the run could not go on: the callgrind run failed: valgrind: the program crashed"
    assert err == f"{PROG}: {said}\n"


@pytest.mark.parametrize(
    ("cause", "says"),
    [
        (TimeoutError(), "a room could not start its race (TimeoutError())"),
        (ConnectionError("reset"), "a room could not start its race (ConnectionError: reset)"),
    ],
)
def test_a_run_that_cannot_go_on_names_its_cause(
    cause: Exception,
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What made a room fail is part of the line (a TimeoutError has no text of its
    own). The benchmark itself is replaced here: this is the reporting alone."""

    def fails(*args: object, **kwargs: object) -> dict[str, object]:
        raise RunFailed("a room could not start its race") from cause

    monkeypatch.setattr(solrace.bench.core, "run", fails)
    status, out, err = _call(["core", "--redis-url", REDIS_URL], capsys)
    assert (status, out, err) == (1, "", f"{PROG}: the run could not go on: {says}\n")


def _interrupted(argv: list[str], after_s: float) -> subprocess.CompletedProcess[str]:
    """Run the benchmark and Ctrl-C it after ``after_s``: SIGINT to its whole process
    group (its solver workers too), as a terminal sends it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "solrace.bench", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # Ctrl-C's default even where the tests run with SIGINT ignored (a background job)
        preexec_fn=signals_as_a_shell_gives,
    )
    try:
        time.sleep(after_s)
        assert proc.poll() is None, "it ended before Ctrl-C"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize(
    "argv",
    [
        ["rules", "--seconds", "60"],
        ["solver", "--deals", "100000", "--workers", "2", "--certify", "0"],
        ["server", "--seconds", "30", "--racers", "8", "--json"],
        ["core", "--callgrind", "--json"],
    ],
    ids=["rules", "solver", "server", "core"],
)
def test_ctrl_c_is_one_line_and_status_130(argv: list[str]) -> None:
    """Ctrl-C printed a KeyboardInterrupt traceback (the server suite: its echo server's,
    a child process the benchmark stops itself)."""
    done = _interrupted(argv, 3.0)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", f"{PROG}: interrupted\n")


_INTERRUPTED_WHILE_LOADING = interrupted_while_loading("solrace.bench.__main__")


@pytest.mark.parametrize(
    ("module", "argv"),
    [("solrace.net.main", ["rules"]), ("solrace.rules", ["rules"]), ("redis", ["store"])],
)
def test_ctrl_c_while_the_modules_load_is_one_line_and_130(module: str, argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_WHILE_LOADING, module, *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", f"{PROG}: interrupted\n")


@pytest.mark.parametrize(
    "module", ["solrace.protocol", "solrace.bench.limits", "platform", "argparse", "gettext"]
)
def test_ctrl_c_while_python_m_loads_the_command_is_one_line_and_130(module: str) -> None:
    """A newcomer audit: Ctrl-C in the first ~0.1-0.2 s of ``python -m solrace.bench
    core`` printed a KeyboardInterrupt traceback and died by the signal: ``-m`` ran the
    command's module, whose own imports (its limits, and with them solrace.protocol)
    came before main's handler. ``__main__`` now loads the handler's module only
    (solrace.interrupt), as the console scripts' entry modules do: it took the handler
    from solrace.argtypes, argparse with it — a Ctrl-C some 40 ms in still printed a
    traceback and died by the signal (-2)."""
    done = subprocess.run(
        [sys.executable, "-c", interrupted_while_running("solrace.bench"), module, "rules"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", f"{PROG}: interrupted\n")


@pytest.mark.parametrize(
    ("stdout", "says"),
    [("full", "No space left on device"), ("closed", "standard output is closed")],
)
def test_an_output_it_cannot_write_is_one_line_and_status_1(stdout: str, says: str) -> None:
    """A newcomer audit: ``python -m solrace.bench rules > /dev/full`` ran, then printed
    an OSError traceback (status 1); with standard output closed (``>&-``) it ran and
    exited 0, its JSON lost without a word. Closed, it is said before the run."""
    argv = [sys.executable, "-m", "solrace.bench", "rules", "--seconds", "0.01", "--json"]
    if stdout == "full":
        if not os.path.exists("/dev/full"):
            pytest.fail("this test needs Linux's /dev/full")
        with open("/dev/full", "w") as full:
            done = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    else:  # the child starts with descriptor 1 closed, as a shell's >&- leaves it
        done = subprocess.run(
            ["sh", "-c", 'exec "$@" >&-', "sh", *argv],
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert (done.returncode, done.stderr) == (1, f"{PROG}: cannot write the output: {says}\n")


def test_a_log_it_cannot_write_is_one_line_and_status_1() -> None:
    """A newcomer audit: ``solver --log /dev/full`` (a disk that fills during a study)
    opened the log, then ended in an OSError traceback at its first line, status 1."""
    if not os.path.exists("/dev/full"):
        pytest.fail("this test needs Linux's /dev/full")
    sizes = ["--variant", "yukon", "--deals", "1", "--budget", "100", "--certify", "0"]
    sizes += ["--certify-node", "0", "--workers", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "solrace.bench", "solver", *sizes, "--log", "/dev/full"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        f"{PROG}: the run could not go on: --log: cannot write to /dev/full: "
        "No space left on device\n",
    )


def test_a_reader_that_went_away_ends_it_quietly_with_141() -> None:
    """A newcomer's ``python -m solrace.bench rules --json | head -c 600`` (the README's
    command, looked at) ended in a BrokenPipeError traceback once head had its bytes;
    every other command ends quietly with 141, as a closed pipe stops a process."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the result is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "solrace.bench", "rules", "--seconds", "0.01", "--json"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (EXIT_READER_GONE, b"")


#: Flags whose default is worked out when the run starts (argparse holds None): what
#: their help must say it is.
_WORKED_OUT_DEFAULTS = {
    "--seconds": "default 4",
    "--workers": "default: this machine's cores",
    "--certify-budget": "default: --budget's",
    "--rooms": "default 10",
    "--moves": "default 40",
    "--loop": "default auto",
}


def test_help_names_every_default() -> None:
    """A newcomer reads ``--help`` to learn what a bare run does. It named no default for
    ``--redis-url`` (db 0 of the local Redis: store, server and core write there, which
    on a shared Redis is someone else's database), nor for the solver's sizes: ``solver
    --deals 5`` still ran its 200 certify walks and 2 × 100 node walks, over 2 minutes,
    and a bare ``solver`` seven presets of 200 deals at 100,000 nodes each."""
    parser = build_parser()
    formatter = parser._get_formatter()
    for action in parser._actions:
        flag = action.option_strings[-1] if action.option_strings else action.dest
        if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            wanted = _WORKED_OUT_DEFAULTS.get(flag)
        elif isinstance(action.default, float):
            wanted = f"default {action.default:g}"
        elif isinstance(action.default, int):
            wanted = f"default {action.default:,}"
        else:
            wanted = f"default {action.default}"
        if wanted is None:
            continue
        said = " ".join(formatter._expand_help(action).split())
        assert wanted in said, f"{flag}: {said!r} does not say {wanted!r}"
    text = " ".join(parser.format_help().split())
    assert "default redis://127.0.0.1:6379/0" in text
    assert "default yukon, russian, alaska, australian, double_yukon, klondike," in text
