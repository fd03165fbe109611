"""Snapshots of a room for one connection, and re-sending them after lost writes.

Shared by the requests that enter a room (:mod:`.lobby`) and by the node when Redis
turns out to have lost writes (:meth:`.node.Node.lost_writes`), which is why this is a
module of its own: neither needs to import the other for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from solrace.protocol.messages import resync_notice
from solrace.protocol.views import Phase, RacerStatus, Snapshot, You

from . import spectators
from .room import LiveRoom

if TYPE_CHECKING:
    from .node import Node


async def snapshot_for(node: Node, room: LiveRoom, racer: int | None) -> Snapshot:
    """The room's snapshot as ``racer`` (None: a spectator) may see it, with the
    racer's own board, next sequence number and status under ``you``."""
    state = room.state
    snapshot = state.snapshot(node.clock(), spectators=len(room.spectators))
    if racer is not None:
        you: You = {
            "racer": racer,
            "board": None,
            "next_seq": 0,
            "moves": 0,
            "score": 0,
            "status": state.racers[racer].status if racer in state.racers else RacerStatus.LEFT,
        }
        if state.phase in (Phase.RACING, Phase.FINISHED):
            game = await node.game(room, racer)
            you["board"] = game.view()
            you["next_seq"] = game.seq
            you["moves"] = game.board.move_count
            you["score"] = game.board.score
        snapshot["you"] = you
    return snapshot


async def resync_clients(node: Node, room: LiveRoom, message: str, lost: int) -> None:
    """After the store lost writes: every connection of the room on this node gets a
    ``resync`` notice with a fresh snapshot (its own board for a racer) and the reason,
    then spectators their boards again. Caller holds the room lock and has refolded.

    Everything is read from Redis before anything is sent: if Redis fails a read,
    nobody has had a notice yet, and the caller sends them all again later
    (Node._resync_locked), rather than some connections getting theirs twice."""
    racers = [
        (peer, await snapshot_for(node, room, racer)) for racer, peer in list(room.racers.items())
    ]
    boards = await spectators.initial_board_notices(node, room) if room.spectators else []
    for peer, snapshot in racers:
        peer.send(resync_notice(reason=message, lost_events=lost, snapshot=snapshot))
    watched = await snapshot_for(node, room, None)  # every spectator's: one, built once
    for peer in list(room.spectators):
        peer.send(resync_notice(reason=message, lost_events=lost, snapshot=watched))
        for notice in boards:
            peer.send(notice)
