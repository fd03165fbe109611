"""A scripted stand-in for a solrace server, for the client's tests of what a hostile
or broken server can do to it (the real server cannot be made to lie).

It speaks just enough solrace.v1 for ``solrace bot CODE`` and the terminal UI's join:
``join`` gets a lobby with a ready rival (racer 2, who never moves) and this racer
(racer 1); ``ready`` starts the race at once (countdown, started, the board); each
``move`` is played on the real engine and answered ``moved``; after
:attr:`FakeRace.moves` moves or a resign comes a ``race_over`` that tells the truth
(seed, salt and commitment match, standings as the logs give) unless
:attr:`FakeRace.tamper` bends it — or none at all, with ``race_over=False``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from solrace.protocol import SUBPROTOCOL, Envelope, commitment, decode, encode
from solrace.rules import deal, view
from solrace.rules.log import apply_entry
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

VARIANT = "klondike"
SEED = 123_456_789
SALT = "ab" * 32
COMMITMENT = commitment(SEED, SALT)
SETTINGS = {
    "variant": VARIANT,
    "options": {"draw": 1},
    "max_racers": 2,
    "time_limit_s": 600,
    "private": False,
    "spectator_delay_s": 0,
    "quick": False,
    "deals": "random",
    "difficulty": None,
    "spectators": "fair",
}


@dataclass
class FakeRace:
    """What the fake server does differently from an honest one."""

    #: The race ends after this many moves of racer 1 (or its resign).
    moves: int = 3
    #: The race's time limit, from its start (``ends_at_ms``).
    ends_in_ms: int = 600_000
    #: False: the race never ends (no ``race_over``, even past ``ends_at_ms``).
    race_over: bool = True
    #: False: the race never starts (no ``started``, even past the countdown's end).
    started: bool = True
    #: Bends the ``race_over`` data, in place.
    tamper: Callable[[dict[str, Any]], None] | None = None
    #: Frames sent as they are right after the racer's first board.
    after_start: list[bytes] = field(default_factory=list)
    #: The ``error`` data the ``join`` is refused with (None: it is taken).
    join_error: dict[str, Any] | None = None
    #: The ``error`` data every ``create`` is refused with (None: it is answered ``ok``).
    create_error: dict[str, Any] | None = None
    #: The ``error`` data every ``move`` is refused with (None: moves are taken).
    move_error: dict[str, Any] | None = None
    #: The data of every ``pong`` (None: the server's clock, as an honest one's).
    pong: dict[str, Any] | None = None


def rival_declared_winner(result: dict[str, Any]) -> None:
    """A :attr:`FakeRace.tamper`: the rival, who never moved, "finished" first (0 cards
    up); the commitment and every log are left true."""
    for standing in result["standings"]:
        if standing["racer"] == 2:
            standing.update(status="finished", place=1, elapsed_ms=1)
        else:
            standing.update(place=2)
    result["standings"].sort(key=lambda s: s["place"])


def _racer(racer: int, name: str, *, ready: bool) -> dict[str, Any]:
    return {"racer": racer, "name": name, "ready": ready, "status": "waiting",
            "foundation": 0, "moves": 0, "face_down": 0, "place": None}  # fmt: skip


class _Connection:
    def __init__(self, ws: ServerConnection, race: FakeRace) -> None:
        self.ws, self.race = ws, race
        self.version = 2
        self.board = deal(VARIANT, SEED, SETTINGS["options"])
        self.log: list[str] = []
        self.times: list[int] = []
        self.started_ms = 0
        self.over = False

    async def send(self, t: str, d: dict[str, Any], *, id: int | None = None) -> None:
        event = id is None and t not in ("board",)
        if event:
            self.version += 1
        await self.ws.send(encode(Envelope(t, id=id, v=self.version if event else None, d=d)))

    def snapshot(self) -> dict[str, Any]:
        return {
            "room": "r_fake00000001", "code": "FAKE01", "version": self.version,
            "phase": "lobby", "settings": dict(SETTINGS), "host": 2,
            "racers": [_racer(2, "Rival", ready=True), _racer(1, "Me", ready=False)],
            "spectators": 0, "now_ms": _now(), "start_at_ms": None, "ends_at_ms": None,
            "commitment": None, "result": None, "deal": None,
            "you": {"racer": 1, "board": None, "next_seq": 0, "moves": 0, "score": 0,
                    "status": "waiting"},
        }  # fmt: skip

    def result(self) -> dict[str, Any]:
        """The truth: racer 1 with its log, the rival with none, both out of time."""
        replay, reached = deal(VARIANT, SEED, SETTINGS["options"]), None
        for entry, at in zip(self.log, self.times, strict=True):
            before = replay.foundation_count()
            apply_entry(replay, entry)
            if replay.foundation_count() != before:
                reached = at
        mine = {"racer": 1, "name": "Me", "status": "timeout",
                "foundation": replay.foundation_count(), "moves": replay.move_count,
                "score": replay.score, "elapsed_ms": None, "reached_ms": reached,
                "log": list(self.log), "times": list(self.times)}  # fmt: skip
        rival = {"racer": 2, "name": "Rival", "status": "timeout", "foundation": 0,
                 "moves": 0, "score": 0, "elapsed_ms": None, "reached_ms": None,
                 "log": [], "times": []}  # fmt: skip
        standings = [mine, rival]  # more cards up, or tied at none: racer 1 joined first
        for place, standing in enumerate(standings, 1):
            standing["place"] = place
        data = {"reason": "time_limit", "standings": standings, "seed": SEED,
                "salt": SALT, "commitment": COMMITMENT, "certificate": None}  # fmt: skip
        if self.race.tamper is not None:
            self.race.tamper(data)
        return data

    async def start(self) -> None:
        self.started_ms = start = _now()
        await self.send("ready_changed", {"racer": 1, "ready": True})
        await self.send("countdown", {"start_at_ms": start, "commitment": COMMITMENT})
        if not self.race.started:
            return
        ends = start + self.race.ends_in_ms
        await self.send(
            "started", {"start_at_ms": start, "ends_at_ms": ends, "commitment": COMMITMENT}
        )
        own = view(self.board, owner=True)
        await self.send("board", {"racer": 1, "at_ms": _now(), "view": own})
        for frame in self.race.after_start:
            await self.ws.send(frame)

    async def end(self) -> None:
        if not self.over and self.race.race_over:
            self.over = True
            await self.send("race_over", self.result())

    async def handle(self, t: str, rid: int | None, d: dict[str, Any]) -> None:
        if t == "create" and self.race.create_error is not None:
            await self.send("error", dict(self.race.create_error), id=rid)
        elif t == "join" and self.race.join_error is not None:
            await self.send("error", dict(self.race.join_error), id=rid)
        elif t == "join":
            reply = {"room": "r_fake00000001", "code": "FAKE01", "racer": 1,
                     "token": "T" * 24, "snapshot": self.snapshot(), "replay": 0}  # fmt: skip
            await self.send("joined", reply, id=rid)
        elif t == "ready":
            await self.send("ok", {}, id=rid)
            await self.start()
        elif t == "move" and self.race.move_error is not None:
            await self.send("error", {**self.race.move_error, "seq": d["seq"]}, id=rid)
        elif t == "move":
            apply_entry(self.board, str(d["move"]))  # the bot plays legal moves
            self.log.append(str(d["move"]))
            self.times.append(_now() - self.started_ms)
            moved = {"seq": d["seq"], "board": view(self.board, owner=True),
                     "status": "playing", "moves": self.board.move_count,
                     "score": self.board.score}  # fmt: skip
            await self.send("moved", moved, id=rid)
            if len(self.log) >= self.race.moves:
                await self.end()
        elif t == "resign":
            await self.send("ok", {}, id=rid)
            await self.end()
        elif t == "ping":
            pong = {"now_ms": _now()} if self.race.pong is None else self.race.pong
            await self.send("pong", pong, id=rid)
        else:  # leave, start, rematch
            await self.send("ok", {}, id=rid)


def _now() -> int:
    return int(time.time() * 1000)


@contextlib.asynccontextmanager
async def fake_server(race: FakeRace) -> AsyncIterator[str]:
    """A fake server on a free port for the block; yields its URL."""

    async def handler(ws: ServerConnection) -> None:
        connection = _Connection(ws, race)
        with contextlib.suppress(ConnectionClosed):
            async for frame in ws:
                message = decode(frame)
                await connection.handle(message.t, message.id, dict(message.d or {}))

    async with serve(
        handler, "127.0.0.1", 0, subprotocols=[Subprotocol(SUBPROTOCOL)], compression=None
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}"
