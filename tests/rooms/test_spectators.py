"""rooms/spectators.py with fake peers: a spectator's boards go out in batches, at
most one per BOARD_INTERVAL_S — at once after a quiet spell, else at the interval's
end with each racer's board as it is then — and a node that stops drops the batch
still due."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from solrace.protocol import SERVER_FRAME_LIMITS, Envelope, decode, encode
from solrace.protocol.messages import board_notice
from solrace.race import RacerGame
from solrace.rooms import spectators
from solrace.rooms.node import Node
from solrace.rooms.records import unpack_entries
from solrace.rooms.room import LiveRoom

from tests.support.race import check_no_leaks, winning_moves

from .conftest import SOLVABLE_SECRET, Backend, EngineWork, FakePeer, started_race
from .test_core import _race
from .test_new_spectator_boards import _replayed


def _boards_of(spy: FakePeer) -> list[Envelope]:
    return [f for f in spy.frames if f.t == "board"]


def _boards(spy: FakePeer, racer: int) -> list[Envelope]:
    return [f for f in spy.frames if f.t == "board" and f.d["racer"] == racer]


async def _quiet_spell(room: LiveRoom) -> None:
    """Wait until no batch is due or being built and the last went out an interval ago:
    a fixed sleep is not enough on a loaded machine, where the batch of earlier moves
    can still be building (its Redis reads slow) when the sleep ends."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(10):
        while (
            room.boards_due is not None
            or room.lock.locked()
            or loop.time() < room.boards_sent_at + spectators.BOARD_INTERVAL_S
        ):
            await asyncio.sleep(0.01)


async def _watched(
    backend: Backend, **settings: object
) -> tuple[Node, FakePeer, FakePeer, FakePeer]:
    """Ann and Bob racing in a room (with ``settings``) on a node of ``backend``,
    watched by ``spy``: the node and the three peers."""
    node = await backend.node()
    lobby, _started = await started_race(node, **settings)
    spy = FakePeer(node)
    code = str(lobby.created.d["code"])
    assert (await spy.ask("watch", code=code)).t == "watching"
    return node, lobby.ann, lobby.bob, spy


async def test_boards_go_out_at_once_after_a_quiet_spell_then_in_batches(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Five moves must fit in one interval whatever the machine's load: the interval
    # is longer here than the default (0.1 s), which a slow CI machine can exceed.
    monkeypatch.setattr(spectators, "BOARD_INTERVAL_S", 0.5)
    node, ann, bob, spy = await _watched(backend)
    racer = int(ann.frames[0].d["racer"])
    moves = winning_moves(SOLVABLE_SECRET)
    # Bob has made Ann's moves first: every card Ann turns up is one he has seen, so
    # her boards go out (a fair board with a card he had not seen is held back).
    for seq in range(6):
        assert (await bob.ask("move", seq=seq, move=moves[seq])).t == "moved"
    [room] = [r for r in node.rooms.values() if r.spectators]
    await _quiet_spell(room)
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
    """Face-down and face-up counts per column, to compare a racer's own board with
    the fair board its spectators get."""
    assert isinstance(view, dict)
    return [(column["down"], len(column["up"])) for column in view["tableau"]]


async def test_a_node_that_stops_drops_the_batch_still_due(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second and third moves must come within the first one's interval, whatever
    # the machine's load: a longer interval than the default.
    monkeypatch.setattr(spectators, "BOARD_INTERVAL_S", 0.5)
    node, ann, _bob, spy = await _watched(backend)
    moves = winning_moves(SOLVABLE_SECRET)
    for seq in range(3):
        assert (await ann.ask("move", seq=seq, move=moves[seq])).t == "moved"
    [room] = [r for r in node.rooms.values() if r.spectators]
    assert room.boards_due is not None  # a batch is due
    await node.stop()
    sent = len(spy.frames)
    await asyncio.sleep(spectators.BOARD_INTERVAL_S + 0.3)  # past the batch's due time
    assert len(spy.frames) == sent  # never sent
    assert not node._tasks  # and no task started after the stop


async def _watched_with_a_delay(backend: Backend) -> tuple[Node, FakePeer, FakePeer, FakePeer]:
    """Ann and Bob racing in a room whose spectators see boards 1 s late, watched by
    ``spy``: the node and the three peers."""
    return await _watched(backend, spectator_delay_s=1)


async def test_a_node_that_stops_drops_the_boards_still_delayed(backend: Backend) -> None:
    """A board built for spectators goes out one spectator delay later (fair
    spectating). That wait was a timer nobody kept: a node that stopped within the
    delay still sent the board afterwards, from a stopped node. The room keeps its
    delayed boards and cancels them with its other timers when the node stops."""
    node, ann, _, spy = await _watched_with_a_delay(backend)
    moves = winning_moves(SOLVABLE_SECRET)
    assert (await ann.ask("move", seq=0, move=moves[0])).t == "moved"
    [room] = [r for r in node.rooms.values() if r.spectators]
    async with asyncio.timeout(5):  # the board is built, and waits out the delay
        while not room.delayed_boards:
            await asyncio.sleep(0.01)
    await node.stop()
    assert not room.delayed_boards
    sent = len(spy.frames)
    await asyncio.sleep(1.3)  # past the delay
    assert spy.frames[sent:] == [], "a board came from a stopped node"


async def test_a_delayed_board_of_a_finished_round_is_not_sent_after_a_rematch(
    backend: Backend,
) -> None:
    """Boards go out one spectator delay late. A rematch begun within that delay must
    not let the last round's boards through after its ``room_reset``: a spectator would
    take them for boards of the new round (its racers' first cards)."""
    _, ann, bob, spy = await _watched_with_a_delay(backend)
    moves = winning_moves(SOLVABLE_SECRET)
    for seq in range(3):
        assert (await ann.ask("move", seq=seq, move=moves[seq])).t == "moved"
    assert (await ann.ask("resign")).t == "ok"
    assert (await bob.ask("resign")).t == "ok"
    await spy.until(lambda f: f.t == "race_over")
    assert (await ann.ask("rematch")).t == "ok"
    reset = await spy.until(lambda f: f.t == "room_reset")
    await asyncio.sleep(1.5)  # past the delay of every board the last round sent
    after = spy.frames[spy.frames.index(reset) :]
    assert not [f for f in after if f.t == "board"], "a board of the last round came late"


async def _rule(node: Node, room: LiveRoom, racer: int) -> dict[str, Any] | None:
    """The board the rule gives a new spectator of ``racer`` now, as a spectator gets
    it: the whole stored log replayed, a fair view after every entry (the old way)."""
    shown = await spectators.shown_cards(node, room)
    log = unpack_entries(await node.store.move_log(room.room_id, room.log_name(racer)))
    settings = room.meta.settings
    game_args = (settings.variant, room.seed(), dict(settings.options))
    view = _replayed(game_args, log, shown, None)
    if view is None:
        return None
    notice = board_notice(racer=racer, at_ms=0, view=view, owner=False)
    wire = decode(encode(notice), limits=SERVER_FRAME_LIMITS)
    return dict(wire.d["view"])  # type: ignore[arg-type]


async def test_a_watch_replays_no_log_and_gets_the_board_the_rule_gives(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit's case (docs/performance.md, "Watching a held-back board"): Ann's
    board is held back (Bob has not turned up her cards), and every watch replayed her
    log and built a fair view per entry, under the room's lock. Now ten watches (each
    then left) apply no log entry and build at most a board or two; and whatever a
    watch gets is what the replay gives — held back, released by Bob's moves (he
    turns up her cards), and after her undo."""
    ann, bob = await _race(backend)
    node = ann.node
    code = str(ann.frames[0].d["code"])
    racer = int(ann.frames[0].d["racer"])
    moves = winning_moves(SOLVABLE_SECRET)[:40]
    for seq, move in enumerate(moves):
        assert (await ann.ask("move", seq=seq, move=move)).t == "moved"
    [room] = list(node.rooms.values())

    async def watch() -> dict[int, object]:
        spy = FakePeer(node)
        assert (await spy.ask("watch", code=code)).t == "watching"
        assert (await spy.ask("leave")).t == "ok"
        return {int(f.d["racer"]): f.d["view"] for f in spy.frames if f.t == "board"}

    first = await watch()
    async with room.lock:
        shown = await spectators.shown_cards(node, room)
        assert not spectators._whole(room.shadows[racer].board_view(shown)), "not held back"
        assert first[racer] == await _rule(node, room, racer)
    work = EngineWork()
    work.install(monkeypatch)
    for _ in range(10):
        assert await watch() == first
    assert work.applied == 0, f"ten watches applied {work.applied} log entries"  # old: 400
    assert work.views <= 2, f"ten watches built {work.views} boards"  # old: one per entry
    monkeypatch.undo()

    # Bob plays Ann's moves: he turns up her cards, and her board goes out whole.
    for seq, move in enumerate(moves):
        assert (await bob.ask("move", seq=seq, move=move)).t == "moved"
    released = await watch()
    async with room.lock:
        assert released[racer] == await _rule(node, room, racer) != first[racer]
    assert (await ann.ask("move", seq=len(moves), move="undo")).t == "moved"
    undone = await watch()
    async with room.lock:
        assert undone[racer] == await _rule(node, room, racer) != released[racer]


async def test_the_starting_boards_go_to_every_spectator_at_the_start_stamped_with_it(
    backend: Backend,
) -> None:
    """An audit (spectator delay 30 s): a spectator that came within the first delay
    got the starting boards stamped one delay ago, before the race (a 21 s old race
    showed boards "44 s old"), while one already in the lobby got no board for the
    whole delay. The starting position is the same deal for everyone and every racer
    sees it at the start: every spectator gets it then, stamped with the start."""
    node = await backend.node()
    ann, bob, early, late = (FakePeer(node) for _ in range(4))
    created = await ann.ask("create", variant="yukon", name="Ann", spectator_delay_s=30)
    assert created.t == "joined", created.d
    code = str(created.d["code"])
    assert (await early.ask("watch", code=code)).t == "watching"  # in the lobby
    assert (await bob.ask("join", code=code, name="Bob")).t == "joined"
    assert (await bob.ask("ready", ready=True)).t == "ok"
    await ann.until(lambda f: f.t == "deal_chosen", timeout=30)
    assert (await ann.ask("start")).t == "ok"
    started = await early.until(lambda f: f.t == "started")
    start = int(started.d["start_at_ms"])  # type: ignore[arg-type]
    racers = {int(ann.frames[0].d["racer"]), int(bob.frames[0].d["racer"])}
    await early.until(lambda _: {int(b.d["racer"]) for b in _boards_of(early)} == racers)
    await asyncio.sleep(1)  # a move into the race: the late spectator comes in then
    moves = winning_moves(SOLVABLE_SECRET)
    assert (await ann.ask("move", seq=0, move=moves[0])).t == "moved"
    assert (await late.ask("watch", code=code)).t == "watching"
    for spy in (early, late):
        boards = _boards_of(spy)
        assert {int(b.d["racer"]) for b in boards} == racers  # type: ignore[call-overload]
        assert all(b.d["at_ms"] == start for b in boards), [b.d["at_ms"] for b in boards]
    # The same boards: the deal as every racer got it (Ann's move is 30 s away).
    assert [f.d for f in _boards_of(early)] == [f.d for f in _boards_of(late)]
    assert (await ann.ask("resign")).t == "ok"
    assert (await bob.ask("resign")).t == "ok"
    over = await late.until(lambda f: f.t == "race_over")
    settings = created.d["snapshot"]["settings"]  # type: ignore[index]
    for spy in (early, late):
        assert check_no_leaks(spy.frames, over.d, settings) > 2


async def test_a_new_spectator_gets_a_held_back_board_stamped_when_it_was_its_racers(
    backend: Backend,
) -> None:
    """A spectator audit: a board held back (Bob has not turned up Ann's cards) went to
    a new spectator — and to every spectator reconnecting, a server restart's — stamped
    with the watch's time, less the delay: "as it was at" a time by which Ann had moved
    on, so the watch screen showed it "0 s ago" under "boards live" and its "held
    back" (a board older than a move) could not hold. It is stamped with the time it
    was Ann's board: when she made the last move it shows (the start for none)."""
    ann, _bob = await _race(backend)
    node = ann.node
    code = str(ann.frames[0].d["code"])
    racer = int(ann.frames[0].d["racer"])
    for seq, move in enumerate(winning_moves(SOLVABLE_SECRET)[:40]):
        assert (await ann.ask("move", seq=seq, move=move)).t == "moved"
    [room] = list(node.rooms.values())
    spy = FakePeer(node)
    assert (await spy.ask("watch", code=code)).t == "watching"
    [board] = _boards(spy, racer)
    async with room.lock:
        shown = await spectators.shown_cards(node, room)
        log = unpack_entries(await node.store.move_log(room.room_id, room.log_name(racer)))
        settings = room.meta.settings
        game_args = (settings.variant, room.seed(), dict(settings.options))
        game = RacerGame(*game_args)
        whole = [spectators._whole(game.board_view(shown))]
        for entry, at in log:
            game.apply(entry, at)
            whole.append(spectators._whole(game.board_view(shown)))
    start = room.state.start_at_ms
    assert start is not None
    state = max(n for n, ok in enumerate(whole) if ok)  # the latest whole state
    assert state < len(log), "Ann's board is not held back"
    # Made by the move before it (the start for none), and before the move it lacks.
    assert board.d["at_ms"] == start + (log[state - 1][1] if state else 0)
    assert int(board.d["at_ms"]) <= start + log[state][1]
