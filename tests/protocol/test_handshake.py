"""handshake.py: subprotocol negotiation."""

from __future__ import annotations

import pytest
from solrace.protocol.errors import ErrorCode, UnsupportedVersion
from solrace.protocol.handshake import parse_subprotocol_header, select_subprotocol


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
