"""``solrace replay``: step through a finished race, every racer's board at once.

The race is over and its seed revealed, so the whole board can be shown, face-down
cards included: each racer's game is re-dealt from the seed and its move log replayed
with the engine (the same code that judged the race). A *step* is a log index: step 0
is the deal, step k the position after the racer's k-th log entry; a racer whose log is
shorter than the step shows its final position. Face-down cards are written in lower
case (docs/rules.md position notation) and dimmed on a terminal.

Input is line-based on purpose (``n``, ``p``, a step number, ``q``): it works in any
terminal, through pipes and in tests, without raw-mode key reading.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from solrace.digits import digits_value, is_digits
from solrace.quoting import quoted
from solrace.rules import RulesError, deal, position_dict
from solrace.rules.log import apply_entry

from .printable import printable
from .results import SavedResult
from .verify import illegal_entry


@dataclass
class Track:
    """One racer's game, position by position (``positions[k]`` after k entries)."""

    racer: int
    name: str
    standing: dict[str, Any]
    log: list[str]
    positions: list[dict[str, Any]]
    #: Set when the log stops being legal (:func:`~.verify.illegal_entry`): the replay
    #: ends before that entry, and ``positions`` are the legal ones.
    error: str | None = None

    def at(self, step: int) -> dict[str, Any]:
        return self.positions[min(step, len(self.positions) - 1)]

    def move_at(self, step: int) -> str | None:
        """The entry that led to ``step`` (None at the deal or past the log's end)."""
        return self.log[step - 1] if 1 <= step <= len(self.log) else None


def tracks(saved: SavedResult) -> list[Track]:
    """Replay every racer of ``saved`` with the engine, keeping each position."""
    seed = int(saved.result["seed"])
    found: list[Track] = []
    for standing in saved.standings:
        log = [str(e) for e in standing.get("log") or []]
        board = deal(saved.variant, seed, saved.options)
        positions = [position_dict(board)]
        error = None
        for i, entry in enumerate(log):
            try:
                apply_entry(board, entry)
            except RulesError as exc:
                error = f"log {illegal_entry(log, i, exc)}"
                break
            positions.append(position_dict(board))
        found.append(
            Track(
                int(standing["racer"]), printable(standing["name"]), standing, log, positions, error
            )
        )
    return found


def not_replayed(all_tracks: Sequence[Track]) -> str | None:
    """Why the race does not replay — its first racer whose log stops being legal, in
    one line — or None when every log replays. Shown only as a board's ``!!`` line,
    such a race exited 0 as one that replays (a newcomer walk): it exits 1, as a race
    ``verify`` fails does (docs/client.md, "Exit status")."""
    broken = next((t for t in all_tracks if t.error), None)
    if broken is None:
        return None
    return printable(f"racer {broken.racer} ({broken.name}): {broken.error}")


def find_track(all_tracks: list[Track], who: str) -> Track:
    """A racer by id (the digits 0-9, as many as int() reads: ``'²'`` and 5,000 nines
    went to int(), a traceback), or by name (case-insensitive)."""
    racer = digits_value(who)
    for track in all_tracks:
        if racer is not None and track.racer == racer:
            return track
    for track in all_tracks:
        if track.name.casefold() == who.casefold():
            return track
    known = ", ".join(f"{t.racer} ({t.name})" for t in all_tracks)
    raise LookupError(f"no racer {quoted(who)} in this race; racers: {known}")


def last_step(all_tracks: list[Track]) -> int:
    return max((len(t.positions) - 1 for t in all_tracks), default=0)


# ---------------------------------------------------------------- plain text
def _foundations(position: Mapping[str, Any]) -> str:
    parts = []
    for suit, top in position["foundations"].items():
        tops = "/".join(map(str, top)) if isinstance(top, list) else str(top)
        parts.append(f"{suit} {tops}")
    return "  ".join(parts)


def _heading(saved: SavedResult, track: Track, step: int) -> list[str]:
    s = track.standing
    place = f", place {s['place']}" if s.get("place") is not None else ""
    done = len(track.positions) - 1
    move = track.move_at(step)
    where = f"step {min(step, done)} of {done}"
    if step > done and track.error:
        # Not "final position": the log goes on, and the replay cannot follow it.
        where += f" (where the log stops being legal: entry {done + 1} of {len(track.log)} is not)"
    elif step > done:
        where += " (final position)"
    elif move is not None:
        where += f" · last move {move}"
    else:
        where += " · the deal"
    lines = [
        f"race {saved.race} · {saved.variant} · racer {track.racer} {track.name} "
        f"({s.get('status')}{place})",
        where,
    ]
    if track.error:
        lines.append(f"!! {track.error}")
    return [printable(line) for line in lines]


def board_text(saved: SavedResult, track: Track, step: int) -> str:
    """One racer's board at ``step`` as plain text (``--print``): one line per column,
    bottom card first, face-down cards in lower case."""
    position = track.at(step)
    lines = _heading(saved, track, step)
    lines.append(f"foundations  {_foundations(position)}")
    if position["stock"] or position["waste"] or saved.variant in ("klondike", "australian"):
        lines.append(f"stock        {' '.join(position['stock']) or '-'}")
        lines.append(f"waste        {' '.join(position['waste']) or '-'}")
    for c, column in enumerate(position["tableau"], start=1):
        lines.append(f"{c:>2}  {' '.join(column)}".rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------- rich
def _card(name: str) -> Text:
    if name.islower():
        return Text(name, style="dim")
    return Text(name, style="bold red" if name[-1] in "HD" else "bold")


def _board_panel(saved: SavedResult, track: Track, step: int) -> RenderableType:
    position = track.at(step)
    heading = _heading(saved, track, step)
    grid = Table.grid(padding=(0, 1))
    columns = position["tableau"]
    for _ in columns:
        grid.add_column(justify="left", min_width=2)
    grid.add_row(*(Text(str(c), style="cyan") for c in range(1, len(columns) + 1)))
    for row in range(max((len(c) for c in columns), default=0)):
        grid.add_row(*(_card(col[row]) if row < len(col) else Text("") for col in columns))
    parts: list[RenderableType] = [Text(heading[1]), Text(f"foundations  {_foundations(position)}")]
    if position["stock"] or position["waste"]:
        stock = Text("stock  ")
        stock.append_text(Text(" ").join(_card(n) for n in position["stock"]) or Text("-"))
        waste = Text("waste  ")
        waste.append_text(Text(" ").join(_card(n) for n in position["waste"]) or Text("-"))
        parts += [stock, waste]
    if track.error:
        parts.append(Text(track.error, style="bold red"))
    parts.append(grid)
    return _BoardPanel(Group(*parts), track)


#: The cells of a panel's width its title cannot use: the corners and the rule before
#: and after it (``╭─`` … ``─╮``), and the space rich pads it with on either side.
_TITLE_FRAME = 6


def panel_title(track: Track, room: int) -> str:
    """The title of ``track``'s board panel in at most ``room`` cells: racer number,
    name, status and place (``2 · Ann · resigned · #2``) when they fit.

    rich crops a title that does not fit from its end, and the place is last: a panel
    narrower than its title (a narrow terminal) read ``2 · Ann · resigned ·``. The place is what
    a reader of a finished race looks for, so the status goes first, then the name
    shortens (``Carol…``), and the place stays while anything can."""
    s = track.standing
    place = f"#{s['place']}" if s.get("place") is not None else ""

    def join(*parts: str) -> str:
        return " · ".join(part for part in parts if part)

    racer = str(track.racer)
    for title in (
        join(racer, track.name, printable(s.get("status")), place),
        join(racer, track.name, place),
    ):
        if cell_len(title) <= room:
            return title
    name_room = room - cell_len(join(racer, "", place)) - len(" · ")
    if name_room >= 2:  # one cell of the name and the ellipsis
        name = Text(track.name)
        name.truncate(name_room, overflow="ellipsis")
        return join(racer, name.plain, place)
    return join(racer, place) if cell_len(join(racer, place)) <= room else place or racer


class _BoardPanel:
    """A racer's board in a panel whose title fits the width it is given.

    The width is known only when the row of panels is laid out (the terminal's width
    shared between the racers), so the title is chosen then; measured, the panel asks
    for its full title, as a plain Panel does, and a wide terminal shows it whole."""

    def __init__(self, body: RenderableType, track: Track) -> None:
        self.body = body
        self.track = track

    def _panel(self, title: str) -> Panel:
        # Text, not a string, which rich reads as markup: a racer named ``[/]x`` (a
        # solrace server takes the name) made the stepper a traceback.
        return Panel(self.body, title=Text(title), title_align="left", expand=False)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        full = panel_title(self.track, options.max_width)
        return Measurement.get(console, options, self._panel(full))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._panel(panel_title(self.track, options.max_width - _TITLE_FRAME))


def boards_per_row(widths: Sequence[int], room: int) -> int:
    """How many boards, ``widths`` cells wide, go side by side in ``room`` cells (one
    apart): the most for which every row of that many fits, and at least one."""
    for per_row in range(len(widths), 1, -1):
        rows = [widths[i : i + per_row] for i in range(0, len(widths), per_row)]
        if all(sum(row) + len(row) - 1 <= room for row in rows):
            return per_row
    return 1


class _Boards:
    """The racers' boards in rows, as many side by side as fit at their own width.

    One row of all of them, given the terminal's width to share, cut each board to its
    share: at 80 columns four Yukon boards lost tableau columns 6 and 7 without a mark,
    and their headings wrapped mid-line. The width is known only when rendered."""

    def __init__(self, panels: list[RenderableType]) -> None:
        self.panels = panels

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [Measurement.get(console, options, p).maximum for p in self.panels]
        per_row = boards_per_row(widths, options.max_width)
        for start in range(0, len(self.panels), per_row):
            row = Table.grid(padding=(0, 1))
            chunk = self.panels[start : start + per_row]
            for _ in chunk:
                row.add_column()
            row.add_row(*chunk)
            yield row


def step_view(saved: SavedResult, all_tracks: list[Track], step: int) -> RenderableType:
    """Every racer's board at ``step``, side by side as many as fit, in rows."""
    head = Text(
        f"race {saved.race} · {saved.variant} · step {step} of {last_step(all_tracks)}",
        style="bold",
    )
    return Group(head, _Boards([_board_panel(saved, t, step) for t in all_tracks]))


HELP = "n/Enter next · p previous · <number> go to step · f first · l last · q quit"
_NEXT = {"", "n", "next", "\x1b[c", "→"}
_PREVIOUS = {"p", "prev", "previous", "\x1b[d", "←"}


class NoCommands(Exception):
    """Standard input is not a terminal and ends before its first command (``<
    /dev/null``, an empty pipe): the stepper would replay nothing, so it does not start
    (the command line says so in one line, status 2)."""


def step_through(
    saved: SavedResult,
    console: Console,
    read: Callable[[str], str] | None = None,
    start: int = 0,
    all_tracks: list[Track] | None = None,
) -> int:
    """The interactive stepper: show a step, read a command line (``read``, by default
    :func:`input`), repeat. ``all_tracks``: :func:`tracks` of ``saved``, if the caller
    has them already. A ``start`` past the last step starts at the last.

    Raises :class:`NoCommands` before showing anything when standard input is not a
    terminal and holds no command: a redirected replay that showed step 0 and ended
    with status 0 looked like success to a script."""
    # input()'s prompt ends a line only when a terminal echoes the command typed after
    # it: piped commands, and Ctrl-D anywhere, would leave the shell's prompt after ours
    piped = read is None and not (sys.stdin is not None and sys.stdin.isatty())
    read = read or input
    first = _first_piped_command(read) if piped else None
    all_tracks = tracks(saved) if all_tracks is None else all_tracks
    last = last_step(all_tracks)
    step = max(0, min(start, last))
    while True:
        if console.is_terminal:
            console.clear()
        console.print(step_view(saved, all_tracks, step))
        console.print(Text(HELP, style="dim"))
        try:
            prompt = f"step {step}/{last}> "
            if first is None:
                command = read(prompt).strip().lower()
            else:  # read already, before the first board: shown as input() would
                console.print(prompt, end="")
                command, first = first.strip().lower(), None
        except EOFError:  # the end of piped commands (or Ctrl-D): done
            console.print()
            return 0
        if piped:  # not echoed: end the prompt's line before what follows
            console.print()
        # KeyboardInterrupt (Ctrl-C) goes up: the command line ends it with 130
        if command in _NEXT:
            step = min(last, step + 1)
        elif command in _PREVIOUS:
            step = max(0, step - 1)
        elif command in ("q", "quit", "exit"):
            return 0
        elif command in ("f", "first"):
            step = 0
        elif command in ("l", "last"):
            step = last
        elif is_digits(command):  # past int()'s digits (None): past the end as well
            number = digits_value(command)
            step = last if number is None else min(last, number)
        else:
            console.print(Text(f"unknown command {quoted(command)}: {HELP}", style="yellow"))


def _first_piped_command(read: Callable[[str], str]) -> str:
    """The first line of a standard input that is not a terminal (read with no prompt:
    the first board is not shown yet), or :class:`NoCommands` if it has none."""
    try:
        return read("")
    except EOFError:
        raise NoCommands(
            "replay: no commands on standard input (it is not a terminal and is empty): "
            "pipe some (n, p, q …), or use --print to print one board"
        ) from None
