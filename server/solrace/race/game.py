"""One racer's game on the server: the engine plus the racer's move log.

The log is what Redis stores (``[notation or "undo", race clock ms]`` per entry); the
board is derived from it. :meth:`RacerGame.apply` checks and applies one entry. When
Redis refuses or fails to store an entry the node drops the whole engine and rebuilds it
from the stored log on the next request, so a move is never applied in memory but not
stored — and nothing here needs to take a move back.

``apply`` does not work out the racer's status (that generates every legal move): the
move path asks :meth:`RacerGame.status` once per accepted move, while rebuilding a long
log or folding a spectator's shadow never pays for it.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

from solrace.protocol.views import RacerStatus
from solrace.rules import Board, IllegalMoveError, NotationError, deal, view
from solrace.rules.log import UNDO
from solrace.rules.view import seen_cards

from .errors import RaceError


class RacerGame:
    def __init__(
        self, variant: str, seed: int, options: Mapping[str, Any], track_seen: bool = False
    ) -> None:
        self.board: Board = deal(variant, seed, dict(options))
        self.entries: list[str] = []
        #: With ``track_seen``: every card id the player has seen face up so far (a
        #: spectator view may show only cards every racer still racing has seen).
        self.seen: set[int] | None = seen_cards(self.board) if track_seen else None
        #: Face-down and stock cards when ``seen`` was last brought up to date: only a
        #: move that lowers one of them (a card turned up, a draw) shows a new card.
        self._hidden_when_seen = self._hidden()

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

    @property
    def last_ms(self) -> int:
        """The race-clock time of the log's last entry (0 before the first): a move is
        never logged earlier (rooms/moves.py), so a log's times stay in order even when
        its moves were checked on nodes whose clocks differ."""
        return self.board.elapsed_ms

    def status(self) -> str:
        board = self.board
        if board.is_won():
            return RacerStatus.FINISHED
        if not board.has_legal_move():
            return RacerStatus.STUCK
        return RacerStatus.PLAYING

    def apply(self, entry: str, at_ms: int) -> None:
        """Check and apply one log entry (a move in notation, or ``undo``); refused
        entries raise :class:`RaceError` with the protocol's code and change nothing."""
        board = self.board
        if entry == UNDO:
            try:
                board.undo(at_ms)
            except IllegalMoveError as exc:
                raise RaceError("illegal_move", exc.reason) from None
            self.entries.append(entry)
            self._saw()
            return
        try:
            board.play(entry, at_ms)
        except NotationError as exc:
            raise RaceError("bad_notation", str(exc)) from None
        except IllegalMoveError as exc:
            raise RaceError("illegal_move", exc.reason) from None
        if board.options.auto_complete and board.can_auto_complete():
            board.auto_complete(at_ms)
        self.entries.append(entry)
        self._saw()

    def _hidden(self) -> tuple[int, int]:
        return self.board.face_down_count(), len(self.board.stock)

    def _saw(self) -> None:
        if self.seen is None:
            return
        hidden, before = self._hidden(), self._hidden_when_seen
        self._hidden_when_seen = hidden
        if hidden[0] < before[0] or hidden[1] < before[1]:
            self.seen |= seen_cards(self.board)

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
