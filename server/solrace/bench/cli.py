"""``python -m solrace.bench rules|store|solver|server|core --json``

Exit status: 0 the benchmark ran (its JSON on standard output); 1 it could not run to
the end (Redis does not answer, or failed during the run, or the run could not go on: a
child or the rooms did not start, the solver's ``--log`` could not be written to,
bench/failed.py), said in one line; 2 a bad argument,
said in one line before anything runs — a number out of its range (not finite,
negative, zero where one is needed, a size past its bound: bench/limits.py,
solver_budget.py), a
malformed Redis URL or one Redis refuses or answers otherwise (a cluster URL for a
standalone Redis, TLS for a plain-text one), a ``--log`` that cannot be opened, an
unknown preset, a loop not installed; 130 interrupted (Ctrl-C), 143 terminated
(SIGTERM), each once the run has stopped what it started and deleted its keys
(bench/stopping.py, bench/runkeys.py: a line says so if the keys could not be, and
names their prefix); 141, quietly, when the reader of its output went away (``| head``);
1 too, in one line, when its JSON cannot be written (a full disk; standard output
closed, said before the run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from solrace.argtypes import (
    EXIT_USAGE,
    OUTPUT_ERRNOS,
    OneLineParser,
    output_unusable,
    reader_gone,
    real,
    whole,
)
from solrace.quoting import path_shown, quoted
from solrace.solver_budget import MAX_BUDGET

from . import PROG, stopping
from .failed import RunFailed
from .limits import (
    MAX_DEALS,
    MAX_MOVES,
    MAX_RACERS,
    MAX_RATE,
    MAX_ROOMS,
    MAX_SECONDS,
    MAX_WALKS,
    MAX_WARMUP_S,
    MAX_WORKERS,
)

EXIT_FAILED = 1
#: The suites that write to Redis (``--redis-url``), under their run's key prefix.
REDIS_SUITES: Final = ("store", "server", "core")
#: The suites that run an event loop of ``--loop``'s (or ``$SOLRACE_LOOP``'s) choice.
LOOP_SUITES: Final = ("server", "core")
#: The suites each option is for, as its help says (--json is every suite's): given to
#: another, it was ignored without a word (``server --rooms 3`` ran 200 racers).
OPTION_SUITES: Final[dict[str, tuple[str, ...]]] = {
    "seconds": ("rules", "server"),
    "redis_url": REDIS_SUITES,
    **dict.fromkeys(
        (
            "variant",
            "deals",
            "budget",
            "workers",
            "start",
            "certify",
            "certify_budget",
            "certify_node",
            "log",
        ),
        ("solver",),
    ),
    **dict.fromkeys(("racers", "rate", "warmup", "find_max", "aligned"), ("server",)),
    "loop": LOOP_SUITES,
    **dict.fromkeys(("rooms", "moves", "callgrind"), ("core",)),
}
#: Seeds are 0 ≤ seed < 2**64 (docs/deals.md): the solver's consecutive seeds stay below.
SEED_LIMIT: Final = 2**64


def redis_url(text: str) -> str:
    """A Redis URL as ``solrace-server --redis-url`` takes it (its check, no I/O)."""
    from solrace.net.main import check_redis_url

    try:
        return check_redis_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Failed(Exception):
    """The benchmark cannot run, or ran and failed: one line, and the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _Parser(OneLineParser):
    """The benchmark's parser, which notes on the namespace it returns the options
    typed (``given``: their dests, abbreviations included, an option given its default
    value too), for :func:`_check` to refuse another suite's. Noted as the one parse
    takes each (argparse reads every option typed through ``_get_values``): they were
    found by parsing the command line a second time onto a namespace of markers."""

    def _parsing(self) -> None:
        self._typed: set[str] = set()

    def _parsed(self, parsed: argparse.Namespace) -> None:
        parsed.given = self._typed & OPTION_SUITES.keys()

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        self._typed.add(action.dest)
        return super()._get_values(action, arg_strings)


def build_parser() -> argparse.ArgumentParser:
    from solrace.net.main import LOOP, LOOPS
    from solrace.solver import SERVER_BUDGET

    from .solver import DEFAULT_DEALS, DEFAULT_NODE_WALKS, DEFAULT_PRESETS, DEFAULT_WALKS

    budget = whole(1, MAX_BUDGET)
    parser = _Parser(
        prog=PROG,
        description="Run one benchmark and print its JSON object. Exit status: 0 done, "
        "1 it could not run to the end (Redis does not answer or failed, or the run "
        "could not go on: a child or the rooms did not start) or its JSON cannot be "
        "written (a full disk, standard output closed), 2 a bad argument, "
        "130 interrupted (Ctrl-C), 143 terminated (SIGTERM): the run's processes stopped "
        "and its keys deleted first; 141 the reader of its output went away (| head). "
        "solver: with no sizes given, a quick look at every measure at the server's node "
        "budget (under a minute on a loaded 2-core machine, some 20 s of CPU); a study "
        "names its sizes (docs/winnability.md).",
    )
    parser.add_argument("suite", choices=["rules", "store", "solver", "server", "core"])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--seconds",
        type=real(0, MAX_SECONDS, above=True),
        default=None,
        help="rules: time budget (default 4); server: measured window (default 20); "
        f"at most {MAX_SECONDS:g}",
    )
    parser.add_argument(
        "--redis-url",
        type=redis_url,
        default="redis://127.0.0.1:6379/0",
        # the default is said: on a shared Redis, db 0 is usually someone else's
        help="store, server, core: the Redis to run on (default %(default)s)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=None,
        help="solver: a preset (repeatable): yukon, russian, alaska, australian, double_yukon,"
        " klondike, klondike-draw3, klondike-draw3-solvitaire, klondike-draw3-thoughtful"
        f" (default {', '.join(DEFAULT_PRESETS)})",
    )
    parser.add_argument(
        "--deals",
        type=whole(0, MAX_DEALS),
        default=DEFAULT_DEALS,
        help=f"solver: deals per preset (default %(default)s, at most {MAX_DEALS:,})",
    )
    parser.add_argument(
        "--budget",
        type=budget,
        default=SERVER_BUDGET,
        help=f"solver: node budget (default {SERVER_BUDGET:,}, the server's; at most "
        f"{MAX_BUDGET:,})",
    )
    parser.add_argument(
        "--workers",
        type=whole(1, MAX_WORKERS),
        default=None,
        help=f"solver: processes (default: this machine's cores, at most {MAX_WORKERS})",
    )
    parser.add_argument(
        "--start", type=whole(0), default=0, help="solver: first seed (default %(default)s)"
    )
    parser.add_argument(
        "--certify",
        type=whole(0, MAX_WALKS),
        default=DEFAULT_WALKS,
        help=f"solver: certify walks (default %(default)s, at most {MAX_WALKS:,})",
    )
    parser.add_argument(
        "--certify-budget",
        type=budget,
        default=None,
        help="solver: node budget of a certify walk's deals (default: --budget's; for "
        f"--certify-node the server's, {SERVER_BUDGET:,}; at most {MAX_BUDGET:,})",
    )
    parser.add_argument(
        "--certify-node",
        type=whole(0, MAX_WALKS),
        default=DEFAULT_NODE_WALKS,
        help="solver: certify walks through the node's own code and workers, per setting "
        f"(default %(default)s, at most {MAX_WALKS:,})",
    )
    parser.add_argument("--log", default=None, help="solver: progress log file")
    parser.add_argument(
        "--racers",
        type=whole(2, MAX_RACERS),
        default=200,
        help=f"server: racers (rooms of 4; default %(default)s, 2 to {MAX_RACERS:,})",
    )
    parser.add_argument(
        "--rate",
        type=real(0, MAX_RATE, above=True),
        default=5.0,
        help=f"server: moves/s per racer (default %(default)g, at most {MAX_RATE:g})",
    )
    parser.add_argument(
        "--warmup",
        type=real(0, MAX_WARMUP_S),
        default=3.0,
        help=f"server: seconds before measuring (default %(default)g, at most {MAX_WARMUP_S:g})",
    )
    parser.add_argument(
        "--find-max", action="store_true", help="server: step the load up for max_moves_per_s"
    )
    parser.add_argument(
        "--aligned",
        action="store_true",
        help="server: every racer sends at the same instants (bursts), not at a random phase",
    )
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default=None,
        help="server: event loop of the echo, the node and the load (auto: uvloop if installed);"
        f" core: of the node (${LOOP.variable} when not given, as for solrace-server; default"
        f" {LOOP.default})",
    )
    parser.add_argument(
        "--rooms",
        type=whole(1, MAX_ROOMS),
        default=None,
        help=f"core: rooms of 4 racers (default 10, at most {MAX_ROOMS:,})",
    )
    parser.add_argument(
        "--moves",
        type=whole(1, MAX_MOVES),
        default=None,
        help=f"core: moves per racer (default 40, at most {MAX_MOVES:,})",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="core: count instructions per move under valgrind's callgrind",
    )
    return parser


def _in_words(suites: Sequence[str]) -> str:
    return suites[0] if len(suites) == 1 else f"{', '.join(suites[:-1])} and {suites[-1]}"


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What one argument alone cannot say (parser.error: one line, status 2): an
    option typed (``args.given``: :class:`_Parser`) is refused unless it is the suite's."""
    from solrace.net.main import LOOP, UsageError

    for dest in sorted(args.given, key=list(OPTION_SUITES).index):
        suites = OPTION_SUITES[dest]
        if args.suite not in suites:
            flag = "--" + dest.replace("_", "-")
            parser.error(f"{flag} is an option of {_in_words(suites)}, not of {args.suite}")
    if args.suite in LOOP_SUITES:
        # --loop, else $SOLRACE_LOOP, else auto, resolved: as solrace-server reads it,
        # with its words for a bad one (the variable was ignored, even 'bogus')
        try:
            args.loop = LOOP.value(args.loop, os.environ)
        except UsageError as exc:
            parser.error(str(exc))
    if args.suite == "server":
        from .server import ROOM_SIZE

        if args.racers > ROOM_SIZE and args.racers % ROOM_SIZE:
            parser.error(
                f"--racers: more than {ROOM_SIZE} racers fill rooms of {ROOM_SIZE}: "
                f"{args.racers} is not a multiple of {ROOM_SIZE}"
            )
    if args.suite == "core":
        from .core import SHORT_MOVES, callgrind_available

        if args.callgrind and not callgrind_available():
            parser.error("--callgrind: valgrind is not installed here (apt-get install valgrind)")
        if args.callgrind and args.moves is not None and args.moves <= SHORT_MOVES:
            parser.error(f"--moves: must be above {SHORT_MOVES} with --callgrind")
    if args.suite == "solver":
        from .solver import DEFAULT_PRESETS, PRESETS

        args.variant = args.variant or list(DEFAULT_PRESETS)
        unknown = [p for p in args.variant if p not in PRESETS]
        if unknown:
            # quoted, and the presets named: '' said "unknown preset(s): " and nothing
            named = ", ".join(quoted(p) for p in unknown)  # cut, its bytes as typed
            parser.error(f"--variant: unknown preset(s): {named} (presets: {', '.join(PRESETS)})")
        if args.start + args.deals > SEED_LIMIT:
            parser.error(
                f"--start: the last seed, --start + --deals - 1 = {args.start + args.deals - 1}"
                ", is not below 2**64"
            )


async def _check_redis(url: str) -> None:
    """Raise :class:`_Failed` unless Redis at ``url`` answers: 2 when it answers but
    refuses the URL (or is of another kind, :mod:`solrace.store.probe`), 1 when it does
    not answer."""
    from solrace.store import Store, StoreError
    from solrace.store.probe import wrong_kind

    try:
        store = await Store.connect(url, prefix="solrace-bench:")
    except ValueError as exc:  # redis-py's URL parser
        raise _Failed(f"--redis-url: {exc}", EXIT_USAGE) from None
    try:
        answers = await store.ping()
    except StoreError as exc:
        raise _Failed(f"--redis-url: Redis refused it: {exc}", EXIT_USAGE) from None
    finally:
        await store.close()
    if answers:
        return
    wrong = await wrong_kind(url)
    if wrong is not None:
        raise _Failed(f"--redis-url: {wrong.node} {wrong.says}", EXIT_USAGE)
    raise _Failed(f"--redis-url: Redis does not answer at {_where(url)}", EXIT_FAILED)


def _where(url: str) -> str:
    """host:port (or the socket's path) of a Redis URL, for a message: no password."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.path if parts.scheme == "unix" else parts.netloc.rpartition("@")[2]


@dataclass
class _Keys:
    """Where the run keeps its Redis keys (bench/runkeys.py), once it may write some."""

    url: str = ""
    prefix: str = ""


class _LogFile:
    """The solver's ``--log``, appended to. A write that fails — a disk that fills
    during a long study — stops the run as one that cannot go on (one line, status 1);
    it was an OSError traceback. Every line is flushed as it is written, so closing has
    nothing left to write but what a failed write left behind."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115  (closed by close())

    def _failed(self, exc: OSError) -> RunFailed:
        return RunFailed(f"--log: cannot write to {path_shown(self.path)}: {exc.strerror or exc}")

    def write(self, text: str) -> int:
        try:
            return self._file.write(text)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        with contextlib.suppress(OSError):  # what a failed write left, said already
            self._file.close()


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, keys: _Keys) -> dict[str, Any]:
    import asyncio

    from solrace.store import StoreError

    if args.suite in REDIS_SUITES:
        from .runkeys import BENCH_FAMILY, CORE_FAMILY, run_prefix

        asyncio.run(_check_redis(args.redis_url))
        family = CORE_FAMILY if args.suite == "core" else BENCH_FAMILY
        keys.url, keys.prefix = args.redis_url, run_prefix(family)
    prefix = keys.prefix
    try:
        if args.suite == "solver":
            from .solver import run as run_solver

            try:
                log = _LogFile(args.log) if args.log else None
            except OSError as exc:
                parser.error(f"--log: cannot open {path_shown(args.log)}: {exc.strerror or exc}")
            try:
                return run_solver(
                    args.variant,
                    deals=args.deals,
                    budget=args.budget,
                    workers=args.workers,
                    start=args.start,
                    certify=args.certify,
                    certify_budget=args.certify_budget,
                    log=log,
                    node_walks=args.certify_node,
                )
            finally:
                if log is not None:
                    log.close()
        if args.suite == "rules":
            from .rules import run

            return run(4.0 if args.seconds is None else args.seconds)
        if args.suite == "server":
            from .server import run as run_server

            return run_server(
                args.redis_url,
                racers=args.racers,
                rate=args.rate,
                seconds=20.0 if args.seconds is None else args.seconds,
                warmup=args.warmup,
                find_max=args.find_max,
                aligned=args.aligned,
                loop=args.loop,
                prefix=prefix,
            )
        if args.suite == "core":
            from .core import DEFAULT_MOVES, DEFAULT_ROOMS
            from .core import run as run_core

            return run_core(
                args.redis_url,
                rooms=DEFAULT_ROOMS if args.rooms is None else args.rooms,
                moves=DEFAULT_MOVES if args.moves is None else args.moves,
                callgrind=args.callgrind,
                loop=args.loop,
                prefix=prefix,
            )
        from .store import run as run_store

        return run_store(args.redis_url, prefix=prefix)
    except StoreError as exc:  # Redis went away (or failed) during the run
        raise _Failed(f"Redis failed during the run: {exc}", EXIT_FAILED) from None
    except RunFailed as exc:  # the run could not go on (bench/failed.py)
        cause, why = exc.__cause__, str(exc)
        if cause is not None:  # e.g. a room's TimeoutError, whose text is empty
            why += f" ({type(cause).__name__}: {cause})" if str(cause) else f" ({cause!r})"
        raise _Failed(f"the run could not go on: {why}", EXIT_FAILED) from None


def _clean_up(children: stopping.Children, keys: _Keys) -> str | None:
    """What the run leaves, however it ended: the processes it started that are still
    there stopped, then its keys deleted — with SIGINT and SIGTERM ignored meanwhile
    (bench/stopping.py). After a run that ended by itself there is nothing left to
    stop or delete. Why the keys could not be deleted, if they could not. (Imports
    inside: a Ctrl-C while a module loads is ignored here.)"""
    with stopping.shielded():
        children.stop()
        if not keys.prefix:
            return None
        import asyncio

        from solrace.store import StoreError

        from .runkeys import delete_prefix

        try:
            asyncio.run(delete_prefix(keys.url, keys.prefix))
        except (StoreError, OSError) as exc:
            return str(exc) or type(exc).__name__
    return None


def main(argv: Sequence[str] | None = None) -> int:
    with stopping.sigterm_as_interrupt() as stop:
        children, keys = stopping.Children(), _Keys()
        result: dict[str, Any] | None = None
        status, said = 0, ""
        try:
            try:
                parser = build_parser()
                args = parser.parse_args(argv)
                _check(parser, args)
                if sys.stdout is None:  # started with it closed (>&-): the JSON would be lost
                    return output_unusable(PROG, "standard output is closed", EXIT_FAILED)
                result = _run(parser, args, keys)
            except _Failed as exc:
                status, said = exc.status, str(exc)
            except KeyboardInterrupt:
                status, said = stop.status, stop.words
        finally:
            unclean = _clean_up(children, keys)
    if unclean is not None:
        left = f"its keys could not be deleted ({unclean}): delete those under {keys.prefix}"
        status, said = status or EXIT_FAILED, f"{said}; {left}" if said else left
    if result is not None:
        result["python"] = platform.python_version()
        result["machine"] = platform.machine()
        try:
            print(json.dumps(result) if args.json else json.dumps(result, indent=2), flush=True)
        except BrokenPipeError:  # `| head`: quietly, 141, as every command (a traceback)
            status = reader_gone()
        except OSError as exc:  # a full disk (> /dev/full): one line (a traceback)
            if exc.errno not in OUTPUT_ERRNOS:
                raise
            status = output_unusable(PROG, exc.strerror or str(exc), EXIT_FAILED)
    if said:
        print(f"{PROG}: {said}", file=sys.stderr)
    return status
