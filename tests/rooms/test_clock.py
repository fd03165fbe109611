"""A node's race clock (solrace.rooms.clock.SteadyClock) never steps: the system's
wall clock, set by hand or stepped by NTP, moved the times of moves and the start,
time-limit and grace decisions with it (a step of +10 min ended every race on the
node; a step back put a racer's log out of time order). The step is logged once and
its size stays visible (the offset)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
import urllib.parse

import pytest
from solrace.race.settings import RoomSettings
from solrace.rooms import lobby
from solrace.rooms import node as node_module
from solrace.rooms.clock import (
    APART_MS,
    FAR_SAMPLES_NEEDED,
    SLEW_MS_PER_S,
    SteadyClock,
    offset_ms,
)
from solrace.rooms.node import Node
from solrace.store import Store, token_digest

from tests.support.flaky_link import FlakyLink
from tests.support.redis import REDIS_URL, new_prefix

from .conftest import FakePeer

#: The real wall clock, before any test steps it.
REAL_TIME_NS = time.time_ns


def _wall_ms() -> int:
    return REAL_TIME_NS() // 1_000_000


def _step(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Set the system clock ``seconds`` away from the real time, as an operator or a
    stepping NTP client would."""
    monkeypatch.setattr(time, "time_ns", lambda: REAL_TIME_NS() + int(seconds * 1e9))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("step_s", [600.0, -5.0])
def test_a_step_of_the_system_clock_moves_no_node_clock_and_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, step_s: float
) -> None:
    caplog.set_level(logging.INFO, logger="solrace.clock")
    clock = SteadyClock()
    before = clock()
    assert abs(before - _wall_ms()) < 100 and abs(offset_ms(clock)) < 100
    _step(monkeypatch, step_s)
    readings = [clock() for _ in range(5)]
    # The node's clock goes on from where it was, in order, with the real time.
    assert readings == sorted(readings) and 0 <= readings[0] - before < 1000
    assert abs(readings[-1] - _wall_ms()) < 1000
    assert abs(offset_ms(clock) - step_s * 1000) < 100
    assert _warnings(caplog) == [
        f"the system clock is {step_s:+.1f} s from this node's race clock; races in"
        " progress are not affected (check NTP on this machine)"
    ]


def test_a_new_step_after_the_clocks_agree_again_is_a_new_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One line per episode: while the clocks stay apart nothing more is said; set
    right again, it says so once; stepped again, it warns again."""
    caplog.set_level(logging.INFO, logger="solrace.clock")
    clock = SteadyClock()
    _step(monkeypatch, 600)
    for _ in range(3):
        clock()
    monkeypatch.setattr(time, "time_ns", REAL_TIME_NS)
    for _ in range(3):
        clock()
    _step(monkeypatch, -5)
    clock()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert messages[0].startswith("the system clock is +600.0 s from this node's")
    assert messages[1].startswith("the system clock agrees with this node's again")
    assert messages[2].startswith("the system clock is -5.0 s from this node's")


def test_a_difference_under_a_second_is_not_a_step(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """NTP slewing and the rounding to milliseconds keep the clocks well within
    :data:`APART_MS`; nothing is logged for them (the offset still shows them)."""
    caplog.set_level(logging.INFO, logger="solrace.clock")
    clock = SteadyClock()
    _step(monkeypatch, 0.6 * APART_MS / 1000)
    clock()
    assert caplog.records == []
    assert abs(offset_ms(clock) - 0.6 * APART_MS) < 100


class _Monotonic:
    """``time.monotonic_ns`` that a test moves by hand: seconds of a node's life in
    no time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ns = time.monotonic_ns()
        monkeypatch.setattr(time, "monotonic_ns", lambda: self.ns)

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


def test_anchoring_sets_the_clock_to_the_stores_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine whose clock is 60 s off: the node's clock starts on it, and is set to
    the store's before the node serves (a step, which only then is allowed)."""
    monotonic = _Monotonic(monkeypatch)
    clock = SteadyClock(wall=lambda: _wall_ms() + 60_000)
    assert abs(clock() - _wall_ms() - 60_000) < 100
    clock.anchor(-60_000)
    assert clock.anchored and clock.store_offset_ms == 0
    assert abs(clock() - _wall_ms()) < 100
    assert abs(offset_ms(clock) - 60_000) < 100  # the machine's clock, as the gauge says
    monotonic.advance(10)
    assert abs(clock() - _wall_ms() - 10_000) < 100


@pytest.mark.parametrize("offset_ms_", [2_000, -2_000, 3])
def test_steering_slews_toward_the_store_at_a_bounded_rate_never_back(
    monkeypatch: pytest.MonkeyPatch, offset_ms_: int
) -> None:
    """Steered 2 s either way, the clock moves at most SLEW_MS_PER_S a second away
    from its own pace, every reading later than the one before, until it has slewed
    the whole offset; then it runs at its pace again."""
    monotonic = _Monotonic(monkeypatch)
    clock = SteadyClock()
    clock.anchor(0)
    start = clock()
    clock.steer(offset_ms_)
    readings = [start]
    for _ in range(10 * 1000):  # 0.1 s steps, 1,000 s
        monotonic.advance(0.1)
        readings.append(clock())
    assert all(b >= a + 99 for a, b in itertools.pairwise(readings))
    for i, reading in enumerate(readings):
        pace = i * 100
        assert abs(reading - start - pace) <= SLEW_MS_PER_S * i / 10 + 1
    assert readings[-1] - start == 1_000_000 + offset_ms_
    monotonic.advance(1)
    assert clock() - readings[-1] == 1000


def test_a_new_sample_replaces_what_was_left_to_slew(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample is taken against the clock as slewed so far, so it is what is left:
    steered 1 s, then (after 10 s, 50 ms slewed) measured 950 ms behind, the clock ends
    1 s ahead of its pace, not 1.95 s."""
    monotonic = _Monotonic(monkeypatch)
    clock = SteadyClock()
    clock.anchor(0)
    start = clock()
    clock.steer(1000)
    monotonic.advance(10)
    assert clock() - start == 10_000 + 10 * SLEW_MS_PER_S
    clock.steer(950)
    monotonic.advance(1000)
    assert clock() - start == 1_010_000 + 1000


def test_a_store_clock_apart_is_warned_about_once_and_its_end_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="solrace.clock")
    clock = SteadyClock()
    clock.anchor(0)
    for _ in range(3):
        clock.steer(2 * APART_MS)
    clock.steer(APART_MS // 4)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        f"this node's race clock is -2.0 s from the store's; slewing toward it,"
        f" {SLEW_MS_PER_S} ms a second",
        "this node's race clock agrees with the store's again (-0.2 s apart)",
    ]
    assert clock.store_offset_ms == APART_MS // 4


async def test_a_node_far_from_its_redis_still_takes_the_stores_clock(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node 120 ms (a round trip) from its Redis, its machine's clock 45 s off: every
    sample of the store's clock took longer than SAMPLE_RTT_MAX_MS and was dropped,
    so the node never took the store's clock (``store_clock_offset_ms`` stayed null,
    nothing logged above debug) and its rooms' decisions followed its machine's clock.
    A sample as fast as the node's recent ones is its best: used, and said once. A
    sample slower than those (a stall) is still dropped."""
    caplog.set_level(logging.INFO, logger="solrace.node")
    url = urllib.parse.urlsplit(REDIS_URL)
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        proxy.latency_s = 0.06  # each way
        far = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        store = await Store.connect(far, prefix=new_prefix())
        clock = SteadyClock(wall=lambda: _wall_ms() + 45_000)
        node = Node(store, clock=clock)
        try:
            for _ in range(FAR_SAMPLES_NEEDED):
                await node.sample_clock()
            assert clock.anchored
            assert abs(node.clock() - await store.time_ms()) < 150
            proxy.latency_s = 0.3  # a stall: slower than the recent samples
            steered: list[int] = []
            monkeypatch.setattr(clock, "steer", steered.append)
            await node.sample_clock()
            assert steered == []
        finally:
            await store.close()
    far_lines = [r.getMessage() for r in caplog.records if "round trip" in r.getMessage()]
    assert len(far_lines) == 1 and "ms from this node" in far_lines[0], far_lines


@pytest.mark.parametrize("first", ["create", "load"])
async def test_a_node_whose_first_sample_failed_takes_the_stores_clock_before_a_room(
    first: str,
) -> None:
    """A node started while Redis did not answer runs on its machine's clock, here
    45 s off, until its next sample of the store's — which may only step the clock
    while the node serves no room. A room request that reached the node once Redis
    answered, before its room checks sampled, made it serve one: the clock could only
    slew from then on (45 s at 5 ms a second: 2.5 hours), and its rooms' timed
    decisions (the countdown's start, the time limit, a grace; a room loaded with a
    decision due is ticked at once) followed the machine's clock. The node takes the
    store's clock before it serves its first room, whether it opens it or loads it."""
    prefix = new_prefix()
    other = await Store.connect(REDIS_URL, prefix=prefix)
    store = await Store.connect(REDIS_URL, prefix=prefix)
    clock = SteadyClock(wall=lambda: _wall_ms() + 45_000)
    node = Node(store, clock=clock)  # not started: no sample yet (Redis was down)
    try:
        if first == "create":
            created = await FakePeer(node).ask("create", variant="yukon", name="Ann")
            assert created.t == "joined", created.d
            (room,) = node.rooms.values()
        else:
            creator = Node(other)
            await creator.sample_clock()
            made = await lobby._create_room(creator, RoomSettings(variant="yukon"))
            room = await node.room(made.room_id)
        assert node.rooms == {room.room_id: room}
        await node.sample_clock()  # the room checks' loop's, once Redis answers
        assert clock.anchored
        assert abs(node.clock() - await store.time_ms()) < 1000
    finally:
        await store.delete_all()
        await store.close()
        await other.close()


async def test_a_create_claims_its_token_on_the_stores_clock() -> None:
    """A create (or a quick that opens a room) claims its proposed token before it
    writes the room (lobby._open_and_join), and the claim's time is what every node
    judges the seat's settle window by (SEAT_SETTLE_S: a resume by the token alone is
    told ``unavailable`` while the seat may still be written, ``bad_token`` after).
    A review: a node whose start-up sample failed, its machine 45 s behind, took the
    store's clock only for the room, after the claim: the claim was stored 45 s in
    the past, so any other node told a resume ``bad_token`` ("never stored") while
    the seat was still being written, and the client asked again beside it."""
    prefix = new_prefix()
    store = await Store.connect(REDIS_URL, prefix=prefix)
    clock = SteadyClock(wall=lambda: _wall_ms() - 45_000)
    node = Node(store, clock=clock)  # not started: no sample yet (Redis was down)
    token = secrets.token_urlsafe(24)
    try:
        created = await FakePeer(node).ask("create", variant="yukon", name="Ann", token=token)
        assert created.t == "joined", created.d
        claim = await store.claimed_seat(token_digest(token))
        assert claim is not None
        assert abs(claim.at_ms - await store.time_ms()) < 1000, claim.at_ms
    finally:
        await store.delete_all()
        await store.close()


async def test_a_node_takes_the_stores_clock_before_a_room_over_a_new_connection() -> None:
    """The sample a room request takes (Node.clock_before_serving) comes after an
    outage, when the node has no connection to Redis left: it timed the new one's
    set-up too (connect, SELECT, CLIENT SETINFO: some four round trips, 170 ms for a
    Redis 40 ms away), was dropped as too slow (SAMPLE_RTT_MAX_MS), and the node
    served its first room on its machine's clock, 45 s off — for a Redis whose every
    sample on a live connection is fast enough to use."""
    url = urllib.parse.urlsplit(REDIS_URL)
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        proxy.latency_s = 0.02  # each way: 40 ms a round trip, under SAMPLE_RTT_MAX_MS
        near = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        store = await Store.connect(near, prefix=new_prefix())  # no connection yet
        clock = SteadyClock(wall=lambda: _wall_ms() + 45_000)
        node = Node(store, clock=clock)  # not started: no sample yet (Redis was down)
        try:
            created = await FakePeer(node).ask("create", variant="yukon", name="Ann")
            assert created.t == "joined", created.d
            assert clock.anchored
            assert abs(node.clock() - await store.time_ms()) < 150
        finally:
            await store.delete_all()
            await store.close()


@pytest.mark.parametrize("request_", ["create", "resume"])
async def test_a_room_request_to_a_node_whose_redis_hangs_fails_in_one_timeout(
    request_: str,
) -> None:
    """A node whose Redis does not answer (hung: its connections open, nothing comes
    back) refuses a room request ``unavailable`` once a command has waited its
    timeout — not twice as long: its sample of the store's clock before the first
    room (Node.clock_before_serving) waited a timeout, was dropped, and the room's own
    read or write waited another."""
    url = urllib.parse.urlsplit(REDIS_URL)
    timeout = 0.5
    async with FlakyLink(url.port or 6379, seed=0) as proxy:
        proxy.silent = "connect"
        hung = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        store = await Store.connect(hung, prefix=new_prefix(), timeout=timeout)
        node = Node(store, clock=SteadyClock())
        token = secrets.token_urlsafe(24)
        d: dict[str, object] = (
            {"variant": "yukon", "name": "Ann", "token": token}
            if request_ == "create"
            else {"room": "r_0123456789ab", "token": token}
        )
        try:
            began = time.monotonic()
            refused = await FakePeer(node).ask(request_, **d)
            took = time.monotonic() - began
        finally:
            await store.close()
    assert (refused.t, refused.d["code"]) == ("error", "unavailable"), refused.d
    assert timeout <= took < 2 * timeout, took  # one command timeout, not two


async def test_a_sample_taken_while_another_set_the_clock_is_dropped(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two samples of the store's clock at once on a node that serves no room yet (a
    room request's, Node.clock_before_serving, and the room checks' loop's; or two requests'
    as clients come back after an outage): the first to end set the clock, a 45 s
    step; the other had read the clock before the step and after it, so its midpoint
    was 22.5 s off. The node slewed toward that, and warned that its race clock was
    22.5 s from the store's. Such a sample is dropped."""
    caplog.set_level(logging.INFO, logger="solrace.clock")
    store = await Store.connect(REDIS_URL, prefix=new_prefix())
    clock = SteadyClock(wall=lambda: _wall_ms() + 45_000)
    node = Node(store, clock=clock)
    time_ms, asked, answer = store.time_ms, asyncio.Event(), asyncio.Event()

    async def held() -> int:
        asked.set()
        await answer.wait()
        return await time_ms()

    try:
        monkeypatch.setattr(store, "time_ms", held)
        first = asyncio.ensure_future(node.sample_clock())
        await asyncio.wait_for(asked.wait(), 10)
        monkeypatch.setattr(store, "time_ms", time_ms)
        await node.sample_clock()  # ends first: sets the clock
        assert clock.anchored and clock.store_offset_ms == 0
        answer.set()
        await asyncio.wait_for(first, 10)
        assert clock.store_offset_ms is not None and abs(clock.store_offset_ms) < 1000
        assert abs(node.clock() - await store.time_ms()) < 1000
    finally:
        await store.close()
    assert not [r for r in caplog.records if "from the store's" in r.getMessage()]


async def test_a_node_whose_machine_clock_is_ahead_still_forgets_idle_rooms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sweep that forgets rooms long idle here (Node._sweep, every IDLE_ROOM_MS /
    10) was timed on the race clock, its first due time read before the node took the
    store's: a machine an hour ahead set the clock an hour back, and the node swept
    nothing for that hour (its idle rooms kept in memory). An interval of this node's
    alone: timed on the monotonic clock."""
    monkeypatch.setattr(node_module, "IDLE_ROOM_MS", 1000)  # a sweep every 0.1 s
    store = await Store.connect(REDIS_URL, prefix=new_prefix())
    clock = SteadyClock(wall=lambda: _wall_ms() + 3_600_000)
    node = Node(store, clock=clock)
    swept = asyncio.Event()
    real_sweep = node._sweep

    def sweep() -> None:
        swept.set()
        real_sweep()

    monkeypatch.setattr(node, "_sweep", sweep)
    node.start()
    try:
        async with asyncio.timeout(5):
            while not clock.anchored:
                await asyncio.sleep(0.01)
        swept.clear()  # one due before the clock was set may have run: the next
        async with asyncio.timeout(5):
            await swept.wait()
    finally:
        await node.stop()
        await store.delete_all()
        await store.close()
