"""Textual screens and widgets. Everything they draw comes from the pure functions of
``render``; everything they do goes through the app (``app.SolraceApp``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.screen import ModalScreen, Screen
from textual.visual import visualize
from textual.widget import Widget
from textual.widgets import Input, Static

from .controller import normalise
from .render import COLOUR, Look, move_examples

if TYPE_CHECKING:
    from textual.css.styles import RulesMap

    from .app import SolraceApp

Paint = Callable[[int, int], Text]


class Painted(Widget):
    """A widget drawn by a function of its size (width, height) → Text."""

    def __init__(self, paint: Paint, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._paint = paint

    def render(self) -> Text:
        return self._paint(self.size.width, self.size.height)


class PaintedPage(Painted):
    """A page drawn by a function of its width, as tall as what it draws: put in a
    :class:`Page`, which scrolls it where the terminal is shorter (a lobby's or the
    standings' last lines were cut off the bottom of 40×15, unreachable)."""

    DEFAULT_CSS = "PaintedPage { height: auto; }"

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # drawn at ``width`` (Textual's own measure renders at the widget's last size)
        drawn = visualize(self, self._paint(width, viewport.height))
        # as Textual's own measure passes them (its styles read as the rules' mapping)
        return drawn.get_height(cast("RulesMap", self.styles), width)


class Page(VerticalScroll, can_focus=False):
    """A screen's body that scrolls where it is taller than the terminal, by the keys
    of :data:`PAGE_KEYS` (its screen's: the page never takes the focus)."""

    def __init__(self, paint: Paint, **kwargs: Any) -> None:
        super().__init__(PaintedPage(paint), **kwargs)


#: The keys that scroll a :class:`Page` (and the help), each with its scroll action.
PAGE_KEYS: Final = (
    ("down,j", "scroll_down"),
    ("up,k", "scroll_up"),
    ("pagedown", "page_down"),
    ("pageup", "page_up"),
    ("home", "scroll_home"),
    ("end", "scroll_end"),
)
#: A screen's bindings of :data:`PAGE_KEYS` to its page.
PAGE_BINDINGS: Final[list[BindingType]] = [
    Binding(keys, f"scroll_page('{action}')", show=False) for keys, action in PAGE_KEYS
]


class PhaseScreen(Screen[None]):
    """A screen with the common frame: a header line, a body, a status line and a line
    of key hints."""

    kind: ClassVar[str] = ""

    @property
    def solrace(self) -> SolraceApp:
        return cast("SolraceApp", self.app)  # Textual types it as any App

    def compose_body(self) -> ComposeResult:
        yield from ()

    def compose(self) -> ComposeResult:
        app = self.solrace
        yield Painted(lambda w, h: app.paint_header(self.kind, w), id="header")
        with Vertical(id="main"):
            yield from self.compose_body()
        yield Painted(lambda w, h: app.paint_status(w), id="status")
        yield Painted(lambda w, h: app.paint_hints(self.kind, w), id="hints")

    def repaint(self) -> None:
        for widget in self.query(Painted):
            widget.refresh(layout=isinstance(widget, PaintedPage))  # its height may change

    def action_help(self) -> None:
        controller = self.solrace.controller
        columns = controller.layout.columns if controller.view is not None else None
        kind = self.kind
        if self.solrace.mode == "watch" and f"{kind} watching" in HELP:
            kind += " watching"  # a spectator's keys: it readies, starts, rematches not
        elif self.solrace.state.phase == "countdown" and f"{kind} countdown" in HELP:
            kind += " countdown"  # ready and start are over; q forfeits (the footer's)
        self.app.push_screen(HelpScreen(kind, move_examples(controller.view), columns))

    def action_scroll_page(self, action: str) -> None:
        for page in self.query(Page):
            getattr(page, f"action_{action}")()

    def action_quit_race(self) -> None:
        self.solrace.ask_quit()


class ConnectingScreen(PhaseScreen):
    kind = "connecting"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,escape", "quit_race", "quit", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        app = self.solrace
        yield Painted(lambda w, h: app.paint_connecting(w), id="body")


class LobbyScreen(PhaseScreen):
    kind = "lobby"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space,r", "toggle_ready", "ready", show=False),
        Binding("s", "start", "start", show=False),
        Binding("q", "quit_race", "quit", show=False),
        Binding("question_mark", "help", "help", show=False),
        *PAGE_BINDINGS,
    ]

    def compose_body(self) -> ComposeResult:
        app = self.solrace
        yield Page(lambda w, h: app.paint_lobby(w, h), id="body")

    def action_toggle_ready(self) -> None:
        self.solrace.toggle_ready()

    def action_start(self) -> None:
        self.solrace.start_race()


class PlayScreen(PhaseScreen):
    kind = "play"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,h", "cursor('left')", "left", show=False),
        Binding("right,l", "cursor('right')", "right", show=False),
        Binding("up,k", "cursor('up')", "up", show=False),
        Binding("down,j", "cursor('down')", "down", show=False),
        Binding("enter,space", "activate", "pick/drop", show=False),
        Binding("escape", "cancel", "cancel", show=False),
        Binding("f", "foundation", "foundation", show=False),
        Binding("d", "play('D')", "draw", show=False),
        Binding("r", "play('R')", "recycle", show=False),
        Binding("u", "play('undo')", "undo", show=False),
        Binding("colon", "type_move", "type a move", show=False),
        Binding("x", "resign", "resign", show=False),
        Binding("question_mark", "help", "help", show=False),
        Binding("q", "quit_race", "quit", show=False),
        *[Binding(str(n % 10), f"column({(n - 1) % 10})", show=False) for n in range(1, 11)],
    ]

    def compose_body(self) -> ComposeResult:
        app = self.solrace
        with Horizontal(id="body"):
            yield Painted(lambda w, h: app.paint_board(w, h), id="board")
            yield Painted(lambda w, h: app.paint_side(w, h), id="side")
        yield Input(placeholder="move (3:4>6, 2>F, W>5, D, R, undo) — Esc cancels", id="move")

    def on_mount(self) -> None:
        self.solrace.fit_side(self)

    def on_resize(self, event: Any) -> None:
        self.solrace.fit_side(self)

    def action_cursor(self, direction: str) -> None:
        self.solrace.cursor(direction)

    def action_activate(self) -> None:
        self.solrace.activate()

    def action_cancel(self) -> None:
        self.solrace.cancel_pick()

    def action_foundation(self) -> None:
        self.solrace.to_foundation()

    def action_play(self, move: str) -> None:
        self.solrace.send_move(move)

    def action_column(self, column: int) -> None:
        self.solrace.column(column)

    def action_resign(self) -> None:
        self.solrace.ask_resign()

    def action_type_move(self) -> None:
        box = self.query_one("#move", Input)
        box.value = ""
        box.display = True
        box.focus()

    def _close_input(self) -> None:
        box = self.query_one("#move", Input)
        box.display = False
        self.set_focus(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = normalise(event.value)
        self._close_input()
        if text:
            self.solrace.send_move(text)

    def on_key(self, event: Any) -> None:
        box = self.query_one("#move", Input)
        if box.has_focus and event.key == "escape":
            event.stop()
            self._close_input()


class WatchScreen(PhaseScreen):
    kind = "watch"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab,right,l", "focus_racer(1)", "next", show=False),
        Binding("shift+tab,left,h", "focus_racer(-1)", "previous", show=False),
        *[Binding(str(n), f"pick_racer({n - 1})", show=False) for n in range(1, 9)],
        Binding("question_mark", "help", "help", show=False),
        Binding("q", "quit_race", "quit", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        app = self.solrace
        with Horizontal(id="body"):
            yield Painted(lambda w, h: app.paint_watch(w, h), id="boards")
            yield Painted(lambda w, h: app.paint_side(w, h), id="side")

    def on_mount(self) -> None:
        self.solrace.fit_side(self)

    def on_resize(self, event: Any) -> None:
        self.solrace.fit_side(self)

    def action_focus_racer(self, delta: int) -> None:
        self.solrace.focus_racer(delta)

    def action_pick_racer(self, index: int) -> None:
        self.solrace.pick_racer(index)


class StandingsScreen(PhaseScreen):
    kind = "standings"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "rematch", "rematch", show=False),
        Binding("q,escape", "leave_now", "quit", show=False),
        Binding("question_mark", "help", "help", show=False),
        *PAGE_BINDINGS,
    ]

    def compose_body(self) -> ComposeResult:
        app = self.solrace
        yield Page(lambda w, h: app.paint_standings(w, h), id="body")

    def action_rematch(self) -> None:
        self.solrace.rematch()

    def action_leave_now(self) -> None:
        self.solrace.quit_now()


HELP = {
    "play": [
        ("←→↑↓  h l k j", "move the cursor; ↑ off a column: the foundations row"),
        ("Enter / space", "pick the card and all on it; again: put them there"),
        ("1 … 9, 0", "go to column 1 … 10; with cards picked: put them there"),
        ("f", "picked card, or the cursor's top card, to its foundation"),
        ("Esc", "put the picked cards back"),
        ("d  /  r", "draw from the stock  /  turn the waste over"),
        ("u", "undo (counts as a move)"),
        (":", "type a move: 3:4>6  2>F  W>5  W>F  FH>4  D  R  U3  undo"),
        ("  3:4>6", "the top 4 cards of column 3 onto column 6"),
        ("  2>F  W>5", "column 2's top card to its foundation; waste onto 5"),
        ("x", "resign (asks first; you stay in the standings)"),
        ("q", "quit (asks first; quitting a race forfeits it)"),
    ],
    "lobby": [
        ("space / r", "toggle your ready flag"),
        ("s", "start the race (host; everyone else must be ready)"),
        ("q", "leave the room"),
    ],
    "watch": [
        ("Tab / → / l", "next racer's board (when they do not all fit)"),
        ("Shift+Tab / ← / h", "previous racer's board"),
        ("1 … 8", "show that racer's board first"),
        ("q", "stop watching"),
    ],
    "standings": [
        ("m", "rematch: back to the lobby with the same racers"),
        ("q", "quit"),
    ],
    # A spectator's: its lobby's help listed the ready, start and leave keys, its
    # race-over screen's the rematch — keys that do nothing for a spectator.
    "lobby watching": [("q", "stop watching")],
    "standings watching": [("q", "quit")],
    # The countdown's: ready and start are over, and q forfeits the race.
    "lobby countdown": [("q", "quit the race (asks first; leaving now forfeits it)")],
}


#: What a screen's help says besides its keys.
HELP_NOTES: Final = {
    "watch": (
        "Boards come the room's spectator delay behind the race (the top line:\n"
        "boards N s behind, or boards live); each title says how old its board is.\n"
        "In a fair room a board is also held back while it shows a card a racer\n"
        "still racing has not turned up: its title says held back until then."
    ),
}


def _play_rows(examples: Sequence[str], columns: int | None = None) -> list[tuple[str, str]]:
    """The race screen's keys for a game whose moves are ``examples``
    (``render.move_examples``) on ``columns`` columns: a newcomer walk found the help of
    a Yukon race listing ``d / r`` and ``W>5``, of a stock and a waste Yukon does not
    have; a variants audit, ``1 … 9, 0`` for its seven columns."""
    rows: list[tuple[str, str]] = []
    for key, what in HELP["play"]:
        if key == "1 … 9, 0" and columns is not None and columns < 10:
            key = f"1 … {columns}"
            what = f"go to column 1 … {columns}; with cards picked: put them there"
        elif key == "d  /  r":
            if "D" not in examples:
                continue
            if "R" not in examples:
                key, what = "d", "draw from the stock"
        elif key == "←→↑↓  h l k j" and "W>5" in examples:  # the top row has more
            what = "move the cursor; ↑ off a column: stock, waste, foundations"
        elif key == "u" and "undo" not in examples:
            continue
        elif key == ":":
            what = "type a move: " + "  ".join(examples)
        elif key == "  2>F  W>5" and "W>5" not in examples:
            key, what = "  2>F", "column 2's top card to its foundation"
        rows.append((key, what))
    return rows


def help_text(
    kind: str,
    look: Look = COLOUR,
    examples: Sequence[str] | None = None,
    columns: int | None = None,
) -> Text:
    """The help of a screen (``play``, ``lobby``, ``watch``, ``standings``); a racer's
    says how ``look`` marks the cursor and a pick, and with ``examples`` (the moves
    of its game: ``render.move_examples``) only the keys of moves its game has, with
    ``columns`` the column keys its board has."""
    text = Text()
    text.append("Keys\n", "bold")
    rows = HELP.get(kind) or HELP["play"]
    if rows is HELP["play"] and examples is not None:
        rows = _play_rows(examples, columns)
    column = max(len(key) for key, _ in rows) + 2  # "Shift+Tab / ← / h" ran into its words
    for key, what in rows:
        text.append(f"{key:<{column}}", "bold cyan")
        text.append(f"{what}\n")
    if kind not in HELP or kind == "play":  # only a racer picks cards
        text.append(f"\n{look.legend}\n", "grey62")
    else:
        text.append("\n")
    if kind in HELP_NOTES:
        text.append(f"{HELP_NOTES[kind]}\n\n", "grey62")
    text.append("Ctrl-Z suspends, as in any terminal program (fg resumes)\n", "grey62")
    text.append("Press any of Esc, q, ? to close", "grey62")
    return text


class HelpScreen(ModalScreen[None]):
    """A screen's keys. Taller than a small terminal (the race screen's needs 18 rows,
    more where its lines wrap), it scrolls: no key did, and x, q and how to close it
    could not be read in 40×15."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter,space", "close", "close", show=False),
        *[Binding(keys, action, show=False) for keys, action in PAGE_KEYS],
    ]

    def __init__(
        self, kind: str, examples: Sequence[str] | None = None, columns: int | None = None
    ) -> None:
        super().__init__()
        self.kind = kind
        #: The moves of the game on screen (``render.move_examples``), if known.
        self.examples = examples
        #: The columns of the board on screen, if known.
        self.columns = columns

    def compose(self) -> ComposeResult:
        look = cast("SolraceApp", self.app).look
        yield Static(help_text(self.kind, look, self.examples, self.columns), id="dialog")

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question. ``q`` answers no, except to the question q itself asked
    (``quitting``): q again while asked quits (docs/tui.md), as Ctrl-C again does."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes", show=False),
        Binding("n,escape", "answer(False)", "no", show=False),
        Binding("q", "q", show=False),
    ]

    def __init__(self, question: str, *, quitting: bool = False) -> None:
        super().__init__()
        self.question = question
        self.quitting = quitting

    def compose(self) -> ComposeResult:
        text = Text(self.question + "\n\n", style="bold")
        text.append("y", "bold green")
        text.append(" yes    ")
        text.append("n", "bold red")
        text.append(" no")
        yield Static(text, id="dialog")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def action_q(self) -> None:
        self.dismiss(self.quitting)
