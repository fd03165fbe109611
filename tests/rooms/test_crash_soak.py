"""Whole races in which a node dies at a random store call: a seeded walk, so a
failure replays.

The crash tests elsewhere (test_fault_windows, test_ending_faults, test_take_up_faults,
test_finish_windows) each kill a node at one chosen point between the writes of a
decision. test_fault_soak lets chance place store *faults* (the node lives on). This
one lets chance place a *death*: two or three nodes on one store sharing one clock,
three racers (Ann, Bob, Cy) racing the known deal, each playing its winning line at
its own random pace — spread over two or three nodes, or now and then all on the node
that will die (the survivors then hold nothing of the room until a resume or a sweep
takes it up). One node, chosen at random, dies at a store call chosen by a random
countdown of its calls (every call, the writes only, or the writes but moves and lease
renewals: see COUNTS), counted from the start of the race ("race"), or from the
moment the k-th racer sends its last move ("end": the finishes, the race_over and its
archive). That call raises Crashed, the
node's store answers nothing more, its loops and timers stop, and its connections
drop (tests/support/faults.py: crash()). Its racers resume on a surviving node with
their tokens, sending again the move they had in flight with the same ``seq``; the
dead node's lease lapses (dropped, as 5 s unrenewed do, or left to lapse for real),
the shared clock jumps past it, and the survivors sweep for orphans, as a real
cluster's next sweep would. Then nobody helps: the race must end by itself.

Whatever the point of death, what must hold:

- the race ends, within a bounded time, with everyone finished, places 1..3 and
  exactly one racer in place 1; the finishes are placed in the order they were
  stored (the first stored finish is place 1) and one race_over is stored, the result
  every racer was sent and the one archived;
- each racer's stored move log is its winning line, each move once, and every move it
  was told ``moved`` for is in it at its ``seq`` (no acknowledged move is lost);
- ``solrace verify`` accepts the result.

SOLRACE_CRASH_SEEDS=200 runs a long soak (the default is five seeds per backend);
SOLRACE_CRASH_TALLY=FILE appends a line per seed there: where its node died.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from solrace.protocol import race_id
from solrace.protocol.envelope import Envelope
from solrace.protocol.views import EventType, RacerStatus
from solrace.rooms import requests
from solrace.rooms.node import LEASE_MS, Node
from solrace.rooms.records import log_name, unpack, unpack_entries, unpack_event
from solrace.store.errors import StoreUnavailable
from solrace_client.results import SavedResult
from solrace_client.verify import verify_result

from tests.net.conftest import SOLVABLE_SECRET
from tests.support.faults import STORE_CALLS, STORE_READS, Clock, Crashed, StoreFaults
from tests.support.race import archived_result, winning_moves

from .conftest import Backend, FakePeer, SoakRacer, room_seen, seated_and_started, stored_seen

#: Scenarios per backend and loop (each a seed of the walk): SOLRACE_CRASH_SEEDS=N runs
#: seeds 0..N-1, =A:B seeds A..B-1.
_SEEDS = os.environ.get("SOLRACE_CRASH_SEEDS", "5").split(":")
SEEDS = range(int(_SEEDS[0]), int(_SEEDS[1])) if len(_SEEDS) == 2 else range(int(_SEEDS[0]))
#: A racer waits up to this long before each move.
PACE_S = 0.003
_MOVES = frozenset({"append_move", "renew_lease"})
#: Which of the node's store calls its death's countdown counts, with what it is drawn
#: from (1..n): in a "race" death, from the race's start; in an "end" death, from the
#: moment it is armed. Every call ("all": reads, tail polls above all, are most of a
#: node's calls, and a death at one falls between decisions), the writes ("writes":
#: moves above all), or the writes but moves and lease renewals ("decisions": the
#: presences, finishes' follow-ups, race_over, archive, expiries, sets of nodes).
#: Each n is about what a node makes to the race_over (measured: 500-2,500 calls,
#: 200-1,100 writes and 5-6 decisions to the archive; up to 40 calls and 20 writes
#: after an end is armed), so some deaths fall in the archive or after.
COUNTS: dict[str, tuple[Callable[[str], bool], int, int]] = {
    "all": (lambda _call: True, 2000, 30),
    "writes": (lambda call: call not in STORE_READS, 900, 12),
    "decisions": (lambda call: call not in STORE_READS and call not in _MOVES, 7, 7),
}
#: The chance that the dead node's lease is left to lapse for real (up to LEASE_MS),
#: not dropped by the test.
REAL_LAPSE = 0.15
#: The chance that every racer races on the node to die (else they are spread over
#: two nodes or three): the survivors hold nothing of the room until a resume loads
#: it or a sweep adopts it, which may happen at once.
LONE = 0.25
#: How long the race may take to end once every racer has sent its last move.
END_WITHIN_S = 20.0
#: How long the racing may take (a hang fails here, not at the suite's timeout).
RACE_WITHIN_S = 60.0


def _int(value: object) -> int:
    assert isinstance(value, int), value
    return value


class Death:
    """Kills ``node`` at its ``countdown``-th store call once armed (:meth:`arm`): that
    call raises Crashed, its store answers nothing more (StoreFaults.down), its loops
    and its rooms' timers stop, and :attr:`dead` is set (its racers' connections drop)."""

    def __init__(self, node: Node, counts: str) -> None:
        self.node = node
        self.counts = counts
        self.counted, self.race_span, self.end_span = COUNTS[counts]
        self.faults = StoreFaults(node.store)
        self.left: int | None = None
        self.calls = 0
        self.at: str | None = None
        self.dead = asyncio.Event()
        for name in STORE_CALLS:
            setattr(node.store, name, self._wrap(name, getattr(node.store, name)))

    def arm(self, countdown: int) -> None:
        if self.left is None:
            self.left = countdown

    def _wrap(self, name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        @functools.wraps(call)
        async def dying(*args: Any, **kwargs: Any) -> Any:
            if self.left is not None and self.counted(name) and not self.faults.down:
                self.calls += 1
                if self.calls >= self.left:
                    self._die(name)
                    raise Crashed()
            return await call(*args, **kwargs)

        return dying

    def _die(self, call: str) -> None:
        """What a SIGKILL does (faults.crash, for a node without a server)."""
        self.faults.down = True
        self.at = call
        node = self.node
        for task in (
            node._tail_task,
            node._watch_task,
            node._check_task,
            node._wake_task,
            node._sweep_task,
        ):
            if task is not None:
                task.cancel()
        for room in node.rooms.values():
            room.cancel_timers()
        self.dead.set()

    def killed(self, node: Node) -> bool:
        return node is self.node and self.dead.is_set()


@dataclass
class Racer(SoakRacer):
    resumes: int = 0
    #: Whether it has sent its last move (once, or more).
    sent_last: bool = False


async def _ask(racer: Racer, death: Death, t: str, **d: Any) -> Envelope | None:
    """Send request ``t`` on the racer's connection and return its one reply; None if
    the connection's node died first (the request's outcome unknown, as a client
    whose socket dropped knows it)."""
    peer = racer.peer
    if death.killed(peer.node):
        return None
    peer._next_id += 1
    request_id = peer._next_id
    sent = len(peer.frames)
    handled = asyncio.ensure_future(
        requests.handle(peer.node, peer, Envelope(t, id=request_id, d=d))
    )
    died = asyncio.ensure_future(death.dead.wait())
    await asyncio.wait({handled, died}, return_when=asyncio.FIRST_COMPLETED)
    died.cancel()
    if death.killed(peer.node):
        peer.closed = True
        handled.cancel()
        await asyncio.gather(handled, died, return_exceptions=True)
        return None
    await asyncio.gather(died, return_exceptions=True)
    await handled
    replies = [f for f in peer.frames[sent:] if f.id == request_id]
    assert len(replies) == 1, f"{racer.name}'s {t}: {len(replies)} replies"
    return replies[0]


async def _resume_on(
    racer: Racer, to: Node, death: Death, room_id: str, clock: Clock, live: list[Node]
) -> None:
    """The racer's node died: it resumes on ``to`` with its token, again while refused
    ``unavailable``, and once the time a ``rate_limited`` refusal names has passed."""
    racer.peer.closed = True
    racer.peer = FakePeer(to)
    while True:
        reply = await _ask(racer, death, "resume", room=room_id, token=racer.token)
        assert reply is not None, "a survivor died"
        if reply.t == "error" and reply.d["code"] == "unavailable":
            await asyncio.sleep(0.01)
            continue
        if reply.t == "error" and reply.d["code"] == "rate_limited":
            clock.advance(_int(reply.d["retry_after_ms"]) / 1000, *live)
            continue
        break
    assert reply.t == "joined", f"{racer.name}'s resume: {reply.d}"
    racer.resumes += 1


@dataclass
class Walk:
    """One seed's race: what every racer's task shares."""

    rng: random.Random
    clock: Clock
    nodes: list[Node]
    death: Death
    room_id: str
    moves: list[str]
    mode: str
    #: "end": the death is armed when this many racers have sent their last move.
    arm_at_last: int
    lasts_sent: int = 0
    over: asyncio.Event = field(default_factory=asyncio.Event)

    def reader(self) -> Node:
        """A node the test reads the store with: never the one to die (its reads
        would count down its death, and it may die at one)."""
        return next(n for n in self.nodes if n is not self.death.node)

    def live(self) -> list[Node]:
        return [n for n in self.nodes if not self.death.killed(n)]

    async def resume(self, racer: Racer, rng: random.Random) -> None:
        await _resume_on(
            racer, rng.choice(self.live()), self.death, self.room_id, self.clock, self.live()
        )


async def _play(racer: Racer, walk: Walk, rng: random.Random) -> None:
    """Play the winning line (a move refused ``unavailable``, or lost with its node,
    sent again with the same seq); then stay until the race is over, resuming
    elsewhere if the racer's node dies meanwhile."""
    seq, moves = 0, walk.moves
    while seq < len(moves):
        await asyncio.sleep(rng.uniform(0, PACE_S))
        if seq == len(moves) - 1 and not racer.sent_last:
            racer.sent_last = True
            walk.lasts_sent += 1
            if walk.mode == "end" and walk.lasts_sent == walk.arm_at_last:
                walk.death.arm(rng.randint(1, walk.death.end_span))
        reply = await _ask(racer, walk.death, "move", seq=seq, move=moves[seq])
        if reply is None:
            await walk.resume(racer, rng)
            continue
        if reply.t == "moved":
            racer.acked.append((seq, moves[seq]))
            seq += 1
            continue
        assert reply.d["code"] == "unavailable", f"{racer.name}, move {seq}: {reply.d}"
        await asyncio.sleep(0.01)
    over, died = (asyncio.ensure_future(e.wait()) for e in (walk.over, walk.death.dead))
    await asyncio.wait({over, died}, return_when=asyncio.FIRST_COMPLETED)
    if walk.death.killed(racer.peer.node) and not walk.over.is_set():
        await walk.resume(racer, rng)
    await asyncio.wait({over})
    died.cancel()
    await asyncio.gather(died, return_exceptions=True)


async def _take_up(walk: Walk, rng: random.Random) -> None:
    """Once the node has died: its lease lapses (dropped, as LEASE_MS unrenewed do, or
    for real), the clock jumps past it, and every survivor sweeps for orphans."""
    death = walk.death
    await death.dead.wait()
    await asyncio.sleep(rng.uniform(0, 0.2))
    await death.node.stop()
    live = walk.live()
    dead_id = death.node.node_id
    if rng.random() < REAL_LAPSE:
        async with asyncio.timeout(LEASE_MS / 1000 + 5):
            while await live[0].store.live_nodes({dead_id}):
                await asyncio.sleep(0.1)
    else:
        await live[0].store.drop_lease(dead_id)
    walk.clock.advance(LEASE_MS / 1000 + 1, *live)
    for node in live:
        with contextlib.suppress(StoreUnavailable):
            await node.sweep_orphans()


async def _seen(walk: Walk) -> str:
    """What each node and the store hold of the room: for a failure's message."""
    death = walk.death
    lines = [f"died at {death.at} (call {death.calls}, mode {walk.mode}, counting {death.counts})"]
    lines += [room_seen(node, walk.room_id, walk.death.killed(node)) for node in walk.nodes]
    store = walk.reader().store
    lines.append(await stored_seen(store, walk.room_id))
    lines.append(f"room nodes: {await store.room_nodes(walk.room_id)}")
    return "; ".join(lines)


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_race_whose_node_dies_at_a_random_call_ends_with_its_first_finisher_first(
    backend: Backend, seed: int
) -> None:
    await _crash_walk(backend, seed)


async def _crash_walk(backend: Backend, seed: int, mode: str | None = None) -> None:
    rng = random.Random(seed)
    clock = Clock()
    nodes = [await backend.node(clock) for _ in range(rng.choice((2, 3)))]
    death = Death(rng.choice(nodes), rng.choice(sorted(COUNTS)))
    lone = rng.random() < LONE
    if lone:
        homes = [death.node] * 3
    else:
        first, second = rng.sample(nodes, 2)
        homes = [first, second, rng.choice(nodes)]
        rng.shuffle(homes)
    ann, bob, cy = (
        Racer(n, FakePeer(home)) for n, home in zip(("Ann", "Bob", "Cy"), homes, strict=True)
    )
    racers = (ann, bob, cy)
    room = await seated_and_started(racers)
    room_id, settings, commitment = room.room_id, room.settings, room.commitment

    walk = Walk(
        rng=rng,
        clock=clock,
        nodes=nodes,
        death=death,
        room_id=room_id,
        moves=winning_moves(SOLVABLE_SECRET),
        mode=mode or rng.choice(("race", "end")),
        arm_at_last=rng.randint(1, 3),
    )
    if walk.mode == "race":
        death.arm(rng.randint(1, death.race_span))
    # A racer never on the dead node (none if they all race on it) gets its race_over
    # where it raced.
    steady = next((r for r in racers if r.peer.node is not death.node), None)
    plays = [asyncio.ensure_future(_play(r, walk, random.Random(rng.random()))) for r in racers]
    take_up = asyncio.ensure_future(_take_up(walk, random.Random(rng.random())))
    try:
        await _raced(walk, seed, racers, plays, steady, settings, commitment)
    finally:
        take_up.cancel()
        await asyncio.gather(take_up, return_exceptions=True)
    said = (
        f"{backend.kind} seed {seed}: {len(nodes)} nodes, lone {lone}, mode {walk.mode},"
        f" counting {death.counts}, died at {death.at}"
        f" (call {death.calls} of {death.left}), resumes {[r.resumes for r in racers]}"
    )
    print(said)
    if tally := os.environ.get("SOLRACE_CRASH_TALLY"):  # where a long soak's deaths fell
        with open(tally, "a") as out:
            out.write(said + "\n")


async def _stored_over(walk: Walk) -> dict[str, Any]:
    """The race_over, once the store holds it."""
    store = walk.reader().store
    while True:
        for e in await store.events_since(walk.room_id, 0):
            event = unpack_event(e.data)
            if event.t == EventType.RACE_OVER:
                return dict(event.d)
        await asyncio.sleep(0.1)


async def _raced(
    walk: Walk,
    seed: int,
    racers: tuple[Racer, Racer, Racer],
    plays: Sequence[asyncio.Future[None]],
    steady: Racer | None,
    settings: dict[str, Any],
    commitment: str,
) -> None:
    """The race is played, ends by itself, and its end is as it must be."""
    room_id = walk.room_id
    try:
        try:
            async with asyncio.timeout(RACE_WITHIN_S):
                while not all(len(r.acked) == len(walk.moves) for r in racers):
                    await asyncio.wait(plays, timeout=0.05)
                    for play in plays:
                        if play.done():
                            play.result()  # a failed racer fails the walk now
        except TimeoutError:
            seen = await _seen(walk)
            raise AssertionError(f"seed {seed}: the racing hung: {seen}") from None
        try:
            async with asyncio.timeout(END_WITHIN_S):
                result = await _stored_over(walk)
            if steady is not None:
                frame = await steady.peer.until(lambda f: f.t == "race_over", timeout=5)
                assert dict(frame.d) == result, f"seed {seed}: {steady.name} was sent {frame.d}"
        except TimeoutError:
            seen = await _seen(walk)
            raise AssertionError(f"seed {seed}: the race did not end: {seen}") from None
        walk.over.set()
        async with asyncio.timeout(END_WITHIN_S):
            await asyncio.gather(*plays)
    finally:
        walk.over.set()
        for task in plays:
            task.cancel()
        await asyncio.gather(*plays, return_exceptions=True)
    for racer in racers:
        for frame in racer.peer.frames:
            if frame.t == "race_over":
                assert dict(frame.d) == result, f"seed {seed}: {racer.name} was sent {frame.d}"

    listed = result["standings"]
    assert isinstance(listed, list), result
    standings = {s["name"]: s for s in listed}
    assert {n: s["status"] for n, s in standings.items()} == dict.fromkeys(
        ("Ann", "Bob", "Cy"), RacerStatus.FINISHED
    ), f"seed {seed}: {result}"
    places = sorted(s["place"] for s in standings.values())
    assert places == [1, 2, 3], f"seed {seed}: places {places}"

    store = walk.reader().store
    stored = [unpack_event(e.data) for e in await store.events_since(room_id, 0)]
    finishes = [e for e in stored if e.t == EventType.FINISHED]
    assert [e.d["place"] for e in finishes] == [1, 2, 3], f"seed {seed}: {finishes}"
    by_racer = {r.racer: r.name for r in racers}
    for e in finishes:
        assert standings[by_racer[e.racer]]["place"] == e.d["place"], f"seed {seed}: {e}"
    ends = [e for e in stored if e.t == EventType.RACE_OVER]
    assert len(ends) == 1, f"seed {seed}: {ends}"

    for racer in racers:
        raw = await store.move_log(room_id, log_name(1, racer.racer))
        log = [move for move, _at in unpack_entries(raw)]
        assert log == walk.moves, f"seed {seed}: {racer.name}'s log"
        for seq, move in racer.acked:
            assert log[seq] == move, f"seed {seed}: {racer.name}'s acknowledged move {seq}"

    race = race_id(room_id, commitment)
    try:
        kept = unpack(await archived_result(store, race, timeout=END_WITHIN_S))
    except TimeoutError:
        seen = await _seen(walk)
        raise AssertionError(f"seed {seed}: the race was not archived: {seen}") from None
    assert kept["result"] == result, f"seed {seed}: archived {kept['result']}"
    saved = SavedResult(
        race=race,
        room=room_id,
        settings=settings,
        result=result,
        published_commitment=commitment,
    )
    report = verify_result(saved)
    assert report.ok, f"seed {seed}: {report}"
