"""Command lines: one way to read numbers, and one way to say what is wrong.

Every entry point (``solrace``, ``solrace-rules``, ``solrace-server``, ``python -m
solrace.bench``) reads its number flags with these, so a newcomer gets the same words
for the same mistake everywhere: ``not a whole number: 'x'``, ``not a number: 'x'``,
``must be 1 to 8, got 9``, ``must be more than 0, got 0``.

The checks raise :class:`BadNumber`, which is both argparse's ``ArgumentTypeError``
(argparse then prints its message, not "invalid value") and a ``ValueError`` (what
``solrace-server`` catches for the same check of an environment variable).

Every entry point's mistakes read alike too: :class:`OneLineParser` says argparse's
in one line, ``COMMAND: … (see COMMAND --help)`` (:func:`usage_line`, also for the
mistakes a command finds after parsing), with the usage status 2. And every console
script says its version alike (:func:`add_version`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import itertools
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, NoReturn, TypeVar, overload

from solrace import __version__
from solrace.digits import is_digits
from solrace.interrupt import EXIT_INTERRUPTED, EXIT_TERMINATED, interruptible
from solrace.quoting import as_typed, quoted, quoted_number

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = [
    "DEFAULT_PORT",
    "EXIT_INTERRUPTED",
    "EXIT_READER_GONE",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "MAX_HOST_NAME_LEN",
    "OUTPUT_ERRNOS",
    "REDIS_DEFAULT_PORT",
    "BadNumber",
    "BadText",
    "OneLineParser",
    "add_version",
    "interruptible",
    "not_a_host_name",
    "output_unusable",
    "reader_gone",
    "real",
    "usage_line",
    "utf8",
    "whole",
    "whole_number",
]

#: The port ``solrace-server`` listens on and the client connects to when neither is
#: told another (``--port``, ``--server``): one definition for both command lines.
DEFAULT_PORT: Final = 8765

#: Redis's own default port: what a Redis URL without one means (the store), and a
#: client URL naming it was meant for ``--redis-url`` (the client says so instead of
#: blaming the network: solrace_client.errors).
REDIS_DEFAULT_PORT: Final = 6379

#: Every command's exit status for a command-line mistake.
EXIT_USAGE: Final = 2


def usage_line(prog: str, message: str) -> str:
    """A command-line mistake as every command says it: ``solrace bot: … (see
    solrace bot --help)`` — what is wrong, and where to read more. One definition, so
    that argparse's errors and those a command finds after parsing (``deal``'s seed
    refused by the engine, ``bot`` with no way into a room) read alike everywhere."""
    return f"{prog}: {message} (see {prog} --help)"


#: The status of a command whose output's reader went away (``| head``): what a shell
#: reports for a process a closed pipe stops (128 + SIGPIPE).
EXIT_READER_GONE: Final = 128 + 13


def reader_gone() -> int:
    """End quietly when standard output's reader has gone (``| head`` has what it
    wanted): no message — nothing is wrong — and standard output closed (its last
    flush fails once more, silently here), so that the interpreter's flush at exit
    has nothing left to fail on."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.close()
    return EXIT_READER_GONE


#: Errors of writing standard output (a full disk, a closed or broken descriptor),
#: as opposed to reading a file or standard input, which say what they read.
OUTPUT_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF})


def output_unusable(prog: str, why: str, status: int) -> int:
    """Standard output cannot be written (closed: ``cmd >&-``; full: ``> /dev/full``):
    one line on standard error, and standard output closed (its last flush fails once
    more, silently here) so that the interpreter's flush at exit has nothing left to
    fail on — no traceback, no "Exception ignored" after the line."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.close()
    print(f"{prog}: cannot write the output: {why}", file=sys.stderr)
    return status


#: A namespace of the caller's, which argparse fills and returns (its overloads).
_Namespace = TypeVar("_Namespace")

#: argparse's words for an option whose value it did not find.
_EXPECTED_ONE: Final = re.compile(r"argument (\S+): expected one argument")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is one line (:func:`usage_line`), not the usage block,
    and status :data:`EXIT_USAGE`. Subcommands' parsers are of this class too
    (``add_subparsers`` makes them of the parser's own class).

    And ``--help`` or ``--version`` that cannot be written fails as any output does
    (:func:`output_unusable`, :func:`reader_gone`): argparse drops the error of that
    write, so ``--version > /dev/full`` ended with status 0, the answer lost (found in
    ``solrace-rules``, true of every command), and so does one with standard output
    closed (``--help >&-``: argparse wrote the help on standard error, status 0). A
    command line whose status for that is not 1 says so in a subclass (its
    subcommands' parsers are of its class)."""

    #: The command's status for output it cannot write.
    output_failed: ClassVar[int] = 1

    #: The arguments this parser was last given (:meth:`_dash_value`).
    _given: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, usage_line(self.prog, message + self._dash_value(message)) + "\n")

    def _dash_value(self, message: str) -> str:
        """For argparse's ``argument --name: expected one argument`` of a value that
        starts with ``-`` (``--name -bob``, ``--time-limit -5m``), which argparse read as
        an option, how to give it: the line said only that none was given."""
        found = _EXPECTED_ONE.fullmatch(message)
        if found is None:
            return ""
        flags = found.group(1).split("/")
        for flag, value in itertools.pairwise(self._given):
            if flag not in flags or not value.startswith("-") or value == "--":
                continue
            name = value.partition("=")[0]
            if any(known.startswith(name) for known in self._option_string_actions):
                return ""  # an option after all: the value was left out
            return (
                f": {quoted(value)} starts with '-', so it was read as an option; give it "
                f"as {flag}={as_typed([value])}"
            )
        return ""

    # argparse's two parse methods are overloaded (a namespace given or not); these
    # restate the overloads, so that subclasses hook :meth:`_parsing` and :meth:`_parsed`
    # instead of overriding them again
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None, namespace: _Namespace
    ) -> tuple[_Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _Namespace) -> tuple[_Namespace, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        self._parsing()
        parsed, extras = super().parse_known_args(self._given, namespace)
        self._parsed(parsed)
        return parsed, extras

    def _parsing(self) -> None:
        """What a subclass readies before a parse (nothing here)."""

    def _parsed(self, parsed: argparse.Namespace) -> None:
        """What a subclass notes on the arguments it parsed (nothing here)."""

    @overload
    def parse_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> argparse.Namespace: ...
    @overload
    def parse_args(self, args: Iterable[str] | None, namespace: _Namespace) -> _Namespace: ...
    @overload
    def parse_args(self, *, namespace: _Namespace) -> _Namespace: ...
    def parse_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> Any:
        """argparse's, with the arguments it has no use for each said at most in an
        excerpt (:func:`as_typed`): one of 100,000 characters was said whole."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {as_typed(extras)}")
        return parsed

    def _check_value(self, action: argparse.Action, value: object) -> None:
        """argparse's check of a choice, its refusal quoting at most an excerpt of the
        value (:func:`quoted`): ``invalid choice: 'fff…'… (100,000 characters)``."""
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            shown = quoted(value)
            if shown == repr(value):
                raise
            raise argparse.ArgumentError(action, exc.message.replace(repr(value), shown)) from None

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if file is None and sys.stdout is None and sys.stderr is not None:
            # ``--help >&-``: argparse passes the closed standard output (None) and
            # then writes to standard error instead — the help there, status 0. Its
            # mistakes name standard error itself, so None here is the output's.
            sys.exit(output_unusable(self.prog, "standard output is closed", self.output_failed))
        if file is None or file is not sys.stdout:  # a mistake, said on standard error
            super()._print_message(message, file)
            return
        if not message:
            return
        try:
            print(message, end="", file=file, flush=True)
        except BrokenPipeError:  # `--help | head`: quietly
            sys.exit(reader_gone())
        except OSError as exc:
            why = exc.strerror or str(exc)
            sys.exit(output_unusable(self.prog, why, self.output_failed))


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: ``solrace 0.1.0`` (the command's name and the package's version)
    on standard output, status 0 — what a bug report or an upgrade check asks first."""
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {__version__}",
        help="print the version and exit",
    )


class BadNumber(argparse.ArgumentTypeError, ValueError):
    """A number flag's value that is not a number, or not in its range."""


#: Whole floats below this are written out in digits (1000000, not 1e+06); from it on
#: as ``repr`` writes them (1e+300: written out, 301 digits of which the last 284 were
#: float noise).
_WRITTEN_OUT: Final = 1e16


def _num(value: float | None) -> str:
    """A bound or a value as people write it: 1000000, not 1e+06; 0.5 stays 0.5; a
    long one cut (:func:`~solrace.quoting.quoted_number`). Otherwise every digit that
    tells it from its neighbours (``repr``): ``:g`` kept six, and a value just past
    its bound read as the bound — "must be 0 to 2, got 2" for 2.0000001."""
    if isinstance(value, int):
        return quoted_number(value)
    if value is not None and float(value).is_integer() and abs(value) < _WRITTEN_OUT:
        return str(int(value))
    return repr(float(value)) if value is not None else "none"


def _bounds(lo: float | None, hi: float | None, above: bool, unit: str) -> str:
    if lo is None:
        return f"{_num(hi)} or less{unit}"
    low = f"more than {_num(lo)}" if above else f"{_num(lo)} or more"
    if hi is None:
        return f"{low}{unit}"
    if above:
        return f"{low} and at most {_num(hi)}{unit}"
    return f"{_num(lo)} to {_num(hi)}{unit}"


def _checked(value: float, lo: float | None, hi: float | None, above: bool, unit: str) -> None:
    too_low = lo is not None and (value <= lo if above else value < lo)
    if too_low or (hi is not None and value > hi):
        raise BadNumber(f"must be {_bounds(lo, hi, above, unit)}, got {_num(value)}{unit}")


#: The digits after ``0x`` (``string.hexdigits``: ASCII only).
_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def whole_number(text: str) -> int:
    """The one reading of a whole number typed on a command line (or in a variable),
    every flag's, port's and duration's: its ASCII digits (:func:`is_digits`), or 0x
    and hex digits, a minus sign before either (a range then refuses it where it is
    wrong, in its own words: "must be 0 or more, got -1"); else :class:`BadNumber`.
    Python's ``int()`` reads any Unicode digit (``--port ١٨٧٧٩`` listened on 18779),
    underscores (a seed ``1_000`` dealt 1000), spaces around, and with base 0 octal
    and binary: none of them what a newcomer means or expects to be taken."""
    body = text.removeprefix("-")
    digits = body[2:] if body[:2] in ("0x", "0X") else body
    if digits is body:
        taken, base = is_digits(digits), 10
    else:
        taken, base = bool(digits) and _HEX_DIGITS.issuperset(digits), 16
    if not taken:
        raise BadNumber(f"not a whole number: {quoted(text)}")
    try:
        return int(text, base)
    except ValueError:  # past int()'s limit of decimal digits (4300); hex has none
        raise BadNumber(f"too long a number: {len(digits)} digits") from None


def whole(
    lo: int | None = None,
    hi: int | None = None,
    unit: str = "",
    parse: Callable[[str], int] = whole_number,
) -> Callable[[str], int]:
    """An argparse type: a whole number (:func:`whole_number`; or what ``parse`` reads,
    e.g. a duration, which raises ``ArgumentTypeError`` saying what it expected) from
    ``lo`` to ``hi`` (None: no bound); ``unit`` (e.g. ``" s"``) follows the bounds and
    the value in messages."""

    def check(text: str) -> int:
        try:
            value = parse(text)
        except argparse.ArgumentTypeError:
            raise
        except ValueError:
            raise BadNumber(f"not a whole number: {quoted(text)}") from None
        _checked(value, lo, hi, False, unit)
        return value

    check.__name__ = "whole number"
    return check


#: A number with a fraction or an exponent as typed: ASCII digits 0-9 (``[0-9]``, not
#: ``\d``, which is any Unicode digit), a minus sign before, as :func:`whole_number`.
_REAL: Final = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def real(
    lo: float | None = None, hi: float | None = None, *, above: bool = False, unit: str = ""
) -> Callable[[str], float]:
    """An argparse type: a finite number from ``lo`` (exclusive with ``above``) to
    ``hi``; ``unit`` (e.g. ``" s"``) follows the bounds and the value in messages.
    Spelt in ASCII (:data:`_REAL`) as a whole number is: ``float()`` reads what
    ``int()`` read — any Unicode digit (``--delay ١`` waited a second), underscores,
    spaces around, a plus sign."""

    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise BadNumber(f"not a number: {quoted(text)}") from None
        if not math.isfinite(value) and _REAL.fullmatch(text):
            # digits past a float's range (1e400, 400 digits), which float() reads as
            # infinity: said "not a finite number", of a number written out
            bound = hi if value > 0 else lo
            if bound is None:
                raise BadNumber(f"too {'large' if value > 0 else 'small'} a number: {quoted(text)}")
            raise BadNumber(f"must be {_bounds(lo, hi, above, unit)}, got {quoted(text)}{unit}")
        if not math.isfinite(value):
            raise BadNumber(f"not a finite number: {quoted(text)}")
        if not _REAL.fullmatch(text):
            raise BadNumber(f"not a number: {quoted(text)}")
        _checked(value, lo, hi, above, unit)
        return value

    check.__name__ = "number"
    return check


class BadText(argparse.ArgumentTypeError, ValueError):
    """A text flag's (or variable's) value that is not UTF-8."""


def utf8(text: str) -> str:
    """``text`` if it is UTF-8, else :class:`BadText`: ``not UTF-8 text: 'd\\xff'``.

    Python reads a command line's bytes that are not UTF-8 (``$'\\xff'``, a file name
    from another locale) as lone surrogates, which pass every check of characters and
    then fail the first encoding — a Redis key, a socket path, a URL's quoting, a host
    name's IDNA — as a traceback. Shown with its bytes escaped, as typed."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise BadText(f"not UTF-8 text: {quoted(shown, as_is=True)}") from None
    return text


#: The longest host name DNS resolves (RFC 1035: 255 octets on the wire, 253 written):
#: a longer one went to getaddrinfo all the same, and was said "unknown host", whole.
MAX_HOST_NAME_LEN: Final = 253


#: Why a name fails IDNA encoding (what getaddrinfo does to it first): a label, the
#: text between two dots, is empty or longer than 63 characters.
NOT_A_LABEL: Final = "label empty or too long"


def not_a_host_name(host: str) -> str | None:
    """Why ``host`` cannot even be looked up, else None: getaddrinfo encodes a name
    with IDNA, which refuses an empty label (``a..b``, ``.``) or one past 63 characters
    with a UnicodeError — out of a connection (``solrace --server``) a traceback, and
    in ``solrace-server --host`` the codec's words. Addresses encode as they are. Nor
    can a name with a space or a control character be found, nor one past
    :data:`MAX_HOST_NAME_LEN`: looked up, they were "unknown host" (the client), "names no
    address" (``--host``), or a Redis that "does not answer", retried for ever."""
    if not host.isprintable():
        return "it holds a character that is not printable"
    if any(char.isspace() for char in host):
        return "it holds a space"
    try:
        encoded = host.encode("idna")
    except UnicodeError as exc:
        # The codec's words differ between Python releases ("label empty or too long"
        # wrapped in "encoding with 'idna' codec failed (UnicodeError: …)" on 3.11,
        # "'idna' codec can't encode character '\x2e' …: label empty" on 3.13): a
        # label's length said one way, anything else by its bare reason.
        reason = getattr(exc, "reason", None)
        said = reason if isinstance(reason, str) and reason else str(exc)
        if "label empty" in said or "label too long" in said:
            return NOT_A_LABEL
        found = re.search(r"\(UnicodeError: (.*)\)$", said)
        return found.group(1) if found else said
    length = len(encoded.removesuffix(b"."))  # the root's dot (``example.com.``) uncounted
    if length > MAX_HOST_NAME_LEN and host.isascii():
        return f"longer than {MAX_HOST_NAME_LEN} characters"
    if length > MAX_HOST_NAME_LEN:  # said of the name as typed, it read as a miscount
        spelt = encoded[:16].decode("ascii")  # IDNA's output: ASCII letters, digits, - and .
        return f"longer than {MAX_HOST_NAME_LEN} characters as DNS spells it ({length}: {spelt}…)"
    return None
