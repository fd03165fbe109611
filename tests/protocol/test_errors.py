"""errors.py: one root, codes with messages, and the reply-or-close decision."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from solrace.protocol.errors import (
    BadMessage,
    CloseCode,
    ErrorCode,
    MalformedFrame,
    ProtocolError,
    RateLimited,
    UnsupportedVersion,
)

#: The codes docs/protocol.md §12 promises; renaming one breaks every client.
DOCUMENTED_CODES = {
    "bad_frame", "too_large", "rate_limited", "unsupported_version", "server_full",
    "too_many_connections", "connecting_too_fast", "bad_message",
    "unknown_type", "unknown_room", "room_full", "wrong_phase", "not_host", "not_racer",
    "not_ready", "bad_options", "bad_token", "token_in_use", "spectator_cannot_act",
    "already_in_room",
    "too_many_rooms", "unknown_race", "same_address",
    "too_many_spectators",
    "illegal_move", "bad_notation", "bad_seq", "move_limit", "internal", "unavailable",
}  # fmt: skip


PROTOCOL_DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_error_codes_are_exactly_the_documented_ones() -> None:
    assert {c.value for c in ErrorCode} == DOCUMENTED_CODES
    section = PROTOCOL_DOC.read_text().split("## 12. Errors", 1)[1].split("\n## ", 1)[0]
    in_table = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
    assert in_table == DOCUMENTED_CODES


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_has_a_human_message_and_is_a_plain_string(code: ErrorCode) -> None:
    assert code.message and code.message[0].islower()
    assert code == code.value and isinstance(code, str)


def test_close_codes_are_the_rfc_values() -> None:
    assert {c.name: c.value for c in CloseCode} == {
        "NORMAL": 1000,
        "GOING_AWAY": 1001,
        "PROTOCOL_ERROR": 1002,
        "UNSUPPORTED_DATA": 1003,
        "INVALID_DATA": 1007,
        "POLICY_VIOLATION": 1008,
        "MESSAGE_TOO_BIG": 1009,
        "INTERNAL_ERROR": 1011,
    }


def test_every_error_is_a_protocol_error() -> None:
    for cls in (MalformedFrame, BadMessage, RateLimited, UnsupportedVersion):
        assert issubclass(cls, ProtocolError)
    assert not issubclass(ProtocolError, ValueError)  # peer faults are not server bugs


def test_malformed_frame_closes_1007_by_default() -> None:
    err = MalformedFrame("nope")
    assert (err.code, err.close_code, err.close_reason) == (ErrorCode.BAD_FRAME, 1007, "bad_frame")
    assert str(err) == "nope"


def test_bad_message_replies_and_keeps_its_details() -> None:
    err = BadMessage(ErrorCode.BAD_SEQ, seq=3, expected=5, request_id=9)
    assert err.close_code is None
    assert err.message == ErrorCode.BAD_SEQ.message
    assert (err.seq, err.expected, err.request_id, err.field) == (3, 5, 9, None)


def test_rate_limited_closes_1008() -> None:
    err = RateLimited()
    assert (err.code, err.close_code, err.close_reason) == (
        ErrorCode.RATE_LIMITED,
        1008,
        "rate_limited",
    )


@pytest.mark.parametrize("code", list(ErrorCode))
def test_close_reasons_fit_a_close_frame(code: ErrorCode) -> None:
    assert len(ProtocolError(code).close_reason.encode()) <= 123
