"""The shapes of what the server shows: board views, racers, snapshots, standings.

This module is the last gate before hidden information could reach the wire, so it
does not trust its callers either. Each ``*_wire`` function copies exactly the keys
the contract (docs/protocol.md) allows, checks every type, and raises ``ValueError``
on anything else — an unknown key, a lower-case (face-down) card in a view, a seed in a
snapshot of a race that is not over. A server bug then crashes loudly in a test
instead of leaking a card to a client. (``ValueError``, not ``ProtocolError``: the
fault is the server's, not the peer's.)

The ``TypedDict`` classes describe the same shapes statically, for the server that
builds them and for clients that read them (``cast(Snapshot, env.d["snapshot"])``
after decoding).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum
from typing import Final, NotRequired, TypedDict, cast

from ._check import is_int, is_int_in, type_name
from .fairness import MAX_SEED, is_commitment, is_salt
from .limits import FIRST_RACER_ID, MAX_RACERS, ROOM_CODE_ALPHABET

OptionValue = bool | int | str | None


class Phase(StrEnum):
    """A room's phase. ``lobby`` → ``countdown`` → ``racing`` → ``finished``, and back
    to ``lobby`` on a rematch (``room_reset``)."""

    LOBBY = "lobby"
    COUNTDOWN = "countdown"
    RACING = "racing"
    FINISHED = "finished"


class RacerStatus(StrEnum):
    """A racer's status. ``waiting`` before the race starts; ``playing`` during it;
    the others are how a racer's race ended (``stuck`` may be left again by an undo,
    when the room allows undo)."""

    WAITING = "waiting"
    PLAYING = "playing"
    FINISHED = "finished"
    STUCK = "stuck"
    RESIGNED = "resigned"
    LEFT = "left"
    TIMEOUT = "timeout"


class EndReason(StrEnum):
    """Why ``race_over`` was sent."""

    ALL_DONE = "all_done"  # no racer is still playing
    TIME_LIMIT = "time_limit"  # the room's time limit ran out
    ABANDONED = "abandoned"  # every racer left


class EventType(StrEnum):
    """A room event's type (docs/protocol.md §7): the room's history is these, in
    version order, and nothing else."""

    RACER_JOINED = "racer_joined"
    RACER_LEFT = "racer_left"
    READY_CHANGED = "ready_changed"
    COUNTDOWN = "countdown"
    STARTED = "started"
    PROGRESS = "progress"
    FINISHED = "finished"
    RACE_OVER = "race_over"
    ROOM_RESET = "room_reset"
    PRESENCE = "presence"
    DEAL_CHOSEN = "deal_chosen"


class LeaveReason(StrEnum):
    """Why ``racer_left`` was sent."""

    LEFT = "left"  # the racer asked
    GRACE = "grace"  # away longer than the disconnect grace


# ------------------------------------------------------------------ static shapes
class Column(TypedDict):
    down: int
    #: ``None`` is a face-up card whose identity a fair view withholds.
    up: Sequence[str | None]


class BoardView(TypedDict):
    """A board as its viewer may see it (``solrace.rules.view``): face-down cards are
    only counted (``down``, ``stock``). ``stock_cards`` exists only in the owner's view
    of a thoughtful Klondike game, whose stock is dealt face up to its player."""

    variant: str
    options: Mapping[str, OptionValue]
    tableau: Sequence[Column]
    foundations: Mapping[str, int | Sequence[int]]
    stock: int
    waste: Sequence[str | None]
    recycles: int
    stock_cards: NotRequired[Sequence[str]]
    #: In a fair view (spectators): foundation cards whose identity is withheld.
    withheld_foundation: NotRequired[int]


class RoomSettings(TypedDict):
    variant: str
    options: Mapping[str, OptionValue]
    max_racers: int
    time_limit_s: int
    private: bool
    spectator_delay_s: int
    quick: bool
    deals: str
    difficulty: str | None
    spectators: str


class Deal(TypedDict):
    """The round's deal as the lobby may know it: whether a solver certified it
    winnable, and the difficulty the room asked for (``moves`` is None: the winning
    line's length, with the public solver, names where cards lie; docs/fairness.md).
    A server of an earlier release sent the length and the band its solver found."""

    certified: bool
    moves: int | None
    difficulty: str | None


class Progress(TypedDict):
    """A racer's public progress: counts only, never cards."""

    racer: int
    foundation: int
    moves: int
    face_down: int
    status: str
    place: int | None


class RacerInfo(TypedDict):
    racer: int
    name: str
    ready: bool
    status: str
    foundation: int
    moves: int
    face_down: int
    place: int | None


class SnapshotRacer(RacerInfo):
    """A racer in a snapshot: its RacerInfo and whether it is connected now, as the
    ``presence`` events left it. A snapshot is the client's whole state after a resume
    or watch (§10): without it, a client back from away showed a racer who had come
    back meanwhile as offline (it had seen the "offline", and the replayed "online" is
    not folded again: an audit)."""

    online: bool


class You(TypedDict):
    """The recipient's own game, in a racer's snapshot only."""

    racer: int
    board: Mapping[str, object] | None
    next_seq: int
    moves: int
    score: int
    status: str


class Standing(TypedDict):
    place: int
    racer: int
    name: str
    status: str
    foundation: int
    moves: int
    score: int
    elapsed_ms: int | None
    reached_ms: int | None
    log: Sequence[str]
    #: Each log entry's time on the race clock (ms since the start), in log order.
    #: Absent from races that ended before results carried it (archives, stored
    #: race_over events), which must still go out.
    times: NotRequired[Sequence[int]]


class RaceResult(TypedDict):
    reason: str
    standings: Sequence[Standing]
    seed: int
    salt: str
    commitment: str
    #: A certified deal's winning line (the certificate), revealed with the seed.
    certificate: Sequence[str] | None


class Snapshot(TypedDict):
    room: str
    code: str
    version: int
    phase: str
    settings: RoomSettings
    host: int | None
    racers: Sequence[SnapshotRacer]
    spectators: int
    now_ms: int
    start_at_ms: int | None
    ends_at_ms: int | None
    commitment: str | None
    you: You | None
    result: RaceResult | None
    deal: Deal | None


class RoomSummary(TypedDict):
    room: str
    code: str
    variant: str
    options: Mapping[str, OptionValue]
    phase: str
    racers: int
    max_racers: int
    time_limit_s: int
    spectator_delay_s: int
    quick: bool
    host: str | None


# ------------------------------------------------------------------ runtime gates
#: A face-up card: rank then suit, upper case. A lower-case card is a face-down card
#: in position notation, and must never appear in a view.
_FACE_UP: Final = re.compile(r"[A2-9TJQK][CDHS]")
_SUITS: Final = ("C", "D", "H", "S")
#: The 52 strings ``_FACE_UP`` matches: a set lookup checks a card of every outgoing
#: board in a fraction of a regex match's time (the gate runs on every frame).
_FACE_UP_CARDS: Final[frozenset[str | None]] = frozenset(
    r + s for r in "A23456789TJQK" for s in _SUITS
)
_CARDS_OR_WITHHELD: Final[frozenset[str | None]] = _FACE_UP_CARDS | {None}
_MAX_RANK: Final = 13
_MAX_COUNT: Final = 2**31 - 1


def _keys(where: str, obj: object, required: frozenset[str], optional: frozenset[str]) -> None:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a map, got {type_name(obj)}")
    keys = set(obj)
    missing = required - keys
    if missing:
        raise ValueError(f"{where}: missing {sorted(missing)}")
    extra = keys - required - optional
    if extra:
        raise ValueError(f"{where}: keys not in the contract {sorted(map(str, extra))}")


def _int(where: str, value: object, lo: int = 0, hi: int = _MAX_COUNT) -> int:
    if not is_int_in(value, lo, hi):
        raise ValueError(f"{where}: expected an integer in {lo}..{hi}, got {value!r}")
    return value


def _opt_int(where: str, value: object, lo: int = 0, hi: int = _MAX_COUNT) -> int | None:
    return None if value is None else _int(where, value, lo, hi)


def _str(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {type_name(value)}")
    return value


def _bool(where: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{where}: expected a boolean, got {type_name(value)}")
    return value


#: Each enum's values as a set, made on first use (``__members__.values()`` is a new
#: view searched item by item on every call, and the gate runs on every frame).
_ENUM_VALUES: dict[type[StrEnum], frozenset[str]] = {}


def _values(enum: type[StrEnum]) -> frozenset[str]:
    values = _ENUM_VALUES.get(enum)
    if values is None:
        values = _ENUM_VALUES[enum] = frozenset(m.value for m in enum)
    return values


def _enum(where: str, value: object, enum: type[StrEnum]) -> str:
    if not isinstance(value, str) or value not in _values(enum):
        raise ValueError(f"{where}: {value!r} is not one of {[m.value for m in enum]}")
    return value


_STATUSES: Final = _values(RacerStatus)


def is_status(value: object) -> bool:
    """Whether ``value`` is a :class:`RacerStatus` value."""
    return isinstance(value, str) and value in _STATUSES


#: How a racer's race can have ended, in a result: nobody is ``waiting`` or
#: ``playing`` once a race is over (a racer still playing at the time limit is
#: ``timeout``).
FINAL_STATUSES: Final = frozenset(_STATUSES - {RacerStatus.WAITING, RacerStatus.PLAYING})


def end_reason(statuses: Collection[str]) -> EndReason:
    """Why a race whose racers ended with ``statuses`` is over: ``abandoned`` when every
    racer left, ``time_limit`` when one was still racing at the limit, else ``all_done``.
    The server decides ``race_over`` by it and ``solrace verify`` holds a result to it."""
    if statuses and all(s == RacerStatus.LEFT for s in statuses):
        return EndReason.ABANDONED
    if any(s == RacerStatus.TIMEOUT for s in statuses):
        return EndReason.TIME_LIMIT
    return EndReason.ALL_DONE


def _is_card(card: object) -> bool:
    return type(card) is str and card in _FACE_UP_CARDS


def _not_a_card(where: object, card: object) -> ValueError:
    return ValueError(f"{where}: {card!r} is not a face-up card; views never hold others")


def _all_in(allowed: frozenset[str | None], cards: Sequence[object]) -> bool:
    """Every item is in ``allowed``, checked in one C-level pass (the usual case);
    False on anything unhashable, which the item-by-item check then names."""
    try:
        return allowed.issuperset(cards)
    except TypeError:
        return False


def _cards(where: object, value: object) -> list[str]:
    cards = _seq(where, value, "an array of cards")
    if not _all_in(_FACE_UP_CARDS, cards):
        for card in cards:
            if not _is_card(card):
                raise _not_a_card(where, card)
    return cast("list[str]", list(cards))  # every item checked just above


def _cards_or_withheld(where: object, value: object, owner: bool) -> list[str | None]:
    """Cards of a view; in a view for anyone but the board's player, ``None`` stands
    for a face-up card whose identity the fair view withholds."""
    if owner:
        return list(_cards(where, value))
    cards = _seq(where, value, "an array of cards")
    if not _all_in(_CARDS_OR_WITHHELD, cards):
        for card in cards:
            if card is not None and not _is_card(card):
                raise _not_a_card(where, card)
    return cast("list[str | None]", list(cards))  # every item checked just above


def _seq(where: object, value: object, what: str = "an array") -> Sequence[object]:
    if type(value) is list or type(value) is tuple:  # the common case, without the ABC
        return value
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{where}: expected {what}, got {type_name(value)}")
    return value


_OPTION_SCALARS: Final = (bool, int, str)


def options_wire(where: str, options: object) -> dict[str, OptionValue]:
    """Room options: string keys, scalar values (bool, int, str or nil)."""
    # type() first: the ABC check of isinstance(…, Mapping) costs more than the rest
    # on the common case, a plain dict (every outgoing board carries its options)
    if type(options) is not dict and not isinstance(options, Mapping):
        raise ValueError(f"{where}: expected a map, got {type_name(options)}")
    out: dict[str, OptionValue] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ValueError(f"{where}: option keys are strings, got {type_name(key)}")
        if not (value is None or isinstance(value, _OPTION_SCALARS)):
            raise ValueError(f"{where}.{key}: option values are scalars, got {type_name(value)}")
        out[key] = value
    return out


_COLUMN_KEYS: Final = frozenset({"down", "up"})
_SUIT_KEYS: Final = frozenset(_SUITS)


class _Where:
    """A tableau column's place in a view for error messages, formatted only when one
    is raised (the gate runs on every outgoing board: most never fail)."""

    __slots__ = ("column", "view")

    def __init__(self, view: str, column: int) -> None:
        self.view, self.column = view, column

    def __str__(self) -> str:
        return f"{self.view}.tableau[{self.column}].up"


_BOARD_REQUIRED: Final = frozenset(
    {"variant", "options", "tableau", "foundations", "stock", "waste", "recycles"}
)
_BOARD_OPTIONAL: Final = frozenset({"stock_cards", "withheld_foundation"})
_BOARD_KEYS: Final = _BOARD_REQUIRED | _BOARD_OPTIONAL
# Where-texts of a board view's fields, made once (the gate runs on every board).
_BOARD: Final = "board view"
_BOARD_VARIANT: Final = f"{_BOARD}.variant"
_BOARD_TABLEAU: Final = f"{_BOARD}.tableau"
_BOARD_OPTIONS: Final = f"{_BOARD}.options"
_BOARD_STOCK: Final = f"{_BOARD}.stock"
_BOARD_WASTE: Final = f"{_BOARD}.waste"
_BOARD_RECYCLES: Final = f"{_BOARD}.recycles"


def board_view_wire(view: Mapping[str, object], *, owner: bool) -> dict[str, object]:
    """A checked copy of a board view (``solrace.rules.view`` output).

    ``owner`` says whether the recipient is the board's own player: only then may the
    view carry ``stock_cards`` (thoughtful Klondike). Every card must be face up; the
    face-down ones exist only as counts.
    """
    where = _BOARD
    if type(view) is not dict or not _BOARD_REQUIRED <= view.keys() <= _BOARD_KEYS:
        _keys(where, view, _BOARD_REQUIRED, _BOARD_OPTIONAL)
    tableau: list[dict[str, object]] = []
    allowed = _FACE_UP_CARDS if owner else _CARDS_OR_WITHHELD
    # The usual case first, in as few Python steps as possible (every outgoing board
    # comes through here; error texts are formatted only when one is raised); anything
    # unusual goes through the checks that say why.
    for i, column in enumerate(_seq(_BOARD_TABLEAU, view["tableau"])):
        if type(column) is not dict or column.keys() != _COLUMN_KEYS:
            _keys(f"{where}.tableau[{i}]", column, _COLUMN_KEYS, frozenset())
        column = cast("Mapping[str, object]", column)
        down, up = column["down"], column["up"]
        if type(down) is not int or not 0 <= down <= _MAX_COUNT:
            _int(f"{where}.tableau[{i}].down", down)
        if type(up) is list and _all_in(allowed, up):
            tableau.append({"down": down, "up": up.copy()})
        else:
            tableau.append({"down": down, "up": _cards_or_withheld(_Where(where, i), up, owner)})
    foundations = view["foundations"]
    if not isinstance(foundations, Mapping) or foundations.keys() != _SUIT_KEYS:
        raise ValueError(f"{where}.foundations: expected a map with keys C, D, H, S")
    found_out: dict[str, object] = {}
    for suit in _SUITS:
        ranks = foundations[suit]
        if type(ranks) is int and 0 <= ranks <= _MAX_RANK:
            found_out[suit] = ranks
        elif is_int(ranks):
            found_out[suit] = _int(f"{where}.foundations.{suit}", ranks, 0, _MAX_RANK)
        else:
            found_out[suit] = [
                _int(f"{where}.foundations.{suit}", r, 0, _MAX_RANK)
                for r in _seq(f"{where}.foundations.{suit}", ranks)
            ]
    out: dict[str, object] = {
        "variant": _str(_BOARD_VARIANT, view["variant"]),
        "options": options_wire(_BOARD_OPTIONS, view["options"]),
        "tableau": tableau,
        "foundations": found_out,
        "stock": _int(_BOARD_STOCK, view["stock"]),
        "waste": _cards_or_withheld(_BOARD_WASTE, view["waste"], owner),
        "recycles": _int(_BOARD_RECYCLES, view["recycles"]),
    }
    if "withheld_foundation" in view:
        if owner:
            raise ValueError(f"{where}: an owner's view withholds nothing")
        out["withheld_foundation"] = _int(
            f"{where}.withheld_foundation", view["withheld_foundation"]
        )
    if "stock_cards" in view:
        if not owner:
            raise ValueError(f"{where}: stock_cards may only be sent to the board's owner")
        out["stock_cards"] = _cards(f"{where}.stock_cards", view["stock_cards"])
    return out


def settings_wire(settings: Mapping[str, object]) -> dict[str, object]:
    where = "settings"
    _keys(where, settings, frozenset(RoomSettings.__annotations__), frozenset())
    return {
        "variant": _str(f"{where}.variant", settings["variant"]),
        "options": options_wire(f"{where}.options", settings["options"]),
        "max_racers": _int(f"{where}.max_racers", settings["max_racers"], 1, MAX_RACERS),
        "time_limit_s": _int(f"{where}.time_limit_s", settings["time_limit_s"]),
        "private": _bool(f"{where}.private", settings["private"]),
        "spectator_delay_s": _int(f"{where}.spectator_delay_s", settings["spectator_delay_s"]),
        "quick": _bool(f"{where}.quick", settings["quick"]),
        "deals": _choice(f"{where}.deals", settings["deals"], ("winnable", "random")),
        "difficulty": _opt_choice(
            f"{where}.difficulty", settings["difficulty"], ("easy", "medium", "hard")
        ),
        "spectators": _choice(f"{where}.spectators", settings["spectators"], ("fair", "open")),
    }


def _choice(where: str, value: object, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}")
    return value


def _opt_choice(where: str, value: object, allowed: Sequence[str]) -> str | None:
    return None if value is None else _choice(where, value, allowed)


def deal_wire(deal: Mapping[str, object], where: str = "deal") -> dict[str, object]:
    _keys(where, deal, frozenset(Deal.__annotations__), frozenset())
    return {
        "certified": _bool(f"{where}.certified", deal["certified"]),
        "moves": _opt_int(f"{where}.moves", deal["moves"], 1),
        "difficulty": _opt_choice(
            f"{where}.difficulty", deal["difficulty"], ("easy", "medium", "hard", "very hard")
        ),
    }


_PROGRESS_KEYS: Final = frozenset(Progress.__annotations__)


def progress_wire(progress: Mapping[str, object], where: str = "progress") -> dict[str, object]:
    # The usual case in a few steps (every move's progress event comes through here);
    # anything else goes through the checks that say what is wrong.
    if type(progress) is dict and progress.keys() == _PROGRESS_KEYS:
        racer, foundation, moves = progress["racer"], progress["foundation"], progress["moves"]
        face_down, status, place = progress["face_down"], progress["status"], progress["place"]
        if (
            type(racer) is int
            and 1 <= racer <= _MAX_COUNT
            and type(foundation) is int
            and 0 <= foundation <= _MAX_COUNT
            and type(moves) is int
            and 0 <= moves <= _MAX_COUNT
            and type(face_down) is int
            and 0 <= face_down <= _MAX_COUNT
            and isinstance(status, str)  # a RacerStatus (the move path's) or its text
            and status in _STATUSES
            and (place is None or (type(place) is int and 1 <= place <= _MAX_COUNT))
        ):
            return {
                "racer": racer,
                "foundation": foundation,
                "moves": moves,
                "face_down": face_down,
                "status": status,
                "place": place,
            }
    _keys(where, progress, _PROGRESS_KEYS, frozenset())
    return {
        "racer": _int(f"{where}.racer", progress["racer"], FIRST_RACER_ID),
        "foundation": _int(f"{where}.foundation", progress["foundation"]),
        "moves": _int(f"{where}.moves", progress["moves"]),
        "face_down": _int(f"{where}.face_down", progress["face_down"]),
        "status": _enum(f"{where}.status", progress["status"], RacerStatus),
        "place": _opt_int(f"{where}.place", progress["place"], 1),
    }


def racer_wire(racer: Mapping[str, object], where: str = "racer") -> dict[str, object]:
    _keys(where, racer, frozenset(RacerInfo.__annotations__), frozenset())
    return {
        "racer": _int(f"{where}.racer", racer["racer"], FIRST_RACER_ID),
        "name": _str(f"{where}.name", racer["name"]),
        "ready": _bool(f"{where}.ready", racer["ready"]),
        "status": _enum(f"{where}.status", racer["status"], RacerStatus),
        "foundation": _int(f"{where}.foundation", racer["foundation"]),
        "moves": _int(f"{where}.moves", racer["moves"]),
        "face_down": _int(f"{where}.face_down", racer["face_down"]),
        "place": _opt_int(f"{where}.place", racer["place"], 1),
    }


def racers_wire(racers: object) -> list[dict[str, object]]:
    return [racer_wire(_map(r), f"racers[{i}]") for i, r in enumerate(_seq("racers", racers))]


def snapshot_racer_wire(racer: Mapping[str, object], where: str) -> dict[str, object]:
    _keys(where, racer, frozenset(SnapshotRacer.__annotations__), frozenset())
    info = {key: value for key, value in racer.items() if key != "online"}
    return {**racer_wire(info, where), "online": _bool(f"{where}.online", racer["online"])}


def _map(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a map, got {type_name(value)}")
    return value


_STANDING_REQUIRED: Final = frozenset(Standing.__annotations__) - {"times"}


def standing_wire(standing: Mapping[str, object], where: str = "standing") -> dict[str, object]:
    _keys(where, standing, _STANDING_REQUIRED, frozenset({"times"}))
    log = _seq(f"{where}.log", standing["log"])
    out = {
        "place": _int(f"{where}.place", standing["place"], 1),
        "racer": _int(f"{where}.racer", standing["racer"], FIRST_RACER_ID),
        "name": _str(f"{where}.name", standing["name"]),
        "status": _enum(f"{where}.status", standing["status"], RacerStatus),
        "foundation": _int(f"{where}.foundation", standing["foundation"]),
        "moves": _int(f"{where}.moves", standing["moves"]),
        "score": _int(f"{where}.score", standing["score"], -_MAX_COUNT),
        "elapsed_ms": _opt_int(f"{where}.elapsed_ms", standing["elapsed_ms"]),
        "reached_ms": _opt_int(f"{where}.reached_ms", standing["reached_ms"]),
        "log": [_str(f"{where}.log[{i}]", entry) for i, entry in enumerate(log)],
    }
    if "times" in standing:
        times = _seq(f"{where}.times", standing["times"])
        if len(times) != len(log):
            raise ValueError(f"{where}.times: {len(times)} times for {len(log)} log entries")
        out["times"] = [_int(f"{where}.times[{i}]", at) for i, at in enumerate(times)]
    return out


def result_wire(result: Mapping[str, object]) -> dict[str, object]:
    """The end of a race: the only place a seed may ever appear."""
    where = "result"
    _keys(where, result, frozenset(RaceResult.__annotations__), frozenset())
    salt = _str(f"{where}.salt", result["salt"])
    commitment = _str(f"{where}.commitment", result["commitment"])
    if not is_salt(salt):
        raise ValueError(f"{where}.salt: expected 64 lower-case hex digits")
    if not is_commitment(commitment):
        raise ValueError(f"{where}.commitment: expected 64 lower-case hex digits")
    standings = _seq(f"{where}.standings", result["standings"])
    return {
        "reason": _enum(f"{where}.reason", result["reason"], EndReason),
        "standings": [
            standing_wire(_map(s), f"{where}.standings[{i}]") for i, s in enumerate(standings)
        ],
        "seed": _int(f"{where}.seed", result["seed"], 0, MAX_SEED),
        "salt": salt,
        "commitment": commitment,
        "certificate": _opt_moves(f"{where}.certificate", result["certificate"]),
    }


def _opt_moves(where: str, value: object) -> list[str] | None:
    if value is None:
        return None
    moves = _seq(where, value)
    if not all(isinstance(m, str) and m for m in moves):
        raise ValueError(f"{where}: expected moves in notation")
    return [str(m) for m in moves]


def you_wire(you: Mapping[str, object]) -> dict[str, object]:
    where = "you"
    _keys(where, you, frozenset(You.__annotations__), frozenset())
    board = you["board"]
    return {
        "racer": _int(f"{where}.racer", you["racer"], FIRST_RACER_ID),
        "board": None if board is None else board_view_wire(_map(board), owner=True),
        "next_seq": _int(f"{where}.next_seq", you["next_seq"]),
        "moves": _int(f"{where}.moves", you["moves"]),
        "score": _int(f"{where}.score", you["score"], -_MAX_COUNT),
        "status": _enum(f"{where}.status", you["status"], RacerStatus),
    }


def snapshot_wire(snapshot: Mapping[str, object]) -> dict[str, object]:
    """A checked copy of a snapshot. ``result`` (seed and salt) is required when the
    phase is ``finished`` and refused in every other phase; a commitment is required
    once the countdown has begun."""
    where = "snapshot"
    _keys(where, snapshot, frozenset(Snapshot.__annotations__), frozenset())
    phase = _enum(f"{where}.phase", snapshot["phase"], Phase)
    result = snapshot["result"]
    if phase == Phase.FINISHED and result is None:
        raise ValueError(f"{where}: a finished room's snapshot carries its result")
    if phase != Phase.FINISHED and result is not None:
        raise ValueError(f"{where}: the seed is secret until the race is over ({phase})")
    commitment = snapshot["commitment"]
    if commitment is not None and not (isinstance(commitment, str) and is_commitment(commitment)):
        raise ValueError(f"{where}.commitment: expected 64 lower-case hex digits or nil")
    if phase != Phase.LOBBY and commitment is None:
        raise ValueError(f"{where}.commitment: required once the countdown has begun")
    you = snapshot["you"]
    return {
        "room": _str(f"{where}.room", snapshot["room"]),
        "code": code_wire(snapshot["code"]),
        "version": _int(f"{where}.version", snapshot["version"], 0, 2**63 - 1),
        "phase": phase,
        "settings": settings_wire(_map(snapshot["settings"])),
        "host": _opt_int(f"{where}.host", snapshot["host"], FIRST_RACER_ID),
        "racers": [
            snapshot_racer_wire(_map(r), f"{where}.racers[{i}]")
            for i, r in enumerate(_seq(f"{where}.racers", snapshot["racers"]))
        ],
        "spectators": _int(f"{where}.spectators", snapshot["spectators"]),
        "now_ms": _int(f"{where}.now_ms", snapshot["now_ms"], 0, 2**63 - 1),
        "start_at_ms": _opt_int(f"{where}.start_at_ms", snapshot["start_at_ms"], 0, 2**63 - 1),
        "ends_at_ms": _opt_int(f"{where}.ends_at_ms", snapshot["ends_at_ms"], 0, 2**63 - 1),
        "commitment": commitment,
        "you": None if you is None else you_wire(_map(you)),
        "result": None if result is None else result_wire(_map(result)),
        "deal": None if snapshot["deal"] is None else deal_wire(_map(snapshot["deal"])),
    }


def room_summary_wire(room: Mapping[str, object], where: str = "room") -> dict[str, object]:
    _keys(where, room, frozenset(RoomSummary.__annotations__), frozenset())
    host = room["host"]
    return {
        "room": _str(f"{where}.room", room["room"]),
        "code": code_wire(room["code"]),
        "variant": _str(f"{where}.variant", room["variant"]),
        "options": options_wire(f"{where}.options", room["options"]),
        "phase": _enum(f"{where}.phase", room["phase"], Phase),
        "racers": _int(f"{where}.racers", room["racers"], 0, MAX_RACERS),
        "max_racers": _int(f"{where}.max_racers", room["max_racers"], 1, MAX_RACERS),
        "time_limit_s": _int(f"{where}.time_limit_s", room["time_limit_s"]),
        "spectator_delay_s": _int(f"{where}.spectator_delay_s", room["spectator_delay_s"]),
        "quick": _bool(f"{where}.quick", room["quick"]),
        "host": None if host is None else _str(f"{where}.host", host),
    }


def code_wire(code: object) -> str:
    """A room code as the server issues it: upper case, from ``ROOM_CODE_ALPHABET``."""
    if not isinstance(code, str) or not code or any(c not in ROOM_CODE_ALPHABET for c in code):
        raise ValueError(f"room code {code!r} is not made of {ROOM_CODE_ALPHABET}")
    return code
