"""The terminal client: one Textual app for racing and for watching.

The app plays through one :class:`~solrace_client.session.Session`. A worker
(``_network``) enters the room (create/join/quick/resume, or watch), then reads the
session's stream: events, already folded into the session's
:class:`~solrace_client.roomview.RoomView` (``app.state``), become news lines and
repaints; when the connection drops the session reconnects with backoff and resumes
with the token and the last event version, so the player's game is never lost (the
server is authoritative: after a resume the board is the snapshot's). A second worker
(``_mover``) sends moves in order, each without waiting for the last one's reply where
the board shows its outcome already (:mod:`.inflight`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeGuard

from rich.text import Text
from solrace.protocol import Envelope
from solrace.protocol.limits import MAX_MOVE_LEN
from solrace.protocol.messages import CreateRoom
from solrace.streams import encodes
from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from websockets.exceptions import ConnectionClosed, InvalidURI

from .. import config, results, wire
from ..boardview import played_view, recycle_is_legal
from ..connection import RaceClient, ServerError, server_flag, server_list
from ..errors import (
    CONNECTION_CLOSED,
    EXIT_FAILED,
    EXIT_TERMINATED,
    ConnectionLost,
    cannot_reach,
    entry_lost,
    refusal_of,
    saved_race_over,
)
from ..printable import printable
from ..roomview import RACE_OVER_GRACE_S, RoomView
from ..session import (
    DROPPED,
    TRANSIENT,
    Backoff,
    Rejoined,
    Session,
    SessionEnd,
    SessionOver,
    Unreachable,
)
from ..verify import Verdict, race_verdict
from .controller import Controller
from .inflight import InFlight, Sent
from .news import News, deal_words, room_has_undo, stuck_words
from .render import (
    COLOUR,
    MONO,
    STYLE_DIM,
    Look,
    MoveTimes,
    board_min_rows,
    board_width,
    fits,
    how_it_starts,
    move_examples,
    pass_words,
    progress_brief,
    race_clock,
    refusal_text,
    render_board,
    render_lobby,
    render_progress,
    render_standings,
    render_watch,
    too_small,
    total_cards,
    watch_needs,
)
from .widgets import (
    ConfirmScreen,
    ConnectingScreen,
    LobbyScreen,
    PhaseScreen,
    PlayScreen,
    StandingsScreen,
    WatchScreen,
)

ACTIONS = ("create", "join", "quick", "resume")
#: What ``create`` passes on from its params: every setting the protocol's request has
#: (``deals`` and ``difficulty`` were once missing here and silently dropped).
CREATE_SETTINGS = tuple(sorted(CreateRoom.FIELDS - {"variant", "name"}))
#: Refusals of a move that leave its outcome unknown: the store may have taken it
#: (docs/protocol.md §11, "unavailable means outcome unknown").
OUTCOME_UNKNOWN: Final = ("unavailable", "internal")
#: The status lines a window keeps (``SolraceApp.status_log``): about a screenful
#: of history behind the line shown.
STATUS_LOG_KEPT: Final = 100
#: This computer's wall clock and the app's (monotonic) clock further apart than this
#: (ms) than at the last tick: the computer slept (the monotonic clock did not count
#: it) or its clock was set; the server's clock offset is measured again.
CLOCK_JUMP_MS: Final = 1000
#: Reconnect attempts: 0.2 s, doubled up to 8 s, ± 100 % (Backoff's defaults), for as
#: long as the app runs.
BACKOFF = Backoff()
SIDE_WIDTH = 28
MIN_SIDE_WIDTH, MAX_SIDE_WIDTH = 16, 60
WATCH_SIDE_WIDTH = 19  # two Yukon boards (2 × 28 + 2) and this fit in 80 columns
#: Rows of every screen around its body: the header, the status line, the key hints.
FRAME_ROWS = 3
#: The race screen's board's padding, one column either side (CSS ``#board``).
BOARD_PAD = 2

CSS = """
PhaseScreen { layout: vertical; background: #101418; }
LobbyScreen #body, StandingsScreen #body, ConnectingScreen #body { padding: 0 1; }
#header { height: 1; background: #1d3557; color: #f1faee; }
#main { height: 1fr; }
#body { height: 1fr; }
#board { width: 1fr; padding: 0 BOARD_PAD_HALF; }
#boards { width: 1fr; }
WatchScreen #side { width: WATCH_SIDE; }
#side { width: SIDE; border-left: solid #2a3f5a; padding: 0 0 0 1; }
#status { height: 1; background: #18202a; }
#hints { height: 1; color: #8a9bb0; }
#move { dock: bottom; height: 3; display: none; }
HelpScreen, ConfirmScreen { align: center middle; }
HelpScreen { background: #101418; }
#dialog { width: auto; max-width: 100%; height: auto; padding: 0 1;
          border: round #4f7cac; background: #16202c; }
""".replace("WATCH_SIDE", str(WATCH_SIDE_WIDTH + 2)).replace("SIDE", str(SIDE_WIDTH + 2))
CSS = CSS.replace("BOARD_PAD_HALF", str(BOARD_PAD // 2))


@dataclass(frozen=True)
class EndedRace:
    """A saved race that is over: ``race`` its id, None where the saved race does not
    name its round (saved before its countdown, or by an older client)."""

    race: str | None


async def ended_race(client: RaceClient, code: object, commitment: object) -> EndedRace | None:
    """Whether the saved race of room ``code`` — the round whose ``commitment`` it saved
    — is over, looking at the room as a spectator (as anyone may); None where it is
    not (its round is still on), or the room cannot be watched. Its id is the saved
    round's, not the room's latest: after a rematch the room shows another race (an
    audit: ``resume`` pointed at a round the racer was not in), or a lobby."""
    if not isinstance(code, str) or not code:
        return None
    try:
        reply = await client.watch(code=code)
    except (ServerError, *DROPPED):
        return None
    snapshot = reply.get("snapshot") or {}
    phase = snapshot.get("phase")
    if not isinstance(commitment, str) or not commitment:
        return EndedRace(None) if phase == "finished" else None
    if phase != "finished" and snapshot.get("commitment") == commitment:
        return None  # the saved round is still on
    return EndedRace(results.race_id(str(reply.get("room")), {"commitment": commitment}))


def _whole_ms(value: object) -> TypeGuard[int]:
    """Whether a clock reading from the server is a whole number of ms (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


class SolraceApp(App[int]):
    """Race (``mode="race"``) or watch (``mode="watch"``) one room."""

    CSS = CSS
    TITLE = "solrace"
    AUTO_FOCUS = None  # keys go to the screens' bindings; the move box takes focus on ":"
    #: Ctrl-C and Ctrl-Q are q, on every screen and in the move box: they ask before a
    #: quit that forfeits (Textual's own would quit at once, or only say how to).
    #: Ctrl-Z suspends the program, as in any terminal program, on every screen and in
    #: the move box: the screen reads keys raw, so the terminal sends no SIGTSTP of its
    #: own, and the key did nothing. Textual gives the terminal back before it stops
    #: and draws again on ``fg`` (SIGCONT); the connection resumes as after any drop.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c,ctrl+q", "quit_race", "quit", show=False, priority=True),
        Binding("ctrl+z", "suspend_process", "suspend", show=False, priority=True),
    ]

    def __init__(
        self,
        server: str,
        *,
        mode: str = "race",
        action: str = "create",
        name: str = "",
        params: Mapping[str, Any] | None = None,
        code: str | None = None,
        save: bool = True,
    ) -> None:
        super().__init__()
        if mode not in ("race", "watch"):
            raise ValueError(f"unknown mode {mode!r}")
        if mode == "race" and action not in ACTIONS:
            raise ValueError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
        self.server = server
        self.mode = mode
        self.action = action
        self.name_ = name
        self.params = dict(params or {})
        self.watch_code = code
        #: Save the token/result to the user's config (off in some tests).
        self.save = save
        self.session = Session(server_list(server), backoff=BACKOFF, lost=self._lost)
        self.news = News()
        self.controller = Controller()
        #: The server's clock minus :meth:`local_ms`, measured at each (re)join.
        self.clock_offset_ms = 0
        #: :meth:`local_ms`'s origin: this computer's wall clock once, then the
        #: monotonic clock from there (see :meth:`local_ms`).
        self._origin_ms = int(time.time() * 1000)
        self._origin_ns = time.monotonic_ns()
        #: The wall clock minus :meth:`local_ms` at the last tick (:meth:`_clock_jumped`).
        self._clocks_apart_ms = 0
        self.status_text = Text("connecting…")
        #: How the board marks the cursor and a pick: Textual reads NO_COLOR (self.no_color)
        #: and sends no colours then, so the marks must not be colours.
        self.look: Look = MONO if self.no_color else COLOUR
        #: The last STATUS_LOG_KEPT status lines shown, oldest first (tests read it).
        #: Kept whole, a window open for hours held a line for every move it played.
        self.status_log: list[str] = []
        #: Why the app gave up before entering a room (one line, printed after it exits).
        self.failure: str | None = None
        #: The saved race that could not be resumed because it is over.
        self.over_race: EndedRace | None = None
        self.focus_index = 0
        #: When each racer moved, for the watch screen's "held back".
        self.move_times = MoveTimes()
        #: Whether the race screen shows the racers' panel beside the board (fit_side).
        self.side_shown = True
        self.race_id: str | None = None
        #: The race-over screen's verdict on the result shown (None: being checked).
        self.verdict: Verdict | None = None
        #: The race (id) shown, and the latest check of it asked for: a verdict that
        #: comes back for an earlier one (a rematch since, a snapshot's result after
        #: a reconnection) is dropped.
        self._checking: tuple[str, int] = ("", 0)
        #: Moves typed, to send in order, with the epoch they were typed in (a refusal
        #: drops the ones typed before it).
        self._moves: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        #: Moves sent whose reply has not come (:mod:`.inflight`).
        self.in_flight = InFlight()
        #: How long past the time limit the race-over wait is said to be overdue.
        self.race_over_grace_s = RACE_OVER_GRACE_S
        #: The phase and the time past which it was said overdue (ends_at_ms, start_at_ms).
        self._overdue_said: tuple[str, int] | None = None
        self._leaving = False
        self._stopped = False
        #: Nothing more can happen here (replaced, cannot rejoin): q quits at once.
        self._ended = False
        #: This racer is now played in another window, which keeps the saved race.
        self._replaced = False
        #: Moves typed while disconnected: refused, and said so until reconnected.
        self._unsent: list[str] = []
        #: Why the connection was lost, in words, when the server said (``the server is
        #: restarting``: its close frame, errors.SERVER_CLOSES); None: it just went.
        self._why_lost: str | None = None
        #: The moves sent when the connection dropped (move, seq): played or not is told
        #: after the resume, from the snapshot's next seq.
        self._unconfirmed: list[tuple[str, int]] = []
        self._saved_result_version: int | None = None
        #: Saving the race for ``resume`` failed once (said on the status line).
        self._resume_unsaved = False
        #: The phase the screen was last chosen for (the view may be ahead of the event
        #: being shown: it folds frames as they arrive).
        self._shown_phase: str | None = None

    @property
    def state(self) -> RoomView:
        """The room, as the session's connections fold it."""
        return self.session.view

    @property
    def client(self) -> RaceClient | None:
        """The current connection (None while reconnecting)."""
        return self.session.client

    @property
    def online(self) -> bool:
        return self.session.online

    @property
    def reconnects(self) -> int:
        return self.session.reconnects

    # ---------------------------------------------------------------- start
    def on_mount(self) -> None:
        self.push_screen(ConnectingScreen())
        self.run_worker(self._network(), name="network", exit_on_error=True)
        if self.mode == "race":
            self.run_worker(self._mover(), name="mover", exit_on_error=True)
        self.set_interval(0.25, self._tick)

    async def on_unmount(self) -> None:
        self._stopped = True
        await self.session.close()

    def local_ms(self) -> int:
        """This computer's clock (Unix ms) as the app counts it: read once, then counted
        on with the monotonic clock, which is never set. On the wall clock, setting the
        computer's clock 10 minutes ahead mid-race (by hand, or an NTP step) took 10
        minutes off the time left shown, until the next reconnect measured the offset
        again."""
        return self._origin_ms + (time.monotonic_ns() - self._origin_ns) // 1_000_000

    def server_now(self) -> int:
        return self.local_ms() + self.clock_offset_ms

    def _tick(self) -> None:
        self._clock_jumped()
        self._overdue()
        # The clock can fire once more while the app shuts down, its screens gone.
        screen = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(screen, PhaseScreen):
            # The page a lobby's body scrolls too: refreshed, the scrolling body drew
            # the page as last painted, and the countdown under the racers stood still.
            for widget in screen.query("#header, #body, #boards, PaintedPage"):
                widget.refresh()

    def _clock_jumped(self) -> None:
        """Measure the server's clock offset again when this computer's clocks jumped
        apart since the last tick: a sleep the connection outlived (a laptop's lid
        closed) left the monotonic clock, and the race clock counted on it, as far
        behind the server's as the sleep was long — 10 minutes more time left shown
        than there was, until the next reconnect. (A step of the wall clock, which the
        race clock does not follow, is measured again too, and nothing moves.)"""
        apart = time.time_ns() // 1_000_000 - self.local_ms()
        if abs(apart - self._clocks_apart_ms) <= CLOCK_JUMP_MS:
            return
        self._clocks_apart_ms = apart
        client = self.client
        if client is not None:  # else the next (re)join measures it
            self.run_worker(self._measure_clock(client), group="clock", exclusive=True)

    async def _measure_clock(self, client: RaceClient) -> None:
        with contextlib.suppress(ServerError, ConnectionError, TimeoutError, ConnectionClosed):
            await self._sync_clock(client)

    def _overdue(self) -> None:
        """Say once when the server has let the race run :data:`RACE_OVER_GRACE_S`
        past its time limit: the clock stood at 00:00 with no word, for as long as the
        player waited (an audit with a server that never ended the race).

        Not while events wait in the queue: the view is folded as they arrive, their
        news said as the app takes them, and the start's ("the countdown has begun",
        "go!") said after this line replaced it — never seen (a loaded machine took
        over a second to show the race screen of a race of half a second).

        So too a countdown no ``started`` follows: the lobby said "starts in 0.0 s"
        with no word for as long as the player waited."""
        state, client = self.state, self.client
        if state.phase == "racing":
            due, undone = state.ends_at_ms, "ended the race {} s past its time limit"
        elif state.phase == "countdown":
            due, undone = state.start_at_ms, "started the race {} s past its countdown"
        else:
            return
        if due is None or self._overdue_said == (state.phase, due):
            return
        if client is not None and not client.events.empty():
            return  # the news of what came before is still to be said
        if self.server_now() > due + self.race_over_grace_s * 1000:
            self._overdue_said = (state.phase, due)
            undone = undone.format(f"{self.race_over_grace_s:g}")
            self.say(f"the server has not {undone} — q quits", "bold red")

    # --------------------------------------------------------------- status
    def say(self, message: str, style: str = "") -> None:
        # Through printable, as the command line's failure line is: a line may quote a
        # server's refusal or name a file, and Textual strips only BEL, BS, VT, FF and
        # CR (a refusal holding ESC [31m turned the terminal red: a hostile server).
        message = printable(message)
        self.status_text = Text(message, style=style)
        self.status_log.append(message)
        if len(self.status_log) > STATUS_LOG_KEPT:
            del self.status_log[0]
        self._repaint()

    def _repaint(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, PhaseScreen):
                screen.repaint()

    def screen_text(self) -> str:
        """The screen as plain text (tests, debugging)."""
        return "\n".join(s.text for s in self.screen._compositor.render_strips())

    # -------------------------------------------------------------- network
    async def enter(self) -> bool:
        """Connect and enter the room; False (and :attr:`failure` says why, in one line)
        when that failed. :func:`solrace_client.tui.run_race` calls it *before* the
        screen is taken over, so that an unknown code or an unreachable server is one
        line in the terminal, not a full-screen flash; the app calls it itself when it
        was started without it (tests run it that way)."""
        if self.session.client is not None:
            return True
        request = "watch" if self.mode == "watch" else self.action
        try:
            await self.session.enter(self._enter)
        except ServerError as err:
            code = self.watch_code if self.mode == "watch" else self.params.get("code")
            saved = request == "join" and bool(code) and config.saved_in_room(str(code))
            flag = server_flag(self.server)  # for the command the words suggest
            message = refusal_of(err.data, request, code and str(code), saved=saved, server=flag)
            if self.over_race is not None:
                message = saved_race_over(self.over_race.race, flag)
            self._entry_failed(message, err.code)
        except Unreachable as err:
            self._entry_failed(cannot_reach(err.servers, err.error))
        except DROPPED as exc:  # connected (else Unreachable): lost before the reply
            self._entry_failed(entry_lost(request, exc, self.session.server))
        except (InvalidURI, ValueError) as exc:
            self._entry_failed(cannot_reach(self.server, exc))
        return self.failure is None

    async def _network(self) -> None:
        session = self.session
        if not await self.enter():
            self.exit(EXIT_FAILED, return_code=EXIT_FAILED)
            return
        await self._rejoined(first=True)
        while not self._stopped:
            try:
                item = await session.next()
            except SessionOver as over:
                self._over(over)
                return
            if not self.screen_stack:
                # The app is shutting down (its screens gone): nothing left to show it
                # on. A resume that landed then crashed the worker ("No screens on
                # stack", fit_side: a CI run, a test exiting mid-reconnect).
                return
            if isinstance(item, Rejoined):
                await self._rejoined(first=False, reconnected=item.reconnected)
            elif item is not None:
                try:
                    await self._on_event(item)
                except Exception as exc:  # a bad event must not take the race down with it
                    self.log.error(f"event {item.t}: {exc!r}")
                    self.say(f"could not show {item.t}: {exc}", "yellow")

    async def _rejoined(self, *, first: bool, reconnected: bool = False) -> None:
        """The view was loaded from a snapshot: entry, resume, or a resync."""
        missed = self.news.missed(self.state) if reconnected else []
        self._loaded()
        if first:
            self.say(self._welcome())
        elif reconnected:
            self.say(*self._reconnected(missed))
        self._unconfirmed = []
        await self._sync_screen()
        self._repaint()
        client = self.client
        if client is not None and (first or reconnected):
            if _whole_ms(self.state.now_ms):  # until the pings answer: the snapshot's
                self.clock_offset_ms = self.state.now_ms - self.local_ms()
            await self._measure_clock(client)

    def _over(self, over: SessionOver) -> None:
        """The session cannot go on: say why, and let q quit."""
        if over.reason == SessionEnd.CLOSED or self._leaving or self._stopped:
            return
        self._ended = True
        if over.reason == SessionEnd.REPLACED:
            self._replaced = True
            self.say("this race was resumed in another window — press q", "bold red")
        elif isinstance(over.error, ServerError):
            # The key first and the server's own words (which say why: the grace ran
            # out) — the status line is one row: "you are no longer in the saved race
            # (you were away longer than the 30 s grace…) — press q" was cut in 80
            # columns before the grace and the key, and "saved" is `resume`'s word.
            why = over.error.message or refusal_of(over.error.data, "resume")
            self.say(f"cannot rejoin (q quits): {why}", "bold red")
        else:
            self.say(f"{over} — press q", "bold red")

    def _lost(self, attempt: int, error: BaseException | None) -> None:
        if isinstance(error, ServerError) and error.code in TRANSIENT:
            self.say(f"server busy — retrying ({attempt})…", "bold yellow")  # the store is down
            return
        # The words of the loss itself (attempt 1), kept through the retries, whose
        # errors are the reconnects' own: a window whose server was stopped said only
        # "connection lost", while the bot said why (an audit).
        if attempt == 1:
            said = str(error) if isinstance(error, ConnectionLost) else ""
            self._why_lost = said if said and said != CONNECTION_CLOSED else None
        self.say(self._reconnecting(attempt), "bold yellow")

    # ------------------------------------------------ moves while disconnected
    # A move typed while the connection is down is not queued: after the resume the
    # board may differ (a move whose reply was lost may have been played), so a queued
    # move could mean something else. It is refused where the player looks — the status
    # line says so for as long as the reconnection lasts, and once reconnected.

    def _reconnecting(self, attempt: int) -> str:
        text = f"{self._why_lost or 'connection lost'} — reconnecting ({attempt})…"
        if self._unsent:
            text += f" not sent: {' '.join(self._unsent)}"
        return text

    def _reconnected(self, missed: list[str]) -> tuple[str, str]:
        """What the resume told of the moves in flight when the link dropped, and the
        ones the server never got sent again (:meth:`_send_again`); then ``missed``,
        what the other racers did meanwhile (``News.missed``)."""
        news = []
        state = self.state
        next_seq = state.next_seq
        played = [move for move, seq in self._unconfirmed if seq < next_seq]
        if played:
            news.append(f"{' '.join(played)} {'was' if len(played) == 1 else 'were'} played")
        again = self._send_again(next_seq)
        if again:
            news.append(f"sent again: {' '.join(again)}")
        lost = [m for m, seq in self._unconfirmed if seq >= next_seq and m not in again]
        if lost and not again:
            news.append(f"{' '.join(lost)} {'was' if len(lost) == 1 else 'were'} not played")
        if played and state.my_status == "finished":  # decided while the reply was lost
            place = (state.racers.get(state.me) or {}).get("place") if state.me else None
            news.append(f"you finished{f' #{place}' if place else ''}!")
        if self._unsent:
            news.append(f"not sent while offline: {' '.join(self._unsent)} — play again")
            self._unsent.clear()
        if missed:
            news.append("while you were away: " + ", ".join(missed))
        if not news:
            return "reconnected", "bold green"
        return "reconnected — " + "; ".join(news), "bold yellow"

    def _send_again(self, next_seq: int) -> list[str]:
        """Queue again, first, the moves in flight when the link dropped that the server
        never got (their seq at or past the resumed ``next_seq``), and return them.
        Each goes with the seq it was sent with: the server's log holds exactly the
        moves before it, so it means on the server's board what it meant on the one
        shown, and a seq the server took meanwhile is answered as the move it stored
        (docs/protocol.md §11) — never twice. Only while the racer still races, and
        only a run that starts at ``next_seq`` (a server that lost writes resumes
        lower: those moves would land elsewhere)."""
        state = self.state
        unplayed = [(move, seq) for move, seq in self._unconfirmed if seq >= next_seq]
        seqs = [seq for _, seq in unplayed]
        racing = state.phase == "racing" and state.my_status in ("playing", "stuck")
        if not unplayed or not racing or seqs != list(range(next_seq, next_seq + len(seqs))):
            return []
        typed = []  # typed since (their epoch says whether they still go)
        while not self._moves.empty():
            typed.append(self._moves.get_nowait())
        for move, _ in unplayed:
            self._moves.put_nowait((move, self.in_flight.epoch))
        for item in typed:
            self._moves.put_nowait(item)
        return [move for move, _ in unplayed]

    def _refuse_offline(self, move: str) -> None:
        self._unsent.append(move)
        self.say(f"offline: {move} not sent — reconnecting…", "bold red")

    async def _enter(self, client: RaceClient) -> dict[str, Any]:
        if self.mode == "watch":
            # A race of the room saved here (by a window gone now) proves its seed out;
            # read off the event loop (every saved race file is read).
            code = self.watch_code
            proof = await asyncio.to_thread(results.last_revealed, code=code) if code else None
            return await client.watch(code=self.watch_code, revealed=proof or "last")
        p = self.params
        if self.action == "create":
            settings = {k: p[k] for k in CREATE_SETTINGS if p.get(k) is not None}
            return await client.create(str(p.get("variant") or "yukon"), self.name_, **settings)
        if self.action == "join":
            return await client.join(str(p["code"]), self.name_)
        if self.action == "quick":
            return await client.quick(str(p.get("variant") or "yukon"), self.name_)
        return await self._resume(client)

    async def _resume(self, client: RaceClient) -> dict[str, Any]:
        """Rejoin the saved race, with no state of ours: the snapshot alone is the state
        (since = nil). A token refused (``bad_token``: the racer left, or was away past
        the grace) is looked into: where the room's race is over, the server's "you can
        watch room X" sent a newcomer to watch a race that had ended (an audit), so the
        room is looked at as a spectator for the race id to fetch instead."""
        # The saved race's proof that the room's last race_over went out (cmd_resume):
        # this process's view, new, holds none.
        proof = self.params.get("revealed")
        try:
            return await client.resume(
                room=str(self.params["room"]),
                token=str(self.params["token"]),
                since=None,
                revealed=proof if isinstance(proof, Mapping) else "last",
            )
        except ServerError as err:
            if err.code == "bad_token":
                params = self.params
                self.over_race = await ended_race(
                    client, params.get("code"), params.get("commitment")
                )
            raise

    def _loaded(self) -> None:
        """Everything the app derives from the view, after a fresh snapshot."""
        self.news.reset(self.state)
        self.move_times.reset(self.state.racer_list(), self.state.commitment)
        self.in_flight.restart()  # the snapshot's board is the server's: none is ahead
        self.controller.set_view(self.state.my_board)
        self.fit_side()
        self._save_token()
        if self.state.phase == "finished":
            self._race_over(self.state.version)

    def _welcome(self) -> str:
        state = self.state
        if self.mode == "watch":
            return f"watching room {state.code}"
        if state.phase == "lobby":
            if state.settings.get("quick"):
                return "quick race: press space when ready; it starts once everyone is ready"
            if state.me == state.host:
                return f"room {state.code} created: others join with its code — s to start"
            return "joined: press space when you are ready"
        if state.phase in ("racing", "countdown"):
            return "back in the race"
        return f"room {state.code}"

    def _entry_failed(self, message: str, error: str | None = None) -> None:
        """The first connection or the entry request failed: nothing to play."""
        stale = error in ("bad_token", "unknown_room")
        if self.mode == "race" and self.action == "resume" and self.save and stale:
            with contextlib.suppress(OSError):  # the saved race is gone for good
                config.clear_race(str(self.params.get("room")), str(self.params.get("token")))
        self._stopped = True
        self.failure = message

    async def _on_event(self, event: Envelope) -> None:
        state = self.state
        news = self.news.line(event, state)
        if event.t == "resync":
            self._loaded()
        if event.t == "board" and event.d.get("racer") == state.me:
            if not self.in_flight.live():  # else the replies to come set the board
                self.controller.set_view(state.my_board)
            self.fit_side()
        elif event.t == "board" and self.mode == "watch":  # a board's width may differ
            self.fit_side()
        if event.t == "room_reset":
            self.controller.set_view(None)
            self.move_times.reset(state.racer_list())
        moves, racer = event.d.get("moves"), event.d.get("racer")
        moved = event.t in ("progress", "finished")
        if moved and isinstance(moves, int) and isinstance(racer, int):
            self.move_times.saw(racer, moves, self.server_now(), state.commitment)
        if news:
            self.say(news, "bold" if event.t in ("started", "race_over", "finished") else "")
        if event.t == "race_over" and event.v is not None:
            self._race_over(event.v)
        if state.phase != self._shown_phase:
            await self._sync_screen()
            self._save_token()
        self._repaint()

    async def _resync(self) -> bool:
        """After a refused seq, or a move whose outcome is unknown: a fresh snapshot on
        this connection; whether it came."""
        try:
            await self.session.resync()
        except (ServerError, *DROPPED):
            return False  # the session reconnects if the connection is gone
        await self._rejoined(first=False)
        return True

    async def _sync_clock(self, client: RaceClient) -> None:
        """The server's clock offset from the quickest of three pings. A clock that is
        not a whole number of ms (a faulty or hostile server's: missing, a string, a
        float) is not taken: ``int()`` of it ended the app with a traceback."""
        best: tuple[int, int] | None = None
        for _ in range(3):
            sent = self.local_ms()
            now_ms = (await client.request("ping")).get("now_ms")
            back = self.local_ms()
            if not _whole_ms(now_ms):
                continue
            rtt = back - sent
            if best is None or rtt < best[0]:
                best = (rtt, now_ms - (sent + back) // 2)
        if best is not None:
            self.clock_offset_ms = best[1]

    def _save_token(self) -> None:
        token = self.session.token
        if not self.save or self.mode != "race" or not token:
            return
        if self.state.phase == "finished":
            return
        try:
            config.save_race(
                config.SavedRace(
                    server=self.server,
                    room=self.state.room or self.session.room or "",
                    code=self.state.code or "",
                    racer=self.state.me or 0,
                    token=token,
                    name=self.state.name_of(self.state.me) if self.state.me else self.name_,
                    version=self.state.version,
                    commitment=self.state.commitment,
                    revealed=self.state.revealed,
                )
            )
        except OSError as exc:  # the race goes on; say once that resume will not work
            if not self._resume_unsaved:
                self._resume_unsaved = True
                self.say(f"could not save the race for resume: {exc.strerror or exc}", "yellow")

    def _forget_race(self) -> None:
        """This window's race is over or left: ``resume`` forgets it (and only it: a
        race another window plays on this computer stays saved)."""
        room, token = self.state.room or self.session.room, self.session.token
        if room and token:
            with contextlib.suppress(OSError):
                config.clear_race(room, token)

    def _race_over(self, version: int) -> None:
        """Check and save the round that ended at ``version`` (its ``race_over``, or a
        finished room's snapshot), as the view kept it: the room may be in the next
        round's lobby already (the view folds frames as they arrive), and a window that
        read the room then saved no race (an audit: 1 of 3 rounds saved, 0 of 3 when
        the window was slow)."""
        over = self.state.overs.get(version)
        if over is None:
            return
        self.race_id = over.room
        finished = results.finished_race(
            over.room or "",
            over.result,
            over.settings,
            over.code,
            # the commitment as seen at the countdown, before the reveal
            published_commitment=over.published_commitment or None,
            countdown_settings=over.countdown_settings,
            # this racer's moves the server acknowledged: its revealed log must hold them
            acknowledged=over.acknowledged,
            deal=over.deal,
            server=self.server,
        )
        # Checked each time a result arrives (a race_over, a finished room's snapshot):
        # what a server says after a reconnection is checked too.
        race, checks = self._checking
        if race != finished.race:
            self.verdict = None  # "checking…", not the last race's verdict
        self._checking = (finished.race, checks + 1)
        self.run_worker(self._verify(finished, self._checking), group="verify")
        if self.save and self._saved_result_version != version:
            self._saved_result_version = version
            try:
                results.write_result(finished)
            except OSError as exc:  # a full disk must not end the race screen
                self.log.warning(f"write_result failed: {exc!r}")
                self.say(f"could not save the race for verify: {exc}", "yellow")
            else:
                self.race_id = finished.race
                if self.state.phase != "finished":  # no race-over screen names it
                    self.say(f"race saved: solrace verify {finished.race}", "bold")
            if self.mode == "race" and self.state.phase == "finished":  # not a new round
                self._forget_race()

    async def _verify(self, finished: results.SavedResult, check: tuple[str, int]) -> None:
        """``solrace verify``'s checks, off the UI loop: they replay every log (0.13 s
        measured for the most a race holds, 8 racers of 5,000 Yukon moves: frames)."""
        verdict = await asyncio.to_thread(race_verdict, finished)
        if self._checking == check:
            self.verdict = verdict
            self._repaint()

    # -------------------------------------------------------------- screens
    def _wanted(self) -> type[PhaseScreen]:
        phase = self.state.phase
        if not self.state.loaded:
            return ConnectingScreen
        if phase in ("lobby", "countdown"):
            return LobbyScreen
        if phase == "finished":
            return StandingsScreen
        return WatchScreen if self.mode == "watch" else PlayScreen

    async def _sync_screen(self) -> None:
        self._shown_phase = self.state.phase
        wanted = self._wanted()
        base = next((s for s in reversed(self.screen_stack) if isinstance(s, PhaseScreen)), None)
        if isinstance(base, wanted):
            self._repaint()
            return
        while isinstance(self.screen, ModalScreen):
            await self.pop_screen()
        await self.switch_screen(wanted())

    # ---------------------------------------------------------------- paint
    def paint_header(self, kind: str, width: int) -> Text:
        state = self.state
        # What the line may lose, least useful first (below): the app's name, the
        # counters, the variant, the word "room" (the room's code stays, and the clock).
        name, variant, room, delay_words = " solrace", "", "", ""
        if state.loaded:
            variant, room = f"  {state.variant}", f"  room {state.code}"
            if self.mode == "watch":
                delay = wire.whole(state.settings.get("spectator_delay_s")) or 0
                delay_words = f"  boards {delay} s behind" if delay else "  boards live"

        def left() -> Text:
            return Text.assemble((name, "bold"), variant, room, delay_words)

        clock = race_clock(state.phase, state.start_at_ms, state.ends_at_ms, self.server_now())
        you = state.you or {}
        counters = []
        if kind == "play" and you:
            counters = [f"moves {you.get('moves') or 0}", f"score {you.get('score') or 0}"]
            passes = pass_words(self.controller.view)
            if passes is not None:  # with passes limited, how many are left
                counters.insert(0, passes)

        def right_side() -> Text:
            right = Text(no_wrap=True)
            if clock:
                right.append(clock, "bold")
            for counter in counters:
                right.append(f"  {counter}")
            if not self.online and state.loaded:
                right.append("  offline", "bold red")
            right.append(" ")
            return right

        # Drop what does not fit: the app's name first (with a pass counter, 80 columns
        # lost the score to it), then the score, the moves, the pass, the variant, the
        # word "room"; never the clock.
        right = right_side()
        if left().cell_len + right.cell_len >= width:
            name = ""
        while left().cell_len + right.cell_len >= width and counters:
            counters.pop()
            right = right_side()
        for shorter in ("variant", "room"):
            if left().cell_len + right.cell_len < width:
                break
            if shorter == "variant":
                variant = ""
            elif state.loaded:
                room = f"  {state.code}"
        pad = max(1, width - left().cell_len - right.cell_len)
        return Text.assemble(left(), " " * pad, right, no_wrap=True, overflow="crop")

    def paint_status(self, width: int) -> Text:
        text = Text(" ", no_wrap=True, overflow="crop")
        text.append_text(self.status_text)
        return text

    @staticmethod
    def _pick_key() -> str:
        """``⏎`` where the terminal shows it, else ``spc`` (space picks too): on an
        ASCII terminal its stand-in would be ``?``, the help key, and the footer read
        ``? pick/put`` beside ``? help``. Textual draws on standard error."""
        return "⏎" if encodes("⏎", sys.__stderr__) else "spc"

    def paint_hints(self, kind: str, width: int) -> Text:
        state = self.state
        last = ["? help", "q quit"]
        examples = move_examples(self.controller.view)
        # Stuck keeps the keys where the room allows an undo: one may take it back.
        status = state.my_status
        done = status not in (None, "playing") and not (status == "stuck" and "undo" in examples)
        if kind == "play" and self.mode == "race" and done:
            # Finished, resigned, timed out: the keys below would each be told "no
            # more moves" (the footer offered them after a resign: a newcomer walk).
            parts = [f"you: {state.my_status} — the others race on"]
        elif kind == "play":
            parts = [f"{self._pick_key()} pick/put", "f found."]
            if "undo" in examples:  # as the help (widgets._play_rows)
                parts.append("u undo")
            view = self.controller.view
            # `d` only over a stock with cards: drawn out, it is refused (a variants
            # audit found `d draw` offered after Australian's one pass).
            if self.controller.layout.has_stock and view is not None and view.get("stock"):
                parts.append("d draw")
            if view is not None and recycle_is_legal(view):  # not in Australian
                parts.append("r recycle")
            parts += [": type", "arrows/hjkl move"]
        elif kind == "lobby":
            if self.mode == "watch":
                parts, last = ["waiting for the race to start"], ["q quit"]
            elif state.phase == "countdown":
                # Ready and start do nothing once it runs, and q forfeits (ask_quit):
                # the lobby's `space/r ready  s start  q leave` offered them still.
                parts = []
            else:
                parts = ["space/r ready"]
                if state.me == state.host:
                    parts.append("s start")
                last = ["? help", "q leave"]
        elif kind == "watch":
            parts = ["tab/1-8 switch board"]
        elif kind == "standings":
            parts = ["m rematch"] if self.mode == "race" else []
            last = ["q quit"]
        else:
            parts, last = [], ["q quit"]
        # the most useful first, as many as fit, then help and quit
        shown: list[str] = []
        for part in parts:
            if len("  ".join([*shown, part, *last])) + 1 <= width:
                shown.append(part)
        return Text(" " + "  ".join([*shown, *last]), no_wrap=True, overflow="crop")

    def paint_connecting(self, width: int) -> Text:
        what = f"watching {self.watch_code}" if self.mode == "watch" else self.action
        return Text(f"\n  connecting to {self.server} ({what})…", no_wrap=True)

    def paint_lobby(self, width: int, height: int) -> Text:
        state = self.state
        deals = str(state.settings.get("deals", "winnable"))
        text = render_lobby(
            state.racer_list(),
            state.settings,
            state.code,
            state.host,
            state.me,
            width,
            deal_words(state.deal, deals),
            server_flag(self.server),
        )
        if state.phase == "countdown" and state.start_at_ms is not None:
            left = max(0.0, (state.start_at_ms - self.server_now()) / 1000)
            cue = (
                " — get ready!" if self.mode == "race" else "."
            )  # a spectator has nothing to ready
            text.append(f"\nThe race starts in {left:.1f} s{cue}\n", "bold yellow")
        elif self.mode == "race":
            me = state.racers.get(state.me or -1, {})
            if state.me == state.host and not state.settings.get("quick"):
                others = [r for r in state.racers.values() if r.get("racer") != state.host]
                waiting = [r for r in others if not r.get("ready")]
                if not others:
                    text.append("\nWaiting for someone to join…\n", "grey62")
                elif waiting:
                    text.append(f"\nWaiting for {len(waiting)} racer(s) to get ready…\n", "grey62")
                else:
                    text.append(
                        "\nEveryone is ready: press s to start (or space: ready too)\n",
                        "bold green",
                    )
            else:
                flag = "ready" if me.get("ready") else "not ready"
                text.append(f"\nYou are {flag}. ", "bold")
                text.append(how_it_starts(state.settings), "grey62")
        else:
            # No count of spectators: the snapshot's is one node's, as the watch began,
            # and no event keeps it right (two windows said "1" and "5 watching").
            text.append("\n" + how_it_starts(state.settings), "grey62")
        return text

    def fit_side(self, screen: PlayScreen | WatchScreen | None = None) -> None:
        """Give the board the width it needs and the racers' sidebar the rest (on the
        watch screen: one board, and the standings beside it); hide the sidebar when
        the terminal is too narrow for both (the watch's standings kept their 21
        columns in 40 and left a Yukon board 19: it wrapped)."""
        current = self.screen if isinstance(self.screen, PlayScreen | WatchScreen) else None
        screen = screen or current
        if screen is None or not screen.is_mounted:
            return
        panels = screen.query("#side")
        boards = "#boards" if isinstance(screen, WatchScreen) else "#board"
        if not panels or not screen.query(boards):
            # Mounted, its panels composing or being taken down: their own mount (or
            # the next resize) fits them. Looked up with query_one, a snapshot landing
            # then raised NoMatches and ended the network worker (a CI run, loaded).
            # The watch screen's boards are one panel, ``#boards``: asked for
            # ``#board``, every watch screen was taken for one lacking it.
            return
        side = panels.first()
        self.side_shown = True
        if isinstance(screen, WatchScreen):
            state = self.state
            need, _ = watch_needs(state.racer_list(), state.boards, screen.size.width)
            side.display = screen.size.width - need >= WATCH_SIDE_WIDTH + 2
            return
        view = self.controller.view
        need = (board_width(view) if view else 7 * 4) + BOARD_PAD
        board = screen.query_one("#board")
        room = screen.size.width - need
        if room >= MIN_SIDE_WIDTH + 2:
            board.styles.width = need
            side.styles.width = min(room, MAX_SIDE_WIDTH + 2)
            side.display = True
        else:
            board.styles.width = "1fr"
            side.display = False
            self.side_shown = False

    def paint_board(self, width: int, height: int) -> Text:
        view = self.controller.view
        if view is None:
            return Text("\n  waiting for the deal…")
        board = render_board(view, self.controller.marks(), max_rows=height, look=self.look)
        if fits(board, width, height):
            if not self.side_shown:  # the racers' panel in brief, where rows are left
                state = self.state
                room = height - len(board.split("\n")) - 1  # under a blank row
                brief = progress_brief(state.ranked(), total_cards(state.variant), state.me, width)
                if room > 0:
                    board.append("\n\n" + "\n".join(brief[:room]), STYLE_DIM)
            return board
        need = (board_width(view) + BOARD_PAD, board_min_rows(view) + FRAME_ROWS)
        return too_small("the board needs", need, (self.size.width, self.size.height))

    def paint_side(self, width: int, height: int) -> Text:
        state = self.state
        racers = state.ranked() if state.phase != "lobby" else state.racer_list()
        text = Text("Racers\n", style="bold", no_wrap=True)
        text.append_text(render_progress(racers, total_cards(state.variant), state.me, width))
        if self.mode == "race" and state.you and state.my_status not in (None, "playing"):
            text.append(f"\n\nyou: {state.my_status}", "bold")
        return text

    def paint_watch(self, width: int, height: int) -> Text:
        state = self.state
        need_w, need_h = watch_needs(state.racer_list(), state.boards, width)
        if width < need_w or height < need_h:  # a board would be wrapped or cut
            need = (need_w, need_h + FRAME_ROWS)
            return too_small("the boards need", need, (self.size.width, self.size.height))
        delay_ms = (wire.whole(state.settings.get("spectator_delay_s")) or 0) * 1000
        return render_watch(
            state.racer_list(),
            state.boards,
            width,
            height,
            self.focus_index,
            self.server_now(),
            delay_ms,
            self.move_times.at,
        )

    def paint_standings(self, width: int, height: int) -> Text:
        state = self.state
        if not state.result:
            return Text("waiting for the results…")
        return render_standings(
            state.result,
            state.settings,
            state.me,
            self.race_id,
            verdict=self.verdict,
            width=width,
        )

    # ---------------------------------------------------------------- input
    def cursor(self, direction: str) -> None:
        getattr(self.controller, direction)()
        self._repaint()

    def activate(self) -> None:
        self._act(self.controller.activate())

    def cancel_pick(self) -> None:
        if self.controller.picked is not None:
            self.controller.cancel()
            self.say("put back")

    def to_foundation(self) -> None:
        self._act(self.controller.foundation())

    def column(self, column: int) -> None:
        self._act(self.controller.number(column))

    def _act(self, action: Any) -> None:
        if action.move:
            self.send_move(action.move)
        elif action.message:
            self.say(action.message)
        self._repaint()

    def send_move(self, move: str) -> None:
        state = self.state
        if state.phase != "racing":
            self.say("the race is not on")
            return
        if state.my_status not in ("playing", "stuck"):
            self.say(f"you are {state.my_status}: no more moves")
            return
        if len(move) > MAX_MOVE_LEN:
            # No move is longer (a paste into the ``:`` box): sent, one past the
            # protocol's string limit had the connection closed (1009), and again after
            # each reconnect, which resends the move in flight — reconnecting for ever.
            self.say(refusal_text("bad_notation", "", move, self.controller.view))
            return
        if not self.online:
            self._refuse_offline(move)  # the pick stays, to be put once reconnected
            self._repaint()
            return
        self.controller.cancel()
        self._moves.put_nowait((move, self.in_flight.epoch))
        self._repaint()

    async def _mover(self) -> None:
        """Send the moves typed, in order: each at once while the board shows the
        outcome of every move in flight; after the reply to one that turns a card up."""
        while True:
            move, epoch = await self._moves.get()
            await self.in_flight.settled.wait()
            if epoch != self.in_flight.epoch:
                continue  # typed before a refusal: dropped with the queue
            client = self.client
            if client is None or not self.online:
                self._refuse_offline(move)
                continue
            await self._send(client, move)

    async def _send(self, client: RaceClient, move: str) -> None:
        """Send ``move`` with the next seq, show its board at once where the engine on
        the board shown knows it (:func:`played_view`), and confirm it on its reply."""
        flight = self.in_flight
        epoch, seq, before = flight.epoch, flight.next_seq(client.seq), self.state.my_status
        try:
            reply = await client.send_move(move, seq)
        except (ConnectionError, TimeoutError, ConnectionClosed, OSError):
            self._connection_lost([*flight.live(), Sent(move, seq, None, epoch)])
            return
        view = self.controller.view
        current = epoch == flight.epoch  # else refused meanwhile: its refusal is moot
        shown = played_view(view, move) if view is not None and current else None
        sent = flight.add(move, seq, shown, epoch)
        if shown is not None:
            self.controller.set_view(shown)
            self._repaint()
        self.run_worker(self._confirm(sent, reply, before), group="moves", exit_on_error=True)

    async def _confirm(
        self, sent: Sent, reply: Awaitable[dict[str, Any]], before: str | None
    ) -> None:
        """``sent``'s reply: the server's board replaces the one shown where they
        differ; a refusal undoes every move shown ahead of it."""
        try:
            moved = await reply  # folded into the view as it arrives
        except ServerError as err:
            if self.in_flight.done(sent):  # else it followed a refused move: moot
                await self._refused(sent, err)
            return
        except (ConnectionError, TimeoutError, ConnectionClosed, OSError):
            live = self.in_flight.live()
            if self.in_flight.done(sent):
                self._connection_lost(live)
            return
        if not self.in_flight.done(sent):
            return
        board = moved.get("board")
        if board != sent.shown:
            self.controller.set_view(self.in_flight.rebased(board))
        status = moved.get("status")
        if status != before and status == "finished":
            self.say("all foundations complete — you finished!", "bold green")
        elif status != before and status == "stuck":
            self.say(stuck_words(room_has_undo(self.state)), "bold yellow")
        else:
            self.say(f"{sent.move} ✓")

    async def _refused(self, sent: Sent, err: ServerError) -> None:
        """The server refused ``sent``: back to the server's board (every move shown
        ahead of the refused one undone, the ones sent after it moot: the server
        refuses them too), the moves still queued dropped, the reason said.

        ``unavailable`` (and ``internal``) say the outcome is unknown, not that the move
        was not played (docs/protocol.md §11): the store may have taken it, and then
        the moves pipelined after it too. The board last confirmed was then not the
        server's (an audit: three moves stored, the screen showed one, and the next
        move was refused "out of step"): the server's board and seq are asked for
        (a resume on this connection), as after ``bad_seq``, and whether the move
        was played is said."""
        self.in_flight.restart()
        self._drop_queued_moves()
        self.controller.set_view(self.state.my_board)
        text = refusal_text(err.code, err.message, sent.move, self.controller.view)
        if err.code == "bad_seq":
            await self._resync()
        elif err.code in OUTCOME_UNKNOWN and await self._resync():
            if self.state.next_seq > sent.seq:
                text, style = f"{sent.move} was played (the server answered late)", "bold yellow"
                self.say(text, style)
                return
            text = f"{sent.move} was not played: {text}"
        self.say(text, "bold red")

    def _connection_lost(self, sent: list[Sent]) -> None:
        """The connection dropped with ``sent`` unconfirmed: the resume tells which
        were played, and sends the others again (:meth:`_send_again`); the moves typed
        since are not sent. A reply that timed out (``NoReply``) on a link still open
        — gone silent, no reset — drops it now: the keepalive would notice only up to
        4 s later, and a move typed meanwhile went into the dead link with a seq
        already in flight (an audit: it was then lost without a word)."""
        client = self.client
        if client is not None and not client.closed.done():
            client.abort()
        self.in_flight.restart()
        self._unsent += self._drop_queued_moves()
        # Merged by seq: a send that fails after the replies' failures has told of
        # the moves before it must not make them forgotten.
        known = {seq: move for move, seq in self._unconfirmed}
        for one in sent:
            known.setdefault(one.seq, one.move)
        self._unconfirmed = [(known[seq], seq) for seq in sorted(known)]
        moves = " ".join(s.move for s in sent)
        self.say(f"{moves}: not confirmed — connection lost", "bold yellow")

    def _drop_queued_moves(self) -> list[str]:
        dropped = []
        while not self._moves.empty():
            dropped.append(self._moves.get_nowait()[0])
        return dropped

    def toggle_ready(self) -> None:
        state = self.state
        if state.phase != "lobby" or self.mode != "race":
            return
        me = state.racers.get(state.me or -1, {})
        self._request("ready", not me.get("ready"))

    def start_race(self) -> None:
        if self.mode != "race":
            return
        if self.state.me != self.state.host:
            self.say("only the host starts the race")
            return
        self._request("start")

    def rematch(self) -> None:
        if self.mode == "race":
            self._request("rematch")

    def _request(self, what: str, *args: Any) -> None:
        async def run() -> None:
            client = self.client
            if client is None or not self.online:
                self.say("not connected", "yellow")
                return
            try:
                await getattr(client, what)(*args)
            except ServerError as err:
                self.say(err.message, "bold red")
            except (ConnectionError, TimeoutError, ConnectionClosed, OSError):
                self.say("not connected", "yellow")

        self.run_worker(run(), group="requests")

    def ask_resign(self) -> None:
        if self.state.phase != "racing" or self.state.my_status not in ("playing", "stuck"):
            self.say("there is nothing to resign")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._request("resign")

        self.push_screen(ConfirmScreen("Resign? You stay in the standings."), answered)

    def action_quit_race(self) -> None:
        if not self.screen_stack:
            return  # a Ctrl-C while the app shuts down: it is already quitting
        if isinstance(self.screen, ConfirmScreen):
            self.quit_now()  # Ctrl-C again while asked: the player insists
            return
        self.ask_quit()

    def ask_quit(self) -> None:
        """Ask before a quit that loses something: a race being played (forfeit) or a
        seat in a lobby. Watching, or a window whose race went elsewhere, just quits."""
        state = self.state
        if self.mode == "watch" or self._ended or self._stopped or not state.loaded:
            self.quit_now()
            return
        racing = state.my_status in ("playing", "stuck")
        if (state.phase == "racing" and racing) or state.phase == "countdown":
            # From the countdown on, a racer who leaves is in the standings as `left`:
            # asked "Leave the room?" there, the player was not told it forfeits.
            question = "Quit the race? Leaving forfeits it."
        elif state.phase == "racing":
            question = "Quit? (the standings come when everyone is done)"
        else:
            question = "Leave the room?"

        def answered(yes: bool | None) -> None:
            if yes:
                self.quit_now()

        self.push_screen(ConfirmScreen(question, quitting=True), answered)

    def terminated(self) -> None:
        """SIGTERM: end now, as a lost connection leaves the race — no ``leave``, the
        saved race kept for ``solrace resume`` — the connection closed as the app
        unmounts, and the terminal given back (:func:`solrace_client.tui._run`)."""
        self._stopped = True
        self.exit(EXIT_TERMINATED, return_code=EXIT_TERMINATED)

    def quit_now(self) -> None:
        async def run() -> None:
            self._leaving = True
            # Left after the race too (the race-over screen's q): only closed, the
            # others were told this racer "went offline", as if back for a rematch.
            await self.session.leave()  # a spectator's session has no seat: nothing
            await self.session.close()
            if self.save and self.mode == "race" and not self._replaced:
                self._forget_race()
            self._stopped = True
            self.exit(0)

        self.run_worker(run(), group="quit")

    # ---------------------------------------------------------------- watch
    def focus_racer(self, delta: int) -> None:
        count = len(self.state.racers)
        if count:
            self.focus_index = (self.focus_index + delta) % count
        self._repaint()

    def pick_racer(self, index: int) -> None:
        if index < len(self.state.racers):
            self.focus_index = index
        self._repaint()
