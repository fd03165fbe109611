"""race/settings.py: every refusal of a room's settings names the field at fault, so a
client can point at it (docs/protocol.md §12, ``error.field``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from solrace.race import RaceError
from solrace.race.settings import RoomSettings, validate_settings


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        ({"variant": "foo"}, "bad_options", "variant"),
        ({"options": {"undo": "yes"}}, "bad_options", "options.undo"),
        ({"options": {"undo": 3}}, "bad_options", "options.undo"),
        ({"options": {"dro": 3}}, "bad_options", "options.dro"),  # no such option
        ({"variant": "klondike", "options": {"draw": 2}}, "bad_options", "options.draw"),
        ({"max_racers": 9}, "bad_message", "max_racers"),
        ({"time_limit_s": 5}, "bad_message", "time_limit_s"),
        ({"spectator_delay_s": -1}, "bad_message", "spectator_delay_s"),
        ({"private": "yes"}, "bad_message", "private"),
        ({"quick": 1}, "bad_message", "quick"),
        ({"deals": "rigged"}, "bad_message", "deals"),
        ({"difficulty": "brutal"}, "bad_message", "difficulty"),
        ({"deals": "random", "difficulty": "easy"}, "bad_message", "difficulty"),
        ({"spectators": "all"}, "bad_message", "spectators"),
        ({"spectators": "open"}, "bad_message", "spectators"),  # not a private room
    ],
)
def test_each_refusal_names_its_field(change: dict[str, Any], code: str, field: str) -> None:
    with pytest.raises(RaceError) as refused:
        validate_settings(replace(RoomSettings(variant="yukon"), **change))
    assert (refused.value.code, refused.value.field) == (code, field)


def test_good_settings_pass_with_their_options_resolved() -> None:
    settings = validate_settings(RoomSettings(variant="yukon", private=True, spectators="open"))
    assert settings.spectators == "open" and settings.options  # every option, resolved


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"variant": "spider"}, 'unknown variant "spider" (known: yukon,'),
        ({"options": {"dro": 3}}, 'variant yukon has no option "dro" (options:'),
        ({"options": {"undo": "yes"}}, 'option undo must be true or false, not "yes"'),
    ],
)
def test_a_refusal_quotes_what_the_request_held_as_json(change: dict[str, Any], says: str) -> None:
    """A request's values are quoted as the protocol writes them (docs/protocol.md: JSON
    here), the option's value already was: the variant and the option's name were
    Python's ``'spider'``."""
    with pytest.raises(RaceError) as refused:
        validate_settings(replace(RoomSettings(variant="yukon"), **change))
    assert str(refused.value).startswith(says) or says in str(refused.value), str(refused.value)
