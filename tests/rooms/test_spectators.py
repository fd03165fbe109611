"""rooms/spectators.py with fake peers: a spectator's boards go out in batches, at
most one per BOARD_INTERVAL_S — at once after a quiet spell, else at the interval's
end with each racer's board as it is then — and a node that stops drops the batch
still due."""

from __future__ import annotations

import asyncio

from solrace.protocol import Envelope
from solrace.rooms import spectators

from tests.support.race import winning_moves

from .conftest import SOLVABLE_SECRET, Backend, FakePeer
from .test_core import _race


def _boards(spy: FakePeer, racer: int) -> list[Envelope]:
    return [f for f in spy.frames if f.t == "board" and f.d["racer"] == racer]


async def test_boards_go_out_at_once_after_a_quiet_spell_then_in_batches(
    backend: Backend,
) -> None:
    ann, _bob = await _race(backend)
    node = ann.node
    spy = FakePeer(node)
    code = str(ann.frames[0].d["code"])
    assert (await spy.ask("watch", code=code)).t == "watching"
    racer = int(ann.frames[0].d["racer"])
    await asyncio.sleep(2 * spectators.BOARD_INTERVAL_S)  # a quiet spell
    moves = winning_moves(SOLVABLE_SECRET)
    before = len(_boards(spy, racer))
    assert (await ann.ask("move", seq=0, move=moves[0])).t == "moved"
    assert len(_boards(spy, racer)) == before + 1  # at once, no wait
    # Five more moves within the interval: nothing more now, one batch when it ends,
    # holding the board after the fifth move (the one Ann's last reply carries).
    for seq in range(1, 6):
        last = await ann.ask("move", seq=seq, move=moves[seq])
    assert len(_boards(spy, racer)) == before + 1
    batch = await spy.until(lambda f: f.t == "board" and f in _boards(spy, racer)[before + 1 :])
    await asyncio.sleep(2 * spectators.BOARD_INTERVAL_S)
    assert _boards(spy, racer)[before + 1 :] == [batch]
    first = _boards(spy, racer)[before]
    assert _layout(batch.d["view"]) == _layout(last.d["board"]) != _layout(first.d["view"])


def _layout(view: object) -> list[tuple[int, int]]:
    """Face-down and face-up counts per column: the same for a racer's own board and
    its fair board (which withholds identities, not places)."""
    assert isinstance(view, dict)
    return [(column["down"], len(column["up"])) for column in view["tableau"]]


async def test_a_node_that_stops_drops_the_batch_still_due(backend: Backend) -> None:
    ann, _bob = await _race(backend)
    node = ann.node
    spy = FakePeer(node)
    code = str(ann.frames[0].d["code"])
    assert (await spy.ask("watch", code=code)).t == "watching"
    moves = winning_moves(SOLVABLE_SECRET)
    for seq in range(3):
        assert (await ann.ask("move", seq=seq, move=moves[seq])).t == "moved"
    [room] = [r for r in node.rooms.values() if r.spectators]
    assert room.boards_due is not None  # a batch is due
    await node.stop()
    sent = len(spy.frames)
    await asyncio.sleep(3 * spectators.BOARD_INTERVAL_S)
    assert len(spy.frames) == sent  # never sent
    assert not node._tasks  # and no task started after the stop
