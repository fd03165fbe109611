"""A finished race as the server archived it, and how a result file differs from it.

A result file says nothing about who wrote it: ``verify`` can only check that it adds
up, and an audit made consistent edits (two racers' names swapped, one racer's times
moved earlier, a racer dropped, a new salt with its commitment) that verify passed.
The server that ran the race keeps its own copy of the result, saved when the race
ended (docs/protocol.md, ``result``). ``solrace fetch`` asks for it: to compare a file
with it, or to get a race this computer never saw end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, Final

from solrace.protocol.fairness import RACE_ID
from solrace.quoting import json_quoted

from .connection import RaceClient, first_answer
from .results import SavedResult

#: Differences named in one report: the first few say enough.
MAX_DIFFERENCES: Final = 3


def is_race_id(text: str) -> bool:
    """Whether ``text`` is a race id (``<room>.<8 hex digits>``) a server can look up."""
    return RACE_ID.fullmatch(text) is not None


async def fetch_archived(servers: str, race: str) -> tuple[str, SavedResult]:
    """The first of ``servers`` (comma-separated) that answers, and the race as it
    archived it. Raises the last server's connection error when none answers, and
    ServerError (``unknown_race``, say) when one answers with a refusal. The copy
    names ``servers`` as its server, as a race saved by its racer does."""
    url, archived = await first_answer(servers, lambda url: _archived_on(url, race))
    return url, replace(archived, server=servers)


async def _archived_on(url: str, race: str) -> SavedResult:
    client = await RaceClient.connect(url, open_timeout=5)
    try:
        reply = await client.fetch_result(race)
    finally:
        await client.close()
    return SavedResult(
        race=race,
        room=str(reply["room"]),
        settings=dict(reply["settings"]),
        result=dict(reply["result"]),
        deal=dict(reply["deal"]) if reply.get("deal") else None,
        # No time: when the race was run is unknown, and a copy fetched now of an old
        # race, timed now, was the room's "newest" — the pair a resume from a new
        # process sent as its proof (results.last_revealed) instead of the last
        # race's, which the server ignored (a review). Untimed, it orders oldest.
        saved_at_ms=None,
    )


def differences(local: SavedResult, archived: SavedResult) -> list[str]:
    """Where ``local`` (a result file) departs from the server's ``archived`` copy of
    the same race, in words, at most :data:`MAX_DIFFERENCES`; empty when they agree.

    Compared: the room, its settings, the whole result (standings with every log and
    its times, seed, salt, commitment, certificate), the deal the lobby announced when
    the file has it, and the commitment and settings the file's client saw at the
    countdown — the archive must reveal the deal that commitment bound, under those
    settings."""
    found: list[str] = []
    pairs: list[tuple[str, Any, Any]] = [
        ("room", local.room, archived.room),
        ("settings", local.settings, archived.settings),
        ("result", local.result, archived.result),
    ]
    if local.deal is not None:
        pairs.append(("deal", local.deal, archived.deal))
    if local.published_commitment is not None:
        commitment = archived.result.get("commitment")
        pairs.append(
            ("the commitment seen at the countdown", local.published_commitment, commitment)
        )
    if local.countdown_settings is not None:
        # the archive's settings are what the room had at its countdown
        pairs.append(
            ("the settings seen at the countdown", local.countdown_settings, archived.settings)
        )
    for where, mine, theirs in pairs:
        for difference in _diff(where, _plain(mine), _plain(theirs)):
            found.append(difference)
            if len(found) == MAX_DIFFERENCES:
                return found
    return found


def _plain(value: Any) -> Any:
    """``value`` as JSON has it (a file's and a msgpack reply's shapes alike)."""
    return json.loads(json.dumps(value))


def _diff(where: str, mine: Any, theirs: Any) -> Iterator[str]:
    if isinstance(mine, Mapping) and isinstance(theirs, Mapping):
        for key in sorted(set(mine) | set(theirs)):
            # a key from the file or the server: as JSON writes it, escaped, where it
            # holds what a terminal acts on (U+202E; printable() takes only controls)
            name = key if key.isprintable() else json_quoted(key)
            yield from _diff(f"{where}.{name}", mine.get(key), theirs.get(key))
    elif isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            yield from _diff(f"{where}[{i}]", a, b)
    elif isinstance(mine, list) and isinstance(theirs, list):
        yield f"{where}: {len(mine)} entries here, {len(theirs)} on the server"
    elif mine != theirs:
        yield f"{where}: {json_quoted(mine)} here, {json_quoted(theirs)} on the server"
