"""A racer whose race ended, and who watched the race go on without it, does not race
again after a store rewind lost that end (docs/fairness.md, "Fair spectating").

Once a racer can no longer move (resigned, left, stuck without undo), fair spectating
stops counting what it has seen: spectators, who may be that racer in a second window,
get boards showing cards it never turned up. A Redis restored from a snapshot taken
before the end brings the racer back racing, its seat and log open again; it then
raced on knowing cards of its own deal it had never turned up (an audit: Ann resigned,
watched Bob turn up cards, and after the rewind her moves were taken).
"""

from __future__ import annotations

from typing import Any

import pytest
from solrace_client import RaceClient, ServerError
from solrace_client.boardview import board_from_view

from tests.support.race import (
    play_until_done,
    play_until_refused,
    racing,
    restore_room,
    snapshot_room,
    winning_moves,
)

from .conftest import SOLVABLE_SECRET, Cluster

#: Bob's moves while Ann is out: enough to turn up cards she never saw.
_BOB_MOVES = 12


def _shown(view: dict[str, Any]) -> set[str]:
    names = {c for col in view["tableau"] for c in col["up"] if c is not None}
    for suit, rank in view["foundations"].items():
        names |= {"A23456789TJQK"[r] + suit for r in range(rank)}
    return names


async def _ann_out_while_bob_turns_cards_up(
    cluster: Cluster, end: str
) -> tuple[RaceClient, RaceClient, RaceClient, set[str]]:
    """Ann's race ends (``end``: resign or leave) after a snapshot of the room; her
    spy window watches Bob turn up cards she never saw; then Redis is restored from
    the snapshot. Returns Ann (her connection idle if she left), Bob, the spy, and
    the cards the spy was shown that Ann had never turned up."""
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url, spectator_delay_s=0)
    room_id = ann.room or ""
    spy = await RaceClient.connect(one.url)  # Ann's second window
    await spy.watch(code=ann.code)
    moves = winning_moves(SOLVABLE_SECRET)
    ann_seen = _shown(ann.board or {})  # her starting board: all she has seen
    snapshot = await snapshot_room(one, room_id)
    if end == "resign":
        await ann.resign()
    else:
        await ann.leave()
    await bob.wait_for(lambda e: e.t in ("progress", "racer_left") and e.d["racer"] == 1)
    await play_until_done(bob, moves[:_BOB_MOVES])
    board = await spy.wait_for(
        lambda e: (
            e.t == "board" and e.d["racer"] == bob.racer and bool(_shown(e.d["view"]) - ann_seen)
        ),
        timeout=10,
    )
    learned = _shown(board.d["view"]) - ann_seen
    await restore_room(one, room_id, snapshot)
    await bob.wait_for(lambda e: e.t == "resync", timeout=10)
    if end == "resign":
        await ann.wait_for(lambda e: e.t == "resync", timeout=10)
    return ann, bob, spy, learned


@pytest.mark.parametrize("end", ["resign", "leave"])
async def test_a_racer_out_of_the_race_does_not_race_again_after_a_rewind(
    cluster: Cluster, end: str
) -> None:
    ann, bob, spy, learned = await _ann_out_while_bob_turns_cards_up(cluster, end)
    assert learned, "the spy was shown no card Ann had not turned up"
    # What Redis holds has Ann racing: her race ends again, and no move of hers is
    # taken (a resume after her leave is refused once it has ended again).
    played: list[str] = []
    refused: list[str] = []
    try:
        if end == "leave":
            await ann.resume()
        played, refused = await play_until_refused(ann, winning_moves(SOLVABLE_SECRET))
    except ServerError as exc:
        assert (exc.code, "you left this race" in str(exc)) == ("bad_token", True), exc
        refused = ["wrong_phase"]
    assert (played, refused) == ([], ["wrong_phase"]), (played, refused, sorted(learned))
    status = "resigned" if end == "resign" else "left"
    again = await bob.wait_for(
        lambda e: (
            (e.t == "progress" and e.d["racer"] == ann.racer and e.d["status"] == status)
            or (e.t == "racer_left" and e.d["racer"] == ann.racer)
        ),
        timeout=10,
    )
    assert again.t == ("progress" if end == "resign" else "racer_left")
    for client in (ann, bob, spy):
        await client.close()


async def test_a_racer_out_of_a_rematch_does_not_race_again_after_a_rewind(
    cluster: Cluster,
) -> None:
    """The same in round 2, where someone went out of round 1 too: the node's refold
    after the rewind folds round 1 first (the stream keeps the round before the one
    under way), and its resignation wiped what the node had seen go out of round 2
    (Ann played on: her move was taken)."""
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url, spectator_delay_s=0)
    room_id = ann.room or ""
    await ann.resign()
    await bob.resign()
    for client in (ann, bob):
        await client.wait_for(lambda e: e.t == "race_over", timeout=10)
    await ann.rematch()
    await bob.wait_for(lambda e: e.t == "room_reset", timeout=10)
    await bob.ready()
    await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"], timeout=10)
    await ann.start()
    for client in (ann, bob):
        await client.wait_started()
    snapshot = await snapshot_room(one, room_id)
    await ann.resign()
    await bob.wait_for(lambda e: e.t == "progress" and e.d["racer"] == ann.racer, timeout=10)
    await restore_room(one, room_id, snapshot)
    for client in (ann, bob):
        await client.wait_for(lambda e: e.t == "resync", timeout=10)
    legal = [str(m) for m in board_from_view(ann.board or {}).legal_moves() if str(m) != "undo"]
    with pytest.raises(ServerError) as refused:
        await ann.move(legal[0])
    assert refused.value.code == "wrong_phase", refused.value
    again = await bob.wait_for(
        lambda e: e.t == "progress" and e.d["racer"] == ann.racer, timeout=10
    )
    assert again.d["status"] == "resigned"
    for client in (ann, bob):
        await client.close()
