"""codec.py: round trips, every refusal with its close code, and fuzzing of decode."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from solrace.protocol.codec import decode, encode
from solrace.protocol.envelope import Envelope
from solrace.protocol.errors import ErrorCode, MalformedFrame, ProtocolError
from solrace.protocol.limits import (
    CLIENT_FRAME_LIMITS,
    MAX_FRAME_BYTES,
    SERVER_FRAME_LIMITS,
)


def pack(obj: Any) -> bytes:
    packed: bytes = msgpack.packb(obj, use_bin_type=True)
    return packed


def refused(frame: bytes | str, **kwargs: Any) -> MalformedFrame:
    with pytest.raises(MalformedFrame) as info:
        decode(frame, **kwargs)
    return info.value


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize(
    "envelope",
    [
        Envelope("ping"),
        Envelope("ping", id=0),
        Envelope("move", id=2**31 - 1, d={"seq": 0, "move": "3:2>6"}),
        Envelope("progress", v=1, d={"racer": 1, "place": None, "status": "playing"}),
        Envelope("x", d={"f": 1.5, "b": True, "n": None, "s": "é", "a": [1, [2]], "m": {"k": {}}}),
    ],
)
def test_round_trip(envelope: Envelope) -> None:
    assert decode(encode(envelope), limits=SERVER_FRAME_LIMITS) == envelope


def test_nil_and_absent_envelope_fields_are_the_same() -> None:
    assert decode(pack({"t": "ping", "id": None, "v": None, "d": None})) == Envelope("ping")


def test_accepts_bytearray_and_memoryview() -> None:
    frame = encode(Envelope("ping", id=1))
    assert decode(bytearray(frame)) == decode(memoryview(frame)) == Envelope("ping", id=1)


def test_encode_refuses_values_outside_the_data_model() -> None:
    with pytest.raises(TypeError):
        encode(Envelope("x", d={"when": object()}))


def test_encode_is_compact() -> None:
    assert encode(Envelope("ping")) == b"\x81\xa1t\xa4ping"


# ------------------------------------------------------------------ frame level
def test_text_frame_closes_1003() -> None:
    err = refused('{"t": "ping"}')
    assert (err.code, err.close_code) == (ErrorCode.BAD_FRAME, 1003)


def frame_of_size(size: int) -> bytes:
    """A valid envelope of exactly ``size`` bytes, every value within the limits:
    arrays of up to 20 strings of 200 bytes, the last string trimmed to fit."""
    strings: list[str] = []

    def build() -> bytes:
        d = {f"a{i // 20}": strings[i : i + 20] for i in range(0, len(strings), 20)}
        return pack({"t": "x", "d": d})

    while len(build()) < size:
        strings.append("x" * 200)
    strings[-1] = "x" * (200 - (len(build()) - size))
    frame = build()
    assert len(frame) == size
    return frame


def test_a_frame_of_exactly_the_limit_is_allowed() -> None:
    decode(frame_of_size(MAX_FRAME_BYTES))


def test_one_byte_over_the_limit_closes_1009_before_unpacking() -> None:
    err = refused(frame_of_size(MAX_FRAME_BYTES + 1))
    assert (err.code, err.close_code) == (ErrorCode.TOO_LARGE, 1009)
    assert "16385 bytes" in err.message
    # Garbage is refused for its size too: unpacking never starts.
    assert refused(b"\xc1" * (MAX_FRAME_BYTES + 1)).code == ErrorCode.TOO_LARGE


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (b"", "empty"),
        (b"\xc1", "reserved byte"),
        (pack({"t": "ping"})[:-1], "truncated"),
        (pack({"t": "ping"}) + b"\x00", "trailing"),
        (pack({"t": "ping"}) + pack({"t": "ping"}), "two envelopes"),
        (b"\x81\xa1t\xa2\xff\xfe", "invalid utf-8"),
    ],
)
def test_unreadable_frames_close_1007(frame: bytes, why: str) -> None:
    err = refused(frame)
    assert (err.code, err.close_code) == (ErrorCode.BAD_FRAME, 1007), why


@pytest.mark.parametrize("value", [[], [1], 1, "ping", None, True, 1.5])
def test_a_frame_that_is_not_a_map_closes_1007(value: Any) -> None:
    err = refused(pack(value))
    assert err.close_code == 1007 and "must be a map" in err.message


@pytest.mark.parametrize(
    "ext",
    [msgpack.ExtType(5, b"abcd"), msgpack.ExtType(127, b"x" * 20), msgpack.Timestamp(1, 0)],
)
def test_ext_types_are_refused(ext: Any) -> None:
    err = refused(pack({"t": "x", "d": {"e": ext}}))
    assert (err.code, err.close_code) == (ErrorCode.BAD_FRAME, 1007)
    assert "extension" in err.message


@pytest.mark.parametrize("value", [b"x", b""])
def test_binary_values_are_refused(value: bytes) -> None:
    err = refused(pack({"t": "x", "d": {"b": value}}))
    assert (err.code, err.close_code) == (ErrorCode.BAD_FRAME, 1007)
    assert "binary" in err.message


@pytest.mark.parametrize("key", [1, b"", b"t", 1.5, None, True])
def test_non_string_map_keys_are_refused(key: Any) -> None:
    # msgpack.packb refuses some of these keys itself, so the map is spliced by hand.
    frame = b"\x82" + pack("t") + pack("x") + pack(key) + pack(1)
    err = refused(frame)
    assert err.close_code == 1007


def test_duplicate_keys_are_refused_not_resolved() -> None:
    # {"t": "ping", "t": "move"}: "last wins" would let two readers disagree.
    err = refused(b"\x82" + pack("t") + pack("ping") + pack("t") + pack("move"))
    assert err.close_code == 1007 and "twice" in err.message
    nested = b"\x82" + pack("t") + pack("x") + pack("d") + b"\x82\xa1a\x01\xa1a\x02"
    assert refused(nested).close_code == 1007


# ------------------------------------------------------------------ size limits
@pytest.mark.parametrize(
    ("d", "why"),
    [
        ({"s": "x" * (CLIENT_FRAME_LIMITS.max_str_bytes + 1)}, "string"),
        ({"s": "é" * (CLIENT_FRAME_LIMITS.max_str_bytes // 2 + 1)}, "string bytes, not chars"),
        ({"a": [0] * (CLIENT_FRAME_LIMITS.max_array_len + 1)}, "array"),
        ({f"k{i}": 0 for i in range(CLIENT_FRAME_LIMITS.max_map_len + 1)}, "map"),
    ],
)
def test_values_over_the_limits_close_1009(d: dict[str, Any], why: str) -> None:
    err = refused(pack({"t": "x", "d": d}))
    assert (err.code, err.close_code) == (ErrorCode.TOO_LARGE, 1009), why


def test_values_at_the_limits_are_fine() -> None:
    lim = CLIENT_FRAME_LIMITS
    decode(pack({"t": "x", "d": {"s": "x" * lim.max_str_bytes, "a": [0] * lim.max_array_len}}))


def nested(depth: int) -> dict[str, Any]:
    """An envelope whose containers nest ``depth`` deep, the envelope itself included."""
    inner: Any = 0
    for _ in range(depth - 2):
        inner = [inner]
    return {"t": "x", "d": {"n": inner}} if depth >= 2 else {"t": "x"}


def test_nesting_up_to_the_limit_is_fine() -> None:
    decode(pack(nested(CLIENT_FRAME_LIMITS.max_depth)))


@pytest.mark.parametrize("depth", [CLIENT_FRAME_LIMITS.max_depth + 1, 100, 900])
def test_deep_nesting_closes_1009(depth: int) -> None:
    err = refused(pack(nested(depth)))
    assert (err.code, err.close_code) == (ErrorCode.TOO_LARGE, 1009)


def test_nesting_beyond_msgpacks_own_stack_closes_1009() -> None:
    # 5000 nested one-element arrays: msgpack's fixed stack (1024) overflows first.
    err = refused(b"\x91" * 5000 + b"\x00")
    assert (err.code, err.close_code) == (ErrorCode.TOO_LARGE, 1009)


def test_server_limits_accept_what_client_limits_refuse() -> None:
    big = pack({"t": "race_over", "v": 9, "d": {"log": ["3:1>4"] * 5000, "s": "x" * 1000}})
    assert len(big) > MAX_FRAME_BYTES
    refused(big)
    assert decode(big, limits=SERVER_FRAME_LIMITS).t == "race_over"


# ------------------------------------------------------------------ envelope shape
@pytest.mark.parametrize(
    ("wire", "fragment"),
    [
        ({}, "envelope t"),
        ({"d": {}}, "envelope t"),
        ({"t": ""}, "envelope t"),
        ({"t": 5}, "envelope t"),
        ({"t": None}, "envelope t"),
        ({"t": "x" * 33}, "envelope t"),
        ({"t": "x", "id": "1"}, "envelope id"),
        ({"t": "x", "id": -1}, "envelope id"),
        ({"t": "x", "id": 2**31}, "envelope id"),
        ({"t": "x", "id": True}, "envelope id"),
        ({"t": "x", "id": 1.0}, "envelope id"),
        ({"t": "x", "v": 0}, "envelope v"),
        ({"t": "x", "v": "1"}, "envelope v"),
        ({"t": "x", "v": False}, "envelope v"),
        ({"t": "x", "d": []}, "envelope d"),
        ({"t": "x", "d": "x"}, "envelope d"),
        ({"t": "x", "data": {}}, "unknown envelope key"),
    ],
)
def test_bad_envelopes_close_1007(wire: dict[str, Any], fragment: str) -> None:
    err = refused(pack(wire))
    assert (err.code, err.close_code) == (ErrorCode.BAD_FRAME, 1007)
    assert fragment in err.message


def test_decoded_payload_is_a_plain_dict() -> None:
    env = decode(pack({"t": "x", "d": {"a": {"b": [1]}}}))
    assert type(env.d) is dict and env.d == {"a": {"b": [1]}}


# ------------------------------------------------------------------ fuzzing
FUZZ = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode_or_protocol_error(frame: bytes) -> None:
    try:
        env = decode(frame)
    except ProtocolError as err:
        assert err.close_code in (1003, 1007, 1009)
        return
    assert isinstance(env, Envelope)


@FUZZ
@given(st.binary(max_size=512))
def test_decode_of_arbitrary_bytes_returns_an_envelope_or_a_protocol_error(frame: bytes) -> None:
    _decode_or_protocol_error(frame)


@FUZZ
@given(st.binary(min_size=1, max_size=64))
def test_decode_of_an_envelope_prefix_plus_garbage(tail: bytes) -> None:
    # Start like a real envelope so the fuzzer gets past the first byte more often.
    _decode_or_protocol_error(b"\x82\xa1t\xa4move\xa1d" + tail)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.binary(max_size=4)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), inner, max_size=4)
    ),
    max_leaves=20,
)
envelope_like = st.fixed_dictionaries(
    {},
    optional={
        "t": st.sampled_from(["ping", "move", "create", ""]) | scalars,
        "id": st.integers(-2, 2**32) | scalars,
        "v": st.integers(-2, 2**32) | scalars,
        "d": values,
        "x": values,
    },
)


@FUZZ
@given(envelope_like | values)
def test_decode_of_arbitrary_msgpack_values(value: Any) -> None:
    try:
        frame = msgpack.packb(value, use_bin_type=True, strict_map_key=False)
    except (TypeError, ValueError, OverflowError):
        return
    _decode_or_protocol_error(frame)


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    t=st.text(min_size=1, max_size=32),
    request_id=st.none() | st.integers(0, 2**31 - 1),
    v=st.none() | st.integers(1, 2**63 - 1),
    d=st.dictionaries(st.text(max_size=8), json_like, max_size=5),
)
def test_every_valid_envelope_round_trips(
    t: str, request_id: int | None, v: int | None, d: dict[str, Any]
) -> None:
    env = Envelope(t, id=request_id, v=v, d=d)
    assert decode(encode(env), limits=SERVER_FRAME_LIMITS) == env


def test_nan_survives_the_round_trip_as_nan() -> None:
    env = decode(encode(Envelope("x", d={"f": math.nan})))
    assert math.isnan(env.d["f"])  # type: ignore[arg-type]
