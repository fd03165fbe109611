"""Room requests: list, create, join, quick, resume, watch, ready, start, resign,
rematch, leave, and a dropped connection. Each decides through :meth:`Node.decide`, so
every change is a stored event first and a broadcast second."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from solrace.protocol import BadMessage, CloseCode, CloseReason, ErrorCode, encode
from solrace.protocol.errors import RETRY_STORE_MS
from solrace.protocol.limits import (
    LISTING_COST,
    MAX_REPLAY_EVENTS,
    MAX_ROOMS_LISTED,
    RESUME_COST,
    ROOM_CODE_ALPHABET,
    ROOM_CODE_LEN,
    SEAT_SETTLE_S,
    TOKEN_BYTES,
    replay_cost,
)
from solrace.protocol.messages import (
    CreateRoom,
    JoinRoom,
    QuickRace,
    Resume,
    Revealed,
    Watch,
    joined_reply,
    resync_notice,
    watching_reply,
)
from solrace.protocol.views import LeaveReason, Phase, RacerStatus, RoomSummary, Snapshot
from solrace.race import RaceError, RoomSettings, validate_settings
from solrace.race import decisions as decide_
from solrace.race.events import RoomEvent
from solrace.race.settings import default_deals
from solrace.race.state import JOIN_INTERVAL_MS, RESUME_INTERVAL_MS
from solrace.store import SeatClaim, token_digest
from solrace.store.errors import CodeTaken, StoreUnavailable

from . import certify, listing, spectators
from .clock import SLEW_MS_PER_S
from .node import EMPTY_ROOM_TTL_S, first_racer, no_longer_exists, refuse
from .records import RoomMeta, unpack_event
from .room import LiveRoom
from .snapshots import snapshot_for

if TYPE_CHECKING:
    from .node import Node
    from .peer import Peer

log = logging.getLogger("solrace.lobby")

#: Listed rooms a ``list`` or ``quick`` reads at most: lobbies first, newest first.
LISTING_SCAN: Final = 100
#: Reads of the listing one ``list`` makes at most: a second only if the first unlisted
#: rooms that can never be joined (their places are read then), so a read costs at most
#: this many LISTING_SCANs however many such rooms there are.
LISTING_READS: Final = 2
#: Hex digits of the digest a room keeps of a seat's address (seat_origin): 64 bits,
#: plenty to tell the few addresses of one room apart.
ORIGIN_HEX_DIGITS: Final = 16
#: The longest ``retry_after_ms`` a resume (a join) refused ``rate_limited`` gives: the
#: bucket's interval, stretched by the most a node's slewing clock lags the client's
#: (decisions.client_wait_ms).
RESUME_WAIT_MAX_MS: Final = decide_.client_wait_ms(RESUME_INTERVAL_MS, SLEW_MS_PER_S)
JOIN_WAIT_MAX_MS: Final = decide_.client_wait_ms(JOIN_INTERVAL_MS, SLEW_MS_PER_S)
#: How long the room a client-proposed token was seated in can be found by that token
#: alone (Store.claim_seat): a client whose ``joined`` reply was lost resumes within
#: seconds, and the seat it could not find is freed by the 30 s disconnect grace once
#: its connection's close is noticed (the server's keepalive: under a minute).
SEAT_CLAIM_TTL_S: Final = 300
#: A ``quick`` refused one of these by a lobby it found tries the next (or opens one).
_NEXT_QUICK_ROOM: Final = frozenset(
    {
        ErrorCode.ROOM_FULL,
        ErrorCode.WRONG_PHASE,
        ErrorCode.UNKNOWN_ROOM,
        ErrorCode.SAME_ADDRESS,
        ErrorCode.RATE_LIMITED,  # this address joined it too often (decisions.join_too_soon)
    }
)


async def list_rooms(node: Node, peer: Peer, variant: str | None) -> list[RoomSummary]:
    """Listed rooms that can still be joined or watched: in the lobby, counting down
    or racing, with at least one racer — and, in the lobby, one online (a lobby whose
    racers all hung up offers nobody to race: rooms/listing.py). From the node's cached
    listing (listing_cache.py)."""
    peer.charge(LISTING_COST)
    summaries = await node.listing_cache.summaries(lambda: _read_listing(node))
    return [s for s in summaries if variant is None or s["variant"] == variant][:MAX_ROOMS_LISTED]


async def _read_listing(node: Node) -> list[RoomSummary]:
    """The summaries of the newest LISTING_SCAN listed rooms that can be joined or
    watched. Rooms that can never be (their keys gone; no racer past the seat-settle
    window) leave the listing as they are read, and the rooms they took the place of are
    read then, once: past their window, a hundred such rooms hid every real one (an
    operator audit), on every read until something unlisted them."""
    summaries: list[RoomSummary] = []
    seen: set[str] = set()
    for _ in range(LISTING_READS):
        unlisted = False
        for room_id in await node.store.listed_rooms(limit=LISTING_SCAN):
            if room_id in seen:
                continue
            seen.add(room_id)
            summary, gone = await _listed(node, room_id)
            unlisted |= gone
            if summary is not None:
                summaries.append(summary)
        if not unlisted:
            break
    return summaries


async def _listed(node: Node, room_id: str) -> tuple[RoomSummary | None, bool]:
    """A listed room's summary if ``list`` shows it, and whether it was unlisted."""
    try:
        room = await node.room(room_id)
    except BadMessage:
        await node.store.unlist(room_id)  # its keys expired
        return None, True
    state = room.state
    if not state.racers and node.clock() - room.meta.created_ms > SEAT_SETTLE_S * 1000:
        # Its creator's join never stored (a create cut between its writes,
        # listing.never_joined), or everyone left it and its unlisting was lost: past
        # the window no join can still come (the fold just read the stored events).
        await node.store.unlist(room_id)
        return None, True
    if state.phase == Phase.FINISHED or not state.racers:
        return None, False
    if state.phase == Phase.LOBBY and listing.nobody_in(state):
        return None, False
    return state.summary(), False


async def create(node: Node, peer: Peer, msg: CreateRoom, request_id: int | None) -> None:
    settings = RoomSettings(
        variant=msg.variant,
        options=dict(msg.options),
        max_racers=msg.max_racers,
        time_limit_s=msg.time_limit_s,
        private=msg.private,
        spectator_delay_s=msg.spectator_delay_s,
        deals=msg.deals or default_deals(msg.variant, msg.difficulty),
        difficulty=msg.difficulty,
        spectators=msg.spectators,
    )
    await _open_and_join(node, peer, settings, msg.name, request_id, msg.token)


async def _open_and_join(
    node: Node,
    peer: Peer,
    settings: RoomSettings,
    name: str,
    request_id: int | None,
    proposed: str | None,
) -> None:
    """Open a room with ``settings`` for ``peer`` and seat ``name`` in it (``create``,
    or a ``quick`` that found no lobby). A ``proposed`` token is claimed for the new
    room's id before the room is written: refused ``token_in_use``, the request stores
    nothing (made first, the refused join after it left an empty room — listed, a
    quick lobby, its code held for a day). Of the writes this way round, a fault
    between them leaves at most the claim, which names a room that never came: a
    resume by the token is told ``unavailable`` while it may still come, ``bad_token``
    after (resume), and the claim expires; the other way round it left the room."""
    settings = _checked(settings)  # a refused setting costs nothing ...
    peer.may_open_room()  # ... and a client past its rooms (too_many_rooms) no write
    room_id = _new_room_id()
    # Before the claim: its time is what every node judges the seat's settle window by
    # (_unsettled), and the room's created_ms and every decision after it follow.
    await node.clock_before_serving()
    if proposed is not None:
        await _claim_seat(node, room_id, proposed)
    try:
        room = await _create_room(node, settings, room_id)
    except (StoreUnavailable, BadMessage):
        if proposed is not None:  # no room, so no seat: the token is free again
            with contextlib.suppress(StoreUnavailable):
                await node.store.release_seat_claim(token_digest(proposed))
        raise
    try:
        await _join(node, peer, room, name, request_id, proposed, claimed=proposed is not None)
    except (StoreUnavailable, BadMessage, RaceError) as exc:
        if _join_not_stored(exc) and not room.state.racers and not settings.private:
            # The create is abandoned with nobody in its room: out of the quick
            # lobbies and the listing now (best effort: Redis may be what failed; then
            # ``list``, ``quick`` or the sweep does once the seat-settle window is
            # past, listing.never_joined). Not when the join's outcome is unknown: a
            # join stored all the same could not list the room again (a listing only
            # moves a room still listed, Store.move_listing), so ``list`` decides it
            # after the window, on the room's stored events. Read again first: a
            # quick racer another node seated in the room meanwhile (nobody in it
            # yet takes the next) is in no fold here, and the drop left him in a
            # room no ``quick`` or ``list`` finds (a review). The read failing, the
            # room is left to them.
            with contextlib.suppress(StoreUnavailable, BadMessage):
                await node.sync(room)
                if not room.state.racers:
                    await listing.drop_never_joined(node, room)
        raise


def _join_not_stored(exc: Exception) -> bool:
    """Whether a failed join is known to have stored nothing: every failure but the
    ``unavailable`` refusal naming the seat it may have taken (``_join``)."""
    return not (isinstance(exc, BadMessage) and exc.room is not None)


def _checked(settings: RoomSettings) -> RoomSettings:
    """``settings`` as the rules take them, or the refusal (``bad_options``, …)."""
    try:
        return validate_settings(settings)
    except RaceError as exc:
        raise refuse(exc) from None


def _new_room_id() -> str:
    """A fresh room id, drawn at random (never checked: 48 bits)."""
    return "r_" + secrets.token_hex(6)


async def _create_room(node: Node, settings: RoomSettings, room_id: str | None = None) -> LiveRoom:
    """A new room, id ``room_id`` (None: a fresh one), with ``settings`` as
    :func:`_checked` returns them."""
    room_id = room_id or _new_room_id()
    for _ in range(10):
        code = "".join(secrets.choice(ROOM_CODE_ALPHABET) for _ in range(ROOM_CODE_LEN))
        meta = RoomMeta(
            room=room_id,
            code=code,
            secret=node.room_secret(),
            settings=settings,
            created_ms=node.clock(),
        )
        try:
            # With an expiry, so no fault can leave a room for ever (set apart, a node
            # killed between the two writes left one that did): ten minutes, which its
            # first racer's join makes its lifetime cap in the join's own write
            # (node.expiry_set_by). Created with the cap, a create cut before that
            # join left its meta and code a day, with nobody ever in the room.
            await node.store.create_room(
                meta.room,
                code,
                meta.encode(),
                listed=not settings.private,
                now_ms=node.clock(),
                ttl_s=EMPTY_ROOM_TTL_S,
                quick=listing.quick_of(settings),
            )
        except CodeTaken:
            continue
        # A resume by the creator's token alone may have loaded the room already, on
        # this node, once its writes landed (its claim names it): one LiveRoom a room.
        room = node.rooms.setdefault(meta.room, LiveRoom(meta))
        room.last_used_ms = node.clock()  # as Node.room marks a room it loads
        # A public room's code too: racers report rooms by their code, the log names
        # them by id. Not a private room's: its code is the key to it, and its id is
        # in every race id (docs/server.md).
        extra: dict[str, object] = {"room": meta.room, "variant": settings.variant}
        extra.update({"private": True} if settings.private else {"code": meta.code})
        log.info("room created", extra=extra)
        return room
    raise BadMessage(ErrorCode.INTERNAL, "could not allocate a room code")


async def room_by_code(node: Node, peer: Peer, code: str) -> LiveRoom:
    """The room ``code`` names, for a ``join`` or ``watch`` of ``peer``: refused
    ``rate_limited`` before the lookup if its client tried too many codes that named no
    room (Peer.may_try_code), and a code that names none counted against it. Counted
    by nothing but the message rate, one address tried a thousand codes a second, and
    codes are 2**30: a private room among a thousand was found within minutes."""
    peer.may_try_code()
    try:
        return await node.room_by_code(code)
    except BadMessage as exc:
        if exc.code == ErrorCode.UNKNOWN_ROOM:
            peer.missed_code()
        raise


async def join(node: Node, peer: Peer, msg: JoinRoom, request_id: int | None) -> None:
    room = await room_by_code(node, peer, msg.code)
    await _join(node, peer, room, msg.name, request_id, msg.token)


async def quick(node: Node, peer: Peer, msg: QuickRace, request_id: int | None) -> None:
    try:
        validate_settings(RoomSettings(variant=msg.variant))
    except RaceError as exc:
        raise refuse(exc) from None
    peer.charge(LISTING_COST)
    # The variant's own quick lobbies, oldest first: lobbies of other variants, however
    # many, hide none of them (read among the newest hundred of every variant, they did).
    for room_id in await node.store.quick_lobbies(msg.variant, limit=LISTING_SCAN):
        try:
            room = await node.room(room_id)
        except BadMessage:
            await node.store.drop_quick(msg.variant, room_id)  # its keys expired
            continue
        state = room.state
        if listing.never_joined(state, room.meta.created_ms, node.clock()):
            # Its create was cut before its creator's join and no join can still come:
            # a room ``list`` hides, its keys on a new room's ten minutes. Kept, every
            # quick read it, and the next quick racer was seated in it, a room no
            # ``list`` showed.
            await listing.drop_never_joined(node, room)
            continue
        if (
            state.phase != Phase.LOBBY
            or state.everyone_left()
            or not await _still_quick(node, room)
        ):
            # Moved on (its race began, everyone left it), or the write that took it
            # out of the quick lobbies was lost (a fault, a node killed): it leaves
            # them now, not to be read again by every quick until its keys expire.
            await node.store.drop_quick(msg.variant, room_id)
            continue
        if (
            len(state.racers) < state.settings.max_racers
            and not listing.nobody_in(state)  # sorted out late (its sort was retried)
            # One that seats this address already is passed over without a decision
            # (each tried cost one: an audit); decisions.join stays the rule.
            and not decide_.seats_its_origin(state, seat_origin(room, peer), node.seats_per_address)
        ):
            try:
                await _join(node, peer, room, msg.name, request_id, msg.token)
                return
            except BadMessage as exc:
                if exc.code in _NEXT_QUICK_ROOM:
                    # Filled, started or closed since it was listed, or it seats this
                    # client's address already: a quick race never seats one twice.
                    continue
                raise
    settings = RoomSettings(variant=msg.variant, quick=True, deals=default_deals(msg.variant))
    await _open_and_join(node, peer, settings, msg.name, request_id, msg.token)


def seat_origin(room: LiveRoom, peer: Peer) -> str | None:
    """What the room keeps of the address a seat was taken from (None: not counted):
    a digest keyed by the room's secret, which tells one address from another within
    the room but cannot be looked up in a table of every address's hash, nor links one
    person's seats across rooms (a seat audit reversed an unkeyed one)."""
    if peer.address is None:
        return None
    digest = hmac.new(room.meta.secret, peer.address.encode(), hashlib.sha256)
    return digest.hexdigest()[:ORIGIN_HEX_DIGITS]


async def _still_quick(node: Node, room: LiveRoom) -> bool:
    """Whether a lobby among its variant's quick lobbies is still listed: one that
    raced and began a rematch is a lobby again, but only for its racers (unlisted)."""
    return room.state.round == 1 or await node.store.is_listed(room.room_id)


async def _claim_seat(node: Node, room_id: str, proposed: str) -> str:
    """Claim the ``proposed`` token for a seat in ``room_id`` (Store.claim_seat), or
    refuse ``token_in_use`` with nothing written; the claim's digest. Atomic: of two
    requests proposing one token at once, on any nodes, only one is seated (both passed
    a check before a plain SET)."""
    digest = token_digest(proposed)
    if not await node.store.claim_seat(digest, room_id, node.clock(), SEAT_CLAIM_TTL_S):
        raise BadMessage(ErrorCode.TOKEN_IN_USE)  # another request's: nothing written
    return digest


async def _join(
    node: Node,
    peer: Peer,
    room: LiveRoom,
    name: str,
    request_id: int | None,
    proposed: str | None = None,
    *,
    claimed: bool = False,
) -> None:
    """Seat ``name`` in ``room``. Its token is the one the client ``proposed`` (it holds
    it before the reply: a lost ``joined`` costs it a resume by that token), else one
    drawn here (an older client). A proposed token is stored exactly as a drawn one —
    its digest, with the ``racer_joined`` — once the room it lands in is claimed for it
    (Store.claim_seat), so a resume by the token alone finds that room. ``claimed``:
    this request claimed it already, for the room it has just made (_open_and_join);
    the claim is still released here if the seat is refused or never decided."""
    token = proposed if proposed is not None else secrets.token_urlsafe(TOKEN_BYTES)
    joined: list[int] = []
    origin = seat_origin(room, peer)
    claim: str | None = token_digest(proposed) if proposed is not None and claimed else None
    if proposed is not None and not claimed:
        # A join the folded state already refuses (room full, too many joins, …) is
        # refused before it writes a claim: refusals must not leave keys behind.
        try:
            decide_.join(
                room.state, name, origin, node.seats_per_address, node.clock(), SLEW_MS_PER_S
            )
        except RaceError as exc:
            raise refuse(exc) from None
        # One seat per token: two racers under one digest would make a resume by it
        # take either seat. The seated token of this room (its claim may be gone), then
        # the claim.
        if await node.store.racer_for_token(room.room_id, token_digest(proposed)) is not None:
            raise BadMessage(ErrorCode.TOKEN_IN_USE)
        claim = await _claim_seat(node, room.room_id, proposed)  # to release if not stored

    def decision() -> list[RoomEvent]:
        events = decide_.join(
            room.state, name, origin, node.seats_per_address, node.clock(), SLEW_MS_PER_S
        )
        joined[:] = [events[0].racer]
        return events

    def racer_token(events: list[RoomEvent]) -> tuple[str, str]:
        return str(events[0].racer), token_digest(token)  # stored with the racer_joined

    try:
        await node.decide(
            room,
            decision,
            token=racer_token,
            conn=peer.conn_id,
            node=node.node_id,
            origin=origin,
        )
        log.info("racer joined", extra={"room": room.room_id, "racer": joined[0]})
        await _enter_as_racer(node, peer, room, joined[0], token, request_id, since=None)
    except RaceError as exc:
        # Refused on the stored state: nothing of this racer was stored.
        if claim is not None:
            with contextlib.suppress(StoreUnavailable):
                await node.store.release_seat_claim(claim)
        raise refuse(exc) from None
    except (StoreUnavailable, BadMessage) as exc:
        if not joined:
            # Not decided: nothing of this racer was stored. Its claim goes (best
            # effort: the store may be what failed), so that a resume by the token
            # says ``bad_token`` and the token is free to be proposed again.
            if claim is not None:
                with contextlib.suppress(StoreUnavailable):
                    await node.store.release_seat_claim(claim)
            raise
        # The racer may be stored (Redis failed after its racer_joined), online on this
        # connection, which is refused and never attached, so its close would record
        # nothing: record it offline, so that its grace frees the seat instead of a
        # ghost holding the lobby for ever. If it was not stored, this writes nothing
        # (an offline about another connection is no news: decisions.presence).
        await node.record_offline(room, joined[0], peer.conn_id)
        if first_racer(joined[0]):
            # A first join may be stored, which gave the room its day in its own write;
            # the code's settle follows only a join read back (Node._after_decision),
            # and this node serves the room on, so no sweep settles it: the code kept
            # a new room's ten minutes, and friends given it could not join a lobby
            # waiting past them (a review). Harmless if the join was not stored: the
            # code only ever grows to the room's expiry (ten minutes then).
            await node.insist(
                lambda: node.store.settle_expiry(room.room_id),
                "could not extend a new room's expiry",
                {"room": room.room_id},
            )
        # That offline may be written late (once Redis answers): after this connection
        # resumed the seat. About a connection id it no longer has, it changes nothing.
        peer.new_conn_id()
        if isinstance(exc, BadMessage) and exc.code != ErrorCode.UNAVAILABLE:
            raise
        # Outcome unknown: joining again would take a second seat if this one was
        # stored. The refusal names it; a resume with its token takes it, or says
        # ``bad_token`` if it was not stored (then joining again is safe).
        raise BadMessage(
            ErrorCode.UNAVAILABLE,
            "the server is temporarily unavailable: resume the seat this names (room,"
            " token), or join again if it is refused bad_token",
            retry_after_ms=RETRY_STORE_MS,
            room=room.room_id,
            token=token,
        ) from None
    await node.tick(room)


async def _enter_as_racer(
    node: Node,
    peer: Peer,
    room: LiveRoom,
    racer: int,
    token: str,
    request_id: int | None,
    since: int | None,
    *,
    resumed: bool = False,
    revealed: Revealed | None = None,
) -> None:
    """Send ``joined`` (snapshot at the folded version), then the events missed
    since ``since``, then attach the peer for live events — all under the room
    lock, so no live event can slip in between. ``resumed``: first record the racer
    online on this connection (:func:`_resumed_locked`), under the same lock.
    ``revealed``: the resume's proof that the round's seed went out (:func:`_proof`)."""
    async with room.lock:
        await node.join_room(room)
        await node.sync_locked(room)
        proved = await _proof(node, peer, room, revealed, "a resumed racer")
        held: int | None = None  # the last version its client can have seen
        if resumed:
            before = room.state.version
            await _resumed_locked(node, peer, room, racer)
            if room.state.version > before:
                # Its presence, just stored, is the last event folded: no client saw it.
                held = room.state.version - 1
        snapshot = await snapshot_for(node, room, racer)
        replay = await _missed(node, peer, room, since)
        peer.send(
            joined_reply(
                request_id,
                room=room.room_id,
                code=room.meta.code,
                racer=racer,
                token=token,
                snapshot=snapshot,
                replay=len(replay),
            )
        )
        for frame in replay:
            peer.send_bytes(frame)
        _rewound(node, peer, room, since, snapshot, racer=True, held=held)
        _attach_racer(node, peer, room, racer)
        if proved:
            node.schedule(room)  # now served here: its timer ends the race at once


async def _resumed_locked(node: Node, peer: Peer, room: LiveRoom, racer: int) -> None:
    """Record ``racer`` online on ``peer``'s connection (announced even if it never
    looked offline, so that its previous connection, on whichever node, is closed),
    before anything is sent: refused ``bad_token`` (nothing stored) if the racer is
    no longer one by the time the room is read again. Caller holds the room's lock.

    A rematch decided on another node from the room before this presence drops the
    racer (offline then); decided after, it keeps it (online). Sent ``joined`` first
    and recorded online after, a resume whose presence came after such a reset left
    its connection attached to a room without its racer: ``ready`` refused
    ``not_racer``, ``join`` ``already_in_room``, for good (5 of 12 tries of a
    lifecycle audit)."""

    def decision() -> list[RoomEvent]:
        if _not_resumable(room, racer) is not None:
            return []
        return decide_.resumed(room.state, racer, node.clock(), SLEW_MS_PER_S)

    try:
        await node.decide_locked(room, decision, conn=peer.conn_id, node=node.node_id)
    except RaceError as exc:  # resumed too often (another node's resume, folded now)
        raise _too_soon(node, peer, room, racer, exc) from None
    refusal = _not_resumable(room, racer)
    if refusal is not None:
        raise refusal


def _too_soon(node: Node, peer: Peer, room: LiveRoom, racer: int, refusal: RaceError) -> BadMessage:
    """The ``rate_limited`` refusal of a resume past the racer's resume bucket
    (decisions.resume_too_soon), said as a repeated line: a client reconnecting in a
    loop causes it at will, and the operator learns from it which address."""
    node.repeated.note(
        log,
        "resumed again too soon",
        peer.origin(),
        {**peer.ids(), "room": room.room_id, "racer": racer},
    )
    return refuse(refusal)


def _not_resumable(room: LiveRoom, racer: int) -> BadMessage | None:
    """Why ``racer`` can no longer resume its seat in ``room`` as folded (gone from
    it, or gone from its race), or None."""
    member = room.state.racers.get(racer)
    name = f"room {room.meta.code}"
    if member is None:
        return BadMessage(
            ErrorCode.BAD_TOKEN,
            f"you are no longer a racer of {name} (you left it, were away longer than "
            f"the {decide_.DISCONNECT_GRACE_MS // 1000} s grace while it was not racing, or "
            "were away when its rematch began): join it again",
        )
    if member.status == RacerStatus.LEFT:
        why = (
            f"you were away longer than the {decide_.DISCONNECT_GRACE_MS // 1000} s grace"
            if member.left_reason == LeaveReason.GRACE
            else "you left this race"
        )
        return BadMessage(ErrorCode.BAD_TOKEN, f"{why}: you can watch {name}")
    return None


def _attach_racer(node: Node, peer: Peer, room: LiveRoom, racer: int) -> None:
    old = room.racers.get(racer)
    if old is not None and old is not peer:
        old.detach()
        old.close_later(CloseCode.NORMAL, CloseReason.REPLACED)
    room.racers[racer] = peer
    room.serving = True
    peer.attach_racer(room, racer)
    node.schedule(room)


async def resume(node: Node, peer: Peer, msg: Resume, request_id: int | None) -> None:
    # Named by the code the client gave until its token proves it a racer of the room:
    # a room id travels in every result (race ids), and a refusal must not hand its
    # private room's code to whoever tries a made-up token.
    name = f"room {msg.code}" if msg.code else "this room"
    gone = no_longer_exists(name)
    room_id = msg.room
    claim: SeatClaim | None = None
    if room_id is None:  # the seat a create/join/quick took with this token proposed
        claim = await node.store.claimed_seat(token_digest(msg.token))
        if claim is None:
            raise _not_seated()
        room_id = claim.room_id
    try:
        room = await node.room(room_id)
    except BadMessage as exc:
        if exc.code == ErrorCode.UNKNOWN_ROOM:
            # A claimed room not there is a room still being made (a create or quick
            # claims its token before it writes its room: _open_and_join), then one
            # never made.
            raise (gone if claim is None else _unsettled(node, claim)) from None
        raise
    racer_id = await node.store.racer_for_token(room.room_id, token_digest(msg.token))
    racer = int(racer_id) if racer_id is not None else None
    member = room.state.racers.get(racer) if racer is not None else None
    if racer is None and claim is not None:
        # Only the token's holder gets here, and it knows the room already (it asked
        # to be seated there): ``bad_token`` says what happened, private room or not.
        raise _unsettled(node, claim)
    if racer is None:
        if room.meta.settings.private:
            # As if it did not exist (as ``watch`` by id answers): a made-up token
            # must not tell whoever holds a private room's id that the room is there.
            raise gone
        raise BadMessage(ErrorCode.BAD_TOKEN, f"this token is not a racer's of {name}")
    refusal = _not_resumable(room, racer)
    if refusal is not None:
        raise refusal
    assert member is not None  # a racer of the room (_not_resumable)
    if peer.room is not None and (peer.room is not room or peer.racer != racer):
        raise BadMessage(ErrorCode.ALREADY_IN_ROOM)
    # A resume on the connection that already is the racer's (online, recorded as this
    # connection) is a resync: the snapshot and the missed events, nothing new for
    # the room. Each one rebuilt the engine and stored a presence event that every
    # other racer and spectator received: repeated at the rate limit, an audit grew a
    # room's stream by 190 events in 10 s (about 250 MB a day per connection).
    again = peer.room is room and member.online and member.conn == peer.conn_id
    if not again:
        # Refused at once, before the room's lock or any write, when the state folded
        # here already says so; decided again on the stored state (_resumed_locked).
        too_soon = decide_.resume_too_soon(member, node.clock(), SLEW_MS_PER_S)
        if too_soon is not None:
            raise _too_soon(node, peer, room, racer, too_soon)
        room.games.pop(racer, None)  # rebuild from the store: it may have moved elsewhere
    peer.charge(RESUME_COST)
    try:
        await _enter_as_racer(
            node,
            peer,
            room,
            racer,
            msg.token,
            request_id,
            msg.since,
            resumed=not again,
            revealed=msg.revealed,
        )
    except StoreUnavailable:
        if again:
            raise
        # The racer may be recorded online on this connection (its presence stored, a
        # read after it failed), which is refused and never attached, so its close
        # would record nothing: record it offline, so that its grace runs. If it was
        # not stored, this writes nothing (decisions.presence); written late, after
        # this connection resumed again under a new id, it changes nothing either.
        await node.record_offline(room, racer, peer.conn_id)
        peer.new_conn_id()
        raise
    if not again:
        log.info("racer resumed", extra={"room": room.room_id, "racer": racer})


def _unsettled(node: Node, claim: SeatClaim) -> BadMessage:
    """The answer to a resume by a token alone whose claim has no seat (nor, maybe, its
    room) yet: a seat still being written while the claim is younger than
    SEAT_SETTLE_S (``unavailable``: resume again), then one never stored."""
    if node.clock() - claim.at_ms < SEAT_SETTLE_S * 1000:
        return BadMessage(
            ErrorCode.UNAVAILABLE,
            "the seat this token asked for is still being taken: resume again shortly",
            retry_after_ms=RETRY_STORE_MS,
        )
    return _not_seated()


def _not_seated() -> BadMessage:
    """A resume by a token alone whose seat was never stored: asking again is safe."""
    return BadMessage(
        ErrorCode.BAD_TOKEN,
        "no seat was taken with this token (the request that proposed it was not"
        " stored, or it was long ago): ask again",
    )


def _rewound(
    node: Node,
    peer: Peer,
    room: LiveRoom,
    since: int | None,
    snapshot: Snapshot,
    *,
    racer: bool,
    held: int | None = None,
) -> None:
    """A client resuming or watching from a version the room does not hold saw events
    the store has since lost (an embedded store's data directory restored without its
    last writes, a Redis restarted from an old snapshot — with the node that had seen
    them gone, nothing else remembers): say so to it (``resync``, with the snapshot it
    was just sent), and — on a ``racer``'s word, its token proving it one of the room —
    to the operator (Node.client_ahead). Before, an audit's racers were put back a
    hundred events, their acknowledged moves gone, in silence. A spectator is anyone:
    on its word alone a client could raise the data-loss alarm on every room (the
    random-requests audit did, with a made-up ``since``), so it is only resynchronised.

    ``held``: the last version the client can have seen, when the request stored an
    event of its own (a resume's ``presence``). Events stored after a restore — the
    resume's own, offlines of racers whose node's lease lapsed — took the lost
    versions again, and an audit's racer, back at the very version it had seen (a
    race whose ``race_over`` it had seen), was rewound without a word."""
    version = snapshot["version"]
    if since is None or since <= (version if held is None else held):
        return
    if racer:
        node.client_ahead(room, since)
    else:
        node.repeated.note(  # anyone may send a made-up since: one line every 10 s
            log,
            "a spectator had seen a version the room does not hold: resynchronised",
            peer.origin(),
            {**peer.ids(), "room": room.room_id, "detail": f"version {since}, now {version}"},
        )
    reused = "" if since > version else ", other events in their place"
    reason = (
        f"the server lost its last changes to this room (you had seen version {since}; "
        f"it now holds {version}{reused})"
    )
    lost = max(0, since - version)  # 0: the versions were reused for other events
    peer.send(resync_notice(reason=reason, lost_events=lost, snapshot=snapshot))


async def _proof(
    node: Node, peer: Peer, room: LiveRoom, revealed: Revealed | None, who: str
) -> bool:
    """Whether ``revealed`` (a resume's or watch's) proves that the round the store
    holds not yet over is one whose seed already went out (LiveRoom.proven_round):
    the store lost its race_over (restored, rewound) and this node, holding no memory
    of it, would race the revealed deal on. The race then ends at once (from a lobby:
    as soon as it starts), as at its time limit, and takes no move. Said once, as a
    warning: a store rewind, which the operator should know of. A proof that is not
    the round's changes nothing. Caller holds the room's lock, the room freshly
    synced.

    The proof is written to the store before this node acts on it
    (Store.reveal_round: the room's ``over`` rises to the round): from that one
    atomic write on, no node stores a move of the round, and a node that takes the
    room up later — this one after dropping it idle, another — reads it back
    (Node.room). Kept in this node's memory only, a node that dropped the room
    before its countdown forgot it, and the other nodes serving the room took moves
    until they folded the race's end. A write Redis fails refuses the request
    (``unavailable``), this node keeping nothing (the write may have been made: a
    timeout cannot tell): the client's retry brings the proof again."""
    if revealed is None:
        return False
    number = room.proven_round(revealed.seed, revealed.salt)
    if number is None:
        return False
    before = await node.store.reveal_round(room.room_id, number)
    room.revealed_round = max(room.revealed_round, number, before)
    if before >= number:
        return True  # another node was given the proof first, and said so
    if number > room.state.round:  # a later round's: the store went back
        said = (
            f"{who} proved round {number}'s seed was already revealed (a store"
            f" rewind to round {room.state.round}): every round up to it ends as soon as it"
            " starts, as at its time limit"
        )
    else:
        when = "as soon as it starts" if room.state.phase == Phase.LOBBY else "now"
        said = (
            f"{who} proved the round's seed was already revealed (a store rewind):"
            f" the race ends {when}, as at its time limit"
        )
    log.warning(said, extra={**peer.ids(), "room": room.room_id, "detail": f"round {number}"})
    return True


#: Ticks that end a round proved revealed from its countdown (prove_archived): it
#: starts, its racers time out, its race_over.
_ENDING_TICKS: Final = 3


async def prove_archived(node: Node, peer: Peer, record: Mapping[str, Any]) -> None:
    """Before a ``result`` reply sends an archived result: if its round is one the
    store holds not yet over — the store lost its ``race_over`` (a rewind of the
    room's keys; on a Cluster the archive lives in another slot, so another shard's
    failover need not lose it) — the result is the proof a resume or watch sends back
    (:func:`_proof`), and it ends that round first. Sent as it was, it gave anyone who
    knew the race id (its room and commitment, which every racer and spectator saw at
    the countdown) the seed of a race under way: an audit's racer, its client sending
    no proof, fetched it after the rewind and won the deal's winning line, 528 moves.

    One read when the store knows a later round is over (its race_over stored:
    Store.round_ended).
    Otherwise the room is taken up, or synced if held here (its keys expired: nothing
    goes on, and the result is sent; taking it up under way looks for its archive
    itself, Node._archived_already). Raises StoreUnavailable (the request is refused, nothing
    sent) when Redis fails a read or the proof's write, or the race has not ended
    after its ticks (Redis failed their writes: they retry on the room's timer)."""
    room_id, round_no = str(record["room"]), record.get("round")
    # A later round's race_over stored: this one ended. Not ``over`` (Store.round_over):
    # a proof (Store.reveal_round) raises it too, its round closed to moves but its
    # race_over still to come (a tick Redis failed retries on the room's timer) — and
    # a later round's proof raises it past the round the store holds under way (a
    # rewind to round N, round N+1's archived result sent back, its ending ticks
    # failed): read as over, a retry of a refused request, or any request on another
    # node, sent the seed of the race under way.
    if isinstance(round_no, int) and await node.store.round_ended(room_id) > round_no:
        return
    try:
        room = await node.room(room_id)
    except BadMessage:
        return  # gone (expired, or its history lost): no round of it goes on
    result = record["result"]
    revealed = Revealed(seed=int(result["seed"]), salt=str(result["salt"]))
    async with room.lock:
        if room.proven_round(revealed.seed, revealed.salt) is not None:
            await node.join_room(room)
            await node.sync_locked(room)
            await _proof(node, peer, room, revealed, "an archived result")
    # The race ends before the result goes, its race_over first (a tick a step: the
    # start of a round counting down, the timeouts, the race_over), whether this proof
    # or the room's take-up (Node._archived_already) found the round revealed.
    for _ in range(_ENDING_TICKS):
        if not room.seed_revealed():
            return
        await node.tick(room)
    if room.seed_revealed():
        # A tick swallows the store's failure (it retries on its timer): the round is
        # closed to moves but not over, and its racers saw no race_over. Sent now,
        # the seed went out with the race under way; refused, the client asks again.
        raise StoreUnavailable("the race a result reveals has not ended yet")


async def _missed(node: Node, peer: Peer, room: LiveRoom, since: int | None) -> list[bytes]:
    """The stored events after ``since`` up to the folded version, as frames; the
    events read are charged to ``peer`` (limits.REPLAY_EVENTS_PER_UNIT)."""
    version = room.state.version
    if since is None or since >= version or version - since > MAX_REPLAY_EVENTS:
        return []
    entries = await node.store.events_since(room.room_id, since, limit=version - since)
    peer.charge(replay_cost(len(entries)))
    if not entries or entries[0].version != since + 1:
        return []  # older than the stored history: the snapshot stands
    frames = []
    for event in entries:
        if event.version > version:
            break
        frames.append(encode(unpack_event(event.data).wire(event.version)))
    return frames


async def watch(node: Node, peer: Peer, msg: Watch, request_id: int | None) -> None:
    if msg.code is not None:
        room = await room_by_code(node, peer, msg.code)
    else:
        assert msg.room is not None
        room = await node.room(msg.room)
        if room.meta.settings.private:  # as if it did not exist: its id proves nothing
            raise BadMessage(ErrorCode.UNKNOWN_ROOM, f"no room {msg.room}")
    async with room.lock:
        most = node.spectators_per_room
        if most and len(room.spectators) >= most:
            # Before anything is read or sent: a refusal costs the node nothing, and
            # the room's racers do not wait behind one more connection's every frame.
            raise BadMessage(ErrorCode.TOO_MANY_SPECTATORS)
        await node.join_room(room)
        await node.sync_locked(room)
        await _proof(node, peer, room, msg.revealed, "a returning spectator")
        # Everything read from Redis is read before the spectator is added and its
        # reply sent: a read Redis fails then refuses the watch (one ``unavailable``,
        # retried) and leaves nothing behind. Read after, it left a spectator that
        # no connection detaches, or sent an error after ``watching`` (two replies)
        # and no boards (nothing else sends a board that does not change).
        replay = await _missed(node, peer, room, msg.since)
        boards = await spectators.initial_board_notices(node, room)
        room.spectators.add(peer)
        snapshot = await snapshot_for(node, room, None)
        peer.send(
            watching_reply(
                request_id,
                room=room.room_id,
                snapshot=snapshot,
                replay=len(replay),
            )
        )
        for frame in replay:
            peer.send_bytes(frame)
        _rewound(node, peer, room, msg.since, snapshot, racer=False)
        peer.attach_spectator(room)
        for notice in boards:
            peer.send(notice)
    node.schedule(room)


async def ready(node: Node, peer: Peer, flag: bool, open_boards: bool = False) -> None:
    room, racer = peer.racer_room()
    await _decide_or_refuse(node, room, lambda: decide_.ready(room.state, racer, flag, open_boards))
    await node.tick(room)


async def start_race(node: Node, peer: Peer) -> None:
    room, racer = peer.racer_room()
    if room.state.phase == Phase.LOBBY and not room.state.deal_ready():
        with contextlib.suppress(TimeoutError):  # refused below as not ready
            await certify.ready(node, room)
    made = await _decide_or_refuse(
        node,
        room,
        lambda: decide_.start(
            room.state, racer, node.clock(), room.commitment(), node.countdown_ms
        ),
    )
    if not made:  # the host's retry: the countdown was stored by a try whose reply was lost
        await node.after_countdown(room)


async def resign(node: Node, peer: Peer) -> None:
    room, racer = peer.racer_room()
    await _decide_or_refuse(node, room, lambda: decide_.resign(room.state, racer))
    await node.tick(room)


async def rematch(node: Node, peer: Peer) -> None:
    room, racer = peer.racer_room()
    made = await _decide_or_refuse(node, room, lambda: decide_.rematch(room.state, racer))
    if not made:
        # A retry: the reset was stored by a try whose reply was lost, and what follows
        # a reset with it (its logs and code given its lifetime) may not have been.
        with contextlib.suppress(StoreUnavailable):
            await node.store.settle_expiry(room.room_id)


async def leave(node: Node, peer: Peer) -> None:
    room = peer.room
    if room is None:
        return
    racer = peer.racer
    if racer is None:
        peer.detach()
        room.spectators.discard(peer)
        return
    # Stored first, detached after: a leave Redis fails is refused and the racer is
    # still in the room, so its retry is stored (detached first, the retry would find
    # no room and say ``ok`` for a leave nobody recorded).

    def leaving() -> list[RoomEvent]:
        if racer not in room.state.racers:
            return []  # its leave is stored (a retry whose reply was lost): done
        return decide_.leave(room.state, racer, conn=peer.conn_id)

    made = await _decide_or_refuse(node, room, leaving)
    if not made and not room.state.racers:
        # A retry: the leave that emptied the room was stored by a try whose reply
        # was lost; what follows it with it (unlisted, its code expiring) may not be.
        with contextlib.suppress(StoreUnavailable):
            await node.store.settle_expiry(room.room_id, unlist=True, final=True)
    if room.racers.get(racer) is peer:
        del room.racers[racer]
    room.games.pop(racer, None)
    peer.detach()
    await node.tick(room)


async def disconnected(node: Node, peer: Peer) -> None:
    """A connection closed without ``leave``: mark the racer offline; the grace
    timer makes it a forfeit if it does not come back."""
    room, racer = peer.room, peer.racer
    peer.detach()
    if room is None:
        return
    if racer is None:
        room.spectators.discard(peer)
        return
    if room.racers.get(racer) is not peer:
        return
    del room.racers[racer]
    room.games.pop(racer, None)
    await node.record_offline(room, racer, peer.conn_id)


async def _decide_or_refuse(
    node: Node, room: LiveRoom, decision: Callable[[], list[RoomEvent]]
) -> list[RoomEvent]:
    try:
        return await node.decide(room, decision)
    except RaceError as exc:
        raise refuse(exc) from None
