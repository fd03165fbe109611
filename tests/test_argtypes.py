"""solrace.argtypes: the number flags of every command line read and refuse alike, and
every console script says its version alike."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from solrace import __version__
from solrace.argtypes import (
    MAX_HOST_NAME_LEN,
    BadNumber,
    BadText,
    not_a_host_name,
    real,
    utf8,
    whole,
)
from solrace.quoting import quoted


@pytest.mark.parametrize(
    ("check", "text", "says"),
    [
        (whole(), "x", "not a whole number: 'x'"),
        (whole(2, 8), "9", "must be 2 to 8, got 9"),
        (whole(2, 8), "1", "must be 2 to 8, got 1"),
        (whole(1, unit=" nodes"), "0", "must be 1 or more nodes, got 0 nodes"),
        (whole(hi=3), "4", "must be 3 or less, got 4"),
        (real(), "soon", "not a number: 'soon'"),
        (real(), "nan", "not a finite number: 'nan'"),
        (real(0, above=True), "0", "must be more than 0, got 0"),
        (real(0, 5, above=True), "6", "must be more than 0 and at most 5, got 6"),
        (real(0, unit=" seconds"), "-0.5", "must be 0 or more seconds, got -0.5 seconds"),
        # written as people write them, not 1e+06 (`solrace races --limit 0` said so)
        (whole(1, 1_000_000), "0", "must be 1 to 1000000, got 0"),
        (real(0, 1e6), "2000000", "must be 0 to 1000000, got 2000000"),
        # past int()'s 4300 digits: a whole number, too long (it said "not a whole
        # number: '999…'", five thousand nines on the line: `solrace-rules deal yukon 999…`)
        (whole(), "9" * 5000, "too long a number: 5000 digits"),
        (whole(0, 9), "-" + "1" * 4301, "too long a number: 4301 digits"),
        # a digit to str.isdigit, not to int(): it was "too long a number: 1 digits"
        (whole(), "²", "not a whole number: '²'"),
        # a value past its bounds is said at most in its first 40 characters (4,000
        # nines, or a float's 301 digits, were said whole: `solrace bot --racers 999…`,
        # `solrace bot --delay 1e300`)
        (whole(2, 8), "9" * 4000, f"must be 2 to 8, got '{'9' * 40}'… (4,000 characters)"),
        (real(0, 60), "1e300", "must be 0 to 60, got 1e+300"),
        # digits past a float's range, which float() reads as infinity: it said "not a
        # finite number" of a number written out (`solrace-server --rate-per-s 1e400`)
        (real(0, 60), "1e400", "must be 0 to 60, got '1e400'"),
        (real(0, 60), "-" + "1" * 400, f"must be 0 to 60, got '-{'1' * 39}'… (401 characters)"),
        (real(0), "1" * 400, f"too large a number: '{'1' * 40}'… (400 characters)"),
        # every digit that tells the value from the bound (``:g`` said "got 2": six
        # significant digits)
        (real(0, 2), "2.0000001", "must be 0 to 2, got 2.0000001"),
        (real(0.1234567, 9), "0.1234566", "must be 0.1234567 to 9, got 0.1234566"),
        (whole(2, 8), "0x" + "f" * 4000, "must be 2 to 8, got a number of 16,000 bits"),
    ],
)
def test_a_bad_value_says_what_is_wrong(check: object, text: str, says: str) -> None:
    assert callable(check)
    with pytest.raises(BadNumber) as refused:
        check(text)
    assert str(refused.value) == says


@pytest.mark.parametrize(
    "text",
    # int() reads each of these as a number: Arabic-Indic digits (18779), digits with
    # underscores, spaces around, octal and binary, a plus sign, a hex with an underscore
    ["١٨٧٧٩", "1_000", " 12", "12 ", "0o17", "0b11", "+5", "0x_1f", "٣", "１２"],
)
def test_a_whole_number_is_ascii_digits_with_a_minus_sign_or_0x(text: str) -> None:
    """``--port ١٨٧٧٩`` listened on 18779 and a seed ``1_000`` dealt seed 1000:
    Python's int() reads every Unicode digit, underscores and spaces. A number on a
    command line is its ASCII digits (solrace.digits), a minus sign before, or 0x."""
    with pytest.raises(BadNumber) as refused:
        whole()(text)
    assert str(refused.value) == f"not a whole number: {quoted(text)}"


@pytest.mark.parametrize("text", ["١.٥", "٣", "１", "1_0.5", "1e1_0", " 2", "2 ", "+0.5"])
def test_a_number_with_a_fraction_is_ascii_too(text: str) -> None:
    """float() reads what int() read (Unicode digits, underscores, spaces around, a
    plus sign): ``solrace bot --delay ١`` waited a second and
    ``--keep-results-days ١٠`` kept ten days, where ``--limit ٣`` is refused — one
    spelling of a number for every flag, the ASCII one."""
    with pytest.raises(BadNumber) as refused:
        real()(text)
    assert str(refused.value) == f"not a number: {quoted(text)}"


def _said(
    argv: list[str], run: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> str:
    try:
        status = run(argv)
    except SystemExit as exc:
        status = int(exc.code or 0)
    err = capsys.readouterr().err
    assert status == 2, err
    return err


#: A server no connection reaches: a command that would connect fails at once.
NOWHERE = ["--server", "ws://127.0.0.1:9"]


@pytest.mark.parametrize(
    ("command", "argv", "says"),
    [
        ("rules", ["deal", "klondike", "١٢"], "argument seed: not a whole number: '١٢'"),
        ("rules", ["deal", "klondike", "1_000"], "argument seed: not a whole number: '1_000'"),
        ("server", ["--port", "١٨٧٧٩"], "--port: not a port number: '١٨٧٧٩'"),
        ("server", ["--port", "8_765"], "--port: not a port number: '8_765'"),
        ("client", ["races", "--limit", "٣"], "argument --limit: not a whole number: '٣'"),
        ("client", ["create", "--time-limit", "١٥m", *NOWHERE], "not a duration: '١٥m'"),
        ("client", ["create", "--time-limit", "1_0m", *NOWHERE], "not a duration: '1_0m'"),
        ("client", ["bot", "--quick", "--delay", "١", *NOWHERE], "not a number: '١'"),
        (
            "bench",
            ["solver", "--deals", "١", "--variant", "none"],
            "argument --deals: not a whole number: '١'",
        ),
    ],
)
def test_every_command_line_reads_its_whole_numbers_alike(
    command: str, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from solrace.bench.cli import main as bench
    from solrace.net.main import UsageError, build_parser, resolve
    from solrace.rules.cli import main as rules
    from solrace_client.cli import main as client

    def server(argv: list[str]) -> int:
        """solrace-server's reading of its arguments, without the server they start."""
        try:
            resolve(build_parser().parse_args(argv))
        except UsageError as exc:
            print(f"solrace-server: {exc}", file=sys.stderr)
            return 2
        return 0

    run = {"rules": rules, "server": server, "client": client, "bench": bench}[command]
    assert says in _said(argv, run, capsys)


def test_good_values_and_their_spellings() -> None:
    assert whole()("0x10") == 16
    assert whole()("08") == 8  # leading zeros read as decimal
    assert whole(0, 10)("10") == 10
    assert real(0, above=True)("0.25") == 0.25
    assert real()("-1.5e-3") == -0.0015 and real()(".5") == 0.5 and real()("2.") == 2


def test_text_that_is_not_utf8_is_refused_with_its_bytes_shown() -> None:
    """A command line's non-UTF-8 bytes arrive as lone surrogates: refused, shown as
    the bytes typed (a ValueError and argparse's error alike, as BadNumber)."""
    assert utf8("ws://höst") == "ws://höst"
    with pytest.raises(BadText) as refused:
        utf8("d\udcff")
    assert str(refused.value) == "not UTF-8 text: 'd\\xff'"
    assert isinstance(refused.value, ValueError)


def test_a_host_name_no_lookup_can_find_says_why() -> None:
    """An audit: a name with a space, or longer than DNS takes (253 characters), went to
    getaddrinfo — the client said "cannot reach …: unknown host", a Redis URL's host
    was retried for ever — though no lookup can find it."""
    assert not_a_host_name("a b") == "it holds a space"
    assert not_a_host_name("a\x1bb") == "it holds a character that is not printable"
    assert not_a_host_name("a." * 127 + "b") == f"longer than {MAX_HOST_NAME_LEN} characters"
    for name in ("a." * 125 + "bcd", "ünï.example", "127.0.0.1", "::1", "localhost"):
        assert not_a_host_name(name) is None, name


def test_a_host_name_of_253_characters_may_end_with_the_root_s_dot() -> None:
    """A review: the trailing dot of a fully qualified name (``example.com.``) is the
    root's, not a character of the name DNS counts (RFC 1035: 255 octets on the wire
    is 253 written without it): a name of 253 characters and its dot, 254, was
    refused as ``longer than 253 characters``, though it resolves as the 253 do."""
    longest = "a." * 126 + "b"
    assert len(longest) == MAX_HOST_NAME_LEN
    assert not_a_host_name(longest) is None
    assert not_a_host_name(longest + ".") is None
    assert not_a_host_name("a." + longest + ".") == f"longer than {MAX_HOST_NAME_LEN} characters"


def test_a_name_long_only_in_dns_s_spelling_says_so() -> None:
    """A review: a name of other scripts is counted as DNS spells it (IDNA, ``xn--…``),
    113 characters being 363 there: the line said ``'…' (113 characters) is not a host
    name (longer than 253 characters)``, as if the count were wrong."""
    label = "".join(chr(0x4E00 + 97 * i) for i in range(18))
    name = ".".join([label] * 6)
    assert len(name) == 113
    said = not_a_host_name(name)
    assert said is not None
    assert said.startswith(f"longer than {MAX_HOST_NAME_LEN} characters as DNS spells it")
    assert f"({len(name.encode('idna'))}: xn--" in said, said


def test_a_refusal_is_both_what_argparse_prints_and_a_value_error() -> None:
    """argparse prints an ArgumentTypeError's message (a ValueError would read
    'invalid value'); solrace-server's check of a variable catches ValueError."""
    parser = argparse.ArgumentParser(prog="p", exit_on_error=False)
    parser.add_argument("--n", type=whole(1))
    with pytest.raises(argparse.ArgumentError, match="must be 1 or more, got 0"):
        parser.parse_args(["--n", "0"])
    with pytest.raises(ValueError):
        whole(1)("0")


def test_a_parser_of_its_own_keeps_its_words() -> None:
    def duration(text: str) -> int:
        if not text.endswith("m"):
            raise argparse.ArgumentTypeError(f"not a duration: {text!r}")
        return int(text[:-1]) * 60

    check = whole(60, 600, " s", duration)
    assert check("2m") == 120
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration: 'x'"):
        check("x")
    with pytest.raises(BadNumber, match="must be 60 to 600 s, got 660 s"):
        check("11m")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["solrace", "quick", "--name", "-bob"], "solrace quick: argument --name: "),
        (["solrace", "create", "--time-limit", "-5m"], "solrace create: argument --time-limit: "),
        (
            ["solrace-rules", "deal", "yukon", "1", "-o", "-x=1"],
            "solrace-rules deal: argument --option/-o: ",
        ),
        (["solrace-server", "--key-prefix", "-x:"], "solrace-server: argument --key-prefix: "),
        (
            ["-m", "solrace.bench", "solver", "--log", "-x"],
            "python -m solrace.bench: argument --log: ",
        ),
    ],
)
def test_a_value_that_starts_with_a_dash_is_said_how_to_give(argv: list[str], says: str) -> None:
    """An audit: ``solrace quick --name -bob`` said only "argument --name: expected one
    argument" — one was given —, in every command: argparse takes a word that starts
    with ``-`` for an option. Said with the way to give it, ``--name=-bob``."""
    flag, value = argv[-2], argv[-1]
    program = [sys.executable] if argv[0] == "-m" else [str(Path(sys.executable).parent / argv[0])]
    done = subprocess.run(
        [*program, *argv[1:]] if argv[0] != "-m" else [*program, *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    shown = flag.split("/")[0]
    assert done.stderr.splitlines() == [
        f"{says}expected one argument: {value!r} starts with '-', so it was read as an option; "
        f"give it as {shown}={value} (see {says.split(': ')[0]} --help)"
    ], done.stderr


@pytest.mark.parametrize("script", ["solrace", "solrace-rules", "solrace-server"])
def test_every_console_script_says_its_version(script: str) -> None:
    """``--version`` was "unrecognized arguments" (or "the following arguments are
    required: COMMAND") in each of them."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / script), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{script} {__version__}\n", "")


@pytest.mark.parametrize(
    ("argv", "prog", "status"),
    [
        (["solrace", "--version"], "solrace", 2),
        (["solrace", "rooms", "--help"], "solrace rooms", 2),
        (["solrace", "--help"], "solrace", 2),
        (["solrace-server", "--help"], "solrace-server", 1),
        (["solrace-rules", "deal", "--help"], "solrace-rules deal", 1),
        (["solrace-server", "--version"], "solrace-server", 1),
        (["solrace-rules", "--version"], "solrace-rules", 1),
        (["-m", "solrace.bench", "--help"], "python -m solrace.bench", 1),
    ],
)
@pytest.mark.parametrize(
    ("output", "why"),
    [("full", "No space left on device"), ("closed", "standard output is closed")],
)
def test_help_and_version_that_cannot_be_written_fail_in_every_command(
    argv: list[str], prog: str, status: int, output: str, why: str
) -> None:
    """``--version > /dev/full`` ended with status 0 and no word in every command but
    ``solrace-rules`` (whose audit found it): argparse drops the error of that write.
    OneLineParser writes it itself; each command then fails as its other output does.
    With standard output closed (``--help >&-``) argparse wrote the help — 20 to 107
    lines — on standard error instead, status 0, in all four commands."""
    bin_dir = Path(sys.executable).parent
    command = [sys.executable, *argv] if argv[0] == "-m" else [str(bin_dir / argv[0]), *argv[1:]]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            command,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            preexec_fn=(lambda: os.close(1)) if output == "closed" else None,
        )
    assert (done.returncode, done.stderr) == (status, f"{prog}: cannot write the output: {why}\n")
