"""Fair spectating: a racer watching its own race from a second connection learns no
card it has not turned up itself (docs/fairness.md, "Fair spectating")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from solrace_client import RaceClient

from tests.support.race import check_no_leaks, play_until_done, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster


def _withheld(view: dict[str, Any]) -> int:
    cards = [c for col in view["tableau"] for c in col["up"]] + list(view["waste"])
    return cards.count(None) + view.get("withheld_foundation", 0)


@pytest.mark.parametrize("delay", [0, 1])
async def test_a_racer_watching_its_own_race_sees_no_card_it_has_not_turned_up(
    cluster: Cluster, delay: int
) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url, spectator_delay_s=delay)
    spy = await RaceClient.connect(server.url)  # Bob's second window, watching
    await spy.watch(code=ann.code)
    moves = winning_moves(SOLVABLE_SECRET)
    # Ann gets far ahead and turns up many cards Bob has not seen; Bob plays a little.
    await play_until_done(ann, moves[: len(moves) // 2])
    await play_until_done(bob, moves[:3])
    # Ann's board reaches the spy with cards withheld: Bob has not seen them.
    ahead = await spy.wait_for(
        lambda e: e.t == "board" and e.d["racer"] == ann.racer and _withheld(e.d["view"]) > 0,
        timeout=10,
    )
    assert ahead.d["view"]["tableau"]
    # Bob catches up to the same point: the withheld cards are now ones he has seen,
    # so Ann's board comes through with nothing withheld.
    await play_until_done(bob, moves[3 : len(moves) // 2])
    caught_up = await spy.wait_for(
        lambda e: e.t == "board" and e.d["racer"] == ann.racer and _withheld(e.d["view"]) == 0,
        timeout=10,
    )
    assert caught_up.d["view"]["tableau"]
    await ann.resign()
    await bob.resign()

    def whole_boards() -> list[Any]:
        # Once nobody races (both resigned), the boards are whole again.
        last_resign = max(
            i
            for i, e in enumerate(spy.received)
            if e.t == "progress" and e.d["status"] == "resigned"
        )
        return [
            e
            for e in spy.received[last_resign:]
            if e.t == "board"
            and e.d["racer"] == ann.racer
            and "withheld_foundation" not in e.d["view"]
        ]

    for _ in range(100):
        if whole_boards() and any(e.t == "race_over" for e in spy.received):
            break
        await asyncio.sleep(0.1)
    assert _withheld(whole_boards()[-1].d["view"]) == 0
    (over,) = [e for e in spy.received if e.t == "race_over"]
    settings = spy.snapshot["settings"]  # type: ignore[index]
    assert check_no_leaks(spy.received, over.d, settings) > 5
    for client in (ann, bob):
        assert check_no_leaks(client.received, over.d, settings, client.racer) > 5
    for client in (ann, bob, spy):
        await client.close()


async def test_the_leak_check_catches_a_full_board_shown_to_a_racer(cluster: Cluster) -> None:
    """The check itself: boards shown whole while a racer races fail it."""
    from solrace.net import spectators

    async def everything(node: Any, room: Any) -> None:
        return None

    server = await cluster.node()
    ann, bob = await racing(server.url)
    spy = await RaceClient.connect(server.url)
    await spy.watch(code=ann.code)
    original = spectators.shown_cards
    spectators.shown_cards = everything  # type: ignore[assignment]
    try:
        await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:20])
        await spy.wait_for(lambda e: e.t == "progress" and e.d["moves"] >= 20, timeout=10)
    finally:
        spectators.shown_cards = original
    await ann.resign()
    await bob.resign()
    over = await spy.next_event("race_over", timeout=10)
    with pytest.raises(AssertionError, match="not yet seen by racer"):
        check_no_leaks(spy.received, over.d, spy.snapshot["settings"])  # type: ignore[index]
    for client in (ann, bob, spy):
        await client.close()
