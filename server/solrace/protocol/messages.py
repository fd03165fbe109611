"""Every message of protocol ``solrace.v1`` (docs/protocol.md is the contract).

Client → server: one frozen dataclass per request type, with ``from_data`` — the
validator the server runs on ``d`` — and ``to_data`` — what a client sends. Validation
is strict and precise: an unknown field, a missing one, a wrong type or a value out of
range each raise :class:`BadMessage` naming the field, so a client developer reads
``create.max_racers: must be an integer in 2..8, got 9`` instead of a generic failure,
and no half-checked value ever reaches the race or the store.

Server → client: one builder function per reply, room event and notice. Builders take
keyword arguments, check them through :mod:`.views` (which refuses anything that could
leak a face-down card or the seed) and return an :class:`Envelope`, so a wrongly shaped
server message is a crash in a test, not a surprise for clients.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self, cast

from ._check import is_int, is_int_in, type_name
from .envelope import Envelope
from .errors import BadMessage, ErrorCode, ProtocolError
from .fairness import MAX_SEED, RACE_ID, is_commitment, is_salt, race_id
from .limits import (
    DEFAULT_MAX_RACERS,
    DEFAULT_SPECTATOR_DELAY_S,
    DEFAULT_TIME_LIMIT_S,
    FIRST_RACER_ID,
    MAX_CODE_LEN,
    MAX_MOVE_LEN,
    MAX_NAME_LEN,
    MAX_OPTION_KEY_LEN,
    MAX_OPTION_STR_LEN,
    MAX_OPTIONS,
    MAX_RACE_ID_LEN,
    MAX_RACERS,
    MAX_ROOM_ID_LEN,
    MAX_ROOMS_LISTED,
    MAX_SEQ,
    MAX_SPECTATOR_DELAY_S,
    MAX_TIME_LIMIT_S,
    MAX_TOKEN_LEN,
    MAX_VARIANT_LEN,
    MAX_VERSION,
    MIN_PROPOSED_TOKEN_DISTINCT,
    MIN_PROPOSED_TOKEN_LEN,
    MIN_RACERS,
    MIN_SPECTATOR_DELAY_S,
    MIN_TIME_LIMIT_S,
    MIN_TOKEN_LEN,
)
from .views import (
    EventType,
    LeaveReason,
    OptionValue,
    Progress,
    RaceResult,
    RacerInfo,
    RacerStatus,
    RoomSummary,
    Snapshot,
    board_view_wire,
    code_wire,
    deal_wire,
    is_status,
    progress_wire,
    racer_wire,
    racers_wire,
    result_wire,
    room_summary_wire,
    settings_wire,
    snapshot_wire,
)

__all__ = [
    "CLIENT_MESSAGES",
    "EVENT_TYPES",
    "NOTICE_TYPES",
    "REPLY_TYPES",
    "UNDO",
    "ClientMessage",
    "CreateRoom",
    "FetchResult",
    "JoinRoom",
    "Leave",
    "ListRooms",
    "Ping",
    "PlayMove",
    "QuickRace",
    "Rematch",
    "Resign",
    "Resume",
    "Revealed",
    "SetReady",
    "StartRace",
    "Watch",
    "archived_reply",
    "board_notice",
    "countdown_event",
    "error_reply",
    "finished_event",
    "joined_reply",
    "moved_reply",
    "ok_reply",
    "parse_client_message",
    "pong_reply",
    "presence_event",
    "progress_event",
    "race_over_event",
    "racer_joined_event",
    "racer_left_event",
    "ready_changed_event",
    "request",
    "room_event",
    "room_reset_event",
    "rooms_reply",
    "started_event",
    "watching_reply",
]

UNDO: Final = "undo"

_VARIANT: Final = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_VARIANT_LEN - 1}}}")
_OPTION_KEY: Final = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_OPTION_KEY_LEN - 1}}}")
#: A room id as the server makes them (and as ``solrace verify`` holds a file's room to).
ROOM_ID: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_ROOM_ID_LEN}}}")
_CODE: Final = re.compile(rf"[A-Z0-9]{{1,{MAX_CODE_LEN}}}")
_TOKEN: Final = re.compile(rf"[A-Za-z0-9_-]{{{MIN_TOKEN_LEN},{MAX_TOKEN_LEN}}}")
#: The *shape* of canonical notation (docs/rules.md): cheap first filter so garbage never
#: reaches the store. Whether a column exists, or the move is legal, is the engine's
#: call (``solrace.rules.parse_move`` and ``Board.play``).
_COL: Final = r"[1-9][0-9]?"
_NOTATION: Final = re.compile(
    rf"{_COL}:[1-9][0-9]{{0,2}}>{_COL}|{_COL}>F|W>{_COL}|W>F|F[CDHS][12]?>{_COL}|D|R|U{_COL}"
)
_MAX_OPTION_INT: Final = 2**31 - 1
#: Zero-width joiner: a format character, but needed by emoji sequences in names.
_ZWJ: Final = "\u200d"
#: Control characters ``str.split`` takes for white space though Unicode does not (the
#: information separators): refused as control characters, not made spaces.
_SEPARATORS: Final = frozenset("\x1c\x1d\x1e\x1f")


# ====================================================================== validation
def room_code(raw: str) -> str:
    """A room code as typed by a human (``h77 mlr``, ``h77-mlr``) as the server issues
    it (``H77MLR``): case, white space and dashes are ignored, as docs/client.md promises
    the people who type them (a code read out or written down is often split in two; no
    code holds a dash). ValueError says why the rest is not a code: the server's check,
    which the command line runs too before it sends one."""
    value = "".join(raw.replace("-", " ").split()).upper()
    if _CODE.fullmatch(value) is None:
        raise ValueError(f"must be 1 to {MAX_CODE_LEN} letters or digits")
    return value


def display_name(raw: str) -> str:
    """A racer's display name as rooms keep it: white space trimmed and runs of it made
    one space, 1..MAX_NAME_LEN characters, no control or invisible formatting characters
    (which could spoof another racer's name or reorder text with bidirectional
    overrides). ValueError says why a name is refused: the server's check, which the
    command line runs too before it sends or remembers a name."""
    separator = next((char for char in raw if char in _SEPARATORS), None)
    if separator is not None:
        raise ValueError(f"must not contain the character U+{ord(separator):04X}")
    value = " ".join(raw.split())
    if not 1 <= len(value) <= MAX_NAME_LEN:
        raise ValueError(f"must be 1 to {MAX_NAME_LEN} characters after trimming")
    for char in value:
        category = unicodedata.category(char)
        if category[0] == "C" and char != _ZWJ:
            raise ValueError(f"must not contain the character U+{ord(char):04X}")
    if not any(_visible(char) for char in value):
        # A fuzzing audit joined as U+3164 alone, as combining marks alone, as a lone
        # variation selector: a racer nobody could see in a list or the standings.
        raise ValueError("must have a visible character (a letter, a digit or a symbol)")
    return value


#: Letters and symbols that draw nothing (Hangul fillers, the braille blank): a
#: name of these alone is as blank as one of spaces.
_BLANK: Final = frozenset("\u115f\u1160\u3164\uffa0\u2800")
#: Every character a name may hold that draws nothing: the blank letters above, the
#: zero-width joiner (allowed for emoji), the combining grapheme joiner, variation
#: selectors (U+FE00-FE0F, U+E0100-E01EF, Mongolian's) and Khmer's inherent vowels. Two
#: names that differ only by these look alike wherever names are shown: the room
#: compares names without them (race.decisions.name_key).
DRAWS_NOTHING: Final = _BLANK | frozenset(
    "\u034f\u17b4\u17b5\u180b\u180c\u180d\u180f\u200d"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def _visible(char: str) -> bool:
    """A character that draws something by itself: a letter, a digit, a punctuation
    mark or a symbol, not a blank one (marks and variation selectors draw only on
    another character)."""
    return unicodedata.category(char)[0] in "LNPS" and char not in _BLANK


class _Fields:
    """Reads the ``d`` of one request type, raising precise :class:`BadMessage`.

    ``nil`` and an absent field mean the same thing everywhere (docs/protocol.md), so a
    client may send every field or only the ones it sets.
    """

    __slots__ = ("d", "t")

    def __init__(self, t: str, d: Mapping[str, object], allowed: frozenset[str]) -> None:
        self.t = t
        self.d = d
        if d.keys() <= allowed:  # the usual request: one C-level check (every move)
            return
        unknown = sorted(str(k) for k in d if k not in allowed)
        if unknown:
            name = unknown[0][:32]
            expected = ", ".join(sorted(allowed)) or "none"
            raise BadMessage(
                ErrorCode.BAD_MESSAGE,
                f"{t}: unknown field {name!r} (fields: {expected})",
                field=name,
            )

    def fail(self, name: str, problem: str, code: ErrorCode = ErrorCode.BAD_MESSAGE) -> BadMessage:
        return BadMessage(code, f"{self.t}.{name}: {problem}", field=name)

    def wrong(self, name: str, expected: str, value: object) -> BadMessage:
        return self.fail(name, f"must be {expected}, got {type_name(value)}")

    def required(self, name: str) -> object:
        value = self.d.get(name)
        if value is None:
            raise self.fail(name, "missing required field")
        return value

    def text(self, name: str, max_len: int) -> str:
        """A required string of 1..``max_len`` characters."""
        return self._text(name, self.required(name), max_len)

    def _text(self, name: str, value: object, max_len: int) -> str:
        if not isinstance(value, str):
            raise self.wrong(name, "a string", value)
        if not 1 <= len(value) <= max_len:
            raise self.fail(name, f"must be 1 to {max_len} characters, got {len(value)}")
        return value

    def matching(self, name: str, value: str, pattern: re.Pattern[str], what: str) -> str:
        if pattern.fullmatch(value) is None:
            raise self.fail(name, f"must be {what}")
        return value

    def integer(self, name: str, lo: int, hi: int, default: int | None = None) -> int:
        """An integer in ``lo..hi``; required unless a ``default`` is given."""
        value = self.d.get(name)
        if value is None:
            if default is None:
                raise self.fail(name, "missing required field")
            return default
        if not is_int(value):
            raise self.wrong(name, f"an integer in {lo}..{hi}", value)
        if not lo <= value <= hi:
            raise self.fail(name, f"must be an integer in {lo}..{hi}, got {value}")
        return value

    def opt_integer(self, name: str, lo: int, hi: int) -> int | None:
        if self.d.get(name) is None:
            return None
        return self.integer(name, lo, hi)

    def boolean(self, name: str, default: bool | None = None) -> bool:
        value = self.d.get(name)
        if value is None:
            if default is None:
                raise self.fail(name, "missing required field")
            return default
        if not isinstance(value, bool):
            raise self.wrong(name, "a boolean", value)
        return value

    def name(self) -> str:
        """A display name (:func:`display_name`)."""
        raw = self.required("name")
        if not isinstance(raw, str):
            raise self.wrong("name", "a string", raw)
        try:
            return display_name(raw)
        except ValueError as err:
            raise self.fail("name", str(err)) from None

    def variant(self, name: str = "variant") -> str:
        value = self.text(name, MAX_VARIANT_LEN)
        return self.matching(name, value, _VARIANT, "a variant id such as 'yukon'")

    def room_id(self, name: str = "room") -> str:
        value = self.text(name, MAX_ROOM_ID_LEN)
        return self.matching(name, value, ROOM_ID, "a room id (letters, digits, '_' or '-')")

    def proposed_token(self) -> str | None:
        """The seat's secret a ``create``/``join``/``quick`` proposes (optional): the
        client holds it before the reply, so a lost reply costs a ``resume``, not a
        ghost seat. Random, so at least :data:`MIN_PROPOSED_TOKEN_LEN` characters, of
        at least :data:`MIN_PROPOSED_TOKEN_DISTINCT` different ones."""
        value = self.d.get("token")
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.wrong("token", "a string", value)
        if (
            not MIN_PROPOSED_TOKEN_LEN <= len(value) <= MAX_TOKEN_LEN
            or _TOKEN.fullmatch(value) is None
            or len(set(value)) < MIN_PROPOSED_TOKEN_DISTINCT
        ):
            raise self.fail(
                "token",
                f"must be a fresh random token of {MIN_PROPOSED_TOKEN_LEN} to {MAX_TOKEN_LEN}"
                " url-safe characters (letters, digits, '_', '-'; 128 random bits or more,"
                f" at least {MIN_PROPOSED_TOKEN_DISTINCT} different characters)",
            )
        return value

    def code(self, value: object) -> str:
        """A room code, as typed by a human (:func:`room_code`)."""
        if not isinstance(value, str):
            raise self.wrong("code", "a string", value)
        try:
            return room_code(value)
        except ValueError as exc:
            raise self.fail("code", str(exc)) from None

    def one_of(self, name: str, allowed: Sequence[str], default: str | None) -> Any:
        """A word from ``allowed`` (or ``default`` when absent)."""
        value = self.d.get(name)
        if value is None:
            return default
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(name, f"must be one of {', '.join(allowed)}")
        return value

    def options(self) -> dict[str, OptionValue]:
        value = self.d.get("options")
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.wrong("options", "a map", value)
        if len(value) > MAX_OPTIONS:
            raise self.fail("options", f"at most {MAX_OPTIONS} options")
        out: dict[str, OptionValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise self.wrong("options", "a map with string keys", key)
            where = f"options.{key[:MAX_OPTION_KEY_LEN]}"
            if _OPTION_KEY.fullmatch(key) is None:
                raise self.fail(where, "option names are lower-case identifiers")
            if isinstance(item, str):
                if len(item) > MAX_OPTION_STR_LEN:
                    raise self.fail(where, f"string options are at most {MAX_OPTION_STR_LEN} chars")
            elif is_int(item):
                if not -_MAX_OPTION_INT <= item <= _MAX_OPTION_INT:
                    raise self.fail(where, "integer option out of range")
            elif not (item is None or isinstance(item, bool)):
                raise self.wrong(where, "a boolean, integer, string or nil", item)
            out[key] = item
        return out

    def revealed(self) -> Revealed | None:
        """The optional proof that the client saw a round's ``race_over``
        (:class:`Revealed`): a map of exactly ``seed`` and ``salt``."""
        value = self.d.get("revealed")
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.wrong("revealed", "a map {seed, salt}", value)
        unknown = sorted(str(k)[:32] for k in value if k not in _REVEALED_FIELDS)
        if unknown:
            raise self.fail("revealed", f"unknown field {unknown[0]!r} (fields: salt, seed)")
        seed, salt = value.get("seed"), value.get("salt")
        if not (is_int(seed) and 0 <= seed <= MAX_SEED):
            raise self.fail("revealed", f"seed must be an integer in 0..{MAX_SEED}")
        if not is_salt(salt):
            raise self.fail("revealed", "salt must be 64 lower-case hex digits")
        assert isinstance(salt, str)
        return Revealed(seed=seed, salt=salt)


# ====================================================================== client → server
_REVEALED_FIELDS: Final = frozenset({"seed", "salt"})


@dataclass(frozen=True, slots=True)
class Revealed:
    """A round's ``seed`` and ``salt`` as its ``race_over`` revealed them, sent back
    with a ``resume`` or ``watch``: proof that the seed already went out. Nobody who
    did not see that race_over (or the room's result) can make the pair: the salt is
    256 bits of HMAC of the room's secret, a new one each round, so it names its round.
    A node that lost the race_over with the store (restarted on a restored one, or
    holding the room afresh) learns from it that the race the store holds is one whose
    deal a racer may know card by card (docs/fairness.md)."""

    seed: int
    salt: str

    def to_data(self) -> dict[str, object]:
        return {"seed": self.seed, "salt": self.salt}


@dataclass(frozen=True, slots=True)
class ListRooms:
    """``list``: public rooms, optionally of one variant. Reply: ``rooms``."""

    TYPE: ClassVar[str] = "list"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"variant"})
    variant: str | None = None

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        return cls(variant=f.variant() if d.get("variant") is not None else None)

    def to_data(self) -> dict[str, object]:
        return {} if self.variant is None else {"variant": self.variant}


@dataclass(frozen=True, slots=True)
class CreateRoom:
    """``create``: open a room and become its host and first racer. Reply: ``joined``."""

    TYPE: ClassVar[str] = "create"
    FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "variant",
            "options",
            "max_racers",
            "time_limit_s",
            "private",
            "spectator_delay_s",
            "name",
            "deals",
            "difficulty",
            "spectators",
            "token",
        }
    )
    variant: str
    name: str
    options: Mapping[str, OptionValue] = field(default_factory=dict)
    max_racers: int = DEFAULT_MAX_RACERS
    time_limit_s: int = DEFAULT_TIME_LIMIT_S
    private: bool = False
    spectator_delay_s: int = DEFAULT_SPECTATOR_DELAY_S
    #: None: the variant's default (``solrace.race.settings.default_deals``).
    deals: str | None = None
    difficulty: str | None = None
    spectators: str = "fair"
    #: The seat's secret, proposed by the client (None: the server draws one).
    token: str | None = None

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        return cls(
            variant=f.variant(),
            name=f.name(),
            options=f.options(),
            max_racers=f.integer("max_racers", MIN_RACERS, MAX_RACERS, DEFAULT_MAX_RACERS),
            time_limit_s=f.integer(
                "time_limit_s", MIN_TIME_LIMIT_S, MAX_TIME_LIMIT_S, DEFAULT_TIME_LIMIT_S
            ),
            private=f.boolean("private", False),
            spectator_delay_s=f.integer(
                "spectator_delay_s",
                MIN_SPECTATOR_DELAY_S,
                MAX_SPECTATOR_DELAY_S,
                DEFAULT_SPECTATOR_DELAY_S,
            ),
            deals=f.one_of("deals", ("winnable", "random"), None),
            difficulty=f.one_of("difficulty", ("easy", "medium", "hard"), None),
            spectators=f.one_of("spectators", ("fair", "open"), "fair"),
            token=f.proposed_token(),
        )

    def to_data(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "options": dict(self.options),
            "max_racers": self.max_racers,
            "time_limit_s": self.time_limit_s,
            "private": self.private,
            "spectator_delay_s": self.spectator_delay_s,
            "name": self.name,
            **({} if self.deals is None else {"deals": self.deals}),
            **({} if self.difficulty is None else {"difficulty": self.difficulty}),
            "spectators": self.spectators,
            **({} if self.token is None else {"token": self.token}),
        }


@dataclass(frozen=True, slots=True)
class JoinRoom:
    """``join``: join a room in its lobby by its code. Reply: ``joined``."""

    TYPE: ClassVar[str] = "join"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"code", "name", "token"})
    code: str
    name: str
    token: str | None = None

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        return cls(code=f.code(f.required("code")), name=f.name(), token=f.proposed_token())

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {"code": self.code, "name": self.name}
        return data if self.token is None else {**data, "token": self.token}


@dataclass(frozen=True, slots=True)
class QuickRace:
    """``quick``: join the public quick room of ``variant`` that is waiting for racers,
    or open one (default settings). Reply: ``joined``."""

    TYPE: ClassVar[str] = "quick"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"variant", "name", "token"})
    variant: str
    name: str
    token: str | None = None

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        return cls(variant=f.variant(), name=f.name(), token=f.proposed_token())

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {"variant": self.variant, "name": self.name}
        return data if self.token is None else {**data, "token": self.token}


@dataclass(frozen=True, slots=True)
class Resume:
    """``resume``: become racer ``token`` of ``room`` again on this connection.
    Reply: ``joined``, then the events after ``since``, then live events. ``code``
    (optional) is the room's join code as the client knows it, so that a refusal can
    name the room the way its user knows it even once the room is gone. ``room`` None:
    the seat a ``create``/``join``/``quick`` took with this token as its proposed one
    (its reply lost, the client does not know the room)."""

    TYPE: ClassVar[str] = "resume"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"room", "token", "since", "code", "revealed"})
    room: str | None
    token: str
    since: int | None = None
    code: str | None = None
    #: The last race_over of the room the client saw (:class:`Revealed`).
    revealed: Revealed | None = None

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        room = f.room_id() if d.get("room") is not None else None
        token = f.text("token", MAX_TOKEN_LEN)
        f.matching("token", token, _TOKEN, "the token received in joined")
        code = f.code(d["code"]) if d.get("code") is not None else None
        return cls(
            room=room,
            token=token,
            since=f.opt_integer("since", 0, MAX_VERSION),
            code=code,
            revealed=f.revealed(),
        )

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {"token": self.token}
        if self.room is not None:
            data["room"] = self.room
        if self.since is not None:
            data["since"] = self.since
        if self.code is not None:
            data["code"] = self.code
        if self.revealed is not None:
            data["revealed"] = self.revealed.to_data()
        return data


@dataclass(frozen=True, slots=True)
class Watch:
    """``watch``: spectate a room named by ``room`` id or by ``code`` (exactly one).
    Reply: ``watching``, then the events after ``since``, then live events."""

    TYPE: ClassVar[str] = "watch"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"room", "code", "since", "revealed"})
    room: str | None = None
    code: str | None = None
    since: int | None = None
    #: As in :class:`Resume`.
    revealed: Revealed | None = None

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        has_room = d.get("room") is not None
        has_code = d.get("code") is not None
        if has_room == has_code:
            raise f.fail("room", "give exactly one of room and code")
        return cls(
            room=f.room_id() if has_room else None,
            code=f.code(d["code"]) if has_code else None,
            since=f.opt_integer("since", 0, MAX_VERSION),
            revealed=f.revealed(),
        )

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {}
        if self.room is not None:
            data["room"] = self.room
        if self.code is not None:
            data["code"] = self.code
        if self.since is not None:
            data["since"] = self.since
        if self.revealed is not None:
            data["revealed"] = self.revealed.to_data()
        return data


@dataclass(frozen=True, slots=True)
class SetReady:
    """``ready``: say whether this racer is ready to start. Reply: ``ok``.
    ``spectators: "open"`` with ``ready: true`` also agrees to open spectating in a
    private room that offers it (docs/fairness.md): every racer must agree."""

    TYPE: ClassVar[str] = "ready"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"ready", "spectators"})
    ready: bool
    spectators: str | None = None

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        return cls(ready=f.boolean("ready"), spectators=f.one_of("spectators", ("open",), None))

    def to_data(self) -> dict[str, object]:
        data: dict[str, object] = {"ready": self.ready}
        if self.spectators is not None:
            data["spectators"] = self.spectators
        return data


@dataclass(frozen=True, slots=True)
class PlayMove:
    """``move``: play ``move`` (canonical notation or ``"undo"``) as this racer's move
    number ``seq`` (its count of moves already accepted). Reply: ``moved`` or ``error``.

    ``seq`` makes moves idempotent across reconnects: the store appends a move only if
    the log holds exactly ``seq`` entries, so a retried move is refused (``bad_seq``),
    never applied twice.
    """

    TYPE: ClassVar[str] = "move"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"seq", "move"})
    seq: int
    move: str

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        seq = f.integer("seq", 0, MAX_SEQ)
        move = f.required("move")
        if not isinstance(move, str):
            raise f.wrong("move", "a string", move)
        if move != UNDO and (len(move) > MAX_MOVE_LEN or _NOTATION.fullmatch(move) is None):
            err = f.fail(
                "move",
                f"{move[:MAX_MOVE_LEN]!r} is not canonical notation "
                "(c:k>d, c>F, W>d, W>F, Fs>d, Fsn>d, D, R, Uc) or 'undo'",
                ErrorCode.BAD_NOTATION,
            )
            err.seq = seq
            raise err
        return cls(seq=seq, move=move)

    def to_data(self) -> dict[str, object]:
        return {"seq": self.seq, "move": self.move}


class _Empty:
    """Requests without fields: any ``d`` key is refused, so a typo'd request built for
    another type cannot be silently accepted as this one."""

    __slots__ = ()
    TYPE: ClassVar[str]

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        _Fields(cls.TYPE, d, frozenset())
        return cls()

    def to_data(self) -> dict[str, object]:
        return {}


@dataclass(frozen=True, slots=True)
class StartRace(_Empty):
    """``start``: the host starts the countdown. Reply: ``ok``."""

    TYPE: ClassVar[str] = "start"


@dataclass(frozen=True, slots=True)
class Resign(_Empty):
    """``resign``: stop playing; the racer stays in the room, ranked. Reply: ``ok``."""

    TYPE: ClassVar[str] = "resign"


@dataclass(frozen=True, slots=True)
class Leave(_Empty):
    """``leave``: leave the room (a racer mid-race forfeits). Reply: ``ok``."""

    TYPE: ClassVar[str] = "leave"


@dataclass(frozen=True, slots=True)
class Rematch(_Empty):
    """``rematch``: after ``race_over``, reset the room to a new lobby. Reply: ``ok``."""

    TYPE: ClassVar[str] = "rematch"


@dataclass(frozen=True, slots=True)
class Ping(_Empty):
    """``ping``: liveness and clock check. Reply: ``pong`` with the server's clock."""

    TYPE: ClassVar[str] = "ping"


@dataclass(frozen=True, slots=True)
class FetchResult:
    """``result``: the result this server archived for the finished race ``race`` (its
    race id, ``<room>.<commitment[:8]>``). Reply: ``archived``. So a result file can be
    compared with the server's own copy: nothing in a file vouches for itself."""

    TYPE: ClassVar[str] = "result"
    FIELDS: ClassVar[frozenset[str]] = frozenset({"race"})
    race: str

    @classmethod
    def from_data(cls, d: Mapping[str, object]) -> Self:
        f = _Fields(cls.TYPE, d, cls.FIELDS)
        race = f.text("race", MAX_RACE_ID_LEN)
        return cls(race=f.matching("race", race, RACE_ID, "a race id (<room>.<8 hex digits>)"))

    def to_data(self) -> dict[str, object]:
        return {"race": self.race}


ClientMessage = (
    ListRooms
    | CreateRoom
    | JoinRoom
    | QuickRace
    | Resume
    | Watch
    | SetReady
    | StartRace
    | PlayMove
    | Resign
    | Leave
    | Rematch
    | Ping
    | FetchResult
)

#: Request type → validator. The keys are exactly the client message types of v1.
CLIENT_MESSAGES: Final[Mapping[str, Callable[[Mapping[str, object]], ClientMessage]]] = {
    cls.TYPE: cls.from_data
    for cls in (
        ListRooms,
        CreateRoom,
        JoinRoom,
        QuickRace,
        Resume,
        Watch,
        SetReady,
        StartRace,
        PlayMove,
        Resign,
        Leave,
        Rematch,
        Ping,
        FetchResult,
    )
}


def parse_client_message(envelope: Envelope) -> ClientMessage:
    """Validate a decoded request. Raises :class:`BadMessage` carrying the request id,
    so the caller can answer with ``error_reply(err)`` and keep the connection."""
    try:
        if envelope.v is not None:
            raise BadMessage(ErrorCode.BAD_MESSAGE, "requests do not carry v (room versions)")
        parse = CLIENT_MESSAGES.get(envelope.t)
        if parse is None:
            raise BadMessage(ErrorCode.UNKNOWN_TYPE, f"unknown message type {envelope.t!r}")
        return parse(envelope.d)
    except BadMessage as err:
        err.request_id = envelope.id
        raise


def request(message: ClientMessage, request_id: int | None = None) -> Envelope:
    """The envelope a client sends for ``message``."""
    return Envelope(message.TYPE, id=request_id, d=message.to_data())


# ====================================================================== server → client
REPLY_TYPES: Final = frozenset(
    {"rooms", "joined", "watching", "moved", "pong", "ok", "error", "archived"}
)
EVENT_TYPES: Final = frozenset(EventType)
NOTICE_TYPES: Final = frozenset({"board", "resync"})


def _out_int(name: str, value: object, lo: int = 0, hi: int = 2**63 - 1) -> int:
    if not is_int_in(value, lo, hi):
        raise ValueError(f"{name}: expected an integer in {lo}..{hi}, got {value!r}")
    return value


def _commitment(value: object) -> str:
    if not is_commitment(value):
        raise ValueError("commitment: expected 64 lower-case hex digits")
    assert isinstance(value, str)
    return value


def _event(t: str, v: int, d: Mapping[str, object]) -> Envelope:
    return Envelope(t, v=_out_int("v", v, 1), d=d)


# ---------------------------------------------------------------- replies
def rooms_reply(request_id: int | None, rooms: Sequence[RoomSummary]) -> Envelope:
    """``rooms``: public rooms, at most ``MAX_ROOMS_LISTED``."""
    if len(rooms) > MAX_ROOMS_LISTED:
        raise ValueError(f"rooms: at most {MAX_ROOMS_LISTED}, got {len(rooms)}")
    listed = [room_summary_wire(r, f"rooms[{i}]") for i, r in enumerate(rooms)]
    return Envelope("rooms", id=request_id, d={"rooms": listed})


def archived_reply(
    request_id: int | None,
    *,
    race: str,
    room: str,
    settings: Mapping[str, object],
    deal: Mapping[str, object] | None,
    result: RaceResult,
) -> Envelope:
    """``archived``: the result the server saved when race ``race`` ended — the only
    reply besides a finished room's snapshot that carries a seed, and only of a race
    that is over. The room's code is left out: it may still open the room."""
    wire = result_wire(result)
    if ROOM_ID.fullmatch(room) is None or race != race_id(room, str(wire["commitment"])):
        raise ValueError(f"archived: race {race!r} must be room {room!r}'s race of this result")
    d: dict[str, object] = {
        "race": race,
        "room": room,
        "settings": settings_wire(settings),
        "deal": None if deal is None else deal_wire(deal),
        "result": wire,
    }
    return Envelope("archived", id=request_id, d=d)


def joined_reply(
    request_id: int | None,
    *,
    room: str,
    code: str,
    racer: int,
    token: str,
    snapshot: Snapshot,
    replay: int = 0,
) -> Envelope:
    """``joined``: this connection is racer ``racer`` of ``room``. The only message
    that carries ``token``, and it goes only to that racer. ``replay`` events (versions
    ``snapshot.version - replay + 1 .. snapshot.version``) follow immediately."""
    snap = snapshot_wire(snapshot)
    _same_room(room, snap)
    you = snap["you"]
    if not isinstance(you, dict) or you["racer"] != racer:
        raise ValueError("joined: the snapshot's you must be this racer")
    if _TOKEN.fullmatch(token) is None:
        raise ValueError("joined: token must be url-safe text of 16 to 128 characters")
    d = {
        "room": room,
        "code": code_wire(code),
        "racer": _out_int("racer", racer, FIRST_RACER_ID),
        "token": token,
        "snapshot": snap,
        "replay": _replay(replay, snap),
    }
    return Envelope("joined", id=request_id, d=d)


def watching_reply(
    request_id: int | None, *, room: str, snapshot: Snapshot, replay: int = 0
) -> Envelope:
    """``watching``: this connection spectates ``room``."""
    snap = snapshot_wire(snapshot)
    _same_room(room, snap)
    if snap["you"] is not None:
        raise ValueError("watching: a spectator's snapshot has no you")
    d = {"room": room, "snapshot": snap, "replay": _replay(replay, snap)}
    return Envelope("watching", id=request_id, d=d)


def _same_room(room: str, snap: Mapping[str, object]) -> None:
    if ROOM_ID.fullmatch(room) is None or snap["room"] != room:
        raise ValueError(f"room {room!r} must be a room id and the snapshot's room")


def _replay(replay: int, snap: Mapping[str, object]) -> int:
    version = snap["version"]
    assert isinstance(version, int)
    return _out_int("replay", replay, 0, version)


def moved_reply(
    request_id: int | None,
    *,
    seq: int,
    board: Mapping[str, object],
    status: RacerStatus | str,
    moves: int,
    score: int,
) -> Envelope:
    """``moved``: move ``seq`` was accepted and durably logged; the next is ``seq + 1``.
    ``board`` is the racer's own view after the move (and any auto-complete)."""
    if not is_status(status):
        raise ValueError(f"moved: unknown status {status!r}")
    d = {
        "seq": _out_int("seq", seq),
        "board": board_view_wire(board, owner=True),
        "status": str(status),
        "moves": _out_int("moves", moves),
        "score": _out_int("score", score, -(2**31), 2**31),
    }
    return Envelope("moved", id=request_id, d=d)


def pong_reply(request_id: int | None, *, now_ms: int) -> Envelope:
    """``pong``: the server's clock (Unix ms), for the client's offset estimate."""
    return Envelope("pong", id=request_id, d={"now_ms": _out_int("now_ms", now_ms)})


def ok_reply(request_id: int | None) -> Envelope:
    """``ok``: the request (``ready``, ``start``, ``resign``, ``leave``, ``rematch``)
    was done; its effect arrives as a room event."""
    return Envelope("ok", id=request_id)


def error_reply(error: ProtocolError, request_id: int | None = None) -> Envelope:
    """``error``: the request was refused. ``request_id`` defaults to the one a
    :class:`BadMessage` carries (``parse_client_message`` sets it)."""
    d: dict[str, object] = {"code": error.code.value, "message": error.message}
    if isinstance(error, BadMessage):
        if request_id is None:
            request_id = error.request_id
        for key in ("field", "seq", "expected", "retry_after_ms", "room", "token"):
            value = getattr(error, key)
            if value is not None:
                d[key] = value
    return Envelope("error", id=request_id, d=d)


# ---------------------------------------------------------------- room events
def racer_joined_event(v: int, racer: RacerInfo) -> Envelope:
    """``racer_joined``: a racer entered the lobby (the creator's is the room's v 1)."""
    return _event("racer_joined", v, racer_wire(racer))


#: Why a racer left: it asked to (``left``) or was away longer than the grace.
LEFT_REASONS: Final = frozenset(LeaveReason)


def racer_left_event(
    v: int, *, racer: int, host: int | None, reason: str = LeaveReason.LEFT
) -> Envelope:
    """``racer_left``: ``racer`` left (``reason`` ``left``) or was away longer than the
    disconnect grace (``grace``). In the lobby it is removed; later it stays listed
    with status ``left``. ``host`` is the host after the departure."""
    if reason not in LEFT_REASONS:
        raise ValueError(f"racer_left: reason must be one of {sorted(LEFT_REASONS)}")
    d = {
        "racer": _out_int("racer", racer, FIRST_RACER_ID),
        "host": _opt_racer("host", host),
        "reason": reason,
    }
    return _event("racer_left", v, d)


def _opt_racer(name: str, value: int | None) -> int | None:
    return None if value is None else _out_int(name, value, FIRST_RACER_ID)


def ready_changed_event(v: int, *, racer: int, ready: bool, open_boards: bool = False) -> Envelope:
    """``ready_changed``; ``open_boards`` (only when true) says the racer's ready flag
    names open spectating: it agrees to spectators seeing whole boards."""
    if not isinstance(ready, bool) or not isinstance(open_boards, bool):
        raise ValueError("ready_changed: ready and open_boards are booleans")
    d: dict[str, object] = {"racer": _out_int("racer", racer, FIRST_RACER_ID), "ready": ready}
    if open_boards:
        d["open_boards"] = True
    return _event("ready_changed", v, d)


def countdown_event(
    v: int, *, start_at_ms: int, commitment: str, open_boards: bool = False
) -> Envelope:
    """``countdown``: the race starts at ``start_at_ms``; the deal is committed.
    ``open_boards`` (only when true): every racer agreed to open spectating."""
    d: dict[str, object] = {
        "start_at_ms": _out_int("start_at_ms", start_at_ms),
        "commitment": _commitment(commitment),
    }
    if open_boards is True:
        d["open_boards"] = True
    return _event("countdown", v, d)


def started_event(v: int, *, start_at_ms: int, ends_at_ms: int, commitment: str) -> Envelope:
    """``started``: moves are accepted from now until ``ends_at_ms``. Each racer's own
    board follows as a ``board`` notice (per recipient, so not in this event)."""
    d = {
        "start_at_ms": _out_int("start_at_ms", start_at_ms),
        "ends_at_ms": _out_int("ends_at_ms", ends_at_ms),
        "commitment": _commitment(commitment),
    }
    return _event("started", v, d)


def progress_event(v: int, progress: Progress) -> Envelope:
    """``progress``: a racer's counts or status changed (never its cards)."""
    return _event("progress", v, progress_wire(progress))


def finished_event(
    v: int, *, racer: int, place: int, elapsed_ms: int, foundation: int, moves: int
) -> Envelope:
    """``finished``: ``racer`` completed every foundation, in ``place``."""
    d = {
        "racer": _out_int("racer", racer, FIRST_RACER_ID),
        "place": _out_int("place", place, 1),
        "elapsed_ms": _out_int("elapsed_ms", elapsed_ms),
        "foundation": _out_int("foundation", foundation),
        "moves": _out_int("moves", moves),
        "face_down": 0,
        "status": RacerStatus.FINISHED.value,
    }
    return _event("finished", v, d)


def race_over_event(v: int, result: RaceResult) -> Envelope:
    """``race_over``: final standings, move logs, and the reveal of seed and salt —
    the only event that ever carries the seed."""
    return _event("race_over", v, result_wire(result))


def room_reset_event(v: int, *, host: int | None, racers: Sequence[RacerInfo]) -> Envelope:
    """``room_reset``: a rematch turned the finished room back into a lobby."""
    wire = racers_wire(racers)
    for r in wire:
        if r["status"] != RacerStatus.WAITING or r["ready"]:
            raise ValueError("room_reset: every racer starts waiting and not ready")
    return _event("room_reset", v, {"host": _opt_racer("host", host), "racers": wire})


def deal_chosen_event(
    v: int, *, certified: bool, moves: int | None, difficulty: str | None
) -> Envelope:
    """``deal_chosen``: the round's deal is ready. ``certified``: a solver won it (its
    line, the certificate, is committed at the countdown and revealed in
    ``race_over``). This server sends ``moves`` None and ``difficulty`` as the room
    asked (rooms.certify.announced: the line's length and the band found name where
    cards lie, docs/fairness.md); a server of an earlier release sent both as found."""
    wire = deal_wire({"certified": certified, "moves": moves, "difficulty": difficulty})
    return _event("deal_chosen", v, wire)


def presence_event(v: int, *, racer: int, online: bool) -> Envelope:
    """``presence``: a racer's connection dropped (``online`` false) or came back.
    A racer offline for the disconnect grace during a race is then ``racer_left``."""
    if not isinstance(online, bool):
        raise ValueError("presence: online is a boolean")
    return _event(
        "presence", v, {"racer": _out_int("racer", racer, FIRST_RACER_ID), "online": online}
    )


def room_event(t: str, v: int, d: Mapping[str, Any]) -> Envelope:
    """The checked envelope of room event ``t`` (an :class:`EventType`) from its data
    ``d``: the server keeps events as ``solrace.race.events.RoomEvent`` and sends each
    through its builder, so a malformed or leaking event is a server error here rather
    than bytes on the wire."""
    if t == EventType.RACER_JOINED:
        return racer_joined_event(v, cast(RacerInfo, d))
    if t == EventType.PROGRESS:
        return progress_event(v, cast(Progress, d))
    if t == EventType.RACE_OVER:
        return race_over_event(v, cast(RaceResult, d))
    if t == EventType.FINISHED:
        return finished_event(
            v,
            racer=d["racer"],
            place=d["place"],
            elapsed_ms=d["elapsed_ms"],
            foundation=d["foundation"],
            moves=d["moves"],
        )
    builder = _BUILDERS.get(t)
    if builder is None:
        raise ValueError(f"unknown room event type {t!r}")
    return builder(v, **d)


#: The builders of the events whose data are plain keyword arguments.
_BUILDERS: Final[dict[str, Callable[..., Envelope]]] = {
    EventType.RACER_LEFT: racer_left_event,
    EventType.READY_CHANGED: ready_changed_event,
    EventType.COUNTDOWN: countdown_event,
    EventType.STARTED: started_event,
    EventType.ROOM_RESET: room_reset_event,
    EventType.PRESENCE: presence_event,
    EventType.DEAL_CHOSEN: deal_chosen_event,
}


# ---------------------------------------------------------------- notices
def board_notice(*, racer: int, at_ms: int, view: Mapping[str, object], owner: bool) -> Envelope:
    """``board``: racer ``racer``'s board as it was at ``at_ms``. Not versioned: each
    notice is a whole view, so a lost one is replaced by the next.

    ``owner`` is True when the recipient *is* that racer (its own board at the start);
    spectators get ``owner=False`` views, only after the room's spectator delay.
    """
    d = {
        "racer": _out_int("racer", racer, FIRST_RACER_ID),
        "at_ms": _out_int("at_ms", at_ms),
        "view": board_view_wire(view, owner=owner),
    }
    return Envelope("board", d=d)


def resync_notice(*, reason: str, lost_events: int, snapshot: Snapshot) -> Envelope:
    """``resync``: the server's store lost changes this client may have seen (Redis
    came back without its last writes). ``snapshot`` replaces everything the client
    folded — including event versions, which may now be reused — and ``reason`` says
    what was lost, for the user. ``lost_events`` counts versions the store no longer
    has (0 when it has as many, but different ones)."""
    if not isinstance(reason, str) or not reason:
        raise ValueError("resync: reason is a non-empty string")
    d = {
        "reason": reason,
        "lost_events": _out_int("lost_events", lost_events),
        "snapshot": snapshot_wire(snapshot),
    }
    return Envelope("resync", d=d)
