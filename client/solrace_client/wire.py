"""What a server sent, read for showing: the one reader the fold
(:mod:`solrace_client.roomview`) and the screens that show a result
(:mod:`solrace_client.tui.render`, the bot's table in :mod:`solrace_client.cli`,
:mod:`solrace_client.results`) share, so that a field of the wrong type from a faulty or
hostile server shows as unknown instead of ending the client with a traceback. A
property test bends every field of a whole race's frames (tests/client/test_hostile_frames.py):
a standing's ``moves`` sent as a list ended the race-over screen with a TypeError, a
racer's ``place`` sent as ``"soon"`` the racers panel, a result's ``standings`` sent as
a string the bot's table.

The data themselves are left as they came where ``verify`` reads them (a result's
standings): it says what is wrong with them, in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def whole(value: object) -> int | None:
    """``value`` if it is a whole number (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def figure(value: object, unknown: str = "-") -> str:
    """A count or a place for a table cell: the whole number, else ``unknown``."""
    number = whole(value)
    return unknown if number is None else str(number)


def maps(items: object) -> list[Mapping[str, Any]]:
    """The maps of a list (the others are not shown): none where it is not a list."""
    return [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else []


def standings(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A RaceResult's standings that are maps (the others are not shown; ``verify``
    names them)."""
    return maps(result.get("standings"))


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a map, else an empty one (a room's ``options`` sent as a
    string ended the lobby's screen with an AttributeError)."""
    return value if isinstance(value, Mapping) else {}
