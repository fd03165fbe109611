"""``solrace-rules``: the engine on the command line, for tools, tests and bug reports.

    solrace-rules deal yukon 42 | solrace-rules moves -
    solrace-rules perft position.json 3
    solrace-rules play position.json 2:1>4 2>F

Exit status: 0 on success, 1 for an illegal move or impossible position, 2 for a
usage or notation error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .board import Board
from .deal import deal
from .errors import IllegalMoveError, NotationError, RulesError
from .log import apply_entry
from .perft import divide, perft
from .position import dump_position, load_position


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` as given on a command line (the rules CLI's and the client's
    ``--option``): the value is read as JSON when it can be (true, 3, null), else it is
    a string (``scoring=vegas``)."""
    key, sep, raw = text.strip().partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"an option is key=value, not {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key, value


def _seed(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _read_board(source: str) -> Board:
    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as handle:
            text = handle.read()
    return load_position(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="solrace-rules", description="The solrace rules engine on the command line."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("deal", help="print the position JSON of a deal")
    p.add_argument("variant")
    p.add_argument("seed", type=_seed, help="0 ≤ seed < 2**64 (decimal or 0x…)")
    p.add_argument("--option", "-o", action="append", type=parse_option, default=[], metavar="K=V")
    p.add_argument("--indent", type=int, default=None)
    p = sub.add_parser("moves", help="print the legal moves, one a line, sorted")
    p.add_argument("position", help="position JSON file, or - for standard input")
    p = sub.add_parser("perft", help="print perft(DEPTH)")
    p.add_argument("position")
    p.add_argument("depth", type=int)
    p.add_argument("--divide", action="store_true", help="print the count per first move")
    p = sub.add_parser("play", help="print the position after the moves, or the error")
    p.add_argument("position")
    p.add_argument("moves", nargs="+", metavar="MOVE", help='moves in notation, or "undo"')
    p.add_argument("--indent", type=int, default=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = sys.stdout
    try:
        if args.command == "deal":
            board = deal(args.variant, args.seed, dict(args.option))
            out.write(dump_position(board, args.indent) + "\n")
        elif args.command == "moves":
            board = _read_board(args.position)
            for name in sorted(str(m) for m in board.legal_moves()):
                out.write(name + "\n")
        elif args.command == "perft":
            board = _read_board(args.position)
            if args.divide:
                for name, count in sorted(divide(board, args.depth).items()):
                    out.write(f"{name} {count}\n")
            out.write(f"{perft(board, args.depth)}\n")
        elif args.command == "play":
            board = _read_board(args.position)
            for entry in args.moves:
                apply_entry(board, entry)
            out.write(dump_position(board, args.indent) + "\n")
    except NotationError as exc:
        print(f"solrace-rules: {exc}", file=sys.stderr)
        return 2
    except IllegalMoveError as exc:
        print(f"solrace-rules: {exc}", file=sys.stderr)
        return 1
    except (RulesError, OSError) as exc:
        print(f"solrace-rules: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
