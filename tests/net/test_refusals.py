"""Every refusal path: each gets its error code (or close code) and changes nothing."""

from __future__ import annotations

import asyncio
import struct

import msgpack
import pytest
from solrace.protocol import SUBPROTOCOL, Envelope, encode
from solrace.protocol.limits import SPECTATORS_PER_ROOM
from solrace_client import RaceClient, ServerError
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.support.race import racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster


async def test_illegal_move_is_refused_with_the_engines_reason_and_changes_nothing(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    board_before = ann.board
    assert board_before is not None
    with pytest.raises(ServerError) as refused:
        await ann.move("1:1>2")
    assert refused.value.code == "illegal_move"
    assert "cannot go on" in refused.value.message
    assert refused.value.data["seq"] == 0
    # Same seq still works: nothing was applied.
    first = winning_moves(SOLVABLE_SECRET)[0]
    moved = await ann.move(first)
    assert moved["seq"] == 0 and moved["board"] != board_before
    with pytest.raises(ServerError) as bad:
        await ann.move("11:1>2")
    assert bad.value.code in ("bad_notation", "bad_message")
    for client in (ann, bob):
        await client.close()


async def test_stale_and_duplicate_seq_are_refused_and_never_applied_twice(
    cluster: Cluster,
) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await ann.move(moves[0])
    # Replay seq 0 (a duplicate) and send seq 5 (from the future).
    for seq in (0, 5):
        with pytest.raises(ServerError) as refused:
            await ann.request("move", seq=seq, move=moves[1])
        assert refused.value.code == "bad_seq"
        assert refused.value.data["expected"] == 1
    moved = await ann.move(moves[1])
    assert moved["seq"] == 1 and moved["moves"] == 2
    for client in (ann, bob):
        await client.close()


async def test_spectators_cannot_act_and_idle_connections_are_not_racers(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    watcher = await RaceClient.connect(server.url)
    await watcher.watch(code=ann.code)
    with pytest.raises(ServerError) as refused:
        await watcher.request("move", seq=0, move="D")
    assert refused.value.code == "spectator_cannot_act"
    idle = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as not_racer:
        await idle.request("ready", ready=True)
    assert not_racer.value.code == "not_racer"
    for client in (ann, bob, watcher, idle):
        await client.close()


async def test_a_room_takes_as_many_spectators_as_a_node_lets_watch_it(cluster: Cluster) -> None:
    """Every spectator costs the node each of the room's frames: unbounded, one popular
    room's watchers slowed its racers (an audit: 8 racers at 10 moves/s, ack p99 7 ms
    with no spectator, 125 ms with 1,000). Past the node's cap a ``watch`` is refused
    ``too_many_spectators``, and one who leaves makes room for the next."""
    server = await cluster.node()
    assert server.node.spectators_per_room == SPECTATORS_PER_ROOM == 500  # a user's default
    server.node.spectators_per_room = 2  # solrace-server --spectators-per-room 2
    ann, bob = await racing(server.url)
    watchers = [await RaceClient.connect(server.url) for _ in range(3)]
    for watcher in watchers[:2]:
        await watcher.watch(code=ann.code)
    with pytest.raises(ServerError) as refused:
        await watchers[2].watch(code=ann.code)
    assert refused.value.code == "too_many_spectators"
    await ann.move(winning_moves(SOLVABLE_SECRET)[0])  # the racers race on
    await watchers[0].leave()
    await watchers[2].watch(code=ann.code)
    for client in (ann, bob, *watchers):
        await client.close()


async def test_wrong_token_and_unknown_room(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob = await racing(server.url)
    thief = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as bad_token:
        await thief.resume(room=ann.room, token="x" * 32, since=0)
    assert bad_token.value.code == "bad_token"
    with pytest.raises(ServerError) as unknown:
        await thief.resume(room="r_nosuchroom", token="x" * 32, since=0)
    assert unknown.value.code == "unknown_room"
    with pytest.raises(ServerError) as no_code:
        await thief.join("ZZZZZZ", "Eve")
    assert no_code.value.code == "unknown_room"
    with pytest.raises(ServerError) as started:
        await thief.join(ann.code or "", "Eve")
    assert started.value.code == "wrong_phase"
    for client in (ann, bob, thief):
        await client.close()


async def test_lobby_refusals(cluster: Cluster) -> None:
    server = await cluster.node()
    ann = await RaceClient.connect(server.url)
    bob = await RaceClient.connect(server.url)
    cy = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", max_racers=2)
    with pytest.raises(ServerError) as alone:
        await ann.start()
    assert alone.value.code == "not_ready"
    await bob.join(ann.code or "", "Bob")
    with pytest.raises(ServerError) as full:
        await cy.join(ann.code or "", "Cy")
    assert full.value.code == "room_full"
    with pytest.raises(ServerError) as not_host:
        await bob.start()
    assert not_host.value.code == "not_host"
    with pytest.raises(ServerError) as unready:
        await ann.start()
    assert unready.value.code == "not_ready"
    with pytest.raises(ServerError) as early:
        await bob.request("move", seq=0, move="D")
    assert early.value.code == "wrong_phase"
    with pytest.raises(ServerError) as options:
        await cy.create("yukon", "Cy", options={"draw": 3})
    assert options.value.code == "bad_options"
    with pytest.raises(ServerError) as twice:
        await ann.create("yukon", "Ann")
    assert twice.value.code == "already_in_room"
    for client in (ann, bob, cy):
        await client.close()


async def test_malformed_frames_close_the_connection(cluster: Cluster) -> None:
    server = await cluster.node()
    cases = [
        ("text frame", "hello", 1003),
        ("not msgpack", b"\xc1\xc1\xc1", 1007),
        ("not an envelope", msgpack.packb([1, 2, 3]), 1007),
        ("oversized", b"\x00" * 20_000, 1009),
    ]
    for _, frame, code in cases:
        client = await RaceClient.connect(server.url)
        await client.send_raw(frame)
        await asyncio.wait_for(client.closed, 5)
        assert client.close_code == code
    # A readable message with a bad field gets an error reply, not a close.
    client = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as bad:
        await client.request("create", variant="yukon", name="Ann", max_racers=99)
    assert bad.value.code == "bad_message" and bad.value.data["field"] == "max_racers"
    with pytest.raises(ServerError) as unknown:
        await client.request("teleport")
    assert unknown.value.code == "unknown_type"
    assert client.close_code is None
    await client.close()


async def test_a_flood_is_closed_with_1008_without_harming_the_room(cluster: Cluster) -> None:
    server = await cluster.node(rate=20.0)
    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann")
    flooder = await RaceClient.connect(server.url)
    for _ in range(200):
        try:
            await flooder.send_raw(encode(Envelope("ping", id=1)))
        except Exception:
            break
    await asyncio.wait_for(flooder.closed, 5)
    assert flooder.close_code == 1008
    assert (await ann.ping()) > 0  # the room and other connections carry on
    await ann.close()


async def test_an_unknown_protocol_version_is_refused_at_the_handshake(cluster: Cluster) -> None:
    server = await cluster.node()
    with pytest.raises(InvalidStatus) as refused:
        await connect(server.url, subprotocols=["solrace.v0"])  # type: ignore[list-item]
    assert refused.value.response.status_code == 400
    assert b"solrace.v1" in refused.value.response.body
    with pytest.raises(InvalidStatus):
        await connect(server.url)
    for header in ("", " , ", "solrace.v1;q=1"):  # empty or unreadable: said as the rest
        with pytest.raises(InvalidStatus) as unreadable:
            await connect(server.url, additional_headers={"Sec-WebSocket-Protocol": header})
        assert unreadable.value.response.status_code == 400
        assert b"unsupported_version" in unreadable.value.response.body, header
        assert b"solrace.v1" in unreadable.value.response.body
    async with connect(server.url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == SUBPROTOCOL


def _ws_frame(
    opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0, mask: bool = True
) -> bytes:
    """One WebSocket frame as a client would put it on the wire, built by hand so that
    it can break RFC 6455 where websockets' own client never would."""
    head = bytes([(0x80 if fin else 0) | rsv << 4 | opcode])
    size = len(payload)
    bit = 0x80 if mask else 0
    if size < 126:
        head += bytes([bit | size])
    elif size < 1 << 16:
        head += bytes([bit | 126]) + struct.pack("!H", size)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", size)
    if not mask:
        return head + payload
    key = b"\x01\x02\x03\x04"
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


_PING = encode(Envelope("ping", id=1))


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)  # no store involved
@pytest.mark.parametrize(
    ("raw", "close", "reason"),
    [
        pytest.param(_ws_frame(0x1, b"ping"), 1003, "bad_frame", id="text"),
        pytest.param(_ws_frame(0x1, b"\xff\xfe"), 1007, "bad_frame", id="text-not-utf8"),
        pytest.param(_ws_frame(0x2, b"\xc1" * 16_385), 1009, "too_large", id="over-max-size"),
        pytest.param(
            _ws_frame(0x2, b"\x00" * 9_000, fin=False) + _ws_frame(0x0, b"\x00" * 9_000),
            1009,
            "too_large",
            id="fragments-over-max-size",
        ),
        pytest.param(
            bytes([0x82, 0xFF]) + struct.pack("!Q", 2**63 - 1), 1009, "too_large", id="huge-length"
        ),
        pytest.param(_ws_frame(0x0, _PING), 1002, "bad_frame", id="stray-continuation"),
        pytest.param(_ws_frame(0x2, _PING, rsv=1), 1002, "bad_frame", id="reserved-bits"),
        pytest.param(_ws_frame(0x2, _PING, mask=False), 1002, "bad_frame", id="unmasked"),
        pytest.param(_ws_frame(0x3, _PING), 1002, "bad_frame", id="unknown-opcode"),
        pytest.param(_ws_frame(0x9, b"x" * 126), 1002, "bad_frame", id="long-ping"),
        pytest.param(_ws_frame(0x8, struct.pack("!H", 999)), 1002, "bad_frame", id="close-999"),
    ],
)
async def test_websocket_level_faults_close_with_a_documented_code_and_bare_reason(
    cluster: Cluster, raw: bytes, close: int, reason: str
) -> None:
    """websockets refuses these before solrace reads a frame; the close still says the
    protocol's bare code (docs/protocol.md §13), not websockets' English sentence
    ("frame with 16385 bytes exceeds limit of 16384 bytes", "reserved bits must be 0"),
    and a ping split in fragments still works."""
    server = await cluster.node()
    client = await RaceClient.connect(server.url)
    assert client.ws.transport is not None
    client.ws.transport.write(raw)
    await asyncio.wait_for(client.closed, 5)
    assert (client.close_code, client.ws.close_reason) == (close, reason)
    assert not client.received
    counted = f'solrace_protocol_closes_total{{code="{close}"}} 1.0'
    async with asyncio.timeout(5):  # counted as the server's side of it ends
        while counted not in server.metrics.render().decode():
            await asyncio.sleep(0.01)
    fragmented = await RaceClient.connect(server.url)
    assert fragmented.ws.transport is not None
    fragmented.ws.transport.write(_ws_frame(0x2, _PING[:2], fin=False) + _ws_frame(0x0, _PING[2:]))
    async with asyncio.timeout(5):
        while not fragmented.received:
            await asyncio.sleep(0.01)
    assert fragmented.received[0].t == "pong" and fragmented.close_code is None
    await fragmented.close()


async def test_resume_on_a_connection_in_another_room_is_already_in_room(cluster: Cluster) -> None:
    """resume needs an idle connection unless it is this connection's own racer
    (docs/protocol.md §4): a racer or spectator resuming a stale token of another
    room hears already_in_room, not bad_token, and stays where it was."""
    server = await cluster.node()
    ann, bob = await racing(server.url)
    host = await RaceClient.connect(server.url)
    await host.create("yukon", "Hal")
    gone = await RaceClient.connect(server.url)
    await gone.join(host.code or "", "Gus")
    await gone.leave()  # Gus's token is stale from now on
    watcher = await RaceClient.connect(server.url)
    await watcher.watch(code=ann.code)
    for client in (ann, watcher):
        with pytest.raises(ServerError) as refused:
            await client.resume(room=gone.room, token=gone.token, since=None)
        assert refused.value.code == "already_in_room"
    assert (await ann.move(winning_moves(SOLVABLE_SECRET)[0]))["seq"] == 0
    for client in (ann, bob, host, gone, watcher):
        await client.close()
