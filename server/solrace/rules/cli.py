"""``solrace-rules``: the engine on the command line, for tools, tests and bug reports.

    solrace-rules deal yukon 42 | solrace-rules moves -
    solrace-rules perft position.json 3
    solrace-rules play position.json '2:1>4' '2>F'
    solrace-rules deal yukon 42 | solrace-rules solve -
    solrace-rules hint position.json

Exit status: 0 on success, 1 for an illegal move, an impossible position or a file (or
standard input) it cannot read (or an output it cannot write: a full disk), 2 for a
usage or notation error — every argument the command cannot use, ``deal``'s variant,
seed and options included — said in one line, ``solrace-rules COMMAND: … (see
solrace-rules COMMAND --help)``.
``solve`` and ``hint``: 0 when a winning line is known (or the game is already won), 3
when the position is proved unwinnable, 4 when the node budget ran out first (unknown).
A reader that stops reading (``| head``) ends the command quietly with 141, the status
of a process a closed pipe stops (128 + SIGPIPE); Ctrl-C ends it with ``solrace-rules:
interrupted`` and 130 (128 + SIGINT).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, Final

from solrace.argtypes import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    BadNumber,
    BadText,
    OneLineParser,
    add_version,
    output_unusable,
    reader_gone,
    usage_line,
    utf8,
    whole,
)
from solrace.quoting import as_typed, file_name, quoted, quoted_number
from solrace.solver_budget import MAX_BUDGET
from solrace.streams import degrade_gracefully

from .board import Board
from .deal import deal
from .errors import IllegalMoveError, InvalidPositionError, NotationError, RulesError
from .log import apply_entry
from .perft import DIVIDE_DEPTH, divide, perft
from .position import dump_position, load_position
from .variants import VARIANTS


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` as given on a command line (the rules CLI's and the client's
    ``--option``): the value is read as JSON when it can be (true, 3, null), else it is
    a string (``scoring=vegas``). Bytes of another locale are refused with the bytes as
    typed (:func:`utf8`): Python reads them as lone surrogates, which the engine's
    refusal then named, ``not "\\udcff"``, a character nobody typed."""
    utf8(text)
    key, sep, raw = text.strip().partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"an option is key=value, not {quoted(text)}")
    try:
        value: Any = json.loads(raw)
    except (ValueError, RecursionError):
        value = raw
    return key, value


class OptionAction(argparse.Action):
    """``--option KEY=VALUE``, repeatable (its ``type``: :func:`parse_option`): the
    options in the order given, each key once. A key given twice is a bad argument —
    kept as the last value, ``-o draw=3 -o draw=1`` dealt (or asked a server for) a
    game the first value did not describe, and nothing said so."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        key, value = values
        given: list[tuple[str, Any]] = list(getattr(namespace, self.dest, None) or [])
        if any(known == key for known, _ in given):
            raise argparse.ArgumentError(self, f"{key} is given twice: give each option once")
        setattr(namespace, self.dest, [*given, (key, value)])


#: The longest position file (or standard input) read, in characters: a position is
#: under 10,000 even indented 16 deep (Double Yukon); ``/dev/zero`` or a huge file
#: given by mistake was read to its end, taking all the memory there was.
MAX_POSITION_CHARS: Final = 1_000_000


#: What some editors (Windows' Notepad) write before UTF-8 text; JSON has no room for
#: it, and a position saved so was refused: "Unexpected UTF-8 BOM".
BYTE_ORDER_MARK: Final = "\ufeff"


#: The widest ``--indent`` (spaces a level) the position JSON is printed with.
MAX_INDENT: Final = 16


#: The deepest ``perft``. The count grows exponentially with the depth: measured on
#: dealt positions (2 cores, shared), Yukon's (seed 42) takes 5 s at depth 8 and 41 s at
#: 9, about 7 times more each depth (so hours at 12); Klondike's, the narrowest dealt
#: game (seed 1, draw 1), 14 s at 14 and 70 s at 15, about 2.5-5 times more each depth
#: — a few minutes at 16. No dealt position of any variant is counted much deeper in a
#: sitting, while a move generator is checked at depth 8 at most (tests/data/perft.json).
#: It was 100: ``perft pos.json 99`` was taken and ran for ever.
MAX_PERFT_DEPTH: Final = 16
#: Why a deeper count is refused, said with the refusal.
PERFT_GROWS: Final = (
    "perft grows exponentially (a dealt Yukon takes 41 s at depth 9, 7 times more each depth)"
)


#: ``play`` without a move. Most often the shell took it: unquoted, ``2:1>4`` is the
#: argument ``2:1`` and a redirection to the file 4, ``7>F`` a redirection alone (it
#: said only "the following arguments are required: MOVE", and a file F appeared).
NO_MOVE: Final = (
    "give at least one MOVE; quote a move with > in it ('2:1>4', '7>F'): unquoted, "
    "the shell reads >4 as writing to a file named 4"
)


#: Argument types (solrace.argtypes: the same words as every other command line).
_seed = whole()
#: The budget's bound is the solver's (solrace.solver_budget.MAX_BUDGET, the bench's
#: too): a huge one searched for ever, the solver's memory growing with every node.
_budget = whole(1, MAX_BUDGET, unit=" nodes")
_whole_depth = whole()


def _depth(text: str) -> int:
    """perft's depth: 0 to :data:`MAX_PERFT_DEPTH`, and past it the reason, so that a
    newcomer who tries 99 learns why it is refused."""
    depth = _whole_depth(text)
    if not 0 <= depth <= MAX_PERFT_DEPTH:
        why = "" if depth < 0 else f": {PERFT_GROWS}"
        raise BadNumber(f"must be 0 to {MAX_PERFT_DEPTH}, got {quoted_number(depth)}{why}")
    return depth


_indent = whole(0, MAX_INDENT, unit=" spaces")


_POSITION_HELP: Final = "position JSON file, or - for standard input"
_BUDGET_HELP: Final = (
    "positions to search at most before answering unknown (default: the solver's "
    f"DEFAULT_BUDGET, docs/solver.md; at most {MAX_BUDGET:,}, as memory grows with it)"
)
#: What ``solve`` and ``hint`` assume, in their --help: a position names every card, and
#: one copied from a player's view has made-up face-down cards, on which the "winning"
#: line depends — neither help said so (only the command list's "full information").
_FULL_INFORMATION: Final = (
    "The solver plays with full information: the face-down and stock cards as the "
    "position names them, which a player does not see; a line found for made-up ones "
    "wins only if they are right."
)
#: What ``solve`` and ``hint`` add when the budget ran out before an answer (status 4).
_MORE_BUDGET: Final = "a larger --budget searches further"

EXIT_FAILED = 1
EXIT_UNWINNABLE = 3
EXIT_UNKNOWN = 4


class InputUnreadable(Exception):
    """The position's file, or standard input, cannot be read (exit 1); the message
    names it (its path, or "standard input") and gives the system's reason."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"cannot read {name}: {why}")


#: What a command takes after its position, in the example its terminal hint gives (a
#: review: ``perft -`` alone is a usage error).
_REST_OF_COMMAND: Final = {"perft": " 3", "play": " MOVE"}


def _read_board(source: str, command: str) -> Board:
    # an empty name ('') said "cannot read : No such file or directory"
    name = "standard input" if source == "-" else source or "'' (an empty file name)"
    from_terminal = False
    try:
        if source == "-":
            if sys.stdin is None:  # started with standard input closed (`<&-`)
                raise InputUnreadable(name, "it is closed")
            from_terminal = sys.stdin.isatty()
            if from_terminal:
                # typed without a pipe (`solrace-rules moves -`) it sat silent, waiting
                # for a position on the terminal: it looked hung until Ctrl-C
                rest = _REST_OF_COMMAND.get(command, "")
                print(
                    "solrace-rules: reading the position from standard input, this "
                    "terminal: paste its JSON, then Ctrl-D on a line of its own (or pipe one "
                    f"in: solrace-rules deal yukon 42 | solrace-rules {command} -{rest})",
                    file=sys.stderr,
                    flush=True,
                )
            # read as the locale says, which may keep bytes that are not UTF-8 as
            # surrogates (a file's are refused as it is opened): refused alike
            text = utf8(sys.stdin.read(MAX_POSITION_CHARS + 1))
        else:
            with open(source, encoding="utf-8") as handle:
                text = handle.read(MAX_POSITION_CHARS + 1)
    except (UnicodeDecodeError, BadText):  # e.g. a binary file given by mistake
        raise InvalidPositionError(f"{name} is not a position: not UTF-8 text") from None
    except OSError as exc:  # opening or reading: a read error, whatever its errno (EIO…)
        # opening names the file (reading does not): as file_name says it, which cuts
        # one the system found too long (ENAMETOOLONG); an empty name keeps its words
        if exc.filename:
            name = file_name(exc)
        raise InputUnreadable(name, exc.strerror or str(exc)) from None
    text = text.removeprefix(BYTE_ORDER_MARK)
    if not text.strip():
        # the parser's "not JSON: Expecting value: line 1 column 1 (char 0)" said
        # nothing of the usual cause: a pipe's first command failed (a forgotten seed)
        raise InvalidPositionError(
            f"{name} is empty: no position"
            + (
                " (did the command before the | fail?)"
                if source == "-" and not from_terminal
                else ""
            )
        )
    if len(text) > MAX_POSITION_CHARS:
        raise InvalidPositionError(
            f"{name} is not a position: longer than {MAX_POSITION_CHARS:,} characters"
        )
    try:
        return load_position(text)
    except InvalidPositionError as exc:  # its words, and where they come from
        raise InvalidPositionError(f"{name}: {exc}") from None


#: The name under which each command's parser notes itself in the arguments it parses
#: (:func:`parse` says an argument too many as that command's mistake).
COMMAND_PARSER: Final = "command_parser"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, or exit 2 with one line. An argument no command takes is said as
    its command's mistake, ``solrace-rules solve: unrecognized arguments: extra (see
    solrace-rules solve --help)``, as the module promises: argparse leaves extras to
    the top parser, which named neither the command nor the help that has the answer."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        command: argparse.ArgumentParser = getattr(args, COMMAND_PARSER, parser)
        command.error(f"unrecognized arguments: {as_typed(extras)}")
    return args


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="solrace-rules",
        description="The solrace rules engine on the command line. Exit status: 0 done, "
        "1 an illegal move or impossible position (or a file it cannot read, an output it "
        "cannot write), 2 a usage or "
        "notation error (solve and hint: see their --help), 130 interrupted (Ctrl-C), "
        "141 the reader of its output gone (| head).",
    )
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("deal", help="print the position JSON of a deal")
    p.add_argument("variant", help=", ".join(VARIANTS) + " (docs/rules.md)")
    # The seed's range is the engine's to check (deal's RulesError, status 2 too).
    p.add_argument("seed", type=_seed, help="0 ≤ seed < 2**64 (decimal or 0x…)")
    p.add_argument(
        "--option",
        "-o",
        action=OptionAction,
        type=parse_option,
        default=[],
        metavar="K=V",
        help="a variant option, e.g. draw=3, undo=false (repeatable, each key once; every "
        "variant's options and defaults: docs/rules.md)",
    )
    p.add_argument("--indent", type=_indent, default=None, help=f"0-{MAX_INDENT} spaces")
    p = sub.add_parser("moves", help="print the legal moves, one a line, sorted")
    p.add_argument("position", help=_POSITION_HELP)
    p = sub.add_parser("perft", help="print perft(DEPTH)")
    p.add_argument("position", help=_POSITION_HELP)
    p.add_argument("depth", type=_depth, help=f"0-{MAX_PERFT_DEPTH}")
    p.add_argument("--divide", action="store_true", help="print the count per first move")
    p = sub.add_parser(
        "play",
        help="print the position after the moves, or the error",
        usage="%(prog)s [-h] [--indent INDENT] position MOVE [MOVE ...]",
    )
    p.add_argument("position", help=_POSITION_HELP)
    # at least one, checked by main(), which then says why there may be none
    p.add_argument("moves", nargs="*", metavar="MOVE", help='moves in notation, or "undo"')
    p.add_argument("--indent", type=_indent, default=None, help=f"0-{MAX_INDENT} spaces")
    solve_epilog = (
        "Exit status: 0 won (or already won), 3 unwinnable (proved), 4 unknown (budget "
        "spent), 1 impossible position or unreadable file, 2 usage error, 130 interrupted, "
        "141 reader gone (| head)."
    )
    p = sub.add_parser(
        "solve",
        help="solve the position (full information): outcome, then the winning line",
        description="Print the outcome on the first line: 'won moves=M nodes=N "
        "difficulty=D', 'unwinnable nodes=N' or 'unknown nodes=N' (M moves in the line, "
        "N positions searched, D easy, medium, hard or very hard); then, when won, the "
        "winning line, one move a line in notation. " + _FULL_INFORMATION,
        epilog=solve_epilog,
    )
    p.add_argument("position", help=_POSITION_HELP)
    p.add_argument("--budget", type=_budget, default=None, metavar="N", help=_BUDGET_HELP)
    p = sub.add_parser(
        "hint",
        help="print the next move of a winning line",
        description="Print the first move of a winning line, or say on standard error "
        "that none is known. " + _FULL_INFORMATION,
        epilog=solve_epilog,
    )
    p.add_argument("position", help=_POSITION_HELP)
    p.add_argument("--budget", type=_budget, default=None, metavar="N", help=_BUDGET_HELP)
    for command in sub.choices.values():  # for parse(): whose mistake an extra is
        command.set_defaults(**{COMMAND_PARSER: command})
    return parser


def _solve(args: argparse.Namespace, out: Any) -> int:
    """``solve`` and ``hint``; the solver is imported here so the other commands do not
    pay for it."""
    from solrace.solver import DEFAULT_BUDGET, Outcome, solve_board

    board = _read_board(args.position, args.command)
    budget = args.budget if args.budget is not None else DEFAULT_BUDGET
    result = solve_board(board, budget)
    if args.command == "solve":
        if result.outcome is Outcome.WON:
            out.write(
                f"won moves={len(result.moves)} nodes={result.nodes}"
                f" difficulty={result.difficulty}\n"
            )
            for move in result.moves:
                out.write(move + "\n")
            return 0
        out.write(f"{result.outcome.value} nodes={result.nodes}\n")
        if result.outcome is Outcome.UNWINNABLE:
            return EXIT_UNWINNABLE
        # the line above is for programs; a person was told nothing of --budget
        print(
            f"solrace-rules: no answer within the budget of {budget} nodes: {_MORE_BUDGET}",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    if result.outcome is Outcome.WON:
        if result.moves:
            out.write(result.moves[0] + "\n")
        else:
            print("solrace-rules: the game is already won", file=sys.stderr)
        return 0
    if result.outcome is Outcome.UNWINNABLE:
        print("solrace-rules: no winning move: the position is unwinnable", file=sys.stderr)
        return EXIT_UNWINNABLE
    print(
        f"solrace-rules: no winning move known (budget of {budget} nodes spent): {_MORE_BUDGET}",
        file=sys.stderr,
    )
    return EXIT_UNKNOWN


def main(argv: Sequence[str] | None = None) -> int:
    degrade_gracefully()  # before a word is said, --help included
    args = parse(argv)
    out = sys.stdout
    if out is None:  # started with standard output closed
        return output_unusable("solrace-rules", "standard output is closed", EXIT_FAILED)
    status = 0
    try:
        if args.command == "deal":
            try:
                board = deal(args.variant, args.seed, dict(args.option))
            except RulesError as exc:  # the variant, seed or an option as given
                # arguments, so said as argparse says a bad one ("solrace-rules: a seed
                # is…" for -1, "solrace-rules deal: argument seed: …" for 0xZZ)
                print(usage_line("solrace-rules deal", str(exc)), file=sys.stderr)
                return EXIT_USAGE
            out.write(dump_position(board, args.indent) + "\n")
        elif args.command == "moves":
            board = _read_board(args.position, args.command)
            for name in sorted(str(m) for m in board.legal_moves()):
                out.write(name + "\n")
        elif args.command == "perft":
            if args.divide and args.depth < 1:
                print(usage_line("solrace-rules perft", f"--{DIVIDE_DEPTH}"), file=sys.stderr)
                return EXIT_USAGE
            board = _read_board(args.position, args.command)
            if args.divide:
                for name, count in sorted(divide(board, args.depth).items()):
                    out.write(f"{name} {count}\n")
            out.write(f"{perft(board, args.depth)}\n")
        elif args.command == "play":
            if not args.moves:
                print(usage_line("solrace-rules play", NO_MOVE), file=sys.stderr)
                return EXIT_USAGE
            board = _read_board(args.position, args.command)
            for entry in args.moves:
                apply_entry(board, entry)
            out.write(dump_position(board, args.indent) + "\n")
        elif args.command in ("solve", "hint"):
            status = _solve(args, out)
        out.flush()  # a full disk fails here, inside the try, not at exit
    except NotationError as exc:  # a MOVE as typed: a usage mistake, named by its command
        print(f"solrace-rules {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except IllegalMoveError as exc:
        print(f"solrace-rules: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except InputUnreadable as exc:  # its name and why, no errno
        print(f"solrace-rules: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        return reader_gone()
    except OSError as exc:  # writing the output (reading raises InputUnreadable)
        return output_unusable("solrace-rules", exc.strerror or str(exc), EXIT_FAILED)
    except KeyboardInterrupt:  # Ctrl-C: a long perft, solve or hint
        print("solrace-rules: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RulesError as exc:
        print(f"solrace-rules: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
