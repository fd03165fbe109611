"""Bad input in every phase of a room, with the server's log watched.

tests/net/test_wire_fuzz.py sends generated frames from one racer while a race is
under way. A room's other phases run other code (the lobby's ready flags and seats,
the countdown's start, a finished room's rematch and archive, the next round's lobby),
and a bad frame can also reach the server fragmented, with control frames between its
fragments, or break RFC 6455 itself. Here hypothesis picks, for each phase, frames of
every kind and who sends them — a racer of the room, a spectator of it, or an idle
connection — and each must be answered as docs/protocol.md says (one ``error`` reply
with a code of §12, echoing the request id, or a close of §13 with its bare code as the
reason). After each phase the room must go on for its other racers (the host starts,
the race starts, moves are accepted, the race ends, a rematch opens the next lobby);
at the end no move is lost, no connection saw what it may not see, and the server
logged no error and no traceback: a handler's exception is answered ``internal``, but
it is a bug all the same, and websockets' own "connection handler failed" is a
traceback in the operator's log. Every line it did log is formatted as
solrace-server formats it (text and JSON), each one line whatever the frames held.

A table of requests out of order (the lobby's, the countdown's, a finished room's)
checks the exact refusal of each: test_wire_fuzz.py's table is the race's.
"""

from __future__ import annotations

import asyncio
import logging
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from solrace.net.logs import TEXT_FORMAT, JsonFormatter, TextFormatter
from solrace.protocol import Envelope, encode
from solrace.protocol.messages import Leave
from solrace_client import RaceClient, ServerError

from tests.support.race import check_no_leaks, lobby, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster
from .test_refusals import _ws_frame
from .test_wire_fuzz import (
    _IDS,
    Expected,
    check_answer,
    expected,
    frames,
    pack,
    parse_or_none,
    replies,
    values,
)

PHASES = ("lobby", "countdown", "racing", "finished", "rematch")
ROLES = ("racer", "spectator", "idle")
#: Closes a racer's own connection takes per phase before its bad frames go on a
#: throwaway connection instead: each close costs a resume, and a racer resumes 20
#: times in a row, then once every 2 s (RESUME_BURST), which a test need not wait for.
RACER_CLOSES_PER_PHASE = 3
#: A countdown long enough for a phase's frames to be read within it, mostly.
COUNTDOWN_MS = 1500

_PING = encode(Envelope("ping", id=9))


def _str8(raw: bytes) -> bytes:
    """A msgpack str of ``raw`` bytes, whatever they are (the packer writes UTF-8 only)."""
    return bytes([0xD9, len(raw)]) + raw


#: msgpack no packer writes: repeated keys, strings that are not UTF-8, extension types
#: (an empty one gets past the unpacker's length limit of 0), headers that declare
#: more than the limits or more than the frame holds, NaN and integers at 64 bits.
CRAFTED: list[bytes] = [
    b"\x82\xa1t\xa4ping\xa1t\xa4ping",
    b"\x83\xa1t\xa4move\xa2id\x01\xa1d\x83\xa3seq\x00\xa3seq\x01\xa4move\xa1D",
    b"\x83\xa1t\xa4move\xa2id\x01\xa1d\x82\xa3seq\x00\xa4move" + _str8(b"\xff\xfe"),
    b"\x83\xa1t\xa4ping\xa2id\x01\xa1d\x81" + _str8(b"\xc3\x28") + b"\x01",
    b"\x83\xa1t\xa4ping\xa2id\x01\xa1d\x81\xa1x" + _str8(b"\xed\xa0\x80"),  # a surrogate
    b"\x83\xa1t\xa4ping\xa2id\x01\xa1d\x81\xa1x\xc7\x00\x05",
    b"\x83\xa1t\xa4ping\xa2id\x01\xa1d\x81\xa1x\xc7\x00\xff",  # an empty timestamp
    b"\x81\xc7\x00\x05\x01",
    b"\x81\xc4\x00\x01",
    b"\x82\xa1t\xa4ping\xa1d\x81\xa1x\xc4\x00",
    b"\x91" * 3000 + b"\xc0",
    b"\x81\xa1d" * 2000 + b"\xc0",
    b"\xdf\xff\xff\xff\xff",
    b"\xdd\xff\xff\xff\xff",
    b"\xdb\xff\xff\xff\xff",
    b"\xc6\xff\xff\xff\xff",
    b"\xc9\xff\xff\xff\xff\x01",
    b"\xc1",
    b"",
    pack({"t": "move", "id": 1, "d": {"seq": math.nan, "move": "D"}}),
    pack({"t": "move", "id": 1, "d": {"seq": -math.inf, "move": "D"}}),
    pack({"t": "ping", "id": math.nan}),
    pack({"t": "move", "id": 1, "d": {"seq": 2**64 - 1, "move": "1>F"}}),
    pack({"t": "move", "id": 1, "d": {"seq": -(2**63), "move": "1>F"}}),
    pack({"t": "create", "id": 1, "d": {"variant": "yukon", "name": "E", "max_racers": 1e300}}),
    pack({"t": "create", "id": 1, "d": {"variant": "yukon", "name": "E", "options": {"x": 2**63}}}),
]

#: Frames that break RFC 6455: websockets closes them 1002 before solrace reads them.
VIOLATIONS: list[bytes] = [
    _ws_frame(0x0, _PING),  # a continuation with nothing to continue
    _ws_frame(0x2, _PING, rsv=1),
    _ws_frame(0x2, _PING, mask=False),
    _ws_frame(0x3, _PING),
    _ws_frame(0x9, b"x" * 126),
    _ws_frame(0x9, b"x", fin=False),  # a fragmented control frame
    _ws_frame(0x8, struct.pack("!H", 999)),
    _ws_frame(0x2, _PING[:2], fin=False) + _ws_frame(0x2, _PING),  # a new message mid-way
]

#: Values the room knows only when the frame is sent (a request naming this room).
PLACES = ("$code", "$room", "$stale", "$race")
_PLACED_TYPES = ["join", "watch", "resume", "result", "quick", "create", "move", "ready"]
_PLACED_FIELDS = ["code", "room", "token", "race", "since", "name", "variant", "seq", "move"]
room_aware = st.fixed_dictionaries(
    {
        "t": st.sampled_from(_PLACED_TYPES),
        "id": _IDS,
        "d": st.dictionaries(
            st.sampled_from(_PLACED_FIELDS),
            st.sampled_from(PLACES) | st.sampled_from(["Eve", "yukon", 0, 1, None]) | values,
            max_size=4,
        ),
    }
)


_NAMES = st.sampled_from(["Eve", "Ann", "ann", "Ｅｖｅ", "Zoë", "x" * 24])
_VARIANTS = st.sampled_from(["yukon", "klondike", "russian", "alaska", "australian", "zzz"])
_OPTIONS = st.sampled_from([{}, {"draw": 3}, {"undo": False}, {"max_passes": 2**31 - 1}])
_SEQS = st.none() | st.integers(0, 3)
_MOVES = ["1>F", "D", "undo", "4:3>1", "7:1>1"]


def _asking(
    t: st.SearchStrategy[str], d: dict[str, Any] | None = None, **optional: Any
) -> st.SearchStrategy[dict[str, Any]]:
    """Requests of type ``t`` with the fields ``d`` (and maybe ``optional``), any id."""
    envelope: dict[str, Any] = {"t": t, "id": _IDS}
    if d is not None:
        envelope["d"] = st.fixed_dictionaries(d, optional=optional)
    return st.fixed_dictionaries(envelope)


#: Requests that pass the message checks, so that the room decides each (three of the
#: eight branches of ``wires``): what the phase, and the sender's place in the room,
#: make of it. Generated frames alone reach the room rarely: a handler made to fail
#: on a spectator's ``list`` went unnoticed in ten examples without these.
valid = st.one_of(
    _asking(st.sampled_from(["ping", "list", "start", "resign", "rematch", "leave"])),
    _asking(st.just("list"), {"variant": _VARIANTS}),
    _asking(
        st.sampled_from(["create", "quick"]),
        {"variant": _VARIANTS, "name": _NAMES},
        options=_OPTIONS,
        max_racers=st.integers(2, 8),
    ),
    _asking(st.just("join"), {"code": st.just("$code"), "name": _NAMES}),
    _asking(st.just("watch"), {"code": st.just("$code")}, since=_SEQS),
    _asking(
        st.just("resume"),
        {"room": st.just("$room"), "token": st.sampled_from(["$stale", "A" * 32])},
        since=_SEQS,
    ),
    _asking(st.just("ready"), {"ready": st.booleans()}, spectators=st.just("open")),
    _asking(st.just("move"), {"seq": _SEQS, "move": st.sampled_from(_MOVES)}),
    _asking(st.just("result"), {"race": st.just("$race")}),
)


@dataclass(frozen=True)
class Wire:
    """What goes on the wire and what the server is to read from it.

    ``message`` is the frame the server reassembles (its answer is :func:`expected`'s
    for it) and ``raw``, if set, the bytes written to the socket instead of sending it
    as one frame: its fragments, or a frame that breaks RFC 6455 (``close`` 1002)."""

    message: bytes | str | dict[str, Any]
    raw: tuple[bytes, ...] | None = None
    close: int | None = None


@st.composite
def fragmented(draw: st.DrawFn) -> Wire:
    """A frame in fragments, maybe a text one, with pings or pongs between them."""
    message = draw(frames())
    if isinstance(message, str) and not message:
        message = "x"
    data = message.encode() if isinstance(message, str) else message
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), min_size=1, max_size=4)))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    opcode = 0x1 if isinstance(message, str) else 0x2
    raw = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        raw.append(_ws_frame(opcode if i == 0 else 0x0, piece, fin=last))
        if not last and draw(st.booleans()):
            raw.append(_ws_frame(draw(st.sampled_from([0x9, 0xA])), draw(st.binary(max_size=8))))
    return Wire(message, tuple(raw))


wires = st.one_of(
    valid.map(Wire),
    valid.map(Wire),
    valid.map(Wire),
    frames().map(Wire),
    st.sampled_from(CRAFTED).map(Wire),
    room_aware.map(Wire),
    fragmented(),
    st.sampled_from(VIOLATIONS).map(lambda raw: Wire(b"", (raw,), close=1002)),
)
#: A phase's frames: who sends each, and what.
batches = st.lists(st.tuples(st.sampled_from(ROLES), wires), min_size=6, max_size=6)


# ----------------------------------------------------------------- the room
@dataclass
class Room:
    """The room under test: Ann (host) and Bob race honestly and Wat watches; Eve (a
    racer), Sam (a spectator) and an idle connection send the bad frames."""

    url: str
    ann: RaceClient
    bob: RaceClient
    wat: RaceClient
    eve: list[RaceClient]
    sam: list[RaceClient]
    idle: list[RaceClient]
    stale: str
    moves: list[str]
    played: dict[str, int] = field(default_factory=lambda: {"ann": 0, "bob": 0})
    racer_closes: int = 0
    race: str = "r_x.nocommit"

    def places(self) -> dict[str, str]:
        return {
            "$code": self.ann.code or "",
            "$room": self.ann.room or "",
            "$stale": self.stale,
            "$race": self.race,
        }

    def connections(self) -> list[RaceClient]:
        return [self.ann, self.bob, self.wat, *self.eve, *self.sam, *self.idle]


def _placed(value: object, places: dict[str, str]) -> object:
    """``value`` with the room's values (:data:`PLACES`) in place of their names."""
    if isinstance(value, dict):
        return {k: _placed(v, places) for k, v in value.items()}
    if isinstance(value, str):
        return places.get(value, value)
    return value


async def _spectator_of(url: str, host: RaceClient) -> RaceClient:
    client = await RaceClient.connect(url)
    await client.watch(code=host.code)
    return client


def _before_reset(frames_: list[Envelope]) -> list[Envelope]:
    """A connection's frames up to the rematch (the leak check knows one round)."""
    for i, frame in enumerate(frames_):
        if frame.t == "room_reset":
            return frames_[:i]
    return frames_


class Lines(logging.Handler):
    """The lines a formatter of solrace-server's makes of each record, as it is logged
    (a record's fields may be gone later: websockets' name its connection weakly)."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(formatter)
        self.lines: list[str] = []
        self.failed: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception as exc:  # logging would print it to stderr, and go on
            self.failed.append(f"{record.name}: {record.msg!r}: {exc!r}")


async def _answer(client: RaceClient, before: int) -> list[Envelope]:
    async with asyncio.timeout(10):
        while len(replies(client)) == before and not client.closed.done():
            await asyncio.sleep(0.005)
    return replies(client)[before:]


async def send(room: Room, role: str, wire: Wire) -> None:
    """Send one wire from ``role`` and check its answer; keep the role's connection in
    its role afterwards (a racer resumed, a spectator watching, an idle one idle)."""
    message = wire.message
    if isinstance(message, dict):
        message = pack(_placed(message, room.places()))
    want = Expected(close=1002, reason="bad_frame") if wire.close else expected(message)
    leaving = want.envelope is not None and isinstance(parse_or_none(want.envelope), Leave)
    if leaving and role == "racer":
        return  # a racer that leaves is out of the race this test watches
    if role == "racer" and want.close is not None:
        if room.racer_closes >= RACER_CLOSES_PER_PHASE:
            role = "idle"
        room.racer_closes += role == "racer"
    own = {"racer": room.eve, "spectator": room.sam, "idle": room.idle}[role]
    client = own[-1]
    before = len(replies(client))
    if wire.raw is None:
        await client.send_raw(message)
    else:
        assert client.ws.transport is not None
        client.ws.transport.write(b"".join(wire.raw))
    got = await _answer(client, before)
    if want.close is not None:
        await asyncio.wait_for(asyncio.shield(client.closed), 10)
    what = f"{role}: {wire!r:.300}"
    check_answer(what, want, client, got)
    if not client.closed.done() and got and got[0].t in ("joined", "watching", "ok"):
        # An idle connection that entered a room (or a spectator that left it): back
        # to its role, and out of the room's seats, which the host's start counts.
        if role == "idle" and got[0].t != "ok":
            await client.leave()
        if role == "spectator" and leaving:
            await client.watch(code=room.ann.code)
    if client.closed.done():
        if role == "racer":
            fresh = await RaceClient.connect(room.url)
            await fresh.resume(room=room.ann.room, token=room.eve[0].token, since=None)
            assert fresh.racer == room.eve[0].racer
        elif role == "spectator":
            fresh = await _spectator_of(room.url, room.ann)
        else:
            fresh = await RaceClient.connect(room.url)
        own.append(fresh)


async def phase(room: Room, batch: list[tuple[str, Wire]]) -> None:
    """Send a phase's frames; then each sender's connection still answers."""
    room.racer_closes = 0
    for role, wire in batch:
        await send(room, role, wire)
    for own in (room.eve, room.sam, room.idle):
        assert await own[-1].ping() >= 0


async def play(room: Room, who: str, count: int) -> None:
    """``who`` (ann or bob) plays its next ``count`` moves: each is accepted."""
    client = getattr(room, who)
    for _ in range(count):
        moved = await client.move(room.moves[room.played[who]])
        assert moved["seq"] == room.played[who]
        room.played[who] += 1


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
@settings(
    max_examples=3,
    deadline=None,
    # No shrinking: an example takes 2 s, shrinking one took minutes, and the failing
    # case is printed whole (each frame with its sender and phase).
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sent=st.fixed_dictionaries({p: batches for p in PHASES}))
async def test_bad_frames_in_every_phase_are_answered_and_the_room_goes_on(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, sent: dict[str, list[tuple[str, Wire]]]
) -> None:
    caplog.set_level(logging.INFO)  # what solrace-server logs by default
    logged = len(caplog.records)
    lines = [Lines(TextFormatter(TEXT_FORMAT)), Lines(JsonFormatter())]
    for handler in lines:
        logging.getLogger().addHandler(handler)
    try:
        await _race_with_bad_frames(cluster, caplog, sent, logged, lines)
    finally:
        for handler in lines:
            logging.getLogger().removeHandler(handler)


async def _race_with_bad_frames(
    cluster: Cluster,
    caplog: pytest.LogCaptureFixture,
    sent: dict[str, list[tuple[str, Wire]]],
    logged: int,
    lines: list[Lines],
) -> None:
    server = (
        cluster.servers[0] if cluster.servers else await cluster.node(countdown_ms=COUNTDOWN_MS)
    )
    url = server.url
    # A stale token: a racer's of another room, who left it.
    host, gone = await lobby(url, names=("Hal", "Gus"))
    await gone.leave()
    ann, bob, eve = await lobby(url, names=("Ann", "Bob", "Eve"), deals="random")
    room = Room(
        url,
        ann,
        bob,
        await _spectator_of(url, ann),
        [eve],
        [await _spectator_of(url, ann)],
        [await RaceClient.connect(url)],
        gone.token or "",
        winning_moves(SOLVABLE_SECRET),
    )
    await phase(room, sent["lobby"])
    await room.eve[-1].ready()
    await ann.start()
    commitment = str((await bob.next_event("countdown")).d["commitment"])
    room.race = f"{ann.room}.{commitment[:8]}"
    await phase(room, sent["countdown"])
    await bob.wait_started()
    await phase(room, sent["racing"])
    await asyncio.gather(play(room, "ann", 6), play(room, "bob", 3))
    for client in (ann, bob, room.eve[-1]):
        try:
            await client.resign()
        except ServerError as refused:  # the fuzz resigned for Eve already
            assert refused.code == "wrong_phase", refused
    result: dict[str, Any] = dict((await room.wat.next_event("race_over", timeout=20)).d)
    # From now on the seed is out (an idle connection may fetch the result): the leak
    # check is for what the fuzzing connections got while the race ran.
    raced = {c: len(c.received) for c in (*room.eve, *room.sam, *room.idle)}
    await phase(room, sent["finished"])
    await ann.rematch()  # ok, or ok again if Eve's fuzz asked for it first
    await room.wat.next_event("room_reset")
    await phase(room, sent["rematch"])
    assert (await bob.ping()) >= 0
    # Nothing lost, nothing added: the logs are exactly the moves Ann and Bob played.
    logs = {s["name"]: s["log"] for s in result["standings"]}
    assert logs["Ann"] == room.moves[:6] and logs["Bob"] == room.moves[:3]
    # The honest connections stayed up, and the spectator's stream is gap-free.
    assert [c.close_code for c in (ann, bob, room.wat)] == [None, None, None]
    versions = [e.v for e in room.wat.received if e.v is not None]
    assert versions == list(range(versions[0], versions[0] + len(versions)))
    settings_ = room.wat.snapshot["settings"] if room.wat.snapshot else {}
    for client in (ann, bob, room.wat):
        check_no_leaks(_before_reset(client.received), result, settings_, client.racer)
    for client, count in raced.items():
        racer = client.racer if client in room.eve else None
        check_no_leaks(client.received[:count], result, settings_, racer)
    # The server said nothing an operator must act on: no error, no traceback; and
    # each line it said was one line in either of its formats, whatever the frames held.
    said = [r for r in caplog.records[logged:] if r.levelno >= logging.ERROR or r.exc_info]
    assert not said, [f"{r.name}: {r.getMessage()}" for r in said]
    for handler in lines:
        assert handler.lines and not handler.failed, handler.failed
        assert not [line for line in handler.lines if "\n" in line], handler.lines
    for client in (*room.connections(), host, gone):
        await client.close()


# ----------------------------------------------------------------- out of order
#: (phase, who, request, fields, the refusal docs/protocol.md §4 gives): requests a
#: room's phase does not take, from Eve (a racer), Ann (the host) or Sam (a spectator).
#: tests/net/test_wire_fuzz.py checks these during the race; here the other phases.
OUT_OF_ORDER: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("lobby", "eve", "move", {"seq": 0, "move": "D"}, "wrong_phase"),
    ("lobby", "eve", "resign", {}, "wrong_phase"),
    ("lobby", "eve", "rematch", {}, "wrong_phase"),
    ("lobby", "eve", "start", {}, "not_host"),
    ("lobby", "ann", "rematch", {}, "wrong_phase"),
    ("lobby", "sam", "ready", {"ready": True}, "spectator_cannot_act"),
    ("lobby", "eve", "resume", {"room": "$room", "token": "$ann"}, "already_in_room"),
    ("lobby", "eve", "join", {"code": "$code", "name": "Eve"}, "already_in_room"),
    ("countdown", "eve", "move", {"seq": 0, "move": "D"}, "wrong_phase"),
    ("countdown", "eve", "resign", {}, "wrong_phase"),
    ("countdown", "eve", "ready", {"ready": False}, "wrong_phase"),
    ("countdown", "eve", "start", {}, "wrong_phase"),
    ("countdown", "eve", "rematch", {}, "wrong_phase"),
    ("countdown", "idle", "join", {"code": "$code", "name": "Ida"}, "wrong_phase"),
    ("countdown", "eve", "resume", {"room": "$room", "token": "$ann"}, "already_in_room"),
    ("finished", "eve", "move", {"seq": 0, "move": "D"}, "wrong_phase"),
    ("finished", "eve", "ready", {"ready": True}, "wrong_phase"),
    ("finished", "ann", "start", {}, "wrong_phase"),
    ("finished", "idle", "join", {"code": "$code", "name": "Ida"}, "wrong_phase"),
    ("finished", "sam", "rematch", {}, "spectator_cannot_act"),
    ("finished", "idle", "resume", {"room": "$room", "token": "$stale"}, "bad_token"),
    ("finished", "eve", "resume", {"room": "$room", "token": "$ann"}, "already_in_room"),
]


async def _cast(url: str, stale: str) -> tuple[dict[str, RaceClient], dict[str, str]]:
    """A lobby of Ann (host), Bob and Eve (ready), watched by Sam, an idle connection
    beside it; and the values its requests name."""
    ann, bob, eve = await lobby(url, names=("Ann", "Bob", "Eve"))
    who = {"ann": ann, "bob": bob, "eve": eve}
    who |= {"sam": await _spectator_of(url, ann), "idle": await RaceClient.connect(url)}
    places = {"$code": ann.code, "$room": ann.room, "$ann": ann.token, "$stale": stale}
    return who, {k: v or "" for k, v in places.items()}


async def _refused(phase_: str, who: dict[str, RaceClient], places: dict[str, str]) -> None:
    for when, name, t, d, code in OUT_OF_ORDER:
        if when == phase_:
            with pytest.raises(ServerError) as refusal:
                await who[name].request(t, **{k: places.get(v, v) for k, v in d.items()})
            assert refusal.value.code == code, (phase_, name, t, refusal.value)


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_requests_out_of_order_in_each_phase_are_refused_as_documented(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Each refused, nothing changed: the room goes on to its next phase."""
    caplog.set_level(logging.WARNING)
    # A countdown that outlasts the test, for one room; the other races at once.
    slow, fast = await cluster.node(countdown_ms=60_000), await cluster.node()
    host, gone = await lobby(fast.url, names=("Hal", "Gus"))
    await gone.leave()
    who, places = await _cast(slow.url, gone.token or "")
    await _refused("lobby", who, places)
    await who["ann"].start()
    await who["bob"].next_event("countdown")
    await _refused("countdown", who, places)
    assert await who["ann"].request("start") == {}  # the host's start is its retry: ok
    others, places = await _cast(fast.url, gone.token or "")
    await others["ann"].start()
    for name in ("ann", "bob", "eve"):
        await others[name].wait_started()
    assert (await others["bob"].move(winning_moves(SOLVABLE_SECRET)[0]))["seq"] == 0
    for name in ("ann", "bob", "eve"):
        await others[name].resign()
    await others["sam"].next_event("race_over")
    await _refused("finished", others, places)
    await others["eve"].rematch()
    await others["sam"].next_event("room_reset")
    said = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not said, [f"{r.name}: {r.getMessage()}" for r in said]
    for client in (*who.values(), *others.values(), host, gone):
        await client.close()
