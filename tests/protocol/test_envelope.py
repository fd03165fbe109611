"""envelope.py: the outer shape, and what goes on the wire."""

from __future__ import annotations

import pytest
from solrace.protocol.envelope import Envelope


def test_to_wire_omits_what_is_unset() -> None:
    assert Envelope("ping").to_wire() == {"t": "ping"}
    assert Envelope("ok", id=0).to_wire() == {"t": "ok", "id": 0}
    assert Envelope("progress", v=3, d={"racer": 1}).to_wire() == {
        "t": "progress",
        "v": 3,
        "d": {"racer": 1},
    }


def test_kinds() -> None:
    assert Envelope("ok", id=1).is_reply and not Envelope("ok", id=1).is_event
    assert Envelope("started", v=1).is_event and not Envelope("started", v=1).is_reply
    board = Envelope("board", d={"racer": 1})
    assert not board.is_event and not board.is_reply


def test_envelopes_compare_by_value() -> None:
    assert Envelope("x", id=1, d={"a": 1}) == Envelope("x", id=1, d={"a": 1})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"t": ""},
        {"t": "x" * 33},
        {"t": 5},
        {"t": "x", "id": -1},
        {"t": "x", "id": 2**31},
        {"t": "x", "id": True},
        {"t": "x", "v": 0},
        {"t": "x", "v": False},
        {"t": "x", "d": [1]},
    ],
)
def test_bad_envelopes_are_bugs(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Envelope(**kwargs)  # type: ignore[arg-type]
