"""What each room event means to the player, in one line for the status bar.

Words only: the room itself is folded once, by the connection, into the session's
:class:`~solrace_client.roomview.RoomView`. An event reaches the app after the view has
folded it (and possibly later events), so the line is made from the event's own data
and the view's names and phase; the one comparison it needs — did this racer's status
just change? — is kept here, from the events the player has been told about.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from solrace.protocol import Envelope
from solrace.rules import RulesError, new_board

from .. import wire
from ..roomview import RoomView

_ENDED = {"stuck": "are stuck", "resigned": "resigned", "timeout": "ran out of time"}


def stuck_words(can_undo: bool) -> str:
    """The player's line on becoming stuck: ``u`` only where the room has undo (in one
    without, stuck is the end of the player's race and ``u`` is refused)."""
    after = "(u undoes)" if can_undo else "— the others race on"
    return f"no legal move left: you are stuck {after}"


def room_has_undo(view: RoomView) -> bool:
    """Whether the room's game allows undo (its variant's default where not set)."""
    try:
        options = dict(wire.mapping(view.settings.get("options")))
        return new_board(view.variant, options).options.undo
    except RulesError:
        return True


class News:
    """Turns events into news lines; :meth:`reset` after each fresh snapshot."""

    def __init__(self) -> None:
        #: Each racer's status as last told (or as the last snapshot had it).
        self.statuses: dict[int, str] = {}
        #: The racers last told (or loaded) offline: only they can be said to be back.
        self.offline: set[int] = set()

    def reset(self, view: RoomView) -> None:
        self.statuses = {r: str(info.get("status")) for r, info in view.racers.items()}
        self.offline = {r for r, info in view.racers.items() if info.get("online") is False}

    def missed(self, view: RoomView) -> list[str]:
        """What the other racers' statuses did while the player was away, by the fresh
        snapshot in ``view`` against the statuses last told (call before
        :meth:`reset`). A resume replays no event to the app, so a rival who finished
        meanwhile was told only by the racers panel (the inflight audit's note)."""
        lines: list[str] = []
        for racer, info in view.racers.items():
            before, status = self.statuses.get(racer), str(info.get("status"))
            if racer == view.me or before is None or status == before:
                continue
            name = view.name_of(racer)
            if status == "finished":
                lines.append(f"{name} finished — place {info.get('place')}")
            elif status in _ENDED:
                lines.append(f"{name} {'is stuck' if status == 'stuck' else _ENDED[status]}")
            elif status == "left":
                lines.append(f"{name} left")
        return lines

    def line(self, event: Envelope, view: RoomView) -> str | None:
        """The news ``event`` brings, if any (None for a replayed or gap event: the
        session resynchronises and the app repaints from the snapshot)."""
        d: Mapping[str, Any] = event.d or {}
        if event.t == "resync":
            self.reset(view)
            return str(d.get("reason") or "the server resynchronised this room")
        if event.v is None or event.v > view.version:
            return None
        handler = getattr(self, f"_on_{event.t}", None)
        if handler is None:
            return None
        news: str | None = handler(d, view)
        return news

    def _on_racer_joined(self, d: Mapping[str, Any], view: RoomView) -> str:
        self.statuses[d["racer"]] = str(d.get("status"))
        return f"{d.get('name')} joined"

    def _on_racer_left(self, d: Mapping[str, Any], view: RoomView) -> str:
        self.statuses[d["racer"]] = "left"
        return f"{view.name_of(d.get('racer'))} left"

    def _on_ready_changed(self, d: Mapping[str, Any], view: RoomView) -> str | None:
        racer = d.get("racer")
        flag = "ready" if d.get("ready") else "not ready"
        if racer == view.me:
            # Said too: no news, the welcome ("press space when you are ready") stayed
            # on the status line under a lobby that said "You are ready."
            return f"you are {flag}"
        return f"{view.name_of(racer)} is {flag}"

    def _on_countdown(self, d: Mapping[str, Any], view: RoomView) -> str:
        return "the countdown has begun"

    def _on_started(self, d: Mapping[str, Any], view: RoomView) -> str:
        for racer, status in self.statuses.items():
            if status == "waiting":
                self.statuses[racer] = "playing"
        return "go!" if view.me is not None else "the race has started"  # a spectator races not

    def _on_progress(self, d: Mapping[str, Any], view: RoomView) -> str | None:
        racer, status = d.get("racer"), d.get("status")
        if not isinstance(status, str):  # a faulty server's list: unhashable below
            status = None
        if not isinstance(racer, int) or racer not in view.names:
            return None
        before = self.statuses.get(racer)
        if status:
            self.statuses[racer] = str(status)
        if status == before or status not in _ENDED:
            return None
        if racer == view.me:
            # Said after the move's own line, which it replaced on the status line: the
            # same words (a variants audit read `you are stuck`, the undo hint gone).
            if status == "stuck":
                return stuck_words(room_has_undo(view))
            return f"you {_ENDED[str(status)]}"
        words = "is stuck" if status == "stuck" else _ENDED[str(status)]
        return f"{view.name_of(racer)} {words}"

    def _on_finished(self, d: Mapping[str, Any], view: RoomView) -> str:
        racer = d.get("racer")
        if isinstance(racer, int):
            self.statuses[racer] = "finished"
        who = "you" if racer == view.me else view.name_of(racer)
        return f"{who} finished — place {d.get('place')}"

    def _on_race_over(self, d: Mapping[str, Any], view: RoomView) -> str:
        return "the race is over"

    def _on_deal_chosen(self, d: Mapping[str, Any], view: RoomView) -> str:
        return deal_words(d)

    def _on_room_reset(self, d: Mapping[str, Any], view: RoomView) -> str:
        # The racers as the fold read them (int() of a faulty server's racer "soon"
        # was a ValueError traceback).
        self.statuses = dict.fromkeys(view.racers, "waiting")
        return "rematch: back in the lobby"

    def _on_presence(self, d: Mapping[str, Any], view: RoomView) -> str | None:
        racer = d.get("racer")
        if racer == view.me or not isinstance(racer, int) or racer not in view.racers:
            return None
        name = view.name_of(racer)
        if d.get("online"):
            # Every resume is stored online, also one replacing a connection the server
            # still held (a link gone silent, another window): "Bob is back" was said
            # of a racer never said to have gone.
            if racer not in self.offline:
                return None
            self.offline.discard(racer)
            return f"{name} is back"
        self.offline.add(racer)
        # A closed connection is not a failure: a bot or a racer who is done simply goes.
        status = self.statuses.get(racer, view.racers[racer].get("status"))
        still_in = view.phase in ("lobby", "countdown", "racing") and status in (
            "waiting",
            "playing",
            "stuck",
        )
        return f"{name} went offline (30 s to come back)" if still_in else f"{name} went offline"


#: How :func:`deal_words` begins for a certified deal (the lobby shows it in green).
CERTIFIED_WORDS: Final = "winnable deal (certified"


def deal_words(deal: Mapping[str, Any] | None, deals: str = "winnable") -> str:
    """``winnable deal (certified, easy)``: how the round's deal was made. A server
    announces the difficulty the room asked for, and no line length (docs/fairness.md:
    the length names where cards lie); one of an earlier release announced the length
    and the band it found, said as it sent them."""
    if deal is None:
        return "certifying a winnable deal…" if deals == "winnable" else "random deal"
    if not deal.get("certified"):
        return "random deal (not certified)"
    parts: list[str] = []
    if deal.get("moves") is not None:
        parts.append(f"{deal['moves']} moves")
    if deal.get("difficulty"):
        parts.append(str(deal["difficulty"]))
    return CERTIFIED_WORDS + "".join(f", {part}" for part in parts) + ")"
