"""Moves sent ahead of their replies: what the race screen shows while they travel.

A racer far from the server waited a whole round trip for each move's ``moved``
before it saw its board and could play on: through a link of 150 ms round trip, a
certified Yukon line of 71 moves finished 11.7 s behind the same line played next to
the server (docs/fairness.md, "Latency"; now 3.2 s for 56 moves). The protocol lets a
client pipeline moves (docs/protocol.md §11), and most moves turn up no card, so the
engine on the client's own board knows their outcome. The terminal client therefore
shows such a move's board at once and sends it with the next seq without waiting; the
server's ``moved`` then confirms it (or, where the server's board differs, replaces
it). A move that turns a card up shows nothing until the server's reply names the card
(:func:`~solrace_client.boardview.played_view`), and moves typed meanwhile wait for
that reply, as every move did before. A refusal undoes every move shown ahead of it:
the screen is back on the server's board, and the moves sent after the refused one,
which the server refuses too, say nothing more. A refusal that leaves the outcome
unknown (``unavailable``) asks the server's board first: the store may have taken the
move. A lost connection loses none of the moves in flight: the resume tells which the
server stored, and the app sends the others again with their seqs
(``SolraceApp._send_again``).

The bookkeeping lives here, apart from the app: which moves are in flight, the seq of
the next one, and which replies still matter (an ``epoch`` each refusal, lost
connection or fresh snapshot starts anew).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..boardview import played_view


@dataclass(frozen=True)
class Sent:
    """A move on its way: its ``seq``, the board shown for it before the reply (None:
    it turns a card up, and the board waits for the reply), and the epoch it was sent
    in."""

    move: str
    seq: int
    shown: dict[str, Any] | None
    epoch: int


class InFlight:
    """The moves sent whose reply has not come, oldest first."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.epoch = 0
        #: Set while no move that turns a card up awaits its reply: the next move may go.
        self.settled = asyncio.Event()
        self.settled.set()

    def live(self) -> list[Sent]:
        """The moves of this epoch still in flight (earlier ones' replies are moot)."""
        return [sent for sent in self.sent if sent.epoch == self.epoch]

    def next_seq(self, confirmed: int) -> int:
        """The seq of the next move: after the last one in flight, else the server's."""
        live = self.live()
        return live[-1].seq + 1 if live else confirmed

    def add(self, move: str, seq: int, shown: dict[str, Any] | None, epoch: int) -> Sent:
        sent = Sent(move, seq, shown, epoch)
        self.sent.append(sent)
        if shown is None and epoch == self.epoch:
            self.settled.clear()
        return sent

    def done(self, sent: Sent) -> bool:
        """``sent``'s reply came: forget it; whether its reply still matters."""
        self.sent.remove(sent)
        current = sent.epoch == self.epoch
        if current and sent.shown is None:
            self.settled.set()
        return current

    def restart(self) -> list[Sent]:
        """A refusal, a lost connection or a fresh snapshot: every move in flight is
        moot from now on (returned, oldest first), and the next goes at once."""
        live = self.live()
        self.epoch += 1
        self.settled.set()
        return live

    def rebased(self, board: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The server's ``board`` with the moves still in flight played on it, as far
        as they turn up no card: what to show once a reply differs from the board
        shown for it."""
        shown = None if board is None else dict(board)
        for sent in self.live():
            ahead = None if shown is None else played_view(shown, sent.move)
            if ahead is None:
                break
            shown = ahead
        return shown
