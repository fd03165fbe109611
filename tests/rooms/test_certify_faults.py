"""Fault windows of a certified round's way from its lobby to its start (an audit):
the node killed, or Redis failing, between the writes the walk, its step and the
host's ``start`` make — the deal found and waiting for the step (certify.
_wanted_until_the_step), ``deal_chosen`` stored and its reply lost, a start waiting
through a failed ``deal_chosen`` — and a round whose walk overlaps the last round's.
What a racer needs each time: one deal, within START_WAIT_S of the round being
wanted, one countdown and one start, and a ``start`` answered (``ok``, or
``unavailable``, which its retry turns into ``ok``)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable
from typing import Any

import pytest
from solrace.protocol.envelope import Envelope
from solrace.protocol.limits import START_WAIT_S
from solrace.race.events import EventType
from solrace.race.settings import RoomSettings, validate_settings
from solrace.rooms import certify, lobby
from solrace.rooms.node import Node
from solrace.rooms.records import unpack_event
from solrace.rooms.room import LiveRoom
from solrace.store.errors import StoreUnavailable

from tests.net.conftest import SOLVABLE_SECRET
from tests.support.faults import Crashed, StoreFaults

from .conftest import Backend, FakePeer


def _line(round_no: int) -> tuple[str, ...]:
    """The line certifying ``round_no`` of the test secret's Yukon room (one in flight)."""
    settings = validate_settings(RoomSettings(variant="yukon"))
    found = certify.certify("yukon", settings.options, SOLVABLE_SECRET, round_no, None)
    assert found.line is not None
    return found.line


async def _stored(node: Node, room_id: str) -> list[str]:
    """The type of every event Redis holds for the room."""
    return [unpack_event(e.data).t for e in await node.store.events_since(room_id, 0)]


async def _start(peer: FakePeer) -> Envelope:
    """The host's ``start``, asked again while it is refused ``unavailable`` (what a
    client does), within START_WAIT_S."""
    async with asyncio.timeout(START_WAIT_S):
        while True:
            reply = await peer.ask("start")
            if reply.t == "error" and reply.d.get("code") == "unavailable":
                await asyncio.sleep(0.1)
                continue
            return reply


async def _drop(node: Node, peer: FakePeer) -> None:
    """The connection closes without ``leave`` (as the network layer closes one)."""
    peer.closed = True
    await lobby.disconnected(node, peer)


async def _lobby(
    node: Node, bob_node: Node | None = None
) -> tuple[FakePeer, FakePeer, Envelope, Envelope]:
    """Ann's Yukon lobby on ``node``, Bob in it (on ``bob_node``) and ready; no deal yet."""
    ann, bob = FakePeer(node), FakePeer(bob_node or node)
    created = await ann.ask("create", variant="yukon", name="Ann")
    assert created.t == "joined", created.d
    joined = await bob.ask("join", code=str(created.d["code"]), name="Bob")
    assert joined.t == "joined", joined.d
    assert (await bob.ask("ready", ready=True)).t == "ok"
    return ann, bob, created, joined


async def _one_race_started(node: Node, room_id: str, *peers: FakePeer) -> None:
    """What the racers need of the round: it started, once, on one certified deal."""
    for peer in peers:
        await peer.until(lambda f: f.t == "started", timeout=10)
        assert len(peer.events("countdown")) <= 1 and len(peer.events("started")) == 1
    stored = await _stored(node, room_id)
    assert stored.count(EventType.DEAL_CHOSEN) == 1, stored
    assert stored.count(EventType.COUNTDOWN) == 1, stored
    assert stored.count(EventType.STARTED) == 1, stored
    room = node.rooms[room_id]
    assert room.state.certificate == list(_line(room.state.round))


def _fail_the_deal_write(
    node: Node, *, stored: bool, failure: Callable[[], BaseException]
) -> list[bool]:
    """The node's first ``deal_chosen`` append fails with ``failure()`` — after it was
    written (``stored``: its reply lost) or before; every other append goes through.
    Returns a list that gets an entry once it has failed."""
    append = node.store.append_event
    failed: list[bool] = []

    async def failing(room_id: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if not failed and unpack_event(data).t == EventType.DEAL_CHOSEN:
            failed.append(stored)
            if stored:
                await append(room_id, data, *args, **kwargs)
            raise failure()
        return await append(room_id, data, *args, **kwargs)

    setattr(node.store, "append_event", failing)  # noqa: B010 (a method of the instance)
    return failed


@pytest.mark.parametrize("fault", ["refused", "reply lost"])
async def test_a_start_waiting_through_the_step_when_redis_fails_the_deal_is_answered(
    backend: Backend, fault: str
) -> None:
    """The host's ``start`` waits through the step (certify.ready) and Redis fails the
    ``deal_chosen`` write made on it: refused (nothing written) or taken with its reply
    lost. The start is answered — ``unavailable``, its outcome unknown — and its retry
    starts the race: one deal (the write retried by Node.insist, or found stored), one
    countdown, one start, within START_WAIT_S of the lobby opening. Covered before
    with nobody waiting only (test_fault_windows: the write retried in a quiet lobby)."""
    node = await backend.node(announce_step_s=certify.ANNOUNCE_STEP_S)

    def refuse() -> BaseException:
        return StoreUnavailable("append_event: Redis is down (injected)")

    failed = _fail_the_deal_write(node, stored=fault == "reply lost", failure=refuse)
    loop = asyncio.get_running_loop()
    began = loop.time()
    ann, bob, created, _ = await _lobby(node)
    first = await ann.ask("start")  # waits through the step, then the write fails
    assert failed, "no deal_chosen write was made"
    assert first.t in ("ok", "error"), first
    if first.t == "error":
        assert first.d["code"] == "unavailable", first.d
        started = await _start(ann)
        assert started.t == "ok", started.d
    assert loop.time() - began < START_WAIT_S
    await _one_race_started(node, str(created.d["room"]), ann, bob)
    for peer in (ann, bob):
        assert len(peer.events("deal_chosen")) == 1


#: Where the room's node dies: its deal found, waiting for the step; storing it, the
#: write made and its reply lost with the node; storing it, the write never made.
_DIES = ["waiting for the step", "deal stored, reply lost", "deal not stored"]


@pytest.mark.parametrize("served", ["alone", "beside another node"])
@pytest.mark.parametrize("dies", _DIES)
async def test_a_lobby_whose_node_dies_at_its_step_gets_one_deal_and_starts(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, dies: str, served: str
) -> None:
    """Ann's node (the host's) finds the deal and is killed — during the wait for the
    step, or as it stores ``deal_chosen`` (stored or not) — while Ann's ``start``
    waits there. Served ``alone``, both racers come back on a second node; ``beside
    another node``, Bob was on that node all along (which certifies the round too,
    its solver held until Ann's node is dead). Ann's ``start`` on the second node is
    answered ``ok`` within START_WAIT_S, and the round has one deal, one countdown,
    one start."""
    step = certify.ANNOUNCE_STEP_S
    a = await backend.node(announce_step_s=step)
    b = await backend.node(announce_step_s=step)
    on = contextvars.ContextVar[Any]("on", default=None)
    run, real = certify._run, certify._solve
    a_found, a_dead = asyncio.Event(), asyncio.Event()

    async def run_on(node: Any, room: LiveRoom, round_no: int) -> None:
        on.set(node)
        await run(node, room, round_no)

    async def solve(*args: Any) -> certify.Certificate | None:
        if on.get() is b:
            await a_dead.wait()  # the second node finds its deal once the first is dead
        found = await real(*args)
        if on.get() is a:
            a_found.set()
        return found

    monkeypatch.setattr(certify, "_run", run_on)
    monkeypatch.setattr(certify, "_solve", solve)
    faults = StoreFaults(a.store)

    def crash() -> BaseException:
        faults.down = True  # killed: it writes nothing more
        return Crashed()

    died: list[bool] = []
    if dies != "waiting for the step":
        stored = dies == "deal stored, reply lost"
        died = _fail_the_deal_write(a, stored=stored, failure=crash)  # the faults' wrapper
    loop = asyncio.get_running_loop()
    began = loop.time()
    ann, bob, created, joined = await _lobby(a, b if served == "beside another node" else None)
    room_id = str(created.d["room"])
    starting = asyncio.ensure_future(ann.ask("start"))
    if dies == "waiting for the step":
        async with asyncio.timeout(10):
            await a_found.wait()
        await asyncio.sleep(0)
        assert not starting.done() and not ann.events("deal_chosen"), "dealt before the step"
    else:
        async with asyncio.timeout(10):
            while not died:
                await asyncio.sleep(0.01)
    faults.down = True
    await a.stop()  # the killed node's tasks end (as its process would)
    a_dead.set()
    with contextlib.suppress(asyncio.CancelledError, Crashed, StoreUnavailable):
        await starting  # nobody hears it: the node is dead, its connections dropped
    ann2 = FakePeer(b)
    assert (await ann2.ask("resume", room=room_id, token=created.d["token"])).t == "joined"
    peers = [ann2]
    if served == "alone":
        bob2 = FakePeer(b)
        assert (await bob2.ask("resume", room=room_id, token=joined.d["token"])).t == "joined"
        peers.append(bob2)
    else:
        peers.append(bob)
    started = await _start(ann2)
    assert started.t == "ok", started.d
    assert loop.time() - began < START_WAIT_S
    await _one_race_started(b, room_id, *peers)
    for peer in peers:
        assert len(peer.events("deal_chosen")) <= 1


async def test_a_lobby_left_empty_at_its_step_and_resumed_on_another_node_is_dealt_once(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both racers of Ann's lobby drop on her node after its deal is found, in the wait
    for the step (the walk stops at its next look: nobody online), and come back on a
    second node, which certifies again; Ann's node still serves the room (a fold of
    their return may start its walk again too). One deal, certified, and Ann's start
    there is answered ``ok`` within START_WAIT_S of their return."""
    step = certify.ANNOUNCE_STEP_S
    a = await backend.node(announce_step_s=step)
    b = await backend.node(announce_step_s=step)
    real = certify._solve
    found = asyncio.Event()

    async def solve(*args: Any) -> certify.Certificate | None:
        won = await real(*args)
        found.set()
        return won

    monkeypatch.setattr(certify, "_solve", solve)
    ann, bob, created, joined = await _lobby(a)
    room_id = str(created.d["room"])
    async with asyncio.timeout(10):
        await found.wait()
    assert not ann.events("deal_chosen")
    for peer in (bob, ann):
        await _drop(a, peer)
    await asyncio.sleep(certify.RECHECK_S * 2)  # a look: the walk stops
    loop = asyncio.get_running_loop()
    back = loop.time()
    ann2, bob2 = FakePeer(b), FakePeer(b)
    for peer, token in ((ann2, created.d["token"]), (bob2, joined.d["token"])):
        assert (await peer.ask("resume", room=room_id, token=token)).t == "joined"
    started = await _start(ann2)
    assert started.t == "ok", started.d
    assert loop.time() - back < START_WAIT_S
    await _one_race_started(b, room_id, ann2, bob2)
    assert len(ann2.events("deal_chosen")) == 1


async def test_a_rematch_whose_walk_overlaps_the_last_rounds_gets_its_own_deal_once(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 1 is dealt by Bob's node while Ann's node still solves it; Ann's walk,
    stopped at its look, is still stopping its candidate (held) when the race is over,
    a rematch made and round 2's walk begun on both nodes. Round 2 gets one deal, its
    own certificate (not round 1's candidate), and starts once."""
    a, b = await backend.node(), await backend.node()
    on = contextvars.ContextVar[Any]("on", default=None)
    run, real = certify._run, certify._solve
    held, stopping, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def run_on(node: Any, room: LiveRoom, round_no: int) -> None:
        on.set(node)
        await run(node, room, round_no)

    async def solve(*args: Any) -> certify.Certificate | None:
        if on.get() is a and args[3] == 1:
            held.set()
            try:
                await asyncio.Event().wait()  # solving until the walk stops it
            except asyncio.CancelledError:
                stopping.set()
                await release.wait()
                raise
        return await real(*args)

    monkeypatch.setattr(certify, "_run", run_on)
    monkeypatch.setattr(certify, "_solve", solve)
    ann = FakePeer(a)
    created = await ann.ask("create", variant="yukon", name="Ann")
    assert created.t == "joined", created.d
    room_id = str(created.d["room"])
    async with asyncio.timeout(10):
        await held.wait()
    bob = FakePeer(b)
    assert (await bob.ask("join", code=str(created.d["code"]), name="Bob")).t == "joined"
    assert (await bob.ask("ready", ready=True)).t == "ok"
    await ann.until(lambda f: f.t == "deal_chosen", timeout=15)  # Bob's node's
    async with asyncio.timeout(10):
        await stopping.wait()  # Ann's round-1 walk is still stopping its candidate
    assert (await ann.ask("start")).t == "ok"
    await bob.until(lambda f: f.t == "started")
    for peer in (ann, bob):
        assert (await peer.ask("resign")).t == "ok"
    await ann.until(lambda f: f.t == "race_over")
    assert (await ann.ask("rematch")).t == "ok"
    room = a.rooms[room_id]
    async with asyncio.timeout(10):
        while (room_id, 2) not in a.certifying and room.state.deal is None:
            await asyncio.sleep(0.01)
    assert (room_id, 1) in a.certifying  # the two walks overlap
    release.set()
    assert (await bob.ask("ready", ready=True)).t == "ok"
    started = await _start(ann)
    assert started.t == "ok", started.d
    async with asyncio.timeout(10):
        while any(len(peer.events("started")) < 2 for peer in (ann, bob)):
            await asyncio.sleep(0.01)
    assert all(len(peer.events("started")) == 2 for peer in (ann, bob))
    stored = await _stored(a, room_id)
    assert stored.count(EventType.DEAL_CHOSEN) == 2, stored
    assert stored.count(EventType.STARTED) == 2, stored
    assert room.state.round == 2
    assert room.state.certificate == list(_line(2))
    assert b.rooms[room_id].state.certificate == list(_line(2))
    async with asyncio.timeout(10):
        while (room_id, 1) in a.certifying:
            await asyncio.sleep(0.01)


def _deal_retriers(node: Node) -> int:
    """The node's tasks retrying a ``deal_chosen`` write Redis failed (Node.insist's
    :func:`_until_done` tasks, named by what they log)."""
    count = 0
    for task in node._tasks:
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        if task.done() or frame is None or getattr(coro, "__qualname__", "") != "_until_done":
            continue
        if frame.f_locals.get("what") == "could not store a certified deal":
            count += 1
    return count


async def test_starts_refused_while_redis_fails_the_deal_leave_one_retrier(
    backend: Backend,
) -> None:
    """Redis refuses every ``deal_chosen`` write for a while (a store out of memory,
    a replica promoted late): the lobby's walk finds its deal, the write fails and is
    retried (Node.insist), and the host's ``start``, refused ``unavailable``, is asked
    again and again, each starting a walk whose write fails too. One retrier of the
    round's deal at most, however many walks failed — each used to leave a retrier of
    its own, retrying until Redis answered: 1 + one per ``start``, without bound —
    and once Redis takes the write, one deal and the race starts."""
    node = await backend.node()
    append = node.store.append_event
    refusing = True
    refused: list[int] = []

    async def failing(room_id: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if refusing and unpack_event(data).t == EventType.DEAL_CHOSEN:
            refused.append(1)
            raise StoreUnavailable("append_event: OOM command not allowed (injected)")
        return await append(room_id, data, *args, **kwargs)

    setattr(node.store, "append_event", failing)  # noqa: B010 (a method of the instance)
    ann, bob, created, _ = await _lobby(node)
    room_id = str(created.d["room"])
    for _ in range(6):
        reply = await ann.ask("start")
        assert reply.t == "error" and reply.d["code"] == "unavailable", reply
    assert len(refused) >= 6
    assert _deal_retriers(node) <= 1, f"{_deal_retriers(node)} retriers of one deal"
    refusing = False
    started = await _start(ann)
    assert started.t == "ok", started.d
    await _one_race_started(node, room_id, ann, bob)
    async with asyncio.timeout(10):
        while _deal_retriers(node):
            await asyncio.sleep(0.01)
