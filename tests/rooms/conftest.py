"""The room core without sockets: a node on a real store (real Redis, a Redis Cluster
AND the embedded engine), driven through :func:`solrace.rooms.requests.handle` by fake
peers that keep every frame they are sent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvloop
from solrace.protocol import SERVER_FRAME_LIMITS, decode
from solrace.protocol.envelope import Envelope
from solrace.race import RacerGame
from solrace.rooms import requests
from solrace.rooms.node import Node
from solrace.rooms.peer import Peer
from solrace.rooms.records import unpack_event
from solrace.rooms.room import LiveRoom
from solrace.store import Store

from tests.net.conftest import SOLVABLE_SECRET
from tests.support.redis import BACKEND_URLS, connect_or_fail, delete_prefix, new_prefix


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The room core runs on both event loops: uvloop, which ``solrace-server`` uses
    where it is installed, and asyncio's own, its fallback. They differ where the core
    can see it (uvloop's ``call_at`` returns a plain Handle for a call due at once)."""
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


#: The stores a test on a ``backend`` runs on under asyncio's loop. Every store runs
#: under uvloop, the loop ``solrace-server`` uses wherever uvloop installs (a
#: dependency on every platform but Windows), and the fallback loop under the embedded
#: store — the default, whose link to its engine (solrace/store/_link.py) is the
#: store's own code on the loop's transports; Redis and the Cluster go through
#: redis-py's, under either loop alike. The two pairings left out (asyncio's loop with
#: Redis, with the Cluster) were 8 % of the whole suite's CPU (about 140 s of 1,700),
#: and the suite is CPU-bound on CI's two cores (tests/conftest.py).
ASYNCIO_STORES = frozenset({"embedded"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the pairings of a ``backend`` and asyncio's loop that
    :data:`ASYNCIO_STORES` does not name (deselected: ``-n 0`` says how many)."""
    dropped = [item for item in items if _asyncio_pairing_left_out(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        left_out = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in left_out]


def _asyncio_pairing_left_out(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return (
        item.path.is_relative_to(Path(__file__).parent)
        and params.get("_asyncio_loop_factory") is asyncio.new_event_loop
        and params.get("backend", "embedded") not in ASYNCIO_STORES
    )


class FakePeer(Peer):
    """A connection that is a list: frames sent to it, decoded, in order."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
        self.frames: list[Envelope] = []
        self.closes: list[tuple[int, str]] = []
        self._next_id = 0

    def send_bytes(self, frame: bytes) -> None:
        if not self.closed:
            self.frames.append(decode(frame, limits=SERVER_FRAME_LIMITS))

    def close_later(self, code: int, reason: str) -> None:
        self.closed = True
        self.closes.append((code, reason))

    async def ask(self, t: str, **d: Any) -> Envelope:
        """Send request ``t`` and return its reply (the frame carrying its id)."""
        self._next_id += 1
        request_id = self._next_id
        sent = len(self.frames)  # its reply comes after (not a scan of every frame)
        await requests.handle(self.node, self, Envelope(t, id=request_id, d=d))
        replies = [f for f in self.frames[sent:] if f.id == request_id]
        assert len(replies) == 1, f"{t}: {len(replies)} replies"
        return replies[0]

    def events(self, *types: str) -> list[Envelope]:
        return [f for f in self.frames if f.v is not None and (not types or f.t in types)]

    async def until(self, predicate: Callable[[Envelope], bool], timeout: float = 10) -> Envelope:
        """The first frame (already here or still to come) that ``predicate`` accepts."""
        async with asyncio.timeout(timeout):
            while True:
                for frame in self.frames:
                    if predicate(frame):
                        return frame
                await asyncio.sleep(0.005)


def started_node(
    store: Store, clock: Callable[[], int] | None = None, announce_step_s: float = 0.0
) -> Node:
    """A started node on ``store``: countdowns of 0.1 s, the known test deal (its
    certification the first candidate's), ``clock`` its clock (None: its own), a deal
    announced as soon as it is found unless a test of that asks for a step
    (certify.ANNOUNCE_STEP_S)."""
    node = Node(
        store,
        room_secret=lambda: SOLVABLE_SECRET,
        candidates_in_flight=1,  # the known deal: candidate 0, won first in order
        countdown_ms=100,
        announce_step_s=announce_step_s,
        clock=clock,
    )
    node.start()
    return node


@dataclass
class Lobby:
    """Ann's Yukon lobby with Bob in it (:func:`lobby_of_two`)."""

    ann: FakePeer
    bob: FakePeer
    #: Ann's create reply: the room's code, her token, the snapshot with its settings.
    created: Envelope
    #: Bob's join reply: his racer and token.
    joined: Envelope

    @property
    def room(self) -> LiveRoom:
        """The room as Ann's node holds it."""
        assert self.ann.room is not None
        return self.ann.room


async def lobby_of_two(
    ann_node: Node, bob_node: Node | None = None, *, ready: bool = True, **settings: object
) -> Lobby:
    """Ann creates a Yukon room on ``ann_node`` (with ``settings``) and Bob joins it on
    ``bob_node`` (None: the same node). ``ready``: Bob says he is and the room's deal
    is chosen, so the host may start."""
    ann, bob = FakePeer(ann_node), FakePeer(bob_node or ann_node)
    created = await ann.ask("create", variant="yukon", name="Ann", **settings)
    assert created.t == "joined", created.d
    joined = await bob.ask("join", code=str(created.d["code"]), name="Bob")
    assert joined.t == "joined", joined.d
    if ready:
        assert (await bob.ask("ready", ready=True)).t == "ok"
        await ann.until(lambda f: f.t == "deal_chosen", timeout=30)
    return Lobby(ann, bob, created, joined)


async def started_race(
    ann_node: Node, bob_node: Node | None = None, **settings: object
) -> tuple[Lobby, Envelope]:
    """:func:`lobby_of_two`, started by its host: the lobby and the ``started`` event
    (its commitment), once both racers have it."""
    lobby = await lobby_of_two(ann_node, bob_node, **settings)
    assert (await lobby.ann.ask("start")).t == "ok"
    started = await lobby.ann.until(lambda f: f.t == "started")
    await lobby.bob.until(lambda f: f.t == "started")
    return lobby, started


@dataclass
class SoakRacer:
    """A racer of a soak (tests/rooms/test_fault_soak.py, test_crash_soak.py): its name
    and connection, the seat :func:`seated_and_started` gives it, and the moves it was
    told ``moved`` for; each soak's racer adds what its walk counts."""

    name: str
    peer: FakePeer
    token: str = ""
    racer: int = 0
    #: (seq, move) of every move answered ``moved``.
    acked: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True)
class StartedRoom:
    """A race :func:`seated_and_started` started: what saving its result needs."""

    room_id: str
    settings: dict[str, Any]
    commitment: str


async def seated_and_started(racers: Sequence[SoakRacer]) -> StartedRoom:
    """The first of ``racers`` creates a Yukon room for them all, the others join and
    say they are ready, and it starts the race once its deal is chosen: each racer has
    its token and racer id, and has seen ``started``."""
    host = racers[0]
    created = await host.peer.ask("create", variant="yukon", name=host.name, max_racers=len(racers))
    assert created.t == "joined", created.d
    code, room_id = str(created.d["code"]), str(created.d["room"])
    for seat in racers:
        reply = created if seat is host else await seat.peer.ask("join", code=code, name=seat.name)
        assert reply.t == "joined", reply.d
        seat.token, seat.racer = str(reply.d["token"]), int(reply.d["racer"])
        if seat is not host:
            assert (await seat.peer.ask("ready", ready=True)).t == "ok"
    await host.peer.until(lambda f: f.t == "deal_chosen", timeout=30)
    assert (await host.peer.ask("start")).t == "ok"
    started = await host.peer.until(lambda f: f.t == "started")
    for seat in racers[1:]:
        await seat.peer.until(lambda f: f.t == "started")
    settings = dict(created.d["snapshot"]["settings"])  # type: ignore[index]
    return StartedRoom(room_id, settings, str(started.d["commitment"]))


class Backend:
    def __init__(self, kind: str, data_dir: Path) -> None:
        self.kind = kind
        self.data_dir = data_dir
        self.prefix = new_prefix()
        self.nodes: list[Node] = []
        self._first: Store | None = None

    async def node(
        self, clock: Callable[[], int] | None = None, announce_step_s: float = 0.0
    ) -> Node:
        """A started node on this backend (its own store connections, one shared
        prefix or in-process server), countdowns of 0.1 s, the known test deal;
        ``clock`` lets a test run one node's clock ahead of another's (None: the
        node's own, which never steps); ``announce_step_s`` as :func:`started_node`."""
        if self.kind == "embedded":
            if self._first is None:
                self._first = await Store.start_embedded(self.data_dir, prefix=self.prefix)
                store = self._first
            else:
                store = await self._first.sibling()
        else:
            store = await connect_or_fail(self.kind, self.prefix)
        node = started_node(store, clock, announce_step_s)
        self.nodes.append(node)
        return node

    async def close(self) -> None:
        """Stop every node and close its store, then delete the prefix's keys: once no
        node can write again, and whatever failed before (a stop that raised skipped
        the delete, and left the test's rooms in Redis)."""
        failed: list[BaseException] = []
        for node in self.nodes:
            for step in (node.stop, node.store.close):
                try:
                    await step()
                except Exception as exc:
                    failed.append(exc)
        if self.kind in BACKEND_URLS:
            await delete_prefix(self.prefix, BACKEND_URLS[self.kind])
        if failed:
            raise failed[0]


@pytest.fixture(params=["redis", "cluster", "embedded"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    b = Backend(request.param, tmp_path / "engine")
    try:
        yield b
    finally:
        await b.close()


class EngineWork:
    """The engine work a spectator's boards cost, counted while installed: log
    entries applied to any :class:`RacerGame` and boards (views) built. How the tests
    show a watch replays nothing, without timing it."""

    def __init__(self) -> None:
        self.applied = 0
        self.views = 0

    def install(self, monkeypatch: pytest.MonkeyPatch, *, views: bool = True) -> None:
        real_apply, real_view = RacerGame.apply, RacerGame.board_view

        def counted_apply(game: RacerGame, entry: str, at_ms: int) -> None:
            self.applied += 1
            real_apply(game, entry, at_ms)

        def counted_view(game: RacerGame, shown: Any = None) -> dict[str, Any]:
            self.views += 1
            return real_view(game, shown)

        monkeypatch.setattr(RacerGame, "apply", counted_apply)
        if views:
            monkeypatch.setattr(RacerGame, "board_view", counted_view)

    def reset(self) -> None:
        self.applied = self.views = 0


def room_seen(node: Node, room_id: str, dead: bool = False) -> str:
    """What ``node`` holds of the room, in one part of a soak's failure message."""
    name = f"node {node.node_id}{' (dead)' if dead else ''}"
    room = node.rooms.get(room_id)
    if room is None:
        return f"{name}: no room"
    racers = {r: (m.status, m.online) for r, m in room.state.racers.items()}
    return (
        f"{name}: {room.state.phase} v{room.state.version} {racers} shared={room.shared}"
        f" served={room.served()} timer={room.timer is not None}"
    )


async def stored_seen(store: Store, room_id: str) -> str:
    """The room's stored version and last events, in one part of a soak's failure
    message."""
    stored = [unpack_event(e.data) for e in await store.events_since(room_id, 0)]
    return f"store: v{len(stored)}, last {[(e.t, dict(e.d)) for e in stored[-6:]]}"
