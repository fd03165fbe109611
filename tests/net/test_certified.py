"""Certified deals over the network: the lobby learns the deal is winnable, the
countdown commits to the certificate, a racer who plays it wins, and the revealed race
verifies (docs/fairness.md)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from solrace.protocol import verify
from solrace.race.settings import RoomSettings, validate_settings
from solrace.rooms import certify as certify_module
from solrace.rooms.certify import certify
from solrace.rooms.records import unpack
from solrace.rules import replay
from solrace_client import RaceClient, ServerError, results
from solrace_client import connection as connection_module

from tests.support.faults import StoreFaults
from tests.support.race import archived_result, check_no_leaks, lobby, play_until_done

from .conftest import SOLVABLE_SECRET, Cluster


async def _deal(client: RaceClient) -> dict[str, Any]:
    """The room's deal: in the client's snapshot if it was chosen before the client
    entered, else from the ``deal_chosen`` event (already received — ``lobby`` may
    have read past it while waiting for the ready flags — or still to come)."""
    known = (client.snapshot or {}).get("deal")
    if known is not None:
        return dict(known)
    for envelope in client.received:
        if envelope.t == "deal_chosen":
            return dict(envelope.d)
    return dict((await client.wait_for(lambda e: e.t == "deal_chosen", timeout=30)).d)


async def test_a_racer_playing_the_certificate_wins_and_the_race_verifies(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await lobby(server.url)
    chosen = await _deal(ann)
    # Certified, and nothing the deal's cards decide: no length, no band found
    # (docs/fairness.md); the line itself comes with race_over.
    assert chosen == {"certified": True, "moves": None, "difficulty": None}
    # The test knows the room's secret, so it can certify the same round itself.
    settings = validate_settings(RoomSettings())
    found = certify("yukon", settings.options, SOLVABLE_SECRET, 1, None)
    assert found.line is not None
    await ann.start()
    for client in (ann, bob):
        await client.wait_started()
    last = await play_until_done(ann, found.line)
    assert last["status"] == "finished"
    await bob.resign()
    over = (await ann.next_event("race_over", timeout=10)).d
    assert [(s["name"], s["place"]) for s in over["standings"]] == [("Ann", 1), ("Bob", 2)]
    assert over["certificate"] == list(found.line)
    # The server keeps the result under the id the client saves it by (one scheme).
    kept = await archived_result(server.node.store, results.race_id(ann.room or "", over))
    saved = unpack(kept)
    assert saved["deal"] == chosen  # the kept result says how the deal was made
    assert verify(over["commitment"], over["seed"], over["salt"], over["certificate"])
    snapshot = ann.snapshot or {}
    won = replay("yukon", over["seed"], snapshot["settings"]["options"], over["certificate"])
    assert won.is_won()
    for client in (ann, bob):
        assert check_no_leaks(client.received, over, snapshot["settings"], client.racer) > 3
        await client.close()


async def test_the_lobby_snapshot_says_how_the_deal_was_made(cluster: Cluster) -> None:
    server = await cluster.node()
    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", deals="random")
    assert ann.snapshot is not None
    assert ann.snapshot["settings"]["deals"] == "random"
    assert ann.snapshot["deal"] is None  # a random room certifies nothing
    watcher = await RaceClient.connect(server.url)
    await ann.close()
    cy = await RaceClient.connect(server.url)
    await cy.create("yukon", "Cy", difficulty="easy")
    await _deal(cy)
    watching = await watcher.watch(code=cy.code)
    assert watching["snapshot"]["deal"]["certified"] is True
    assert watching["snapshot"]["deal"]["difficulty"] == "easy"
    await cy.close()
    await watcher.close()


async def test_deals_default_to_winnable_where_the_solver_certifies_in_budget(
    cluster: Cluster,
) -> None:
    """A creator who does not say gets certified deals, quick rooms included — except
    in Australian, whose deals the solver mostly leaves unknown (RANDOM_BY_DEFAULT):
    there the default is random, and asking for winnable deals or a difficulty still
    certifies."""
    server = await cluster.node()
    asked: list[tuple[str, dict[str, str]]] = [
        ("yukon", {}),
        ("australian", {}),
        ("australian", {"deals": "winnable"}),
        ("australian", {"difficulty": "hard"}),
    ]
    got = []
    for variant, settings in asked:
        client = await RaceClient.connect(server.url)
        await client.create(variant, "Ann", **settings)
        assert client.snapshot is not None
        got.append(client.snapshot["settings"]["deals"])
        await client.close()
    assert got == ["winnable", "random", "winnable", "winnable"]
    for variant, deals in (("yukon", "winnable"), ("australian", "random")):
        client = await RaceClient.connect(server.url)
        await client.quick(variant, "Bo")
        assert client.snapshot is not None
        assert client.snapshot["settings"]["quick"] is True
        assert client.snapshot["settings"]["deals"] == deals
        await client.close()


async def test_bad_deal_settings_are_refused_in_words(cluster: Cluster) -> None:
    server = await cluster.node()
    ann = await RaceClient.connect(server.url)
    with pytest.raises(ServerError, match="deals"):
        await ann.create("yukon", "Ann", deals="rigged")
    with pytest.raises(ServerError, match="needs winnable deals"):
        await ann.create("yukon", "Ann", deals="random", difficulty="hard")
    await ann.close()


async def test_a_certification_cut_off_by_a_redis_outage_leaves_no_stray_error(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The solver finishes while Redis is down, with nobody waiting for the deal (no
    ``start`` pending): the deal cannot be stored, and that is no error to report — the
    next ``start`` certifies again. Before, asyncio logged "Task exception was never
    retrieved" with a traceback (found by tests/deploy/test_chaos.py)."""
    server = await cluster.node()
    faults = StoreFaults(server.node.store)
    release = asyncio.Event()

    async def slow_solve(*args: Any) -> certify_module.Certificate:
        await release.wait()
        return certify_module.Certificate(0, None, None)  # uncertified: quick to deal

    monkeypatch.setattr(certify_module, "_solve", slow_solve)
    stray: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: stray.append(context))
    try:
        ann, bob = await lobby(server.url)
        faults.down = True
        release.set()
        for _ in range(50):
            if not server.node.certifying:
                break
            await asyncio.sleep(0.02)
        assert not server.node.certifying  # the certification ended (unstored)
        gc.collect()
        await asyncio.sleep(0)
        assert not stray, stray
    finally:
        loop.set_exception_handler(None)
        faults.down = False
    await ann.start()  # certifies again, now that Redis answers
    for client in (ann, bob):
        await client.wait_started()
        await client.close()


async def test_a_start_held_for_its_certificate_outlasts_the_usual_reply_timeout(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server holds a host's ``start`` while the deal is certified (up to
    START_WAIT_S); the client waits that long on top of its usual reply timeout. Before,
    a ``start`` waited 10 s like any request, so a certification slower than that (ten
    rooms certifying on a loaded machine) looked like a dead link: the host reconnected
    ("connection lost (TimeoutError)", tests/deploy/test_chaos.py in CI), and the TUI
    said "not connected" to a host whose race was starting."""
    server = await cluster.node()
    release = asyncio.Event()

    async def slow_solve(*args: Any) -> certify_module.Certificate:
        await release.wait()
        return certify_module.Certificate(0, None, None)

    monkeypatch.setattr(certify_module, "_solve", slow_solve)
    monkeypatch.setattr(connection_module, "REQUEST_TIMEOUT_S", 0.2)  # the usual, shortened
    ann, bob = await lobby(server.url)
    starting = asyncio.create_task(ann.start())
    await asyncio.sleep(1.0)  # five usual reply timeouts: the start is still held
    assert not starting.done()
    release.set()
    await starting
    for client in (ann, bob):
        await client.wait_started()
        await client.close()
