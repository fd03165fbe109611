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
in a room that allows undo (the server then counts it as able to move), it resigns.

Connections drop; races do not. On a dropped connection the bot reconnects (trying its
servers in turn, with exponential backoff and jitter) and ``resume``s with its token
and the last event version it applied; the snapshot then tells it its board and the
``seq`` of its next move, so a move whose reply was lost is neither lost nor repeated.
A connection closed as ``replaced`` (the same racer resumed elsewhere) is final.
A request refused ``unavailable`` (Redis down: the outcome is unknown) is sent again
after the pause the server asks for — a move with the same ``seq`` and the same move,
so it is stored once whether or not the first attempt was (docs/protocol.md §11).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from solrace.protocol import CloseCode, CloseReason, Envelope
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from .boardview import board_from_view
from .connection import RaceClient, ServerError
from .errors import cannot_reach, refusal_of
from .results import save_result
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

#: Failures that mean "this connection is gone": reconnect and resume.
DROPPED: Final = (OSError, ConnectionClosed, InvalidHandshake)


class BotError(Exception):
    """The bot cannot go on: refused by the server, replaced, or unable to reconnect."""


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


def _counts(view: Mapping[str, Any]) -> tuple[int, int]:
    """(cards on foundations, face-down tableau cards) of a view: the bot's progress."""
    up = 0
    for top in view["foundations"].values():
        up += sum(top) if isinstance(top, list) else int(top)
    return up, sum(int(c["down"]) for c in view["tableau"])


async def _pause(err: ServerError) -> None:
    """Wait as long as an ``unavailable`` refusal asks (``retry_after_ms``)."""
    await asyncio.sleep(int(err.data.get("retry_after_ms") or 200) / 1000)


class _Bot:
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
        hooks: BotHooks,
    ) -> None:
        self.servers = list(servers)
        self.entry = entry
        self.name = name
        self.strategy = strategy
        self.rng = rng
        self.jitter = random.Random()
        self.want_ready = ready
        self.host_start = host_start
        self.min_racers = min_racers
        self.max_moves = max_moves
        self.stall_limit = stall_limit
        self.patience = patience
        self.move_delay = move_delay
        self.reconnect_attempts = reconnect_attempts
        self.hooks = hooks

        self.client: RaceClient | None = None
        self.server_index = 0
        self.room: str | None = None
        self.code: str | None = None
        self.token: str | None = None
        self.racer: int | None = None
        self.version = 0
        self.phase = LOBBY
        self.status = "waiting"
        self.settings: dict[str, Any] = {}
        self.host: int | None = None
        self.roster: dict[int, bool] = {}
        self.published: str | None = None
        self.raced = False
        self.result: dict[str, Any] | None = None
        self.start_tried_at = -1

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

    @property
    def live(self) -> RaceClient:
        if self.client is None:
            raise ConnectionError("not connected")
        return self.client

    async def _connect(self, url: str) -> RaceClient:
        client = await RaceClient.connect(url, open_timeout=5)
        if self.hooks.connected is not None:
            self.hooks.connected(client)
        return client

    async def _drop_client(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2)

    async def _next(self, timeout: float) -> Envelope | None:
        """The next event or notice, None after ``timeout``; raises ConnectionError
        once the connection is closed and everything it delivered has been read."""
        client = self.live
        if not client.events.empty():
            return client.events.get_nowait()
        if client.closed.done():
            raise ConnectionError("connection closed")
        getter = asyncio.ensure_future(client.events.get())
        try:
            waiters: set[asyncio.Future[Any]] = {getter, client.closed}
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if getter.done() and not getter.cancelled():
            return getter.result()
        if client.closed.done():
            raise ConnectionError("connection closed")
        return None

    async def _wait_event(self, timeout: float) -> Envelope | None:
        envelope = await self._next(timeout)
        if envelope is not None:
            self._apply(envelope)
        return envelope

    def _drain(self) -> None:
        """Apply whatever has arrived, without waiting."""
        client = self.client
        while client is not None and not client.events.empty():
            self._apply(client.events.get_nowait())

    # --------------------------------------------------------------- state
    def _entered(self, reply: Mapping[str, Any]) -> None:
        """Take the state of a ``joined`` reply's snapshot (entry or resume)."""
        snapshot = reply["snapshot"]
        self.room = str(reply["room"])
        self.code = str(snapshot["code"])
        self.token = str(reply["token"])
        self.racer = int(reply["racer"])
        self.version = int(snapshot["version"])
        self.settings = dict(snapshot["settings"])
        self.host = snapshot.get("host")
        self.roster = {int(r["racer"]): bool(r["ready"]) for r in snapshot["racers"]}
        if snapshot.get("commitment"):
            self.published = str(snapshot["commitment"])
        mine = [r for r in snapshot["racers"] if r["racer"] == self.racer]
        you = snapshot.get("you") or {}
        self.status = str(you.get("status") or (mine[0]["status"] if mine else "left"))
        if you.get("board"):
            self.memory.arrive(you["board"])
        phase = str(snapshot["phase"])
        if phase == FINISHED and snapshot.get("result"):
            self.result = dict(snapshot["result"])
        elif self.raced and phase in (LOBBY, COUNTDOWN):
            raise BotError("the race ended while the bot was away and the room moved on")
        self.phase = phase
        if phase == RACING:
            self.raced = True

    def _apply(self, envelope: Envelope) -> None:
        t, d = envelope.t, cast(Mapping[str, Any], envelope.d)
        if envelope.v is not None:
            self.version = max(self.version, envelope.v)
        if t == "racer_joined":
            self.roster[int(d["racer"])] = bool(d["ready"])
        elif t == "racer_left":
            if self.phase == LOBBY:
                self.roster.pop(int(d["racer"]), None)
            self.host = d.get("host")
            if d["racer"] == self.racer:
                self.status = "left"
        elif t == "ready_changed":
            self.roster[int(d["racer"])] = bool(d["ready"])
        elif t == "countdown":
            self.phase = COUNTDOWN
            self.published = str(d["commitment"])
            self.say("countdown")
        elif t == "started":
            self.phase = RACING
            self.raced = True
            self.published = str(d["commitment"])
            self.status = PLAYING
            self.say("started")
        elif t in ("progress", "finished") and d.get("racer") == self.racer:
            self.status = str(d["status"])
        elif t == "race_over":
            self.phase = FINISHED
            self.result = dict(d)
        elif t == "room_reset" and self.result is None:
            if self.raced:
                raise BotError("the race ended unseen and the room moved on to a rematch")
            self.phase = LOBBY
            self.host = d.get("host")
            self.roster = {int(r["racer"]): bool(r["ready"]) for r in d["racers"]}

    # ---------------------------------------------------------------- run
    async def run(self) -> dict[str, Any]:
        await self._enter()
        while self.result is None:
            try:
                await self._step()
            except DROPPED as exc:
                self.say(f"connection lost ({exc or type(exc).__name__}); reconnecting")
                await self._reconnect()
        await self._drop_client()
        return self.result if self.result is not None else {}

    async def _enter(self) -> None:
        last: BaseException | None = None
        for attempt, url in enumerate(self.servers):
            try:
                self.client = await self._connect(url)
                self.server_index = attempt
                break
            except DROPPED as exc:
                last = exc
            except (InvalidURI, ValueError) as exc:
                raise BotCannotStart(cannot_reach(url, exc)) from None
        else:
            assert last is not None
            raise BotCannotStart(cannot_reach(", ".join(self.servers), last))
        action, params = self.entry
        try:
            if action == "create":
                settings = dict(params)
                reply = await self.live.create(settings.pop("variant"), self.name, **settings)
            elif action == "join":
                reply = await self.live.join(str(params["code"]), self.name)
            else:
                reply = await self.live.quick(str(params["variant"]), self.name)
        except ServerError as err:
            await self._drop_client()
            raise BotCannotStart(f"{action} refused: {refusal_of(err.data, action)}") from None
        except (*DROPPED, ConnectionError) as exc:  # no reply: no token to resume with
            await self._drop_client()
            raise BotCannotStart(f"connection lost during {action}: {exc!r}") from None
        self._entered(reply)
        self.say(f"joined room {self.code} as racer {self.racer}")
        if self.hooks.joined is not None:
            self.hooks.joined(reply)

    async def _step(self) -> None:
        self._drain()
        if self.result is not None:
            return
        if self.phase in (LOBBY, COUNTDOWN):
            await self._lobby()
        elif self.phase == RACING and self.status == PLAYING:
            await self._play_one()
        elif self.phase == RACING and self.status == STUCK and self._may_undo():
            # The server counts a racer stuck where undo is allowed as still able to
            # move (an undo is a move), so the race would wait for its time limit; the
            # bot never undoes: it resigns.
            await self._resign()
        else:
            # Done playing: wait for the others (the server ends the race at the
            # latest at its time limit). A dead connection surfaces as a dropped one.
            await self._wait_event(timeout=IDLE_WAIT_S)

    async def _lobby(self) -> None:
        if self.phase == LOBBY and self.racer is not None:
            if self.want_ready and not self.roster.get(self.racer):
                try:
                    await self.live.ready()
                    self.roster[self.racer] = True
                except ServerError as err:
                    if err.code != "wrong_phase":
                        raise BotError(f"ready refused: {err}") from None
            await self._maybe_start()
        await self._wait_event(timeout=5)

    async def _maybe_start(self) -> None:
        if not self.host_start or self.host != self.racer or self.start_tried_at == self.version:
            return
        others = [ready for racer, ready in self.roster.items() if racer != self.racer]
        if len(self.roster) < self.min_racers or not all(others):
            return
        self.start_tried_at = self.version
        try:
            await self.live.start()
            self.say("started the room")
        except ServerError as err:
            if err.code not in ("not_ready", "wrong_phase"):
                raise BotError(f"start refused: {err}") from None

    # ---------------------------------------------------------------- play
    async def _play_one(self) -> None:
        client = self.live
        if client.board is None:  # the first board comes as a notice after `started`
            if await self._wait_event(timeout=5) is None and client.board is None:
                await self._resync()
            return
        if self._should_resign():
            await self._resign()
            return
        here = position_key(client.board)
        retry, self.retry = self.retry, None
        if retry is not None and retry[:2] == (client.seq, here):
            choice: Choice | None = retry[2]
        else:
            choice = self.strategy(board_from_view(client.board), self.memory, self.rng)
        if choice is None:  # no legal move: the server says `stuck` with the last reply
            self.status = STUCK
            return
        notation = str(choice.move)
        seq = client.seq
        try:
            reply = await client.move(notation)
        except ServerError as err:
            if err.code == "unavailable":
                self.retry = (seq, here, choice)
                self.say(f"move {seq} {notation}: unavailable; retrying it")
            await self._refused(err)
            return
        self.status = str(reply["status"])
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
        if self.status != PLAYING:
            self.say(f"{self.status} after {self.moves_played} moves")
        if self.move_delay:
            await asyncio.sleep(self.move_delay)

    def _may_undo(self) -> bool:
        board = self.client.board if self.client is not None else None
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
        self.status = "resigned"

    async def _refused(self, err: ServerError) -> None:
        code = err.code
        if code == "unavailable":
            await _pause(err)
        elif code == "bad_seq":
            await self._resync()
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
            if self.phase == RACING and self.result is None:
                await self._resync()
        else:
            raise BotError(f"move refused: {err}") from None

    async def _resync(self) -> None:
        """Re-read the room's and this racer's state on the same connection (during a
        Redis outage: after a pause, by the next step, which will need it again)."""
        try:
            reply = await self.live.resume(self.room, self.token, since=self.version)
        except ServerError as err:
            if err.code != "unavailable":
                raise
            await _pause(err)
            return
        self._entered(reply)

    # ----------------------------------------------------------- reconnect
    async def _reconnect(self) -> None:
        old = self.client
        replaced = (CloseCode.NORMAL, CloseReason.REPLACED)
        if old is not None and (old.close_code, old.ws.close_reason) == replaced:
            raise BotError("replaced: this racer was resumed on another connection")
        await self._drop_client()
        delay = 0.1
        last: BaseException | None = None
        for attempt in range(self.reconnect_attempts):
            index = (self.server_index + attempt) % len(self.servers)
            client: RaceClient | None = None
            try:
                client = await self._connect(self.servers[index])
                reply = await client.resume(self.room, self.token, since=self.version)
            except ServerError as err:
                last = err
                if err.code in ("unknown_room", "bad_token"):
                    raise BotError(f"cannot resume: {err}") from None
            except DROPPED as exc:
                last = exc
            else:
                self.client, self.server_index = client, index
                self._entered(reply)
                self.say(f"resumed on {self.servers[index]} at version {self.version}")
                return
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.close(), 2)
            await asyncio.sleep(delay * (0.5 + self.jitter.random()))
            delay = min(delay * 2, 5.0)
        raise BotError(f"could not reconnect after {self.reconnect_attempts} attempts: {last}")


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
    stores the result for ``replay``/``verify``.
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
        hooks=hooks or BotHooks(),
    )
    try:
        result = await bot.run()
    finally:
        await bot._drop_client()
    if save and bot.room is not None:
        path = save_result(
            bot.room, result, bot.settings, bot.code, published_commitment=bot.published
        )
        bot.say(f"result saved to {path}")
    return result
