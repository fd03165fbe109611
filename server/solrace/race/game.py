"""One racer's game on the server: the engine plus the racer's move log.

The log is what Redis stores (``[notation or "undo", race clock ms]`` per entry); the
board is derived from it. :meth:`RacerGame.apply` checks and applies one entry and can
be taken back exactly with :meth:`RacerGame.revert` — the node reverts when Redis
refuses or fails to store the entry, so a move is never applied in memory but not stored.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from solrace.rules import Board, IllegalMoveError, Move, NotationError, deal, parse_move, view
from solrace.rules.log import UNDO
from solrace.rules.view import seen_cards

from .errors import RaceError
from .state import DONE, PLAYING, STUCK


@dataclass(frozen=True)
class Applied:
    """What one accepted entry did: for the reply and the progress event."""

    entry: str
    auto_moves: tuple[str, ...]
    status: str


class RacerGame:
    def __init__(
        self, variant: str, seed: int, options: Mapping[str, Any], track_seen: bool = False
    ) -> None:
        self.board: Board = deal(variant, seed, dict(options))
        self.entries: list[str] = []
        # Per entry, how to take it back: pushed moves to pop, or the undone move.
        self._undo_info: list[tuple[int, Move | None]] = []
        #: With ``track_seen``: every card id the player has seen face up so far (a
        #: spectator view may show only cards every racer still racing has seen).
        self.seen: set[int] | None = seen_cards(self.board) if track_seen else None

    @classmethod
    def rebuild(
        cls, variant: str, seed: int, options: Mapping[str, Any], log: Iterable[tuple[str, int]]
    ) -> RacerGame:
        """Replay a stored log (entries were checked when stored; check them again
        anyway: a log is data from outside this process)."""
        game = cls(variant, seed, options)
        for entry, at_ms in log:
            game.apply(entry, at_ms)
        return game

    @property
    def seq(self) -> int:
        """The sequence number the racer's next move must carry."""
        return len(self.entries)

    def status(self) -> str:
        board = self.board
        if board.is_won():
            return DONE
        if not board.legal_moves():
            return STUCK
        return PLAYING

    def apply(self, entry: str, at_ms: int) -> Applied:
        board = self.board
        if entry == UNDO:
            try:
                undone = board.undo(at_ms)
            except IllegalMoveError as exc:
                raise RaceError("illegal_move", exc.reason) from None
            self._undo_info.append((0, undone))
            self.entries.append(entry)
            self._saw()
            return Applied(entry, (), self.status())
        try:
            move = parse_move(entry)
        except NotationError as exc:
            raise RaceError("bad_notation", str(exc)) from None
        try:
            board.play(move, at_ms)
        except IllegalMoveError as exc:
            raise RaceError("illegal_move", exc.reason) from None
        auto: list[Move] = []
        if board.options.auto_complete and board.can_auto_complete():
            auto = board.auto_complete(at_ms)
        self._undo_info.append((1 + len(auto), None))
        self.entries.append(entry)
        self._saw()
        return Applied(entry, tuple(str(m) for m in auto), self.status())

    def _saw(self) -> None:
        if self.seen is not None:
            self.seen |= seen_cards(self.board)

    def revert(self) -> None:
        """Take back the last :meth:`apply` exactly (including its move count)."""
        pushed, undone = self._undo_info.pop()
        self.entries.pop()
        board = self.board
        if undone is not None:
            board.push(undone)
            board.move_count -= 1
            return
        for _ in range(pushed):
            board.pop()
        board.move_count -= pushed

    def view(self) -> dict[str, Any]:
        """The racer's own view of its board."""
        return view(self.board, owner=True)

    def board_view(self, shown: Container[int] | None = None) -> dict[str, Any]:
        """What anyone else (a spectator) may see of this board; with ``shown``, the
        fair view that withholds every other card's identity."""
        return view(self.board, owner=False, shown=shown)

    def progress(self) -> dict[str, int]:
        board = self.board
        return {
            "foundation": board.foundation_count(),
            "moves": board.move_count,
            "face_down": board.face_down_count(),
        }
