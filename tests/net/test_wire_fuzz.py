"""Bad input on the wire, generated, while a real race goes on in the same room.

One racer's connection (Eve's) sends frames hypothesis makes up — valid msgpack of the
wrong shape, wrong types, huge integers, deep nesting, unknown fields, odd unicode,
unreadable msgpack, text frames, frames at and just over the size limit — while Ann and
Bob race and a spectator watches, on a node with the server's default limits. Every
frame must get what docs/protocol.md promises: an ``error`` reply with a code the
document lists (echoing the request id), or a close with a code and reason it lists —
never a second reply, never silence. After a close Eve reconnects and resumes. The race
must not notice: Ann's and Bob's moves are all accepted, in order, and are exactly the
logs of the result; every connection's every frame passes the leak check
(tests/support/race.py). Hostile orders of requests and a flood are checked the same
way.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from solrace.protocol import (
    CLIENT_MESSAGES,
    MAX_FRAME_BYTES,
    BadMessage,
    Envelope,
    MalformedFrame,
    decode,
    encode,
    parse_client_message,
)
from solrace.protocol.limits import RESUME_BURST
from solrace.protocol.messages import REPLY_TYPES, Leave
from solrace_client import RaceClient, ServerError
from solrace_client.pacing import SERVER_DEFAULT_PACE, Pacer

from tests.support.race import check_no_leaks, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster

#: The store matters to what a bad frame must not break (moves, events, resume), so
#: the frames meet Redis and the embedded engine.
BACKENDS = pytest.mark.parametrize("cluster", ["redis", "embedded"], indirect=True)

_DOC = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()


def _section(number: int) -> str:
    start = _DOC.index(f"\n## {number}. ")
    return _DOC[start : _DOC.index("\n## ", start + 1)]


#: Error codes of docs/protocol.md §12 (the table's first column).
ERROR_CODES = frozenset(re.findall(r"^\| `([a-z_]+)` \|", _section(12), re.M))
#: Close codes of §13 and the reasons each may carry.
CLOSE_REASONS: dict[int, frozenset[str]] = {
    int(code): frozenset(re.findall(r"`([a-z_]+)`", reasons))
    for code, reasons in re.findall(r"^\| (\d{4}) \| [^|]+ \| ([^|]+) \|", _section(13), re.M)
}


def test_the_document_lists_the_codes_this_test_checks_against() -> None:
    assert {"bad_message", "bad_frame", "too_large", "rate_limited", "bad_seq"} <= ERROR_CODES
    assert CLOSE_REASONS[1002] == CLOSE_REASONS[1003] == CLOSE_REASONS[1007] == {"bad_frame"}
    assert CLOSE_REASONS[1008] >= {"rate_limited"} and CLOSE_REASONS[1009] == {"too_large"}


# ----------------------------------------------------------------- frames
def pack(value: object) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def sized_frame(size: int) -> bytes:
    """A ``ping`` of exactly ``size`` bytes within every other limit (arrays of at most
    32 strings of 250 bytes): unknown fields, so a ``bad_message`` reply when the frame
    may be read at all."""
    fields: dict[str, list[str]] = {}
    envelope = {"t": "ping", "id": 7, "d": fields}
    count = 0
    while len(pack(envelope)) < size:
        fields.setdefault(f"f{count // 32:02d}", []).append("x" * 250)
        count += 1
    strings = fields[f"f{(count - 1) // 32:02d}"]
    for before in (250, 249):  # a string's header grows at 32 bytes: one length is missed
        if len(strings) > 1:
            strings[-2] = "x" * before
        for n in range(251):
            strings[-1] = "x" * n
            if len(frame := pack(envelope)) == size:
                return frame
    raise AssertionError(f"no frame of {size} bytes")


AT_LIMIT = sized_frame(MAX_FRAME_BYTES)
OVER_LIMIT = sized_frame(MAX_FRAME_BYTES + 1)

_FIELDS = sorted(
    {"seq", "move", "variant", "name", "code", "room", "token", "since", "ready", "options"}
    | {"revealed"}
    | {"max_racers", "time_limit_s", "private", "spectator_delay_s", "deals", "spectators"}
    | {"difficulty", "maxracers", "é", "", "\u202e", "x" * 40}
)
_WORDS = [
    "D", "R", "undo", "UNDO", "1:1>2", "7>F", "W>F", "U3", "FC>1", "FS2>3", "11:1>2", "1:1>1",
    "3:99>4", "yukon", "klondike", "ZZZZZZ", "r_nosuch", "A" * 32, "\u202e", "\x00", "ß",
    "١:١>٢", "🂡", "open", "fair", "winnable", "random", "hard", " ", "",
]  # fmt: skip
_INTS = [0, 1, -1, 2, 7, 8, 60, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**64 - 1, -(2**63)]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(_INTS),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(),
    st.sampled_from(_WORDS),
    st.text(max_size=12),
    # Around the 256-byte string limit, in characters of one to four bytes.
    st.tuples(st.sampled_from("xé€🂡"), st.integers(60, 260)).map(lambda c: c[0] * c[1]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=6,
)
payloads = st.dictionaries(st.sampled_from(_FIELDS) | st.text(max_size=8), values, max_size=4)
#: Readable requests of every type, their fields of any value: the message checks and
#: the room answer them.
requests = st.fixed_dictionaries(
    {
        "t": st.sampled_from(sorted(CLIENT_MESSAGES)),
        "id": st.none() | st.integers(0, 2**31 - 1),
        "d": st.dictionaries(st.sampled_from(_FIELDS), values, max_size=4),
    }
)
_IDS = st.none() | st.integers(0, 2**31 - 1)
_MOVES = st.sampled_from(["D", "R", "undo", "1>F", "7>F", "W>F", "U3", "FH>2", "2:1>3", "4:2>6"])
#: Requests that pass the message checks, or nearly: the room answers most of them.
plausible = st.one_of(
    st.fixed_dictionaries(
        {
            "t": st.just("move"),
            "id": _IDS,
            "d": st.fixed_dictionaries(
                {"seq": st.integers(0, 40) | st.sampled_from(_INTS), "move": _MOVES | scalars}
            ),
        }
    ),
    st.fixed_dictionaries(
        {"t": st.sampled_from(["ready", "start", "rematch", "ping", "list", "resign"]), "id": _IDS}
    ),
    st.fixed_dictionaries(
        {
            "t": st.sampled_from(["join", "watch", "quick", "create"]),
            "id": _IDS,
            "d": st.fixed_dictionaries(
                {"code": st.sampled_from(["ZZZZZZ", "zz zz", "ß"]), "name": st.text(max_size=30)}
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "t": st.just("resume"),
            "id": _IDS,
            "d": st.fixed_dictionaries(
                {
                    "room": st.from_regex(r"r_[a-z0-9]{1,12}", fullmatch=True),
                    "token": st.from_regex(r"[A-Za-z0-9_-]{16,40}", fullmatch=True),
                    "since": st.none() | st.integers(0, 2**63 - 1),
                }
            ),
        }
    ),
)
#: Envelopes of any shape: most of them close the connection.
envelopes = st.fixed_dictionaries(
    {"t": st.sampled_from(sorted(CLIENT_MESSAGES)) | st.text(max_size=40) | values},
    optional={
        "id": st.sampled_from(_INTS) | values,
        "v": st.sampled_from(_INTS) | values,
        "d": payloads | values,
        "extra": values,
    },
)


def _nested(depth: int) -> bytes:
    value: object = 1
    for _ in range(depth - 2):
        value = [value]
    return pack({"t": "create", "id": 3, "d": {"options": value}})


@st.composite
def frames(draw: st.DrawFn) -> bytes | str:
    """One frame a client could send: half of them readable requests, the rest
    anything."""
    kind = draw(st.integers(0, 9))
    if kind <= 2:
        return pack(draw(requests))
    if kind <= 4:
        return pack(draw(plausible))
    if kind == 5:
        return pack(draw(envelopes))
    if kind == 6:  # a readable request spoilt: cut short, or followed by more bytes
        whole = pack(draw(requests))
        if draw(st.booleans()):
            return whole[: draw(st.integers(0, len(whole) - 1))]
        return whole + draw(st.binary(min_size=1, max_size=8))
    if kind == 7:  # bytes, or a text frame
        return draw(st.binary(max_size=32) | st.text(max_size=16))
    if kind == 8:  # values outside the data model: bin, ext, non-string keys
        value = draw(
            st.sampled_from(
                [b"", b"bin", msgpack.ExtType(1, b"x"), msgpack.Timestamp(0)]  # type: ignore[list-item]
            )
        )
        return pack({"t": "ping", "d": {"x": value}} if draw(st.booleans()) else {1: value})
    return draw(st.sampled_from([AT_LIMIT, OVER_LIMIT, _nested(4), _nested(5), _nested(40)]))


# ----------------------------------------------------------------- expectations
@dataclass(frozen=True)
class Expected:
    """What the server must answer a frame with: a close (code and reason), or a reply
    echoing ``request_id`` — an ``error`` with ``code`` if the protocol layer refuses it,
    else any reply a request may get (``code`` None)."""

    close: int | None = None
    reason: str | None = None
    request_id: int | None = None
    code: str | None = None
    envelope: Envelope | None = None


def expected(frame: bytes | str) -> Expected:
    try:
        envelope = decode(frame)
    except MalformedFrame as err:
        assert err.close_code is not None
        return Expected(close=err.close_code, reason=err.code.value)
    try:
        parse_client_message(envelope)
    except BadMessage as err:
        return Expected(request_id=envelope.id, code=err.code.value, envelope=envelope)
    return Expected(request_id=envelope.id, envelope=envelope)


def replies(client: RaceClient, start: int = 0) -> list[Envelope]:
    return [e for e in client.received[start:] if e.t in REPLY_TYPES]


def check_answer(what: str, want: Expected, client: RaceClient, got: list[Envelope]) -> None:
    """``got``, the replies ``client`` received to ``what`` (none if it was closed), are
    what ``want`` says, and only what docs/protocol.md documents."""
    if want.close is not None:
        assert not got, f"{what} was answered {got} instead of closed {want.close}"
        assert (client.close_code, client.ws.close_reason) == (want.close, want.reason), what
        assert want.reason in CLOSE_REASONS[want.close], what
        return
    assert got, f"{what}: no reply, connection closed {client.close_code} {client.ws.close_reason}"
    reply = got[0]
    assert reply.id == want.request_id, f"{what}: reply {reply} does not echo the id"
    if want.code is not None:
        assert reply.t == "error" and reply.d["code"] == want.code, f"{what}: {reply}"
    if reply.t == "error":
        assert reply.d["code"] in ERROR_CODES, f"{what}: undocumented code in {reply}"
        # A bug, or a store that failed: neither is an answer to bad input.
        assert reply.d["code"] not in ("internal", "unavailable"), f"{what}: {reply}"
        message = reply.d["message"]
        assert isinstance(message, str) and message and "\n" not in message, what
        assert "Traceback" not in message, what


class Fuzzer:
    """Eve (or, ``spectating``, a spectator of the room): sends frames at the default
    pace, checks each answer, and after a close reconnects and resumes (or watches
    again). Its connections are all kept, for the leak check."""

    def __init__(self, url: str, client: RaceClient, *, spectating: bool = False) -> None:
        self.url = url
        self.connections = [client]
        self.room, self.token, self.racer = client.room, client.token, client.racer
        self.code = client.code
        self.spectating = spectating
        self.pacer = Pacer(SERVER_DEFAULT_PACE)
        self.log: list[tuple[bytes | str, str]] = []
        self.resume_replies = 0  # replies to this fuzzer's resumes (or watches)

    @property
    def client(self) -> RaceClient:
        return self.connections[-1]

    async def reconnect(self) -> None:
        client = await RaceClient.connect(self.url, pace=None)
        self.connections.append(client)
        await self.pacer.wait()
        if self.spectating:
            assert (await client.watch(code=self.code))["room"] == self.room
            self.resume_replies += 1
            return
        joined = await client.resume(room=self.room, token=self.token, since=None)
        assert joined["racer"] == self.racer
        # Past RESUME_BURST resumes in a row the server asks for a pause (``rate_limited``)
        # and the client sends the resume again: those refusals are the resume's replies.
        *waits, last = replies(client)
        assert last.t == "joined" and all(w.d.get("code") == "rate_limited" for w in waits)
        self.resume_replies += 1 + len(waits)

    async def send(self, frame: bytes | str) -> Envelope | None:
        """Send one frame; return its reply (None when the frame closed the connection)."""
        want = expected(frame)
        if want.envelope is not None and isinstance(
            parse_or_none(want.envelope), Leave
        ):  # a connection that leaves is no longer in the race this test watches
            return None
        if self.client.closed.done():
            await self.reconnect()
        client = self.client
        before = len(replies(client))
        await self.pacer.wait()
        await client.send_raw(frame)
        async with asyncio.timeout(20):
            while len(replies(client)) == before and not client.closed.done():
                await asyncio.sleep(0.005)
        got = replies(client)[before:]
        what = f"frame {frame[:80]!r} ({len(frame)} bytes)"
        if want.close is not None:
            await asyncio.wait_for(asyncio.shield(client.closed), 10)
        check_answer(what, want, client, got)
        if want.close is not None:
            self.log.append((frame, f"close {want.close}"))
            return None
        reply = got[0]
        self.log.append((frame, reply.t if reply.t != "error" else str(reply.d["code"])))
        return reply

    def check_one_reply_each(self) -> None:
        """Every frame that was not closed got exactly one reply (resumes aside)."""
        answered = sum(1 for _, outcome in self.log if not outcome.startswith("close"))
        resumes = self.resume_replies
        got = sum(len(replies(c)) for c in self.connections)
        setup = 1 if self.spectating else 2  # its watch; Eve's join and ready
        assert got == answered + resumes + setup, (got, answered, resumes)


def parse_or_none(envelope: Envelope) -> object:
    try:
        return parse_client_message(envelope)
    except BadMessage:
        return None


# ----------------------------------------------------------------- the race
async def play(client: RaceClient, moves: list[str]) -> list[int]:
    """Play ``moves`` in turn at the client's pace; the seqs of the ``moved`` replies."""
    seqs = []
    for move in moves:
        seqs.append((await client.move(move))["seq"])
    return seqs


async def race_with(
    url: str, hostile: Any, ann_moves: int = 24, bob_moves: int = 10, spectating: bool = False
) -> tuple[Fuzzer, dict[str, Any]]:
    """A race of Ann, Bob and Eve, watched; ``hostile(fuzzer)`` runs as Eve (or as a
    second spectator) while Ann and Bob play. Checks that the race did not notice, and
    every frame for leaks."""
    ann, bob, eve = await racing(url, names=("Ann", "Bob", "Eve"), deals="random")
    watcher = await RaceClient.connect(url)
    watching = await watcher.watch(code=ann.code)
    if spectating:
        spy = await RaceClient.connect(url, pace=None)
        await spy.watch(code=ann.code)
        fuzzer = Fuzzer(url, spy, spectating=True)
    else:
        fuzzer = Fuzzer(url, eve)
    moves = winning_moves(SOLVABLE_SECRET)
    ann_seqs, bob_seqs, _ = await asyncio.gather(
        play(ann, moves[:ann_moves]), play(bob, moves[:bob_moves]), hostile(fuzzer)
    )
    assert ann_seqs == list(range(ann_moves)) and bob_seqs == list(range(bob_moves))
    # Eve resigns first (connected: her last connection sees the race end, not a
    # finished room's snapshot), then the others.
    if fuzzer.client.closed.done():
        await fuzzer.reconnect()
    await fuzzer.pacer.wait()
    try:
        await (eve if spectating else fuzzer.client).resign()
    except ServerError as refused:  # the fuzz resigned for her already
        assert refused.code == "wrong_phase", refused
    for client in (ann, bob):
        await client.resign()
    over = await watcher.next_event("race_over", timeout=20)
    result = over.d
    logs = {s["racer"]: list(s["log"]) for s in result["standings"]}
    # Nothing lost, nothing added, in order: the logs are exactly the moves played.
    assert logs[ann.racer] == moves[:ann_moves] and logs[bob.racer] == moves[:bob_moves]
    # The spectator's stream is gap-free and shows each racer's moves in order.
    versions = [e.v for e in watcher.received if e.v is not None]
    first = versions[0]
    assert versions == list(range(first, first + len(versions))), "a gap in the events"
    for racer in (ann.racer, bob.racer):
        counts = [
            e.d["moves"] for e in watcher.received if e.t == "progress" and e.d["racer"] == racer
        ]
        assert counts == sorted(counts) and counts[-1] == len(logs[racer]), (racer, counts)
    settings_ = watching["snapshot"]["settings"]
    assert watcher.close_code is None, "the race's other connections survive"
    for client in (ann, bob):
        assert client.close_code is None, "the race's other connections survive"
        check_no_leaks(client.received, result, settings_, client.racer)
    check_no_leaks(watcher.received, result, settings_)
    for client in fuzzer.connections:
        check_no_leaks(client.received, result, settings_, fuzzer.racer)
    if spectating:
        check_no_leaks(eve.received, result, settings_, eve.racer)
    for client in {ann, bob, eve, watcher, *fuzzer.connections}:
        await client.close()
    return fuzzer, dict(result)


@BACKENDS
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sent=st.lists(frames(), min_size=30, max_size=30), spectating=st.booleans())
# More closes than a racer's burst of resumes: the last resumes are paced by the server
# (rate_limited, then sent again), and each frame still gets its one answer.
@example(
    sent=["text"] * (RESUME_BURST + 2) + [encode(Envelope("ping", id=1))] * 8, spectating=False
)
async def test_generated_bad_frames_are_each_answered_as_documented_and_the_race_goes_on(
    cluster: Cluster, sent: list[bytes | str], spectating: bool
) -> None:
    server = cluster.servers[0] if cluster.servers else await cluster.node(rate=None)

    async def fuzz(fuzzer: Fuzzer) -> None:
        for frame in sent:
            await fuzzer.send(frame)
        fuzzer.check_one_reply_each()

    await race_with(server.url, fuzz, spectating=spectating)


def test_the_limit_frames_are_the_sizes_they_claim() -> None:
    assert expected(AT_LIMIT).code == "bad_message"  # read, then refused for its fields
    assert (expected(OVER_LIMIT).close, expected(OVER_LIMIT).reason) == (1009, "too_large")
    assert (expected(_nested(4)).code, expected(_nested(5)).close) == ("bad_message", 1009)
    assert expected("text").close == 1003


@BACKENDS
async def test_the_frames_at_the_edges_are_answered_as_documented(cluster: Cluster) -> None:
    server = await cluster.node(rate=None)
    edges: list[bytes | str] = [
        AT_LIMIT,
        OVER_LIMIT,
        "{}",
        b"",
        b"\xc1",
        pack([1, 2]),
        pack({"t": "ping", "id": 2**31}),
        pack({"t": "ping", "id": 1, "d": {"x": "x" * 257}}),
        _nested(5),
        pack({"t": "ping", "id": 1, "v": 1}),
        pack({"t": "m\u00f6v\u00e9\u2603", "id": 1}),
        pack({"t": "move", "id": 1, "d": {"seq": 2**64 - 1, "move": "D"}}),
        pack({"t": "move", "id": 1, "d": {"seq": 0, "move": "\u0661:\u0661>\u0662"}}),
        pack({"t": "create", "id": 1, "d": {"variant": "yukon", "name": "E", "maxracers": 2}}),
    ]

    async def fuzz(fuzzer: Fuzzer) -> None:
        outcomes = [await fuzzer.send(frame) for frame in edges]
        assert [o.t if o else None for o in outcomes].count(None) == 8
        fuzzer.check_one_reply_each()

    await race_with(server.url, fuzz)


# ----------------------------------------------------------------- hostile orders
async def expect_refusal(client: RaceClient, want: str, t: str, **d: Any) -> None:
    with pytest.raises(ServerError) as refused:
        await client.request(t, **d)
    assert refused.value.code == want, (t, d, refused.value)


@BACKENDS
async def test_requests_out_of_order_are_refused_and_change_nothing(cluster: Cluster) -> None:
    server = await cluster.node(rate=None)
    url = server.url
    # A racer who left the lobby: its token is stale from then on.
    host = await RaceClient.connect(url)
    await host.create("yukon", "Hal")
    gone = await RaceClient.connect(url)
    await gone.join(host.code or "", "Gus")
    stale = (gone.room, gone.token)
    await gone.leave()

    async def hostile(fuzzer: Fuzzer) -> None:
        eve = fuzzer.client
        idle = await RaceClient.connect(url)
        # Before joining: a racer's requests are not_racer; leave is ok (nothing to do).
        for t, d in [("move", {"seq": 0, "move": "D"}), ("resign", {}), ("ready", {"ready": True})]:
            await expect_refusal(idle, "not_racer", t, **d)
        for t in ("start", "rematch"):
            await expect_refusal(idle, "not_racer", t)
        await idle.leave()
        # A stale token, another room's token, a token of no racer, an unknown room.
        await expect_refusal(idle, "bad_token", "resume", room=stale[0], token=stale[1])
        await expect_refusal(idle, "bad_token", "resume", room=fuzzer.room, token=stale[1])
        await expect_refusal(idle, "bad_token", "resume", room=fuzzer.room, token="A" * 32)
        await expect_refusal(idle, "unknown_room", "resume", room="r_nosuch", token="A" * 32)
        # Joining twice, or anything else that enters a room, while a racer.
        await expect_refusal(eve, "already_in_room", "join", code=host.code, name="Eve")
        await expect_refusal(eve, "already_in_room", "create", variant="yukon", name="Eve")
        await expect_refusal(eve, "already_in_room", "quick", variant="yukon", name="Eve")
        await expect_refusal(eve, "already_in_room", "watch", code=host.code)
        await expect_refusal(eve, "already_in_room", "resume", room=stale[0], token=stale[1])
        # Lobby requests in a race (Eve is not the host: only the host's start is
        # taken for its retry, and answered ok).
        await expect_refusal(eve, "wrong_phase", "ready", ready=True)
        await expect_refusal(eve, "wrong_phase", "start")
        await expect_refusal(eve, "wrong_phase", "rematch")
        # Moves from the future and the past.
        await expect_refusal(eve, "bad_seq", "move", seq=3, move="7>F")
        first = winning_moves(SOLVABLE_SECRET)[0]
        assert (await eve.request("move", seq=0, move=first))["seq"] == 0
        await expect_refusal(eve, "bad_seq", "move", seq=0, move="D")
        # Resuming herself on the same connection resynchronises it.
        again = await eve.request("resume", room=fuzzer.room, token=fuzzer.token, since=None)
        assert again["snapshot"]["you"]["next_seq"] == 1
        # Watch, then act: a spectator cannot move, resume, join or watch again.
        await idle.watch(code=host.code)
        await expect_refusal(idle, "spectator_cannot_act", "move", seq=1, move="D")
        await expect_refusal(idle, "spectator_cannot_act", "resign")
        await expect_refusal(
            idle, "already_in_room", "resume", room=fuzzer.room, token=fuzzer.token
        )
        await expect_refusal(idle, "already_in_room", "join", code=host.code, name="Ivy")
        await idle.leave()
        await expect_refusal(idle, "not_racer", "move", seq=1, move="D")
        # Eve again from a second connection: the first is replaced (1000 replaced).
        await fuzzer.reconnect()
        await asyncio.wait_for(asyncio.shield(eve.closed), 10)
        assert (eve.close_code, eve.ws.close_reason) == (1000, "replaced")
        # After resigning, no more moves; a second resign is its retry: ok, and the
        # racer stays resigned (a stored resign is not made twice).
        await fuzzer.client.resign()
        await expect_refusal(fuzzer.client, "wrong_phase", "move", seq=1, move="D")
        await fuzzer.client.resign()
        await expect_refusal(fuzzer.client, "wrong_phase", "move", seq=1, move="D")
        await idle.close()

    await race_with(url, hostile)
    await host.close()
    await gone.close()


# ----------------------------------------------------------------- a flood
@BACKENDS
async def test_a_racer_flooding_moves_is_closed_1008_and_loses_none(cluster: Cluster) -> None:
    """Eve pipelines her moves, each after nine pings, as fast as the socket takes them
    (the server reads a connection's frames one at a time, so cheap pings make sure the
    bucket empties however slowly the store takes moves). She is closed 1008
    ``rate_limited`` — only her — and every frame read before that was answered, in
    order; the moves among them are exactly the ones stored."""
    server = await cluster.node(rate=None)
    moves = winning_moves(SOLVABLE_SECRET)
    pings = 9

    async def flood(fuzzer: Fuzzer) -> None:
        eve = fuzzer.client
        sent: list[Envelope] = []
        for i in range(100 * (pings + 1)):
            seq, kind = divmod(i, pings + 1)
            if kind == pings:
                frame = Envelope("move", id=i + 1, d={"seq": seq, "move": moves[seq]})
            else:
                frame = Envelope("ping", id=i + 1)
            try:
                await eve.send_raw(encode(frame))
            except Exception:
                break
            sent.append(frame)
        await asyncio.wait_for(asyncio.shield(eve.closed), 10)
        assert (eve.close_code, eve.ws.close_reason) == (1008, "rate_limited")
        answered = replies(eve)[2:]  # after her join and ready
        assert 40 <= len(answered) < len(sent)
        for frame, reply in zip(sent, answered, strict=False):
            assert reply.id == frame.id, "a frame was answered out of order, or not at all"
            if frame.t == "move":
                assert (reply.t, reply.d["seq"]) == ("moved", frame.d["seq"]), reply
            else:
                assert reply.t == "pong", reply
        stored = sum(1 for r in answered if r.t == "moved")
        # Reconnected, she finds exactly those moves stored, and plays on.
        await fuzzer.reconnect()
        snapshot = fuzzer.client.snapshot
        assert snapshot is not None and snapshot["you"]["next_seq"] == stored
        fuzzer.client.seq = stored
        await fuzzer.pacer.wait()
        await fuzzer.client.move(moves[stored])

    _, result = await race_with(server.url, flood)
    logs = [s["log"] for s in result["standings"] if s["name"] == "Eve"]
    assert logs == [moves[: len(logs[0])]] and logs[0], "Eve's log is not her accepted moves"
