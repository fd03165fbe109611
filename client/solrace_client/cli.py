"""``solrace``: the terminal client's command line.

Racing and watching hand over to the Textual UI (:mod:`solrace_client.tui`), which is
imported only by the commands that need it, so ``rooms``, ``bot``, ``replay``,
``verify`` and ``races`` keep working on a machine (or in a build) where the UI cannot
start. The server comes from ``--server``, else ``SOLRACE_SERVER``, else
ws://127.0.0.1:8765 — but ``resume`` goes to the saved race's own server unless
``--server`` is typed.

Exit statuses: one table for every command (:mod:`solrace_client.errors`,
docs/client.md): 0 done; 1 it ran and the answer is no (a race that does not verify, a
bot that could not finish); 2 it could not run (bad arguments or server URL, server
unreachable or refusing, unknown or malformed race, the UI cannot start); 130
interrupted. Every failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from rich.console import Console, Group, JustifyMethod, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from solrace.argtypes import (
    DEFAULT_PORT,
    OUTPUT_ERRNOS,
    OneLineParser,
    add_version,
    output_unusable,
    reader_gone,
    real,
    usage_line,
    utf8,
    whole,
    whole_number,
)
from solrace.protocol import limits
from solrace.protocol.fairness import MAX_SEED
from solrace.protocol.messages import display_name, room_code
from solrace.quoting import MAX_URL_SHOWN, as_typed, file_name, quoted, url_shown
from solrace.rules import VARIANTS, RulesError, new_board, variant_class
from solrace.rules.cli import OptionAction, parse_option
from solrace.rules.options import options_to_json
from solrace.streams import degrade_gracefully

from . import config, wire
from .connection import (
    DEFAULT_SERVER,
    ENV_SERVER,
    MAX_SERVERS,
    NoReply,
    RaceClient,
    ServerError,
    env_server,
    first_answer,
    server_flag,
    server_list,
)
from .errors import (
    CONNECT_ERRORS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO,
    EXIT_TERMINATED,
    BadServerURL,
    ConnectionLost,
    cannot_reach,
    check_server_url,
    no_reply,
    refusal_of,
)
from .printable import printable

#: The phases ``solrace rooms`` lists: rooms one can still join or watch race.
LISTED_PHASES = ("lobby", "countdown", "racing")
#: Commands that work on this computer only: a --server would do nothing.
OFFLINE_COMMANDS = ("replay", "verify", "races")
#: Commands that race or watch, and save as they go (the name, the race for ``resume``,
#: its result): where the config directory cannot hold them the race still goes on,
#: and main() says so once, before it starts.
SAVING_COMMANDS = ("create", "join", "quick", "watch", "bot")
#: What a race or a watch keeps in the config directory, said when it cannot.
NOT_KEPT: Final = "this time your name, the race for `solrace resume` and its result are not kept"


class _Output(Console):
    """Standard output. A reader that went away (``| head``) is not a failure: rich
    would exit with 1 ("the answer is no"); it is left to :func:`main` instead, which
    ends quietly with its own status."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def _environ() -> dict[str, str]:
    """The environment rich reads, less a ``COLUMNS`` or ``LINES`` of 0 (a terminal
    that reports no size): rich took ``COLUMNS=0`` as a width of 0 and printed nothing
    at all, one-line errors included; without it rich asks the terminal, or takes 80."""
    return {
        name: value
        for name, value in os.environ.items()
        if not (name in ("COLUMNS", "LINES") and value and not value.strip("0"))
    }


def _out() -> Console:
    # soft wrap: a line longer than the terminal (or than 80 columns when piped) is
    # written whole, never broken in a path or a sentence (tables keep their width)
    return _Output(highlight=False, soft_wrap=True, _environ=_environ())


def _err() -> Console:
    # one line, unwrapped
    return Console(stderr=True, highlight=False, soft_wrap=True, _environ=_environ())


def _cell(value: object, *, one_line: bool = False) -> Text:
    """A table cell holding a server's or a file's string: never read as rich markup
    (a racer named ``[/]x``, which a solrace server accepts, made every table it was
    in — ``rooms``, the bot's standings, ``races`` — a traceback), no control
    characters. ``one_line``: cut with "…" where its column is too narrow, not
    wrapped."""
    if one_line:
        return Text(printable(value), no_wrap=True, overflow="ellipsis")
    return Text(printable(value))


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    """The one line a failure says. Through :func:`printable`: it may name a file or
    hold a server's words, and a file named with an ESC turned the terminal red."""
    _err().print(Text(printable(f"solrace: {message}"), style="red"))
    return code


def _bad_arguments(args: argparse.Namespace, message: str) -> int:
    """Arguments argparse accepted one by one that do not go together (``bot`` with no
    way into a room, ``replay --racer`` without ``--print``): said as argparse's own
    errors are, status 2. They said ``solrace: …``, without the command or its --help.
    Returned, not raised, as the command's status."""
    print(usage_line(args.command_parser.prog, message), file=sys.stderr)
    return EXIT_FAILED


def _server_given(args: argparse.Namespace) -> str | None:
    """``--server`` as given (even empty: then it is refused, never replaced), else a
    non-blank ``$SOLRACE_SERVER`` (:func:`env_server`), else None."""
    given = getattr(args, "server", None)
    if given is not None:
        return str(given)
    return env_server()


def _server(args: argparse.Namespace) -> str:
    given = _server_given(args)
    return DEFAULT_SERVER if given is None else given


def _name(args: argparse.Namespace) -> str:
    """``--name`` (already checked by :func:`_racer_name`), remembered for next time;
    else the remembered one."""
    if args.name is not None:
        try:
            config.save_name(args.name)
        except config.ConfigDirUnusable:  # said once already, by main()
            pass
        except OSError as exc:  # the race can go on; only the memory of the name is lost
            _fail(f"could not remember the name in {config.config_dir()}: {exc.strerror or exc}")
        return str(args.name)
    return config.default_name()


def _racer_name(text: str) -> str:
    """An argparse type: the name as the server would keep it, or the server's own
    reason for refusing it — checked here so a refused name is never remembered. Bytes
    of another locale are said as typed (:func:`utf8`): Python reads them as lone
    surrogates, which the server's check called "the character U+DCFF"."""
    utf8(text)
    try:
        return display_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{quoted(text)}: {err}") from None


def _racer(text: str) -> str:
    """``replay --racer``: an id or a name, not nothing (an unset variable's ``''`` was
    read as no --racer, and printed first place's board)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("no racer given: the racer id or name is empty")
    return text


def _duration(text: str) -> int:
    """Seconds, as ``90``, ``90s`` or ``15m``."""
    try:
        if text.endswith("m"):
            return whole_number(text[:-1]) * 60
        return whole_number(text.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {quoted(text)} (90, 90s, 15m)") from None


#: The number flags (solrace.argtypes: the same words as every other command line),
#: bounded by the server's limits, so a bad value is refused here in words, not by the
#: server. ``bot --delay``'s bound, in seconds: a minute between moves is already too slow to
#: watch a race by; unbounded, ``--delay 1e9`` made a bot that held its seat and
#: never moved.
MAX_BOT_DELAY_S: Final = 60
_bot_delay = real(0, MAX_BOT_DELAY_S, unit=" seconds")
#: ``bot --max-moves``, ``replay --step``: a racer's log holds at most MAX_LOG_LEN
#: entries (the server refuses the next), so no bot makes more moves and no replay has
#: more steps; ``--step`` up to it shows the final position of a shorter log.
#: ``--max-moves`` took a million, ``--step`` any number.
_moves = whole(1, limits.MAX_LOG_LEN)
_step = whole(0, limits.MAX_LOG_LEN)
#: ``bot --seed``: the strategy's tie-breaks, seeded as a deal is, 0 to 2**64 - 1
#: (protocol MAX_SEED: ``solrace-rules deal``'s range); -1 and 400 digits were taken.
_bot_seed = whole(0, MAX_SEED)
#: ``races --limit``: the most saved races one listing names (newest first).
MAX_RACES_LISTED: Final = 1_000_000


def _code(text: str) -> str:
    """A typed room code as the server reads it; refused with its bounds (MAX_CODE_LEN):
    "letters and digits" alone was said of 17 letters too, true of them and not why.
    Bytes of another locale are said as typed (:func:`utf8`)."""
    utf8(text)
    try:
        return room_code(text)  # the server's own reading of a typed code
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is not a room code: 1 to {limits.MAX_CODE_LEN} letters and digits, "
            "like K7QX2M"
        ) from None


class _CodeWords(argparse.Action):
    """A room code typed in several words (``solrace join kbz 8cl``, as it is read out):
    spaces do not matter, quoted or not."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        words = [values] if isinstance(values, str) else [str(v) for v in values or []]
        if not words:  # optional (``bot``'s: --quick or --create instead)
            setattr(namespace, self.dest, None)
            return
        try:
            code = _code(" ".join(words))
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument {self.dest}: {exc}")
        setattr(namespace, self.dest, code)


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
    resolved; the defaults are noise in a table) — the defaults the room's other
    options make, as the engine resolves them: Vegas scoring passes once, three times
    with draw 3 (docs/rules.md), so ``scoring=vegas max_passes=null`` is not listed as
    ``scoring=vegas`` (one pass), nor ``draw=3 scoring=vegas`` with its ``max_passes=3``.
    An option this client's engine does not know or refuses (a newer server's) is shown."""
    try:
        allowed = variant_class(variant).allowed_options
    except RulesError:
        return dict(options)
    shown = {}
    for key, value in options.items():
        others = {k: v for k, v in options.items() if k != key and k in allowed}
        try:
            board = new_board(variant, others)
        except RulesError:
            shown[key] = value
            continue
        if options_to_json(board.options, board.allowed_options).get(key, object()) != value:
            shown[key] = value
    return shown


def _option_value(value: Any) -> str:
    """As ``--option`` takes it: a word bare, anything else as JSON (null, true, 3)."""
    return value if isinstance(value, str) else json.dumps(value)


def _room_fields(room: Mapping[str, Any]) -> tuple[str, str, str, str, str, str, str]:
    """A ``rooms`` entry as it is shown: code, variant (options, quick), phase,
    racers, host, limit, watch delay."""
    variant = str(room.get("variant"))
    options = _non_default(variant, room.get("options") or {})
    if options:
        variant += " " + " ".join(f"{k}={_option_value(v)}" for k, v in options.items())
    if room.get("quick"):
        variant += " (quick)"
    return (
        str(room.get("code")),
        variant,
        str(room.get("phase")),
        f"{room.get('racers')}/{room.get('max_racers')}",
        str(room.get("host") or "—"),
        _fmt_seconds(room.get("time_limit_s")),
        _fmt_seconds(room.get("spectator_delay_s")),
    )


def _phase_style(phase: str) -> str:
    return "green" if phase == "lobby" else "yellow"


ROOMS_TITLE: Final = "solrace rooms"
ROOMS_CAPTION: Final = "limit: race time limit · watch delay: how far spectators lag behind"


def rooms_table(rooms: Sequence[Mapping[str, Any]]) -> Table:
    """The ``rooms`` reply as a table (also what a UI could show)."""
    table = Table(
        title=ROOMS_TITLE,
        title_justify="left",
        caption=ROOMS_CAPTION,
        caption_justify="left",
    )
    # the one field people need to type: never shrunk to "…", whatever the width
    table.add_column("code", style="bold cyan", no_wrap=True, min_width=limits.ROOM_CODE_LEN)
    # wraps (at spaces, between options) rather than squeeze the columns after it
    table.add_column("variant", overflow="fold", min_width=12)
    table.add_column("phase", no_wrap=True)
    table.add_column("racers", justify="right", no_wrap=True)
    table.add_column("host", min_width=6)
    table.add_column("limit", justify="right", no_wrap=True)
    table.add_column("watch delay", justify="right", no_wrap=True)
    for room in rooms:
        code, variant, phase, racers, host, limit, delay = _room_fields(room)
        table.add_row(
            _cell(code),
            _cell(variant),
            Text(printable(phase), style=_phase_style(phase)),
            *map(_cell, (racers, host, limit, delay)),
        )
    return table


def fits(table: Table, console: Console) -> bool:
    """Whether ``table`` shows whole on ``console``: every column as wide as its widest
    cell, so that no cell is wrapped, cut to "…" or squeezed to nothing. Narrower, rich
    does all three (looking for "…" and over-long lines in the drawn table missed the
    other two: empty columns at 22 columns, ``(quick)`` on a line of its own at 80)."""
    unbounded = console.options.update_width(sys.maxsize)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def rooms_view(rooms: Sequence[Mapping[str, Any]], console: Console) -> RenderableType:
    """The table where ``console`` is wide enough for every cell whole (:func:`fits`);
    narrower (its columns would be squeezed to nothing, its cells wrapped, or the
    terminal would wrap its lines: audits at 22, 40, 60 and 80 columns), two lines a
    room, which wrap like text."""
    table = rooms_table(rooms)
    if fits(table, console):
        return table
    lines: list[RenderableType] = [Text(ROOMS_TITLE, style="italic")]
    for room in rooms:
        code, variant, phase, racers, host, limit, delay = _room_fields(room)
        lines.append(Text.assemble((printable(code), "bold cyan"), "  ", printable(variant)))
        lines.append(
            Text.assemble(
                "  ",
                (printable(phase), _phase_style(phase)),
                printable(
                    f" · {racers} racers · host {host} · limit {limit} · watch delay {delay}"
                ),
            )
        )
    lines.append(Text(ROOMS_CAPTION, style="dim"))
    return Group(*lines)


async def _list_rooms(servers: str, variant: str | None) -> tuple[str, list[dict[str, Any]]]:
    """The first of ``servers`` (comma-separated; never empty, main checks) that
    answers, and its rooms; when none does, the last one's error."""
    return await first_answer(servers, lambda url: _rooms_of(url, variant))


async def _rooms_of(url: str, variant: str | None) -> list[dict[str, Any]]:
    client = await RaceClient.connect(url, open_timeout=5)
    try:
        return await client.list_rooms(variant)
    finally:
        await client.close()


def cmd_rooms(args: argparse.Namespace) -> int:
    server = _server(args)
    try:
        answered, rooms = asyncio.run(_list_rooms(server, args.variant))
    except ServerError as err:
        return _fail(f"the server refused: {refusal_of(err.data)}")
    except NoReply:  # reached (the last one tried), then silent: not "cannot reach"
        return _fail(no_reply(server_list(server)[-1]))
    except ConnectionLost as exc:  # reached, then closed (an OSError: caught first)
        return _fail(f"{url_shown(server)} closed the connection before answering ({exc})")
    except CONNECT_ERRORS as exc:  # every server tried: the last one's reason
        return _fail(cannot_reach(server_list(server), exc))
    # The server lists finished rooms too (until they expire); they can be neither
    # joined nor watched racing, so they are not news.
    rooms = [room for room in rooms if room.get("phase") in LISTED_PHASES]
    out = _out()
    if not rooms:
        what = f"{args.variant} rooms" if args.variant else "rooms"
        variant = args.variant or DEFAULT_VARIANT
        flag = server_flag(answered)
        if flag and len(answered) > MAX_URL_SHOWN:  # named cut: cut, it would not run
            flag = " and the same --server"
        create = f"solrace create --variant {variant}{flag}"  # as printed
        hint = f"no open {what} on {url_shown(answered)}; start one with: {create}"
        # a command to copy: never cut in two, nor read as markup (a URL's `[bold]`
        # left the command printed without it; a `[/]` was a MarkupError traceback)
        out.print(Text(hint), soft_wrap=True)
        return 0
    out.print(rooms_view(rooms, out))
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
        return EXIT_FAILED
    run_race: Callable[..., int] = tui.run_race
    return int(run_race(server, action, name, **params))


class _BadSettings(ValueError):
    """Room settings that make no sense together: said as a bad argument is
    (:func:`_bad_arguments`)."""


def _room_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The room ``create`` and ``bot --create`` ask for, from the options they share
    (:func:`build_parser`'s ``add_settings``); _BadSettings when they contradict, or an
    ``--option`` the variant does not have or take (``--option draw=3`` in a Yukon
    room was said only once a server refused it, as ``solrace: …``)."""
    if args.deals == "random" and args.difficulty is not None:
        raise _BadSettings("--difficulty needs winnable deals: leave out --deals random")
    settings: dict[str, Any] = {"variant": args.variant, "options": dict(args.option or [])}
    try:  # the engine the server checks them with: said before anything connects
        new_board(args.variant, settings["options"])
    except RulesError as exc:
        raise _BadSettings(str(exc)) from None
    for key, value in (
        ("max_racers", args.racers),
        ("time_limit_s", args.time_limit),
        ("spectator_delay_s", args.spectator_delay),
        ("deals", args.deals),
        ("difficulty", args.difficulty),
    ):
        if value is not None:
            settings[key] = value
    if args.private:
        settings["private"] = True
    return settings


#: The variant ``create``, ``quick`` and a bot's ``--quick``/``--create`` race without
#: ``--variant`` (and what ``rooms`` suggests creating when none is open).
DEFAULT_VARIANT: Final = "yukon"

#: The ``add_settings`` options, by their attribute: only a room being created has them.
ROOM_OPTIONS: Final = {
    "racers": "--racers",
    "option": "--option",
    "private": "--private",
    "time_limit": "--time-limit",
    "spectator_delay": "--spectator-delay",
    "deals": "--deals",
    "difficulty": "--difficulty",
}


def cmd_create(args: argparse.Namespace) -> int:
    try:
        settings = _room_settings(args)
    except _BadSettings as exc:
        return _bad_arguments(args, str(exc))
    return _race(_server(args), "create", _name(args), **settings)


def cmd_join(args: argparse.Namespace) -> int:
    return _race(_server(args), "join", _name(args), code=args.code)


def cmd_quick(args: argparse.Namespace) -> int:
    return _race(_server(args), "quick", _name(args), variant=args.variant)


def resume_params(saved: config.SavedRace) -> dict[str, object]:
    """What the race window's ``resume`` of ``saved`` sends. With it, ``revealed``: the
    ``{seed, salt}`` of the room's last race_over this computer saw — the saved race's
    (the window's view when it saved it), else the newest saved result of the room (an
    older client's file) — the proof that the round's seed went out, for a store
    rewound since, which would race that revealed deal again (docs/fairness.md). A
    new process's view holds none: before, ``solrace resume`` sent no proof."""
    from .results import last_revealed

    params: dict[str, object] = {
        "room": saved.room,
        "token": saved.token,
        "code": saved.code,
        "commitment": saved.commitment,
    }
    proof = saved.revealed or last_revealed(room=saved.room)
    if proof is not None:
        params["revealed"] = proof
    return params


def cmd_resume(args: argparse.Namespace) -> int:
    """Rejoin the saved race; one the server refuses for good (over, left, expired) is
    forgotten and the next saved one whose window is gone is tried, in this one run: a
    newcomer with two stale races saved met a failure per ``resume``, two in a row."""
    candidates = config.resume_candidates()
    if not candidates:
        files = config.saved_race_files()
        if files:
            return _fail(f"the saved race in {files[0]} is unreadable: start or join a new race")
        return _fail(f"no race to resume (nothing saved in {config.config_dir()})")
    status = EXIT_FAILED
    # Only a typed --server overrides the saved race's own (the server moved): with
    # $SOLRACE_SERVER naming another, the variable's server knew no such room, and the
    # race — its token with it — was forgotten as expired.
    typed = getattr(args, "server", None)
    for saved in candidates:
        server = saved.server if typed is None else str(typed)
        status = _race(server, "resume", saved.name, **resume_params(saved))
        if status != EXIT_FAILED or config.is_saved(saved):  # not refused for good
            return status
    return status


def cmd_watch(args: argparse.Namespace) -> int:
    tui = _ui()
    if tui is None:
        return EXIT_FAILED
    run_watch: Callable[..., int] = tui.run_watch
    return int(run_watch(_server(args), args.code))


def _check_servers(args: argparse.Namespace) -> None:
    """Every server URL the command will use is a ws:// or wss:// URL (BadServerURL).
    Without a typed --server, ``resume`` uses the saved race's server (checked when it
    was saved), and ``fetch`` of a race file the file's: :func:`cmd_fetch` checks the
    one it uses — a bad ``$SOLRACE_SERVER``, which neither would ask, refused them."""
    if args.run in (cmd_resume, cmd_fetch) and getattr(args, "server", None) is None:
        return
    _check_server_urls(args)


def _check_server_urls(args: argparse.Namespace) -> None:
    """:func:`_check_servers`'s check of :func:`_server`'s URLs, saying where they came
    from when no flag was typed."""
    urls = server_list(_server(args))
    from_environment = getattr(args, "server", None) is None and _server_given(args) is not None
    where = f" (from ${ENV_SERVER})" if from_environment else ""
    if not urls:
        raise BadServerURL(f"no server URL given (e.g. ws://127.0.0.1:{DEFAULT_PORT}){where}")
    if len(urls) > MAX_SERVERS:  # tried in turn: 1,000 took an hour of unanswered hosts
        raise BadServerURL(
            f"{len(urls):,} server URLs given: at most {MAX_SERVERS} are tried in turn (the "
            f"nodes of one deployment){where}"
        )
    for url in urls:
        try:
            check_server_url(url)
        except BadServerURL as exc:
            if from_environment:  # say where it came from: no flag was typed
                raise BadServerURL(f"{exc} (from ${ENV_SERVER})") from None
            raise


# --------------------------------------------------------------- bot
def standings_table(result: Mapping[str, Any], me: int | None = None) -> Table:
    """A RaceResult's standings; ``me`` (a racer id) is highlighted, and marked ◀ in a
    column of its own. Marked after the name, a long name in 80 columns (a pipe's
    width) wrapped the mark alone onto a second line."""
    reason = str(result.get("reason"))
    # No outer edge, and the racer's number headed "id": seven cells more for the name
    # in 80 columns (a pipe's width), where a bot's "greedy-bot (2)" was cut.
    table = Table(
        title=f"race over: {reason.replace('_', ' ')}",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("place", "right"),
        ("id", "right"),
        ("name", "left"),
        ("", "left"),
        ("status", "left"),
        ("cards up", "right"),
        ("moves", "right"),
        ("score", "right"),
        ("time", "right"),
    )
    for column, justify in columns:
        # Only a name gives way where the table is too wide: the figures and the mark
        # stay whole (rich shrinks the columns that may wrap first), and the name is cut
        # ("…") on its one line, never wrapped: "greedy-bot (2)" took two lines in 80
        # columns (a newcomer's audit).
        table.add_column(
            column,
            justify=justify,
            no_wrap=column != "name",
            min_width=8 if column == "name" else 1,
        )
    from .results import finish_ms, time_decimals

    standings = wire.standings(result)  # a string or a list of numbers: a traceback
    decimals = time_decimals(standings)
    for s in standings:
        elapsed = finish_ms(s)
        time_text = "—" if elapsed is None else f"{elapsed / 1000:.{decimals}f}s"
        table.add_row(
            _cell(s.get("place")),
            _cell(s.get("racer")),
            _cell(s.get("name"), one_line=True),
            "◀" if s.get("racer") == me else "",
            _cell(s.get("status")),
            _cell(s.get("foundation")),
            _cell(s.get("moves")),
            _cell(s.get("score")),
            _cell(time_text),
            style="bold" if s.get("racer") == me else None,
        )
    return table


_T = TypeVar("_T")


class _Terminated(Exception):
    """The command's work was cancelled by SIGTERM (:func:`_until_sigterm`)."""


async def _until_sigterm(work: Awaitable[_T]) -> _T:
    """``work``, cancelled by SIGTERM as Ctrl-C cancels it (so it cleans up as for
    Ctrl-C: a bot leaves its race), then :class:`_Terminated`. Its default action
    killed ``solrace bot`` where it stood, its seat held for the 30 s grace with
    nothing to take it back (a bot saves no race for ``solrace resume``). A second
    SIGTERM kills at once, as the first did before."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        loop.remove_signal_handler(signal.SIGTERM)
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
    except (ValueError, RuntimeError):  # not the main thread (main() run by a test)
        return await task
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def cmd_bot(args: argparse.Namespace) -> int:
    from .bot import BotCannotStart, BotError, BotHooks, ResultNotSaved, run_bot
    from .results import SavedResult, race_id
    from .verify import race_verdict

    ways = args.quick + bool(args.code) + args.create
    if ways != 1:
        many = "only one of" if ways else "one of"
        return _bad_arguments(args, f"give {many}: a room CODE, --quick, --create")
    if not args.create:
        given = [
            flag
            for key, flag in ROOM_OPTIONS.items()
            if getattr(args, key) is not None and getattr(args, key) is not False
        ]
        if given:
            return _bad_arguments(
                args, f"{given[0]} is a setting of a room the bot creates: it needs --create"
            )
    if args.min_racers is not None and not (args.host_start or args.create):
        # read only by a host that starts the race: otherwise ignored in silence
        return _bad_arguments(
            args,
            "--min-racers is how many racers a starting host waits for: "
            "it needs --host-start (or --create)",
        )
    min_racers = limits.MIN_RACERS if args.min_racers is None else args.min_racers
    if args.code and args.variant is not None:  # it joined whatever the room was, silently
        return _bad_arguments(
            args,
            "--variant chooses the room of --quick or --create: a room CODE has its own variant",
        )
    args.variant = args.variant or DEFAULT_VARIANT
    room_size = args.racers if args.racers is not None else limits.DEFAULT_MAX_RACERS
    if args.create and min_racers > room_size:
        return _bad_arguments(
            args,
            f"--min-racers {min_racers} is more than the room's {room_size} racers "
            "(--racers): it could never start",
        )
    servers = server_list(_server(args))
    err = _err()
    joined: dict[str, Any] = {}

    def on_joined(reply: dict[str, Any]) -> None:
        joined.update(reply)
        if args.create:
            _out().print(Text.assemble("room code: ", (printable(reply["code"]), "bold cyan")))

    def say(text: str) -> None:
        # Through printable, as the failure line is: a line may name the races
        # directory (`result saved to PATH`) or quote a server's refusal, and a config
        # directory named with an ESC turned the terminal red.
        if args.verbose:
            err.print(Text(printable(f"bot: {text}"), style="dim"))

    create: dict[str, Any] | None = None
    if args.create:
        try:
            create = _room_settings(args)
        except _BadSettings as exc:
            return _bad_arguments(args, str(exc))
    name = args.name or f"{args.strategy}-bot"
    saved = True
    finished: list[SavedResult] = []
    try:
        result = asyncio.run(
            _until_sigterm(
                run_bot(
                    servers,
                    code=args.code,
                    quick_variant=args.variant if args.quick else None,
                    create=create,
                    name=name,
                    strategy=args.strategy,
                    ready=args.ready,
                    host_start=args.host_start or args.create,
                    min_racers=min_racers,
                    max_moves=args.max_moves,
                    move_delay=args.delay,
                    rng_seed=args.seed,
                    hooks=BotHooks(joined=on_joined, say=say, over=finished.append),
                )
            )
        )
    except _Terminated:
        return _fail("terminated", EXIT_TERMINATED)
    except BotCannotStart as exc:
        return _fail(str(exc))
    except BotError as exc:
        return _fail(str(exc), EXIT_NO)
    except ServerError as exc:
        return _fail(f"the server refused: {refusal_of(exc.data)}", EXIT_NO)
    except ResultNotSaved as exc:  # the race counts; only replay and verify lose it
        result, saved = exc.result, False
        if config.config_dir_problem() is None:  # else said before the race, by main()
            _fail(f"{exc} (in {config.config_dir()}): replay and verify will not know it")
    out = _out()
    out.print(standings_table(result, joined.get("racer")))
    if joined.get("room") and saved:
        rid = race_id(joined["room"], result)
        out.print(
            f"saved as race [bold]{rid}[/]: solrace replay {rid} · solrace verify {rid}",
            soft_wrap=True,
        )
    if not finished:  # no race came back to check (a stand-in for run_bot)
        return 0
    # What `solrace verify` checks, on the race the bot just ran: the standings printed
    # above are the server's word until the logs bear them out; the bot's own log is
    # held to the moves the server acknowledged to it (saved with the race, as the
    # terminal UI's are: verify checks them in the file later too).
    verdict = race_verdict(finished[0])
    out.print(Text(verdict.line, "green" if verdict.ok else "bold red"), soft_wrap=True)
    return 0 if verdict.ok else EXIT_NO


# ---------------------------------------------------------- replay, verify
def _load(ref: str) -> Any:
    from .results import ResultNotFound, load_result

    try:
        return load_result(ref)
    except (ResultNotFound, ValueError) as exc:
        _fail(str(exc))
        return None


def cmd_replay(args: argparse.Namespace) -> int:
    from .replay import NoCommands, board_text, find_track, not_replayed, step_through, tracks

    if args.racer is not None and not args.print:  # before the race is read: arguments first
        return _bad_arguments(args, "--racer goes with --print (the stepper shows every racer)")
    saved = _load(args.race)
    if saved is None:
        return EXIT_FAILED
    if not args.print and sys.stdin is None:  # started with `<&-`: no commands to read
        return _fail(
            "the stepper reads its commands from standard input, which is closed: "
            "use --print to print one board"
        )
    try:
        all_tracks = tracks(saved)
    except ValueError as exc:  # the engine cannot deal it (the seed's range, an option)
        return _fail(f"{saved.path or saved.race}: cannot replay: {exc}")
    if args.print:
        try:
            track = all_tracks[0] if args.racer is None else find_track(all_tracks, args.racer)
        except LookupError as exc:
            return _fail(str(exc))
        print(board_text(saved, track, args.step or 0))
    else:
        try:
            step_through(saved, _out(), start=args.step or 0, all_tracks=all_tracks)
        except NoCommands as exc:
            return _fail(str(exc))
    # Shown (a board's "!!" line), and said again as the status: 1, as verify's FAIL.
    broken = not_replayed(all_tracks)
    return 0 if broken is None else _fail(f"the race does not replay: {broken}", EXIT_NO)


def cmd_verify(args: argparse.Namespace) -> int:
    from .verify import verify_result

    saved = _load(args.race)
    if saved is None:
        return EXIT_FAILED
    report = verify_result(saved)
    out = _out()
    out.print(
        Text.assemble(
            "verifying race ",
            (printable(saved.race), "bold"),
            printable(f" ({saved.variant}, {saved.path})"),
        )
    )
    for check in report.checks:
        mark = Text("  OK  ", style="bold green") if check.ok else Text(" FAIL ", style="bold red")
        detail = printable(f": {check.detail}")
        out.print(Text.assemble(mark, " ", printable(check.what), (detail, "dim")))
    for skipped in report.skipped:
        what, _, why = skipped.partition(": ")
        skip = Text(" SKIP ", style="bold yellow")
        out.print(Text.assemble(skip, " ", printable(what), (printable(f": {why}"), "dim")))
    if report.ok and report.skipped:
        out.print(
            Text(
                "OK as far as checked: the revealed deal matches its commitment and every "
                "move is legal (SKIP above: what this file could not show)",
                "yellow",
            )
        )
        return 0
    if report.ok:
        out.print(Text("OK: the deal was committed in advance and every move is legal", "green"))
        return 0
    out.print(Text(f"FAIL: {len(report.failures)} of {len(report.checks)} checks failed", "red"))
    return EXIT_NO


def cmd_fetch(args: argparse.Namespace) -> int:
    """The server's archived copy of a race: saved here when this computer has none,
    else compared with the file (exit 1 where they differ)."""
    from .archive import differences, fetch_archived, is_race_id
    from .results import ResultNotFound, load_result, write_result

    local = None
    try:
        local = load_result(args.race)
    except ValueError as exc:  # a file, but not a readable result: nothing to compare
        return _fail(str(exc))
    except ResultNotFound as exc:
        if not args.race.strip():  # nothing given: no race id either, said once
            return _fail(str(exc))
        if not is_race_id(args.race):
            return _fail(f"{exc}; nor is it a race id (<room>.<8 hex digits>) to fetch")
    race = args.race if local is None else local.race
    server = _server(args)
    typed = getattr(args, "server", None)
    saved_from = ""  # said where the server came from, when from the file
    # A race file's own servers past MAX_SERVERS are left untried, and said so (a file
    # naming 500 had them all tried, one after another, for minutes: a newcomer walk).
    if typed is None and local is not None and local.server:
        # The server the race was saved from, as resume does: not $SOLRACE_SERVER's,
        # nor the default (a race run with --server needed it typed again).
        urls = server_list(local.server)
        server = ",".join(urls[:MAX_SERVERS])
        try:
            for url in urls[:MAX_SERVERS]:
                check_server_url(url)
        except BadServerURL as exc:
            return _fail(f"{local.path or race}: its server: {exc}: give --server")
        saved_from = " (the server the race was saved from: --server asks another)"
        if len(urls) > MAX_SERVERS:
            saved_from = (
                f" (the servers the race was saved from: the first {MAX_SERVERS} of "
                f"the {len(urls):,} it names were tried, {len(urls) - MAX_SERVERS:,} "
                "not: --server asks others)"
            )
    else:  # --server (checked already), $SOLRACE_SERVER's or the default: _check_servers
        try:
            _check_server_urls(args)
        except BadServerURL as exc:
            return _fail(str(exc))
    try:
        answered, archived = asyncio.run(fetch_archived(server, race))
    except ServerError as err:
        if err.code == "unknown_race":
            return _fail(
                f"{url_shown(server)} has no finished race {printable(race)} (not over yet, "
                "not run there, or its archive has expired)"
            )
        if err.code == "unknown_type":
            return _fail(
                f"{url_shown(server)} keeps no archive this client can ask for (an older server)"
            )
        return _fail(f"the server refused: {refusal_of(err.data)}")
    except NoReply:  # reached (the last one tried), then silent: not "cannot reach"
        return _fail(no_reply(server_list(server)[-1]))
    except ConnectionLost as exc:  # reached, then closed (an OSError: caught first)
        return _fail(f"{url_shown(server)} closed the connection before answering ({exc})")
    except CONNECT_ERRORS as exc:
        return _fail(cannot_reach(server_list(server), exc) + saved_from)
    out = _out()
    if local is None:
        path = write_result(archived)
        out.print(
            Text(
                f"saved race {printable(race)} as {url_shown(answered)} archived it, in {path}: "
                f"solrace replay {printable(race)} · solrace verify {printable(race)}"
            )
        )
        return 0
    where = printable(str(local.path or local.race))
    found = differences(local, archived)
    if not found:
        out.print(Text(f"OK: {where} is the race {url_shown(answered)} archived", "green"))
        return 0
    out.print(Text(f"FAIL: {where} is not the race {url_shown(answered)} archived:", "red"))
    for difference in found:
        out.print(Text(f"  {printable(difference)}"))
    return EXIT_NO


def _end_reason(reason: object) -> str:
    """A result's end reason for `races`: one the server gives as it is, any other
    quoted and cut (a file's reason of 5,000 characters was printed whole; verify fails
    it)."""
    from solrace.protocol.views import EndReason

    return reason if isinstance(reason, str) and reason in set(EndReason) else quoted(reason)


def cmd_races(args: argparse.Namespace) -> int:
    from .results import read_results, results_dir

    found, unreadable = read_results()
    # A file that cannot be read, one line each (its path, and why), and status 2:
    # left out without a word, the race it held seemed never saved.
    status = EXIT_FAILED if unreadable else 0
    for why in unreadable:
        _fail(f"{printable(why)}, left out")
    out = _out()
    # The directory as Text, not markup: one named `[/]x` was a MarkupError traceback
    if not found:
        out.print(Text(printable(f"no saved races in {results_dir()}")))
        return status
    out.print(Text(printable(f"saved races ({results_dir()})")))  # one line, not in the table
    columns = ("race", "code", "variant", "reason", "winner", "racers")
    rows = []
    for saved in found[: args.limit]:
        standings = saved.standings
        first = standings[0] if standings else {}
        winner = str(first.get("name")) if first.get("status") == "finished" else "—"
        reason = _end_reason(saved.result.get("reason"))
        rows.append(
            (saved.race, str(saved.code or "—"), saved.variant, reason, winner, str(len(standings)))
        )
    table = Table()
    for column in columns:
        table.add_column(column, no_wrap=column == "race")
    for row in rows:
        table.add_row(*map(_cell, row))
    if fits(table, out):
        out.print(table)
        return status
    # Too narrow for the table (a newcomer audit: "c… v… …" at 50 columns): a race id
    # to copy on a line of its own, what it was beside it.
    for race, code, variant, reason, winner, racers in rows:
        out.print(Text(printable(race), style="bold"), soft_wrap=True)
        out.print(
            Text(
                printable(
                    f"  code {code} · {variant} · {reason} · winner {winner} · {racers} racers"
                )
            )
        )
    return status


# ------------------------------------------------------------ the parser
class _Parser(OneLineParser):
    """``solrace``'s parsers (its commands' are of this class too): its ``--help`` and
    ``--version`` that cannot be written end as other output that cannot (status 2)."""

    output_failed = EXIT_FAILED


class _CommandLine(_Parser):
    """``solrace``'s own parser: the arguments it returns hold the one ``--server``
    typed (:func:`_one_server`), wherever it was typed."""

    def _parsed(self, parsed: argparse.Namespace) -> None:
        _one_server(parsed)


def build_parser() -> argparse.ArgumentParser:
    server_help = f"server URL (default: ${ENV_SERVER} or {DEFAULT_SERVER})"
    common = _Parser(add_help=False)
    common.add_argument("--server", action="append", default=argparse.SUPPRESS, help=server_help)
    # offline commands take no server; accepting the flag (unlisted) lets main say so
    offline = _Parser(add_help=False)
    offline.add_argument(
        "--server", action="append", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    resuming = _Parser(add_help=False)  # a saved race goes back to its own server
    resuming.add_argument(
        "--server",
        action="append",
        default=argparse.SUPPRESS,
        help=f"server URL (default: the saved race's own server, not ${ENV_SERVER})",
    )
    fetching = _Parser(add_help=False)  # a saved race's file names its server: as resume
    fetching.add_argument(
        "--server",
        action="append",
        default=argparse.SUPPRESS,
        help=f"server URL (default: a saved race's own server, not ${ENV_SERVER}; for a race "
        f"id with no file here, ${ENV_SERVER} or {DEFAULT_SERVER})",
    )
    parser = _CommandLine(
        prog="solrace",
        description="Race solitaire against other people from a terminal. Exit status: "
        "0 done, 1 the answer is no (a race that does not verify, a bot that could not "
        "finish), 2 could not run (bad arguments, server unreachable or refusing, unknown "
        "or malformed race), 130 interrupted, 141 the reader of its output went away (| head), "
        "143 ended by SIGTERM (kill PID): the race or watch screen, or a bot (it leaves its "
        "race).",
    )
    # before the command: its own dest, so that one given there and one after the
    # command are both seen (the command's parser would overwrite it): _one_server
    parser.add_argument(
        "--server", dest=SERVER_BEFORE, action="append", metavar="SERVER", help=server_help
    )
    add_version(parser)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    def command(
        name: str,
        help_text: str,
        run: Callable[[argparse.Namespace], int],
        description: str | None = None,
    ) -> Any:
        """A subcommand: ``help_text`` in ``solrace --help``'s list, and ``description``
        (by default the same) atop its own --help."""
        parents = [offline] if name in OFFLINE_COMMANDS else [common]
        if name == "resume":
            parents = [resuming]
        if name == "fetch":
            parents = [fetching]
        p = sub.add_parser(
            name, parents=parents, help=help_text, description=description or help_text
        )
        p.set_defaults(run=run, command_parser=p)
        return p

    def add_name(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--name", type=_racer_name, help="your racer name (remembered for next time)"
        )

    def add_settings(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--racers",
            type=whole(limits.MIN_RACERS, limits.MAX_RACERS),
            help=f"most racers in the room ({limits.MIN_RACERS}-{limits.MAX_RACERS}, "
            f"default {limits.DEFAULT_MAX_RACERS})",
        )
        p.add_argument(
            "--option",
            action=OptionAction,
            type=parse_option,
            metavar="KEY=VALUE",
            help="a variant option, e.g. draw=3, undo=false (repeatable, each key once)",
        )
        p.add_argument("--private", action="store_true", help="unlisted: join by code only")
        p.add_argument(
            "--time-limit",
            type=whole(limits.MIN_TIME_LIMIT_S, limits.MAX_TIME_LIMIT_S, " s", _duration),
            help="seconds, or 15m: 1m to 120m (default 15m)",
        )
        p.add_argument(
            "--spectator-delay",
            type=whole(limits.MIN_SPECTATOR_DELAY_S, limits.MAX_SPECTATOR_DELAY_S, " s", _duration),
            help="how far spectators lag behind: seconds, or 5m; 0 to 10m (default 0)",
        )
        p.add_argument(
            "--deals",
            choices=("winnable", "random"),
            help="winnable: only a deal the server's solver has won (the default, but "
            "random in australian); random: any deal",
        )
        p.add_argument(
            "--difficulty",
            choices=("easy", "medium", "hard"),
            help="a winnable deal of this difficulty (docs/solver.md)",
        )

    p = command("rooms", "list open and running public rooms", cmd_rooms)
    p.add_argument("--variant", choices=sorted(VARIANTS), help="only rooms of this variant")
    # --help said the choices and not which one a room gets without --variant
    variant_help = f"the game (default {DEFAULT_VARIANT}; docs/rules.md)"

    p = command("create", "create a room and race in it", cmd_create)
    p.add_argument(
        "--variant", choices=sorted(VARIANTS), default=DEFAULT_VARIANT, help=variant_help
    )
    add_settings(p)
    add_name(p)

    code_help = "the room's code (case and spaces do not matter)"
    p = command("join", "join a room by its code", cmd_join)
    p.add_argument("code", nargs="+", action=_CodeWords, help=code_help)
    add_name(p)

    p = command("quick", "race strangers: join or open a quick room", cmd_quick)
    p.add_argument(
        "--variant", choices=sorted(VARIANTS), default=DEFAULT_VARIANT, help=variant_help
    )
    add_name(p)

    p = command("watch", "watch a room's race (boards delayed by its spectator delay)", cmd_watch)
    p.add_argument("code", nargs="+", action=_CodeWords, help=code_help)

    command("resume", "rejoin the race this computer was last in", cmd_resume)

    p = command("bot", "let a bot race (join CODE, --quick or --create)", cmd_bot)
    p.add_argument(
        "code", nargs="*", action=_CodeWords, help="room code to join (spaces do not matter)"
    )
    p.add_argument("--quick", action="store_true", help="quick race of --variant")
    p.add_argument("--create", action="store_true", help="create a room (implies --host-start)")
    # no default here: given with a CODE, it is refused (cmd_bot), not ignored
    p.add_argument("--variant", choices=sorted(VARIANTS), help=variant_help)
    add_settings(p)
    p.add_argument(
        "--strategy", choices=("greedy", "random"), default="greedy", help="(default greedy)"
    )
    p.add_argument(
        "--name", type=_racer_name, help="the bot's racer name (default: <strategy>-bot)"
    )
    p.add_argument(
        "--ready",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="declare ready in the lobby (default: yes); --no-ready is for a quick room "
        "(it starts on its lobby timer) or a --host-start host (its start needs the others "
        "ready, not itself); in a room only its host starts it would block the start: it "
        "leaves, status 2",
    )
    p.add_argument("--host-start", action="store_true", help="start the room when hosting it")
    p.add_argument(
        "--min-racers",
        type=whole(limits.MIN_RACERS, limits.MAX_RACERS),
        default=None,
        help=f"racers a --host-start host waits for before it readies and starts "
        f"(default {limits.MIN_RACERS})",
    )
    p.add_argument(
        "--max-moves",
        type=_moves,
        default=3000,
        help=f"resign after this many moves (default 3000, at most {limits.MAX_LOG_LEN})",
    )
    p.add_argument(
        "--delay",
        type=_bot_delay,
        default=0.1,
        help=f"seconds between moves, to be watchable (default 0.1, at most "
        f"{MAX_BOT_DELAY_S}; requests are always paced inside the server's rate limit)",
    )
    p.add_argument(
        "--seed",
        type=_bot_seed,
        help="seed the strategy's tie-breaks (reproducible; 0 to 2**64-1)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="say what the bot does")

    replay_help = "step through a finished race, every racer's board"
    p = command(
        "replay",
        replay_help,
        cmd_replay,
        f"{replay_help}: commands n, p, q … one a line on standard input (a pipe works; "
        "none there and not a terminal: status 2)",
    )
    p.add_argument("race", help="a saved race id (see `solrace races`) or a result file")
    p.add_argument(
        "--step",
        type=_step,
        help=f"log index to show (0 = the deal, at most {limits.MAX_LOG_LEN}; past the "
        "end: the final position)",
    )
    p.add_argument(
        "--racer", type=_racer, help="racer id or name (with --print; default: first place)"
    )
    p.add_argument("--print", action="store_true", help="print one board and exit")

    p = command("verify", "check a finished race's commitment, logs and standings", cmd_verify)
    p.add_argument("race", help="a saved race id (see `solrace races`) or a result file")

    p = command(
        "fetch",
        "get a finished race from the server's archive, or compare a saved one with it",
        cmd_fetch,
    )
    p.add_argument("race", help="a race id, a saved race (see `solrace races`) or a result file")

    p = command("races", "list the finished races saved on this computer", cmd_races)
    p.add_argument(
        "--limit",
        type=whole(1, MAX_RACES_LISTED),
        default=30,
        help="list at most this many, newest first (default 30)",
    )
    return parser


#: Where ``--server`` typed before the command is noted (:func:`_one_server`).
SERVER_BEFORE: Final = "server_before"


def _one_server(args: argparse.Namespace) -> None:
    """``args.server``: the one ``--server`` typed, before or after the command, or
    None. Typed more than once, a bad argument: argparse kept the last, and ``--server
    A --server B`` asked B alone — one who meant both to be tried in turn lost A
    without a word (that is ``--server A,B``)."""
    given = [*(getattr(args, SERVER_BEFORE, None) or []), *(getattr(args, "server", None) or [])]
    # an offline command takes none at all, which main() says: "give it once; … --server
    # A,B" sent one to a flag refused the next time
    if len(given) > 1 and args.command not in OFFLINE_COMMANDS:
        times = "twice" if len(given) == 2 else f"{len(given)} times"
        shown = ", then ".join(quoted(url) for url in given)
        joined = ",".join(given)
        if len(joined) > MAX_URL_SHOWN or not joined.isprintable():
            joined = "URL1,URL2"
        args.command_parser.error(
            f"argument --server: given {times} ({shown}): give it once; to try several "
            f"servers in turn, one --server with commas: --server {joined}"
        )
    args.server = given[0] if given else None
    if hasattr(args, SERVER_BEFORE):
        delattr(args, SERVER_BEFORE)


def main(argv: Sequence[str] | None = None) -> int:
    degrade_gracefully()  # before a word is said, --help included
    args, extra = build_parser().parse_known_args(argv)
    if extra:  # said by the command's parser: `solrace rooms: …`, its --help
        args.command_parser.error(f"unrecognized arguments: {as_typed(extra)}")
    run: Callable[[argparse.Namespace], int] = args.run
    if args.command in OFFLINE_COMMANDS:
        if getattr(args, "server", None) is not None:
            return _bad_arguments(args, "it works on this computer's saved races: no --server")
    else:
        try:
            _check_servers(args)
        except BadServerURL as exc:
            return _fail(str(exc))
    if sys.stdout is None:  # started with standard output closed (`solrace races >&-`)
        return output_unusable("solrace", "standard output is closed", EXIT_FAILED)
    if args.command in SAVING_COMMANDS:
        problem = config.config_dir_problem()
        if problem is not None:
            _err().print(Text(f"solrace: {problem} ({NOT_KEPT})", style="yellow"))
    try:
        status = run(args)
        sys.stdout.flush()  # a full disk fails here, inside the try, not at exit
        return status
    except BrokenPipeError:
        return reader_gone()  # `solrace races | head`: quietly, 141
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except config.ConfigDirUnusable as exc:  # what it would read or write cannot be there
        return _fail(str(exc))
    except ConnectionError as exc:  # a server that went away mid-command
        return _fail(f"the connection to the server failed: {exc.strerror or exc}")
    except OSError as exc:  # a file, or the output, that cannot be used
        why = exc.strerror or str(exc)
        if exc.filename is None and exc.errno in OUTPUT_ERRNOS:
            return output_unusable("solrace", why, EXIT_FAILED)
        return _fail(why if exc.filename is None else f"{file_name(exc)}: {why}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
