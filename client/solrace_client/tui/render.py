"""Pure rendering: board views, progress bars, the lobby and the standings as rich
``Text``. No terminal, no Textual: the widgets call these with their size.

A card is three cells (`` A♠``, ``10♥``) on a light background, red or black; a
face-down card is a back (``░░░``), or, when a column would not fit, all of a column's
face-down cards are one row counting them (``▒×5``). A column is four cells wide, so
seven Yukon columns take 28 and double Yukon's ten take 40.
"""

from __future__ import annotations

import re
import textwrap
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text
from solrace.rules import RulesError, new_board
from solrace.rules.cards import NAMES, SUITS

from .. import wire
from ..boardview import decks_of, recycle_is_legal
from ..results import counted, finish_ms, time_decimals
from ..verify import CHECKING, Verdict
from .controller import (
    FOUNDATION,
    STOCK,
    TABLEAU_ZONE,
    WASTE,
    Layout,
    Marks,
    pile_rank,
    pile_suit,
)
from .news import CERTIFIED_WORDS

CARD_W = 3
CELL_W = CARD_W + 1
SUIT_SYMBOL = {"C": "♣", "D": "♦", "H": "♥", "S": "♠"}
RED_SUITS = frozenset("DH")
RANK_LABEL = {"T": "10"}

FACE_BG = "grey93"
STYLE_RED = Style.parse(f"bold red3 on {FACE_BG}")
STYLE_BLACK = Style.parse(f"bold black on {FACE_BG}")
STYLE_BACK = Style.parse("bright_blue on dark_blue")
STYLE_BACK_ALT = Style.parse("bright_blue on blue3")  # every other back, to count them
STYLE_EMPTY = Style.parse("grey50")
STYLE_DIM = Style.parse("grey50")
CURSOR_BG = "yellow1"
PICKED_BG = "light_sky_blue1"
DEST_BG = "pale_green1"


@dataclass(frozen=True)
class Look:
    """How the board marks the cursor, the picked cards and where they may go
    (``dest``: a destination's top card, ``dest_label``: its column number and the
    foundations' label), and the help's words for it."""

    cursor: Style
    picked: Style
    dest: Style | None
    dest_label: Style
    legend: str


#: In colour: backgrounds.
COLOUR = Look(
    cursor=Style(bgcolor=CURSOR_BG),
    picked=Style(bgcolor=PICKED_BG),
    dest=Style(bgcolor=DEST_BG),
    dest_label=Style.parse("bold black on green3"),
    legend="Yellow: cursor · blue: picked cards · green: where they may go",
)
#: Under NO_COLOR (https://no-color.org) the terminal gets no colours, or greys in which
#: those backgrounds and a card's face are one shade (the cursor was invisible): cell
#: attributes instead, which survive it. A destination's top card is left alone, its
#: column number marked, so that the underline says "picked" only.
MONO = Look(
    cursor=Style(reverse=True, bold=True),
    picked=Style(underline=True),
    dest=None,
    dest_label=Style(reverse=True, bold=True),
    legend="Inverted: cursor · underlined: picked cards · "
    "inverted column numbers: where they may go",
)

#: Rows the board needs above the tableau: labels, the top row, the column numbers.
HEADER_ROWS = 3


def total_cards(variant: str) -> int:
    """Cards in the variant's deal (52 a deck)."""
    return len(NAMES) * decks_of(variant)


#: A face-up card whose identity a spectator's fair view withholds (docs/fairness.md).
WITHHELD_LABEL = " ? "


def card_label(name: str | None) -> str:
    """`` A♠``, ``10♥``: a card's three cells (`` ? `` for a withheld card)."""
    if name is None:
        return WITHHELD_LABEL
    rank, suit = name[0], name[1]
    return f"{RANK_LABEL.get(rank, rank):>2}{SUIT_SYMBOL[suit]}"


def card_style(name: str | None) -> Style:
    if name is None:
        return STYLE_BLACK
    return STYLE_RED if name[1] in RED_SUITS else STYLE_BLACK


def card_text(name: str | None, mark: Style | None = None) -> Text:
    """A face-up card, with ``mark`` (a :class:`Look`'s) on it."""
    style = card_style(name)
    if mark is not None:
        style = style + mark
    return Text(card_label(name), style=style)


def _marked(style: Style, mark: Style | None) -> Style:
    """A back's or an empty place's ``style`` with ``mark`` on it: on a marking
    background its text turns black (blue or grey does not read on a light one)."""
    if mark is None:
        return style
    if mark.bgcolor is not None:
        style = style + Style(color="black")
    return style + mark


def back_text(count: int | None = None, mark: Style | None = None, *, alt: bool = False) -> Text:
    """A face-down card (``░░░``), or ``▒×n`` for ``count`` of them. ``alt`` shades a
    back differently from the one under it, so a stack can be counted."""
    label = "░░░" if count is None else (f"▒×{count}" if count < 10 else f"▒{count}")
    return Text(label, style=_marked(STYLE_BACK_ALT if alt else STYLE_BACK, mark))


def slot_text(label: str = " · ", mark: Style | None = None) -> Text:
    """An empty place (column, foundation, waste)."""
    return Text(f"{label:^{CARD_W}}"[:CARD_W], style=_marked(STYLE_EMPTY, mark))


def _mark(
    marks: Marks | None, look: Look, zone: str, col: int, *, dest: bool = False
) -> Style | None:
    """The mark on a top-row place (stock, waste, a foundation pile)."""
    if marks is None:
        return None
    cursor = marks.cursor
    if cursor is not None and cursor.zone == zone and cursor.col == col and zone != TABLEAU_ZONE:
        return look.cursor
    picked = marks.picked
    if picked is not None and picked.zone == zone and picked.col == col and zone != TABLEAU_ZONE:
        return look.picked
    if dest:
        return look.dest
    return None


# ------------------------------------------------------------------- top row
def _top_row(view: Mapping[str, Any], marks: Marks | None, look: Look) -> tuple[Text, Text]:
    """(labels, cards) of the stock, waste and foundations."""
    layout = Layout.of(view)
    labels = Text(no_wrap=True, overflow="crop")
    cards = Text(no_wrap=True, overflow="crop")
    if layout.has_stock:
        stock = int(view.get("stock") or 0)
        mark = _mark(marks, look, STOCK, 0)
        if stock:
            cards.append_text(back_text(stock, mark))
        else:
            cards.append_text(slot_text("↺" if recycle_is_legal(view) else "·", mark))
        cards.append(" ")
        labels.append("stk ", STYLE_DIM)
        waste = list(view.get("waste") or [])
        shown = Layout.shown_of(view)  # the controller's ↑ and ↓ go by it too
        visible = waste[-shown:]
        mark = _mark(marks, look, WASTE, 0)
        width = CELL_W * shown
        start = len(cards)
        if not visible:
            cards.append_text(slot_text(" · ", mark))
        for i, name in enumerate(visible):
            top = i == len(visible) - 1
            cards.append_text(card_text(name, mark if top else None))
            if not top:
                cards.append(" ")
        cards.append(" " * (width - (len(cards) - start)))
        labels.append(f"{'waste':<{width}}", STYLE_DIM)
        cards.append(" ")
        labels.append(" ")
    to_f = marks is not None and marks.to_foundation
    labels.append("foundations", look.dest_label if to_f else STYLE_DIM)
    for pile in range(layout.piles):
        suit, _ = pile_suit(view, pile)
        rank = pile_rank(view, pile)
        mark = _mark(marks, look, FOUNDATION, pile, dest=to_f)
        letter = SUITS[suit]
        if rank:
            cards.append_text(card_text("A23456789TJQK"[rank - 1] + letter, mark))
        else:
            cards.append_text(slot_text(SUIT_SYMBOL[letter], mark))
        cards.append(" ")
    return labels, cards


# ------------------------------------------------------------------- tableau
def _column_cells(
    view: Mapping[str, Any],
    c: int,
    marks: Marks | None,
    look: Look,
    rows: int,
    compress: bool,
) -> list[Text]:
    column = view["tableau"][c]
    down, up = int(column["down"]), list(column["up"])
    cursor = marks.cursor if marks else None
    picked = marks.picked if marks else None
    here = cursor is not None and cursor.zone == TABLEAU_ZONE and cursor.col == c
    dest = marks is not None and c in marks.dests
    picked_from = (
        len(up) - picked.count
        if picked is not None and picked.zone == TABLEAU_ZONE and picked.col == c
        else None
    )

    def face(i: int) -> Text:
        mark = None
        if here and cursor is not None and i == min(cursor.index, len(up) - 1):
            mark = look.cursor
        elif picked_from is not None and i >= picked_from:
            mark = look.picked
        elif dest and i == len(up) - 1:
            mark = look.dest
        return card_text(up[i], mark)

    # An empty column, or the face-down card of a column with none face up, is marked
    # as its top card would be.
    bare = look.cursor if here else (look.dest if dest else None)
    if not up and not down:
        return [slot_text(" · ", bare)]
    back_mark = None if up else bare
    head: list[Text]
    if compress and down:
        head = [back_text(down, back_mark)]
    else:
        head = [
            back_text(None, back_mark if i == down - 1 else None, alt=i % 2 == 1)
            for i in range(down)
        ]
    room = rows - len(head)
    if len(up) <= room:
        return head + [face(i) for i in range(len(up))]
    # Too long even so: show a window of the face-up cards that holds the cursor.
    room = max(1, room - 1)  # one row for the "more above" marker
    start = len(up) - room
    if here and cursor is not None and cursor.index < start:
        start = cursor.index
    cells = [*head, _more(start, above=True)]
    end = start + room
    if end < len(up):
        end -= 1
        cells += [face(i) for i in range(start, end)]
        cells.append(_more(len(up) - end, above=False))
    else:
        cells += [face(i) for i in range(start, end)]
    return cells


def _more(count: int, *, above: bool) -> Text:
    """``⋮+n`` (``n⋮`` below): ``count`` face-up cards above (below) a column's window,
    in three cells; from ten on without the ``+`` (``⋮12``), as ``▒12`` counts backs —
    cut to three cells, ``⋮+12`` read ``⋮+1``."""
    label = f"+{count}" if count < 10 else str(count)
    return Text(f"⋮{label}" if above else f"{label}⋮", style=STYLE_DIM)


def board_height(view: Mapping[str, Any], compress: bool = False) -> int:
    """Rows the tableau needs (without the header rows)."""
    heights = []
    for column in view["tableau"]:
        down, up = int(column["down"]), len(column["up"])
        heights.append(max(1, (min(down, 1) if compress else down) + up))
    return max(heights, default=1)


def _stock_lines(view: Mapping[str, Any]) -> list[Text]:
    """Thoughtful Klondike's stock, face up to its player (docs/rules.md): its cards,
    bottom to top (the last is drawn next), as many a line as the board is wide, each
    in a tableau column's cell. Only the owner's view lists them (``stock_cards``); the
    top row's ``▒24`` alone hid from the player what the variant shows them."""
    names = list(view.get("stock_cards") or [])
    per_line = max(1, board_width(view) // CELL_W)
    lines = []
    for start in range(0, len(names), per_line):
        line = Text(" ", no_wrap=True, overflow="crop").join(
            card_text(name) for name in names[start : start + per_line]
        )
        lines.append(line)
    return lines


def board_width(view: Mapping[str, Any]) -> int:
    """Cells the board needs: its columns, or its top row when that is wider (Klondike
    draw-3: stock, three waste cards and four foundations take 33 cells, seven columns
    28) — a narrower board would wrap the foundations onto the next line."""
    labels, cards = _top_row(view, None, COLOUR)
    return max(len(view["tableau"]) * CELL_W, labels.cell_len, cards.cell_len)


def render_board(
    view: Mapping[str, Any],
    marks: Marks | None = None,
    max_rows: int | None = None,
    *,
    header: bool = True,
    look: Look = COLOUR,
) -> Text:
    """A board view as text: top row (stock, waste, foundations), the stock's cards
    where its player sees them (thoughtful Klondike), column numbers, and the tableau,
    fitted into ``max_rows`` rows in all (compressing face-down cards to a count and,
    if still too long, showing a window of long columns); ``marks`` drawn the
    ``look``'s way."""
    lines: list[Text] = []
    if header:
        labels, top = _top_row(view, marks, look)
        lines += [labels, top, *_stock_lines(view)]
        numbers = Text(no_wrap=True, overflow="crop")
        for c in range(len(view["tableau"])):
            label = f"{c + 1:^{CARD_W}}"
            if marks is not None and c in marks.dests:
                numbers.append(label, look.dest_label)
            else:
                numbers.append(label, STYLE_DIM)
            numbers.append(" ")
        lines.append(numbers)
    rows = board_height(view)
    if max_rows is not None:
        rows = max(2, max_rows - len(lines))
    compress = board_height(view) > rows
    columns = [
        _column_cells(view, c, marks, look, rows, compress) for c in range(len(view["tableau"]))
    ]
    depth = max(len(cells) for cells in columns) if columns else 0
    for r in range(depth):
        line = Text(no_wrap=True, overflow="crop")
        for cells in columns:
            if r < len(cells):
                line.append_text(cells[r])
            else:
                line.append(" " * CARD_W)
            line.append(" ")
        line.rstrip()
        lines.append(line)
    return Text("\n", no_wrap=True, overflow="crop").join(lines)


def board_min_rows(view: Mapping[str, Any]) -> int:
    """The fewest rows :func:`render_board` draws this board in whole: every column's
    top card drawn, what is under it counted (``▒×5``, ``⋮+n``). Fewer rows cut it."""
    rows = 1
    while len(render_board(view, max_rows=rows).split("\n")) > rows:
        rows += 1
    return rows


def fits(text: Text, width: int, height: int) -> bool:
    """Whether ``text`` shows whole in ``width`` × ``height`` cells: a longer line is
    wrapped by Textual (a board's tenth column drawn under the others), extra lines cut."""
    lines = text.split("\n")
    return len(lines) <= height and all(line.cell_len <= width for line in lines)


def too_small(what: str, need: tuple[int, int], terminal: tuple[int, int]) -> Text:
    """What a screen says instead of a board it cannot draw whole (``what``: "the
    board needs"): the size it needs and the terminal's, columns × rows, the most
    useful words first (a small terminal cuts the rest)."""
    return Text(
        f"too small: {what} {need[0]}×{need[1]}\n"
        f"(this terminal is {terminal[0]}×{terminal[1]}):\n"
        "make it larger; q quits",
        style="bold",
    )


# ------------------------------------------------------------------ progress
STATUS_STYLE = {
    "finished": "bold green",
    "playing": "default",
    "waiting": "grey62",
    "stuck": "yellow",
    "resigned": "grey50",
    "left": "grey50",
    "timeout": "grey50",
}


def progress_bar(count: int, total: int, width: int) -> Text:
    width = max(1, width)
    filled = round(width * count / total) if total else 0
    filled = min(width, max(0, filled if count == 0 or filled else 1))
    bar = Text(no_wrap=True)
    bar.append("█" * filled, "green")
    bar.append("░" * (width - filled), "grey35")
    return bar


#: A racer's statuses that mean it is still in the race: one offline is said offline.
_IN_THE_RACE: Final = frozenset({"playing", "stuck", "waiting"})


def shown_status(info: Mapping[str, Any]) -> str:
    """A racer's status as the screens say it: ``offline`` for one still in the race
    whose connection is gone, else its status (``finished``, ``resigned``, …). One
    rule for the racers panel, its brief and a watched board's title, which said
    ``playing`` of an offline racer (a racer-experience audit)."""
    status = str(info.get("status") or "")
    if info.get("online") is False and status in _IN_THE_RACE:
        return "offline"
    return status


def progress_brief(
    racers: Sequence[Mapping[str, Any]], total: int, me: int | None, width: int
) -> list[str]:
    """The racers' panel in a few words, for under a board that leaves it no room: one
    part a racer — its name (``▶`` for you), cards up, and its status when it is not
    playing (``#1 finished``, ``offline``) — in lines of ``width``."""
    parts = []
    for info in racers:
        mark = "▶" if info.get("racer") == me else ""
        part = f"{mark}{info.get('name', '?')} {int(info.get('foundation') or 0)}/{total}"
        status = shown_status(info)
        place = info.get("place")
        if status != "playing":
            part += f" {f'#{place} ' if place else ''}{status}"
        parts.append(part)
    return wrap_parts(parts, width, "  ")


def cut_to_cells(text: str, cells: int) -> str:
    """``text`` in at most ``cells`` terminal cells, cut with an ellipsis. A wide
    character (CJK, most emoji) takes two cells: a name of 24 of them, counted as 24,
    wrapped the racers panel's line and pushed its status under it (a newcomer's
    audit)."""
    if cell_len(text) <= cells:
        return text
    return set_cell_size(text, max(0, cells - 1)).rstrip(" ") + "…"


def pad_to_cells(text: str, cells: int) -> str:
    """``text`` cut to ``cells`` terminal cells (:func:`cut_to_cells`) and padded to
    them: a column of names. Cut and padded by characters, a name of wide characters
    took twice its column, and the flags and numbers after it were pushed out of line
    and off an 80-column screen (the lobby, the standings)."""
    cut = cut_to_cells(text, cells)
    return cut + " " * max(0, cells - cell_len(cut))


def render_progress(
    racers: Sequence[Mapping[str, Any]],
    total: int,
    me: int | None,
    width: int,
    *,
    host: int | None = None,
) -> Text:
    """Two lines a racer: name and status, then a bar of foundation cards."""
    lines: list[Text] = []
    width = max(12, width)
    for info in racers:
        name = str(info.get("name", "?"))
        place = info.get("place")
        mark = "▶" if info.get("racer") == me else " "
        status = shown_status(info)
        suffix = f"#{place} {status}" if place else status
        moves = info.get("moves")
        counter = f"{counted(moves, 'move')}  " if moves and width >= 24 else ""
        room = width - 2 - len(suffix) - len(counter)
        if room < 4:
            counter, room = "", width - 2 - len(suffix)
        label = cut_to_cells(name, max(2, room))
        line = Text(no_wrap=True, overflow="crop")
        line.append(mark, "bold cyan")
        line.append(label, "bold" if info.get("racer") == me else "")
        line.append(" " * max(1, width - 1 - cell_len(label) - len(counter) - len(suffix)))
        line.append(counter, STYLE_DIM)
        line.append(suffix, STATUS_STYLE.get(status, "default"))
        lines.append(line)
        count = int(info.get("foundation") or 0)
        numbers = f" {count}/{total}"
        bar = Text(" ", no_wrap=True, overflow="crop")
        bar.append_text(progress_bar(count, total, width - 1 - len(numbers)))
        bar.append(numbers)
        lines.append(bar)
    return Text("\n", no_wrap=True, overflow="crop").join(lines)


def format_ms(ms: int | None, decimals: int = 0) -> str:
    """``01:23`` (a clock), or with ``decimals`` ``5:12.5`` (a finish time)."""
    if ms is None:
        return "--:--"
    ms = max(0, int(ms))
    if decimals:
        # Rounded first, as ``solrace result`` rounds (``60.0s``), then split: the
        # seconds rounded on their own showed 59,960 ms as ``0:60.0``.
        whole, fraction = f"{ms / 1000:.{decimals}f}".split(".")
        minutes, seconds = divmod(int(whole), 60)
        return f"{minutes}:{seconds:02d}.{fraction}"
    minutes, rest = divmod(ms, 60_000)
    return f"{minutes:02d}:{rest // 1000:02d}"


def race_clock(
    phase: str | None,
    start_at_ms: int | None,
    ends_at_ms: int | None,
    now_ms: int,
) -> str:
    """``01:23 · 13:37 left`` during the race; ``starts in 2.4 s`` in the countdown.

    The time left is rounded up to the second, the time run down (as a countdown
    clock counts): the two add up to the limit, and ``00:00 left`` means the race is
    over — truncated, the last second said ``00:00 left`` while moves were still taken
    (a clock audit)."""
    if phase == "countdown" and start_at_ms is not None:
        return f"starts in {max(0.0, (start_at_ms - now_ms) / 1000):.1f} s"
    if phase == "racing" and start_at_ms is not None:
        text = format_ms(now_ms - start_at_ms)
        if ends_at_ms is not None:
            left_ms = -(-(ends_at_ms - now_ms) // 1000) * 1000
            text += f" · {format_ms(left_ms)} left"
        return text
    return ""


# --------------------------------------------------------------------- lobby
def wrap_parts(parts: Sequence[str], width: int, sep: str = " · ") -> list[str]:
    """``parts`` joined by ``sep`` into lines of at most ``width`` cells, breaking only
    between parts (a part longer than a line is cut, with an ellipsis). A line broken
    after a part ends with the separator's mark (`` ·``), which counts: a line that
    filled its width went two cells past it with the mark."""
    width = max(8, width)
    tail = sep.rstrip()
    lines: list[str] = []
    line = ""
    for index, part in enumerate(parts):
        room = width if index == len(parts) - 1 else width - cell_len(tail)
        part = cut_to_cells(part, room)
        if line and cell_len(line) + cell_len(sep) + cell_len(part) > room:
            lines.append(line + tail)
            line = part
        else:
            line = f"{line}{sep}{part}" if line else part
    if line:
        lines.append(line)
    return lines


def option_words(options: object) -> list[str]:
    """``["draw 3", "undo", "no auto flip"]``: the options in a few words each. Read
    through :mod:`~solrace_client.wire`: a faulty or hostile server's options sent as
    a string ended the lobby with an AttributeError."""
    words = []
    for key, value in sorted(wire.mapping(options).items(), key=lambda item: str(item[0])):
        label = str(key).replace("_", " ")
        if value is True:
            words.append(label)
        elif value is False:
            words.append(f"no {label}")
        elif value is None:
            words.append(f"{label} unlimited")
        else:
            words.append(f"{label} {value}")
    return words


def describe_options(options: object) -> str:
    """``draw 3 · undo · no auto flip``: the options in a few words."""
    return " · ".join(option_words(options))


def settings_words(settings: Mapping[str, Any]) -> list[str]:
    parts = [str(settings.get("variant", "?"))]
    parts.append(f"up to {settings.get('max_racers', '?')} racers")
    limit = wire.whole(settings.get("time_limit_s"))  # int() of "soon": a traceback
    if limit:
        parts.append(f"{limit // 60} min")
    if settings.get("private"):
        parts.append("private")
    if settings.get("quick"):
        parts.append("quick race")
    delay = settings.get("spectator_delay_s")
    if delay:
        parts.append(f"spectators {delay} s behind")
    if settings.get("spectators") == "open":
        parts.append("open spectating if every racer agrees")
    return parts


def describe_settings(settings: Mapping[str, Any]) -> str:
    return " · ".join(settings_words(settings))


def how_it_starts(settings: Mapping[str, Any]) -> str:
    """What starts the race, for anyone in the lobby (racers and spectators): lines
    ending in a newline."""
    if settings.get("quick"):
        return (
            "A quick race starts by itself once everyone is ready\n"
            "(or 20 s after the second racer arrives).\n"
        )
    return "The host starts the race, or it starts once everyone is ready.\n"


#: A lobby racer's name: cut to this many cells at most, and never below the least.
LOBBY_NAME_MAX: Final = 24
LOBBY_NAME_MIN: Final = 8
#: The rest of a lobby racer's row: "▶ ", two spaces, "· not ready", "  (host)".
LOBBY_FLAGS_W: Final = 2 + 2 + len("· not ready") + len("  (host)")


def render_lobby(
    racers: Iterable[Mapping[str, Any]],
    settings: Mapping[str, Any],
    code: str | None,
    host: int | None,
    me: int | None,
    width: int = 80,
    deal: str | None = None,
    server: str = "",
) -> Text:
    """The lobby: code, settings, ``deal`` (how the deal is made, in words), racers.
    ``server``: the `` --server URL`` the join command needs to work as printed
    (connection.server_flag): it was dropped, and a second terminal's ``solrace join
    CODE`` asked ws://127.0.0.1:8765 of a room on the server the host had typed."""
    text = Text(no_wrap=True, overflow="crop")
    text.append("Room code ", "bold")
    text.append(f" {code or '?'} ", "bold black on yellow1")
    # wrapped, never cut: in 40 columns Textual wrapped it mid-phrase ("others join
    # / with: solrace join K7QX2M") and cut the deal's words ("65 moves, e")
    join = f"others join with: solrace join {code or '?'}{server}"
    if text.cell_len + 3 + len(join) < width:
        text.append(f"   {join}\n", STYLE_DIM)
    else:
        text.append("\n")
        for line in wrap_parts(join.split(" "), width - 1, " "):
            text.append(line + "\n", STYLE_DIM)
    for line in wrap_parts(settings_words(settings), width - 1):
        text.append(line + "\n")
    for line in wrap_parts(option_words(settings.get("options") or {}), width - 1):
        text.append(line + "\n", STYLE_DIM)
    if deal is not None:
        for line in textwrap.wrap(deal, width - 1) or [""]:
            text.append(line + "\n", "bold green" if deal.startswith(CERTIFIED_WORDS) else "")
    text.append("\n")
    # A racer's row on one line: its name is cut to what the flags leave (24 cells
    # at most, LOBBY_NAME_MIN at least).
    name_w = max(LOBBY_NAME_MIN, min(LOBBY_NAME_MAX, width - 1 - LOBBY_FLAGS_W))
    text.append(f"  {'racer':<{name_w}}  ready\n", "bold")
    for info in racers:
        racer = info.get("racer")
        mark = "▶ " if racer == me else "  "
        name = pad_to_cells(str(info.get("name", "?")), name_w)
        text.append(mark, "bold cyan")
        text.append(f"{name}  ", "bold" if racer == me else "")
        # The host's flag too: any room starts once everyone, its host included, is
        # ready (the host may also start it with s once the others are).
        if info.get("ready"):
            text.append("✔ ready", "bold green")
        else:
            text.append("· not ready", STYLE_DIM)
        if racer == host:
            text.append("  (host)", "magenta")
        if info.get("online") is False:
            text.append("  (offline)", STYLE_DIM)
        text.append("\n")
    return text


# ----------------------------------------------------------------- standings
#: The standings' name column, in cells, and the mark of the player's own row.
STANDING_NAME_W: Final = 19
YOU: Final = " (you)"


def render_standings(
    result: Mapping[str, Any],
    settings: Mapping[str, Any],
    me: int | None,
    race_id: str | None,
    *,
    verdict: Verdict | None = None,
    width: int = 80,
) -> Text:
    """The race-over screen. ``verdict`` is the whole of ``solrace verify`` on this
    result (None: still being checked): the ✔ stands for the standings above it too,
    not only for the commitment."""
    variant = str(settings.get("variant", "yukon"))
    total = total_cards(variant)
    reasons = {
        "all_done": "everyone is done",
        "time_limit": "time is up",
        "abandoned": "everyone left",
    }
    text = Text(no_wrap=True, overflow="crop")
    text.append("Race over", "bold")
    text.append(f" — {reasons.get(str(result.get('reason')), str(result.get('reason')))}\n\n")
    text.append(" #  name                status     cards   moves  score    time\n", "bold")
    # Read through wire: a standing's moves or score of the wrong type (a list) ended
    # this screen with a TypeError in its format spec; verify's line names it.
    standings = wire.standings(result)
    decimals = time_decimals(standings)
    for s in standings:
        racer = s.get("racer")
        style = "bold cyan" if racer == me else ""
        name = str(s.get("name", "?"))
        if racer == me:  # the name cut, not the mark: a long one lost its "(you)"
            name = cut_to_cells(name, STANDING_NAME_W - len(YOU)) + YOU
        text.append(f"{wire.figure(s.get('place')):>2}  ", style)
        text.append(f"{pad_to_cells(name, STANDING_NAME_W)} ", style)
        status = str(s.get("status", ""))
        text.append(f"{status:<10} ", STATUS_STYLE.get(status, ""))
        cards = f"{wire.figure(s.get('foundation'), '?')}/{total}"
        elapsed = finish_ms(s)
        clock = format_ms(elapsed, decimals) if elapsed is not None else "-"
        moves, score = wire.figure(s.get("moves"), "?"), wire.figure(s.get("score"), "?")
        text.append(f"{cards:>7} {moves:>6} {score:>6} {clock:>8}\n", style)
    text.append("\n")
    text.append("seed ", STYLE_DIM)
    text.append(str(result.get("seed")), "bold")
    commitment = str(result.get("commitment") or "")
    text.append(f"  commitment {commitment[:16]}…", STYLE_DIM)
    text.append("\n")
    said, look = CHECKING, STYLE_DIM
    if verdict is not None:
        said, look = verdict.line, Style.parse("green" if verdict.ok else "bold red")
    for line in textwrap.wrap(said, max(20, width - 1)):  # said whole, however narrow
        text.append(line + "\n", look)
    text.append("Check every move yourself: ", STYLE_DIM)
    text.append(f"solrace verify {race_id or '?'}", "bold")
    text.append("\nWatch it again, every board: ", STYLE_DIM)
    text.append(f"solrace replay {race_id or '?'}", "bold")
    text.append("\n")
    return text


# --------------------------------------------------------------------- watch
def watch_columns(width: int, view_width: int) -> int:
    """How many boards of ``view_width`` cells fit side by side in ``width``."""
    return max(1, (width + 2) // (view_width + 2))


#: The narrowest a watched board's panel is (its title and info line).
WATCH_PANEL_MIN: Final = 20
#: Rows of a watched board's panel above the board: its title and its info line.
WATCH_TITLE_ROWS: Final = 2


def watch_panel_width(boards: Mapping[int, tuple[int, Mapping[str, Any]]]) -> int:
    """Cells of one board's panel on the watch screen: the widest board (Yukon's
    seven columns before any has come), and room for a title."""
    widths = [board_width(v) for _, v in boards.values()] or [7 * CELL_W]
    return max(max(widths), WATCH_PANEL_MIN)


def watch_needs(
    racers: Sequence[Mapping[str, Any]],
    boards: Mapping[int, tuple[int, Mapping[str, Any]]],
    width: int,
) -> tuple[int, int]:
    """The cells :func:`render_watch` needs, columns × rows, to draw one board whole at
    ``width``: its panel; its title and info line, the board in its fewest rows, and the
    note under it where not every board fits side by side."""
    panel = watch_panel_width(boards)
    rows = max((board_min_rows(v) for _, v in boards.values()), default=0)
    note = len(racers) > watch_columns(max(width, panel), panel)
    return panel, WATCH_TITLE_ROWS + rows + int(note)


def cards_up(view: Mapping[str, Any]) -> int:
    """Cards on a board view's foundations, those a fair view withholds included."""
    count = int(view.get("withheld_foundation") or 0)
    for top in (view.get("foundations") or {}).values():
        count += sum(top) if isinstance(top, list) else int(top)
    return count


#: How far past the spectator delay a board behind its racer's live count may be before
#: the watch screen calls it held back (frames in flight, a clock a little off).
HELD_SLACK_MS: Final = 1_000


class MoveTimes:
    """When each racer's move count changed, on the server's clock as this window saw
    its ``progress`` (``progress`` carries no time): for :func:`held_back`."""

    def __init__(self) -> None:
        #: Per racer, ascending.
        self.at: dict[int, list[int]] = {}
        self._count: dict[int, int] = {}
        #: The round the times were seen in (its commitment), None before a race.
        self._round: str | None = None

    def reset(self, racers: Iterable[Mapping[str, Any]], round_: str | None = None) -> None:
        """A fresh snapshot or a new round: the counts it gives. The times seen of a
        racer are kept when the snapshot is of the same round (``round_``, its
        commitment) and its move count has not gone down: a reconnection's snapshot
        wiped them, and a board held back by its racer's moves alone, ``held back``
        before, then said only its age under ``boards live`` (a spectator audit).
        They are real moves' times, each no later than the move: a board older than
        one is behind it whatever the racer did while this window was away."""
        counts = {int(r.get("racer") or 0): int(r.get("moves") or 0) for r in racers}
        same = round_ is not None and round_ == self._round
        self.at = {
            racer: times
            for racer, times in self.at.items()
            if same and counts.get(racer, -1) >= self._count.get(racer, 0)
        }
        self._count = counts
        self._round = round_

    def saw(self, racer: int, moves: int, now_ms: int, round_: str | None = None) -> None:
        """A ``progress``/``finished``: a time only when the count changed (not for a
        status alone, which a resign is). ``round_``: the round it is of (its
        commitment), which a later :meth:`reset` compares its snapshot's with; the
        times of another round are dropped."""
        if round_ is not None and round_ != self._round:
            self.at = {}
            self._round = round_
        if moves != self._count.get(racer, 0):
            self._count[racer] = moves
            self.at.setdefault(racer, []).append(now_ms)


def held_back(
    at_ms: int,
    now_ms: int,
    delay_ms: int,
    behind_on_cards: bool,
    moved_at: Sequence[int] = (),
) -> bool:
    """Whether a board stamped ``at_ms`` is behind its racer by more than the delay
    lets it be (``HELD_SLACK_MS`` more): its racer's live count is ahead of it
    (``behind_on_cards``) and it is that old, or the racer moved after it
    (``moved_at``: when its move count changed, ascending, on the server's clock as
    this window saw the ``progress``) longer ago than that. The move count catches a
    board held back while its cards up stayed the same ("3/52 up · 33 s ago" under
    "boards 5 s behind")."""
    late = delay_ms + HELD_SLACK_MS
    if behind_on_cards and now_ms - at_ms > late:
        return True
    after = bisect_right(moved_at, at_ms + HELD_SLACK_MS)  # its first move past the board
    return after < len(moved_at) and now_ms - moved_at[after] > late


def render_watch(
    racers: Sequence[Mapping[str, Any]],
    boards: Mapping[int, tuple[int, Mapping[str, Any]]],
    width: int,
    height: int,
    focus: int = 0,
    now_ms: int | None = None,
    delay_ms: int = 0,
    moved_at: Mapping[int, Sequence[int]] | None = None,
) -> Text:
    """Every racer's board side by side, as many as fit, starting at racer ``focus``
    (Tab moves it); each under a title with the racer's name, status and cards.
    ``delay_ms``: the room's spectator delay, which a board is expected to lag by;
    ``moved_at``: per racer, when its move count changed (:func:`held_back`)."""
    if not racers:
        return Text("nobody is racing")
    panel = watch_panel_width(boards)
    fit = min(len(racers), watch_columns(width, panel))
    order = [racers[(focus + i) % len(racers)] for i in range(fit)]
    if len(racers) > fit:
        words = f"{fit} of {len(racers)} boards: Tab for the others"
        if len(words) > width:
            # One row, as watch_needs counts it: 33 cells wrapped onto a second row at
            # 28–32 columns (one Yukon board), a row the boards had then lost.
            words = f"{fit}/{len(racers)} boards · Tab: others"
        note = Text(words, style=STYLE_DIM)
    else:
        note = None
    # Under a title and an info line, each board gets the rows the note leaves: a board
    # as high as the screen lost its last row, the top card of its longest column, to
    # the note (an audit: 51 of 52 cards drawn).
    board_rows = max(5, height - WATCH_TITLE_ROWS - (note is not None))
    panels: list[list[Text]] = []
    for slot, info in enumerate(order):
        racer = int(info.get("racer") or 0)
        number = (focus + slot) % len(racers) + 1
        title = Text(no_wrap=True, overflow="crop")
        title.append(f"{number} ", "bold black on grey70")
        status = shown_status(info)
        # The name gives way to the status: cropped whole at the panel's edge, a name
        # of 24 letters left no status over a Yukon board (finished? resigned?).
        room = panel - title.cell_len - 1 - len(f" {status}")
        title.append(f" {cut_to_cells(str(info.get('name', '?')), max(2, room))}", "bold")
        title.append(f" {status}", STATUS_STYLE.get(status, ""))
        entry = boards.get(racer)
        lines = [title]
        if entry is None:
            lines.append(Text("no board yet", style=STYLE_DIM))
        else:
            at_ms, view = entry
            total = total_cards(str(view.get("variant")))
            # The board's own count, as old as the board (the racer's live progress,
            # in the side panel, may be ahead of it by the spectator delay).
            shown = cards_up(view)
            info_line = Text(f"{shown}/{total} up", style=STYLE_DIM)
            if now_ms is not None and at_ms:
                age_ms = max(0, now_ms - at_ms)
                ahead = int(info.get("foundation") or 0) > shown
                if held_back(at_ms, now_ms, delay_ms, ahead, (moved_at or {}).get(racer, ())):
                    # Behind the racer's live count or moves by more than the delay:
                    # fair spectating holds it back (docs/tui.md), which the title
                    # says, or "boards live" above a board 0/52 up beside "finished
                    # 52/52" in the standings looked like a fault (a newcomer audit).
                    # Short, to fit a Yukon board's width.
                    info_line = Text(f"{shown}/{total} · ", style=STYLE_DIM)
                    info_line.append("held back", "italic")
                    info_line.append(f", {age_ms // 1000} s old", STYLE_DIM)
                else:
                    info_line.append(f" · {age_ms // 1000} s ago", STYLE_DIM)
            lines.append(info_line)
            lines += render_board(view, None, max_rows=board_rows).split("\n")
        panels.append(lines)
    depth = max(len(p) for p in panels)
    out: list[Text] = []
    for r in range(depth):
        line = Text(no_wrap=True, overflow="crop")
        for i, lines in enumerate(panels):
            cell = lines[r].copy() if r < len(lines) else Text()
            cell.truncate(panel, overflow="crop", pad=True)
            line.append_text(cell)
            if i < len(panels) - 1:
                line.append("  ")
        out.append(line)
    if note is not None:
        out = [*out[: max(1, height - 1)], note]
    return Text("\n", no_wrap=True, overflow="crop").join(out[: max(1, height)])


# ------------------------------------------------------------------ refusals
_CARD_NAME = re.compile(r"\b([A2-9TJQK])([CDHS])\b")


def plain_cards(message: str) -> str:
    """``7H cannot go on 8H`` → ``7♥ cannot go on 8♥``."""
    return _CARD_NAME.sub(lambda m: card_label(m.group(0)).strip(), message)


#: Every move's notation, by example (docs/rules.md), for a game this client's engine
#: does not know.
ALL_EXAMPLES: Final = ("3:4>6", "2>F", "W>5", "W>F", "FH>4", "U3", "D", "R", "undo")
#: The longest notation (``10:13>10``): a mistyped move is quoted up to this long.
MOVE_QUOTED: Final = 8


def move_examples(view: Mapping[str, Any] | None) -> list[str]:
    """One example of each move ``view``'s game has, as the engine resolves its variant
    and options: no waste in Yukon, ``FH2>4`` in double Yukon (which refuses ``FH>4``
    as ambiguous), no ``R`` with one pass (Australian), ``U3`` only with ``auto_flip``
    off."""
    if view is None:
        return list(ALL_EXAMPLES)
    try:
        board = new_board(str(view.get("variant")), dict(view.get("options") or {}))
    except RulesError:
        return list(ALL_EXAMPLES)
    options = board.options
    examples = ["3:4>6", "2>F"]
    if board.has_stock:
        examples += ["W>5", "W>F"]
    if options.foundation_to_tableau:
        examples.append("FH2>4" if board.decks > 1 else "FH>4")
    if not options.auto_flip:
        examples.append("U3")
    if board.has_stock:
        examples.append("D")
        if options.max_passes != 1:
            examples.append("R")
    if options.undo:
        examples.append("undo")
    return examples


def pass_words(view: Mapping[str, Any] | None) -> str | None:
    """``pass 2/3``: which pass through the stock ``view``'s game is on, of how many,
    where they are limited (Klondike's ``max_passes``, Vegas scoring's default,
    Australian's one pass); None where they are not or there is no stock."""
    if view is None:
        return None
    try:
        board = new_board(str(view.get("variant")), dict(view.get("options") or {}))
    except RulesError:
        return None
    passes = board.options.max_passes
    if not board.has_stock or passes is None:
        return None
    return f"pass {int(view.get('recycles') or 0) + 1}/{passes}"


def refusal_text(
    code: str, message: str, move: str | None = None, view: Mapping[str, Any] | None = None
) -> str:
    """The server's refusal of a move in plain words; for a mistyped one, the moves of
    ``view``'s game by example, on the 80-column status line."""
    if code == "bad_notation":
        if move and len(move) > MOVE_QUOTED:
            move = move[: MOVE_QUOTED - 1] + "…"
        shown = f"{move!r} is" if move else "that is"
        return f"{shown} not a move (moves: {', '.join(move_examples(view))})"
    if code == "bad_seq":
        return "out of step with the server: your board was reloaded, try again"
    return plain_cards(message)
