"""Every command the README and docs/ quote inline is one its program takes.

tests/test_docs_commands.py runs the lines of the pages' ``sh`` blocks; the commands the
prose and the tables quote in backticks (``solrace create --private``, ``solrace-server
--keep-results``, ``python -m solrace.bench server --json --seconds 10``, …) nothing
checked: a flag renamed or dropped left a page that a newcomer copies and that fails.
Nothing is run here: each span is read by the parser its program builds, with the checks
the program makes of its arguments before it does anything (:data:`PROGRAMS`).

The spans are the inline code spans (fenced blocks left out) that start with one of the
programs. Each is one of:

* a message a program prints (``solrace create: variant yukon has no option …``,
  ``solrace 0.1.0``): not a command, left out;
* a usage pattern (``[--racers N]``, ``<race id>``, ``A | B``, ``…``): every command and
  option it names is one the program has, spelt in full, and each value of an
  ``--option a|b`` is one the option takes;
* a command: the same names check, then, with the placeholders of :data:`PLACEHOLDERS`
  filled in, its whole argument list parsed and checked. A span that names a command or
  a flag without its operands (``solrace verify``, ``solrace-server --keep-results``) may
  fail only for the operand it leaves out. :data:`REFUSED` lists, with the reason, the
  spans a page shows refused on purpose: those must be refused.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: A span's program: the console scripts, the benchmark, the documentation's tools.
PROGRAM = re.compile(
    r"(solrace-rules|solrace-server|solrace|python -m solrace\.bench|python docs/tools/\w+\.py) "
)
#: What a page quotes a program printing: ``PROG[ COMMAND]: …`` or ``PROG 1.2.3``.
MESSAGE = re.compile(r"^\S+(?: -m \S+)?(?: \w[\w-]*)?: |^\S+ \d+(?:\.\d+)+$")
#: What makes a span a usage pattern rather than a command: ``[optional]``,
#: ``<name>``, ``a|b``, an ellipsis, ``--one/--other``.
PATTERN = re.compile(r"[\[<|…]|\.\.\.|/--")
#: Placeholder words in commands → a value of that kind.
PLACEHOLDERS = {
    "CODE": "K7QX2M",
    "RACE": "r_2147d18c011a.3bda1e00",
    "HOST:PORT": "127.0.0.1:8765",
    "SUITE": "rules",
    "L": "asyncio",  # python -m solrace.bench server … --loop L
}
#: Spans a page shows refused, each with the reason: they must stay refused.
REFUSED = {
    "solrace races --limit $'\\xff'": "docs/client.md: an argument that is not UTF-8 text "
    "is quoted with its bytes as typed in the refusal",
}
#: What argparse says of an operand left out: a span naming a command or a flag alone.
LEFT_OUT = ("the following arguments are required", "expected one argument")


# ------------------------------------------------------------- the programs
@functools.cache
def _tool_module(name: str) -> ModuleType:
    path = ROOT / "docs" / "tools" / name
    spec = importlib.util.spec_from_file_location(f"doc_inline_{path.stem}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def _tool(name: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _tool_module(name).build_parser()
    return parser


def _solrace_parser() -> argparse.ArgumentParser:
    from solrace_client.cli import build_parser

    return build_parser()


def _solrace(argv: list[str]) -> None:
    """:func:`solrace_client.cli.main` up to running the command."""
    from solrace_client import cli

    args, extra = cli.build_parser().parse_known_args(argv)
    if extra:
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command in cli.OFFLINE_COMMANDS:
        assert getattr(args, "server", None) is None, "an offline command given --server"
    else:
        cli._check_servers(args)


def _rules_parser() -> argparse.ArgumentParser:
    from solrace.rules.cli import build_parser

    return build_parser()


def _rules(argv: list[str]) -> None:
    from solrace.rules.cli import parse

    parse(argv)


def _server_parser() -> argparse.ArgumentParser:
    from solrace.net.main import build_parser

    return build_parser()


def _server(argv: list[str]) -> None:
    """:func:`solrace.net.main.main` up to starting: its flags resolved, no variable."""
    from solrace.net.main import resolve

    resolve(_server_parser().parse_args(argv), environ={})


def _bench_parser() -> argparse.ArgumentParser:
    from solrace.bench.cli import build_parser

    return build_parser()


def _bench(argv: list[str]) -> None:
    from solrace.bench.cli import _check

    parser = _bench_parser()
    _check(parser, parser.parse_args(argv))


@dataclass(frozen=True)
class Program:
    parser: Callable[[], argparse.ArgumentParser]
    check: Callable[[list[str]], None]  # parses and checks; SystemExit or raises if refused


PROGRAMS = {
    "solrace": Program(_solrace_parser, _solrace),
    "solrace-rules": Program(_rules_parser, _rules),
    "solrace-server": Program(_server_parser, _server),
    "python -m solrace.bench": Program(_bench_parser, _bench),
}


def program(name: str) -> Program:
    if not name.startswith("python docs/tools/"):
        return PROGRAMS[name]
    tool = name.removeprefix("python docs/tools/")

    def check(argv: list[str]) -> None:
        _tool(tool).parse_args(argv)

    return Program(lambda: _tool(tool), check)


# -------------------------------------------------------------- the spans
@dataclass(frozen=True)
class Span:
    where: str  # file:line
    program: str
    text: str  # the span on one line, the table's ``\\|`` as ``|``

    @property
    def args(self) -> str:
        return self.text.removeprefix(self.program).strip()

    @property
    def pattern(self) -> bool:
        return PATTERN.search(self.text) is not None


def spans() -> list[Span]:
    found: list[Span] = []
    for path in DOC_FILES:
        text = path.read_text()
        # fenced blocks blanked, their lines kept: a span's line number is the page's
        prose = re.sub(
            r"^ *```.*?^ *```", lambda m: "\n" * m.group().count("\n"), text, flags=re.M | re.S
        )
        for match in re.finditer(r"`([^`]+)`", prose):
            span = " ".join(match.group(1).split()).replace("\\|", "|")
            name = PROGRAM.match(span)
            if name and not MESSAGE.search(span):
                line = prose.count("\n", 0, match.start()) + 1
                found.append(Span(f"{path.relative_to(ROOT)}:{line}", name.group(1), span))
    return found


def refusal(check: Callable[[list[str]], None], argv: list[str]) -> str | None:
    """What the program says refusing ``argv``, or None if it takes them (``--help``
    and ``--version`` included: they print and exit 0)."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(said):
            check(argv)
    except SystemExit as exc:
        return None if exc.code in (0, None) else said.getvalue().strip() or f"exit {exc.code}"
    except Exception as exc:  # a check after parsing (UsageError, BadServerURL, an assert)
        return f"{type(exc).__name__}: {exc}"
    return None


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    # argparse has no public way to list a parser's commands or options
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_names(span: Span, words: list[str]) -> list[str]:
    """The command and options ``words`` name that the span's program does not have."""
    parser = program(span.program).parser()
    options = set(parser._option_string_actions)
    commands = subcommands(parser)
    wrong = []
    if commands:
        command = next((w for w in words if not w.startswith("-")), None)
        if command is not None:
            if command not in commands:
                return [f"no command {command!r} (commands: {', '.join(commands)})"]
            options |= set(commands[command]._option_string_actions)
    for word in words:
        option = word.partition("=")[0]
        if re.fullmatch(r"--?[A-Za-z][\w-]*", option) and option not in options:
            wrong.append(f"no option {option}")
    return wrong


def check_pattern(span: Span) -> list[str]:
    words = re.findall(r"[^\s\[\]|…/]+", span.args.replace("...", " "))
    wrong = unknown_names(span, words)
    if wrong:
        return wrong
    commands = subcommands(program(span.program).parser())
    command = [w for w in words[:1] if w in commands]
    # each value of an ``--option a|b|c``, given alone to the command
    for option, values in re.findall(
        r"(--[\w-]+)[ =]([a-z0-9][\w-]*(?:\|[a-z0-9][\w-]*)+)", span.args
    ):
        for value in values.split("|"):
            said = refusal(program(span.program).check, [*command, option, value])
            if said is not None:
                wrong.append(f"{option} {value}: {said}")
    return wrong


def _bytes_typed(match: re.Match[str]) -> str:
    typed = bytes.fromhex(match.group(1).replace("\\x", ""))
    return shlex.quote(typed.decode("utf-8", "surrogateescape"))


def check_command(span: Span) -> list[str]:
    text = span.args
    for name, value in PLACEHOLDERS.items():
        text = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", value, text)
    # bash's $'\xff': the byte, as Python hands a program an argument that is not UTF-8
    text = re.sub(r"\$'((?:\\x[0-9a-fA-F]{2})+)'", _bytes_typed, text)
    words = [w for w in shlex.split(text) if not re.match(r"\d*[<>]", w)]  # redirections
    wrong = unknown_names(span, words)
    if wrong:
        return wrong
    said = refusal(program(span.program).check, words)
    if said is None:
        return []
    commands = subcommands(program(span.program).parser())
    named = words[1:] if words and words[0] in commands else words
    if all(w.startswith("-") for w in named) and any(gap in said for gap in LEFT_OUT):
        return []  # a command or a flag named without its operand
    return [said]


# ------------------------------------------------------------------ tests
def test_the_pages_quote_commands() -> None:
    """The extraction finds what it should (a regex gone wrong would check nothing)."""
    found = spans()
    programs = {span.program for span in found}
    assert {"solrace", "solrace-rules", "solrace-server", "python -m solrace.bench"} <= programs
    assert any(span.program.startswith("python docs/tools/") for span in found)
    assert sum(span.pattern for span in found) >= 10, found
    assert sum(not span.pattern for span in found) >= 100, found
    quoted = {span.text for span in found}
    commands = " ".join(span.args for span in found if not span.pattern)
    unused = [
        name for name in PLACEHOLDERS if not re.search(rf"(?<![\w.]){name}(?![\w.])", commands)
    ]
    assert not unused, f"placeholders no command has: {unused}"
    assert set(REFUSED) <= quoted, f"refusals the pages no longer show: {set(REFUSED) - quoted}"


def test_every_inline_command_is_taken_by_its_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("SOLRACE_SERVER", "SOLRACE_LOOP"):  # the commands as a newcomer has them
        monkeypatch.delenv(variable, raising=False)
    stale: list[str] = []
    for span in spans():
        if span.text in REFUSED:
            if check_command(span) == []:
                stale.append(f"{span.where}: `{span.text}` is taken, the page shows it refused")
            continue
        wrong = check_pattern(span) if span.pattern else check_command(span)
        stale += [f"{span.where}: `{span.text}`: {why}" for why in wrong]
    assert not stale, "inline commands their program refuses:\n" + "\n".join(stale)
