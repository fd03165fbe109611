"""``solrace bot``: a racer that plays by itself over the public protocol.

It is an ordinary client: it sees only what any racer sees (its own board's view, the
others' progress), rebuilds a playable board from the view with
:func:`~solrace_client.boardview.board_from_view`, and lets a strategy
(:mod:`solrace_client.strategy`) pick each move. So it is a sparring partner, a load
generator and an end-to-end test of the protocol in one.

The life of a bot: enter a room (create, join by code, or quick), ready up, optionally
start the room when it is the host, wait for ``started``, play until its status is no
longer ``playing`` (finished or stuck) or the race is over, then wait for ``race_over``,
save it (:mod:`solrace_client.results`) and return its data.

It never loops forever: it resigns after ``max_moves`` moves, after ``stall_limit``
moves in a row that only revisit positions it has been in, or after ``patience`` moves
without putting a card up or turning one over. Nor does it keep a race waiting: stuck
in a room that allows undo (the server then counts it as able to move), it resigns. Nor
does it wait forever for a ``race_over`` that does not come: it gives up
:data:`RACE_OVER_GRACE_S` after the race's time limit.

Connections drop; races do not. The bot plays through a
:class:`~solrace_client.session.Session`, which reconnects (trying its servers in turn,
with exponential backoff and jitter) and ``resume``s with the token and the last event
version folded; the snapshot then tells it its board and the ``seq`` of its next move,
so a move whose reply was lost is neither lost nor repeated. A connection closed as
``replaced`` (the same racer resumed elsewhere) is final. The room itself is the
session's :class:`~solrace_client.roomview.RoomView`: the bot folds nothing of its own.
A request refused ``unavailable`` (Redis down: the outcome is unknown) is sent again
after the pause the server asks for — a move with the same ``seq`` and the same move,
so it is stored once whether or not the first attempt was (docs/protocol.md §11).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from solrace.protocol import limits

from . import config
from .boardview import board_from_view
from .connection import RaceClient, ServerError, retry_after_s, server_flag
from .errors import cannot_reach, entry_lost, lost_reason, refusal_of
from .results import SavedResult, finished_race, write_result
from .roomview import RACE_OVER_GRACE_S, RoomView
from .session import DROPPED, Backoff, Rejoined, Session, SessionOver, Unreachable
from .strategy import STRATEGIES, Choice, Memory, Strategy, position_key

log = logging.getLogger("solrace.bot")

LOBBY: Final = "lobby"
COUNTDOWN: Final = "countdown"
RACING: Final = "racing"
FINISHED: Final = "finished"
PLAYING: Final = "playing"
STUCK: Final = "stuck"
#: How long one wait for events lasts once the bot has stopped playing.
IDLE_WAIT_S: Final = 5.0
#: A countdown's length (docs/protocol.md: the race starts 3 s after it began): the
#: longest the bot counts on when it cannot tell when the countdown ends.
COUNTDOWN_S: Final = 3.0


class BotError(Exception):
    """The bot cannot go on: refused by the server, replaced, or unable to reconnect."""


class ResultNotSaved(Exception):
    """The race ran to its end but its result could not be saved (an unwritable or full
    config directory): ``result`` is the race's result all the same."""

    def __init__(self, result: dict[str, Any], error: OSError) -> None:
        super().__init__(f"could not save the result: {error.strerror or error}")
        self.result = result


class BotCannotStart(BotError):
    """The bot never got into a room: no server answered, or the entry was refused
    (``solrace bot`` exits 2 for this — it could not run — and 1 for a race it could
    not finish)."""


@dataclass
class BotHooks:
    """Optional callbacks, for the CLI's progress lines and for tests that want to
    interfere (cut a connection, count moves)."""

    #: Every new connection, before it is used.
    connected: Callable[[RaceClient], None] | None = None
    #: The ``joined`` reply of the first entry (create/join/quick).
    joined: Callable[[dict[str, Any]], None] | None = None
    #: Every ``moved`` reply.
    moved: Callable[[dict[str, Any]], None] | None = None
    #: Every acknowledged move, as ``(seq, notation)``: what the server promised to keep
    #: (the chaos test checks each one against the race's move logs).
    accepted: Callable[[int, str], None] | None = None
    #: Human-readable progress ("joined ABC123", "reconnecting …").
    say: Callable[[str], None] | None = None
    #: Awaited before the host sends ``start`` (its room full and ready): a test that
    #: runs many rooms starts them together.
    before_start: Callable[[], Awaitable[None]] | None = None
    #: The race as it is saved (whether or not it is): ``solrace bot`` verifies it.
    over: Callable[[SavedResult], None] | None = None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _counts(view: Mapping[str, Any]) -> tuple[int, int]:
    """(cards on foundations, face-down tableau cards) of a view: the bot's progress."""
    up = 0
    for top in view["foundations"].values():
        up += sum(top) if isinstance(top, list) else int(top)
    return up, sum(int(c["down"]) for c in view["tableau"])


async def _pause(err: ServerError) -> None:
    """Wait as long as an ``unavailable`` refusal asks (``retry_after_ms``)."""
    await asyncio.sleep(retry_after_s(err))


class _Bot:
    """One bot's race. The room is the session's view (:mod:`solrace_client.roomview`);
    the bot keeps only what is its own: how it plays, and what it has seen happen."""

    def __init__(
        self,
        servers: Sequence[str],
        entry: tuple[str, dict[str, Any]],
        name: str,
        strategy: Strategy,
        rng: random.Random,
        *,
        ready: bool,
        host_start: bool,
        min_racers: int,
        max_moves: int,
        stall_limit: int,
        patience: int,
        move_delay: float,
        reconnect_attempts: int,
        race_over_grace_s: float,
        hooks: BotHooks,
    ) -> None:
        self.entry = entry
        self.name = name
        self.strategy = strategy
        self.rng = rng
        self.want_ready = ready
        self.host_start = host_start
        self.min_racers = min_racers
        self.max_moves = max_moves
        self.stall_limit = stall_limit
        self.patience = patience
        self.move_delay = move_delay
        self.race_over_grace_s = race_over_grace_s
        self.hooks = hooks
        #: The servers as ``--server`` names them: for a command suggested to the user.
        self.servers = ",".join(servers)
        self.session = Session(
            servers,
            backoff=Backoff(first_s=0.1, max_s=5.0, jitter=0.5, attempts=reconnect_attempts),
            connected=hooks.connected,
            lost=self._lost,
        )

        #: The race this bot raced in has begun (a room seen back in its lobby after
        #: that, with no result seen, means the race ended unseen).
        self.raced = False
        #: The race's result, taken from ``race_over`` (or a snapshot of the finished
        #: room) when it arrives: a rematch may reset the room right after.
        self.result: dict[str, Any] | None = None
        #: The version that ended the race (its race_over's, or the finished snapshot's):
        #: what the view kept of that round is saved with it (RoomView.overs).
        self.over_version: int | None = None
        self.start_tried_at = -1
        #: When (time.monotonic) the bot stops waiting for this race's race_over.
        self.give_up_at: float | None = None
        #: When (time.monotonic) the bot stops waiting for the countdown's ``started``.
        self.start_due_at: float | None = None
        #: Ready was asked for in this lobby (its event may not be here yet).
        self.asked_ready = False
        #: The strategy found no move here, or the bot resigned: what the bot knows
        #: before the server's events say so.
        self.no_move = False
        self.resigned = False

        self.memory = Memory()
        self.moves_played = 0
        self.stall = 0
        self.idle = 0
        #: The most cards ever up and the fewest ever face down: only beating one of
        #: them is progress (a card up and down again is not).
        self.best: tuple[int, int] = (-1, 1 << 30)
        self.refusals = 0
        #: A move refused ``unavailable`` — outcome unknown — as ``(seq, position,
        #: choice)``: played again, same seq and same move, while the racer is still
        #: there (docs/protocol.md §11: the retry gets the stored outcome either way).
        self.retry: tuple[int, str, Choice] | None = None

    # ------------------------------------------------------------ plumbing
    def say(self, text: str) -> None:
        if self.hooks.say is not None:
            self.hooks.say(text)
        log.info("%s: %s", self.name, text)

    def _lost(self, attempt: int, error: BaseException | None) -> None:
        if attempt == 1:
            self.say(f"connection lost ({lost_reason(error)}); reconnecting")

    @property
    def view(self) -> RoomView:
        return self.session.view

    @property
    def live(self) -> RaceClient:
        return self.session.live

    @property
    def status(self) -> str:
        """This racer's status, as far as the bot knows."""
        if self.resigned:
            return "resigned"
        status = self.view.my_status or "left"
        return STUCK if status == PLAYING and self.no_move else status

    async def _wait_event(self, timeout: float) -> Any:
        item = await self.session.next(timeout)
        if item is not None:
            self._take(item)
        return item

    def _drain(self) -> None:
        """Take whatever has arrived, without waiting."""
        client = self.session.client
        while client is not None and not client.events.empty():
            self._take(client.events.get_nowait())

    # --------------------------------------------------------------- state
    def _take(self, item: Any) -> None:
        """What the bot learns from one event, notice or fresh snapshot (the view has
        folded it already)."""
        if isinstance(item, Rejoined):
            if item.reconnected:
                where = self.session.server
                self.say(f"resumed on {where} at version {self.view.version}")
            self._loaded()
            return
        t, d = item.t, item.d
        if t == "resync":
            self._loaded()
        elif t == "countdown":
            self._countdown(None)
            self.say("countdown")
        elif t == "started":
            self.raced = True
            self._time_limit(self.view.start_at_ms)  # sent at the start
            self.say("started")
        elif t == "race_over" and self.result is None:
            self.result = dict(d)
            self.over_version = item.v
        elif t == "room_reset":
            if self.raced and self.result is None:
                raise BotError("the race ended unseen and the room moved on to a rematch")
            self.asked_ready = False

    def _loaded(self) -> None:
        """A snapshot replaced the view (entry, resume, resync)."""
        view = self.view
        self.no_move = self.resigned = False
        board = view.my_board
        if board:
            self.memory.arrive(board)
        if view.phase == FINISHED and view.result and self.result is None:
            self.result = dict(view.result)
            self.over_version = view.version
        elif self.raced and view.phase in (LOBBY, COUNTDOWN) and self.result is None:
            raise BotError("the race ended while the bot was away and the room moved on")
        if view.phase == RACING:
            self.raced = True
            self._time_limit(view.now_ms)
        elif view.phase == COUNTDOWN:
            self._countdown(view.now_ms)

    def _time_limit(self, server_now: Any) -> None:
        """Set when to give up waiting for race_over, from the race's ``ends_at_ms``
        and the server's clock now (``server_now``): the bot's own clock may be
        minutes off the server's. A limit past the protocol's longest (a hostile
        server's) or none at all count as the longest."""
        longest = float(limits.MAX_TIME_LIMIT_S)
        ends = self.view.ends_at_ms
        left = longest
        if _whole(ends) and _whole(server_now):
            left = min(max(0, ends - server_now) / 1000, longest)
        self.give_up_at = time.monotonic() + left + self.race_over_grace_s

    def _countdown(self, server_now: Any) -> None:
        """Set when to give up waiting for the countdown's ``started``: the grace past
        its end (``start_at_ms``, on the server's clock ``server_now``; at a countdown
        event, whose time the bot does not know, the protocol's COUNTDOWN_S). It waited
        for ever on a server that never started the race."""
        left = COUNTDOWN_S
        start = self.view.start_at_ms
        if _whole(start) and _whole(server_now):
            left = min(max(0, start - server_now) / 1000, COUNTDOWN_S)
        self.start_due_at = time.monotonic() + left + self.race_over_grace_s

    def _start_due_in(self) -> float:
        """Seconds until the bot gives up on the countdown's ``started``; raises when
        that is past."""
        return self._due_in(self.start_due_at, "started", "its countdown (no started)")

    def _give_up_in(self) -> float:
        """Seconds until the bot gives up on race_over; raises when that is past."""
        return self._due_in(self.give_up_at, "ended", "its time limit (no race_over)")

    def _due_in(self, due_at: float | None, done: str, after: str) -> float:
        """Seconds until ``due_at`` (monotonic; None: nothing is due), or BotError
        saying the server has not ``done`` the race ``after`` what it waited for."""
        if due_at is None:
            return IDLE_WAIT_S
        left = due_at - time.monotonic()
        if left <= 0:
            raise BotError(
                f"the server has not {done} the race {self.race_over_grace_s:g} s after "
                f"{after}: giving up"
            )
        return left

    # ---------------------------------------------------------------- run
    async def run(self) -> dict[str, Any]:
        await self._enter()
        try:
            while self.result is None:
                try:
                    await self._step()
                except DROPPED as exc:
                    self._take(await self.session.reconnect(exc))
        except SessionOver as over:
            raise BotError(str(over)) from None
        except (asyncio.CancelledError, BotError):
            # Interrupted (Ctrl-C, a signal), or giving up: before its race is over, the
            # bot leaves — it stayed in the lobby, ready, and a quick race started
            # against it; given up, it was said to have gone offline "(30 s to come
            # back)", its seat held, though a bot saves no race to come back to.
            if self.result is None:
                await self.session.leave()
            raise
        else:
            # Its race over, the bot is done with the room: it leaves before it closes.
            # Closed alone, the others were told it went offline (`Robot went offline`
            # on the race-over screen) — as if it might come back for the rematch.
            await self.session.leave()
        finally:
            await self.session.close()
        return self.result if self.result is not None else {}

    async def _enter(self) -> None:
        action, params = self.entry

        async def request(client: RaceClient) -> dict[str, Any]:
            if action == "create":
                settings = dict(params)
                return await client.create(settings.pop("variant"), self.name, **settings)
            if action == "join":
                return await client.join(str(params["code"]), self.name)
            return await client.quick(str(params["variant"]), self.name)

        try:
            reply = await self.session.enter(request)
        except Unreachable as err:
            raise BotCannotStart(cannot_reach(err.servers, err.error)) from None
        except ServerError as err:
            code = params.get("code")
            saved = action == "join" and bool(code) and config.saved_in_room(str(code))
            flag = server_flag(self.servers)  # for the command the words suggest
            refused = refusal_of(err.data, action, code and str(code), saved=saved, server=flag)
            raise BotCannotStart(f"{action} refused: {refused}") from None
        except DROPPED as exc:  # no reply: no token to resume with
            raise BotCannotStart(entry_lost(action, exc, self.session.server)) from None
        self._loaded()
        if self._never_starts():
            await self.session.leave()  # its seat freed for a racer who will ready
            raise BotCannotStart(
                f"--no-ready: room {self.view.code} starts only when every racer is ready, "
                "or when its host starts it with every other racer ready: a bot that is "
                "never ready would keep it from starting (--no-ready is for a quick room, "
                "which starts on its lobby timer, or with --host-start); the bot left the room"
            )
        self.say(f"joined room {self.view.code} as racer {self.view.me}")
        if self.hooks.joined is not None:
            self.hooks.joined(reply)

    def _never_starts(self) -> bool:
        """Not ready ever (``--no-ready``), in the lobby of a room that is not quick,
        and never its starting host: docs/rules.md's start needs every racer but the
        host ready, and nothing else starts such a room, so it would wait for ever —
        and so would the bot (a host that never readies still starts: its start needs
        the others ready, not itself; a quick room starts on its lobby timer)."""
        view = self.view
        quick = bool(view.settings.get("quick"))
        return not (self.want_ready or self.host_start or quick) and view.phase == LOBBY

    async def _step(self) -> None:
        self._drain()
        if self.result is not None:
            return
        if self.view.needs_resync:  # events went missing: the room as the server has it
            await self._resync()
            return
        phase = self.view.phase
        if phase == RACING:
            self._give_up_in()
        if phase in (LOBBY, COUNTDOWN):
            await self._lobby()
        elif phase == RACING and self.status == PLAYING:
            await self._play_one()
        elif phase == RACING and self.status == STUCK and self._may_undo():
            # The server counts a racer stuck where undo is allowed as still able to
            # move (an undo is a move), so the race would wait for its time limit; the
            # bot never undoes: it resigns.
            await self._resign()
        else:
            # Done playing: wait for the others (the server ends the race at the
            # latest at its time limit, and the bot gives up a while after that). A
            # dead connection is reconnected on the way.
            await self._wait_event(timeout=min(IDLE_WAIT_S, self._give_up_in()))

    def _ready_flags(self) -> dict[int, bool]:
        return {racer: bool(info.get("ready")) for racer, info in self.view.racers.items()}

    def _waits_for_racers(self) -> bool:
        """Hosting with ``host_start``, fewer than ``min_racers`` are in: the bot is not
        ready, since a room starts once everyone, its host included, is ready (a host
        ready at once started an 8-racer room at 2/8, ``--min-racers 8``)."""
        view = self.view
        hosting = self.host_start and view.host == view.me
        return hosting and len(view.racers) < self.min_racers

    async def _lobby(self) -> None:
        view = self.view
        if view.phase == LOBBY and view.me is not None:
            flag = self._ready_flags().get(view.me)
            waiting = self._waits_for_racers()
            try:
                if self.want_ready and not waiting and not self.asked_ready and not flag:
                    await self.live.ready()
                    self.asked_ready = True
                elif waiting and flag:  # a racer left: not ready again until enough are in
                    await self.live.ready(False)
                    self.asked_ready = False
            except ServerError as err:
                if err.code != "wrong_phase":
                    raise BotError(f"ready refused: {err}") from None
            await self._maybe_start()
        wait = self._start_due_in() if view.phase == COUNTDOWN else IDLE_WAIT_S
        await self._wait_event(timeout=min(IDLE_WAIT_S, wait))

    async def _maybe_start(self) -> None:
        view = self.view
        if not self.host_start or view.host != view.me or self.start_tried_at == view.version:
            return
        flags = self._ready_flags()
        others = [ready for racer, ready in flags.items() if racer != view.me]
        if len(flags) < self.min_racers or not all(others):
            return
        if self.hooks.before_start is not None:
            await self.hooks.before_start()
        self.start_tried_at = view.version
        try:
            await self.live.start()
            self.say("started the room")
        except ServerError as err:
            if err.code not in ("not_ready", "wrong_phase"):
                raise BotError(f"start refused: {err}") from None

    # ---------------------------------------------------------------- play
    async def _play_one(self) -> None:
        view = self.view
        board = view.my_board
        if board is None:  # the first board comes as a notice after `started`
            if await self._wait_event(timeout=5) is None and view.my_board is None:
                await self._resync()
            return
        if self._should_resign():
            await self._resign()
            return
        here = position_key(board)
        seq = view.next_seq
        retry, self.retry = self.retry, None
        if retry is not None and retry[:2] == (seq, here):
            choice: Choice | None = retry[2]
        else:
            choice = self.strategy(board_from_view(board), self.memory, self.rng)
        if choice is None:  # no legal move: the server says `stuck` with the last reply
            self.no_move = True
            return
        notation = str(choice.move)
        try:
            reply = await self.live.move(notation)
        except ServerError as err:
            if err.code == "unavailable":
                self.retry = (seq, here, choice)
                self.say(f"move {seq} {notation}: unavailable; retrying it")
            await self._refused(err)
            return
        self.memory.leave(here, notation)
        self.memory.arrive(reply["board"])
        self.moves_played += 1
        self.stall = 0 if choice.novel else self.stall + 1
        up, down = _counts(reply["board"])
        best_up, best_down = self.best
        if up > best_up or down < best_down:
            self.idle = 0
            self.best = (max(up, best_up), min(down, best_down))
        else:
            self.idle += 1
        if self.hooks.accepted is not None:
            self.hooks.accepted(int(reply["seq"]), notation)
        if self.hooks.moved is not None:
            self.hooks.moved(reply)
        if reply["status"] != PLAYING:
            counted = reply.get("moves")  # the engine's count: auto-complete included
            also = (
                f" ({counted} counted, the server's auto-complete included)"
                if isinstance(counted, int) and counted != self.moves_played
                else ""
            )
            self.say(f"{reply['status']} after {self.moves_played} moves{also}")
        if self.move_delay:
            await asyncio.sleep(self.move_delay)

    def _may_undo(self) -> bool:
        board = self.view.my_board
        return board is not None and board_from_view(board).options.undo

    def _should_resign(self) -> bool:
        return (
            self.moves_played >= self.max_moves
            or self.stall > self.stall_limit
            or self.idle > self.patience
        )

    async def _resign(self) -> None:
        self.say(
            f"resigning after {self.moves_played} moves (stall {self.stall}, idle {self.idle})"
        )
        try:
            await self.live.resign()
        except ServerError as err:
            if err.code == "unavailable":  # outcome unknown: resign again after a pause
                await _pause(err)
                return
            if err.code not in ("wrong_phase", "not_racer"):
                raise BotError(f"resign refused: {err}") from None
        self.resigned = True

    async def _refused(self, err: ServerError) -> None:
        code = err.code
        if code == "unavailable":
            await _pause(err)
        elif code == "bad_seq":
            await self._resync()
        elif code == "move_limit":
            await self._resign()  # the log is full: no move will be taken again
        elif code in ("illegal_move", "bad_notation"):
            # The rebuilt board agrees with the server's by construction, so this is a
            # bug somewhere; resynchronise, and give up rather than loop.
            self.refusals += 1
            self.say(f"move refused: {err}")
            if self.refusals > 5:
                raise BotError(f"too many refused moves; last: {err}") from None
            await self._resync()
        elif code == "wrong_phase":
            self._drain()
            if self.view.phase == RACING and self.result is None:
                await self._resync()
        else:
            raise BotError(f"move refused: {err}") from None

    async def _resync(self) -> None:
        """Re-read the room's and this racer's state on the same connection (during a
        Redis outage: after a pause, by the next step, which will need it again)."""
        try:
            await self.session.resync()
        except ServerError as err:
            if err.code != "unavailable":
                raise
            await _pause(err)
            return
        self._loaded()


async def run_bot(
    server: str | Sequence[str],
    code: str | None = None,
    quick_variant: str | None = None,
    create: Mapping[str, Any] | None = None,
    name: str = "bot",
    strategy: str | Strategy = "greedy",
    *,
    ready: bool = True,
    host_start: bool = False,
    min_racers: int = 2,
    max_moves: int = 3000,
    stall_limit: int = 200,
    patience: int = 500,
    move_delay: float = 0.0,
    rng_seed: int | None = None,
    reconnect_attempts: int = 12,
    race_over_grace_s: float = RACE_OVER_GRACE_S,
    save: bool = True,
    hooks: BotHooks | None = None,
) -> dict[str, Any]:
    """Race once and return the ``race_over`` data (RaceResult).

    Exactly one of ``code`` (join that room), ``quick_variant`` (quick race) and
    ``create`` (a room's settings, ``variant`` included, as ``create`` takes them) says
    where. ``server`` is a URL or a list of URLs tried in turn when reconnecting.
    ``host_start``: start the room once the bot is its host, at least ``min_racers``
    are in and every other racer is ready. ``move_delay`` waits between moves (the
    connection paces requests inside the server's rate limit by itself). ``save``
    stores the result for ``replay``/``verify``. ``race_over_grace_s``: how long past
    the race's time limit to wait for ``race_over`` before giving up (BotError).
    Raises :class:`BotError` when it cannot take part.
    """
    wanted: list[tuple[str, dict[str, Any], bool]] = [
        ("join", {"code": code}, code is not None),
        ("quick", {"variant": quick_variant}, quick_variant is not None),
        ("create", dict(create or {}), create is not None),
    ]
    entries = [(action, params) for action, params, given in wanted if given]
    if len(entries) != 1:
        raise ValueError("give exactly one of code, quick_variant and create")
    if isinstance(strategy, str):
        try:
            strategy = STRATEGIES[strategy]
        except KeyError:
            raise ValueError(f"unknown strategy {strategy!r}: {', '.join(STRATEGIES)}") from None
    servers = [server] if isinstance(server, str) else list(server)
    if not servers:
        raise ValueError("no server to connect to")
    bot = _Bot(
        servers,
        entries[0],
        name,
        strategy,
        random.Random(rng_seed),
        ready=ready,
        host_start=host_start,
        min_racers=min_racers,
        max_moves=max_moves,
        stall_limit=stall_limit,
        patience=patience,
        move_delay=move_delay,
        reconnect_attempts=reconnect_attempts,
        race_over_grace_s=race_over_grace_s,
        hooks=hooks or BotHooks(),
    )
    result = await bot.run()
    view = bot.view
    # The round as the view kept it at its end: a rematch may have reset the room
    # since (the view folds frames as they arrive), taking the commitment seen at the
    # countdown and the deal with it.
    over = view.overs.get(bot.over_version) if bot.over_version is not None else None
    finished = finished_race(
        view.room or "",
        result,
        over.settings if over else view.settings,
        view.code,
        published_commitment=over.published_commitment if over else view.published_commitment,
        deal=over.deal if over else view.deal,
        server=",".join(servers),
        countdown_settings=over.countdown_settings if over else view.countdown_settings,
        acknowledged=over.acknowledged if over else None,
    )
    if bot.hooks.over is not None:
        bot.hooks.over(finished)
    if save and view.room is not None:
        try:
            path = write_result(finished)
        except OSError as exc:  # the race was run: its standings still count
            raise ResultNotSaved(result, exc) from exc
        bot.say(f"result saved to {path}")
    return result
