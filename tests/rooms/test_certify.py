"""Certification candidate by candidate: the solver workers serve every room in turn,
and a certification nobody needs any more stops after the candidate in progress."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from solrace.race import decisions
from solrace.race.fairness import round_seed
from solrace.race.settings import RoomSettings, validate_settings
from solrace.rooms import certify
from solrace.rooms.records import RoomMeta
from solrace.rooms.room import LiveRoom
from solrace.rules import replay

from tests.net.conftest import SOLVABLE_SECRET


def _room() -> LiveRoom:
    """A lobby with a racer in it (one nobody is in wants no deal)."""
    settings = validate_settings(RoomSettings(variant="yukon"))
    room = LiveRoom(RoomMeta("r_test", "ABCDEF", SOLVABLE_SECRET, settings, 0))
    (joined,) = decisions.join(room.state, "Ann")
    room.state.apply(1, joined)
    return room


async def test_a_certification_nobody_needs_stops_after_its_candidate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    room = _room()
    tried: list[int] = []

    async def unlucky(*args: Any) -> certify.Certificate | None:
        tried.append(args[4])  # the candidate number
        if len(tried) == 2:
            room.state.round += 1  # meanwhile: a rematch, the round is gone
        return None  # not won

    monkeypatch.setattr(certify, "_solve", unlucky)
    node: Any = SimpleNamespace(certifying={})  # nothing else is asked: nothing stored
    await certify._run(node, room, round_no=room.state.round)
    assert tried == [0, 1]  # not the 100 candidates a whole certification may try


def test_candidate_by_candidate_finds_what_the_whole_search_finds() -> None:
    settings = validate_settings(RoomSettings(variant="yukon"))
    whole = certify.certify("yukon", settings.options, SOLVABLE_SECRET, 1, None)
    first = next(
        found
        for attempt in range(certify.MAX_CANDIDATES)
        if (
            found := certify.try_candidate(
                "yukon", settings.options, SOLVABLE_SECRET, 1, attempt, None
            )
        )
    )
    assert first == whole and whole.line is not None
    # ... and it is a real certificate: the candidates before it are not won, and its
    # line wins the candidate's deal on the rules engine.
    for attempt in range(whole.attempt):
        assert (
            certify.try_candidate("yukon", settings.options, SOLVABLE_SECRET, 1, attempt, None)
            is None
        )
    seed = round_seed(SOLVABLE_SECRET, 1, whole.attempt)
    assert replay("yukon", seed, settings.options, list(whole.line)).is_won()
