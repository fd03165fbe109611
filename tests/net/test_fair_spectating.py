"""Fair spectating: a racer watching its own race from a second connection learns no
card it has not turned up itself (docs/fairness.md, "Fair spectating")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from solrace.protocol.limits import MAX_RACERS
from solrace_client import RaceClient, ServerError

from tests.support.race import check_no_leaks, play_until_done, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster


def _tableau(view: Any) -> list[Any]:
    return [(col["down"], list(col["up"])) for col in view["tableau"]]


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
    # Ann has turned up cards Bob has not seen: her board is held back whole (a card
    # shown only as withheld still leaks: moved onto a shown card it has the rank and
    # colour the rules demand). The spy keeps an earlier board of hers, whole.
    ann_moves = len(moves) // 2
    await spy.wait_for(
        lambda e: e.t == "progress" and e.d["racer"] == ann.racer and e.d["moves"] == ann_moves,
        timeout=10,
    )
    await asyncio.sleep(0.5)  # past the boards' batch interval (and the delay, if any)
    await spy.wait_for(lambda e: e.t == "progress" and e.d["racer"] == bob.racer, timeout=10)
    held = [e.d["view"] for e in spy.received if e.t == "board" and e.d["racer"] == ann.racer]
    assert held, "the spy got no board of Ann's"
    assert _withheld(held[-1]) == 0
    assert _tableau(held[-1]) != _tableau(ann.board), "Ann's board was not held back"
    # Bob catches up to the same point: every card on Ann's board is one he has seen,
    # so her board comes through as it is now.
    await play_until_done(bob, moves[3:ann_moves])
    caught_up = await spy.wait_for(
        lambda e: (
            e.t == "board"
            and e.d["racer"] == ann.racer
            and _tableau(e.d["view"]) == _tableau(ann.board)
        ),
        timeout=10,
    )
    assert _withheld(caught_up.d["view"]) == 0
    await ann.resign()
    await bob.resign()

    def whole_boards() -> list[Any]:
        # Once nobody races (both resigned), the boards are whole again. (The spy may
        # not have the resignations yet: a spectator's frames wait up to 50 ms.)
        last_resign = max(
            (
                i
                for i, e in enumerate(spy.received)
                if e.t == "progress" and e.d["status"] == "resigned"
            ),
            default=len(spy.received),
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


async def _leak_check_on_a_broken_node(
    cluster: Cluster, name: str, broken: Any
) -> tuple[list[Any], Any, Any]:
    """What a spy received while ``solrace.rooms.spectators.<name>`` was ``broken``
    and Ann made 20 moves (then both resigned), and the race's end: for the check's
    own tests, which break the node on purpose."""
    from solrace.rooms import spectators

    server = await cluster.node()
    ann, bob = await racing(server.url)
    spy = await RaceClient.connect(server.url)
    await spy.watch(code=ann.code)
    original = getattr(spectators, name)
    setattr(spectators, name, broken)
    try:
        await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:20])
        await spy.wait_for(lambda e: e.t == "progress" and e.d["moves"] >= 20, timeout=10)
        # boards go out in batches: let the batch holding the last moves go, unfair
        await asyncio.sleep(5 * spectators.BOARD_INTERVAL_S)
    finally:
        setattr(spectators, name, original)
    await ann.resign()
    await bob.resign()
    over = await spy.next_event("race_over", timeout=10)
    for client in (ann, bob, spy):
        await client.close()
    return spy.received, over.d, spy.snapshot["settings"]  # type: ignore[index]


async def test_the_leak_check_catches_a_full_board_shown_to_a_racer(cluster: Cluster) -> None:
    """The check itself: boards shown whole while a racer races fail it."""

    async def everything(node: Any, room: Any) -> None:
        return None

    frames, over, settings = await _leak_check_on_a_broken_node(cluster, "shown_cards", everything)
    with pytest.raises(AssertionError, match="not yet seen by racer"):
        check_no_leaks(frames, over, settings)


async def test_the_leak_check_catches_a_board_with_cards_withheld(cluster: Cluster) -> None:
    """The check itself: a board showing where cards nobody else has seen lie, with
    only their names withheld (what spectators got before), fails it."""
    frames, over, settings = await _leak_check_on_a_broken_node(
        cluster, "_whole", lambda view: True
    )
    with pytest.raises(AssertionError, match="with cards withheld"):
        check_no_leaks(frames, over, settings)


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
    await spy.wait_for(
        lambda e: e.t == "progress" and e.d["racer"] == ann.racer and e.d["moves"] == 20,
        timeout=10,
    )
    if bob_agrees:  # whole: both racers agreed
        await spy.wait_for(
            lambda e: e.t == "board" and e.d["racer"] == ann.racer and e.d["view"] == ann.board,
            timeout=10,
        )
    else:  # one did not: fair, so Ann's board (cards Bob has not seen) is held back
        await asyncio.sleep(0.5)  # past the boards' batch interval
        boards = [e.d["view"] for e in spy.received if e.t == "board" and e.d["racer"] == ann.racer]
        assert boards and all(_withheld(view) == 0 for view in boards)
        assert _tableau(boards[-1]) != _tableau(ann.board)
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


async def test_a_full_room_with_a_crowd_watching_leaks_nothing_to_any_spectator(
    cluster: Cluster,
) -> None:
    """The most racers a room takes, and a crowd of spectators (whose frames go out in
    batches: net/session.py): every spectator's frames pass the leak check, and every
    one ends with the racers' standings. (An audit ran this with 1,000 spectators:
    docs/performance.md, "One popular race".)"""
    server = await cluster.node()
    names = tuple(f"R{i}" for i in range(MAX_RACERS))
    racers = await racing(server.url, names=names, max_racers=MAX_RACERS, private=True)
    crowd = [await RaceClient.connect(server.url) for _ in range(12)]
    for spectator in crowd:
        await spectator.watch(code=racers[0].code)
    moves = winning_moves(SOLVABLE_SECRET)
    await asyncio.gather(*(play_until_done(r, moves[: 3 * i + 2]) for i, r in enumerate(racers)))
    for racer in racers:
        await racer.resign()
    over = await racers[0].next_event("race_over", timeout=10)
    settings = racers[0].snapshot["settings"]  # type: ignore[index]
    for spectator in crowd:
        theirs = await spectator.wait_for(lambda e: e.t == "race_over", timeout=10)
        assert theirs.d["standings"] == over.d["standings"]
        assert check_no_leaks(spectator.received, over.d, settings) > MAX_RACERS
    for client in (*racers, *crowd):
        await client.close()
