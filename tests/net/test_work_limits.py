"""What one connection can make a node do: a request is charged its work (replays,
listings) in the connection's work bucket, and a connection in debt is not read until
the bucket is back in credit — throttled, never closed for it. And the rate limit does
not close an honest client whose frames queued while the node was busy with its own
request (a store stall, a work debt)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence

import redis.asyncio
from solrace.net.server import RaceServer
from solrace.net.session import Session
from solrace.protocol import SUBPROTOCOL, Envelope, decode, encode
from solrace.protocol.limits import (
    LISTING_COST,
    MAX_UNREADY,
    RESUME_COST,
    SERVER_FRAME_LIMITS,
    replay_cost,
)
from solrace.rooms import lobby as lobby_module
from solrace.rooms.listing_cache import LISTING_CACHE_S
from solrace.rooms.node import Node
from solrace.store import Store
from solrace_client import RaceClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from tests.support.race import close_all, lobby, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster


async def _toggles(racers: Sequence[RaceClient], events: int) -> None:
    """``events`` room events, cheaply: the racers' ready flags (ready, as ``lobby``
    leaves them) taken back and set again, in turn (each racer may take its flag back
    MAX_UNREADY times a round). Never the host's: everyone ready starts the race."""
    assert events <= 2 * MAX_UNREADY * len(racers)
    for i in range(events):
        await racers[(i // 2) % len(racers)].ready(i % 2 == 1)


def _session(server: RaceServer, predicate: Callable[[Session], bool]) -> Session:
    (session,) = [p for p in server.node.peers if isinstance(p, Session) and predicate(p)]
    return session


async def test_a_watch_replay_is_charged_to_the_work_bucket(cluster: Cluster) -> None:
    """200 replayed events cost 4 units (REPLAY_EVENTS_PER_UNIT); the watch was one
    message before, whatever it replayed."""
    server = await cluster.node(work_per_s=0.001, work_burst=40)
    ann, bob, cy = await lobby(server.url, names=("Ann", "Bob", "Cy"))
    await _toggles([bob, cy], 200)
    watcher = await RaceClient.connect(server.url)
    reply = await watcher.watch(code=ann.code, since=bob.version - 200)
    assert reply["replay"] == 200
    spectator = _session(server, lambda s: s.room is not None and s in s.room.spectators)
    spent = 40 - spectator.work_bucket.tokens(asyncio.get_running_loop().time())
    assert abs(spent - replay_cost(200)) < 0.01
    await watcher.list_rooms()
    spent = 40 - spectator.work_bucket.tokens(asyncio.get_running_loop().time())
    assert abs(spent - replay_cost(200) - LISTING_COST) < 0.01
    await close_all(ann, bob, cy, watcher)


async def test_repeated_replays_are_throttled_not_closed(cluster: Cluster) -> None:
    """A spectator repeating ``watch {since: version - 200}`` + ``leave`` (the audit's
    8 such spectators slowed an honest racer's acks from 2 ms to 29–61 ms) makes the
    node replay no faster than its work bucket refills; it is not closed for it."""
    server = await cluster.node(work_per_s=20, work_burst=10)
    ann, bob, cy = await lobby(server.url, names=("Ann", "Bob", "Cy"))
    await _toggles([bob, cy], 200)
    since = bob.version - 200
    watcher = await RaceClient.connect(server.url)
    began = time.monotonic()
    for _ in range(10):
        reply = await watcher.watch(code=ann.code, since=since)
        assert reply["replay"] >= 200
        await watcher.leave()
        watcher.room = None
    took = time.monotonic() - began
    # 10 replays × 4 units − the burst of 10, at 20 units/s: 1.5 s at least (it took
    # 0.1–0.2 s when a replay was one message).
    assert took >= (10 * replay_cost(200) - 10) / 20 - 0.1
    assert watcher.close_code is None and await watcher.ping() > 0
    assert "solrace_work_waits_total 0.0" not in server.metrics.render().decode()
    await close_all(ann, bob, cy, watcher)


async def test_listings_are_read_once_per_interval_for_every_connection(
    cluster: Cluster,
) -> None:
    """16 connections listing while many public lobbies exist cost one read of the
    listing (and of each room in it), not one per request."""
    server = await cluster.node()
    rooms = [await RaceClient.connect(server.url) for _ in range(10)]
    for i, host in enumerate(rooms):
        # Random deals: a certified one's deal_chosen, folded while the lists run,
        # changes the listing and rightly forgets the cache (a CI run saw 2 reads).
        await host.create("yukon", f"Host{i}", deals="random")
    store = server.node.store
    reads = {"listed_rooms": 0, "events_since": 0}
    for name in reads:
        real = getattr(store, name)

        def counted(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            reads[_name] += 1
            return _real(*args, **kw)  # type: ignore[operator]

        setattr(store, name, counted)
    listers = [await RaceClient.connect(server.url) for _ in range(16)]
    began = time.monotonic()
    answers = await asyncio.gather(*(c.list_rooms() for c in listers for _ in range(3)))
    intervals = 1 + int((time.monotonic() - began) / LISTING_CACHE_S)  # 1 unless slow
    assert all(len(rooms_listed) == 10 for rooms_listed in answers)
    # One listing read per cache interval, and each of the 10 rooms brought up to date
    # about once, for 48 lists (before: 48 and 480; the node reads rooms for its own
    # ends besides).
    assert reads["listed_rooms"] <= intervals < 48
    # (Room reads: about 10 on a quiet machine, 28 seen under load; 480 before.)
    assert reads["events_since"] <= 60 * intervals
    # A change this node folds is listed at once: the cache is forgotten.
    await listers[0].join(rooms[0].code or "", "Late")
    (listed,) = [r for r in await listers[1].list_rooms() if r["code"] == rooms[0].code]
    assert listed["racers"] == 2
    await close_all(*rooms, *listers)


def _called_from(function: Callable[..., object]) -> bool:
    """Whether ``function`` is on the running call stack (an awaiting coroutine's
    frame is: it drives the one that awaits)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


async def test_quick_skips_lobbies_it_knows_are_not_quick_races_unread(
    cluster: Cluster,
) -> None:
    """A room's settings never change: ``quick`` no longer reads each listed lobby
    that is not a quick race of its variant (100 junk lobbies were 100 reads a quick)."""
    server = await cluster.node()
    hosts = [await RaceClient.connect(server.url) for _ in range(10)]
    for i, host in enumerate(hosts):
        await host.create("yukon", f"Host{i}")
    junk = {host.room for host in hosts}
    store = server.node.store
    reads = 0
    real = store.events_since

    def counted(room: str, *args: object, **kw: object) -> object:
        # Only the quick's own reads: the node's other work on the junk lobbies (a
        # presence's read-back, a room check) may run meanwhile. A sleep once stood
        # for that work being done; under a loaded CI run it was not (4 reads).
        nonlocal reads
        reads += room in junk and _called_from(lobby_module.quick)
        return real(room, *args, **kw)  # type: ignore[arg-type]

    store.events_since = counted  # type: ignore[method-assign]
    quick = await RaceClient.connect(server.url)
    await quick.quick("yukon", "Quick")
    assert quick.room not in junk
    assert reads == 0  # before: one per junk lobby
    await close_all(*hosts, quick)


async def test_an_honest_reconnect_into_work_debt_is_not_closed(cluster: Cluster) -> None:
    """A racer that resumes with a replay its work bucket cannot pay waits its debt
    out (the node does not read its frames meanwhile), and the frames it pipelines at
    a legal 15/s meanwhile are not a burst: it is not closed, every one is answered."""
    busy = await cluster.node()  # no limit: 200 events quickly
    ann, bob, cy = await lobby(busy.url, names=("Ann", "Bob", "Cy"))
    await _toggles([bob, cy], 200)
    room, token, since = bob.room, bob.token, bob.version - 200
    await bob.close()
    # The server's own message limit (20/s, burst 40) and a work bucket a resume of
    # 200 events overdraws by 3 s: 5 + 4 units, 1 held, 2 a second.
    limited = await cluster.node(rate=None, work_per_s=2, work_burst=1)
    again = await RaceClient.connect(limited.url)
    resume = Envelope("resume", id=1, d={"room": room, "token": token, "since": since})
    await again.send_raw(encode(resume))
    for i in range(45):  # 3 s at 15/s, while the node waits the debt out
        await again.send_raw(encode(Envelope("ping", id=100 + i)))
        await asyncio.sleep(1 / 15)
    for _ in range(100):
        if sum(e.t == "pong" for e in again.received) == 45 or again.close_code:
            break
        await asyncio.sleep(0.05)
    assert again.close_code is None
    assert [e.t for e in again.received if e.id == 1] == ["joined"]
    assert sum(e.t == "pong" for e in again.received) == 45
    assert RESUME_COST + replay_cost(200) - 1 >= 3 * 2  # the debt this test is about
    await close_all(ann, cy, again)


async def test_a_racer_pipelining_at_15_per_s_survives_a_3_s_redis_stall(
    private_redis: Callable[..., str],
) -> None:
    """``DEBUG SLEEP 3`` on the node's Redis while a racer pipelines moves at 15/s (the
    protocol allows 20/s): its first move waits 3 s for Redis, the 44 it sent meanwhile
    queue. Before, they were read at once against a bucket of at most 40: closed 1008
    rate_limited. A flood during the same stall is still closed."""
    url = private_redis("--enable-debug-command", "yes")
    store = await Store.connect(url, prefix="stall:")
    node = Node(store, name="stall", room_secret=lambda: SOLVABLE_SECRET, countdown_ms=200)
    node.candidates_in_flight = 1
    server = RaceServer(node, "127.0.0.1", 0)
    admin = redis.asyncio.from_url(url)
    try:
        await server.start()
        ann, bob = await racing(server.url)
        flooder = await RaceClient.connect(server.url)
        await flooder.watch(code=ann.code)
        moves = winning_moves(SOLVABLE_SECRET)[:45]
        assert len(moves) == 45
        sleeping = asyncio.ensure_future(admin.execute_command("DEBUG", "SLEEP", "3"))
        await asyncio.sleep(0.05)
        for seq, move in enumerate(moves):
            await ann.send_raw(encode(Envelope("move", id=100 + seq, d={"seq": seq, "move": move})))
            if seq == 0:  # the flooder's list waits for Redis as well
                await flooder.send_raw(encode(Envelope("list", id=1)))
                for i in range(150):
                    await flooder.send_raw(encode(Envelope("ping", id=2 + i)))
            await asyncio.sleep(1 / 15)
        await sleeping
        for _ in range(200):
            if sum(e.t == "moved" for e in ann.received) == 45 or ann.close_code:
                break
            await asyncio.sleep(0.05)
        assert ann.close_code is None
        assert sum(e.t == "moved" for e in ann.received) == 45
        await asyncio.wait_for(flooder.closed, 10)
        assert flooder.close_code == 1008
        await close_all(ann, bob)
    finally:
        await admin.aclose()
        if server.server is not None:
            server.server.close(close_connections=True)
        await node.stop()
        await store.close()


def _pinger(url: str, frames: int, pace: float) -> tuple[int, int | None]:
    """A client on its own thread (it goes on sending while the server's event loop
    is stalled): ``frames`` pings at ``pace``/s; the pongs it got and its close code."""
    pongs, code = 0, None
    with connect(url, subprotocols=[Subprotocol(SUBPROTOCOL)]) as ws:
        try:
            for i in range(frames):
                ws.send(encode(Envelope("ping", id=i)))
                time.sleep(1 / pace)
            while pongs < frames:
                frame = ws.recv(timeout=10)
                assert isinstance(frame, bytes)
                pongs += decode(frame, limits=SERVER_FRAME_LIMITS).t == "pong"
        except ConnectionClosed as closed:
            code = None if closed.rcvd is None else closed.rcvd.code
    return pongs, code


async def test_a_stall_of_the_whole_event_loop_does_not_close_clients_at_a_legal_pace(
    cluster: Cluster,
) -> None:
    """The node's event loop blocked for 3 s while a client sends 18 frames/s (legal):
    the 54 frames it sent meanwhile arrive at once. Counted as a burst, they closed it
    1008 (the audit: 60 such connections closed at once after replays stalled a node);
    the loop's stall is now counted as time the client's frames queued."""
    server = await cluster.node(rate=None)
    sending = asyncio.ensure_future(asyncio.to_thread(_pinger, server.url, 72, 18))
    await asyncio.sleep(0.5)
    time.sleep(3)  # the whole event loop stalls (the client thread goes on)
    pongs, code = await sending
    assert (pongs, code) == (72, None)
