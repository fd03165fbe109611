"""A client kept connected for hours: a racer's RaceClient and a spectator's Session on
a room whose racers rematch round after round. What they keep must not grow with the
frames they read, or with the racers who came and went (a long-session audit)."""

from __future__ import annotations

from typing import Any

from solrace_client import RaceClient
from solrace_client.boardview import board_from_view
from solrace_client.session import Backoff, Session

from tests.net.conftest import Cluster
from tests.support.race import close_all

QUICK = Backoff(first_s=0.05, max_s=0.2, jitter=0.2)
#: Moves Ann plays each round: a move and its undo, this many times (120 frames).
PAIRS = 30


def kept_frames(client: RaceClient | None) -> int:
    """How many frames ``client`` holds on to (its record of every frame read)."""
    return len(getattr(client, "received", ()))


async def drained(session: Session) -> None:
    while await session.next(0.05) is not None:
        pass


async def _room(url: str) -> tuple[RaceClient, RaceClient, Session]:
    """Ann's room with Bob ready in it, and a spectator's session on it."""
    ann, bob = await RaceClient.connect(url), await RaceClient.connect(url)
    await ann.create("yukon", "Ann", private=True)
    code = ann.code
    assert code
    await bob.join(code, "Bob")
    await bob.ready()
    await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"])
    spectator = Session(url, backoff=QUICK)
    await spectator.enter(lambda client: client.watch(code=code))
    return ann, bob, spectator


async def _round(ann: RaceClient, bob: RaceClient, spectator: Session, pairs: int) -> None:
    """Ann starts; plays ``pairs`` moves and their undos; both resign; Ann asks for the
    rematch and Bob readies again."""
    await ann.start()
    await ann.wait_started()
    board = board_from_view(ann.board)
    move = str(next(m for m in board.legal_moves() if m.kind != "draw"))
    for i in range(pairs):
        await ann.move(move)
        await ann.move("undo")
        if i % 25 == 0:
            await drained(spectator)
    await ann.resign()
    await bob.resign()
    await ann.next_event("race_over", timeout=30)
    await ann.rematch()
    await bob.ready()
    await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"])
    await drained(spectator)
    _empty(ann)
    _empty(bob)


def _empty(client: RaceClient) -> None:
    """A program reading its client's events: none left queued."""
    while not client.events.empty():
        client.events.get_nowait()


async def test_a_client_connected_for_many_rounds_keeps_no_copy_of_every_frame(
    cluster: Cluster,
) -> None:
    """``RaceClient.received`` keeps every frame a connection read, for as long as it
    is up: a racer's every ``moved`` reply with its whole board (some 750 bytes each:
    3.7 MB for a race of 5,000 moves), a spectator's every ``progress``, round after
    round. Measured: Ann's client held 827 frames after round 2, 2,064 after round 5
    (some 410 a round of 200 moves, about 150 KB), the spectator's 425 and 1,064. A
    client kept connected for a day (the terminal UI's, a bot's, a library user's)
    grows without bound. What it keeps after three rounds may exceed what it kept
    after one by fewer frames than half a round brings."""
    server = await cluster.node(countdown_ms=50)
    ann, bob, spectator = await _room(server.url)
    kept: list[tuple[int, int]] = []
    for _ in range(3):
        await _round(ann, bob, spectator, PAIRS)
        kept.append((kept_frames(ann), kept_frames(spectator.client)))
    (ann_1, spectator_1), (ann_3, spectator_3) = kept[0], kept[2]
    a_round = 2 * PAIRS  # fewer than one round's frames (each move's reply and progress)
    assert ann_3 - ann_1 < a_round, f"a racer's client kept {kept}"
    assert spectator_3 - spectator_1 < a_round, f"a spectator's client kept {kept}"
    await spectator.close()
    await close_all(ann, bob)


async def test_a_view_does_not_name_every_racer_that_ever_came_and_went(
    cluster: Cluster,
) -> None:
    """``RoomView.names`` keeps "every name ever seen" (roomview.py), and racer ids are
    never reused in a room (docs/protocol.md §3): a spectator of a room that passers-by
    join and leave keeps one entry for each, for ever — the room itself forgets them
    (the lobby's racers, the rematch's). Measured: 102 names after 100 passers-by, in
    a room of two racers. The names a window may still need are the room's racers',
    those of the rounds it keeps (``overs``) and the ones just gone; not all 40."""
    server = await cluster.node(countdown_ms=50)
    ann, bob, spectator = await _room(server.url)
    code = ann.code or ""
    passers = 40
    for n in range(passers):
        passer = await RaceClient.connect(server.url)
        await passer.join(code, f"Passer{n}")
        await passer.leave()
        await passer.close()
        if n % 20 == 19:  # a round now and then: the rematch forgets who left, too
            await _round(ann, bob, spectator, 1)
    await drained(spectator)
    view = spectator.view
    assert set(view.racers) == {ann.racer, bob.racer}
    assert len(view.names) <= passers // 2, f"{len(view.names)} names kept: {_few(view.names)}"
    await spectator.close()
    await close_all(ann, bob)


def _few(names: dict[int, Any]) -> str:
    shown = list(names.values())
    return ", ".join(shown[:4]) + f", … {len(shown) - 4} more"
