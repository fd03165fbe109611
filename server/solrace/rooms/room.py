"""A room as one node serves it: folded state, local connections, local engines.

The state is only ever changed by folding stored events in version order
(:meth:`LiveRoom.fold`), under the room's lock, and every folded event is fanned out to
the room's local connections at that moment — so on each connection events arrive in
version order without gaps or duplicates, whichever node appended them.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import TYPE_CHECKING, Any, Final

from solrace.protocol import encode
from solrace.protocol.messages import board_notice
from solrace.protocol.views import LeaveReason, Phase, RacerStatus
from solrace.race import RacerGame, RoomState
from solrace.race.events import EventType, RoomEvent
from solrace.race.fairness import round_commitment, round_salt, round_seed

from .records import RoomMeta, log_name

if TYPE_CHECKING:
    from .peer import Peer
    from .spectators import Shadow

log = logging.getLogger("solrace.room")

#: How many rounds past the store's a resume's ``revealed`` may name
#: (:meth:`LiveRoom.proven_round`): a restored copy that many rematches old. Each
#: is one HMAC a proof that matches no round, so a resume stays cheap.
PROOF_ROUNDS_AHEAD: Final = 64

#: The phases of a round under way, whose seed a revealed round's racers hold.
_UNDER_WAY: Final = frozenset((Phase.COUNTDOWN, Phase.RACING))

#: The statuses a ``progress`` sets that may take its racer out of the race for good,
#: short of finishing it (stuck counts only where undo is off: LiveRoom._note_out).
_OUT_STATUSES: Final = frozenset((RacerStatus.RESIGNED, RacerStatus.STUCK))


class LiveRoom:
    def __init__(self, meta: RoomMeta) -> None:
        self.meta = meta
        self.state = RoomState(meta.room, meta.code, meta.settings)
        self.lock = asyncio.Lock()
        #: Racer connections on this node, by racer id.
        self.racers: dict[int, Peer] = {}
        self.spectators: set[Peer] = set()
        #: Engines of this node's racers (authoritative while the racer is here).
        self.games: dict[int, RacerGame] = {}
        #: Each racer's moves on this node, one at a time (see ``moving``).
        self._moving: dict[int, asyncio.Lock] = {}
        #: Engines folded from stored events, for spectators' boards (spectators.py).
        self.shadows: dict[int, Shadow] = {}
        #: The last board view sent to spectators, per racer: only changes are sent.
        self.sent_boards: dict[int, dict[str, Any]] = {}
        #: The withholding those boards were built with (spectators.shown_cards).
        self.sent_shown: set[int] | None = None
        #: Racers whose board changed since the spectators' last boards went out, the
        #: loop time they went out, and the timer of the next batch if one is due
        #: (spectators.refresh: at most one batch per BOARD_INTERVAL_S).
        self.unsent_boards: set[int] = set()
        self.boards_sent_at = float("-inf")
        self.boards_due: asyncio.Handle | None = None
        #: Boards built and waiting out the spectator delay (spectators._send_later),
        #: until each is sent: cancelled with the room's timers.
        self.delayed_boards: set[asyncio.Handle] = set()
        #: The room's next wake-up (Node.schedule) and the loop time it is due. A
        #: Handle, not a TimerHandle: uvloop returns a plain Handle, which has no
        #: ``when()``, for a call due less than half a millisecond away.
        self.timer: asyncio.Handle | None = None
        #: A tick that failed is tried again (Node._tick_later): one retry at a time.
        self.retry_due: asyncio.TimerHandle | None = None
        self.timer_at = 0.0
        self.last_used_ms = 0
        #: A racer or spectator has been served here this round: this node then keeps
        #: the room's timers and lease checks running even once its connections are
        #: gone, so a race still ends (and ghosts still leave) with nobody connected.
        self.serving = False
        #: The chain value after the last event folded (store.StoredEvent): the next
        #: event must link to it, and Redis must still hold it at ``state.version``,
        #: or Redis lost writes this node delivered (Node.check_rooms).
        self.chain = ""
        #: The node is rebuilding the room from Redis (Node._resync_locked): a loss
        #: found meanwhile is the one being rebuilt from, not another.
        self.rebuilding = False
        #: A client brought a version the store does not hold (Node.client_ahead):
        #: logged and counted once.
        self.ahead_reported = False
        #: This node is in the room's set of serving nodes (Node.join_room).
        self.joined = False
        #: This node may be in the room's set without knowing it: a join or a leave
        #: whose reply Redis did not give (it may have been applied). Node.leave_unserved
        #: leaves such a room unless it is served by then, as it leaves a joined one.
        self.maybe_joined = False
        #: Joins again after a lapsed lease out now (Node._rejoin_room), not under the
        #: room's lock: Node.leave_unserved leaves the room alone meanwhile.
        self.rejoining = 0
        #: Another node serves the room too, so this node tails its stream for their
        #: events. Alone, a node has nothing to read back: it folds its own appends.
        self.shared = False
        #: The version Redis was at when the last room check found it ahead of what
        #: this node had folded (None: it was not); see Node._check_alone.
        self.ahead_seen: int | None = None
        #: Races of this room whose archiving this node has claimed (Node.archive):
        #: the current round's only. A rematch comes after its race's result is saved
        #: (or its archive task holds the race itself), so a new round forgets them;
        #: kept, a room rematched for weeks held one per round it had ever played.
        self.archived: set[str] = set()
        #: The store failed a call about this room (its slot alone may be in trouble:
        #: a Cluster slot left open), until a tick of it reads the room again.
        self.store_down = False
        #: When this room's trouble with the store last ended: its offline racers'
        #: grace counts from then at the earliest (Node.grace_floor).
        self.grace_floor_ms = 0
        #: The last round whose ``race_over`` (its seed) this node folded and so sent
        #: its clients. Kept through :meth:`reset`: a Redis that lost that race_over
        #: (restored from a snapshot taken before it) comes back racing the round, and
        #: its racers hold its seed (see :meth:`seed_revealed`). Raised too by a
        #: client's proof (lobby._proof) and by the store's ``over`` when the node
        #: takes the room up, or a move is refused for it (Store.reveal_round).
        self.revealed_round = 0
        #: The commitment of the round under way whose archived result this node has
        #: looked for (Node._archived_already), None before any: each round's once, on
        #: taking the room up under way or at its countdown's start. A look the store
        #: failed is made again (the next request, the tick's retry), not skipped.
        self.archive_checked: str | None = None
        #: The racers this node folded out of round :attr:`out_round`'s race without
        #: finishing it — resigned, left, stuck with no undo — each with how (``resigned``,
        #: ``stuck``, or the leave's reason) and its name. Kept through :meth:`reset`:
        #: from such a racer's end on, fair spectating stops counting its cards, and
        #: spectators (it, in a second window) were shown cards it never turned up; a
        #: Redis that lost the end brings it back racing (see :meth:`back_in_race`).
        self.out_round = 0
        self.out_of_race: dict[int, tuple[str, str]] = {}

    @property
    def room_id(self) -> str:
        return self.meta.room

    def has_peers(self) -> bool:
        return bool(self.racers or self.spectators)

    def served(self) -> bool:
        """Whether this node runs the room's timers and checks (see ``serving``). Not
        once the race is over, nor for a lobby everyone left: its keys expire, and a
        check against Redis would take the expiry for lost writes."""
        if self.has_peers():
            return True
        return self.serving and not self.expiring()

    def expiring(self) -> bool:
        """Whether the room's keys are set to expire: its race is over, or everyone
        left its lobby. Either way it changes no more, and its keys may vanish at any
        time — even while a spectator still watches — so a check against Redis takes
        keys that are gone for the expiry, not for lost writes (Node.check_rooms)."""
        state = self.state
        return state.phase == Phase.FINISHED or not state.racers

    def cancel_timers(self) -> None:
        """Stop the room's timer and its spectators' pending boards (the batch due, and
        the boards waiting out the spectator delay): the node stops, forgets the room,
        or Redis lost it."""
        for timer in (self.timer, self.boards_due, self.retry_due, *self.delayed_boards):
            if timer is not None:
                timer.cancel()
        self.delayed_boards.clear()

    def reset(self) -> None:
        """Forget everything folded (Redis lost writes): fold again from version 0."""
        self.state = RoomState(self.meta.room, self.meta.code, self.meta.settings)
        self.games.clear()
        self.shadows.clear()
        self.sent_boards.clear()
        self.chain = ""
        self.ahead_seen = None  # measured against the old fold; start afresh

    def seed_revealed(self) -> bool:
        """Whether the round under way (countdown or race) is one whose seed this node
        has already revealed: Redis lost its ``race_over``. Its racers may know every
        card, so the race cannot go on; it ends at once, as at its time limit
        (decisions.tick), and no move of it is taken (moves). Before, it went on: an
        audit's racer replayed the revealed deal's winning line after the resync and
        won it (524 moves in seconds).

        Asked on every move: the round is compared first, so that a room that revealed
        nothing (the usual case) reads no phase (a property, and on Python 3.11 each
        enum member read goes through the enum metaclass): about 940 instructions a
        call instead of 4,900 (docs/performance.md, round 27)."""
        state = self.state
        return state.round <= self.revealed_round and state.phase in _UNDER_WAY

    def proven_round(self, seed: int, salt: str) -> int | None:
        """The round that ``seed`` and ``salt``, sent back by a client that saw a
        race_over (a resume's or watch's ``revealed``), prove revealed, if it is the
        round the store holds not yet over (its lobby, countdown or race), or a later
        one, that this node did not know was revealed; else None. The caller makes it
        known (Store.reveal_round, then :attr:`revealed_round`: that round's race ends
        as soon as it is under way, :meth:`seed_revealed`). A node with no memory of
        that race_over — restarted on a restored store, or taking the room up afresh
        after dropping it idle — raced the revealed deal on, and a racer replayed its
        winning line and won (tests/net/test_faults.py). Nobody can make the pair
        without the race_over: the salt is an HMAC of the room's secret, a new one each
        round (it is the proof in a lobby whose deal is not chosen yet: the seed then
        may be another candidate's). A pair that is not this round's is ignored: it
        proves nothing, and must not let a racer end anyone's race.

        A later round's pair (up to :data:`PROOF_ROUNDS_AHEAD` ahead) proves more: the
        store was put back to before that round's race_over, so every round up to it
        went out, and since a round's seed and salt are its number's, a rematch would
        deal them again (a review: a copy restored between rounds re-dealt round 2,
        whose seed its racers held). Its salt is the proof (its seed depends on the
        lost round's certification); the rounds up to it end as soon as they start."""
        state = self.state
        for number in range(
            max(state.round, self.revealed_round + 1), state.round + PROOF_ROUNDS_AHEAD + 1
        ):
            own = round_salt(self.meta.secret, number)
            if hmac.compare_digest(salt.encode(), own.encode()):
                break
        else:
            return None
        if number == state.round:
            if state.phase == Phase.FINISHED:
                return None  # its race is over: nothing left to end
            chosen = state.phase != Phase.LOBBY or state.deal is not None
            if chosen and seed != self.seed():
                return None
        return number

    def _note_out(self, racer: int) -> None:
        """Remember ``racer`` out of the round's race (:attr:`out_of_race`), if the
        event just folded took it out: not a lobby's leave, nor a stuck racer who may
        still undo."""
        state = self.state
        member = state.racers.get(racer)
        if member is None or state.phase not in _UNDER_WAY or state.can_move(member):
            return
        if state.round < self.out_round:
            # An earlier round folded again (the refold after lost writes: the stream
            # keeps the round before the one under way): its outs must not replace
            # what this node saw go out of the later round, which the store may have
            # lost. They did: a racer who resigned in a rematch raced on after a rewind
            # whenever anyone had gone out of the round before.
            return
        if state.round > self.out_round:
            self.out_round, self.out_of_race = state.round, {}
        status = member.status
        how = (member.left_reason or LeaveReason.LEFT) if status == RacerStatus.LEFT else status
        self.out_of_race[racer] = (how, member.name)

    def back_in_race(self) -> dict[int, str]:
        """The racers this node saw go out of the round under way (:attr:`out_of_race`)
        whom the store now holds in it again — it lost their end (a rewind) — and how
        each went out. Their race ends again at once (decisions.out_again), and no
        move of theirs is taken meanwhile (moves): out, they were no longer counted by
        fair spectating, and spectators were shown cards they had never turned up (an
        audit: Ann resigned, watched Bob's board from a second window, and after a
        rewind to before her resignation raced on, her moves taken). A node that never
        saw the end (restarted with the store) cannot know it: what remains.

        Only the racer of that name: a store put back to before a racer joined gives
        its id to the next to join (ids are folded, ``next_racer``), who never raced
        and was forced out of its first race. (One joining under the same name is
        taken for it.)"""
        state = self.state
        if not self.out_of_race or self.out_round != state.round or state.phase not in _UNDER_WAY:
            return {}
        back: dict[int, str] = {}
        for racer, (how, name) in self.out_of_race.items():
            member = state.racers.get(racer)
            if (
                member is not None
                and member.name == name
                and (member.status == RacerStatus.WAITING or state.can_move(member))
            ):
                back[racer] = how
        return back

    def is_back(self, racer: int) -> bool:
        """Whether ``racer`` is one of :meth:`back_in_race`. Asked on every move: a
        racer never seen out is answered from the dict alone (76 ns), not by building
        :meth:`back_in_race` (1,070 ns, paid by every move of a room as soon as anyone
        in it had resigned or left)."""
        return racer in self.out_of_race and racer in self.back_in_race()

    def end_due(self) -> bool:
        """Whether the round under way has a decision due at once whatever the clock
        says: its seed was revealed (:meth:`seed_revealed`), or a racer out of it is
        back (:meth:`back_in_race`)."""
        return self.seed_revealed() or bool(self.back_in_race())

    def seed(self) -> int:
        """The seed the round deals (the certified candidate, for a winnable room)."""
        return round_seed(self.meta.secret, self.state.round, self.state.deal_attempt)

    def commitment(self) -> str:
        """What the countdown publishes: the seed, the salt and the certificate."""
        state = self.state
        secret, attempt = self.meta.secret, state.deal_attempt
        return round_commitment(secret, state.round, attempt, state.certificate)

    def log_name(self, racer: int) -> str:
        return log_name(self.state.round, racer)

    def new_game(self) -> RacerGame:
        settings = self.meta.settings
        return RacerGame(settings.variant, self.seed(), settings.options)

    # ------------------------------------------------------------------ fold
    def fold(self, version: int, event: RoomEvent, chain: str, live: bool = True) -> bool:
        """Apply one stored event if it is the next and, if ``live``, broadcast it
        (encoded once for every connection); False if it was already applied.
        ``chain`` is the store's chain value after it. Caller holds the lock."""
        if version <= self.state.version:
            return False
        self.state.apply(version, event)
        self.chain = chain
        kind = event.t
        if kind == EventType.RACE_OVER:
            self.revealed_round = max(self.revealed_round, self.state.round)
        elif kind == EventType.RACER_LEFT or (
            kind == EventType.PROGRESS and event.d["status"] in _OUT_STATUSES
        ):
            self._note_out(event.racer)
        if live:
            frame = encode(event.wire(version))
            for peer in list(self.racers.values()):
                peer.send_bytes(frame)
            for peer in list(self.spectators):
                peer.send_bytes(frame)
        if event.t == EventType.ROOM_RESET:
            self.games.clear()
            self.shadows.clear()
            self.sent_boards.clear()
            self.archived.clear()
            # Racer ids only grow: a room rematched for weeks would keep a lock for
            # every racer it ever had. One held now is its move's until it ends.
            self._moving = {r: lock for r, lock in self._moving.items() if lock.locked()}
        return True

    def moving(self, racer: int) -> asyncio.Lock:
        """The lock a move of ``racer`` holds from its check to its store's answer
        (moves.move). A racer's connection sends one request at a time, but two
        connections of one racer may both be here: the old one's move in flight when
        a resume replaced it. Unserialised, the new connection's move (the same move,
        sent again as the protocol asks) was answered ``moved`` from the engine that
        held the old move, as the retry of a stored move, before the store had
        answered the old one — which then failed, and the acknowledged move was in no
        log."""
        lock = self._moving.get(racer)
        if lock is None:
            lock = self._moving[racer] = asyncio.Lock()
        return lock

    def send_own_board(self, racer: int, at_ms: int) -> None:
        peer = self.racers.get(racer)
        game = self.games.get(racer)
        if peer is not None and game is not None:
            notice = board_notice(racer=racer, at_ms=at_ms, view=game.view(), owner=True)
            peer.send_bytes(encode(notice))
