"""What spectators see: each racer's board, delayed by the room's spectator delay.

Boards come from *shadow* engines replayed from the stored move logs only — never from
a node's live engine, which may hold a move that is not stored yet (and may never be, if
Redis fails): a spectator must never see a card turned up by a move that did not happen.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from solrace.protocol import encode
from solrace.protocol.messages import board_notice
from solrace.race.state import FINISHED, RACING

from .records import unpack_entries
from .room import LiveRoom

if TYPE_CHECKING:
    from .node import Node
    from .session import Session


async def spectator_boards(node: Node, room: LiveRoom, stored: dict[str, Any]) -> None:
    """Send spectators the board of the racer an event is about, after the delay.

    Boards come from shadows replayed from the *stored* log only, never from a
    local engine that may hold a move not yet stored (and maybe never stored)."""
    racers = [stored["d"]["racer"]] if "racer" in stored["d"] else list(room.state.racers)
    delay = room.meta.settings.spectator_delay_s
    for racer in racers:
        view = await shadow_view(node, room, racer)
        if view is None:
            continue
        at = node.clock()
        frame = encode(board_notice(racer=racer, at_ms=at, view=view, owner=False))
        if delay == 0:
            for session in list(room.spectators):
                session.send_bytes(frame)
        else:
            loop = asyncio.get_running_loop()
            loop.call_later(delay, _send_to_spectators, room, frame)


def _send_to_spectators(room: LiveRoom, frame: bytes) -> None:
    for session in list(room.spectators):
        session.send_bytes(frame)


async def shadow_view(
    node: Node, room: LiveRoom, racer: int, until_ms: int | None = None
) -> dict[str, Any] | None:
    if room.state.phase not in (RACING, FINISHED) or racer not in room.state.racers:
        return None
    log_name = room.log_name(racer)
    if until_ms is not None:  # a delayed board: replay only what is old enough
        game = room.new_game()
        for entry, at in unpack_entries(await node.store.move_log(room.room_id, log_name)):
            if at > until_ms:
                break
            game.apply(entry, at)
        return game.board_view()
    # The live shadow reads only the entries it has not applied yet.
    shadow = room.shadows.get(racer)
    if shadow is None:
        shadow = room.shadows[racer] = room.new_game()
    for entry, at in unpack_entries(await node.store.move_log(room.room_id, log_name, shadow.seq)):
        shadow.apply(entry, at)
    return shadow.board_view()


async def initial_boards(node: Node, room: LiveRoom, session: Session) -> None:
    delay_ms = room.meta.settings.spectator_delay_s * 1000
    now = node.clock()
    until = None if delay_ms == 0 else room.state.race_clock(now) - delay_ms
    for racer in room.state.racers:
        if until is not None and until < 0:
            break
        view = await shadow_view(node, room, racer, until)
        if view is not None:
            at = now - delay_ms
            notice = board_notice(racer=racer, at_ms=at, view=view, owner=False)
            session.send(notice)
