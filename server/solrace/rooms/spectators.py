"""What spectators see: each racer's board, fair (docs/fairness.md) and delayed.

A spectator connection is anonymous, so it may be a racer watching its own race from a
second connection. Every racer plays the same deal, so a card identity shown on one
board is a card of every other racer's game: a board is therefore shown only while
every face-up card on it is one that every racer still racing has seen in its own game
(the intersection of their *seen* sets). Hiding only the names of the other cards is
not enough: a hidden card moved onto a shown one has the rank and colour the rules
demand, and the column it was turned up from says where it lies in every racer's deal.
So a board with a card someone still racing has not seen is held back whole, and its
spectators keep the last board that had none; once nobody can move, boards are whole.

Boards come from *shadow* engines folded from stored events only — each stored
``progress`` event carries its move server-side — never from a node's live engine,
which may hold a move that is not stored yet (and may never be, if Redis fails). A
shadow is rebuilt from the stored log only when it is missing or out of step.

A new spectator gets each racer's latest board that holds nothing back (``Shadow.
last_whole``). Held back, that is an older state of the racer's log; finding it by
replaying the log and building a view after every entry cost a watch ~20 ms for a log
of 1,500 moves, under the room's lock, and a connection may watch and leave ten times
a second (docs/performance.md, "Watching a held-back board"). So a shadow keeps, per
state of its log, the cards a board of that state shows, as a bitmask: finding the
latest whole state is a scan of integers that resumes where the last watch's ended,
and the board of that state comes from a second engine that only moves forward. Each
log entry is so applied, and each board built, about once per change, not per watch.
"""

from __future__ import annotations

import asyncio
from array import array
from bisect import bisect_right
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from solrace.protocol import Envelope, encode
from solrace.protocol.messages import board_notice
from solrace.protocol.views import Phase
from solrace.race import RacerGame
from solrace.race.events import RoomEvent
from solrace.rules import Board
from solrace.rules.cards import CARDS_PER_DECK
from solrace.store.errors import StoreUnavailable

from .records import unpack_entries
from .room import LiveRoom

if TYPE_CHECKING:
    from .node import Node

#: Spectators get a room's changed boards at most this often (refresh).
BOARD_INTERVAL_S: Final = 0.1
#: A batch of boards Redis failed to build (a shadow's log read) is tried again after this.
BOARDS_RETRY_S: Final = 0.5


#: One bit per card id (two decks: 104 ids), for the face-up sets a shadow keeps.
_BIT: Final = tuple(1 << card for card in range(2 * CARDS_PER_DECK))


def _face_up(board: Board) -> int:
    """The cards a spectator's view of ``board`` shows, as a bitmask of ids: the
    tableau's face-up cards, the waste and the foundations (never the stock). A fair
    view withholds nothing exactly when every one of them is shown (``_whole``)."""
    bit = _BIT
    mask = 0
    for column, hidden in zip(board.tableau, board.down, strict=True):
        for card in column[hidden:]:
            mask |= bit[card]
    for card in board.waste:
        mask |= bit[card]
    for pile in board.piles:
        for card in pile:
            mask |= bit[card]
    return mask


def _mask(cards: set[int]) -> int:
    bit = _BIT
    mask = 0
    for card in cards:
        mask |= bit[card]
    return mask


class Shadow(RacerGame):
    """A racer's engine folded from stored events (it tracks the cards its racer has
    seen), which also answers, without replaying the log, which of its states is the
    latest whose board withholds nothing from a set of shown cards (``last_whole``).

    A new spectator needs that board on every ``watch``; a held-back racer's is an
    older state. The shadow keeps, for every state of the log (0: the deal), the
    cards its board shows (``face_up``) and the entries' times, so finding that state
    is a scan of integers; the scan resumes where the previous one ended while the
    shown cards only grow (seen sets only grow; racers only stop racing). Its board
    comes from a *cursor*, a second engine that moves forward through the log and is
    rebuilt only when asked for an earlier state (shown cards shrank, which the rules
    do not do today, or the log was replaced: then the shadow itself is new). The
    last board built is kept: while nothing changes, a watch builds none.
    """

    def __init__(self, variant: str, seed: int, options: Mapping[str, Any]) -> None:
        super().__init__(variant, seed, options, track_seen=True)
        self._deal = (variant, seed, options)
        #: ``face_up[i]``: the cards the board shows after the log's first ``i`` entries.
        self.face_up: list[int] = [_face_up(self.board)]
        #: ``latest[i]``: the latest race-clock time among entries ``0..i``, so that
        #: the entries made by a time are a prefix found by bisection (the prefix up
        #: to the first later entry: an entry's time is not promised to grow). Arrays:
        #: 16 bytes an entry, with the masks ~60 for a log of at most 5,000 entries.
        self._latest = array("q")
        self._times = array("q")
        #: The last scan: (shown cards, states scanned up to, latest whole state or -1).
        self._scan: tuple[int, int, int] | None = None
        self._cursor: RacerGame | None = None
        #: The last board built: its state, whether it was built with everything shown
        #: (a view then carries no ``withheld_foundation``), and the view.
        self._built: tuple[int, bool, dict[str, Any]] | None = None

    def apply(self, entry: str, at_ms: int) -> None:
        super().apply(entry, at_ms)  # a refused entry raises here and changes nothing
        self.face_up.append(_face_up(self.board))
        self._times.append(at_ms)
        self._latest.append(max(at_ms, self._latest[-1]) if self._latest else at_ms)

    def last_whole(self, shown: set[int] | None, until: int | None = None) -> dict[str, Any] | None:
        """The fair view (``shown``: ``shown_cards``) of the racer's latest state,
        among its states up to its log's end (with ``until``, up to its moves made by
        then on the race clock), that withholds nothing; None if even its first does.

        A whole view is the same for every ``shown`` that holds its cards (each card
        named, ``withheld_foundation`` 0), so a board built once serves every later
        watch until the latest whole state changes."""
        state = self._whole_state(shown, until)
        if state < 0:
            return None
        everything = shown is None
        built = self._built
        if built is not None and built[0] == state and built[1] == everything:
            return built[2]
        if state == self.seq:
            view = self.board_view(shown)
        else:
            cursor = self._cursor
            if cursor is None or cursor.seq > state:
                cursor = self._cursor = RacerGame(*self._deal)
            entries, times = self.entries, self._times
            for index in range(cursor.seq, state):
                cursor.apply(entries[index], times[index])
            view = cursor.board_view(shown)
        self._built = (state, everything, view)
        return view

    def _whole_state(self, shown: set[int] | None, until: int | None) -> int:
        """The state :meth:`last_whole` shows (entries applied), or -1."""
        limit = self.seq if until is None else bisect_right(self._latest, until)
        return limit if shown is None else self._latest_whole(_mask(shown), limit)

    def held_since(self, shown: set[int] | None, until: int | None = None) -> int | None:
        """When (race clock) the board :meth:`last_whole` shows was made — by the last
        entry it holds, 0 for the deal — if a later entry (made by ``until``) is held
        back; None if it is the latest. A new spectator's held-back board is stamped
        with it: stamped with the watch's time it said "as it was" then, when its racer
        had moved on (the watch screen showed it "0 s ago", not held back)."""
        limit = self.seq if until is None else bisect_right(self._latest, until)
        state = self._whole_state(shown, until)
        if state < 0 or state >= limit:
            return None
        return self._latest[state - 1] if state else 0

    def _latest_whole(self, shown: int, limit: int) -> int:
        """The latest state up to ``limit`` whose board shows only cards of
        ``shown`` (a bitmask), or -1. States the previous scan found held back stay
        held back under the same cards, and its answer stays whole under more."""
        face_up, hidden = self.face_up, ~shown
        found, floor = -1, -1
        if self._scan is not None:
            before, scanned, last = self._scan
            if limit >= scanned and not before & hidden:  # the same cards, or more
                found = last
                floor = scanned if before == shown else last
        for state in range(limit, floor, -1):
            if not face_up[state] & hidden:
                found = state
                break
        self._scan = (shown, limit, found)
        return found


def fold_move(room: LiveRoom, event: RoomEvent) -> None:
    """Apply the move a folded ``progress`` event carries to its racer's shadow."""
    entry, length = event.entry, event.log_length
    if entry is None or length is None:
        return
    racer = event.racer
    shadow = room.shadows.get(racer)
    if shadow is None:
        return
    if shadow.seq == length - 1:
        shadow.apply(entry[0], entry[1])
    elif shadow.seq != length:
        del room.shadows[racer]  # out of step: rebuilt from the log when next needed


async def _shadow(node: Node, room: LiveRoom, racer: int) -> Shadow:
    """The racer's shadow, brought to the log length the folded events say."""
    target = room.state.racers[racer].log_length
    game = room.shadows.get(racer)
    if game is None or game.seq > target:
        settings = room.meta.settings
        game = Shadow(settings.variant, room.seed(), settings.options)
        room.shadows[racer] = game
    if game.seq < target:
        raw = await node.store.move_log(room.room_id, room.log_name(racer), game.seq)
        for entry, at in unpack_entries(raw)[: target - game.seq]:
            game.apply(entry, at)
    return game


async def shown_cards(node: Node, room: LiveRoom) -> set[int] | None:
    """Card ids a board may show to anyone but its own player: those every racer who
    can still move has seen in its own game; None (everything) once nobody can."""
    state = room.state
    if state.phase == Phase.FINISHED or state.open_boards:
        return None  # over, or every racer agreed to open spectating
    racing = state.playing()
    if not racing:
        return None
    shown: set[int] | None = None
    for member in racing:
        seen = (await _shadow(node, room, member.racer)).seen or set()
        shown = set(seen) if shown is None else shown & seen
    return shown


def _whole(view: dict[str, Any]) -> bool:
    """Whether a fair view withholds nothing (no ``None`` card, no withheld
    foundation card): the only fair views that may be sent."""
    if view.get("withheld_foundation"):
        return False
    if None in view["waste"]:
        return False
    return all(None not in column["up"] for column in view["tableau"])


async def refresh(node: Node, room: LiveRoom, mover: int | None = None) -> None:
    """Send the room's spectators the boards that changed since they were last sent,
    at most one batch every ``BOARD_INTERVAL_S``. Caller holds the room's lock.

    A move (by ``mover``) changes its racer's board; without a mover every board may
    have changed (a phase change, a racer who stopped racing). If the last batch went
    out at least an interval ago, this one goes now; else it goes when the interval
    ends, with every board changed meanwhile as it is then. A fast racer's spectators
    thus get its latest board ten times a second rather than one per move, and a
    node under load builds, checks and encodes one board per racer per interval."""
    state = room.state
    if not room.spectators or state.phase not in (Phase.RACING, Phase.FINISHED):
        return
    if mover is None:
        room.unsent_boards.update(state.racers)
    else:
        room.unsent_boards.add(mover)
    if room.boards_due is not None:
        return  # the next batch is already due: it takes these boards too
    loop = asyncio.get_running_loop()
    wait = room.boards_sent_at + BOARD_INTERVAL_S - loop.time()
    if wait <= 0:
        await _send_boards(node, room)
    else:
        room.boards_due = loop.call_later(wait, lambda: node.spawn(_send_boards_later(node, room)))


async def _send_boards_later(node: Node, room: LiveRoom) -> None:
    async with room.lock:
        room.boards_due = None
        await _send_boards(node, room)


async def _send_boards(node: Node, room: LiveRoom) -> None:
    """Build, check and send the boards of ``room.unsent_boards`` — every racer's when
    the withholding changed (the cards every racer still racing has seen: a card
    turned up by everyone, a racer who stopped racing). Caller holds the lock.

    Never raises StoreUnavailable: this runs in the fold of an event already stored
    and broadcast, and a failure there would stop the fold's caller short (a resign
    answered ``unavailable``, no timer armed: a race nobody plays that never ends).
    If Redis fails a shadow's read, every board goes again in a batch a little later
    (unchanged ones are skipped), or spectators would keep stale boards for good —
    a finished race's last boards are sent once, and nothing else sends them."""
    try:
        await _build_and_send(node, room)
    except StoreUnavailable:
        node.store_failed(room=room)
        room.unsent_boards.update(room.state.racers)
        if room.boards_due is None:
            loop = asyncio.get_running_loop()
            room.boards_due = loop.call_later(
                BOARDS_RETRY_S, lambda: node.spawn(_send_boards_later(node, room))
            )


async def _build_and_send(node: Node, room: LiveRoom) -> None:
    state = room.state
    racers, room.unsent_boards = room.unsent_boards, set()
    room.boards_sent_at = asyncio.get_running_loop().time()
    if not room.spectators or state.phase not in (Phase.RACING, Phase.FINISHED):
        return
    shown = await shown_cards(node, room)
    delay = room.meta.settings.spectator_delay_s
    changed = shown != room.sent_shown or not room.sent_boards
    room.sent_shown = shown
    for racer in list(state.racers) if changed else sorted(racers & state.racers.keys()):
        shadow = await _shadow(node, room, racer)
        view = shadow.board_view(shown)
        if room.sent_boards.get(racer) == view or not _whole(view):
            continue  # unchanged, or held back: its spectators keep the last whole one
        room.sent_boards[racer] = view
        if shadow.seq == 0:
            # The starting board: the same deal for everyone, which every racer sees at
            # the start, so no delay hides anything of it. It goes at once, stamped
            # with the start (a spectator in the lobby saw no board for a whole delay).
            start = _start_ms(room, node.clock())
            _send_to_spectators(room, encode(_notice(racer, start, view)), state.round)
            continue
        frame = encode(_notice(racer, node.clock(), view))
        if delay == 0:
            _send_to_spectators(room, frame, state.round)
        else:
            _send_later(room, delay, frame, state.round)


def _send_later(room: LiveRoom, delay_s: float, frame: bytes, round_no: int) -> None:
    """Send a board ``delay_s`` from now (fair spectating's delay), on a timer the room
    keeps (LiveRoom.delayed_boards) until it fires: cancelled with the room's other
    timers when the node stops or forgets the room. Untracked, a board built within
    the delay before a stop went out after it."""

    def send() -> None:
        room.delayed_boards.discard(handle)
        _send_to_spectators(room, frame, round_no)

    handle = asyncio.get_running_loop().call_later(delay_s, send)
    room.delayed_boards.add(handle)


def _send_to_spectators(room: LiveRoom, frame: bytes, round_no: int) -> None:
    """Send a board of round ``round_no``, unless a rematch has begun since (a delayed
    board of the last round would pass for one of the new round)."""
    if room.state.round != round_no:
        return
    for peer in list(room.spectators):
        peer.send_bytes(frame)


def _notice(racer: int, at_ms: int, view: dict[str, Any]) -> Envelope:
    return board_notice(racer=racer, at_ms=at_ms, view=view, owner=False)


def _start_ms(room: LiveRoom, now_ms: int) -> int:
    """The time a starting board is stamped with: the race's start (``now_ms`` if the
    room has none, which a racing room always has)."""
    start = room.state.start_at_ms
    return now_ms if start is None else start


async def initial_board_notices(node: Node, room: LiveRoom) -> list[Envelope]:
    """A new spectator's boards: as they were one spectator delay ago, fair now.
    Built before any is sent, so that a request can read them (Redis may fail it)
    before it promises its reply (lobby.watch)."""
    state = room.state
    notices: list[Envelope] = []
    if state.phase not in (Phase.RACING, Phase.FINISHED):
        return notices
    delay_ms = room.meta.settings.spectator_delay_s * 1000
    now = node.clock()
    # Within the first delay of the race: the boards it started with (the same deal,
    # no move made; later boards come as they change, delayed), stamped with the
    # start, never earlier: a 21 s old race showed boards "44 s old" (delay 30 s).
    until = None if delay_ms == 0 else max(0, state.race_clock(now) - delay_ms)
    at_ms = max(now - delay_ms, _start_ms(room, now))
    shown = await shown_cards(node, room)
    for racer in list(state.racers):
        # Delayed: the latest board whole now among the moves old enough; at once:
        # the latest board whole now (the current one unless it is held back).
        shadow = await _shadow(node, room, racer)
        view = shadow.last_whole(shown, until)
        if view is not None:
            made = shadow.held_since(shown, until)
            stamp = at_ms if made is None else _start_ms(room, now) + made
            notices.append(_notice(racer, stamp, view))
    return notices
