"""A seeded random walk through the room core's protocol, checked against its promises.

Four people and two watchers, on one or two nodes of one store, send random requests
(create, join, quick, ready, start, legal and illegal moves with the right and the
wrong ``seq``, undo, resign, leave, hang-ups, resumes on the same or the other node,
rematch, watch) to rooms of several variants and settings, while the shared clock
jumps (seconds, a disconnect grace, a time limit). The walk is seeded, so a failure
replays: ``SOLRACE_RANDOM_OPS_SEEDS=200`` (seeds 0..199) and
``SOLRACE_RANDOM_OPS_STEPS`` run a longer one.

What must hold, after every step and at the end (docs/protocol.md, docs/fairness.md):

- every request gets exactly one reply (FakePeer.ask) and never ``internal`` nor
  ``unavailable`` (nothing fails here); a legal move with the right ``seq`` in a race
  is ``moved`` unless the racer's race is over, a well-formed move the rules forbid
  is never ``moved``;
- on each connection the events come in ``v`` order without gaps or duplicates after
  the ``joined``/``watching`` reply (its replay exactly ``since+1 .. snapshot.version``),
  none once it has left, and each is the event stored at that version;
- every race that starts ends once its time limit has passed; each ends with places
  1..n, finishers first and fastest first, the rest by cards put up, at most one
  winner, and the ``finished`` events' places agree;
- no frame a racer or spectator receives before ``race_over`` carries a card it may
  not see or the seed (check_no_leaks), and every race's result verifies.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

import pytest
from solrace.protocol import race_id
from solrace.protocol.envelope import Envelope
from solrace.race import decisions
from solrace.rooms import lobby, requests
from solrace.rooms.counters import Tally
from solrace.rooms.node import Node
from solrace.rooms.records import unpack_event
from solrace_client.boardview import board_from_view
from solrace_client.results import SavedResult
from solrace_client.roomview import RoomView
from solrace_client.verify import verify_result

from tests.support.faults import Clock
from tests.support.race import check_no_leaks

from .conftest import Backend, FakePeer

#: Walks per backend and event loop (each a seed); SOLRACE_RANDOM_OPS_SEEDS=200 runs a
#: longer audit, SOLRACE_RANDOM_OPS_FIRST=1000 another stretch of seeds.
_FIRST = int(os.environ.get("SOLRACE_RANDOM_OPS_FIRST", "0"))
SEEDS = range(_FIRST, _FIRST + int(os.environ.get("SOLRACE_RANDOM_OPS_SEEDS", "1")))
#: Requests (and clock jumps) per walk.
STEPS = int(os.environ.get("SOLRACE_RANDOM_OPS_STEPS", "120"))
#: (variant, options, deals) a created room may have: winnable Yukon deals the known
#: test deal (a line to win it is the room's certificate); the others deal at random.
ROOM_KINDS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("yukon", {}, "winnable"),
    ("yukon", {"undo": False}, "winnable"),
    ("yukon", {"auto_complete": False}, "random"),
    ("klondike", {"draw": 3}, "random"),
    ("klondike", {"undo": False, "max_passes": 1}, "random"),
    ("klondike", {"thoughtful": True, "draw": 3}, "random"),  # its stock seen by its racer
    ("russian", {}, "random"),
    ("alaska", {"undo": False}, "random"),
    ("double_yukon", {}, "random"),  # two decks: a card's twin is a card of its own
    ("australian", {}, "random"),
)
#: Codes a request may be refused with here; ``internal`` and ``unavailable`` never.
REFUSALS = {
    "bad_message",
    "unknown_room",
    "room_full",
    "wrong_phase",
    "not_host",
    "not_racer",
    "not_ready",
    "bad_token",
    "spectator_cannot_act",
    "already_in_room",
    "illegal_move",
    "bad_notation",
    "bad_seq",
    "move_limit",
    "rate_limited",
    "unknown_race",
}
NAMES = ("Ann", "Bob", "Cy", "Di")
#: What a racer does next, by its room's phase (weights of ACTIONS).
ACTIONS = ("move", "ready", "start", "resign", "leave", "hang_up", "resync", "elsewhere", "rematch")
PHASE_WEIGHTS = {
    "lobby": (1, 12, 6, 1, 1, 1, 1, 1, 1),
    "countdown": (2, 1, 1, 1, 1, 1, 1, 1, 1),
    "racing": (40, 1, 1, 2, 1, 3, 2, 3, 1),
    "finished": (1, 1, 1, 1, 2, 1, 1, 1, 8),
}


class TimedPeer(FakePeer):
    """A TimedPeer that notes its node's clock as each frame is sent to it."""

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.sent_at: list[int] = []

    def send_bytes(self, frame: bytes) -> None:
        if not self.closed:
            self.sent_at.append(self.node.clock())
        super().send_bytes(frame)


def _d(frame: Envelope) -> Any:
    """A frame's payload, as the checks read it (any shape)."""
    return frame.d


@dataclass
class Seat:
    room: str
    code: str
    token: str
    racer: int


@dataclass
class Person:
    name: str
    conn: TimedPeer | None = None
    seat: Seat | None = None
    #: The move each (room, round, seq) was answered ``moved`` for.
    acked: dict[tuple[str, int, int], str] = field(default_factory=dict)


@dataclass
class Stream:
    """What one connection was sent, as the walk checks it step by step."""

    peer: TimedPeer
    seen: int = 0
    #: The last version applied; None while the connection is in no room.
    last: int | None = None
    replay: list[int] = field(default_factory=list)
    room: str | None = None
    #: Every event received, with the room it came from.
    events: list[tuple[str, Envelope]] = field(default_factory=list)


class Walk:
    def __init__(self, rng: random.Random, nodes: list[Node], clock: Clock, skew: int) -> None:
        self.rng = rng
        #: How far the second node's clock is off (ms).
        self.skew = skew
        self.nodes = nodes
        self.clock = clock
        self.people = [Person(n) for n in NAMES]
        self.watchers = [Person(f"w{i}") for i in range(2)]
        self.streams: list[Stream] = []
        #: room id -> code, of every room created; the private ones.
        self.rooms: dict[str, str] = {}
        self.private: set[str] = set()
        self.log: list[str] = []
        #: How each request type was answered (reply type or error code): a summary.
        self.answers: dict[str, int] = {}
        #: room id -> every event it stored, version 1 first, read after each step:
        #: a rematch trims a room's stream to its last two rounds (docs/store.md, "A
        #: room's history"), and the checks at the end need the whole of it.
        self.history: dict[str, list[Any]] = {}

    # ------------------------------------------------------------ connections
    def connect(self, person: Person) -> TimedPeer:
        peer = TimedPeer(self.rng.choice(self.nodes))
        person.conn = peer
        self.streams.append(Stream(peer))
        return peer

    def stream(self, peer: TimedPeer) -> Stream:
        return next(s for s in self.streams if s.peer is peer)

    async def ask(self, peer: TimedPeer, t: str, **d: Any) -> Envelope:
        before = len(peer.frames)
        if peer.closed:  # (a window replaced meanwhile sends nothing more)
            return Envelope("closed")
        peer._next_id += 1
        request_id = peer._next_id
        await requests.handle(peer.node, peer, Envelope(t, id=request_id, d=d))
        replies = [f for f in peer.frames if f.id == request_id]
        if not replies and peer.closed:  # closed while it was handled: no reply comes
            self.log.append(f"{t} {d} -> (closed)")
            return Envelope("closed")
        assert len(replies) == 1, f"{t}: {len(replies)} replies"
        reply = replies[0]
        self.log.append(f"{t} {d} -> {reply.t} {dict(reply.d) if reply.t == 'error' else ''}")
        if reply.t == "error":
            assert reply.d["code"] in REFUSALS, f"{t} {d}: {reply.d}"
        answer = f"{t}:{reply.d['code'] if reply.t == 'error' else reply.t}"
        self.answers[answer] = self.answers.get(answer, 0) + 1
        stream = self.stream(peer)
        # The reply's place among the frames decides the stream check: note it.
        index = peer.frames.index(reply, before)
        self._check_stream(stream, upto=index)
        if reply.t in ("joined", "watching"):
            snapshot: Any = reply.d["snapshot"]
            version = int(snapshot["version"])
            since = d.get("since")
            replayed = int(_d(reply)["replay"])
            start = version - replayed + 1
            if replayed:
                assert since is not None and start == since + 1, (t, d, reply.d["replay"])
            stream.replay = list(range(start, version + 1))
            stream.last = version
            stream.room = str(reply.d["room"])
            stream.seen = index + 1
        elif t == "leave" and reply.t == "ok":
            stream.last, stream.replay, stream.room = None, [], None
            stream.seen = index + 1
        return reply

    def _check_stream(self, stream: Stream, upto: int | None = None) -> None:
        """Versions on the connection: the replay, then each next one, none outside
        a room."""
        frames = stream.peer.frames
        end = len(frames) if upto is None else upto
        for frame in frames[stream.seen : end]:
            if frame.t == "resync":
                stream.last = int(_d(frame)["snapshot"]["version"])
                stream.replay = []
            if frame.v is None:
                continue
            assert stream.last is not None and stream.room is not None, (
                f"{frame.t} v{frame.v} to a connection in no room"
            )
            stream.events.append((stream.room, frame))
            if stream.replay:
                expected = stream.replay.pop(0)
                assert frame.v == expected, f"replayed v{frame.v}, expected v{expected}"
            else:
                assert frame.v == stream.last + 1, (
                    f"{frame.t} v{frame.v} after v{stream.last}: {self.log[-5:]}"
                )
                stream.last = frame.v
        stream.seen = max(stream.seen, end)

    async def record_history(self) -> None:
        """Read what each room stored since the last step; a trim never takes an
        event the walk has not read (it keeps the round before the one beginning)."""
        store = self.nodes[0].store
        for room_id in self.rooms:
            known = self.history.setdefault(room_id, [])
            new = await store.events_since(room_id, len(known))
            assert not new or new[0].version == len(known) + 1, (
                f"room {room_id}: events after v{len(known)} trimmed before they were read"
            )
            known += [unpack_event(e.data) for e in new]

    def check_streams(self) -> None:
        for stream in self.streams:
            self._check_stream(stream)
            if stream.peer.closed and stream.peer.room is None:
                stream.seen = len(stream.peer.frames)

    # ---------------------------------------------------------------- the game
    @staticmethod
    def own_game(peer: TimedPeer) -> tuple[dict[str, Any] | None, int]:
        """The racer's board and next seq as its connection's frames say."""
        board: dict[str, Any] | None = None
        seq = 0
        version = 0
        for frame in peer.frames:
            if frame.t == "joined":
                snapshot: Any = frame.d["snapshot"]
                you = snapshot["you"] or {}
                board, seq = you.get("board"), int(you.get("next_seq") or 0)
                version = int(snapshot["version"])
            elif frame.t == "board" and frame.d["racer"] == peer.racer:
                # Its board at the start, seq unchanged: built when sent, it may follow
                # a first move sent blind while the other racers' engines were read
                # (and show it); a new round's seq 0 comes with its room_reset.
                board = dict(_d(frame)["view"])
            elif frame.t == "moved":  # a retry's (an older seq) shows the board now
                board = dict(_d(frame)["board"])
                seq = max(seq, int(_d(frame)["seq"]) + 1)
            elif frame.v is not None and frame.v > version:  # not a replayed one
                version = frame.v
                if frame.t == "room_reset":
                    board, seq = None, 0
        return board, seq

    def random_move(self, board: Any) -> str:
        """A well-formed move of any shape, mostly one the rules forbid."""
        rng = self.rng
        columns = len(board["tableau"])

        def column() -> int:
            return rng.randint(1, columns)

        shapes = [
            f"{column()}:{rng.randint(1, 6)}>{column()}",
            f"{column()}>F",
            "W>F",
            f"W>{column()}",
            "D",
            "R",
            f"F{rng.choice('CDHS')}>{column()}",
        ]
        return rng.choice(shapes)

    async def move(self, person: Person, peer: TimedPeer, *, strict: bool = True) -> None:
        """A move, legal or not, with the right seq or not; ``strict``: a legal one
        must be taken (not while another window of the racer takes over)."""
        room = peer.room
        board, seq = self.own_game(peer)
        if room is None or board is None:
            await self.ask(peer, "move", seq=seq, move="1>F")
            return
        legal = [str(m) for m in board_from_view(board).legal_moves()]
        line = room.state.certificate or []
        roll = self.rng.random()
        if line and seq < len(line) and self.on_line(person, room, line, seq):
            roll = 0.3 + 0.55 * roll if sum(map(ord, person.name + room.room_id)) % 2 else roll
        if roll < 0.08:  # the wrong seq
            wrong = self.rng.choice([seq + 1, seq + 5, max(seq - 1, 0) if seq else seq + 2])
            move = self.rng.choice(legal or ["D"])
            stored = person.acked.get((room.room_id, room.state.round, wrong))
            reply = await self.ask(peer, "move", seq=wrong, move=move)
            if reply.t == "moved":  # only a retry of the move stored at that seq
                assert move == stored and reply.d["seq"] == wrong, (move, stored, _dump(peer))
            return
        if roll < 0.16:
            move = "undo"
        elif roll < 0.3:
            move = self.random_move(board)
        elif line and seq < len(line) and roll < 0.85 and self.on_line(person, room, line, seq):
            move = line[seq]  # the certificate's line: a racer on it may win
        elif legal:
            move = self.rng.choice(legal)
        else:
            move = "undo"
        racing = room.state.phase == "racing"
        member = room.state.racers.get(peer.racer or 0)
        status = member.status if member is not None else None
        ends = room.state.ends_at_ms
        round_no = room.state.round
        reply = await self.ask(peer, "move", seq=seq, move=move)
        if reply.t == "moved":
            person.acked[(room.room_id, round_no, seq)] = move
        if move in legal and move != "undo":
            in_time = ends is not None and self.clock() < ends - 1000
            if racing and status == "playing" and in_time and strict:
                assert reply.t == "moved", f"legal move {move} at seq {seq}: {_dump(peer)}"
        elif move != "undo" and reply.t == "moved":
            raise AssertionError(f"{move} is not legal on {board} but was taken: {_dump(peer)}")

    @staticmethod
    def on_line(person: Person, room: Any, line: list[str], seq: int) -> bool:
        """Whether every move the racer made this round is the line's."""
        key = (room.room_id, room.state.round)
        return all(person.acked.get((*key, i)) == line[i] for i in range(seq))

    # --------------------------------------------------------------- requests
    async def step(self) -> None:
        """One request (or clock jump), or two or three at once from different people."""
        rng = self.rng
        if rng.random() < 0.25:
            people = rng.sample(self.people + self.watchers, rng.choice([2, 3]))
            jobs = [self.person_step(p) for p in people]
            if rng.random() < 0.2:
                jobs.append(self.time_passes())
            await asyncio.gather(*jobs)
            return
        roll = rng.random()
        if roll < 0.08:
            await self.time_passes()
        elif roll < 0.16:
            await self.person_step(rng.choice(self.watchers))
        else:
            await self.person_step(rng.choice(self.people))

    async def person_step(self, person: Person) -> None:
        if self.rng.random() < 0.05 and person.conn is not None and not person.conn.closed:
            await (self.listing if self.rng.random() < 0.5 else self.result)(person.conn)
            return
        if person in self.watchers:
            await self.watcher_step(person)
            return
        rng = self.rng
        peer = person.conn
        if peer is None or peer.closed:
            peer = self.connect(person)
            if person.seat is not None and rng.random() < 0.7:
                await self.resume(person, peer)
                return
        if peer.room is None:
            await self.idle_step(person, peer)
        else:
            await self.racer_step(person, peer)

    async def listing(self, peer: TimedPeer) -> None:
        """``list`` (works in every state): never a private room."""
        reply = await self.ask(peer, "list")
        if reply.t == "rooms":
            listed = {str(r["room"]) for r in reply.d["rooms"]}  # type: ignore[attr-defined]
            assert not listed & self.private, f"private rooms listed: {listed & self.private}"

    async def result(self, peer: TimedPeer) -> None:
        """``result`` of a race some connection saw start: archived only once it is
        over — the result carries the seed."""
        started = [
            (room, str(f.d["commitment"]))
            for s in self.streams
            for room, f in s.events
            if f.t == "started"
        ]
        if not started:
            return
        room_id, commitment = self.rng.choice(started)
        race = race_id(room_id, commitment)
        reply = await self.ask(peer, "result", race=race)
        if reply.t == "archived":
            await self.record_history()  # (a race_over may be trimmed from the stream)
            stored = self.history[room_id]
            overs = [e for e in stored if e.t == "race_over" and e.d["commitment"] == commitment]
            assert overs, f"race {race} archived before its race_over"
            assert dict(reply.d["result"]) == dict(overs[0].wire(1).d)  # type: ignore[call-overload]

    async def resume(self, person: Person, peer: TimedPeer) -> None:
        seat = person.seat
        assert seat is not None
        since = self.rng.choice([None, 0, 1, self.stream_version(person)])
        reply = await self.ask(
            peer, "resume", room=seat.room, token=seat.token, since=since, code=seat.code
        )
        if reply.t == "error" and reply.d["code"] in ("bad_token", "unknown_room"):
            person.seat = None

    def stream_version(self, person: Person) -> int | None:
        """The last version of its seat's room the person's connection applied."""
        seat = person.seat
        versions = [
            s.last
            for s in self.streams
            if s.peer is person.conn and s.last and seat is not None and s.room == seat.room
        ]
        return versions[0] if versions else None

    async def idle_step(self, person: Person, peer: TimedPeer) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.25 or not self.rooms:
            variant, options, deals = rng.choice(ROOM_KINDS)
            private = rng.random() < 0.3
            settings: dict[str, Any] = {
                "max_racers": rng.choice([2, 3, 4]),
                "time_limit_s": rng.choice([60, 120]),
                "private": private,
                "spectator_delay_s": rng.choice([0, 0, 5]),
                "deals": deals,
            }
            if private and rng.random() < 0.5:
                settings["spectators"] = "open"
            reply = await self.ask(
                peer, "create", variant=variant, name=person.name, options=options, **settings
            )
            if reply.t == "joined":
                self.rooms[str(reply.d["room"])] = str(reply.d["code"])
                if private:
                    self.private.add(str(reply.d["room"]))
                self.seated(person, reply)
        elif roll < 0.35:
            reply = await self.ask(peer, "quick", variant="yukon", name=person.name)
            if reply.t == "joined":
                self.rooms[str(reply.d["room"])] = str(reply.d["code"])
                self.seated(person, reply)
        elif roll < 0.75:
            lobbies = [
                room.meta.code
                for node in self.nodes
                for room in node.rooms.values()
                if room.state.phase == "lobby"
            ]
            code = rng.choice(
                lobbies if lobbies and rng.random() < 0.8 else list(self.rooms.values())
            )
            reply = await self.ask(peer, "join", code=code.lower(), name=person.name)
            if reply.t == "joined":
                self.seated(person, reply)
        elif roll < 0.9 and person.seat is not None:
            await self.resume(person, peer)
        else:
            await self.watch(peer)

    def seated(self, person: Person, reply: Envelope) -> None:
        person.seat = Seat(
            str(reply.d["room"]),
            str(reply.d["code"]),
            str(reply.d["token"]),
            int(reply.d["racer"]),  # type: ignore[call-overload]
        )

    async def watch(self, peer: TimedPeer) -> None:
        room_id, code = self.rng.choice(list(self.rooms.items()))
        # A version the client may have seen: up to what the room holds (a client
        # ahead of it reports lost writes, docs/protocol.md §10).
        loaded = [n.rooms[room_id].state.version for n in self.nodes if room_id in n.rooms]
        since = self.rng.choice([None, None, 0, self.rng.randint(0, min(loaded, default=0))])
        if self.rng.random() < 0.5:
            await self.ask(peer, "watch", code=code, since=since)
        else:
            await self.ask(peer, "watch", room=room_id, since=since)

    async def watcher_step(self, watcher: Person) -> None:
        peer = watcher.conn
        if peer is None or peer.closed:
            peer = self.connect(watcher)
        if not self.rooms:
            return
        if peer.room is None:
            await self.watch(peer)
        elif self.rng.random() < 0.5:
            await self.ask(peer, "leave")
        else:
            await self.hang_up(watcher)

    async def hang_up(self, person: Person) -> None:
        peer = person.conn
        assert peer is not None
        self.log.append(f"{person.name} hangs up")
        person.conn = None
        await self.hang_up_peer(peer)

    async def hang_up_peer(self, peer: TimedPeer) -> None:
        """The connection closes without ``leave`` (what the server does on a close)."""
        self.check_streams()
        peer.closed = True
        await lobby.disconnected(peer.node, peer)

    async def racer_step(self, person: Person, peer: TimedPeer) -> None:
        rng = self.rng
        if peer.racer is None:  # a racer's connection that watches: leave
            await self.ask(peer, "leave")
            return
        room = peer.room
        assert room is not None
        phase = room.state.phase
        weights = PHASE_WEIGHTS.get(phase, PHASE_WEIGHTS["racing"])
        (action,) = rng.choices(ACTIONS, weights=weights)
        if action == "move":
            burst = 1
            if phase == "racing":
                burst = rng.choice([1, 1, 3, 10, 40])
            for _ in range(burst):
                await self.move(person, peer)
        elif action == "ready":
            ready = rng.random() < 0.8
            extra: dict[str, Any] = {}
            if ready and room.state.settings.spectators == "open" and rng.random() < 0.7:
                extra["spectators"] = "open"
            await self.ask(peer, "ready", ready=ready, **extra)
        elif action in ("start", "resign", "leave", "rematch"):
            reply = await self.ask(peer, action)
            if action == "leave" and reply.t == "ok":
                person.seat = None if rng.random() < 0.5 else person.seat
        elif action == "hang_up":
            await self.hang_up(person)
        elif action == "resync":
            await self.resume(person, peer)
        else:  # the racer's other window, maybe on the other node, takes over
            await self.elsewhere(person, peer)

    async def elsewhere(self, person: Person, old: TimedPeer) -> None:
        """The racer resumes in another window (maybe on the other node) — while, now
        and then, its old window sends a request of its own."""
        new = self.connect(person)
        jobs: list[Awaitable[Any]] = [self.resume(person, new)]
        if self.rng.random() < 0.5:
            act = self.rng.choice(["move", "leave", "resign", "ready", "rematch", "hang_up"])
            self.log.append(f"{person.name}'s old window: {act}, as it resumes elsewhere")
            if act == "move":
                jobs.append(self.move(person, old, strict=False))
            elif act == "hang_up":
                jobs.append(self.hang_up_peer(old))
            elif act == "ready":
                jobs.append(self.ask(old, "ready", ready=True))
            else:
                jobs.append(self.ask(old, act))
            if self.rng.random() < 0.5:
                jobs.reverse()
        await asyncio.gather(*jobs)
        if new.room is None and not old.closed and old.room is not None:
            person.conn = old

    async def time_passes(self) -> None:
        seconds = self.rng.choice(
            [0.2, 1, 3, 3, 10, decisions.DISCONNECT_GRACE_MS / 1000 + 1, 61, 121]
        )
        self.log.append(f"time passes: {seconds} s")
        self.clock.advance(seconds, *self.nodes)
        for node in self.nodes:
            for room in list(node.rooms.values()):
                if self.rng.random() < 0.3:
                    await node.tick(room)
        await asyncio.sleep(0.02)

    # ---------------------------------------------------------------- the end
    async def settle(self) -> None:
        """Let time run past every limit until every started race has ended."""
        for _ in range(3):  # a countdown, its race (a quick room's: 900 s), its end
            self.clock.advance(1000, *self.nodes)
            for node in self.nodes:
                for room in list(node.rooms.values()):
                    await node.tick(room)
            await asyncio.sleep(0.2)
        for node in self.nodes:
            await node.drained()
        await asyncio.sleep(0.2)
        self.check_streams()


def _check_delays(walk: Walk, room_id: str, starts: set[int]) -> int:
    """Every board a spectator of the room got was at least the room's spectator delay
    old when sent, but a race's starting boards (docs/protocol.md §8). Returns how
    many boards were checked."""
    delay_ms = int(_settings_of(walk, room_id)["spectator_delay_s"]) * 1000
    checked = 0
    for stream in walk.streams:
        watching = False
        for frame, sent_at in zip(stream.peer.frames, stream.peer.sent_at, strict=True):
            if frame.t in ("joined", "watching"):
                watching = frame.t == "watching" and frame.d["room"] == room_id
            elif frame.t == "ok":  # a spectator's only ``ok`` is its leave's
                watching = False
            elif frame.t == "board" and watching:
                at_ms = int(frame.d["at_ms"])  # type: ignore[call-overload]
                assert at_ms in starts or at_ms <= sent_at - delay_ms, (
                    f"room {room_id}: a board of {at_ms} sent at {sent_at}, delay {delay_ms}"
                )
                checked += 1
    return checked


def _line(frame: Envelope) -> str:
    """One frame in a line (a snapshot's racers in full): for a failure's message."""
    data = _d(frame)
    if frame.t in ("joined", "watching", "resync"):
        snapshot = data["snapshot"]
        racers = [(r["racer"], r["status"], r["moves"]) for r in snapshot["racers"]]
        return f"{frame.t} id{frame.id} v{snapshot['version']} {snapshot['phase']} {racers}"
    return f"{frame.t} v{frame.v} id{frame.id} {str(dict(data))[:160]}"


def _dump(peer: TimedPeer) -> str:
    """A connection's frames, one a line: for a failure's message."""
    return "\n" + "\n".join(_line(f) for f in peer.frames)


def _check_replies(walk: Walk) -> None:
    """Every request got exactly one reply: none came late, after its first."""
    for stream in walk.streams:
        ids = [f.id for f in stream.peer.frames if f.id is not None]
        assert len(ids) == len(set(ids)), f"a request answered twice: {_dump(stream.peer)}"


async def _check_presence(walk: Walk) -> None:
    """Once everything settled: a racer the room says is online is held by exactly one
    open connection — the one it names — and every connection that is some racer's is
    that racer's, online, in the room (docs/protocol.md §7, ``presence``)."""
    holding = [
        s.peer
        for s in walk.streams
        if not s.peer.closed and s.peer.room is not None and s.peer.racer is not None
    ]
    for node in walk.nodes:
        for room in list(node.rooms.values()):
            await node.sync(room)
            for r, member in room.state.racers.items():
                holders = [p for p in holding if p.room is not None and p.racer == r]
                holders = [p for p in holders if p.room and p.room.room_id == room.room_id]
                where = f"room {room.room_id} racer {r} ({member.status}) on {node.node_id}"
                assert len(holders) <= 1, f"{where}: held by {len(holders)} connections"
                if holders:
                    assert member.online and member.conn == holders[0].conn_id, (
                        f"{where}: held by a connection, but online={member.online}"
                    )
                elif member.status != "left":
                    assert not member.online, f"{where}: online, held by no connection"
    for peer in holding:
        assert peer.room is not None and peer.racer is not None
        state = peer.room.state
        held = state.racers.get(peer.racer)
        assert held is not None and held.status != "left", (
            f"a connection attached as racer {peer.racer} of {state.room}, which has none"
        )


def _standings_in_order(standings: list[dict[str, Any]]) -> None:
    """Places 1..n; finishers first, fastest first; then by cards up, time, join order."""
    assert [s["place"] for s in standings] == list(range(1, len(standings) + 1)), standings
    finished = [s for s in standings if s["status"] == "finished"]
    assert standings[: len(finished)] == finished, standings
    times = [s["elapsed_ms"] for s in finished]
    assert times == sorted(times), standings
    rest = standings[len(finished) :]

    def rank(s: dict[str, Any]) -> tuple[int, float, int]:
        reached = s["reached_ms"]
        return (-s["foundation"], float("inf") if reached is None else reached, s["racer"])

    assert rest == sorted(rest, key=rank), standings


def _rounds(events: list[Any]) -> list[dict[str, Any]]:
    """Each round that began a countdown: versions of its lobby, countdown, start and
    end, its settings-free facts."""
    rounds: list[dict[str, Any]] = []
    lobby_v = 0
    current: dict[str, Any] | None = None
    for v, event in enumerate(events, start=1):
        if event.t == "countdown":
            current = {"lobby": lobby_v, "countdown": v, "event": event, "finished": []}
            rounds.append(current)
        elif event.t == "started" and current is not None:
            current["started"] = v
            current["commitment"] = event.d["commitment"]
        elif event.t == "finished" and current is not None:
            current["finished"].append(event)
        elif event.t == "race_over" and current is not None:
            current["over"] = v
            current["result"] = dict(event.d)
        elif event.t == "room_reset":
            lobby_v = v
            current = None
    return rounds


def _round_frames(
    frames: list[Envelope], room_id: str, first: int, over: int
) -> list[tuple[int | None, list[Envelope]]]:
    """A connection's frames of one round, one list per stay in the room, with the
    racer it was (None: a spectator): from the round's lobby (version ``first``) up
    to its race_over (version ``over``)."""
    stays: list[tuple[int | None, list[Envelope]]] = []
    current: list[Envelope] | None = None
    racer: int | None = None
    inside = False
    for frame in frames:
        if frame.t in ("joined", "watching"):
            version = int(frame.d["snapshot"]["version"])  # type: ignore[index]
            inside = frame.d["room"] == room_id
            if not inside:
                current = None
                continue
            was = racer
            racer = int(frame.d["racer"]) if frame.t == "joined" else None  # type: ignore[call-overload]
            same = current is not None and racer is not None and racer == was  # a resync
            if same and current is not None and version < over:
                current.append(frame)
            elif first <= version < over:
                current = [frame]
                stays.append((racer, current))
            else:
                current = None
            continue
        if frame.v is not None:
            if frame.v >= over:
                current = None
                continue
            if frame.v == first and inside and current is None:
                current = []
                stays.append((racer, current))
        if current is not None and frame.t != "archived":  # (of a race over: result())
            current.append(frame)
    return stays


async def _check_rooms(walk: Walk, node: Node) -> dict[str, int]:
    races: dict[str, int] = {}
    for room_id in walk.rooms:
        stored = walk.history[room_id]
        kept = await node.store.events_since(room_id, 0)  # what a trim left: a suffix
        assert kept and [unpack_event(e.data) for e in kept] == stored[kept[0].version - 1 :]
        _check_snapshots(walk, room_id, stored)
        if walk.skew == 0:
            starts = {int(e.d["start_at_ms"]) for e in stored if e.t == "started"}
            races["spectator boards"] = races.get("spectator boards", 0) + _check_delays(
                walk, room_id, starts
            )
        for stream in walk.streams:  # every event sent is the one stored at its version
            for room, frame in stream.events:
                if room == room_id:
                    assert frame.v is not None and frame.v <= len(stored), frame
                    wire = stored[frame.v - 1].wire(frame.v)
                    assert (frame.t, dict(frame.d)) == (wire.t, dict(wire.d)), (frame, wire)
        for round_ in _rounds(stored):
            assert "over" in round_, (
                f"room {room_id}: a race never ended: {_seen(walk, room_id, stored)}"
            )
            if "started" not in round_:
                continue  # every racer left in the countdown
            result = round_["result"]
            races[result["reason"]] = races.get(result["reason"], 0) + 1
            finishers = sum(1 for s in result["standings"] if s["status"] == "finished")
            races["finishers"] = races.get("finishers", 0) + finishers
            standings = list(result["standings"])
            _standings_in_order(standings)
            places = [e.d["place"] for e in round_["finished"]]
            assert places == list(range(1, len(places) + 1)), places
            by_racer = {s["racer"]: s for s in standings}
            for event in round_["finished"]:
                assert by_racer[event.racer]["place"] == event.d["place"]
            meta = await node.store.load_meta(room_id)
            assert meta is not None
            settings = _settings_of(walk, room_id)
            open_boards = bool(round_["event"].d.get("open_boards"))
            for stream in walk.streams:
                for racer, stay in _round_frames(
                    stream.peer.frames, room_id, round_["lobby"], round_["over"]
                ):
                    try:
                        check_no_leaks(stay, result, settings, racer, open_boards=open_boards)
                    except AssertionError:
                        print(f"stay of racer {racer} in {room_id}: {_dump(stream.peer)}")
                        raise
            saved = SavedResult(
                race=race_id(room_id, str(round_["commitment"])),
                room=room_id,
                settings=settings,
                result=result,
                published_commitment=str(round_["commitment"]),
            )
            report = verify_result(saved)
            assert report.ok, f"room {room_id}: {report.failures}"
    return races


def _seen(walk: Walk, room_id: str, stored: list[Any]) -> str:
    """What the nodes and the store hold of a room: for a failure's message."""
    lines = [f"v{v} {e.t} {dict(e.d)}" for v, e in enumerate(stored, start=1)]
    for node in walk.nodes:
        room = node.rooms.get(room_id)
        if room is None:
            lines.append(f"node {node.node_id}: not loaded")
            continue
        racers = {r: (m.status, m.online) for r, m in room.state.racers.items()}
        lines.append(
            f"node {node.node_id}: {room.state.phase} v{room.state.version} {racers}"
            f" shared={room.shared} timer={room.timer is not None}"
        )
    return "\n".join(lines)


#: What two snapshots of a room at one version must agree on about each racer (the
#: rest of a snapshot — now_ms, spectators, you — is the recipient's or the moment's).
RACER_FIELDS = ("racer", "name", "ready", "status", "foundation", "moves", "face_down", "place")


def _shared(view: RoomView) -> dict[str, Any]:
    state: dict[str, Any] = {
        "phase": view.phase,
        "host": view.host,
        "start_at_ms": view.start_at_ms,
        "ends_at_ms": view.ends_at_ms,
        "commitment": view.commitment,
        "deal": view.deal,
        "result": view.result,
    }
    # A racer_joined says nothing of ``online`` (RoomView leaves it unknown): a racer
    # who joins is online, on the connection that joined.
    state["racers"] = {
        r: {k: info.get(k) for k in RACER_FIELDS}
        | {"online": info.get("online", True) is not False}
        for r, info in view.racers.items()
    }
    return state


def _differences(a: Any, b: Any, at: str = "") -> list[str]:
    """Where two nested values differ: for a failure's message."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(key), b.get(key), f"{at}.{key}")
        return out
    return [] if a == b else [f"{at}: {a!r} != {b!r}"]


def _check_snapshots(walk: Walk, room_id: str, stored: list[Any]) -> None:
    """Each snapshot any connection got is what a client folding the stored events from
    the snapshot before it holds (docs/protocol.md §10: snapshots are authoritative, and
    the events after one are exactly what changed)."""
    snapshots = sorted(
        (
            (int(_d(f)["snapshot"]["version"]), i, _d(f)["snapshot"])
            for i, f in enumerate(f for s in walk.streams for f in s.peer.frames)
            if f.t in ("joined", "watching") and f.d["room"] == room_id
        ),
        key=lambda x: (x[0], x[1]),
    )
    for (before_v, _, before), (after_v, _, after) in itertools.pairwise(snapshots):
        view = RoomView()
        view.load(before)
        for v in range(before_v + 1, after_v + 1):
            view.apply(stored[v - 1].wire(v))
        reference = RoomView()
        reference.load(after)
        folded, snapshot = _shared(view), _shared(reference)
        assert folded == snapshot, (
            f"room {room_id}: v{before_v} + events != the snapshot at v{after_v}: "
            f"{_differences(folded, snapshot)}"
        )


def _settings_of(walk: Walk, room_id: str) -> dict[str, Any]:
    for stream in walk.streams:
        for frame in stream.peer.frames:
            if frame.t in ("joined", "watching") and frame.d["room"] == room_id:
                return dict(frame.d["snapshot"]["settings"])  # type: ignore[index]
    raise AssertionError(f"no snapshot of room {room_id}")


@pytest.mark.parametrize("backend", ["redis", "embedded"], indirect=True)
@pytest.mark.parametrize("seed", SEEDS)
async def test_random_requests_keep_every_promise(
    backend: Backend, seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(seed)
    clock = Clock()
    nodes = [await backend.node(clock=clock)]
    skew = 0
    if rng.random() < 0.7:  # a second node, its clock maybe off by a second and a half
        skew = rng.choice([0, 0, 1500, -1500])
        nodes.append(await backend.node(clock=lambda: clock() + skew))
    walk = Walk(rng, nodes, clock, skew)
    try:
        for _ in range(STEPS):
            await walk.step()
            await asyncio.sleep(0.005)
            walk.check_streams()
            await walk.record_history()
        await walk.settle()
        await walk.record_history()
        _check_replies(walk)
        await _check_presence(walk)
        races = await _check_rooms(walk, nodes[0])
        # Nothing failed here: no error logged (a lost write, a failed task), no defect.
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == [], errors
        for node in nodes:
            assert isinstance(node.metrics, Tally)
            assert node.metrics.defects.values == {}, node.metrics.defects.values
            assert node.metrics.lost_writes.value == 0
    except BaseException:
        print(f"seed {seed}: last steps:\n" + "\n".join(walk.log[-30:]))
        raise
    print(f"seed {seed}: {len(nodes)} nodes, {len(walk.rooms)} rooms, {races} races")
    print(" ", ", ".join(f"{k} {n}" for k, n in sorted(walk.answers.items())))
