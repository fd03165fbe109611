"""The room as a client knows it: a snapshot, kept current by the room's events
(docs/protocol.md §7, §10), plus the boards that notices and ``moved`` replies bring.

This is the client's one fold. :class:`~solrace_client.connection.RaceClient` feeds
every frame into its :class:`RoomView` as it arrives, so the terminal client, the bot
and programs using the library all read the same state, folded the same way. Pure: no
I/O, no clock.

Each change mirrors the server's own fold (:mod:`solrace.race.state`), so after the
same events the view says what a fresh snapshot would — the tests check exactly that.
Versions follow the protocol's client algorithm: an event at or below the known version
is already in the state (a replayed one) and is skipped; the next version is folded; any
other is a gap, which is *not* folded — the view sets :attr:`RoomView.needs_resync` and
folds nothing more until a snapshot is loaded again (folding past a gap would show a room
that never existed).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, cast

from solrace.protocol import Envelope
from solrace.protocol.limits import MAX_LOG_LEN
from solrace.protocol.views import board_view_wire
from solrace.rules import VARIANTS
from solrace.rules import deal as deal_board
from solrace.rules.options import OPTION_NAMES, is_of_kind, option_kind

from . import wire
from .boardview import decks_of
from .printable import printable
from .results import Acknowledged

#: How long past a race's time limit (its ``ends_at_ms``) a client waits for the
#: ``race_over`` a server sends at that limit before it says the race will not end: the
#: bot gives up and exits 1, the terminal UI says so (q quits). Both waited forever on
#: a server that never ended the race (an audit). docs/client.md.
RACE_OVER_GRACE_S: Final = 60.0


class Fold(StrEnum):
    """What :meth:`RoomView.apply` did with one envelope."""

    APPLIED = "applied"  # the next version: folded
    OLD = "old"  # at or below the known version: already in the state, skipped
    GAP = "gap"  # versions are missing: not folded; the view needs a resync
    NOTICE = "notice"  # not versioned (``board``, ``resync``, anything else): taken as is


#: How many rounds' ends a view keeps (:attr:`RoomView.overs`): a reader a round behind
#: the fold is already far behind; more would keep every old round's move logs.
KEPT_OVERS: Final = 4


@dataclass(frozen=True)
class RoundOver:
    """One round's end as the view folded it — its ``race_over`` (or a finished room's
    snapshot) at ``version`` — with what this client had seen of that round: what a
    saved race holds (:func:`solrace_client.results.finished_race`). Kept past the
    ``room_reset`` that clears the room: the view folds frames as they arrive, ahead of
    whoever reads them, and the terminal UI, reading a ``race_over`` after a quick
    rematch had reset the view, found no result and saved no race (an audit: 0 of 3
    rounds saved by a slow window)."""

    version: int
    room: str | None
    code: str | None
    settings: dict[str, Any]
    result: dict[str, Any]
    published_commitment: str | None
    deal: dict[str, Any] | None
    #: The room's settings as seen at the countdown (None where it was not seen).
    countdown_settings: dict[str, Any] | None = None
    #: This racer's moves the server acknowledged that round (None for a spectator).
    acknowledged: Acknowledged | None = None


#: A racer's entry: the protocol's RacerInfo, plus ``online`` from the snapshot (or, from
#: an older server, once a ``presence`` event said so) and ``elapsed_ms`` once it finished.
Racer = dict[str, Any]


class RoomView:
    """One room, folded from a snapshot and the events after it."""

    def __init__(self) -> None:
        self.room: str | None = None
        self.code: str | None = None
        self.version = 0
        self.phase: str | None = None
        self.settings: dict[str, Any] = {}
        self.host: int | None = None
        self.racers: dict[int, Racer] = {}
        #: The server's clock in the last snapshot (for the clock offset).
        self.now_ms: int | None = None
        self.start_at_ms: int | None = None
        self.ends_at_ms: int | None = None
        self.commitment: str | None = None
        #: The commitment as announced before the seed was revealed (countdown, start, or
        #: a snapshot taken then): what ``verify`` checks the revealed seed against. The
        #: countdown's stays: a ``started`` that names another does not replace it; a
        #: snapshot after the reveal naming another drops it (:meth:`load`).
        self.published_commitment: str | None = None
        #: The room's settings as they were when :attr:`published_commitment` was
        #: seen: not under the commitment, so ``verify`` holds a saved file's to them.
        #: Kept and dropped with it.
        self.countdown_settings: dict[str, Any] | None = None
        #: This round's moves the server acknowledged to this racer, by seq (each
        #: ``moved``: the move sent, the seq echoed): its revealed log must hold them.
        self.acknowledged: dict[int, str] = {}
        self.result: dict[str, Any] | None = None
        #: The round's deal once chosen (protocol Deal: certified, moves, difficulty).
        self.deal: dict[str, Any] | None = None
        #: This racer (None for a spectator).
        self.me: int | None = None
        #: This racer's own game (protocol You: board, next_seq, moves, score, status).
        self.you: dict[str, Any] | None = None
        #: Every other racer's latest board, ``racer -> (at_ms, view)`` (spectators).
        self.boards: dict[int, tuple[int, dict[str, Any]]] = {}
        #: The names seen since the round began (and this racer's), so a racer gone from
        #: the lobby can still be named. A rematch forgets the rest: racer ids are
        #: never reused, and a room its passers-by join and leave kept each for ever.
        self.names: dict[int, str] = {}
        #: The snapshot last loaded, as it came.
        self.snapshot: dict[str, Any] | None = None
        self.loaded = False
        #: A gap was seen: load a fresh snapshot (``resume``/``watch`` with ``since``).
        self.needs_resync = False
        #: The last rounds' ends, by the version that ended them (:class:`RoundOver`).
        self.overs: dict[int, RoundOver] = {}
        #: The last ``race_over`` of this room the client saw, as ``{seed, salt}``: sent
        #: back with a resume or watch (the protocol's ``revealed``), it proves to a node
        #: that lost that race_over with its store that the round's seed went out, and
        #: that round, back under way, is not raced again (docs/fairness.md). Kept past
        #: the rematch and any later snapshot of the room; dropped for another room.
        self.revealed: dict[str, Any] | None = None
        #: The version :attr:`revealed` was kept at.
        self.revealed_at: int | None = None

    # ------------------------------------------------------------ snapshot
    def load(self, snapshot: Mapping[str, Any], racer: int | None = None) -> None:
        """Replace everything with ``snapshot`` (an entry, resume, watch or resync
        reply's); ``racer`` is who this client is, when the reply says so. The version
        may go down: after a resync the server reuses versions."""
        snap: dict[str, Any] = copy.deepcopy(dict(snapshot))
        you = dict(snap.get("you") or {}) or None
        if you is not None and you.get("board") is not None:  # before anything changes
            you["board"] = _board(you["board"], owner=True)
        self.snapshot = snap
        if snap.get("room") != self.room:
            self.revealed = None  # another room's round proves nothing here
            self.revealed_at = None
        self.room = snap.get("room")
        self.code = _text(snap.get("code"))
        self.version = int(snap.get("version") or 0)
        self.phase = snap.get("phase")
        self.settings = dict(snap.get("settings") or {})
        self.host = snap.get("host")
        online = {r: info["online"] for r, info in self.racers.items() if "online" in info}
        self.racers = {}
        for info in snap.get("racers") or []:
            entry = _racer(info)
            if "online" not in entry and entry["racer"] in online:
                # A server older than the snapshot's ``online`` (docs/protocol.md §9):
                # what the presence events said, as the client last knew it.
                entry["online"] = online[entry["racer"]]
            self.racers[entry["racer"]] = entry
            self.names[entry["racer"]] = str(entry.get("name"))
        self.now_ms = _ms(snap.get("now_ms"))
        self.start_at_ms = _ms(snap.get("start_at_ms"))
        self.ends_at_ms = _ms(snap.get("ends_at_ms"))
        self.commitment = snap.get("commitment")
        if self.phase in ("countdown", "racing") and self.commitment:
            if self.commitment != self.published_commitment:
                self._new_round()
            self.published_commitment = self.commitment
            if self.countdown_settings is None:
                self.countdown_settings = copy.deepcopy(self.settings)
        elif self.published_commitment != self.commitment:
            # A snapshot taken after the reveal (or in a lobby) of a round whose
            # commitment is not the one this client saw announced: a later round it
            # was away for, or the server's story changed — the client cannot tell
            # which, and it did not see this round's countdown. A spectator back in a
            # later round's finished room kept the earlier round's, and the round it
            # saved failed verify against an honest server (an audit).
            self.published_commitment = None
            self._new_round()
        self.result = _result(snap.get("result"))
        deal = snap.get("deal")
        self.deal = dict(deal) if deal else None
        self.you = you
        if racer is not None:
            self.me = racer
        elif self.you is not None:
            self.me = self.you.get("racer")
        self.needs_resync = False
        self.loaded = True
        if self.phase == "finished" and self.result:
            self._keep_over(live=False)

    # ------------------------------------------------------------ queries
    @property
    def variant(self) -> str:
        return str(self.settings.get("variant") or "yukon")

    @property
    def my_board(self) -> dict[str, Any] | None:
        board = self.you.get("board") if self.you else None
        return dict(board) if board is not None else None

    @property
    def next_seq(self) -> int:
        """The ``seq`` of this racer's next move."""
        return int((self.you or {}).get("next_seq") or 0)

    @next_seq.setter
    def next_seq(self, seq: int) -> None:
        self._you()["next_seq"] = seq

    @property
    def my_status(self) -> str | None:
        if self.you and self.you.get("status"):
            return str(self.you["status"])
        if self.me is not None and self.me in self.racers:
            return str(self.racers[self.me].get("status"))
        return None

    def name_of(self, racer: int | None) -> str:
        if racer is None:
            return "?"
        name = self.names.get(racer)
        return name if name is not None else f"racer {racer}"

    def racer_list(self) -> list[Racer]:
        return list(self.racers.values())

    def ranked(self) -> list[Racer]:
        """Racers in race order: finishers by place, then by foundation cards."""

        def key(info: Racer) -> tuple[int, int, int]:
            place = info.get("place")
            return (0 if place else 1, place or 0, -int(info.get("foundation") or 0))

        return sorted(self.racers.values(), key=key)

    # ------------------------------------------------------------- events
    def apply(self, envelope: Envelope) -> Fold:
        """Fold one event or notice, in arrival order."""
        if envelope.v is None:
            self._notice(envelope)
            return Fold.NOTICE
        if envelope.v <= self.version:
            return Fold.OLD
        if envelope.v != self.version + 1 or self.needs_resync or not self.loaded:
            self.needs_resync = True
            return Fold.GAP
        self.version = envelope.v
        handler = getattr(self, f"_on_{envelope.t}", None)
        if handler is not None:
            handler(dict(envelope.d or {}))
        return Fold.APPLIED

    def _notice(self, envelope: Envelope) -> None:
        d: Mapping[str, Any] = envelope.d or {}
        if envelope.t == "resync":
            # The server lost changes: its snapshot replaces everything folded here.
            self.load(d.get("snapshot") or {}, self.me)
            return
        if envelope.t != "board":
            return
        racer, view = d.get("racer"), d.get("view")
        if not isinstance(racer, int) or isinstance(racer, bool):
            raise ValueError(f"a board notice names racer {racer!r}")
        if racer == self.me:
            self._you()["board"] = _board(view, owner=True)
        else:
            at_ms = d.get("at_ms")
            self.boards[racer] = (at_ms if isinstance(at_ms, int) else 0, _board(view))

    def on_moved(self, reply: Mapping[str, Any], move: str | None = None) -> None:
        """This racer's move was accepted (a ``moved`` reply, folded where it arrives
        among the events, so a later event is never overwritten by it); ``move``, the
        move its request sent, is kept as acknowledged at the seq the reply echoed."""
        board = reply.get("board")
        seq = reply.get("seq", 0)
        # Only at a place a log can hold: a seq of 2**70 was kept, and the race's file,
        # which lists the acknowledged moves by seq, was built that long (a hang).
        place = wire.whole(seq)
        if isinstance(move, str) and place is not None and 0 <= place < MAX_LOG_LEN:
            self.acknowledged[place] = move
        you = self._you()
        you.update(
            board=None if board is None else _board(board, owner=True),
            status=reply.get("status"),
            moves=reply.get("moves"),
            score=reply.get("score"),
            next_seq=int(reply.get("seq", 0)) + 1,
        )
        mine = self.racers.get(self.me) if self.me is not None else None
        if mine is not None:
            mine["moves"] = wire.whole(reply.get("moves"))
            mine["status"] = _status(reply.get("status"))

    def _you(self) -> dict[str, Any]:
        if self.you is None:
            self.you = {"racer": self.me, "board": None, "next_seq": 0}
        return self.you

    def _set_my_status(self, racer: object, status: object) -> None:
        if racer == self.me and self.you is not None and status:
            self.you["status"] = status

    def _on_racer_joined(self, d: dict[str, Any]) -> None:
        # A racer joins on a connection: online, as the server's fold has it (a view
        # that left it unknown showed no presence for a racer until it dropped).
        d = {**_racer(d), "online": True}
        self.racers[d["racer"]] = d
        self.names[d["racer"]] = str(d.get("name"))
        if self.host is None:
            self.host = d["racer"]

    def _on_racer_left(self, d: dict[str, Any]) -> None:
        racer = d["racer"]
        if racer in self.racers:
            if self.phase in ("lobby", "finished"):
                del self.racers[racer]
            else:
                self.racers[racer].update(status="left", place=None)
        self._set_my_status(racer, "left")
        self.host = d.get("host")

    def _on_presence(self, d: dict[str, Any]) -> None:
        info = self.racers.get(d["racer"])
        if info is not None:
            info["online"] = bool(d.get("online"))

    def _on_ready_changed(self, d: dict[str, Any]) -> None:
        info = self.racers.get(d["racer"])
        if info is not None:
            info["ready"] = bool(d.get("ready"))

    def _on_countdown(self, d: dict[str, Any]) -> None:
        self.phase = "countdown"
        self.start_at_ms = _ms(d.get("start_at_ms"))
        self._new_round()
        self.commitment = self.published_commitment = d.get("commitment")
        self.countdown_settings = copy.deepcopy(self.settings)

    def _new_round(self) -> None:
        """Forget what this client saw of a round other than the one now seen: its
        settings at the countdown and the moves acknowledged in it."""
        self.countdown_settings = None
        self.acknowledged = {}

    def _on_started(self, d: dict[str, Any]) -> None:
        self.phase = "racing"
        self.start_at_ms = _ms(d.get("start_at_ms"))
        self.ends_at_ms = _ms(d.get("ends_at_ms"))
        self.commitment = d.get("commitment")
        # The countdown published the commitment; a server that names another here
        # (an audit's: the reveal then matched the second, and the race-over screen and
        # verify said it was the countdown's) is checked against the countdown's.
        if self.published_commitment is None:
            self.published_commitment = self.commitment
            self.countdown_settings = copy.deepcopy(self.settings)
        dealt = self._dealt_face_down()
        for info in self.racers.values():
            if info.get("status") == "waiting":
                info.update(status="playing", face_down=dealt)
        if self.me is not None:
            self._you().update(status="playing", moves=0, score=0, next_seq=0)

    def _dealt_face_down(self) -> int:
        """Face-down cards of a fresh deal: the same for every seed (as the server
        counts them from ``started`` on)."""
        try:
            board = deal_board(self.variant, 0, dict(self.settings.get("options") or {}))
        except (KeyError, TypeError, ValueError):
            return 0
        return board.face_down_count()

    def _on_progress(self, d: dict[str, Any]) -> None:
        info = self.racers.get(d["racer"])
        if info is None:
            return
        for key in _COUNTS:
            if key in d:
                info[key] = wire.whole(d[key])
        if "status" in d:
            info["status"] = _status(d["status"])
        self._set_my_status(d.get("racer"), info.get("status"))
        if d.get("racer") == self.me and self.you is not None and "moves" in d:
            self.you["moves"] = info["moves"]

    def _on_finished(self, d: dict[str, Any]) -> None:
        info = self.racers.get(d["racer"])
        if info is not None:
            info.update(
                place=wire.whole(d.get("place")),
                status="finished",
                elapsed_ms=wire.whole(d.get("elapsed_ms")),
                foundation=wire.whole(d.get("foundation")),
                moves=wire.whole(d.get("moves")),
                face_down=0,
            )
        self._set_my_status(d.get("racer"), "finished")

    def _on_race_over(self, d: dict[str, Any]) -> None:
        d = _result(d) or {}
        self.phase = "finished"
        self.result = d
        for standing in wire.standings(d):
            racer, status = wire.whole(standing.get("racer")), _status(standing.get("status"))
            info = self.racers.get(racer) if racer is not None else None
            if info is not None:
                info.update(place=wire.whole(standing.get("place")), status=status)
            self._set_my_status(racer, status)
        self._keep_over(live=True)

    def _keep_over(self, live: bool) -> None:
        """Keep the round that ended at this version (:attr:`overs`), the oldest out.
        Its seed and salt become :attr:`revealed` when the race_over came ``live``, or
        from a snapshot at a later version than the pair held: a resync's snapshot of
        an earlier round (a store put back between rounds) must not replace the later
        round's pair, the one that proves the rewind (a review)."""
        assert self.result is not None
        seed, salt = self.result.get("seed"), self.result.get("salt")
        later = self.revealed_at is None or self.version > self.revealed_at
        if isinstance(seed, int) and isinstance(salt, str) and (live or later):
            self.revealed = {"seed": seed, "salt": salt}
            self.revealed_at = self.version
        self.overs[self.version] = RoundOver(
            version=self.version,
            room=self.room,
            code=self.code,
            settings=copy.deepcopy(self.settings),
            result=copy.deepcopy(self.result),
            published_commitment=self.published_commitment,
            deal=copy.deepcopy(self.deal),
            countdown_settings=copy.deepcopy(self.countdown_settings),
            acknowledged=(
                None if self.me is None else Acknowledged(self.me, dict(self.acknowledged))
            ),
        )
        for version in sorted(self.overs)[:-KEPT_OVERS]:
            del self.overs[version]

    def _on_deal_chosen(self, d: dict[str, Any]) -> None:
        self.deal = d

    def _on_room_reset(self, d: dict[str, Any]) -> None:
        self.phase = "lobby"
        self.deal = self.result = None
        self.start_at_ms = self.ends_at_ms = None
        self.commitment = self.published_commitment = None
        self._new_round()
        self.host = d.get("host")
        old = self.racers
        self.racers = {}
        self.names = {r: name for r, name in self.names.items() if r == self.me}
        for info in d.get("racers") or []:
            entry = _racer(info)
            if "online" in old.get(entry["racer"], {}):
                entry["online"] = old[entry["racer"]]["online"]
            self.racers[entry["racer"]] = entry
            self.names[entry["racer"]] = str(entry.get("name"))
        self.boards.clear()
        if self.you is not None:
            self.you = {
                "racer": self.me,
                "board": None,
                "next_seq": 0,
                "moves": 0,
                "score": 0,
                "status": "waiting",
            }


def _ms(value: Any) -> int | None:
    """A time the server sent (Unix ms), if it is a whole number; else None (a faulty
    or hostile server's ``"soon"``): the race screen's clock subtracts these, and a
    ``started`` whose ``ends_at_ms`` was a string ended the terminal client with a
    TypeError traceback."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _board(view: Any, owner: bool = False) -> dict[str, Any]:
    """A board view as the protocol shapes one (docs/protocol.md §9), checked with the
    check the server sends it through: a board of any other shape raises ValueError
    (the connection folding it closes: an audit's ``{"tableau": "x"}`` made the bot's
    board rebuild a traceback)."""
    if not isinstance(view, Mapping):
        raise ValueError(f"a board view is a map, not {type(view).__name__}")
    board = board_view_wire(dict(view), owner=owner)
    # What the wire check lets through but the board's own variant does not (a property
    # test of bent frames): a one-deck foundation sent as a list, a draw of "soon" —
    # the board screen ended with int()'s TypeError or ValueError.
    decks = decks_of(board["variant"])
    foundations = cast("dict[str, object]", board["foundations"])
    for suit, top in foundations.items() if board["variant"] in VARIANTS else ():
        # (a variant this client does not know, a newer server's, still renders)
        if isinstance(top, list) != (decks > 1) or (isinstance(top, list) and len(top) != decks):
            raise ValueError(f"board view.foundations.{suit}: not a {decks}-deck foundation")
    for name, value in cast("dict[str, object]", board["options"]).items():
        if name in OPTION_NAMES and not is_of_kind(name, value):
            raise ValueError(f"board view.options.{name}: not {option_kind(name)}")
    return board


def _text(value: Any) -> Any:
    """A server's string fit for a terminal: control characters as ``?`` (a solrace
    server lets none into a name; a hostile one sent ``ESC ] 0 ; … BEL``, which the
    terminal UI passed on, setting the terminal's title). Anything else as it is."""
    return printable(value) if isinstance(value, str) else value


#: A racer entry's counts: whole numbers, or None (unknown).
_COUNTS: Final = ("foundation", "moves", "face_down")


def _status(value: object) -> str | None:
    """A racer's status fit for a terminal; None if it is not a string."""
    return printable(value) if isinstance(value, str) else None


def _racer(info: Any) -> Racer:
    """A racer's entry (RacerInfo) as the view keeps it, read once here for every
    screen that shows it: its name and status strings fit for a terminal (else None),
    its place and counts whole numbers (else None: unknown). A faulty or hostile
    server's ``place: "soon"`` ended the racers panel's sort with a TypeError, a
    ``foundation: "x"`` its bar with a ValueError. An entry that is not a map, or names
    no racer by a whole number, raises ValueError: the fold refuses the frame and the
    connection closes, saying why (docs/client.md)."""
    if not isinstance(info, Mapping) or wire.whole(info.get("racer")) is None:
        raise ValueError(f"a racer entry is a map naming its racer, not {info!r:.80}")
    entry = dict(info)
    if "name" in entry:
        entry["name"] = _status(entry["name"]) or "?"
    if "status" in entry:
        entry["status"] = _status(entry["status"])
    for key in ("place", *_COUNTS):
        if key in entry:
            entry[key] = wire.whole(entry[key])
    return entry


def _shown(info: Any) -> Any:
    """A racer's entry (RacerInfo, a standing) with its name and status fit for a
    terminal; a copy (the frame's data stays as it came)."""
    if not isinstance(info, Mapping):
        return info
    entry = dict(info)
    for key in ("name", "status"):
        if key in entry:
            entry[key] = _text(entry[key])
    return entry


def _result(result: Any) -> Any:
    """A RaceResult whose standings' names and statuses are fit for a terminal (the
    move logs, seed and commitment as they came: ``verify`` checks those). One that is
    not a map is no result (None): a faulty or hostile server's finished room whose
    result was a string was kept, and the race-over screen ended with an
    AttributeError."""
    if not isinstance(result, Mapping):
        return None
    out = dict(result)
    if isinstance(out.get("standings"), list):
        out["standings"] = [_shown(s) for s in out["standings"]]
    return out
