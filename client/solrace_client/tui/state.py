"""The room as the client knows it: a snapshot, kept current by room events (docs/protocol.md
§7, §10), plus the boards that notices and ``moved`` replies bring. Pure: no I/O.

``apply`` follows the protocol's client algorithm: an event at or below the known
version is already in the state (a replayed one), the next version is applied, and a
gap sets ``gap`` so the caller resynchronises.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from solrace.protocol import Envelope


class RoomState:
    def __init__(self) -> None:
        self.room: str | None = None
        self.code: str | None = None
        self.version = 0
        self.phase: str | None = None
        self.settings: dict[str, Any] = {}
        self.host: int | None = None
        self.racers: dict[int, dict[str, Any]] = {}
        self.spectators = 0
        self.start_at_ms: int | None = None
        self.ends_at_ms: int | None = None
        self.commitment: str | None = None
        self.result: dict[str, Any] | None = None
        #: The round's deal once chosen (protocol Deal: certified, moves, difficulty).
        self.deal: dict[str, Any] | None = None
        self.me: int | None = None
        self.you: dict[str, Any] | None = None
        #: Spectators: every racer's latest board, ``racer -> (at_ms, view)``.
        self.boards: dict[int, tuple[int, dict[str, Any]]] = {}
        self.gap = False
        self.loaded = False

    # ------------------------------------------------------------ snapshot
    def load(self, snapshot: Mapping[str, Any], racer: int | None = None) -> None:
        snapshot = copy.deepcopy(dict(snapshot))
        self.room = snapshot.get("room")
        self.code = snapshot.get("code")
        self.version = int(snapshot.get("version") or 0)
        self.phase = snapshot.get("phase")
        self.settings = dict(snapshot.get("settings") or {})
        self.host = snapshot.get("host")
        online = {r: info.get("online") for r, info in self.racers.items()}
        self.racers = {}
        for info in snapshot.get("racers") or []:
            entry = dict(info)
            if online.get(entry["racer"]) is not None:
                entry["online"] = online[entry["racer"]]
            self.racers[entry["racer"]] = entry
        self.spectators = int(snapshot.get("spectators") or 0)
        self.start_at_ms = snapshot.get("start_at_ms")
        self.ends_at_ms = snapshot.get("ends_at_ms")
        self.commitment = snapshot.get("commitment")
        self.result = snapshot.get("result")
        deal = snapshot.get("deal")
        self.deal = dict(deal) if deal else None
        you = snapshot.get("you")
        self.you = dict(you) if you else None
        if racer is not None:
            self.me = racer
        elif self.you is not None:
            self.me = self.you.get("racer")
        self.gap = False
        self.loaded = True

    # ------------------------------------------------------------ queries
    @property
    def variant(self) -> str:
        return str(self.settings.get("variant") or "yukon")

    @property
    def my_board(self) -> dict[str, Any] | None:
        return self.you.get("board") if self.you else None

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
        info = self.racers.get(racer)
        return str(info.get("name")) if info else f"racer {racer}"

    def racer_list(self) -> list[dict[str, Any]]:
        return list(self.racers.values())

    def ranked(self) -> list[dict[str, Any]]:
        """Racers in race order: finishers by place, then by foundation cards."""

        def key(info: Mapping[str, Any]) -> tuple[int, int, int]:
            place = info.get("place")
            return (0 if place else 1, place or 0, -int(info.get("foundation") or 0))

        return sorted(self.racers.values(), key=key)

    # ------------------------------------------------------------- events
    def apply(self, event: Envelope) -> str | None:
        """Apply one event or notice; returns a line of news for the player, if any."""
        if event.v is None:
            return self._notice(event)
        if event.v <= self.version:
            return None  # replayed: already in the snapshot
        if event.v != self.version + 1:
            self.gap = True
            return None
        self.version = event.v
        handler = getattr(self, f"_on_{event.t}", None)
        if handler is None:
            return None
        news: str | None = handler(dict(event.d or {}))
        return news

    def _notice(self, event: Envelope) -> str | None:
        if event.t == "resync":
            # The server lost changes: its snapshot replaces everything folded here,
            # the version included (it may go down).
            data: dict[str, Any] = dict(event.d or {})
            self.load(data.get("snapshot") or {}, self.me)
            return str(data.get("reason") or "the server resynchronised this room")
        if event.t != "board":
            return None
        d = event.d or {}
        racer = d.get("racer")
        view = d.get("view")
        if not isinstance(racer, int) or not isinstance(view, Mapping):
            return None
        if racer == self.me and self.you is not None:
            self.you["board"] = dict(view)
        else:
            at_ms = d.get("at_ms")
            self.boards[racer] = (at_ms if isinstance(at_ms, int) else 0, dict(view))
        return None

    def on_moved(self, reply: Mapping[str, Any]) -> None:
        """Our own move was accepted."""
        if self.you is None:
            self.you = {"racer": self.me}
        self.you["board"] = reply.get("board")
        self.you["status"] = reply.get("status")
        self.you["moves"] = reply.get("moves")
        self.you["score"] = reply.get("score")
        self.you["next_seq"] = int(reply.get("seq", 0)) + 1
        mine = self.racers.get(self.me or -1)
        if mine is not None:
            mine["moves"] = reply.get("moves")
            mine["status"] = reply.get("status")

    def _on_racer_joined(self, d: dict[str, Any]) -> str:
        self.racers[d["racer"]] = d
        return f"{d.get('name')} joined"

    def _on_racer_left(self, d: dict[str, Any]) -> str:
        racer = d.get("racer")
        name = self.name_of(racer)
        if self.phase == "lobby":
            self.racers.pop(racer, None)  # type: ignore[arg-type]
        elif racer in self.racers:
            self.racers[racer]["status"] = "left"
            self.racers[racer]["place"] = None
            if racer == self.me and self.you is not None:
                self.you["status"] = "left"
        self.host = d.get("host")
        return f"{name} left"

    def _on_ready_changed(self, d: dict[str, Any]) -> str | None:
        racer = d.get("racer")
        if racer in self.racers:
            self.racers[racer]["ready"] = bool(d.get("ready"))
        if racer == self.me:
            return None
        return f"{self.name_of(racer)} is {'ready' if d.get('ready') else 'not ready'}"

    def _on_countdown(self, d: dict[str, Any]) -> str:
        self.phase = "countdown"
        self.start_at_ms = d.get("start_at_ms")
        self.commitment = d.get("commitment")
        return "the countdown has begun"

    def _on_started(self, d: dict[str, Any]) -> str:
        self.phase = "racing"
        self.start_at_ms = d.get("start_at_ms")
        self.ends_at_ms = d.get("ends_at_ms")
        self.commitment = d.get("commitment")
        for info in self.racers.values():
            if info.get("status") in ("waiting", "playing", None):
                info.update(status="playing", foundation=0, moves=0, place=None)
        if self.me is not None:
            if self.you is None:
                self.you = {"racer": self.me}
            self.you.update(status="playing", moves=0, score=0, next_seq=0)
        return "go!"

    def _on_progress(self, d: dict[str, Any]) -> str | None:
        racer = d.get("racer")
        info = self.racers.get(racer)  # type: ignore[arg-type]
        if info is None:
            return None
        before = info.get("status")
        for key in ("foundation", "moves", "face_down", "status", "place"):
            if key in d:
                info[key] = d[key]
        status = d.get("status")
        if racer == self.me and self.you is not None and status:
            self.you["status"] = status
        if status != before and status in ("stuck", "resigned", "timeout"):
            who = "you" if racer == self.me else self.name_of(racer)
            verb = {"stuck": "are stuck", "resigned": "resigned", "timeout": "ran out of time"}
            words = verb[str(status)]
            if who != "you" and status == "stuck":
                words = "is stuck"
            return f"{who} {words}"
        return None

    def _on_finished(self, d: dict[str, Any]) -> str:
        racer = d.get("racer")
        info = self.racers.get(racer)  # type: ignore[arg-type]
        if info is not None:
            info.update({k: d[k] for k in d if k != "racer"})
        if racer == self.me and self.you is not None:
            self.you["status"] = "finished"
        who = "you" if racer == self.me else self.name_of(racer)
        return f"{who} finished — place {d.get('place')}"

    def _on_race_over(self, d: dict[str, Any]) -> str:
        self.phase = "finished"
        self.result = d
        for standing in d.get("standings") or []:
            info = self.racers.get(standing.get("racer"))
            if info is not None:
                for key in ("place", "status", "foundation", "moves"):
                    info[key] = standing.get(key)
        return "the race is over"

    def _on_deal_chosen(self, d: dict[str, Any]) -> str:
        self.deal = dict(d)
        return deal_words(self.deal)

    def _on_room_reset(self, d: dict[str, Any]) -> str:
        self.phase = "lobby"
        self.deal = None
        self.host = d.get("host")
        self.racers = {info["racer"]: dict(info) for info in d.get("racers") or []}
        self.start_at_ms = self.ends_at_ms = None
        self.commitment = None
        self.result = None
        self.boards.clear()
        if self.you is not None:
            self.you = {"racer": self.me, "board": None, "status": "waiting"}
        return "rematch: back in the lobby"

    def _on_presence(self, d: dict[str, Any]) -> str | None:
        racer = d.get("racer")
        info = self.racers.get(racer)  # type: ignore[arg-type]
        if info is None:
            return None
        info["online"] = bool(d.get("online"))
        if racer == self.me:
            return None
        name = self.name_of(racer)
        if d.get("online"):
            return f"{name} is back"
        # A closed connection is not a failure: a bot or a racer who is done simply goes.
        still_in = self.phase in ("lobby", "countdown", "racing") and info.get("status") in (
            "waiting",
            "playing",
            "stuck",
        )
        return f"{name} went offline (30 s to come back)" if still_in else f"{name} went offline"


def deal_words(deal: Mapping[str, Any] | None, deals: str = "winnable") -> str:
    """``winnable deal (certified, 97 moves, easy)``: how the round's deal was made."""
    if deal is None:
        return "certifying a winnable deal…" if deals == "winnable" else "random deal"
    if not deal.get("certified"):
        return "random deal (not certified)"
    parts = [f"certified, {deal.get('moves')} moves"]
    if deal.get("difficulty"):
        parts.append(str(deal["difficulty"]))
    return f"winnable deal ({', '.join(parts)})"
