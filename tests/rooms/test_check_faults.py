"""The room check held up or failed by Redis (docs/store.md, "Node leases").

Every second a node checks the rooms it serves (Node.check_rooms: each room's head in
Redis, a rebuild of a room Redis lost writes of, the racers of dead nodes marked
offline), leaves the rooms it no longer serves (Node.leave_unserved) and now and then
samples the store's clock. Any of those calls may wait out the store's command timeout
— as long as the node's lease — while the node's lease renews: Redis slow for a room's
keys, a Cluster master down for its slot. They ran in the loop that renews the lease,
so one such wait held the next renewal past the lease's lapse: the node found its
lease lapsed (Node._lapsed) and, meanwhile, other nodes read it as dead. And a check
Redis failed said the node's store down: the next renewal said it back, re-arming every
offline racer's grace, every second while the room's trouble lasted. The checks run in a
loop of their own (Node._check_loop), the lease's loop judges outages, and what a check
is for is still done once Redis answers it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from solrace.rooms import lobby
from solrace.rooms import node as node_module
from solrace.rooms.node import Node
from solrace.rooms.room import LiveRoom
from solrace.store.errors import StoreUnavailable

from tests.support.faults import Clock, StoreFaults, rewind
from tests.support.race import winning_moves

from .conftest import SOLVABLE_SECRET, Backend, FakePeer
from .test_core import _race_on
from .test_fault_windows import _poll
from .test_sweep_faults import _count_renewals
from .test_take_up_faults import _dead, _forfeited_once

#: Moves Ann plays before Redis loses the last LOST of them.
PLAYED, LOST = 4, 2


def _fast_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lease's renewals, the room checks and the clock's samples every 50 ms."""
    for name in ("LEASE_RENEW_S", "ROOM_CHECK_S", "CLOCK_SAMPLE_S"):
        monkeypatch.setattr(node_module, name, 0.05)


def _count(items: list[Any]) -> Callable[[], Awaitable[int]]:
    async def probe() -> int:
        return len(items)

    return probe


def _down(node: Node) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return node.store_down

    return probe


class _Stall:
    """The first call of ``node.store.<call>`` that ``matches`` hangs until
    :meth:`ends` (the command's timeout, ended by the test), then fails as a timeout
    does; every other call goes through."""

    def __init__(
        self, node: Node, call: str, matches: Callable[..., bool] = lambda *_: True
    ) -> None:
        self.call = call
        self.began: list[float] = []  # when (monotonic) the call began to hang
        self.ended: list[str] = []
        self._release = asyncio.Event()
        real = getattr(node.store, call)

        async def stalls(*args: Any, **kwargs: Any) -> Any:
            if self.began or not matches(*args, **kwargs):
                return await real(*args, **kwargs)
            self.began.append(asyncio.get_running_loop().time())
            await self._release.wait()
            self.ended.append(call)
            raise StoreUnavailable(f"{call}: Timeout reading from Redis (injected)")

        setattr(node.store, call, stalls)

    async def hung(self) -> None:
        await _poll(_count(self.began), bool, f"the check never called {self.call}")

    async def ends(self) -> None:
        self._release.set()
        await _poll(_count(self.ended), bool, f"{self.call} never timed out")


async def _renews_meanwhile(renewed: list[bool], what: str) -> None:
    """Five more renewals of the node's lease reach Redis (while ``what``)."""
    seen = len(renewed)
    await _poll(_count(renewed), lambda n: n >= seen + 5, f"renewals that reached Redis {what}")


async def _played(race: Any) -> LiveRoom:
    """Ann's first PLAYED moves of the known deal, acknowledged; her room."""
    for seq, move in enumerate(winning_moves(SOLVABLE_SECRET)[:PLAYED]):
        assert (await race.ann.ask("move", seq=seq, move=move)).t == "moved"
    room = race.ann.room
    assert room is not None
    return room


async def _lose_writes(node: Node, room: LiveRoom, ann: FakePeer) -> None:
    """Redis loses Ann's last LOST moves (a restart from an AOF missing its last
    second)."""
    assert ann.racer is not None
    await rewind(node.store, room.room_id, room.log_name(ann.racer), LOST)


async def _resynced(ann: FakePeer) -> None:
    """Ann is told the room lost its last LOST events (the rebuild's notice)."""
    notice = await ann.until(lambda f: f.t == "resync")
    assert notice.d["lost_events"] == LOST, notice.d


# ------------------------------------------------------------------- renewals
#: What each variant holds up: the store call, and which of its calls is the check's.
_STALLS: dict[str, tuple[str, Callable[..., bool]]] = {
    "heads": ("heads", lambda *_: True),  # every served room's head
    "rebuild": ("events_since", lambda _room, after, *_: after == 0),  # a lost room's read
    "leave": ("leave_rooms", lambda *_: True),  # the sets of rooms no longer served
    "clock": ("time_ms", lambda *_: True),  # the store's clock, sampled
}


@pytest.mark.parametrize("stalled", list(_STALLS))
async def test_a_room_check_whose_call_stalls_holds_up_no_renewal_of_the_lease(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, stalled: str
) -> None:
    """A call of the room check that hangs until its command timeout (Redis slow for
    a room's keys while the lease's own renewals go through): every served room's
    head, a rebuild's read of a room Redis lost writes of, the leave of a room no
    longer served, the store's clock. In the loop that renews the lease, one timeout
    (COMMAND_TIMEOUT_S, the lease's own length) held the renewal past the lease's
    lapse: Redis let the lease go, and the node found it lapsed. The renewals must keep
    their turn while the call hangs, none finds the lease lapsed, and once the call
    timed out the check does what it was doing: the rebuild announced, the room left."""
    _fast_turns(monkeypatch)
    node = await backend.node()
    race = await _race_on(node, node)
    room = await _played(race)
    lobby_room: LiveRoom | None = None
    if stalled == "leave":  # a lobby everyone left, its node still in its set
        host = FakePeer(node)
        assert (await host.ask("create", variant="yukon", name="Cy", private=True)).t == "joined"
        lobby_room = host.room
    renewed = _count_renewals(node)
    lapses: list[int] = []
    real_lapsed = node._lapsed

    def lapsed() -> None:
        lapses.append(len(renewed))
        real_lapsed()

    setattr(node, "_lapsed", lapsed)  # noqa: B010 (a method of the instance)
    call, matches = _STALLS[stalled]
    stall = _Stall(node, call, matches)
    if stalled == "rebuild":
        await _lose_writes(node, room, race.ann)
    elif stalled == "leave":
        assert (await host.ask("leave")).t == "ok"
    try:
        await stall.hung()
        await _renews_meanwhile(renewed, f"while the check's {call} hung")
    finally:
        await stall.ends()
    seen = len(renewed)
    await _poll(_count(renewed), lambda n: n >= seen + 2, "renewals after it")
    assert lapses == [], f"the node found its lease lapsed at renewal {lapses}"
    assert all(renewed), renewed  # every renewal found the lease current
    if stalled == "rebuild":
        await _resynced(race.ann)
    if lobby_room is not None:
        await _poll(
            lambda: node.store.room_nodes(lobby_room.room_id),
            lambda nodes: node.node_id not in nodes,
            "the lobby nobody is in, left",
        )


# -------------------------------------------------------------- no outage
async def test_rooms_redis_fails_every_check_are_no_outage_of_the_node(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis fails every room check (its heads' read: a Cluster master down for a
    room's slot fails the check's one pipeline), while the rest of Redis — the node's
    lease, its race's own timer — answers. The check said the node's store down, the
    next renewal a second later said it back, and each such "outage" re-armed every
    offline racer's grace: a race whose racers left never ended. The node's grace floor
    must not move, no outage be said, the check's trouble be said once, and the race
    end by its racers' grace."""
    _fast_turns(monkeypatch)
    clock = Clock()
    node = await backend.node(clock=clock)
    race = await _race_on(node, node)
    room = race.ann.room
    assert room is not None
    renewed = _count_renewals(node)
    failed = _fail_every(node, "heads", renewed)
    with caplog.at_level(logging.WARNING, logger="solrace"):
        for peer in (race.ann, race.bob):
            await lobby.disconnected(node, peer)  # their grace runs from here
        floor, seen = node.grace_floor_ms, len(failed)
        await _poll(_count(failed), lambda n: n >= seen + 5, "five more failed checks")
        await _renews_meanwhile(renewed, "after them")
    said = [r.getMessage() for r in caplog.records]
    assert "store unavailable" not in said and not node.store_down, said
    assert node.grace_floor_ms == floor, "the node's grace was re-armed"
    assert said.count(node_module._CHECK_FAILED) == 1, said
    await _forfeited_once(clock, node, room, race)


# -------------------------------------------------- what the check is for
@pytest.mark.parametrize("fault", ["stall", "outage"])
async def test_a_dead_nodes_racer_goes_offline_once_redis_answers_the_check(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """Bob's node dies (its lease gone) while Ann's node's check cannot read: its
    heads' read hangs until its timeout (``stall``, the lease renewing all along), or
    Redis is down for the node (``outage``). Once Redis answers the check, Bob is
    marked offline on Ann's node (his grace starts) — after a stall at the next check,
    after an outage only once the node's own outage has settled (Node._outage_settle_ms:
    every lease may have lapsed in it), never before."""
    _fast_turns(monkeypatch)
    clock = Clock()
    node, other = await backend.node(clock), await backend.node(clock)
    race = await _race_on(node, other)
    room = race.ann.room
    assert room is not None
    bob = next(r.racer for r in room.state.racers.values() if r.name == "Bob")
    checks: list[int] = []
    real_heads = node.store.heads

    async def heads(room_ids: Any) -> Any:
        checks.append(len(checks))
        return await real_heads(room_ids)

    setattr(node.store, "heads", heads)  # noqa: B010 (a method of the instance)
    if fault == "stall":
        renewed = _count_renewals(node)
        stall = _Stall(node, "heads")
        await stall.hung()
        await _dead(other, by=node)
        try:
            await _renews_meanwhile(renewed, "while the check's heads hung")
            assert room.state.racers[bob].online
        finally:
            await stall.ends()
    else:
        await _dead(other, by=node)
        faults = StoreFaults(node.store)
        faults.down = True
        await _poll(_down(node), bool, "the node never found Redis down")
        faults.down = False
        await _poll(_down(node), lambda down: not down, "Redis back")
        seen = len(checks)
        await _poll(_count(checks), lambda n: n >= seen + 3, "checks once Redis was back")
        assert room.state.racers[bob].online, "marked offline before the outage settled"
        assert not race.ann.events("presence")
        clock.advance(node._outage_settle_ms() / 1000 + 1, node)
    offline = await race.ann.until(lambda f: f.t == "presence" and not f.d["online"])
    assert offline.d["racer"] == bob, offline.d
    assert not node.store_down


@pytest.mark.parametrize("fault", ["stall", "outage"])
async def test_writes_redis_lost_are_found_once_redis_answers_the_check(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """Redis loses Ann's last moves while her node's check cannot read (its heads'
    read hangs until its timeout, or Redis is down for the node): once Redis answers
    it, the check finds the loss, rebuilds the room and tells Ann."""
    _fast_turns(monkeypatch)
    node = await backend.node()
    race = await _race_on(node, node)
    room = await _played(race)
    if fault == "stall":
        renewed = _count_renewals(node)
        stall = _Stall(node, "heads")
        await stall.hung()
        await _lose_writes(node, room, race.ann)
        try:
            await _renews_meanwhile(renewed, "while the check's heads hung")
        finally:
            await stall.ends()
    else:
        faults = StoreFaults(node.store)
        faults.down = True
        await _poll(_down(node), bool, "the node never found Redis down")
        await _lose_writes(node, room, race.ann)  # (the test's own connection)
        faults.down = False
    await _resynced(race.ann)
    assert room.state.version == (await node.store.heads([room.room_id]))[room.room_id][0]


def _fail_every(node: Node, call: str, renewed: list[bool]) -> list[int]:
    """Make every Store.``call`` of ``node`` time out, as a read of a slot whose master
    is down does; returns, for each failed call, how many renewals had been made."""
    failed: list[int] = []

    async def fails(*_args: Any, **_kwargs: Any) -> Any:
        failed.append(len(renewed))
        raise StoreUnavailable(f"{call}: Timeout reading from Redis (injected)")

    setattr(node.store, call, fails)  # a method of the instance
    return failed


# --------------------------------------------------------- the settle, kept


async def _bob_on_the_other_node(
    backend: Backend, clock: Clock
) -> tuple[Node, Node, Any, LiveRoom, int]:
    """Two nodes on ``clock``, Ann racing on the first and Bob on the second: the
    nodes, the race, the first node's room and Bob's racer id."""
    node, other = await backend.node(clock), await backend.node(clock)
    race = await _race_on(node, other)
    room = race.ann.room
    assert room is not None
    bob = next(r.racer for r in room.state.racers.values() if r.name == "Bob")
    return node, other, race, room, bob


async def test_a_check_whose_lease_read_spans_an_outage_marks_nobody_offline(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads the leases of the nodes of its rooms' online racers while the
    lease's loop finds the store down and back (in a loop of their own, the two
    overlap: a stall longer than the command timeout fails the renewal, and answers a
    read sent later). A lease that lapsed in that outage is no node's death: Bob's
    node, whose renewals that outage cost, must not have him marked offline until the
    outage settled (Node._outage_settle_ms), as for a check begun after it."""
    _fast_turns(monkeypatch)
    clock = Clock()
    node, other, race, room, bob = await _bob_on_the_other_node(backend, clock)
    spanned: list[int] = []
    checks: list[int] = []
    real_live, real_heads = node.store.live_nodes, node.store.heads

    async def outage_meanwhile(node_ids: Any) -> set[str]:
        live = await real_live(node_ids)
        if not spanned:
            spanned.append(len(checks))
            node.store_failed(StoreUnavailable("renew_lease: Timeout (injected)"))
            node.store_ok()  # found down, and back, while the read was out
        return live

    async def heads(room_ids: Any) -> Any:
        checks.append(len(checks))
        return await real_heads(room_ids)

    setattr(node.store, "live_nodes", outage_meanwhile)  # noqa: B010
    setattr(node.store, "heads", heads)  # noqa: B010
    assert other._watch_task is not None
    other._watch_task.cancel()  # Bob's node renews no more: its lease is the outage's
    await node.store.drop_lease(other.node_id)
    await _poll(_count(spanned), bool, "the check never read Bob's node's lease")
    await _poll(_count(checks), lambda n: n >= spanned[0] + 2, "the check after that one")
    assert room.state.racers[bob].online, "marked offline in the outage's settle"
    assert not race.ann.events("presence")
    clock.advance(node._outage_settle_ms() / 1000 + 1, node)
    offline = await race.ann.until(lambda f: f.t == "presence" and not f.d["online"])
    assert offline.d["racer"] == bob, offline.d


async def test_a_check_whose_lease_read_spans_a_lapse_of_the_nodes_own_marks_nobody_offline(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stalls for every client for longer than a lease's remainder and less than
    the command timeout: every lease lapses in it, and every call out in it is answered
    when it ends — the node's renewal, which finds its lease lapsed (Node._lapsed, no
    outage: nothing timed out), and the check's read of the leases, which Redis may
    serve before Bob's node's renewal, out in the stall too. In the lease's loop that
    read was sent once the renewal came back, after every call the stall held; beside
    it, the read saw Bob's node's lease gone and Bob was marked offline (a flash of
    'offline': his node renews a moment later). A lapse of the node's own lease is the
    store's trouble, as an outage is: what a read it spans found is not acted on, and
    Bob goes offline only once that lapse has settled (Node._outage_settle_ms)."""
    _fast_turns(monkeypatch)
    clock = Clock()
    node, other, race, room, bob = await _bob_on_the_other_node(backend, clock)
    spanned: list[int] = []
    checks: list[int] = []
    lapses: list[bool] = []
    renewal_out, stall_over = asyncio.Event(), asyncio.Event()
    real_live, real_heads, real_renew = (
        node.store.live_nodes,
        node.store.heads,
        node.store.renew_lease,
    )

    async def renew(node_id: str, ttl_ms: int) -> bool:
        if not spanned or stall_over.is_set():
            return await real_renew(node_id, ttl_ms)
        renewal_out.set()  # sent in the stall
        await stall_over.wait()
        await real_renew(node_id, ttl_ms)
        lapses.append(True)
        return False  # the lease lapsed in the stall

    async def read_in_the_stall(node_ids: Any) -> set[str]:
        if spanned:
            return await real_live(node_ids)
        spanned.append(len(checks))
        await renewal_out.wait()
        live = await real_live(node_ids)  # served before Bob's node's renewal
        asyncio.get_running_loop().call_soon(stall_over.set)  # the renewal's reply, next
        return live

    async def heads(room_ids: Any) -> Any:
        checks.append(len(checks))
        return await real_heads(room_ids)

    setattr(node.store, "renew_lease", renew)  # noqa: B010 (a method of the instance)
    setattr(node.store, "live_nodes", read_in_the_stall)  # noqa: B010
    setattr(node.store, "heads", heads)  # noqa: B010
    assert other._watch_task is not None
    other._watch_task.cancel()  # Bob's node's renewal comes after the read
    await node.store.drop_lease(other.node_id)
    await _poll(_count(spanned), bool, "the check never read Bob's node's lease")
    await _poll(_count(lapses), bool, "the node never found its lease lapsed")
    await _poll(_count(checks), lambda n: n >= spanned[0] + 2, "the check after that one")
    assert not node.store_down
    assert room.state.racers[bob].online, "marked offline on a read the lapse spanned"
    assert not race.ann.events("presence")
    clock.advance(node._outage_settle_ms() / 1000 + 1, node)
    offline = await race.ann.until(lambda f: f.t == "presence" and not f.d["online"])
    assert offline.d["racer"] == bob, offline.d


async def test_a_check_whose_lease_read_a_stall_answered_before_a_held_renewal_marks_nobody_offline(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stalls for every client for less than the command timeout (5 s) but
    longer than what is left of Bob's node's lease, while Ann's node's, renewed a
    little later, outlives it: Bob's node renewed at 0, Ann's at 0.9, Redis stalls
    from 1.0 to 5.05. The check's read of the leases, sent as the stall began, is
    answered as it ends, before Bob's node's renewal the stall held (Redis serves
    what it held in no set order): Bob's node's lease reads gone. Ann's node's own
    renewal, held too, finds its lease current and not a lease old (sent 4.15 s after
    the last): no lapse, no outage, nothing to settle — and Bob was marked offline, a
    flash (his node renews a moment later). A missing lease is read again once the
    read's answer is in (Node._live_if_settled): Redis had served every call it held
    by then, Bob's node's renewal among them. A node really dead is still found (its
    lease missing twice)."""
    _fast_turns(monkeypatch)
    clock = Clock()
    node, other, race, room, bob = await _bob_on_the_other_node(backend, clock)
    found: list[set[str]] = []  # what the read the stall answered found
    checks: list[int] = []
    holding, held, stall_over = False, asyncio.Event(), asyncio.Event()
    applied = asyncio.Event()
    real_live, real_heads = node.store.live_nodes, node.store.heads
    real_renew = other.store.renew_lease

    async def renew(node_id: str, ttl_ms: int) -> bool:  # Bob's node's
        if not holding or stall_over.is_set():
            return await real_renew(node_id, ttl_ms)
        held.set()  # sent in the stall
        await stall_over.wait()
        current = await real_renew(node_id, ttl_ms)
        applied.set()
        return current

    async def read_as_the_stall_ends(node_ids: Any) -> set[str]:
        nonlocal holding
        if found:
            return await real_live(node_ids)
        holding = True
        await held.wait()  # Bob's node's renewal is out, held by the stall
        await node.store.drop_lease(other.node_id)  # what the stall did to its lease
        live = await real_live(node_ids)  # served first
        found.append(set(live))
        stall_over.set()
        await applied.wait()  # then the renewal, before anything sent after the reply
        return live

    async def heads(room_ids: Any) -> Any:
        checks.append(len(checks))
        return await real_heads(room_ids)

    setattr(other.store, "renew_lease", renew)  # noqa: B010 (a method of the instance)
    setattr(node.store, "live_nodes", read_as_the_stall_ends)  # noqa: B010
    setattr(node.store, "heads", heads)  # noqa: B010
    await _poll(_count(found), bool, "the check never read Bob's node's lease")
    assert other.node_id not in found[0], found
    seen = len(checks)
    await _poll(_count(checks), lambda n: n >= seen + 2, "the checks after that one")
    assert not node.store_down and not node._lapse_found_ms
    assert room.state.racers[bob].online, "marked offline on a read the stall answered"
    assert not race.ann.events("presence")
    await _dead(other, by=node)  # Bob's node dies: found at once, no settle to wait
    offline = await race.ann.until(lambda f: f.t == "presence" and not f.d["online"])
    assert offline.d["racer"] == bob, offline.d


async def test_a_lease_read_again_keeps_what_the_first_read_found_live(backend: Backend) -> None:
    """Node._live_if_settled reads again only the leases its first read missed, and
    a node is dead only if both reads miss it: one live at the first read (dead by the
    second, found at the next check) stays live, one the second read finds (its
    renewal the stall held) is live, one both miss is not. Judged on the second read
    alone, a live node the first read found was taken for dead."""
    node = await backend.node(Clock())
    asked: list[set[str]] = []
    answers = [{"a"}, {"b"}]

    async def scripted(node_ids: Any) -> set[str]:
        asked.append(set(node_ids))
        return answers[len(asked) - 1] & set(node_ids)

    setattr(node.store, "live_nodes", scripted)  # noqa: B010 (a method of the instance)
    assert await node._live_if_settled({"a", "b", "c"}) == {"a", "b"}
    assert asked == [{"a", "b", "c"}, {"b", "c"}]
    asked.clear()
    answers[0] = {"a", "b", "c"}
    assert await node._live_if_settled({"a", "b", "c"}) == {"a", "b", "c"}
    assert asked == [{"a", "b", "c"}], "read again with no lease missing"
