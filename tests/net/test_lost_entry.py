"""An entry whose reply is lost in transit: the server stored the seat, the link dropped
before ``joined`` reached the client (docs/protocol.md §5, "A seat whose outcome is
unknown"). The client proposed the seat's token with its ``create``/``join``/``quick``,
so it holds the token without the reply: it resumes by that token on a new connection
and gets the same seat — no second seat, no ghost held for the 30 s grace, no
``same_address`` refusal in a public room."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from solrace.net.admission import Admission, parse_networks
from solrace.protocol import (
    SUBPROTOCOL,
    BadMessage,
    Envelope,
    ErrorCode,
    decode,
    encode,
    error_reply,
)
from solrace.protocol.limits import MAX_TOKEN_LEN, MIN_PROPOSED_TOKEN_LEN, SEAT_SETTLE_S
from solrace.protocol.messages import CreateRoom, JoinRoom, QuickRace, Resume, Watch
from solrace.store.errors import StoreUnavailable
from solrace_client import RaceClient
from solrace_client.connection import REQUEST_TIMEOUT_S, ServerError
from solrace_client.session import Backoff, Session
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from tests.support.flaky_link import Direction, FlakyLink
from tests.support.race import close_all, racing
from tests.support.redis import new_prefix

from .conftest import Cluster

#: The first connection is cut this many bytes into what the server sends: past the
#: WebSocket handshake's answer, in the middle of the ``joined`` reply (its snapshot is
#: longer than this), so the seat is stored and its reply lost.
CUT_AT = 400


def _entry(action: str, code: str | None) -> Any:
    async def enter(client: RaceClient) -> dict[str, Any]:
        if action == "create":
            return await client.create("yukon", "Bob")
        if action == "join":
            assert code is not None
            return await client.join(code, "Bob")
        return await client.quick("yukon", "Bob")

    return enter


@pytest.mark.parametrize("action", ["create", "join", "quick"])
async def test_an_entry_whose_reply_is_lost_gets_the_same_seat(
    cluster: Cluster, action: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, ``Session.enter`` raised ConnectionError: the seat stayed a ghost for the
    30 s grace (the racer's address refused ``same_address`` by a public room
    meanwhile), and asking again took a second seat."""
    caplog.set_level(logging.INFO)
    server = await cluster.node()
    host: RaceClient | None = None
    code: str | None = None
    if action != "create":  # a public room waiting for a second racer
        host = await RaceClient.connect(server.url)
        entered = await (host.quick if action == "quick" else host.create)("yukon", "Ann")
        code = entered["snapshot"]["code"]
    async with FlakyLink(int(server.url.rsplit(":", 1)[1]), seed=7) as link:
        link.cut_within, link.cut_directions = (CUT_AT, CUT_AT), (Direction.DOWN,)

        def only_the_first_is_cut(_: RaceClient) -> None:
            link.cut_within = None  # armed when the first was accepted; none after it

        session = Session(link.url, connected=only_the_first_is_cut)
        reply = await session.enter(_entry(action, code))
        assert link.stats.cuts == 1 and link.stats.connections == 2, link.stats
        room = server.node.rooms[reply["room"]]
        # One seat of Bob's, the one the reply names: the lost reply's seat, resumed.
        bobs = [r for r, info in room.state.racers.items() if info.name == "Bob"]
        assert bobs == [reply["racer"]], room.state.racers
        assert room.state.racers[reply["racer"]].online
        # Stored before the cut, then resumed: not asked again.
        said = [r.getMessage() for r in caplog.records if r.name == "solrace.lobby"]
        assert (said.count("racer joined"), said.count("racer resumed")) == (
            (1, 1) if host is None else (2, 1)
        ), said
        token = session.token
        assert token is not None and token == reply["token"]
        assert token not in caplog.text  # nor in any log line
        if host is not None:
            assert reply["room"] == host.room  # the quick found the host's lobby
            joined = await host.next_event("racer_joined")
            assert joined.d["racer"] == reply["racer"]
            assert token not in repr(host.received)  # nor in another racer's frames
            await host.close()
        # The token is the one the session holds, and it resumes the seat again.
        again = await RaceClient.connect(server.url)
        assert (await again.resume(reply["room"], session.token, since=None))["racer"] == (
            reply["racer"]
        )
        await again.close()
        await session.close()


async def test_a_resume_by_a_token_never_stored_is_refused_bad_token(cluster: Cluster) -> None:
    """What a client that lost its entry's reply reads when the server never stored the
    seat: ``bad_token``, so asking again is safe."""
    server = await cluster.node()
    client = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as refused:
        await client.resume(None, "x" * 32, since=None)
    assert refused.value.code == ErrorCode.BAD_TOKEN
    await client.close()


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("A" * (MIN_PROPOSED_TOKEN_LEN - 1), "too short to be random"),
        ("A" * (MAX_TOKEN_LEN + 1), "too long"),
        ("0123456789abcdefghijkl+/", "not url-safe"),
        ("ab01" * 8, "too few different characters to be random"),
        (12345678901234567890, "not a string"),
    ],
)
async def test_a_bad_proposed_token_is_refused_in_one_line(
    cluster: Cluster, token: object, why: str
) -> None:
    server = await cluster.node()
    host = await RaceClient.connect(server.url)
    code = (await host.create("yukon", "Ann"))["snapshot"]["code"]
    client = await RaceClient.connect(server.url)
    for t, d in (
        ("create", {"variant": "yukon", "name": "Bob"}),
        ("join", {"code": code, "name": "Bob"}),
        ("quick", {"variant": "yukon", "name": "Bob"}),
    ):
        with pytest.raises(ServerError) as refused:
            await client.request(t, token=token, **d)
        err = refused.value
        assert (err.code, err.data.get("field")) == (ErrorCode.BAD_MESSAGE, "token"), why
        assert err.message.startswith(f"{t}.token: must be") and "\n" not in err.message
        assert str(token) not in err.message
    assert client.room is None and len(server.node.rooms) == 1  # nothing was stored
    for c in (client, host):
        await c.close()


async def test_a_token_already_seated_in_the_room_is_refused(cluster: Cluster) -> None:
    """A ``join`` that proposes the token of a seat the room already has (its client
    asked again instead of resuming): two racers under one token would make a resume
    by it take either seat."""
    server = await cluster.node()
    host = await RaceClient.connect(server.url)
    token = secrets.token_urlsafe(24)
    entered = await host.request("create", variant="yukon", name="Ann", token=token)
    assert entered["token"] == token
    bob = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as refused:
        await bob.request("join", code=entered["snapshot"]["code"], name="Bob", token=token)
    assert refused.value.code == ErrorCode.TOKEN_IN_USE
    assert len(server.node.rooms[entered["room"]].state.racers) == 1
    for c in (host, bob):
        await c.close()


async def test_a_server_of_an_earlier_release_is_asked_without_a_token(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that knows no proposed token refuses the field (``bad_message`` naming
    it, nothing stored): the client asks again without, and gets the server's own."""
    for request in (CreateRoom, JoinRoom, QuickRace):
        monkeypatch.setattr(request, "FIELDS", request.FIELDS - {"token"})
    server = await cluster.node()
    ann, bob = [await RaceClient.connect(server.url) for _ in range(2)]
    entered = await ann.create("yukon", "Ann")
    joined = await bob.join(entered["snapshot"]["code"], "Bob")
    assert (ann.token, bob.token) == (entered["token"], joined["token"])
    assert ann.proposed is None and bob.proposed is None
    refused = [e for c in (ann, bob) for e in c.received if e.t == "error"]
    assert [e.d["field"] for e in refused] == ["token", "token"]
    assert len(server.node.rooms[entered["room"]].state.racers) == 2
    for c in (ann, bob):
        await c.close()


async def test_a_server_of_an_earlier_release_is_asked_without_the_proof_of_a_reveal(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that knows no ``revealed`` refuses the field (``bad_message`` naming it):
    the client's resume and watch go again without it, as before the field."""
    for request in (Resume, Watch):
        monkeypatch.setattr(request, "FIELDS", request.FIELDS - {"revealed"})
    server = await cluster.node()
    ann, bob = await racing(server.url, server.url)
    eve = await RaceClient.connect(server.url)
    await eve.watch(code=ann.code)
    await ann.resign()
    await bob.resign()
    for client in (ann, eve):
        await client.next_event("race_over", timeout=10)
    assert ann.view.revealed is not None and eve.view.revealed is not None
    await ann.resume()
    again = await RaceClient.connect(server.url, view=eve.view)
    await again.watch(code=eve.code)
    for client in (ann, again):
        refused = [e.d["field"] for e in client.received if e.t == "error"]
        assert refused == ["revealed"], refused
        assert [e.t for e in client.received if e.t in ("joined", "watching")][-1:]
    await close_all(ann, bob, eve, again)


@contextlib.asynccontextmanager
async def _earlier_release_node(
    asked: list[Envelope], answered: Callable[[], None]
) -> AsyncIterator[str]:
    """A node of the release before proposed tokens (effe554), as far as a resume by a
    token alone goes: its ``resume`` requires ``room``, and it answers what that node
    answered on the audit's real process (docs/deploy.md, "Upgrading"). Every request is
    kept in ``asked``; ``answered`` is called before each reply."""

    async def handler(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in ws:
                request = decode(frame)
                asked.append(request)
                answered()
                missing = BadMessage(
                    ErrorCode.BAD_MESSAGE, "resume.room: missing required field", field="room"
                )
                await ws.send(encode(error_reply(missing, request.id)))

    async with serve(
        handler, "127.0.0.1", 0, subprotocols=[Subprotocol(SUBPROTOCOL)], compression=None
    ) as node:
        yield f"ws://127.0.0.1:{next(iter(node.sockets)).getsockname()[1]}"


async def test_an_entry_lost_whose_resume_meets_an_earlier_release_gets_its_seat_on_the_next(
    cluster: Cluster,
) -> None:
    """A rolling upgrade (docs/deploy.md, "Upgrading"): Bob's ``create`` on a node of
    this release is stored, its reply lost; the session's first try to take the seat
    back finds that node unreachable, the next reaches a node of the earlier release,
    which cannot resume by a token alone (``bad_message`` naming ``room``, nothing
    stored). The session goes on to the next node and takes the same seat there: one
    seat of Bob's, not a second room, not an error. (A guard: found to hold on real
    processes of both releases, and here without the earlier release's code.)"""
    server = await cluster.node()
    asked: list[Envelope] = []
    async with FlakyLink(int(server.url.rsplit(":", 1)[1]), seed=17) as link:
        link.cut_within, link.cut_directions = (CUT_AT, CUT_AT), (Direction.DOWN,)

        def let_the_link_in() -> None:
            link.refusing = False  # the next try reaches this release's node again

        async with _earlier_release_node(asked, let_the_link_in) as old_url:

            async def create(client: RaceClient) -> dict[str, Any]:
                # The first connection is the link's: cut in its reply. The next one
                # through the link is refused, so the session tries the earlier release.
                link.cut_within, link.refusing = None, True
                return await client.create("yukon", "Bob")

            session = Session([link.url, old_url])
            reply = await session.enter(create)
        assert (link.stats.cuts, link.stats.refused, link.stats.connections) == (1, 1, 2)
        assert [(e.t, "room" in e.d, e.d["token"] == session.token) for e in asked] == [
            ("resume", False, True)
        ]
        room = server.node.rooms[reply["room"]]
        bobs = [r for r, info in room.state.racers.items() if info.name == "Bob"]
        assert bobs == [reply["racer"]]
        assert room.state.racers[reply["racer"]].online  # on the link's second connection
        assert len(server.node.rooms) == 1
        await session.close()


async def test_an_entry_answered_after_the_clients_timeout_gets_the_same_seat(
    cluster: Cluster,
) -> None:
    """A busy node, not a dead link: the store write of Bob's seat (its ``racer_joined``
    with the token) is held past the client's request timeout, so ``joined`` comes
    after the client gave up on it (NoReply) on a connection still up. ``Session.enter``
    raised NoReply at once and forgot the proposed token: the seat was stored anyway,
    a ghost held for the 30 s grace, and the user's next ``join`` of this public room
    from the same address was refused ``same_address`` (or, uncapped, seated "Bob (2)").
    It now resumes by that token on a new connection — which waits for the write, the
    room's lock held by it — and the user is in the seat."""
    server = await cluster.node(admission=Admission(100, trusted=parse_networks("none")))
    # The host from another loopback address: the one seat of 127.0.0.1 is Bob's.
    host = await RaceClient.connect(server.url, local_addr=("127.0.0.2", 0))
    code = (await host.create("yukon", "Ann"))["snapshot"]["code"]
    store = server.node.store
    append_event, claimed_seat = store.append_event, store.claimed_seat
    go_on, resumed = asyncio.Event(), asyncio.Event()

    async def slow(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("token") is not None:  # the seat's write: held, as a busy store
            await go_on.wait()
        return await append_event(*args, **kwargs)

    async def looked_up(*args: Any, **kwargs: Any) -> Any:
        resumed.set()  # a resume by the token alone reached the node
        return await claimed_seat(*args, **kwargs)

    store.append_event = slow  # type: ignore[method-assign]
    store.claimed_seat = looked_up  # type: ignore[method-assign]
    clients: list[RaceClient] = []
    session = Session(server.url, connected=clients.append)
    entering = asyncio.ensure_future(session.enter(lambda c: c.join(code, "Bob")))
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S + 10):
            await resumed.wait()
    finally:
        go_on.set()  # the write lands (a failing test must not leave it held for ever)
    reply = await asyncio.wait_for(entering, 30)
    room = server.node.rooms[reply["room"]]
    assert sorted(r.name for r in room.state.racers.values()) == ["Ann", "Bob"]
    bob = room.state.racers[reply["racer"]]
    assert bob.name == "Bob" and session.token == reply["token"]
    async with asyncio.timeout(5):  # held by this session's connection, online
        while not room.state.racers[reply["racer"]].online:
            await asyncio.sleep(0.05)
    assert session.live is clients[-1] and len(clients) == 2
    # The user is in; no second attempt is needed, and one would be refused as a second
    # seat of this address, not seated as "Bob (2)".
    store.append_event = append_event  # type: ignore[method-assign]
    again = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as refused:
        await again.join(code, "Bob")
    assert refused.value.code == ErrorCode.SAME_ADDRESS
    assert sorted(r.name for r in room.state.racers.values()) == ["Ann", "Bob"]
    for c in (again, host):
        await c.close()
    await session.close()


@pytest.mark.parametrize(
    "backoff",
    [Backoff(), Backoff(first_s=0.1, max_s=5.0, jitter=0.5)],
    ids=["session", "bot"],
)
async def test_a_create_lost_between_its_claim_and_its_room_is_asked_again_once_settled(
    tmp_path: Path, backoff: Backoff
) -> None:
    """A create claims its token for the new room's id, then writes the room: its node
    dying between the two (here: the room's write held for ever, the link cut) leaves a
    claim naming no room, which a resume by the token is told ``unavailable`` — the
    room may still come — for SEAT_SETTLE_S, then ``bad_token``: ask again. The
    session gave up after six refusals a second apart (6.3-7.1 s with the bot's
    backoff: ConnectionLost, 'connection lost during create'), inside that window, so
    the user never got the room asking again would have given. It now resumes for the
    whole window, then asks again: one room, the second create's (the default
    settings: the real window, 25 s). On one store: the client's doing, not the store's."""
    cluster = Cluster("redis", new_prefix(), tmp_path / "engine")
    server = await cluster.node()
    store = server.node.store
    create_room = store.create_room
    held, release = asyncio.Event(), asyncio.Event()
    creates: list[str] = []

    async def dies_after_the_claim(*args: Any, **kwargs: Any) -> Any:
        creates.append(args[0])
        if len(creates) == 1:  # the first create's node never gets past the claim
            held.set()
            await release.wait()
            raise StoreUnavailable("the node died")  # only once the test is over
        return await create_room(*args, **kwargs)

    store.create_room = dies_after_the_claim  # type: ignore[method-assign]
    try:
        async with FlakyLink(int(server.url.rsplit(":", 1)[1]), seed=5) as link:
            session = Session(link.url, backoff=backoff)
            entering = asyncio.ensure_future(
                session.enter(lambda c: c.create("yukon", "Ann", private=True))
            )
            await asyncio.wait_for(held.wait(), 10)
            lost_at = asyncio.get_running_loop().time()
            link.cut_all()
            reply = await asyncio.wait_for(entering, SEAT_SETTLE_S + 20)
            waited = asyncio.get_running_loop().time() - lost_at
            # Asked again once the claim had settled as never stored, not before.
            assert waited >= SEAT_SETTLE_S - 1, waited
            assert len(creates) == 2 and reply["room"] == creates[1], (creates, reply)
            assert reply["snapshot"]["phase"] == "lobby" and session.token == reply["token"]
            room = server.node.rooms[reply["room"]]
            assert [r.name for r in room.state.racers.values()] == ["Ann"]
            await session.close()
    finally:
        release.set()
        await cluster.close()
