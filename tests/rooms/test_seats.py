"""One seat per client address in a public room (decisions.join, docs/fairness.md):
every racer gets the same deal, so a second seat is a scout. Through the room core
with fake peers on every store, across nodes."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest
from solrace.protocol.envelope import Envelope
from solrace.protocol.limits import SEAT_SETTLE_S
from solrace.race.events import EventType
from solrace.rooms import lobby
from solrace.rooms.records import unpack_event
from solrace.store import token_digest
from solrace.store.errors import StoreUnavailable
from solrace.store.store import COMMAND_TIMEOUT_S

from .conftest import Backend, FakePeer


def _from(peer: FakePeer, address: str | None) -> FakePeer:
    peer.address = address  # what the network layer sets from the client's address
    return peer


def _naming(frames: list[Envelope], text: str) -> list[Envelope]:
    return [f for f in frames if text in repr(f.d)]


async def test_a_public_room_refuses_a_second_seat_from_one_address(backend: Backend) -> None:
    node = await backend.node()
    ann, scout = _from(FakePeer(node), "203.0.113.1"), _from(FakePeer(node), "203.0.113.1")
    bob = _from(FakePeer(node), "203.0.113.2")
    created = await ann.ask("create", variant="yukon", name="Ann")
    code = str(created.d["code"])
    refused = await scout.ask("join", code=code, name="Scout")
    assert (refused.t, refused.d["code"]) == ("error", "same_address"), refused.d
    assert str(refused.d["message"]).startswith("a racer from your address already has a seat")
    assert scout.room is None
    assert (await bob.ask("join", code=code, name="Bob")).t == "joined"
    room = ann.room
    assert room is not None and sorted(r.name for r in room.state.racers.values()) == [
        "Ann",
        "Bob",
    ]
    stored = [unpack_event(e.data) for e in await node.store.events_since(room.room_id, 0)]
    origins = [ev.origin for ev in stored if ev.t == EventType.RACER_JOINED]
    # Kept with each seat: a digest keyed by the room's secret, never the address ...
    assert origins == [lobby.seat_origin(room, ann), lobby.seat_origin(room, bob)]
    assert len(set(origins)) == 2 and all(o and len(o) == 16 for o in origins)
    assert not any("203.0.113" in str(o) for o in origins)
    for peer in (ann, scout, bob):  # ... and never sent
        for text in (*origins, "203.0.113"):
            assert _naming(peer.frames, str(text)) == []


async def test_a_seats_digest_differs_from_room_to_room(backend: Backend) -> None:
    """The same address in two rooms leaves two unrelated digests: nothing links one
    person's seats across rooms, and no table of every address's hash looks it up
    (a seat audit reversed an unkeyed SHA-256 of an IPv4 address)."""
    node = await backend.node()
    node.room_secret = lambda: secrets.token_bytes(32)  # as a server draws them (tests pin one)
    first, second = _from(FakePeer(node), "203.0.113.1"), _from(FakePeer(node), "203.0.113.1")
    await first.ask("create", variant="yukon", name="Ann")
    await second.ask("create", variant="yukon", name="Ann")
    assert first.room is not None and second.room is not None
    one, two = lobby.seat_origin(first.room, first), lobby.seat_origin(second.room, second)
    assert one is not None and two is not None and one != two


async def test_a_private_room_seats_one_address_any_number_of_times(backend: Backend) -> None:
    node = await backend.node()
    ann, bob = _from(FakePeer(node), "203.0.113.1"), _from(FakePeer(node), "203.0.113.1")
    created = await ann.ask("create", variant="yukon", name="Ann", private=True)
    joined = await bob.ask("join", code=str(created.d["code"]), name="Bob")
    assert joined.t == "joined", joined.d


async def test_quick_passes_over_a_room_that_seats_the_address(backend: Backend) -> None:
    node = await backend.node()
    ann, scout = _from(FakePeer(node), "203.0.113.1"), _from(FakePeer(node), "203.0.113.1")
    cy = _from(FakePeer(node), "203.0.113.3")
    assert (await ann.ask("quick", variant="yukon", name="Ann")).t == "joined"
    # The room's certified deal is a decision the node makes on its own (deal_chosen):
    # made during the scout's quick, it was counted as one about the room passed over.
    await ann.until(lambda f: f.t == "deal_chosen", timeout=30)
    decided: list[str] = []
    real_decide = node.decide

    async def decide(room: Any, *args: Any, **kwargs: Any) -> Any:
        decided.append(room.room_id)
        return await real_decide(room, *args, **kwargs)

    node.decide = decide  # type: ignore[method-assign]
    assert (await scout.ask("quick", variant="yukon", name="Scout")).t == "joined"
    assert ann.room is not None and scout.room is not None
    assert scout.room is not ann.room  # a room of its own, not a refusal
    # ... without a decision about the room it passed over (each cost one: an audit)
    assert ann.room.room_id not in decided
    assert (await cy.ask("quick", variant="yukon", name="Cy")).t == "joined"
    assert cy.room is ann.room  # the oldest quick lobby, which seats no one of c3's


async def test_connections_counted_by_no_address_are_not_capped(backend: Backend) -> None:
    node = await backend.node()
    peers = [FakePeer(node) for _ in range(3)]  # origin None: a trusted peer's own
    created = await peers[0].ask("create", variant="yukon", name="P0")
    for n, peer in enumerate(peers[1:], start=1):
        assert (await peer.ask("join", code=str(created.d["code"]), name=f"P{n}")).t == "joined"


async def test_an_operator_may_lift_the_cap(backend: Backend) -> None:
    node = await backend.node()
    node.seats_per_address = 0  # solrace-server --seats-per-address 0
    ann, bob = _from(FakePeer(node), "203.0.113.1"), _from(FakePeer(node), "203.0.113.1")
    created = await ann.ask("create", variant="yukon", name="Ann")
    assert (await bob.ask("join", code=str(created.d["code"]), name="Bob")).t == "joined"


async def test_two_nodes_seating_one_address_at_once_seat_it_once(backend: Backend) -> None:
    """The rule is decided on the room's stored state like every join: two joins from
    one address on two nodes at the same moment cannot both be seated."""
    first, second = await backend.node(), await backend.node()
    ann = _from(FakePeer(first), "203.0.113.1")
    created = await ann.ask("create", variant="yukon", name="Ann")
    code = str(created.d["code"])
    for attempt in range(5):
        address = f"198.51.100.{attempt}"
        one, two = _from(FakePeer(first), address), _from(FakePeer(second), address)
        replies = await asyncio.gather(
            one.ask("join", code=code, name="One"), two.ask("join", code=code, name="Two")
        )
        assert sorted(r.t for r in replies) == ["error", "joined"], [r.d for r in replies]
        assert {r.d["code"] for r in replies if r.t == "error"} == {"same_address"}
        seated = one if one.room is not None else two
        assert (await seated.ask("leave")).t == "ok"  # the seat for the next attempt
    room = ann.room
    assert room is not None
    stored = [unpack_event(e.data) for e in await first.store.events_since(room.room_id, 0)]
    joined = [ev.origin for ev in stored if ev.t == EventType.RACER_JOINED]
    assert len(joined) == 6 and len(set(joined)) == 6  # Ann, then one seat per attempt


# ------------------------------------------------ seats taken with a proposed token
async def _seat_claims(backend: Backend) -> int:
    node = await backend.node()
    return len([k async for k in node.store._redis.scan_iter(match=f"{backend.prefix}seat:*")])


async def test_a_resume_by_token_while_its_join_is_written_waits_for_it(
    backend: Backend,
) -> None:
    """A review: the link dropped after the join's claim was written but before its
    seat was; the client's resume by the token alone came in between and was told
    ``bad_token`` ("never stored"), so it asked again — and the room held "Bob" and
    "Bob (2)" once the first join landed. A claim younger than SEAT_SETTLE_S
    without its seat is a seat still being written: ``unavailable``, resume again."""
    node = await backend.node()
    ann, bob, bob_again, bob_later = (FakePeer(node) for _ in range(4))
    created = await ann.ask("create", variant="klondike", name="Ann", max_racers=4)
    claim_seat, written, go_on = node.store.claim_seat, asyncio.Event(), asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        taken = await claim_seat(*args, **kwargs)
        written.set()
        await go_on.wait()
        return taken

    node.store.claim_seat = held  # type: ignore[method-assign]
    token = secrets.token_urlsafe(24)
    first = asyncio.ensure_future(
        bob.ask("join", code=str(created.d["code"]), name="Bob", token=token)
    )
    await asyncio.wait_for(written.wait(), 10)  # a regression fails, never hangs
    early = await bob_again.ask("resume", token=token)
    assert (early.t, early.d["code"]) == ("error", "unavailable"), early.d
    assert int(early.d["retry_after_ms"]) > 0  # type: ignore[call-overload]
    go_on.set()
    assert (await asyncio.wait_for(first, 10)).t == "joined"
    later = await bob_later.ask("resume", token=token)
    assert later.t == "joined" and later.d["racer"] == (await first).d["racer"]
    room = ann.room
    assert room is not None and sorted(r.name for r in room.state.racers.values()) == [
        "Ann",
        "Bob",
    ]


async def test_a_claim_left_without_its_seat_is_not_seated_once_settled(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim whose join was never stored (its node died before the write) is
    ``bad_token`` — ask again — once older than SEAT_SETTLE_S; in a private room
    too (a review: it said ``unknown_room``, "no longer exists", of a room that
    exists, to the one client that knows it, having asked to join it)."""
    node = await backend.node()
    ann, carl = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="klondike", name="Ann", private=True)
    room = ann.room
    assert room is not None
    token = secrets.token_urlsafe(24)
    at = node.clock() - SEAT_SETTLE_S * 1000
    await node.store.claim_seat(token_digest(token), room.room_id, at, lobby.SEAT_CLAIM_TTL_S)
    refused = await carl.ask("resume", token=token)
    assert (refused.t, refused.d["code"]) == ("error", "bad_token"), refused.d
    assert str(created.d["code"]) not in repr(refused.d)


async def test_a_refused_join_leaves_no_claim_behind(backend: Backend) -> None:
    """A review: 50 joins of a full room, each proposing a token, left 50 claim keys
    of 5 minutes each (20 a second a connection: some 6,000 live keys). A join the
    room refuses writes none, and a resume by its token says ``bad_token`` at once."""
    node = await backend.node()
    ann, bob, carl = FakePeer(node), FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="klondike", name="Ann", max_racers=2)
    code = str(created.d["code"])
    assert (await bob.ask("join", code=code, name="Bob")).t == "joined"
    tokens = [secrets.token_urlsafe(24) for _ in range(5)]
    for token in tokens:
        refused = await carl.ask("join", code=code, name="Carl", token=token)
        assert (refused.t, refused.d["code"]) == ("error", "room_full"), refused.d
    assert await _seat_claims(backend) == 0  # Bob proposed no token: none at all
    again = await carl.ask("resume", token=tokens[0])
    assert (again.t, again.d["code"]) == ("error", "bad_token"), again.d


async def test_of_two_joins_for_the_last_seat_the_refused_one_releases_its_claim(
    backend: Backend,
) -> None:
    """Both joins pass the check on the folded state (one seat free), both write a
    claim; the stored decision seats one and refuses the other ``room_full``, whose
    claim goes with it."""
    node = await backend.node()
    ann, bob, carl = FakePeer(node), FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="klondike", name="Ann", max_racers=2)
    code = str(created.d["code"])
    replies = await asyncio.gather(
        *(
            peer.ask("join", code=code, name=name, token=secrets.token_urlsafe(24))
            for peer, name in ((bob, "Bob"), (carl, "Carl"))
        )
    )
    assert sorted(r.t for r in replies) == ["error", "joined"], [r.d for r in replies]
    assert [r.d["code"] for r in replies if r.t == "error"] == ["room_full"]
    assert await _seat_claims(backend) == 1


@pytest.mark.parametrize("nodes", [1, 2])
async def test_two_joins_proposing_one_token_at_once_seat_it_once(
    backend: Backend, nodes: int
) -> None:
    """A review: ``token_in_use`` was checked (racer_for_token) before the seat was
    written, and the claim was a plain SET, so two ``join``s proposing one token at the
    same moment — on one node or on two — both passed the check and both were seated:
    two racers under one digest, and a resume by it took either seat. The claim is
    taken atomically now: one join holds it and is seated, the other is refused
    ``token_in_use`` with nothing stored, and leaves the claim to the seated one."""
    first = await backend.node()
    second = first if nodes == 1 else await backend.node()
    ann = FakePeer(first)
    created = await ann.ask("create", variant="klondike", name="Ann", max_racers=8)
    code = str(created.d["code"])
    room = ann.room
    assert room is not None
    for attempt in range(3):
        token = secrets.token_urlsafe(24)
        one, two = FakePeer(first), FakePeer(second)
        replies = await asyncio.gather(
            one.ask("join", code=code, name=f"One{attempt}", token=token),
            two.ask("join", code=code, name=f"Two{attempt}", token=token),
        )
        assert sorted(r.t for r in replies) == ["error", "joined"], [r.d for r in replies]
        assert [r.d["code"] for r in replies if r.t == "error"] == ["token_in_use"]
        seated, refused = (one, two) if one.room is not None else (two, one)
        assert seated.room is not None and seated.room.room_id == room.room_id
        assert refused.room is None
        joined = next(r for r in replies if r.t == "joined")
        # The seated one's claim stays: its resume by the token alone finds the seat.
        resumed = await FakePeer(second).ask("resume", token=token)
        assert resumed.t == "joined" and resumed.d["racer"] == joined.d["racer"], resumed.d
        digest = token_digest(token)
        assert await first.store.racer_for_token(room.room_id, digest) == str(joined.d["racer"])
        claim = await first.store.claimed_seat(digest)
        assert claim is not None and claim.room_id == room.room_id
    stored = [unpack_event(e.data) for e in await first.store.events_since(room.room_id, 0)]
    names = [ev.d["name"] for ev in stored if ev.t == EventType.RACER_JOINED]
    assert len(names) == 4, names  # Ann, then one seat a token


async def test_a_join_the_store_failed_before_deciding_leaves_its_token_free(
    backend: Backend,
) -> None:
    """The claim written, the store failed before the seat was decided: refused
    ``unavailable`` naming no seat (nothing stored), and its claim goes, so that a
    resume by the token says ``bad_token`` and the same request sent again — as the
    client does after such a refusal — is seated, not refused ``token_in_use`` by its
    own first attempt's claim."""
    node = await backend.node()
    ann, bob = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="klondike", name="Ann", max_racers=4)
    code = str(created.d["code"])
    decide = node.decide

    async def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("injected: Redis went away after the claim")

    node.decide = down  # type: ignore[method-assign]
    token = secrets.token_urlsafe(24)
    refused = await bob.ask("join", code=code, name="Bob", token=token)
    assert (refused.t, refused.d["code"]) == ("error", "unavailable"), refused.d
    assert "room" not in refused.d and "token" not in refused.d
    node.decide = decide  # type: ignore[method-assign]
    assert await node.store.claimed_seat(token_digest(token)) is None
    again = await bob.ask("join", code=code, name="Bob", token=token)
    assert again.t == "joined", again.d
    room = ann.room
    assert room is not None and sorted(r.name for r in room.state.racers.values()) == [
        "Ann",
        "Bob",
    ]


async def _rooms_stored(backend: Backend) -> dict[str, object]:
    """What the store holds of rooms, whichever node made them: their metas, their
    join codes, the listing and the quick lobbies."""
    node = await backend.node()
    raw, keys = node.store._redis, node.store.keys

    async def matching(pattern: str) -> list[str]:
        return sorted([k.decode() async for k in raw.scan_iter(match=pattern, count=1000)])

    return {
        "metas": await matching(keys.prefix + "\\{room:*\\}:meta"),
        "codes": await matching(keys.prefix + "code:*"),
        "listed": await node.store.listed_rooms(),
        "quick": await node.store.quick_lobbies("yukon"),
    }


@pytest.mark.parametrize("request_type", ["create", "quick"])
async def test_a_room_opened_with_a_claimed_token_is_refused_before_it_is_made(
    backend: Backend, request_type: str
) -> None:
    """A review: a ``create`` (or a ``quick`` that opens a room) proposing a token
    another request holds made its room first and was refused ``token_in_use`` by the
    join after: an empty room was left, listed (a quick one among the quick lobbies,
    where the next quick racer was seated in it), holding a join code for a day and
    loaded on the node. The claim is taken before the room is made now: refused, the
    request stores nothing, as protocol.md says of ``token_in_use``."""
    node = await backend.node()
    ann, bob = FakePeer(node), FakePeer(node)
    token = secrets.token_urlsafe(24)
    # Klondike: Bob's yukon quick finds no lobby to join, so it opens one.
    held = await ann.ask("create", variant="klondike", name="Ann", token=token)
    assert held.t == "joined", held.d
    before, loaded = await _rooms_stored(backend), set(node.rooms)
    refused = await bob.ask(request_type, variant="yukon", name="Bob", token=token)
    assert (refused.t, refused.d["code"]) == ("error", "token_in_use"), refused.d
    assert bob.room is None
    assert await _rooms_stored(backend) == before
    assert set(node.rooms) == loaded
    claim = await node.store.claimed_seat(token_digest(token))  # still Ann's
    assert claim is not None and claim.room_id == held.d["room"]


@pytest.mark.parametrize("request_type", ["create", "quick"])
async def test_a_resume_by_token_while_its_room_is_made_waits_for_it(
    backend: Backend, request_type: str
) -> None:
    """The claim of a room-opening request is written before its room: a resume by the
    token alone in between finds a claim naming a room not made yet, which is a room
    still being made — ``unavailable``, resume again — not ``bad_token`` (after which
    the client would ask again and open a second room)."""
    node = await backend.node()
    bob, bob_again, bob_later = (FakePeer(node) for _ in range(3))
    create_room, written, go_on = node.store.create_room, asyncio.Event(), asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        written.set()
        await go_on.wait()
        return await create_room(*args, **kwargs)

    node.store.create_room = held  # type: ignore[method-assign]
    token = secrets.token_urlsafe(24)
    first = asyncio.ensure_future(bob.ask(request_type, variant="yukon", name="Bob", token=token))
    await asyncio.wait_for(written.wait(), 10)  # a regression fails, never hangs
    early = await bob_again.ask("resume", token=token)
    assert (early.t, early.d["code"]) == ("error", "unavailable"), early.d
    assert int(early.d["retry_after_ms"]) > 0  # type: ignore[call-overload]
    go_on.set()
    opened = await asyncio.wait_for(first, 10)
    assert opened.t == "joined", opened.d
    later = await bob_later.ask("resume", token=token)
    assert later.t == "joined", later.d
    assert (later.d["room"], later.d["racer"]) == (opened.d["room"], opened.d["racer"])


def test_the_claims_times_are_the_documented_ones() -> None:
    """How long a claim names its room and how long a seatless one may still be
    written, as protocol.md and server.md say them (a review: nothing held the doc's
    "5 minutes" to the constant)."""
    docs = Path(__file__).parents[2] / "docs"
    for name in ("protocol.md", "server.md"):
        text = " ".join((docs / name).read_text().split())
        assert f"{lobby.SEAT_CLAIM_TTL_S // 60} minutes" in text, name
        assert f"{SEAT_SETTLE_S} s" in text, name
    assert lobby.SEAT_CLAIM_TTL_S % 60 == 0


def test_the_settle_window_covers_every_store_call_a_seat_waits_on_after_its_claim() -> None:
    """A create writes after its token's claim a code and a room (two calls), then the
    seat's node set, the events since and the seat's event (three): each may take the
    store's whole command timeout before it fails. A window shorter than all five (it
    was 15 s, sized for a join's three) told a seat still being written ``bad_token``,
    and the client, asking again, opened a second room beside it (a review)."""
    calls_after_claim = 5
    assert calls_after_claim * COMMAND_TIMEOUT_S <= SEAT_SETTLE_S


async def test_a_resume_during_a_create_on_its_node_loads_the_room_once(backend: Backend) -> None:
    """A resume by the creator's token alone that reaches the node once the room is
    written, before the create goes on, loads the room (its claim names it); the create
    then put its own LiveRoom in its place: two live copies of one room on a node, one
    of them folding events nobody reads any more (a review)."""
    node = await backend.node()
    bob, bob_again = FakePeer(node), FakePeer(node)
    create_room = node.store.create_room
    written, go_on = asyncio.Event(), asyncio.Event()
    ids: list[str] = []

    async def held(room_id: str, *args: Any, **kwargs: Any) -> Any:
        await create_room(room_id, *args, **kwargs)  # the store has the room ...
        ids.append(room_id)
        written.set()
        await go_on.wait()  # ... and the create has not gone on yet

    node.store.create_room = held  # type: ignore[method-assign]
    token = secrets.token_urlsafe(24)
    first = asyncio.ensure_future(bob.ask("create", variant="yukon", name="Bob", token=token))
    try:
        await asyncio.wait_for(written.wait(), 5)
        early = await asyncio.wait_for(bob_again.ask("resume", token=token), 10)
        assert early.d.get("code") == "unavailable", early.d  # no seat yet: try again
        loaded = node.rooms.get(ids[0])
    finally:
        go_on.set()
    opened = await asyncio.wait_for(first, 10)
    assert opened.t == "joined", opened.d
    assert loaded is not None and node.rooms[ids[0]] is loaded, "two LiveRooms for one room"
