"""Fair spectating: a racer watching its own race from a second connection learns no
card it has not turned up itself (docs/fairness.md, "Fair spectating")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from solrace_client import RaceClient, ServerError

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
    from solrace.rooms import spectators

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
        # boards go out in batches: let the batch holding the last moves go, unfair
        await asyncio.sleep(5 * spectators.BOARD_INTERVAL_S)
    finally:
        spectators.shown_cards = original
    await ann.resign()
    await bob.resign()
    over = await spy.next_event("race_over", timeout=10)
    with pytest.raises(AssertionError, match="not yet seen by racer"):
        check_no_leaks(spy.received, over.d, spy.snapshot["settings"])  # type: ignore[index]
    for client in (ann, bob, spy):
        await client.close()


async def _open_room_race(url: str, bob_agrees: bool) -> tuple[RaceClient, RaceClient]:
    ann, bob = await RaceClient.connect(url), await RaceClient.connect(url)
    await ann.create("yukon", "Ann", private=True, spectators="open")
    await bob.join(ann.code or "", "Bob")
    await ann.ready(spectators="open")
    await bob.ready(spectators="open" if bob_agrees else None)
    for client in (ann, bob):  # everyone ready: the room counts down by itself
        await client.wait_started()
    return ann, bob


@pytest.mark.parametrize("bob_agrees", [True, False])
async def test_open_spectating_needs_every_racer_to_agree(
    cluster: Cluster, bob_agrees: bool
) -> None:
    server = await cluster.node()
    ann, bob = await _open_room_race(server.url, bob_agrees)
    countdown = next(e for e in ann.received if e.t == "countdown")
    assert countdown.d.get("open_boards", False) is bob_agrees
    spy = await RaceClient.connect(server.url)
    await spy.watch(code=ann.code)
    await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:20])
    board = await spy.wait_for(
        lambda e: (
            e.t == "board"
            and e.d["racer"] == ann.racer
            and (e.d["view"] == ann.board or _withheld(e.d["view"]) > 0)
        ),
        timeout=10,
    )
    if bob_agrees:
        assert board.d["view"] == ann.board  # whole: both racers agreed
    else:
        assert _withheld(board.d["view"]) > 0  # one did not: the fair view
    for client in (ann, bob, spy):
        await client.close()


async def test_open_spectating_is_only_for_private_rooms_that_offer_it(cluster: Cluster) -> None:
    server = await cluster.node()
    ann = await RaceClient.connect(server.url)
    with pytest.raises(ServerError, match="private room"):
        await ann.create("yukon", "Ann", spectators="open")
    await ann.create("yukon", "Ann")
    with pytest.raises(ServerError, match="does not offer open spectating"):
        await ann.ready(spectators="open")
    await ann.close()
