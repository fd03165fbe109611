"""One server node: rooms, requests, the event tail, timers. The only place where the
race layer, the store and the connections meet.

Every state change goes the same way: decide from the folded state (pure functions of
:mod:`solrace.race.decisions`), append to the store (compare-and-append for room
decisions; the move script for moves), then fold what the store accepted and fan it
out. Nothing is broadcast that is not stored, and nothing stored is missed: each node
also tails the streams of its rooms for what other nodes appended.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from solrace.protocol import BadMessage, ErrorCode, encode
from solrace.protocol.limits import (
    MAX_REPLAY_EVENTS,
    MAX_ROOMS_LISTED,
    RATE_BURST,
    RATE_PER_S,
    ROOM_CODE_ALPHABET,
)
from solrace.protocol.messages import (
    CreateRoom,
    JoinRoom,
    QuickRace,
    Resume,
    Watch,
    board_notice,
    joined_reply,
    moved_reply,
    room_event,
    watching_reply,
)
from solrace.race import RaceError, RacerGame, RoomSettings, validate_settings
from solrace.race import decisions as decide_
from solrace.race.fairness import round_commitment, round_salt, round_seed
from solrace.race.state import DONE, FINISHED, LOBBY, PLAYING, RACING, STUCK
from solrace.store import Store
from solrace.store.errors import CodeTaken, StoreUnavailable, VersionConflict

from .metrics import Metrics
from .records import RoomMeta, pack, pack_entry, unpack, unpack_entries
from .room import LiveRoom
from .session import Session

log = logging.getLogger("solrace.node")

ROOM_TTL_S = 24 * 3600
IDLE_ROOM_MS = 10 * 60 * 1000
FINISHED_ROOM_TTL_S = 3600
EMPTY_ROOM_TTL_S = 600
DECIDE_ATTEMPTS = 20


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _refuse(error: RaceError, **extra: Any) -> BadMessage:
    return BadMessage(ErrorCode(error.code), error.message, **extra)


class Node:
    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], int] = wall_ms,
        name: str = "node",
        room_secret: Callable[[], bytes] = lambda: secrets.token_bytes(32),
        rate_per_s: float = RATE_PER_S,
        rate_burst: float = RATE_BURST,
        countdown_ms: int = decide_.COUNTDOWN_MS,
    ) -> None:
        """``room_secret`` draws each new room's secret (tests pin it to get a known
        deal); ``rate_per_s``/``rate_burst`` set every connection's token bucket."""
        self.store = store
        self.clock = clock
        self.name = name
        self.room_secret = room_secret
        self.rate_per_s = rate_per_s
        self.rate_burst = rate_burst
        self.countdown_ms = countdown_ms
        self.metrics = Metrics()
        self.rooms: dict[str, LiveRoom] = {}
        self.sessions: set[Session] = set()
        self.inflight = 0
        self.draining = False
        self._tail_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._tail_task = asyncio.get_running_loop().create_task(self._tail_loop())

    async def stop(self) -> None:
        if self._tail_task is not None:
            self._tail_task.cancel()
            await asyncio.gather(self._tail_task, return_exceptions=True)
        for room in self.rooms.values():
            if room.timer is not None:
                room.timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tail_loop(self) -> None:
        """Fold what other nodes append to the streams of rooms served here (and now
        and then forget rooms long idle here)."""
        next_sweep = self.clock() + IDLE_ROOM_MS // 10
        while True:
            positions = {
                rid: room.state.version for rid, room in self.rooms.items() if room.has_sessions()
            }
            if self.clock() >= next_sweep:
                self._sweep()
                next_sweep = self.clock() + IDLE_ROOM_MS // 10
            if not positions:
                await asyncio.sleep(0.1)
                continue
            try:
                entries = await self.store.tail(positions, block_ms=250)
            except StoreUnavailable:
                await asyncio.sleep(0.5)
                continue
            for room_id, version, raw in entries:
                room = self.rooms.get(room_id)
                if room is not None:
                    await self._ingest(room, version, raw)

    # ---------------------------------------------------------------- rooms
    async def room(self, room_id: str) -> LiveRoom:
        room = self.rooms.get(room_id)
        if room is None:
            raw = await self.store.load_meta(room_id)
            if raw is None:
                raise BadMessage(ErrorCode.UNKNOWN_ROOM, f"no room {room_id}")
            room = self.rooms.setdefault(room_id, LiveRoom(RoomMeta.decode(raw)))
        room.last_used_ms = self.clock()
        await self.sync(room)
        wake = decide_.next_wakeup(room.state)
        if wake is not None and wake <= self.clock():
            # A timer nobody ran (every node serving the room had gone): catch up now.
            await self.tick(room)
        self.metrics.rooms.set(sum(1 for r in self.rooms.values() if r.has_sessions()))
        return room

    def _sweep(self) -> None:
        """Forget rooms this node has not served for a while; the store keeps
        everything, and :meth:`room` reloads them on demand. Only long-idle rooms go,
        so no request in progress can still hold one (which would leave its session
        attached to a room object the node no longer folds events into)."""
        cutoff = self.clock() - IDLE_ROOM_MS
        for room_id, room in list(self.rooms.items()):
            if not room.has_sessions() and room.last_used_ms < cutoff:
                if room.timer is not None:
                    room.timer.cancel()
                del self.rooms[room_id]

    async def room_by_code(self, code: str) -> LiveRoom:
        room_id = await self.store.room_for_code(code.upper())
        if room_id is None:
            raise BadMessage(ErrorCode.UNKNOWN_ROOM, f"no room with code {code}")
        return await self.room(room_id)

    async def sync(self, room: LiveRoom) -> None:
        async with room.lock:
            await self._sync_locked(room)

    async def _sync_locked(self, room: LiveRoom) -> None:
        entries = await self.store.events_since(room.room_id, room.state.version)
        for version, raw in entries:
            await self._fold_locked(room, version, raw)
        self._schedule(room)

    async def _ingest(self, room: LiveRoom, version: int, raw: bytes) -> None:
        async with room.lock:
            if version == room.state.version + 1:
                await self._fold_locked(room, version, raw)
                self._schedule(room)
            elif version > room.state.version:
                await self._sync_locked(room)

    async def _fold_locked(self, room: LiveRoom, version: int, raw: bytes) -> None:
        stored = room.fold(version, raw)
        if stored is None:
            return
        kind = stored["t"]
        if kind == "started":
            self.metrics.races.inc()
            for racer in list(room.racers):
                await self._game(room, racer)
                room.send_own_board(racer, room.state.start_at_ms or self.clock())
        elif kind == "race_over":
            self.metrics.races.dec()
        if kind in ("progress", "finished", "started") and room.spectators:
            await self._spectator_boards(room, stored)

    def _schedule(self, room: LiveRoom) -> None:
        if room.timer is not None:
            room.timer.cancel()
            room.timer = None
        if not room.has_sessions():
            return
        wake = decide_.next_wakeup(room.state)
        if wake is None:
            return
        delay = max(0.0, (wake - self.clock()) / 1000) + 0.001
        loop = asyncio.get_running_loop()
        room.timer = loop.call_later(delay, lambda: self._spawn(self.tick(room)))

    # ------------------------------------------------------------ decisions
    async def decide(
        self,
        room: LiveRoom,
        decision: Callable[[], list[dict[str, Any]]],
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Append ``decision()``'s events if the room is still where it was when
        deciding; otherwise fold what changed and decide again. ``prepare`` reads
        what the decision needs from the store, under the lock, before each try."""
        async with room.lock:
            for _ in range(DECIDE_ATTEMPTS):
                await self._sync_locked(room)
                if prepare is not None:
                    await prepare()
                events = decision()
                if not events:
                    return
                expected = room.state.version
                try:
                    for ev in events:
                        stored = {"t": ev["t"], "d": ev["d"], "at": self.clock()}
                        await self.store.append_event(room.room_id, pack(stored), expected)
                        expected += 1
                except VersionConflict:
                    continue
                await self._sync_locked(room)
                await self._after_decision(room, events)
                return
            raise BadMessage(ErrorCode.UNAVAILABLE, "the room is busy: retry", retry_after_ms=200)

    async def _after_decision(self, room: LiveRoom, events: list[dict[str, Any]]) -> None:
        for ev in events:
            if ev["t"] == "race_over":
                result = {
                    "room": room.room_id,
                    "code": room.meta.code,
                    "round": room.state.round,
                    "settings": room.meta.settings.to_dict(),
                    "result": ev["d"],
                }
                race_id = f"{room.room_id}.{room.state.round}"
                await self.store.save_result(race_id, pack(result))
                await self.store.expire_room(room.room_id, FINISHED_ROOM_TTL_S)
            elif ev["t"] == "countdown":
                self.metrics.races_started.inc()
            elif ev["t"] == "room_reset":
                await self.store.expire_room(room.room_id, ROOM_TTL_S, unlist=False)

    async def tick(self, room: LiveRoom) -> None:
        """The clock's decisions for a room (start, time limit, grace, end)."""
        finals: dict[int, tuple[int, list[str]]] = {}

        async def prepare() -> None:
            # Under the room lock, after folding: if the race may end now, read every
            # racer's log for the standings. A move stored meanwhile bumps the version,
            # so the append below conflicts and this runs again on fresh logs.
            state = room.state
            ends = state.ends_at_ms
            if state.phase == RACING and (
                not state.playing() or (ends is not None and self.clock() >= ends)
            ):
                finals.clear()
                finals.update(await self._finals(room))

        def decision() -> list[dict[str, Any]]:
            state = room.state
            return decide_.tick(
                state,
                self.clock(),
                lambda: round_commitment(room.meta.secret, state.round),
                lambda table, reason: self._result(room, table, reason, finals),
                self.countdown_ms,
            )

        try:
            await self.decide(room, decision, prepare)
        except (StoreUnavailable, BadMessage):
            log.warning("tick failed; retrying", extra={"room": room.room_id})
            loop = asyncio.get_running_loop()
            loop.call_later(0.5, lambda: self._spawn(self.tick(room)))

    async def _finals(self, room: LiveRoom) -> dict[int, tuple[int, list[str]]]:
        """Every racer's score and move log, for the standings."""
        finals: dict[int, tuple[int, list[str]]] = {}
        for racer in room.state.racers:
            raw = await self.store.move_log(room.room_id, room.log_name(racer))
            entries = unpack_entries(raw)
            game = RacerGame.rebuild(
                room.meta.settings.variant, room.seed(), room.meta.settings.options, entries
            )
            finals[racer] = (game.board.score, [e for e, _ in entries])
        return finals

    def _result(
        self,
        room: LiveRoom,
        table: list[dict[str, Any]],
        reason: str,
        finals: dict[int, tuple[int, list[str]]],
    ) -> dict[str, Any]:
        if set(finals) != {row["racer"] for row in table}:
            raise RuntimeError("race_over decided without every racer's log")
        for row in table:
            score, entries = finals[row["racer"]]
            row["score"] = score
            row["log"] = entries
        secret, round_no = room.meta.secret, room.state.round
        return {
            "reason": reason,
            "standings": table,
            "seed": round_seed(secret, round_no),
            "salt": round_salt(secret, round_no),
            "commitment": room.state.commitment or round_commitment(secret, round_no),
        }

    # ------------------------------------------------------------- engines
    async def _game(self, room: LiveRoom, racer: int) -> RacerGame:
        """This node's engine for a local racer, rebuilt from the store if needed."""
        game = room.games.get(racer)
        if game is None:
            raw = await self.store.move_log(room.room_id, room.log_name(racer))
            settings = room.meta.settings
            game = RacerGame.rebuild(
                settings.variant, room.seed(), settings.options, unpack_entries(raw)
            )
            room.games[racer] = game
        return game

    async def _spectator_boards(self, room: LiveRoom, stored: dict[str, Any]) -> None:
        """Send spectators the board of the racer an event is about, after the delay.

        Boards come from shadows replayed from the *stored* log only, never from a
        local engine that may hold a move not yet stored (and maybe never stored)."""
        racers = [stored["d"]["racer"]] if "racer" in stored["d"] else list(room.state.racers)
        delay = room.meta.settings.spectator_delay_s
        for racer in racers:
            view = await self._shadow_view(room, racer)
            if view is None:
                continue
            at = self.clock()
            frame = encode(board_notice(racer=racer, at_ms=at, view=view, owner=False))
            if delay == 0:
                for session in list(room.spectators):
                    session.send_bytes(frame)
            else:
                loop = asyncio.get_running_loop()
                loop.call_later(delay, self._send_to_spectators, room, frame)

    @staticmethod
    def _send_to_spectators(room: LiveRoom, frame: bytes) -> None:
        for session in list(room.spectators):
            session.send_bytes(frame)

    async def _shadow_view(
        self, room: LiveRoom, racer: int, until_ms: int | None = None
    ) -> dict[str, Any] | None:
        if room.state.phase not in (RACING, FINISHED) or racer not in room.state.racers:
            return None
        raw = await self.store.move_log(room.room_id, room.log_name(racer))
        entries = unpack_entries(raw)
        if until_ms is not None:
            entries = [(e, at) for e, at in entries if at <= until_ms]
            game = room.new_game()
            for entry, at in entries:
                game.apply(entry, at)
            return game.board_view()
        shadow = room.shadows.get(racer)
        if shadow is None or shadow.seq > len(entries):
            shadow = room.shadows[racer] = room.new_game()
        for entry, at in entries[shadow.seq :]:
            shadow.apply(entry, at)
        return shadow.board_view()

    # -------------------------------------------------------------- requests
    async def list_rooms(self, variant: str | None) -> list[dict[str, Any]]:
        summaries = []
        for room_id in await self.store.listed_rooms(limit=100):
            try:
                room = await self.room(room_id)
            except BadMessage:
                await self.store.unlist(room_id)  # its keys expired
                continue
            if variant is None or room.meta.settings.variant == variant:
                summaries.append(room.state.summary())
            if len(summaries) >= MAX_ROOMS_LISTED:
                break
        return summaries

    async def create(self, session: Session, msg: CreateRoom, request_id: int | None) -> None:
        settings = RoomSettings(
            variant=msg.variant,
            options=dict(msg.options),
            max_racers=msg.max_racers,
            time_limit_s=msg.time_limit_s,
            private=msg.private,
            spectator_delay_s=msg.spectator_delay_s,
        )
        room = await self._create_room(settings)
        await self._join(session, room, msg.name, request_id)

    async def _create_room(self, settings: RoomSettings) -> LiveRoom:
        try:
            settings = validate_settings(settings)
        except RaceError as exc:
            raise _refuse(exc, field="options") from None
        for _ in range(10):
            code = "".join(secrets.choice(ROOM_CODE_ALPHABET) for _ in range(6))
            meta = RoomMeta(
                room="r_" + secrets.token_hex(6),
                code=code,
                secret=self.room_secret(),
                settings=settings,
                created_ms=self.clock(),
            )
            try:
                await self.store.create_room(
                    meta.room, code, meta.encode(), listed=not settings.private, now_ms=self.clock()
                )
            except CodeTaken:
                continue
            # A lifetime cap, so a room abandoned mid-race cannot stay forever.
            await self.store.expire_room(meta.room, ROOM_TTL_S, unlist=False)
            room = self.rooms[meta.room] = LiveRoom(meta)
            log.info("room created", extra={"room": meta.room, "variant": settings.variant})
            return room
        raise BadMessage(ErrorCode.INTERNAL, "could not allocate a room code")

    async def join(self, session: Session, msg: JoinRoom, request_id: int | None) -> None:
        room = await self.room_by_code(msg.code)
        await self._join(session, room, msg.name, request_id)

    async def quick(self, session: Session, msg: QuickRace, request_id: int | None) -> None:
        try:
            validate_settings(RoomSettings(variant=msg.variant))
        except RaceError as exc:
            raise _refuse(exc, field="variant") from None
        for room_id in reversed(await self.store.listed_rooms(limit=100)):
            try:
                room = await self.room(room_id)
            except BadMessage:
                continue
            state = room.state
            if (
                state.settings.quick
                and state.settings.variant == msg.variant
                and state.phase == LOBBY
                and len(state.racers) < state.settings.max_racers
            ):
                try:
                    await self._join(session, room, msg.name, request_id)
                    return
                except BadMessage as exc:
                    if exc.code in (ErrorCode.ROOM_FULL, ErrorCode.WRONG_PHASE):
                        continue
                    raise
        room = await self._create_room(RoomSettings(variant=msg.variant, quick=True))
        await self._join(session, room, msg.name, request_id)

    async def _join(
        self, session: Session, room: LiveRoom, name: str, request_id: int | None
    ) -> None:
        token = secrets.token_urlsafe(24)
        joined: list[int] = []

        def decision() -> list[dict[str, Any]]:
            events = decide_.join(room.state, name)
            joined[:] = [events[0]["d"]["racer"]]
            return events

        try:
            await self.decide(room, decision)
        except RaceError as exc:
            raise _refuse(exc) from None
        racer = joined[0]
        await self.store.set_token(room.room_id, str(racer), _digest(token))
        log.info("racer joined", extra={"room": room.room_id, "racer": racer})
        await self._enter_as_racer(session, room, racer, token, request_id, since=None)
        await self.tick(room)

    async def _enter_as_racer(
        self,
        session: Session,
        room: LiveRoom,
        racer: int,
        token: str,
        request_id: int | None,
        since: int | None,
    ) -> None:
        """Send ``joined`` (snapshot at the folded version), then the events missed
        since ``since``, then attach the session for live events — all under the room
        lock, so no live event can slip in between."""
        async with room.lock:
            await self._sync_locked(room)
            snapshot = await self._snapshot(room, racer)
            replay = await self._missed(room, since)
            session.send(
                joined_reply(
                    request_id,
                    room=room.room_id,
                    code=room.meta.code,
                    racer=racer,
                    token=token,
                    snapshot=snapshot,  # type: ignore[arg-type]
                    replay=len(replay),
                )
            )
            for frame in replay:
                session.send_bytes(frame)
            self._attach_racer(session, room, racer)

    def _attach_racer(self, session: Session, room: LiveRoom, racer: int) -> None:
        old = room.racers.get(racer)
        if old is not None and old is not session:
            old.detach()
            old.close_later(1000, "replaced")
        room.racers[racer] = session
        session.attach_racer(room, racer)
        self._schedule(room)

    async def _snapshot(self, room: LiveRoom, racer: int | None) -> dict[str, Any]:
        state = room.state
        snapshot = state.snapshot(self.clock(), spectators=len(room.spectators))
        if racer is not None:
            you: dict[str, Any] = {
                "racer": racer,
                "board": None,
                "next_seq": 0,
                "moves": 0,
                "score": 0,
                "status": state.racers[racer].status if racer in state.racers else "left",
            }
            if state.phase in (RACING, FINISHED):
                game = await self._game(room, racer)
                you.update(
                    board=game.view(),
                    next_seq=game.seq,
                    moves=game.board.move_count,
                    score=game.board.score,
                )
            snapshot["you"] = you
        return snapshot

    async def resume(self, session: Session, msg: Resume, request_id: int | None) -> None:
        room = await self.room(msg.room)
        racer_id = await self.store.racer_for_token(room.room_id, _digest(msg.token))
        racer = int(racer_id) if racer_id is not None else None
        member = room.state.racers.get(racer) if racer is not None else None
        if racer is None or member is None or member.status == "left":
            raise BadMessage(ErrorCode.BAD_TOKEN)
        if session.room is not None and (session.room is not room or session.racer != racer):
            raise BadMessage(ErrorCode.ALREADY_IN_ROOM)
        room.games.pop(racer, None)  # rebuild from the store: it may have moved elsewhere
        await self._enter_as_racer(session, room, racer, msg.token, request_id, msg.since)
        log.info("racer resumed", extra={"room": room.room_id, "racer": racer})
        await self.decide(room, lambda: decide_.presence(room.state, racer, True))

    async def _missed(self, room: LiveRoom, since: int | None) -> list[bytes]:
        """The stored events after ``since`` up to the folded version, as frames."""
        version = room.state.version
        if since is None or since >= version or version - since > MAX_REPLAY_EVENTS:
            return []
        entries = await self.store.events_since(room.room_id, since, limit=version - since)
        if not entries or entries[0][0] != since + 1:
            return []  # older than the stored history: the snapshot stands
        frames = []
        for v, raw in entries:
            if v > version:
                break
            stored = unpack(raw)
            frames.append(encode(room_event(stored["t"], v, stored["d"])))
        return frames

    async def watch(self, session: Session, msg: Watch, request_id: int | None) -> None:
        if msg.code is not None:
            room = await self.room_by_code(msg.code)
        else:
            assert msg.room is not None
            room = await self.room(msg.room)
            if room.meta.settings.private:
                raise BadMessage(ErrorCode.UNKNOWN_ROOM, "private rooms are watched by code")
        async with room.lock:
            await self._sync_locked(room)
            room.spectators.add(session)
            snapshot = await self._snapshot(room, None)
            replay = await self._missed(room, msg.since)
            session.send(
                watching_reply(
                    request_id,
                    room=room.room_id,
                    snapshot=snapshot,  # type: ignore[arg-type]
                    replay=len(replay),
                )
            )
            for frame in replay:
                session.send_bytes(frame)
            session.attach_spectator(room)
            await self._initial_boards(room, session)
        self._schedule(room)

    async def _initial_boards(self, room: LiveRoom, session: Session) -> None:
        delay_ms = room.meta.settings.spectator_delay_s * 1000
        now = self.clock()
        until = None if delay_ms == 0 else room.state.race_clock(now) - delay_ms
        for racer in room.state.racers:
            if until is not None and until < 0:
                break
            view = await self._shadow_view(room, racer, until)
            if view is not None:
                at = now - delay_ms
                notice = board_notice(racer=racer, at_ms=at, view=view, owner=False)
                session.send(notice)

    async def ready(self, session: Session, flag: bool) -> None:
        room, racer = session.racer_room()
        await self._decide_or_refuse(room, lambda: decide_.ready(room.state, racer, flag))
        await self.tick(room)

    async def start_race(self, session: Session) -> None:
        room, racer = session.racer_room()
        now = self.clock()
        await self._decide_or_refuse(
            room,
            lambda: decide_.start(
                room.state,
                racer,
                now,
                round_commitment(room.meta.secret, room.state.round),
                self.countdown_ms,
            ),
        )

    async def resign(self, session: Session) -> None:
        room, racer = session.racer_room()
        await self._decide_or_refuse(room, lambda: decide_.resign(room.state, racer))
        await self.tick(room)

    async def rematch(self, session: Session) -> None:
        room, racer = session.racer_room()
        await self._decide_or_refuse(room, lambda: decide_.rematch(room.state, racer))

    async def leave(self, session: Session) -> None:
        room = session.room
        if room is None:
            return
        racer = session.racer
        session.detach()
        if racer is None:
            room.spectators.discard(session)
            return
        room.racers.pop(racer, None)
        room.games.pop(racer, None)
        await self._decide_or_refuse(room, lambda: decide_.leave(room.state, racer))
        if not room.state.racers:
            await self.store.expire_room(room.room_id, EMPTY_ROOM_TTL_S)
        await self.tick(room)

    async def disconnected(self, session: Session) -> None:
        """A connection closed without ``leave``: mark the racer offline; the grace
        timer makes it a forfeit if it does not come back."""
        room, racer = session.room, session.racer
        session.detach()
        if room is None:
            return
        if racer is None:
            room.spectators.discard(session)
            return
        if room.racers.get(racer) is not session:
            return
        del room.racers[racer]
        room.games.pop(racer, None)
        try:
            await self.decide(room, lambda: decide_.presence(room.state, racer, False))
        except (StoreUnavailable, BadMessage):
            log.warning("could not record disconnect", extra={"room": room.room_id})

    async def _decide_or_refuse(
        self, room: LiveRoom, decision: Callable[[], list[dict[str, Any]]]
    ) -> None:
        try:
            await self.decide(room, decision)
        except RaceError as exc:
            raise _refuse(exc) from None

    # ----------------------------------------------------------------- moves
    async def move(
        self, session: Session, seq: int, entry: str, request_id: int | None
    ) -> None:
        received = time.perf_counter()
        room, racer = session.racer_room()
        state = room.state
        start_at = state.start_at_ms
        if state.phase == "countdown" and start_at is not None and self.clock() >= start_at:
            await self.tick(room)  # the start instant has passed: start now
        member = state.racers.get(racer)
        if state.phase != RACING or member is None or member.status not in (PLAYING, STUCK):
            self.metrics.moves_refused.labels("wrong_phase").inc()
            raise BadMessage(ErrorCode.WRONG_PHASE, "you are not racing now", seq=seq)
        game = await self._game(room, racer)
        if seq != game.seq:
            self.metrics.moves_refused.labels("bad_seq").inc()
            raise BadMessage(ErrorCode.BAD_SEQ, seq=seq, expected=game.seq)
        at = state.race_clock(self.clock())
        try:
            applied = game.apply(entry, at)
        except RaceError as exc:
            self.metrics.moves_refused.labels(exc.code).inc()
            field = "move" if exc.code == "bad_notation" else None
            raise _refuse(exc, seq=seq, field=field) from None
        progress = game.progress()
        status = applied.status
        event = pack(
            {
                "t": "progress",
                "d": {"racer": racer, **progress, "status": status, "place": None},
                "at": self.clock(),
            }
        )
        self.inflight += 1
        try:
            result = await self.store.append_move(
                room.room_id,
                room.log_name(racer),
                seq,
                pack_entry(entry, at),
                event,
                finish_counter=str(state.round) if status == DONE else None,
            )
        except StoreUnavailable:
            # Outcome unknown: forget this engine; the next request rebuilds it from
            # the store, which holds the truth.
            room.games.pop(racer, None)
            self.metrics.moves_refused.labels("unavailable").inc()
            raise BadMessage(
                ErrorCode.UNAVAILABLE, seq=seq, retry_after_ms=500
            ) from None
        finally:
            self.inflight -= 1
        if not result.accepted:
            room.games.pop(racer, None)
            self.metrics.moves_refused.labels("bad_seq").inc()
            raise BadMessage(ErrorCode.BAD_SEQ, seq=seq, expected=result.log_length)
        board = game.board
        session.send(
            moved_reply(
                request_id,
                seq=seq,
                board=game.view(),
                status=status,
                moves=board.move_count,
                score=board.score,
            )
        )
        self.metrics.moves_accepted.inc()
        self.metrics.move_latency.observe(time.perf_counter() - received)
        if result.version is not None:
            await self._ingest(room, result.version, event)
        if result.place is not None:
            finished = {
                "t": "finished",
                "d": {
                    "racer": racer,
                    "place": result.place,
                    "elapsed_ms": at,
                    "foundation": progress["foundation"],
                    "moves": progress["moves"],
                },
                "at": self.clock(),
            }
            version = await self.store.append_event(room.room_id, pack(finished))
            await self._ingest(room, version, pack(finished))
            ids = {"room": room.room_id, "racer": racer, "place": result.place}
            log.info("racer finished", extra=ids)
        if status != PLAYING:
            await self.tick(room)

    # ----------------------------------------------------------------- drain
    async def drained(self, timeout: float = 10.0) -> None:
        """Wait until no move is between its engine check and its store append."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.inflight and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)

    def own_board_notice(self, room: LiveRoom, racer: int) -> bytes | None:
        game = room.games.get(racer)
        if game is None:
            return None
        return encode(board_notice(racer=racer, at_ms=self.clock(), view=game.view(), owner=True))


def _digest(token: str) -> str:
    from solrace.store import token_digest

    return token_digest(token)


__all__ = ["Node", "wall_ms"]
