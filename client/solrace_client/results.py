"""Finished races kept on the player's machine, for ``solrace replay`` and
``solrace verify``.

The seed, salt and every racer's move log are revealed in ``race_over`` (and in the
snapshot of a finished room until it expires), so every client that sees a
``race_over`` — the bot and the terminal UI — saves it here, with the room's settings,
which are needed to re-deal. A race this computer did not see end can be fetched from
the server's archive (``solrace fetch``, :mod:`.archive`).

A file is ``<config dir>/races/<RACE>.json``; the race id ``RACE`` is
``<room>.<commitment[:8]>``: the commitment differs every round, so a rematch in the
same room gets its own file. Its shape is the server's own stored result
(``{room, code, settings, result}``), plus ``race``, ``saved_at_ms`` and, when the
client saw it before the reveal, ``published_commitment``: the commitment announced at
the countdown, which is what makes ``verify``'s commitment check mean something (a
server that lied could otherwise send a matching commitment along with the reveal), and
``countdown_settings``, the room's settings seen then (they are not under the
commitment); a racer's client adds ``acknowledged``, the moves the server acknowledged
to it, which its revealed log must hold.

Several savers on one computer may save one race, each knowing part of it: the racer
saw the countdown (``published_commitment``) and the lobby's ``deal``; a spectator who
came after the countdown saw neither; ``solrace fetch`` has no room ``code``. A later
save therefore never takes away what the file holds (:func:`write_result`): watching a
finished room replaced a racer's file and left ``verify`` with nothing to hold the
reveal to (an audit).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from solrace import protocol
from solrace.protocol.fairness import is_commitment
from solrace.protocol.limits import (
    FIRST_RACER_ID,
    MAX_CODE_LEN,
    MAX_LOG_LEN,
    MAX_MOVE_LEN,
    MAX_NAME_LEN,
    MAX_RACE_ID_LEN,
    MAX_RACERS,
    MAX_ROOM_ID_LEN,
    MAX_SPECTATOR_DELAY_S,
    MAX_TIME_LIMIT_S,
    MIN_RACERS,
    MIN_SPECTATOR_DELAY_S,
    MIN_TIME_LIMIT_S,
    SERVER_FRAME_LIMITS,
)
from solrace.protocol.messages import room_code
from solrace.protocol.views import deal_wire
from solrace.quoting import json_quoted, quoted
from solrace.race.settings import DEALS, DIFFICULTIES, SPECTATORS
from solrace.rules import VARIANTS
from solrace.rules.options import OPTION_NAMES, is_of_kind, option_kind

from .config import NotAFile, is_proof, kept_in, make_private_dir, read_kept

#: The most of a result file that is read: a race's result comes in one frame of at
#: most ``SERVER_FRAME_LIMITS.max_frame_bytes`` (1 MiB), and its file adds the deal
#: and a racer's acknowledged moves, as indented JSON — the largest race the protocol
#: allows is saved in under a quarter of this (tests/client/test_results.py). A larger
#: file is no race: ``verify`` of a 150 MB one read it whole (4 s, 330 MB of memory).
MAX_RESULT_FILE_BYTES: Final = 16 * SERVER_FRAME_LIMITS.max_frame_bytes

#: What may name a saved race (no path separators, no leading dot), as long as a race
#: id (protocol.limits.MAX_RACE_ID_LEN: :func:`race_id` makes none longer). A file's
#: ``race`` is bounded by it too: longer, it was printed whole in every line of
#: ``verify`` naming it. (The client's own bound was a bare 130, which no id reached.)
_RACE_REF: Final = re.compile(rf"[A-Za-z0-9_-][A-Za-z0-9_.-]{{0,{MAX_RACE_ID_LEN - 1}}}")


class ResultNotFound(LookupError):
    """No saved race has that id and no such file exists."""


def results_dir() -> Path:
    """Where finished races are saved (ConfigDirUnusable where they cannot be)."""
    return kept_in("races", "its finished races")


#: What a room id and a commitment are made of (docs/protocol.md §5, §15): anything
#: else a server sent is not let into a file name.
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


def race_id(room: str, result: Mapping[str, Any]) -> str:
    """The race's id (solrace.protocol.race_id, the scheme the server uses too), which
    names its file. Room and commitment come from the server: what a solrace server
    sends is left as it is, and anything else — a ``/``, a ``..`` — is replaced by
    ``_``, so a hostile server cannot make ``write_result`` write outside
    ``results_dir()`` (an audit saw ``room: "./../../x"`` write ``x.<c>.json`` two
    levels up, and ``room: "./."`` with commitment ``"/profile"`` replace
    ``profile.json``)."""
    commitment = result.get("commitment")
    safe_room = _UNSAFE.sub("_", str(room)[:MAX_ROOM_ID_LEN]) or "room"
    safe_commitment = _UNSAFE.sub("_", commitment) if isinstance(commitment, str) else None
    return protocol.race_id(safe_room, safe_commitment or None)


@dataclass(frozen=True)
class Acknowledged:
    """The moves the server acknowledged to one racer's own client (each ``moved``
    reply: the move sent and the seq it echoed), which the result's log of that racer
    must hold at those places. ``solrace verify`` takes the log on the server's word;
    the client that played it need not: a server that revealed a racer's log cut short,
    its standing made to match, got ✔ from that racer's bot (a tamper audit)."""

    racer: int
    #: seq (the move's place in the log, from 0) -> the move as sent.
    moves: Mapping[int, str]

    def to_json(self) -> dict[str, Any]:
        """As a file holds it: ``moves`` a list by seq, null where no reply came (a
        JSON map's keys are strings; a list says the seq by its place)."""
        length = max(self.moves, default=-1) + 1
        return {"racer": self.racer, "moves": [self.moves.get(seq) for seq in range(length)]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Acknowledged:
        moves = data["moves"]
        return cls(int(data["racer"]), {s: m for s, m in enumerate(moves) if m is not None})


@dataclass
class SavedResult:
    """One finished race as saved: enough to re-deal and replay every racer."""

    race: str
    room: str
    settings: dict[str, Any]
    result: dict[str, Any]
    code: str | None = None
    published_commitment: str | None = None
    saved_at_ms: int | None = None
    #: The round's deal as the lobby announced it (protocol Deal: certified, moves,
    #: difficulty), when the saving client saw it: ``verify`` holds a certified one to
    #: its certificate.
    deal: dict[str, Any] | None = None
    #: The server it was raced on, as the saving client was told it (``--server``: one
    #: URL, or several nodes of one deployment separated by commas): ``fetch`` asks it
    #: by default. None in a file saved before it was kept, and in the server's own.
    server: str | None = None
    #: The room's settings as the saving client saw them at the countdown (beside
    #: ``published_commitment``): the commitment binds the deal, not the settings, so
    #: ``verify`` holds the file's ``settings`` to these. None where it did not see it.
    countdown_settings: dict[str, Any] | None = None
    #: The moves the server acknowledged to the saving client, when it raced:
    #: ``verify`` holds that racer's revealed log to them.
    acknowledged: Acknowledged | None = None
    path: Path | None = field(default=None, compare=False)

    @property
    def variant(self) -> str:
        return str(self.settings["variant"])

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.settings.get("options") or {})

    @property
    def standings(self) -> list[dict[str, Any]]:
        return list(self.result.get("standings") or [])

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "race": self.race,
            "room": self.room,
            "code": self.code,
            "settings": self.settings,
            "result": self.result,
            "saved_at_ms": self.saved_at_ms,
        }
        if self.published_commitment is not None:
            data["published_commitment"] = self.published_commitment
        if self.deal is not None:
            data["deal"] = self.deal
        if self.server is not None:
            data["server"] = self.server
        if self.countdown_settings is not None:
            data["countdown_settings"] = self.countdown_settings
        if self.acknowledged is not None:
            data["acknowledged"] = self.acknowledged.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> SavedResult:
        """Read our own files and the server's stored results alike (the server's
        lack ``race``: it is rebuilt from room and commitment)."""
        where = "" if path is None else f"{path}: "
        missing = next((key for key in ("room", "result", "settings") if key not in data), None)
        if missing is not None:
            raise ValueError(f"{where}not a saved race result: missing {missing!r}")
        # Each part's kind is said as every other fault is ("malformed" named nothing),
        # and nothing is coerced: dict() read [] as a result without a seed.
        problem = next(
            (
                f"{key} {_is(data, key)}, not a map of {what}"
                for key, what in (
                    ("settings", "the room's settings"),
                    ("result", "the race's outcome"),
                )
                if not isinstance(data[key], Mapping)
            ),
            None,
        )
        if problem is None:
            settings, result = dict(data["settings"]), dict(data["result"])
            problem = _malformed(data, settings, result)
        if problem is not None:
            raise ValueError(f"{where}not a saved race result: {problem}")
        room = str(data["room"])
        published = data.get("published_commitment")
        seen = data.get("countdown_settings")
        acknowledged = data.get("acknowledged")
        return cls(
            race=str(data.get("race") or race_id(room, result)),
            room=room,
            settings=settings,
            result=result,
            code=data.get("code"),
            published_commitment=None if published is None else str(published),
            deal=dict(data["deal"]) if isinstance(data.get("deal"), Mapping) else None,
            saved_at_ms=data.get("saved_at_ms"),
            server=data.get("server"),
            countdown_settings=None if seen is None else dict(seen),
            acknowledged=None if acknowledged is None else Acknowledged.from_json(acknowledged),
            path=path,
        )


#: A standing's numbers: each a whole number or null where it is given.
def time_decimals(standings: Iterable[Mapping[str, Any]]) -> int:
    """Decimals of a second that tell the standings' finish times apart: 1, or 3 when
    two different times read the same in tenths (37,222 and 37,225 ms were both shown
    as 37.2, in different places)."""
    times = {t for s in standings if (t := finish_ms(s)) is not None}
    shown = {t: f"{t / 1000:.1f}" for t in times}
    return 3 if len(set(shown.values())) < len(shown) else 1


def finish_ms(standing: Mapping[str, Any]) -> int | None:
    """A standing's finish time (``elapsed_ms``) if it is whole milliseconds, else None:
    the race-over screen and the bot's table show a result before ``verify`` judged it,
    and a faulty or hostile server's ``"soon"`` ended them with a traceback (a list
    made :func:`time_decimals` one)."""
    elapsed: Any = standing.get("elapsed_ms")
    return int(elapsed) if _whole(elapsed) else None


_STANDING_NUMBERS: Final = ("place", "foundation", "moves", "score", "elapsed_ms", "reached_ms")


def counted(count: object, noun: str) -> str:
    """``1 card``, ``52 cards``: a count and its noun, singular for one (verify said
    ``1 cards up``)."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _malformed(
    data: Mapping[str, Any], settings: Mapping[str, Any], result: Mapping[str, Any]
) -> str | None:
    """What makes a result file unusable for ``replay`` and ``verify`` (and ``races``),
    in words, or None: the shape they read, checked once, where files are loaded.
    Values that are well-formed but wrong (a seed that does not match the commitment,
    an illegal move, doctored counts) are left to ``verify`` to catch."""
    if not isinstance(data.get("room"), str):
        return f"room {_is(data, 'room')}, not a room id"
    race = data.get("race", "")
    # One its room and commitment do not make fails verify's race id check; one
    # longer than any file's name is refused (a race id of 100,000 characters was
    # printed whole in each line naming it: a tamper audit).
    if not isinstance(race, str) or len(race) > MAX_RACE_ID_LEN:
        return f"race {_is(data, 'race')}, not a race id"
    if not isinstance(data.get("server", ""), str | None):
        return f"server {_is(data, 'server')}, not a server URL"
    if not _code(data.get("code")):
        # (a code of 5,000 characters was as long a line of `solrace races`)
        return f"code {_is(data, 'code')}, not a room code (1 to {MAX_CODE_LEN} letters or digits)"
    published = data.get("published_commitment")
    if published is not None and not is_commitment(published):
        # What the client saw at the countdown, checked as it came (12345 was compared
        # as its digits, "12345…", a FAIL).
        return (
            f"published_commitment {_is(data, 'published_commitment')}, not a commitment "
            "(64 lower-case hex digits)"
        )
    deal = data.get("deal")
    if deal is not None and not _deal(deal):
        return f"deal {_is(data, 'deal')}, not a deal (certified, moves, difficulty)"
    seen = data.get("countdown_settings")
    if seen is not None and not isinstance(seen, Mapping):
        return f"countdown_settings {_is(data, 'countdown_settings')}, not a map of settings"
    acknowledged = data.get("acknowledged")
    if acknowledged is not None and not _acknowledged(acknowledged):
        return (
            f"acknowledged {_is(data, 'acknowledged')}, not a racer and its moves "
            "acknowledged ({racer, moves: [move or null, …]})"
        )
    if acknowledged is not None and len(acknowledged["moves"]) > MAX_LOG_LEN:
        return _too_long("acknowledged.moves", acknowledged["moves"])
    variant = settings.get("variant")
    if not isinstance(variant, str) or variant not in VARIANTS:
        return f"settings.variant {_is(settings, 'variant')}, not one of {', '.join(VARIANTS)}"
    options = settings.get("options")
    if not isinstance(options, Mapping | None):  # null, or none given: no options
        return f"settings.options {_is(settings, 'options')}, not a map of options"
    given = options or {}
    for name, value in given.items():
        # a value of the wrong type (not one the variant refuses: verify's to fail)
        if name in OPTION_NAMES and not is_of_kind(name, value):
            return f"settings.options.{name} {_is(given, name)}, not {option_kind(name)}"
    limit = settings.get("time_limit_s")
    if not (isinstance(limit, int) and _whole(limit)) or not (
        MIN_TIME_LIMIT_S <= limit <= MAX_TIME_LIMIT_S
    ):
        # Every room has one; verify holds every move and finish to it (without one it
        # checked neither, and said OK to a finish at 10,000 s: a verify audit).
        return (
            f"settings.time_limit_s {_is(settings, 'time_limit_s')}, not a time limit of "
            f"{MIN_TIME_LIMIT_S} to {MAX_TIME_LIMIT_S} s"
        )
    seats = settings.get("max_racers")
    if not (isinstance(seats, int) and _whole(seats)) or not MIN_RACERS <= seats <= MAX_RACERS:
        # verify holds the standings to the room's seats (a "1", or none, checked none,
        # and a racer added to a full room verified OK: a tamper audit).
        return (
            f"settings.max_racers {_is(settings, 'max_racers')}, not a number of seats from "
            f"{MIN_RACERS} to {MAX_RACERS}"
        )
    problem = _unread_setting(settings)
    if problem is not None:
        return problem
    if not _whole_or_none(data.get("saved_at_ms")):
        return f"saved_at_ms {_is(data, 'saved_at_ms')}, not a whole number{_WHOLE}"
    if not _whole(result.get("seed")):
        return f"result.seed {_is(result, 'seed')}, not a whole number{_WHOLE}"
    certificate = result.get("certificate")
    if certificate is not None and not _moves(certificate):
        return f"result.certificate {_is(result, 'certificate')}, not a list of moves"
    if certificate is not None and len(certificate) > MAX_CERTIFICATE_LEN:
        return (
            f"result.certificate holds {len(certificate):,} moves, more than the "
            f"{MAX_CERTIFICATE_LEN:,} a server's message carries"
        )
    standings = result.get("standings")
    if not isinstance(standings, list):
        return f"result.standings {_is(result, 'standings')}, not a list of racers"
    if not standings:
        return "result.standings lists no racer"
    if len(standings) > MAX_RACERS:
        # No room seats more: 16,000 of them were each replayed and ranked (4.8 s, a
        # verify audit); verify holds the standings to the room's own seats.
        return (
            f"result.standings lists {len(standings):,} racers, more than the {MAX_RACERS} "
            "a room seats"
        )
    for i, standing in enumerate(standings):
        where = f"result.standings[{i}]"
        if not isinstance(standing, Mapping):
            return f"{where} is {json_quoted(standing)}, not a racer's standing"
        if not _racer_id(standing.get("racer")):
            return f"{where}.racer {_is(standing, 'racer')}, not a racer id{_RACER_IDS}"
        name = standing.get("name")
        # No server keeps a longer one (a name of 100,000 characters verified, and
        # each line of the report naming its racer was as long: a tamper audit).
        if not isinstance(name, str) or len(name) > MAX_NAME_LEN:
            return f"{where}.name {_is(standing, 'name')}, not a name"
        if not _moves(standing.get("log")):
            return f"{where}.log {_is(standing, 'log')}, not a list of moves"
        if len(standing["log"]) > MAX_LOG_LEN:
            return _too_long(f"{where}.log", standing["log"])
        times = standing.get("times")
        if times is not None and not (isinstance(times, list) and all(map(_whole, times))):
            return f"{where}.times {_is(standing, 'times')}, not a list of times{_WHOLE}"
        if times is not None and len(times) > MAX_LOG_LEN:
            return _too_long(f"{where}.times", times)
        for key in _STANDING_NUMBERS:
            if not _whole_or_none(standing.get(key)):
                return f"{where}.{key} {_is(standing, key)}, not a whole number{_WHOLE}"
    return None


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _spectator_delay(value: Any) -> bool:
    return _whole(value) and MIN_SPECTATOR_DELAY_S <= value <= MAX_SPECTATOR_DELAY_S


#: The room's settings (docs/protocol.md, RoomSettings) that no check of verify or replay
#: reads, each with its kind: held to it where the file has it (a file of an older
#: client may lack some), as the ones they read are. Taken of any type, a file's
#: ``"private": [1]`` or ``"deals": ["random"]`` verified OK (a verify audit). A key
#: RoomSettings does not define is ignored (verify compares it with the countdown's).
_UNREAD_SETTINGS: Final[dict[str, tuple[Callable[[Any], bool], str]]] = {
    "private": (_flag, "true or false"),
    "quick": (_flag, "true or false"),
    "spectator_delay_s": (
        _spectator_delay,
        f"a delay of {MIN_SPECTATOR_DELAY_S} to {MAX_SPECTATOR_DELAY_S} s",
    ),
    "deals": (lambda v: v in DEALS, f"one of {', '.join(DEALS)}"),
    "difficulty": (
        lambda v: v is None or v in DIFFICULTIES,
        f"one of {', '.join(DIFFICULTIES)} or null",
    ),
    "spectators": (lambda v: v in SPECTATORS, f"one of {', '.join(SPECTATORS)}"),
}


def _unread_setting(settings: Mapping[str, Any]) -> str | None:
    """The first of :data:`_UNREAD_SETTINGS` the file has of another kind, in words."""
    for key, (fits, kind) in _UNREAD_SETTINGS.items():
        if key in settings and not fits(settings[key]):
            return f"settings.{key} {_is(settings, key)}, not {kind}"
    return None


#: The longest certificate a file may hold: no list a server sends is longer (a client
#: decodes none: protocol.limits.SERVER_FRAME_LIMITS), and a longer one was replayed
#: whole (a million entries, 3 s: a verify audit).
MAX_CERTIFICATE_LEN: Final = SERVER_FRAME_LIMITS.max_array_len


def _too_long(where: str, entries: list[Any]) -> str:
    """A log (or its times, or the moves acknowledged in it) longer than any race
    holds: the server takes no entry past MAX_LOG_LEN (rooms/moves.py), so no server
    wrote the file. A log of 5,002 legal entries verified OK, one of 100,000 too, each
    replayed whole (a verify audit); said as the file's fault, as an entry longer than
    any move is, not as a race that fails to verify."""
    return f"{where} holds {len(entries):,} entries, more than the {MAX_LOG_LEN:,} a race allows"


#: The whole numbers a result holds are the protocol's (msgpack): 64 bits at most. A
#: larger one in a file overflowed verify's arithmetic (OverflowError: a verify audit).
MIN_WHOLE: Final = -(2**63)
MAX_WHOLE: Final = 2**64 - 1
_WHOLE: Final = " (64 bits at most)"


#: Racer ids are the server's: numbered from FIRST_RACER_ID in join order. A file's
#: racer 0 or -5 verified OK, each line of the report naming it (a verify audit).
_RACER_IDS: Final = f" (the server numbers racers from {FIRST_RACER_ID})"


def _racer_id(value: Any) -> bool:
    return _whole(value) and value >= FIRST_RACER_ID


def _whole(value: Any) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and MIN_WHOLE <= value <= MAX_WHOLE
    )


def _deal(value: Any) -> bool:
    """The lobby's Deal (docs/protocol.md), as the client checks it when it comes
    (protocol.views.deal_wire: moves from 1 or null, a difficulty the solver gives):
    verify holds a certified one to its certificate, so one it cannot read is not taken
    as none seen (a verify audit), and one of -5 moves is no lobby's word."""
    if not isinstance(value, Mapping):
        return False
    try:
        deal_wire(value)
    except ValueError:
        return False
    return True


def _code(value: Any) -> bool:
    """A room's code as the server issues them (protocol.messages.room_code), or none
    (``solrace fetch`` saves none)."""
    if value is None:
        return True
    try:
        return isinstance(value, str) and room_code(value) == value
    except ValueError:
        return False


def _acknowledged(value: Any) -> bool:
    """A file's :class:`Acknowledged`: a racer id and a list of moves by seq (null
    where no reply came)."""
    return (
        isinstance(value, Mapping)
        and _racer_id(value.get("racer"))
        and isinstance(value.get("moves"), list)
        and _moves([m for m in value["moves"] if m is not None])
    )


def _moves(value: Any) -> bool:
    """A list of moves: no server takes one longer than ``MAX_MOVE_LEN`` (a longer
    entry made verify's reason a line of thousands of characters)."""
    return isinstance(value, list) and all(
        isinstance(entry, str) and len(entry) <= MAX_MOVE_LEN for entry in value
    )


def _whole_or_none(value: Any) -> bool:
    return value is None or _whole(value)


def _is(obj: Mapping[str, Any], key: str) -> str:
    """``is missing``, or ``is <the value as in the file>``, for a message."""
    return f"is {json_quoted(obj[key])}" if key in obj else "is missing"


def finished_race(
    room: str,
    result: Mapping[str, Any],
    settings: Mapping[str, Any],
    code: str | None = None,
    *,
    published_commitment: str | None = None,
    deal: Mapping[str, Any] | None = None,
    server: str | None = None,
    countdown_settings: Mapping[str, Any] | None = None,
    acknowledged: Acknowledged | None = None,
) -> SavedResult:
    """A ``race_over`` (``result`` is its data) with the room's ``settings``, as
    :func:`write_result` saves it and ``verify`` reads it: the bot and the race-over
    screen verify this before (or without) saving. ``published_commitment`` is the
    commitment seen at the countdown, if the caller saw it; ``server`` the server it
    was raced on (``solrace fetch`` asks it); ``countdown_settings`` the room's settings
    seen then, and ``acknowledged`` the moves the server acknowledged to the caller, a
    racer."""
    return SavedResult(
        race=race_id(room, result),
        room=room,
        settings=dict(settings),
        result=dict(result),
        code=code,
        published_commitment=published_commitment,
        saved_at_ms=int(time.time() * 1000),
        deal=dict(deal) if deal else None,
        server=server,
        countdown_settings=None if countdown_settings is None else dict(countdown_settings),
        acknowledged=acknowledged,
    )


def write_result(saved: SavedResult) -> Path:
    """Save ``saved`` (see :func:`finished_race`) in :func:`results_dir`; returns the
    file. A race that already has a file keeps what the file holds: see
    :func:`kept_result`."""
    if not _RACE_REF.fullmatch(saved.race):  # race_id makes none: a last guard
        raise OSError(f"{saved.race!r} cannot name a file")
    directory = results_dir()
    make_private_dir(directory)  # the config directory's first save may be a result
    path = directory / f"{saved.race}.json"
    with _saving(directory):
        kept = saved
        if path.is_file():
            with_file = _readable(path)
            kept = saved if with_file is None else kept_result(with_file, saved)
        # A private temporary name: each replace is atomic and whole.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{saved.race}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(kept.to_json(), handle, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return path


#: What a saver knows only if it was there at the time (the countdown, the lobby, the
#: room's code, the moves acknowledged to a racer): a spectator who came late, or
#: ``fetch``, saves a race without them.
_WITNESSED: Final = (
    "published_commitment",
    "countdown_settings",
    "deal",
    "code",
    "acknowledged",
)
#: What a save of the same race adds where the file lacks it: the witnessed things, and
#: the server (a file saved before it was kept gets it from the next save).
_FILLED: Final = (*_WITNESSED, "server")


def kept_result(held: SavedResult, new: SavedResult) -> SavedResult:
    """What the file of a race holds after ``new`` is saved over ``held`` (its file).

    The one rule: a save never takes away what the file holds. The same race (room,
    settings and result alike) gets what ``new`` adds to it — a commitment, deal or
    code the file lacked — and keeps the file's own where both have one, and the first
    save's time. Two different stories of one race id (a server that told them apart)
    are not mixed: the file that saw more of the race is kept, the held one on a tie."""
    same = held.race == new.race and (held.room, held.settings, held.result) == (
        new.room,
        new.settings,
        new.result,
    )
    if not same:
        return new if _seen(new) > _seen(held) else held
    gaps = {key: getattr(new, key) for key in _FILLED if getattr(held, key) is None}
    return replace(held, **gaps)


def _seen(saved: SavedResult) -> int:
    """How many of the witnessed things a save holds."""
    return sum(getattr(saved, key) is not None for key in _WITNESSED)


def _readable(path: Path) -> SavedResult | None:
    """The saved race in ``path``, or None where it holds none to keep (unreadable,
    malformed): the new save replaces it."""
    try:
        return _read(path)
    except ValueError:
        return None


@contextmanager
def _saving(directory: Path) -> Iterator[None]:
    """Held while a result is read and written: two clients on one machine (a bot and
    a window watching its room) save one race at the same moment, and each one's
    read-then-write must see the other's file, or the later one loses what the
    earlier one added. The lock is the directory's own (no lock file among the
    results); where there is no ``flock`` (Windows) saves are not serialised."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load_result(ref: str | os.PathLike[str]) -> SavedResult:
    """A saved race by id (``<room>.<commitment prefix>``, or an unambiguous prefix of
    one), or a path to a result file. Raises :class:`ResultNotFound` or ValueError."""
    text = os.fspath(ref)
    if not text.strip():  # Path("") is the current directory: not what was meant
        raise ResultNotFound("no race given: the race id or file name is empty")
    candidate = Path(text)
    if candidate.is_file():
        return _read(candidate)
    # A saved race's file name (``r_….json``, as ``ls`` shows the races directory) names
    # that race from anywhere: it was refused "no saved race … in <that directory>" of a
    # file that was there (a newcomer's audit).
    stem = text.removesuffix(".json") if candidate.name == text else text
    if _RACE_REF.fullmatch(stem):
        exact = results_dir() / f"{stem}.json"
        if exact.is_file():
            return _read(exact)
        matches = [p for p in _files() if p.stem.startswith(stem)]
        if len(matches) == 1:
            return _read(matches[0])
        if len(matches) > 1:
            raise ResultNotFound(_several(stem, sorted(p.stem for p in matches)))
    if candidate.is_dir():
        raise ResultNotFound(f"{text} is a directory, not a race result file")
    if candidate.exists():  # a device or a pipe: it said "… and no such file" of it
        raise ResultNotFound(f"{text} is not a file: give a race id or a race file")
    raise ResultNotFound(f"no saved race {quoted(text)} in {results_dir()} and no such file")


def _read(path: Path) -> SavedResult:
    try:
        text = read_kept(path, MAX_RESULT_FILE_BYTES)
    except NotAFile as exc:
        raise ValueError(f"{path}: not a race result ({exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a race result (not text)") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read a race result: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except RecursionError:  # a hostile file: arrays nested a hundred thousand deep
        raise ValueError(f"{path}: not a race result: JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        why = f"not a race result (a race result is JSON; line {exc.lineno}: {exc.msg})"
        raise ValueError(f"{path}: {why}") from None
    except ValueError:  # a number past int()'s digit limit (a verify audit: said without the file)
        why = f"a number in it has more than {sys.get_int_max_str_digits()} digits"
        raise ValueError(f"{path}: not a race result ({why})") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: not a race result")
    return SavedResult.from_json(data, path)


#: Most saved races an ambiguous prefix names; past it, the first ones and how many more.
NAMED_MATCHES: Final = 3


def _several(text: str, names: list[str]) -> str:
    """An ambiguous race id prefix, said in one short line: ``solrace verify r`` on a
    computer of 200 saved races named all 200 (a 5 KB line)."""
    if len(names) <= NAMED_MATCHES:
        return f"{quoted(text)} matches several saved races: {', '.join(names)}"
    return (
        f"{quoted(text)} matches {len(names):,} saved races: "
        f"{', '.join(names[:NAMED_MATCHES])} and {len(names) - NAMED_MATCHES:,} more "
        "(solrace races lists them)"
    )


def _files() -> Iterator[Path]:
    directory = results_dir()
    if directory.is_dir():
        yield from directory.glob("*.json")


def last_revealed(*, room: str | None = None, code: str | None = None) -> dict[str, Any] | None:
    """The ``{seed, salt}`` of the newest race saved here of the room ``room`` (or, for
    a spectator who knows only the code, of a room with ``code``), or None: what a
    resume or watch from a new process sends back as the proof that the round's seed
    went out (docs/protocol.md, ``resume``) — the window that saw the race_over, and
    held it, is gone. A pair of another room (a code drawn again) proves nothing, and
    the server ignores it. Newest by the time a race was saved as it ended; a copy
    fetched from a server's archive has none and comes last."""
    for saved in list_results():
        if (room is not None and saved.room == room) or (code is not None and saved.code == code):
            pair = {"seed": saved.result.get("seed"), "salt": saved.result.get("salt")}
            if is_proof(pair):
                return pair
    return None


def list_results() -> list[SavedResult]:
    """Every readable saved race, newest first (what a resume's proof is looked for
    in: a file that cannot be read proves nothing)."""
    return read_results()[0]


def read_results() -> tuple[list[SavedResult], list[str]]:
    """Every readable saved race, newest first, and for each file that cannot be read
    why, naming it (``solrace races`` says so: left out in silence, a race cut short by
    a full disk seemed never saved)."""
    found: list[SavedResult] = []
    unreadable: list[str] = []
    for path in sorted(_files()):
        try:
            found.append(_read(path))
        except ValueError as exc:
            unreadable.append(str(exc))
    return sorted(found, key=lambda s: s.saved_at_ms or 0, reverse=True), unreadable
