"""handshake.py: subprotocol negotiation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from solrace.protocol.errors import ErrorCode, UnsupportedVersion
from solrace.protocol.handshake import (
    RATE_LIMIT_HEADER_MAX_CHARS,
    format_rate_limit,
    parse_rate_limit,
    parse_subprotocol_header,
    select_subprotocol,
)
from solrace.protocol.limits import MAX_RATE_BURST, MAX_RATE_PER_S


def test_parse_header_values() -> None:
    assert parse_subprotocol_header(["solrace.v2, solrace.v1", " chat ,,"]) == [
        "solrace.v2",
        "solrace.v1",
        "chat",
    ]
    assert parse_subprotocol_header([]) == []


def test_selects_the_supported_version() -> None:
    assert select_subprotocol(["chat", "solrace.v1"]) == "solrace.v1"


def test_server_preference_wins() -> None:
    assert select_subprotocol(["b", "a"], supported=("a", "b")) == "a"


@pytest.mark.parametrize("offered", [[], ["solrace.v0"], ["SOLRACE.V1"]])
def test_refusal_names_the_supported_versions(offered: list[str]) -> None:
    with pytest.raises(UnsupportedVersion) as info:
        select_subprotocol(offered)
    assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
    assert "solrace.v1" in str(info.value)


def test_refusal_message_stays_short_for_a_hostile_offer() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        select_subprotocol(["x" * 10_000] * 1000)
    assert len(str(info.value)) < 600


def test_a_rate_limit_header_reads_back_as_the_server_wrote_it() -> None:
    assert format_rate_limit(2.0, 4.0) == "2 4"
    assert parse_rate_limit(format_rate_limit(2.0, 4.0)) == (2.0, 4.0)
    assert parse_rate_limit(format_rate_limit(0.5, 1.0)) == (0.5, 1.0)
    assert parse_rate_limit("  20\t40 ") == (20.0, 40.0)


@given(
    st.floats(min_value=0, max_value=MAX_RATE_PER_S, exclude_min=True),
    st.floats(min_value=1, max_value=MAX_RATE_BURST),
)
def test_every_limit_a_server_takes_reads_back_exactly(rate: float, burst: float) -> None:
    """Before: written to 6 digits, ``--rate-per-s 19.9999999`` was announced as 20, and
    a client pacing to 20 a second ran over the server's limit (closed 1008)."""
    value = format_rate_limit(rate, burst)
    assert len(value) <= RATE_LIMIT_HEADER_MAX_CHARS
    assert parse_rate_limit(value) == (rate, burst)


def test_a_limit_just_under_a_round_figure_is_not_rounded_up() -> None:
    assert format_rate_limit(19.9999999, 40.0) == "19.9999999 40"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "20",
        "20 40 60",
        "twenty forty",
        "20,40",
        "0 40",
        "-1 40",
        "20 0.5",
        "nan 40",
        "20 inf",
        "1e999 40",
        "20 " + "4" * 80,
        "\x00 \x00",
    ],
)
def test_a_malformed_rate_limit_header_is_none_never_an_exception(value: str) -> None:
    assert parse_rate_limit(value) is None
