"""``solrace``: the terminal client's command line.

Racing and watching hand over to the Textual UI (:mod:`solrace_client.tui`), which is
imported only by the commands that need it, so ``rooms``, ``bot``, ``replay``,
``verify`` and ``races`` keep working on a machine (or in a build) where the UI cannot
start. The server comes from ``--server``, else ``SOLRACE_SERVER``, else
ws://127.0.0.1:8765.

Exit codes: 0 fine; 1 the command ran and the answer is "no" (verification failed,
the bot could not finish); 2 could not do it at all (server unreachable or refusing,
unknown race, bad arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from solrace.rules import VARIANTS, RulesError, new_board
from solrace.rules.cli import parse_option
from solrace.rules.options import options_to_json
from websockets.exceptions import InvalidHandshake, InvalidURI

from . import config
from .connection import DEFAULT_SERVER, RaceClient, ServerError

ENV_SERVER = "SOLRACE_SERVER"


def _out() -> Console:
    return Console(highlight=False)


def _err() -> Console:
    return Console(stderr=True, highlight=False)


def _fail(message: str, code: int = 2) -> int:
    _err().print(Text(f"solrace: {message}", style="red"))
    return code


def _server(args: argparse.Namespace) -> str:
    return str(getattr(args, "server", None) or os.environ.get(ENV_SERVER) or DEFAULT_SERVER)


def _name(args: argparse.Namespace) -> str:
    """``--name``, remembered for next time; else the remembered one."""
    if args.name:
        config.save_name(args.name)
        return str(args.name)
    return config.default_name()


def _duration(text: str) -> int:
    """Seconds, as ``90``, ``90s`` or ``15m``."""
    try:
        if text.endswith("m"):
            return int(text[:-1]) * 60
        return int(text.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (90, 90s, 15m)") from None


def _connect_errors() -> tuple[type[BaseException], ...]:
    return (OSError, InvalidHandshake, InvalidURI)


# ------------------------------------------------------------------ rooms
def _fmt_seconds(seconds: Any) -> str:
    if not isinstance(seconds, int) or seconds <= 0:
        return "—"
    minutes, secs = divmod(seconds, 60)
    if not minutes:
        return f"{secs}s"
    return f"{minutes}m" if not secs else f"{minutes}m{secs:02d}s"


def _non_default(variant: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options that differ from the variant's defaults (rooms list every option,
    resolved; the defaults are noise in a table)."""
    try:
        board = new_board(variant)
    except RulesError:
        return dict(options)
    defaults = options_to_json(board.options, board.allowed_options)
    return {k: v for k, v in options.items() if defaults.get(k, object()) != v}


def rooms_table(rooms: Sequence[Mapping[str, Any]]) -> Table:
    """The ``rooms`` reply as a table (also what a UI could show)."""
    table = Table(
        title="solrace rooms",
        title_justify="left",
        caption="limit: race time limit · watch delay: how far spectators lag behind",
        caption_justify="left",
    )
    table.add_column("code", style="bold cyan", no_wrap=True)
    table.add_column("variant", no_wrap=True)
    table.add_column("phase", no_wrap=True)
    table.add_column("racers", justify="right", no_wrap=True)
    table.add_column("host", min_width=6)
    table.add_column("limit", justify="right", no_wrap=True)
    table.add_column("watch delay", justify="right", no_wrap=True)
    for room in rooms:
        variant = str(room.get("variant"))
        options = _non_default(variant, room.get("options") or {})
        if options:
            variant += " " + " ".join(f"{k}={json.dumps(v)}" for k, v in options.items())
        if room.get("quick"):
            variant += " (quick)"
        phase = str(room.get("phase"))
        table.add_row(
            str(room.get("code")),
            variant,
            Text(phase, style="green" if phase == "lobby" else "yellow"),
            f"{room.get('racers')}/{room.get('max_racers')}",
            str(room.get("host") or "—"),
            _fmt_seconds(room.get("time_limit_s")),
            _fmt_seconds(room.get("spectator_delay_s")),
        )
    return table


async def _list_rooms(server: str, variant: str | None) -> list[dict[str, Any]]:
    client = await RaceClient.connect(server, open_timeout=5)
    try:
        return await client.list_rooms(variant)
    finally:
        await client.close()


def cmd_rooms(args: argparse.Namespace) -> int:
    server = _server(args)
    try:
        rooms = asyncio.run(_list_rooms(server, args.variant))
    except _connect_errors() as exc:
        return _fail(f"cannot reach {server}: {exc}")
    except ServerError as err:
        return _fail(f"the server refused: {err}")
    out = _out()
    if not rooms:
        what = f"{args.variant} rooms" if args.variant else "rooms"
        out.print(f"no open {what} on {server}; start one with: solrace create --variant yukon")
        return 0
    out.print(rooms_table(rooms))
    return 0


# ------------------------------------------------------------- the UI
def _ui() -> Any:
    """The Textual UI module, or None (and a message) when it cannot be loaded."""
    try:
        from . import tui
    except Exception as exc:  # a broken or missing UI must not take the CLI down
        _fail(f"the terminal UI cannot start: {exc!r} (is the 'client' extra installed?)")
        return None
    return tui


def _race(server: str, action: str, name: str, **params: object) -> int:
    tui = _ui()
    if tui is None:
        return 2
    run_race: Callable[..., int] = tui.run_race
    return int(run_race(server, action, name, **params))


def cmd_create(args: argparse.Namespace) -> int:
    settings: dict[str, object] = {"variant": args.variant, "options": dict(args.option or [])}
    if args.racers is not None:
        settings["max_racers"] = args.racers
    if args.time_limit is not None:
        settings["time_limit_s"] = args.time_limit
    if args.spectator_delay is not None:
        settings["spectator_delay_s"] = args.spectator_delay
    if args.private:
        settings["private"] = True
    return _race(_server(args), "create", _name(args), **settings)


def cmd_join(args: argparse.Namespace) -> int:
    return _race(_server(args), "join", _name(args), code=args.code)


def cmd_quick(args: argparse.Namespace) -> int:
    return _race(_server(args), "quick", _name(args), variant=args.variant)


def cmd_resume(args: argparse.Namespace) -> int:
    saved = config.load_race()
    if saved is None:
        return _fail(f"no race to resume (nothing saved in {config.config_dir()})")
    server = getattr(args, "server", None) or os.environ.get(ENV_SERVER) or saved.server
    return _race(server, "resume", saved.name, room=saved.room, token=saved.token)


def cmd_watch(args: argparse.Namespace) -> int:
    tui = _ui()
    if tui is None:
        return 2
    run_watch: Callable[..., int] = tui.run_watch
    return int(run_watch(_server(args), args.code))


# --------------------------------------------------------------- bot
def standings_table(result: Mapping[str, Any], me: int | None = None) -> Table:
    """A RaceResult's standings; ``me`` (a racer id) is highlighted."""
    reason = str(result.get("reason"))
    table = Table(title=f"race over: {reason.replace('_', ' ')}", title_justify="left")
    for column, justify in (
        ("place", "right"),
        ("racer", "right"),
        ("name", "left"),
        ("status", "left"),
        ("cards up", "right"),
        ("moves", "right"),
        ("score", "right"),
        ("time", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for s in result.get("standings") or []:
        elapsed = s.get("elapsed_ms")
        time_text = "—" if elapsed is None else f"{elapsed / 1000:.1f}s"
        table.add_row(
            str(s.get("place")),
            str(s.get("racer")),
            str(s.get("name")) + (" ◀" if s.get("racer") == me else ""),
            str(s.get("status")),
            str(s.get("foundation")),
            str(s.get("moves")),
            str(s.get("score")),
            time_text,
            style="bold" if s.get("racer") == me else None,
        )
    return table


def cmd_bot(args: argparse.Namespace) -> int:
    from .bot import BotError, BotHooks, run_bot
    from .results import race_id

    if args.quick + bool(args.code) + args.create != 1:
        return _fail("give a room CODE, or --quick, or --create")
    servers = [s.strip() for s in _server(args).split(",") if s.strip()]
    err = _err()
    joined: dict[str, Any] = {}

    def on_joined(reply: dict[str, Any]) -> None:
        joined.update(reply)
        if args.create:
            _out().print(f"room code: [bold cyan]{reply['code']}[/]")

    def say(text: str) -> None:
        if args.verbose:
            err.print(Text(f"bot: {text}", style="dim"))

    create: dict[str, Any] | None = None
    if args.create:
        create = {"variant": args.variant, "options": dict(args.option or [])}
        if args.racers is not None:
            create["max_racers"] = args.racers
        if args.time_limit is not None:
            create["time_limit_s"] = args.time_limit
        if args.private:
            create["private"] = True
    name = args.name or f"{args.strategy}-bot"
    try:
        result = asyncio.run(
            run_bot(
                servers,
                code=args.code,
                quick_variant=args.variant if args.quick else None,
                create=create,
                name=name,
                strategy=args.strategy,
                ready=args.ready,
                host_start=args.host_start or args.create,
                min_racers=args.min_racers,
                max_moves=args.max_moves,
                move_delay=args.delay,
                rng_seed=args.seed,
                hooks=BotHooks(joined=on_joined, say=say),
            )
        )
    except BotError as exc:
        return _fail(str(exc), 1)
    except ServerError as exc:
        return _fail(f"the server refused: {exc}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 1)
    out = _out()
    out.print(standings_table(result, joined.get("racer")))
    if joined.get("room"):
        rid = race_id(joined["room"], result)
        out.print(f"saved as race [bold]{rid}[/]: solrace replay {rid} · solrace verify {rid}")
    return 0


# ---------------------------------------------------------- replay, verify
def _load(ref: str) -> Any:
    from .results import ResultNotFound, load_result

    try:
        return load_result(ref)
    except (ResultNotFound, ValueError) as exc:
        _fail(str(exc))
        return None


def cmd_replay(args: argparse.Namespace) -> int:
    from .replay import board_text, find_track, step_through, tracks

    saved = _load(args.race)
    if saved is None:
        return 2
    if args.print:
        try:
            all_tracks = tracks(saved)
            track = find_track(all_tracks, args.racer) if args.racer else all_tracks[0]
        except (LookupError, KeyError, ValueError) as exc:
            return _fail(str(exc))
        print(board_text(saved, track, max(0, args.step or 0)))
        return 0
    return step_through(saved, _out(), start=args.step or 0)


def cmd_verify(args: argparse.Namespace) -> int:
    from .verify import verify_result

    saved = _load(args.race)
    if saved is None:
        return 2
    report = verify_result(saved)
    out = _out()
    out.print(f"verifying race [bold]{saved.race}[/] ({saved.variant}, {saved.path})")
    for check in report.checks:
        mark = Text("  OK  ", style="bold green") if check.ok else Text(" FAIL ", style="bold red")
        out.print(Text.assemble(mark, " ", check.what, (f": {check.detail}", "dim")))
    if report.ok:
        out.print(Text("OK: the deal was committed in advance and every move is legal", "green"))
        return 0
    out.print(Text(f"FAIL: {len(report.failures)} of {len(report.checks)} checks failed", "red"))
    return 1


def cmd_races(args: argparse.Namespace) -> int:
    from .results import list_results, results_dir

    found = list_results()
    out = _out()
    if not found:
        out.print(f"no saved races in {results_dir()}")
        return 0
    table = Table(title=f"saved races ({results_dir()})", title_justify="left")
    for column in ("race", "code", "variant", "reason", "winner", "racers"):
        table.add_column(column, no_wrap=column == "race")
    for saved in found[: args.limit]:
        standings = saved.standings
        first = standings[0] if standings else {}
        winner = str(first.get("name")) if first.get("status") == "finished" else "—"
        table.add_row(
            saved.race,
            str(saved.code or "—"),
            saved.variant,
            str(saved.result.get("reason")),
            winner,
            str(len(standings)),
        )
    out.print(table)
    return 0


# ------------------------------------------------------------ the parser
def build_parser() -> argparse.ArgumentParser:
    server_help = f"server URL (default: ${ENV_SERVER} or {DEFAULT_SERVER})"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--server", default=argparse.SUPPRESS, help=server_help)
    parser = argparse.ArgumentParser(
        prog="solrace", description="Race solitaire against other people from a terminal."
    )
    parser.add_argument("--server", default=None, help=server_help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, run: Callable[[argparse.Namespace], int]) -> Any:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(run=run)
        return p

    def add_name(p: argparse.ArgumentParser) -> None:
        p.add_argument("--name", help="your racer name (remembered for next time)")

    def add_settings(p: argparse.ArgumentParser) -> None:
        p.add_argument("--racers", type=int, help="most racers in the room (2-8, default 4)")
        p.add_argument(
            "--option",
            action="append",
            type=parse_option,
            metavar="KEY=VALUE",
            help="a variant option, e.g. draw=3, undo=false (repeatable)",
        )
        p.add_argument("--private", action="store_true", help="unlisted: join by code only")
        p.add_argument("--time-limit", type=_duration, help="seconds or 15m (default 15m)")

    p = command("rooms", "list open and running public rooms", cmd_rooms)
    p.add_argument("--variant", choices=sorted(VARIANTS))

    p = command("create", "create a room and race in it", cmd_create)
    p.add_argument("--variant", choices=sorted(VARIANTS), default="yukon")
    add_settings(p)
    p.add_argument("--spectator-delay", type=_duration, help="seconds spectators lag behind")
    add_name(p)

    p = command("join", "join a room by its code", cmd_join)
    p.add_argument("code")
    add_name(p)

    p = command("quick", "race strangers: join or open a quick room", cmd_quick)
    p.add_argument("--variant", choices=sorted(VARIANTS), default="yukon")
    add_name(p)

    p = command("watch", "watch a room's race (boards delayed by its spectator delay)", cmd_watch)
    p.add_argument("code")

    command("resume", "rejoin the race this computer was last in", cmd_resume)

    p = command("bot", "let a bot race (join CODE, --quick or --create)", cmd_bot)
    p.add_argument("code", nargs="?", help="room code to join")
    p.add_argument("--quick", action="store_true", help="quick race of --variant")
    p.add_argument("--create", action="store_true", help="create a room (implies --host-start)")
    p.add_argument("--variant", choices=sorted(VARIANTS), default="yukon")
    add_settings(p)
    p.add_argument("--strategy", choices=("greedy", "random"), default="greedy")
    p.add_argument("--name", help="the bot's racer name (default: <strategy>-bot)")
    p.add_argument(
        "--ready",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="declare ready in the lobby (default: yes)",
    )
    p.add_argument("--host-start", action="store_true", help="start the room when hosting it")
    p.add_argument("--min-racers", type=int, default=2, help="racers needed to --host-start")
    p.add_argument("--max-moves", type=int, default=3000, help="resign after this many moves")
    p.add_argument(
        "--delay",
        type=float,
        default=0.1,
        help="seconds between moves, to be watchable (default 0.1; requests are always "
        "paced inside the server's rate limit)",
    )
    p.add_argument("--seed", type=int, help="seed the strategy's tie-breaks (reproducible)")
    p.add_argument("-v", "--verbose", action="store_true", help="say what the bot does")

    p = command("replay", "step through a finished race, every racer's board", cmd_replay)
    p.add_argument("race", help="a saved race id (see `solrace races`) or a result file")
    p.add_argument("--step", type=int, help="log index to show (0 = the deal)")
    p.add_argument("--racer", help="racer id or name (with --print; default: first place)")
    p.add_argument("--print", action="store_true", help="print one board and exit")

    p = command("verify", "check a finished race's commitment, logs and standings", cmd_verify)
    p.add_argument("race", help="a saved race id (see `solrace races`) or a result file")

    p = command("races", "list the finished races saved on this computer", cmd_races)
    p.add_argument("--limit", type=int, default=30)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
