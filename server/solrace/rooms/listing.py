"""Where a public room sorts in the listing that ``list`` and ``quick`` read.

The listing is one sorted set (Store.move_listing): lobbies newest first, then races
under way, then lobbies whose every racer is offline. ``list`` reads the newest rooms,
a hundred at most (lobby.LISTING_SCAN), and ``quick`` read the newest lobbies: a lobby
nobody is in must not be among them. Measured before this existed (an audit):
101 Klondike lobbies, each from a connection that sent ``create`` and hung up (0.3 s
to make, ~10/s to keep up through their creators' 30 s grace), and a second ``quick
yukon`` no longer found the Yukon quick room waiting with 3 of 4 seats taken, nor
``list {variant: "yukon"}`` show it. Now such a lobby sorts behind every race as soon
as its last racer's offline is stored, and back among the lobbies when one is back.

``quick`` now reads its variant's quick lobbies apart (Store.quick_lobbies), which the
same moves keep (a quick room sorted as a race or as a lobby nobody is in leaves
them): a hundred lobbies of other variants, somebody in each, hid a waiting quick room
from it as well.

Which racers are online is the folded room state, whichever node holds their
connections: the node that stores an event that may move the room (a presence, a
join, a leave) sorts it, then reads the room again and sorts it again if an event
another node stored meanwhile moved it (:func:`sort_locked`). Of two nodes sorting
the same room at once, the one that writes last has read the room after the other's
event: the listing ends as the room's last event leaves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from solrace.protocol.limits import FIRST_RACER_ID, SEAT_SETTLE_S
from solrace.protocol.views import Phase
from solrace.race.events import EventType, RoomEvent
from solrace.store import Listing

if TYPE_CHECKING:
    from solrace.race.settings import RoomSettings
    from solrace.race.state import RoomState

    from .node import Node
    from .room import LiveRoom

#: Events after which a listed room may sort elsewhere (a countdown's move is
#: Node.after_countdown's; a race's end unlists the room).
MOVES_LISTING: Final = frozenset({EventType.PRESENCE, EventType.RACER_JOINED, EventType.RACER_LEFT})
#: Sorts of one room by one node in a row (each after reading what others stored):
#: more only if the room's racers come and go faster than Redis answers.
MAX_SORTS_IN_A_ROW: Final = 4


def never_joined(state: RoomState, created_ms: int, now_ms: int) -> bool:
    """A room nobody was ever seated in, past the window in which its creator's join
    could still be stored (SEAT_SETTLE_S): a create cut between its writes (its
    listing applied, its join never stored; its creator told ``unavailable`` or its
    node dead). Its code was told to nobody and ``list`` shows no room with nobody in
    it: it leaves the listing (``list``, the orphan sweep), and a quick room its
    variant's quick lobbies (the next ``quick`` that reads it, the sweep:
    :func:`drop_never_joined`) — kept there, every quick read it until its keys
    expired, and the next quick racer was seated in a room ``list`` had hidden. Its
    keys expire on a new room's ten minutes. Not a room everyone left (its expiry
    unlists it)."""
    return state.next_racer == FIRST_RACER_ID and now_ms - created_ms > SEAT_SETTLE_S * 1000


async def drop_never_joined(node: Node, room: LiveRoom) -> None:
    """Take a room :func:`never_joined` out of its variant's quick lobbies, then out of
    the listing: last, as the sweep reads the listing (a fault between leaves the room
    listed, for the next sweep or ``list``), not the quick lobbies."""
    quick = quick_of(room.meta.settings)
    if quick is not None:
        await node.store.drop_quick(quick, room.room_id)
    await node.store.unlist(room.room_id)


def nobody_in(state: RoomState) -> bool:
    """A lobby whose every racer is offline (not one nobody has joined yet: a quick
    room whose creator's join failed takes the next quick racer)."""
    return bool(state.racers) and not any(r.online for r in state.racers.values())


def listing_for(state: RoomState) -> Listing | None:
    """Where the room sorts in the listing; None: it is not listed (private, or its
    race is over)."""
    phase = state.phase
    if state.settings.private or phase == Phase.FINISHED:
        return None
    if phase in (Phase.COUNTDOWN, Phase.RACING):
        return Listing.RACE
    return Listing.IDLE if nobody_in(state) else Listing.LOBBY


def quick_of(settings: RoomSettings) -> str | None:
    """The variant whose quick lobbies (Store.quick_lobbies) a listed quick room is
    among while it is a lobby somebody is in; None for any other room."""
    return settings.variant if settings.quick and not settings.private else None


def moves_listing(state: RoomState, events: list[RoomEvent]) -> bool:
    """Whether ``events``, folded into ``state``, may have moved a public room between
    the lobbies and the lobbies nobody is in. Not in a race: presence comes and goes
    there (a racer's reconnects) and never moves it, so it costs no write."""
    return (
        state.phase == Phase.LOBBY
        and not state.settings.private
        and any(ev.t in MOVES_LISTING for ev in events)
    )


async def sort_locked(node: Node, room: LiveRoom) -> None:
    """Sort the room where its folded state says, read what other nodes stored since,
    and again until the two agree. Caller holds the room's lock. Raises
    StoreUnavailable if Redis fails it (the caller retries)."""
    for _ in range(MAX_SORTS_IN_A_ROW):
        listing = listing_for(room.state)
        if listing is None or not room.state.racers:
            return  # unlisted (a room everyone left is unlisted by its expiry)
        quick = quick_of(room.meta.settings)
        await node.store.move_listing(room.room_id, room.meta.created_ms, listing, quick=quick)
        await node.sync_locked(room)
        if listing_for(room.state) == listing:
            return
