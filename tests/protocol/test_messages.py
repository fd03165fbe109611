"""messages.py: every request round-trips and every refusal is precise; every server
message builds, encodes, decodes and refuses what the contract forbids."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from solrace.protocol import messages as m
from solrace.protocol.codec import decode, encode
from solrace.protocol.envelope import Envelope
from solrace.protocol.errors import BadMessage, ErrorCode, MalformedFrame, ProtocolError
from solrace.protocol.fairness import race_id
from solrace.protocol.limits import (
    MAX_LOG_LEN,
    MAX_MOVE_LEN,
    MAX_NAME_LEN,
    MAX_RACERS,
    MAX_TIME_LIMIT_S,
    SERVER_FRAME_LIMITS,
)
from solrace.protocol.views import Phase, RaceResult
from solrace.rules import VARIANTS, NotationError, deal, parse_move

from . import samples

DOC = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text(encoding="utf-8")


def wire(t: str, d: dict[str, Any] | None = None, request_id: int | None = 1) -> Envelope:
    """What the server gets after decoding a client frame."""
    return decode(encode(Envelope(t, id=request_id, d=d or {})))


def refusal(t: str, d: dict[str, Any], request_id: int | None = 1) -> BadMessage:
    with pytest.raises(BadMessage) as info:
        m.parse_client_message(wire(t, d, request_id))
    assert info.value.close_code is None
    return info.value


# ====================================================================== requests
EXAMPLES: list[m.ClientMessage] = [
    m.ListRooms(),
    m.ListRooms(variant="yukon"),
    m.FetchResult(race="r_8f3k2.0123abcd"),
    m.FetchResult(race="r_8f3k2.nocommit"),
    m.CreateRoom(variant="yukon", name="Ann"),
    m.CreateRoom(
        variant="klondike",
        name="Ann",
        options={"draw": 3, "max_passes": None, "thoughtful": True, "scoring": "vegas"},
        max_racers=8,
        time_limit_s=60,
        private=True,
        spectator_delay_s=600,
    ),
    m.CreateRoom(variant="yukon", name="Ann", token=samples.TOKEN),
    m.JoinRoom(code="K7QX2M", name="Bob"),
    m.JoinRoom(code="K7QX2M", name="Bob", token=samples.TOKEN),
    m.QuickRace(variant="double_yukon", name="Cy 🃏"),
    m.QuickRace(variant="yukon", name="Cy", token=samples.TOKEN),
    m.Resume(room="r_8f3k2", token=samples.TOKEN, since=41),
    m.Resume(room="r_8f3k2", token=samples.TOKEN),
    m.Resume(room=None, token=samples.TOKEN),  # the seat its proposed token took
    m.Resume(room="r_8f3k2", token=samples.TOKEN, since=95, revealed=m.Revealed(0, "0" * 64)),
    m.Resume(room="r_8f3k2", token=samples.TOKEN, revealed=m.Revealed(2**64 - 1, "a1" * 32)),
    m.Watch(room="r_8f3k2"),
    m.Watch(code="K7QX2M", since=0),
    m.Watch(code="K7QX2M", since=95, revealed=m.Revealed(1234567890123, "3b" * 32)),
    m.SetReady(ready=True),
    m.SetReady(ready=False),
    m.StartRace(),
    m.PlayMove(seq=0, move="4:3>1"),
    m.PlayMove(seq=12, move="undo"),
    m.Resign(),
    m.Leave(),
    m.Rematch(),
    m.Ping(),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=repr)
def test_every_request_round_trips(message: m.ClientMessage) -> None:
    envelope = decode(encode(m.request(message, 7)))
    assert envelope.id == 7 and envelope.t == message.TYPE
    assert m.parse_client_message(envelope) == message


def test_every_request_type_has_an_example_and_a_section_in_the_docs() -> None:
    assert {msg.TYPE for msg in EXAMPLES} == set(m.CLIENT_MESSAGES)
    for t in m.CLIENT_MESSAGES:
        assert f"### `{t}`" in DOC, t


def test_request_id_is_optional() -> None:
    assert m.parse_client_message(wire("ping", request_id=None)) == m.Ping()


def test_create_defaults() -> None:
    msg = m.parse_client_message(wire("create", {"variant": "yukon", "name": "Ann"}))
    assert msg == m.CreateRoom(
        variant="yukon",
        name="Ann",
        options={},
        max_racers=4,
        time_limit_s=900,
        private=False,
        spectator_delay_s=0,
    )


def test_nil_means_absent() -> None:
    d = {"variant": "yukon", "name": "Ann", "options": None, "max_racers": None, "private": None}
    assert m.parse_client_message(wire("create", d)) == m.CreateRoom(variant="yukon", name="Ann")
    assert m.parse_client_message(wire("list", {"variant": None})) == m.ListRooms()


def test_a_create_carries_every_max_passes_the_engine_takes() -> None:
    """The engine's bound (rules MAX_PASSES) is no more than a room option's integer: a
    value the client's engine takes is not then refused by the server."""
    from solrace.rules.options import MAX_PASSES

    d = {"variant": "klondike", "name": "Ann", "options": {"max_passes": MAX_PASSES}}
    assert m.parse_client_message(wire("create", d)) == m.CreateRoom(
        variant="klondike", name="Ann", options={"max_passes": MAX_PASSES}
    )


# ---------------------------------------------------------------- refusals
def test_unknown_type() -> None:
    err = refusal("teleport", {}, request_id=4)
    assert err.code == ErrorCode.UNKNOWN_TYPE and err.request_id == 4
    # Server → client types are not requests either.
    assert refusal("moved", {}).code == ErrorCode.UNKNOWN_TYPE


def test_requests_do_not_carry_versions() -> None:
    envelope = decode(encode(Envelope("ping", id=3, v=5)))
    with pytest.raises(BadMessage) as info:
        m.parse_client_message(envelope)
    assert info.value.code == ErrorCode.BAD_MESSAGE and info.value.request_id == 3


REQUIRED: list[tuple[str, dict[str, Any]]] = [
    ("create", {"variant": "yukon", "name": "Ann"}),
    ("join", {"code": "K7QX2M", "name": "Bob"}),
    ("quick", {"variant": "yukon", "name": "Cy"}),
    ("resume", {"token": samples.TOKEN}),  # room: optional (a proposed token alone)
    ("ready", {"ready": True}),
    ("move", {"seq": 0, "move": "D"}),
]


@pytest.mark.parametrize(
    ("t", "d", "missing"), [(t, d, k) for t, d in REQUIRED for k in d], ids=str
)
def test_missing_required_field(t: str, d: dict[str, Any], missing: str) -> None:
    for without in ({k: v for k, v in d.items() if k != missing}, {**d, missing: None}):
        err = refusal(t, without, request_id=9)
        assert err.code == ErrorCode.BAD_MESSAGE
        assert err.field == missing and err.request_id == 9
        assert err.message == f"{t}.{missing}: missing required field"


@pytest.mark.parametrize(
    ("t", "d", "field", "expected"),
    [
        ("create", {"variant": 5, "name": "A"}, "variant", "a string"),
        ("create", {"variant": "yukon", "name": ["A"]}, "name", "a string"),
        ("create", {"variant": "yukon", "name": "A", "options": []}, "options", "a map"),
        ("create", {"variant": "yukon", "name": "A", "max_racers": "4"}, "max_racers", "integer"),
        ("create", {"variant": "yukon", "name": "A", "max_racers": 4.0}, "max_racers", "integer"),
        ("create", {"variant": "yukon", "name": "A", "max_racers": True}, "max_racers", "integer"),
        (
            "create",
            {"variant": "yukon", "name": "A", "time_limit_s": 1.5},
            "time_limit_s",
            "integer",
        ),
        ("create", {"variant": "yukon", "name": "A", "private": 1}, "private", "a boolean"),
        ("create", {"variant": "yukon", "name": "A", "private": "yes"}, "private", "a boolean"),
        ("join", {"code": 123456, "name": "A"}, "code", "a string"),
        ("resume", {"room": "r", "token": samples.TOKEN, "since": "41"}, "since", "integer"),
        ("resume", {"room": ["r"], "token": samples.TOKEN}, "room", "a string"),
        ("watch", {"room": "r", "since": False}, "since", "integer"),
        ("ready", {"ready": 1}, "ready", "a boolean"),
        ("ready", {"ready": "true"}, "ready", "a boolean"),
        ("move", {"seq": "0", "move": "D"}, "seq", "integer"),
        ("move", {"seq": 0.0, "move": "D"}, "seq", "integer"),
        ("move", {"seq": 0, "move": 5}, "move", "a string"),
    ],
)
def test_wrong_type(t: str, d: dict[str, Any], field: str, expected: str) -> None:
    err = refusal(t, d)
    assert err.code == ErrorCode.BAD_MESSAGE and err.field == field
    assert err.message.startswith(f"{t}.{field}: must be ") and expected in err.message
    assert "got " in err.message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_racers", 1),
        ("max_racers", 9),
        ("max_racers", -4),
        ("time_limit_s", 59),
        ("time_limit_s", 7201),
        ("spectator_delay_s", -1),
        ("spectator_delay_s", 601),
    ],
)
def test_out_of_range(field: str, value: int) -> None:
    err = refusal("create", {"variant": "yukon", "name": "A", field: value})
    assert err.code == ErrorCode.BAD_MESSAGE and err.field == field
    assert f"got {value}" in err.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_racers", 2), ("max_racers", 8), ("time_limit_s", 7200), ("spectator_delay_s", 0)],
)
def test_range_bounds_are_inclusive(field: str, value: int) -> None:
    msg = m.parse_client_message(wire("create", {"variant": "yukon", "name": "A", field: value}))
    assert getattr(msg, field) == value


@pytest.mark.parametrize(
    ("t", "d", "field"),
    [
        ("create", {"variant": "yukon", "name": "A", "maxracers": 4}, "maxracers"),
        ("ping", {"x": 1}, "x"),
        ("start", {"now": True}, "now"),
        ("move", {"seq": 0, "move": "D", "board": {}}, "board"),
        ("list", {"variant": "yukon", "limit": 5}, "limit"),
    ],
)
def test_unknown_fields_are_refused(t: str, d: dict[str, Any], field: str) -> None:
    err = refusal(t, d)
    assert err.code == ErrorCode.BAD_MESSAGE and err.field == field
    assert "unknown field" in err.message


@pytest.mark.parametrize("variant", ["", "Yukon", "yukon!", "1yukon", "y" * 33, "yu kon", "yukón"])
def test_bad_variant_ids(variant: str) -> None:
    assert refusal("quick", {"variant": variant, "name": "A"}).field == "variant"


def test_every_engine_variant_is_a_valid_id() -> None:
    for variant in VARIANTS:
        assert m.parse_client_message(wire("quick", {"variant": variant, "name": "A"}))


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"Draw": 3}, "options.Draw"),
        ({"draw": 1.5}, "options.draw"),
        ({"draw": [3]}, "options.draw"),
        ({"draw": {"n": 3}}, "options.draw"),
        ({"draw": 2**31}, "options.draw"),
        ({"scoring": "v" * 33}, "options.scoring"),
        ({f"o{i}": 1 for i in range(17)}, "options"),
    ],
)
def test_bad_options(options: dict[str, Any], field: str) -> None:
    err = refusal("create", {"variant": "klondike", "name": "A", "options": options})
    assert err.code == ErrorCode.BAD_MESSAGE and err.field == field


class TestNames:
    def parse(self, name: Any) -> str:
        msg = m.parse_client_message(wire("join", {"code": "K7QX2M", "name": name}))
        assert isinstance(msg, m.JoinRoom)
        return msg.name

    def test_trimmed_and_collapsed(self) -> None:
        assert self.parse("  Ann   Lee \t") == "Ann Lee"

    def test_unicode_and_emoji_sequences(self) -> None:
        assert self.parse("Zoë 👩‍💻") == "Zoë 👩‍💻"  # contains U+200D

    @pytest.mark.parametrize(
        "name",
        [
            *("", "   ", "x" * 25, "a\x00b", "a\x1bb", "evil\u202eusr", "a\u200bb", "\ufeffa"),
            # control characters str.split() would have made spaces
            *("a\x1cb", "a\x1db", "a\x1eb", "a\x1fb"),
            # nothing visible (a fuzzing audit joined as each): a Hangul filler, the
            # braille blank, combining marks alone, a lone variation selector, a ZWJ
            *("\u3164", "\u115f", "\uffa0", "\u2800", "\u0336\u0336", "\ufe0f", "\u200d"),
        ],
    )
    def test_refused(self, name: str) -> None:
        err = refusal("join", {"code": "K7QX2M", "name": name})
        assert err.code == ErrorCode.BAD_MESSAGE and err.field == "name"

    def test_length_is_counted_after_trimming(self) -> None:
        assert self.parse(" " * 100 + "x" * 24 + " ") == "x" * 24


class TestCodes:
    @pytest.mark.parametrize("typed", [" k7qx2m ", "k7q x2m", "K7Q-X2M", "k7q - x2m"])
    def test_humans_may_type_codes_in_any_case_with_spaces_and_dashes(self, typed: str) -> None:
        msg = m.parse_client_message(wire("join", {"code": typed, "name": "A"}))
        assert msg == m.JoinRoom(code="K7QX2M", name="A")

    @pytest.mark.parametrize("code", ["", "  ", "-", "K7_QX2", "K7.QX2", "K" * 17, "ÄBC"])
    def test_refused(self, code: str) -> None:
        assert refusal("join", {"code": code, "name": "A"}).field == "code"


@pytest.mark.parametrize(
    ("d", "field"),
    [
        ({"room": "r/1", "token": samples.TOKEN}, "room"),
        ({"room": "r" * 65, "token": samples.TOKEN}, "room"),
        ({"room": "r_1", "token": "short"}, "token"),
        ({"room": "r_1", "token": "x" * 15 + "!"}, "token"),
        ({"room": "r_1", "token": samples.TOKEN, "since": -1}, "since"),
    ],
)
def test_bad_resume(d: dict[str, Any], field: str) -> None:
    assert refusal("resume", d).field == field


_SALT = "3b" * 32
#: A ``revealed`` that is not a (seed, salt) pair, each refused with a one-line
#: ``bad_message`` naming the field, and no part of the value echoed at length.
BAD_REVEALED: list[object] = [
    "3b" * 32,
    [1, _SALT],
    {"seed": 1},
    {"salt": _SALT},
    {"seed": "1", "salt": _SALT},
    {"seed": 1.0, "salt": _SALT},
    {"seed": True, "salt": _SALT},
    {"seed": -1, "salt": _SALT},
    {"seed": 2**64, "salt": _SALT},
    {"seed": 1, "salt": _SALT.upper()},
    {"seed": 1, "salt": _SALT[:-1]},
    {"seed": 1, "salt": _SALT + "0"},
    {"seed": 1, "salt": bytes(32)},
    {"seed": 1, "salt": "f" * 100_000},
    {"seed": 1, "salt": _SALT, "round": 1},
    {"seed": 1, "salt": _SALT, "x" * 10_000: 1},
    {f"k{i}": i for i in range(5_000)},
]


@pytest.mark.parametrize("value", BAD_REVEALED, ids=lambda v: repr(v)[:40])
@pytest.mark.parametrize(
    "t,d",
    [("resume", {"room": "r_1", "token": samples.TOKEN}), ("watch", {"code": "K7QX2M"})],
    ids=["resume", "watch"],
)
def test_bad_revealed(t: str, d: dict[str, Any], value: object) -> None:
    """Checked on the decoded map itself: some of these never get past the codec
    (a frame over the size limit, a binary value, an integer msgpack cannot carry),
    and the validator must not depend on that."""
    with pytest.raises(BadMessage) as info:
        m.CLIENT_MESSAGES[t]({**d, "revealed": value})
    err = info.value
    assert err.code == ErrorCode.BAD_MESSAGE and err.field == "revealed"
    assert err.message.startswith(f"{t}.revealed: ") and "\n" not in err.message
    assert len(err.message) < 120, err.message


def test_revealed_nil_means_absent() -> None:
    d = {"room": "r_1", "token": samples.TOKEN, "revealed": None}
    assert m.parse_client_message(wire("resume", d)) == m.Resume(room="r_1", token=samples.TOKEN)


@pytest.mark.parametrize(
    "d", [{}, {"room": "r_1", "code": "K7QX2M"}, {"since": 3}, {"room": None, "code": None}]
)
def test_watch_needs_exactly_one_of_room_and_code(d: dict[str, Any]) -> None:
    err = refusal("watch", d)
    assert err.code == ErrorCode.BAD_MESSAGE and "exactly one" in err.message


class TestMoves:
    @pytest.mark.parametrize(
        "move",
        [
            "1:1>2",
            "10:13>1",
            "3:4>6",
            "2>F",
            "W>5",
            "W>F",
            "FH>4",
            "FS2>10",
            "D",
            "R",
            "U3",
            "undo",
        ],
    )
    def test_canonical_shapes_pass(self, move: str) -> None:
        msg = m.parse_client_message(wire("move", {"seq": 5, "move": move}))
        assert msg == m.PlayMove(seq=5, move=move)

    @pytest.mark.parametrize(
        "move",
        ["", "d", "3:4 > 6", "03:4>6", "3:0>6", "0>F", "W>0", "F>4", "FX>4", "FH3>4", "U",
         "Undo", "UNDO", "3:4>6 ", "3>f", "1:1>2;D", "x" * 17, "W>F\n"],
    )  # fmt: skip
    def test_other_strings_are_bad_notation(self, move: str) -> None:
        err = refusal("move", {"seq": 5, "move": move}, request_id=8)
        assert err.code == ErrorCode.BAD_NOTATION
        assert (err.field, err.seq, err.request_id) == ("move", 5, 8)

    @pytest.mark.parametrize("seq", [-1, 2**31])
    def test_seq_range(self, seq: int) -> None:
        assert refusal("move", {"seq": seq, "move": "D"}).field == "seq"

    def test_every_move_the_engine_generates_passes_the_shape_filter(self) -> None:
        """The filter must never refuse a legal move: play random games of every
        variant and check every legal move's notation at every step."""
        rng = random.Random(7)
        checked = 0
        for variant in VARIANTS:
            for seed in range(3):
                board = deal(variant, seed)
                for _ in range(60):
                    moves = board.legal_moves()
                    if not moves:
                        break
                    for move in moves:
                        assert m.PlayMove.from_data({"seq": 0, "move": str(move)})
                        checked += 1
                    board.play(rng.choice(moves))
        assert checked > 1000


def test_parse_attaches_the_request_id_to_every_refusal() -> None:
    for request_id in (None, 0, 12):
        assert refusal("ready", {}, request_id).request_id == request_id


@settings(max_examples=500, deadline=None)
@given(
    t=st.sampled_from(sorted(m.CLIENT_MESSAGES)) | st.text(max_size=8).filter(bool),
    d=st.dictionaries(
        st.sampled_from(["variant", "name", "code", "room", "token", "since", "seq", "move",
                         "ready", "options", "max_racers", "private", "x"]),
        st.none() | st.booleans() | st.integers(-3, 2**33) | st.floats() | st.text(max_size=30)
        | st.lists(st.integers(-(2**63), 2**63), max_size=3)
        | st.dictionaries(st.text(max_size=5), st.integers(-99, 99) | st.text(max_size=5),
                          max_size=3),
    ),
)  # fmt: skip
def test_parse_raises_only_bad_message(t: str, d: dict[str, Any]) -> None:
    try:
        envelope = decode(encode(Envelope(t[:32], id=1, d=d)))
        message = m.parse_client_message(envelope)
    except (BadMessage, MalformedFrame):
        return
    assert m.parse_client_message(decode(encode(m.request(message, 1)))) == message


# ====================================================================== server messages
def build_all() -> dict[str, Envelope]:
    """One of every server → client message, built as the server would."""
    snap = samples.snapshot(Phase.RACING, racer_id=1)
    return {
        "rooms": m.rooms_reply(1, [samples.room_summary()]),
        "joined": m.joined_reply(
            2, room="r_8f3k2", code="K7QX2M", racer=1, token=samples.TOKEN, snapshot=snap, replay=2
        ),
        "watching": m.watching_reply(3, room="r_8f3k2", snapshot=samples.snapshot(racer_id=None)),
        "moved": m.moved_reply(
            4, seq=3, board=samples.board_view(), status="playing", moves=4, score=15
        ),
        "pong": m.pong_reply(5, now_ms=1_764_445_200_123),
        "archived": m.archived_reply(
            8,
            race=race_id("r_8f3k2", samples.COMMITMENT),
            room="r_8f3k2",
            settings=samples.settings(),
            deal={"certified": True, "moves": 97, "difficulty": "easy"},
            result=samples.result(),
        ),
        "ok": m.ok_reply(6),
        "error": m.error_reply(BadMessage(ErrorCode.BAD_SEQ, seq=3, expected=5, request_id=7)),
        "racer_joined": m.racer_joined_event(2, samples.racer(2, "Bob")),
        "racer_left": m.racer_left_event(3, racer=2, host=1),
        "ready_changed": m.ready_changed_event(4, racer=1, ready=True),
        "countdown": m.countdown_event(
            5, start_at_ms=1_764_445_205_000, commitment=samples.COMMITMENT
        ),
        "started": m.started_event(
            6,
            start_at_ms=1_764_445_205_000,
            ends_at_ms=1_764_446_105_000,
            commitment=samples.COMMITMENT,
        ),
        "progress": m.progress_event(
            7,
            {
                "racer": 1,
                "foundation": 3,
                "moves": 9,
                "face_down": 17,
                "status": "playing",
                "place": None,
            },
        ),
        "finished": m.finished_event(
            8, racer=1, place=1, elapsed_ms=312_456, foundation=52, moves=141
        ),
        "race_over": m.race_over_event(9, samples.result()),
        "room_reset": m.room_reset_event(10, host=1, racers=[samples.racer(1), samples.racer(2)]),
        "presence": m.presence_event(11, racer=2, online=False),
        "deal_chosen": m.deal_chosen_event(12, certified=True, moves=97, difficulty="easy"),
        "board": m.board_notice(
            racer=2, at_ms=1_764_445_230_000, view=samples.board_view(owner=False), owner=False
        ),
        "resync": m.resync_notice(
            reason="the server lost its last changes to this room",
            lost_events=3,
            snapshot=samples.snapshot(racer_id=1),
        ),
    }


def test_one_builder_per_server_message_type() -> None:
    built = build_all()
    assert set(built) == m.REPLY_TYPES | m.EVENT_TYPES | m.NOTICE_TYPES
    for t, envelope in built.items():
        assert envelope.t == t


@pytest.mark.parametrize("t", sorted(m.REPLY_TYPES | m.EVENT_TYPES | m.NOTICE_TYPES))
def test_server_messages_round_trip_and_are_documented(t: str) -> None:
    envelope = build_all()[t]
    assert decode(encode(envelope), limits=SERVER_FRAME_LIMITS) == envelope
    assert f"`{t}`" in DOC
    if t in m.REPLY_TYPES:
        assert envelope.id is not None and envelope.v is None
    elif t in m.EVENT_TYPES:
        assert envelope.v is not None and envelope.id is None
    else:
        assert envelope.v is None and envelope.id is None


def test_room_event_builds_every_event_type_from_its_stored_data() -> None:
    """The server stores events as {t, d}; room_event must rebuild each exactly."""
    built = build_all()
    for t in m.EVENT_TYPES:
        original = built[t]
        assert original.v is not None
        assert m.room_event(t, original.v, dict(original.d)) == original


def test_room_event_refuses_unknown_types_and_leaks() -> None:
    with pytest.raises(ValueError):
        m.room_event("secret_dump", 1, {})
    with pytest.raises((ValueError, TypeError)):
        m.room_event("countdown", 1, {"start_at_ms": 1, "commitment": "x", "seed": 42})


def test_every_error_code_is_documented_with_its_default_message() -> None:
    for code in ErrorCode:
        assert f"| `{code.value}` | {code.message} |" in DOC, code


def test_joined_is_the_only_message_with_a_token() -> None:
    for t, envelope in build_all().items():
        assert (samples.TOKEN.encode() in encode(envelope)) == (t == "joined"), t


def test_only_race_over_and_an_archived_result_reveal_the_seed_and_salt() -> None:
    for t, envelope in build_all().items():
        reveals = t in ("race_over", "archived")
        assert (samples.SALT.encode() in encode(envelope)) == reveals, t
        result: Any = envelope.d.get("result", envelope.d)
        assert ("seed" in result) == reveals, t


def test_result_names_a_race_id_and_nothing_else() -> None:
    """A race id is ``<room>.<8 hex digits>`` (or ``.nocommit``): no path, no other
    case, nothing after it (the client uses it as a file name)."""
    for race in ("r_x", "r_x.0123ABCD", "../x.0123abcd", "r_x.0123abcd.json", "r_x.012345678"):
        err = refusal("result", {"race": race})
        assert err.code == ErrorCode.BAD_MESSAGE and err.field == "race", race
    assert refusal("result", {}).field == "race"
    assert refusal("result", {"race": "r_x.0123abcd", "room": "r_x"}).field == "room"


def test_archived_must_be_the_rooms_race_of_its_result() -> None:
    args: dict[str, Any] = {
        "room": "r_8f3k2",
        "settings": samples.settings(),
        "deal": None,
        "result": samples.result(),
    }
    assert (
        m.archived_reply(1, race=race_id("r_8f3k2", samples.COMMITMENT), **args).d["deal"] is None
    )
    for race in (race_id("r_other", samples.COMMITMENT), "r_8f3k2.00000000", "r_8f3k2"):
        with pytest.raises(ValueError):
            m.archived_reply(1, race=race, **args)


def test_error_reply_fields() -> None:
    env = m.error_reply(BadMessage(ErrorCode.ILLEGAL_MOVE, "7H cannot go on 8H", seq=3), 8)
    assert env == Envelope(
        "error", id=8, d={"code": "illegal_move", "message": "7H cannot go on 8H", "seq": 3}
    )
    env = m.error_reply(BadMessage(ErrorCode.UNAVAILABLE, retry_after_ms=500))
    assert env.id is None and env.d["retry_after_ms"] == 500
    assert env.d["message"] == ErrorCode.UNAVAILABLE.message


def test_error_reply_from_a_parse_failure_echoes_the_request() -> None:
    try:
        m.parse_client_message(wire("move", {"seq": 2, "move": "nope"}, request_id=41))
    except ProtocolError as err:
        env = m.error_reply(err)
    assert env.id == 41 and env.d["code"] == "bad_notation" and env.d["seq"] == 2
    assert env.d["field"] == "move"


def test_ok_has_no_payload_on_the_wire() -> None:
    assert encode(m.ok_reply(6)) == b"\x82\xa1t\xa2ok\xa2id\x06"


# ---------------------------------------------------------------- builder refusals
def test_events_need_a_positive_version() -> None:
    with pytest.raises(ValueError):
        m.ready_changed_event(0, racer=1, ready=True)
    with pytest.raises(ValueError):
        m.racer_left_event(True, racer=1, host=None)  # a bool is not a version


def test_commitments_are_checked() -> None:
    with pytest.raises(ValueError):
        m.countdown_event(1, start_at_ms=1, commitment="not a hash")
    with pytest.raises(ValueError):
        m.started_event(1, start_at_ms=1, ends_at_ms=2, commitment=samples.COMMITMENT.upper())


def test_spectators_never_get_an_owner_only_view() -> None:
    thoughtful = samples.board_view("klondike", owner=True, thoughtful=True)
    assert "stock_cards" in thoughtful
    with pytest.raises(ValueError, match="owner"):
        m.board_notice(racer=1, at_ms=0, view=thoughtful, owner=False)
    assert "stock_cards" in m.board_notice(racer=1, at_ms=0, view=thoughtful, owner=True).d["view"]  # type: ignore[operator]


def test_joined_snapshot_must_be_the_racers_own() -> None:
    snap = samples.snapshot(racer_id=2)
    with pytest.raises(ValueError):
        m.joined_reply(
            1, room="r_8f3k2", code="K7QX2M", racer=1, token=samples.TOKEN, snapshot=snap
        )
    with pytest.raises(ValueError):
        m.joined_reply(
            1, room="r_8f3k2", code="K7QX2M", racer=1, token=samples.TOKEN,
            snapshot=samples.snapshot(racer_id=None),
        )  # fmt: skip
    with pytest.raises(ValueError, match="token"):
        m.joined_reply(1, room="r_8f3k2", code="K7QX2M", racer=2, token="short", snapshot=snap)


def test_replay_cannot_exceed_the_snapshot_version() -> None:
    with pytest.raises(ValueError):
        m.watching_reply(1, room="r_8f3k2", snapshot=samples.snapshot(racer_id=None), replay=8)
    assert m.watching_reply(1, room="r_8f3k2", snapshot=samples.snapshot(racer_id=None), replay=7)


def test_spectator_snapshots_have_no_you() -> None:
    with pytest.raises(ValueError):
        m.watching_reply(1, room="r_8f3k2", snapshot=samples.snapshot(racer_id=1))


def test_room_reset_racers_start_over() -> None:
    with pytest.raises(ValueError):
        m.room_reset_event(1, host=1, racers=[samples.racer(1, ready=True)])
    with pytest.raises(ValueError):
        m.room_reset_event(1, host=1, racers=[samples.racer(1, status="finished")])


def test_moved_refuses_unknown_status_and_foreign_keys() -> None:
    with pytest.raises(ValueError):
        m.moved_reply(1, seq=0, board=samples.board_view(), status="won", moves=1, score=0)
    leaky = {**samples.board_view(), "seed": samples.SEED}
    with pytest.raises(ValueError, match="contract"):
        m.moved_reply(1, seq=0, board=leaky, status="playing", moves=1, score=0)


def test_rooms_reply_is_capped() -> None:
    with pytest.raises(ValueError):
        m.rooms_reply(1, [samples.room_summary()] * 51)


def test_progress_refuses_cards() -> None:
    progress = {"racer": 1, "foundation": 3, "moves": 9, "face_down": 17, "status": "playing",
                "place": None, "top_cards": ["KS"]}  # fmt: skip
    with pytest.raises(ValueError):
        m.progress_event(3, progress)  # type: ignore[arg-type]


def test_notation_pattern_is_anchored() -> None:
    # fullmatch is used, but keep the pattern free of stray alternation at the edges.
    assert m._NOTATION.fullmatch("D") and not m._NOTATION.fullmatch("DD")
    assert not re.fullmatch(m._NOTATION.pattern, "1>F1>F")


def test_replies_name_the_snapshots_room() -> None:
    with pytest.raises(ValueError, match="room"):
        m.watching_reply(1, room="r_other", snapshot=samples.snapshot(racer_id=None))
    with pytest.raises(ValueError, match="room"):
        m.joined_reply(
            1, room="r/8f3k2", code="K7QX2M", racer=1, token=samples.TOKEN,
            snapshot=samples.snapshot(racer_id=1),
        )  # fmt: skip


def _longest_result() -> RaceResult:
    """A result as large as the limits let it be: every racer a room may hold, each
    with a full log of the longest entries a move may be, and the longest names."""
    standings = []
    for racer in range(1, MAX_RACERS + 1):
        row = samples.standing(racer, racer)
        row["name"] = "\N{GRINNING FACE}" * MAX_NAME_LEN  # 4 UTF-8 bytes a character
        row["log"] = ["9" * MAX_MOVE_LEN] * MAX_LOG_LEN
        row["times"] = [MAX_TIME_LIMIT_S * 1000] * MAX_LOG_LEN  # 5 bytes each
        standings.append(row)
    result = samples.result()
    result["standings"] = standings
    result["certificate"] = ["9" * MAX_MOVE_LEN] * 2_000
    return result


def test_the_longest_result_fits_a_frame_every_client_reads() -> None:
    """``race_over`` carries every racer's log, and so does a finished room's snapshot:
    the log cap (MAX_LOG_LEN) must keep both inside the limits clients decode, or
    nobody would see the race end (a racer moving back and forth through a long time
    limit used to make one no client could read)."""
    result = _longest_result()
    over = encode(m.race_over_event(9, result))
    assert len(over) < 0.9 * SERVER_FRAME_LIMITS.max_frame_bytes
    assert decode(over, limits=SERVER_FRAME_LIMITS).d["standings"][7]["log"][-1] == "9" * 16
    snapshot = samples.snapshot(Phase.FINISHED, racer_id=None)
    snapshot["result"] = result
    resync = encode(m.resync_notice(reason="lost", lost_events=1, snapshot=snapshot))
    assert decode(resync, limits=SERVER_FRAME_LIMITS).t == "resync"
    # Without the cap: a log at the array limit's next entry is refused by the client.
    result["standings"][0]["log"] = ["D"] * (SERVER_FRAME_LIMITS.max_array_len + 1)
    result["standings"][0]["times"] = [0] * (SERVER_FRAME_LIMITS.max_array_len + 1)
    with pytest.raises(ProtocolError):
        decode(encode(m.race_over_event(9, result)), limits=SERVER_FRAME_LIMITS)


def test_a_result_from_before_times_still_goes_out_and_times_match_the_log() -> None:
    """Archived results and stored race_over events of races that ended before results
    carried move times have none: a finished room's snapshot must still be sendable.
    Times there are must be one per log entry."""
    old = samples.result()
    for row in old["standings"]:
        del row["times"]
    sent = decode(encode(m.race_over_event(9, old)), limits=SERVER_FRAME_LIMITS)
    assert "times" not in sent.d["standings"][0]
    short = samples.result()
    short["standings"][0]["times"] = [1_000]
    with pytest.raises(ValueError, match=r"times: 1 times for 4 log entries"):
        m.race_over_event(9, short)


def test_every_builder_is_named_in_the_python_api_section() -> None:
    """§17 lists the builders a Python client or server may call; an audit found
    ``archived_reply``, ``deal_chosen_event``, ``presence_event``, ``resync_notice``
    and ``room_event`` missing from it."""
    section = DOC.split("## 17. Python API", 1)[1]
    builders = {n for n in dir(m) if re.fullmatch(r"[a-z_]+_(reply|event|notice)", n)}
    assert {n for n in builders if f"`{n}`" not in section} == set()


def test_bad_notation_names_every_form_the_document_lists() -> None:
    """The refusal teaches the notation: it named no ``Fsn>d``, the double-deck
    foundation move (``FH2>3``) that §5 lists and double Yukon takes."""
    row = next(line for line in DOC.splitlines() if line.startswith("| `move` | string |"))
    forms = re.findall(r"`([^`]+)`", row.split("docs/rules.md:", 1)[1].split(")", 1)[0])
    with pytest.raises(BadMessage) as refused:
        m.PlayMove.from_data({"seq": 0, "move": "nope"})
    assert refused.value.code == ErrorCode.BAD_NOTATION
    listed = refused.value.message.split("(", 1)[1].split(")", 1)[0]
    assert [f.strip() for f in listed.split(",")] == forms
    with pytest.raises(NotationError) as unreadable:  # the engine's own words agree
        parse_move("nope")
    assert str(unreadable.value).endswith(f"(expected {', '.join(forms[:-1])} or {forms[-1]})")
    assert str(parse_move("FH2>3")) == "FH2>3"
