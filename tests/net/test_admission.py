"""Connection limits (solrace.net.admission): a node takes at most so many connections,
and so many from one address; past them a client gets an HTTP answer saying why, the
node keeps answering its probes and the racers it holds, and never runs out of file
descriptors. The decision alone first, then real sockets, then ``solrace-server`` as
a user runs it, with its default limits, under a flood from one client."""

from __future__ import annotations

import asyncio
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Sequence

import pytest
from solrace.net import server as server_module
from solrace.net.admission import (
    CODE_MISS_BURST,
    CONNECTING_TOO_FAST_ANSWERED,
    CONNECTION_BURST,
    DEFAULT_CODE_MISSES_PER_MINUTE,
    DEFAULT_CONNECTIONS_PER_S,
    DEFAULT_MAX_PER_ADDRESS,
    DEFAULT_ROOMS_PER_MINUTE,
    FD_RESERVE,
    MAX_CONNECTIONS_CEILING,
    REFUSAL_WAIT_S,
    REFUSALS_PER_ADDRESS,
    Admission,
    Refusal,
    Ticket,
    connection_burst_for,
    default_max_connections,
    parse_networks,
)
from solrace.protocol import SERVER_FRAME_LIMITS, SUBPROTOCOL, decode, encode
from solrace.protocol.envelope import Envelope
from solrace_client import RaceClient
from solrace_client.errors import cannot_reach
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from tests.support.server_process import solrace_server

from .conftest import Cluster

# ------------------------------------------------------------------ the decision

NOBODY_TRUSTED = parse_networks("none")


def test_past_the_most_connections_a_socket_is_refused_then_dropped() -> None:
    admission = Admission(max_connections=4, max_per_address=0, trusted=NOBODY_TRUSTED)
    admitted = [admission.accept(f"203.0.113.{i}", 0.0) for i in range(4)]
    assert all(t is not None and t.refusal is None for t in admitted)
    refused = [admission.accept("198.51.100.1", 0.0) for _ in range(admission.drop_at - 4)]
    assert all(t is not None and t.refusal is Refusal.SERVER_FULL for t in refused)
    assert admission.accept("198.51.100.1", 0.0) is None  # past the margin: dropped unanswered
    assert admission.open == admission.drop_at
    first = admitted[0]
    assert first is not None
    admission.release(first)
    admission.release(first)  # idempotent
    for ticket in refused:
        assert ticket is not None
        admission.release(ticket)
    again = admission.accept("198.51.100.1", 0.0)
    assert again is not None and again.refusal is None


def test_one_address_holds_at_most_its_share_and_others_are_not_affected() -> None:
    admission = Admission(max_connections=100, max_per_address=2, trusted=NOBODY_TRUSTED)
    one, two, three = (admission.accept("203.0.113.9", 0.0) for _ in range(3))
    assert one is not None and one.refusal is None and one.key == "203.0.113.9"
    assert two is not None and two.refusal is None
    assert three is not None and three.refusal is Refusal.TOO_MANY_CONNECTIONS
    assert admission.identify(three, [], 0.0) is Refusal.TOO_MANY_CONNECTIONS
    other = admission.accept("203.0.113.10", 0.0)
    assert other is not None and other.refusal is None
    admission.release(three)
    assert admission.holds("203.0.113.9") == 2
    admission.release(one)
    four = admission.accept("203.0.113.9", 0.0)
    assert four is not None and four.refusal is None


def test_an_address_waiting_on_its_refusals_gets_no_more_sockets() -> None:
    """Refused sockets wait up to REFUSAL_WAIT_S for their request: one address may
    not fill the node with them, whatever rate it opens them at."""
    admission = Admission(max_connections=100, max_per_address=2, trusted=NOBODY_TRUSTED)
    held = [admission.accept("203.0.113.9", 0.0) for _ in range(2)]
    waiting = [admission.accept("203.0.113.9", 0.0) for _ in range(REFUSALS_PER_ADDRESS)]
    assert all(t is not None and t.refusal is None for t in held)
    assert all(t is not None and t.refusal is Refusal.TOO_MANY_CONNECTIONS for t in waiting)
    assert admission.accept("203.0.113.9", 0.0) is None  # dropped at once
    assert admission.open == 2 + REFUSALS_PER_ADDRESS
    someone_else = admission.accept("203.0.113.10", 0.0)
    assert someone_else is not None and someone_else.refusal is None
    first_waiting = waiting[0]
    assert first_waiting is not None
    admission.release(first_waiting)
    again = admission.accept("203.0.113.9", 0.0)  # refused again, not dropped
    assert again is not None and again.refusal is Refusal.TOO_MANY_CONNECTIONS


def test_a_full_node_refuses_an_address_over_its_share_for_its_share() -> None:
    admission = Admission(max_connections=3, max_per_address=2, trusted=NOBODY_TRUSTED)
    admission.accept("203.0.113.1", 0.0), admission.accept("203.0.113.1", 0.0)
    over_share = admission.accept("203.0.113.1", 0.0)
    assert over_share is not None and over_share.refusal is Refusal.TOO_MANY_CONNECTIONS
    full = admission.accept("203.0.113.2", 0.0)
    assert full is not None and full.refusal is Refusal.SERVER_FULL


def test_ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() -> None:
    admission = Admission(max_connections=100, max_per_address=1, trusted=NOBODY_TRUSTED)
    first = admission.accept("2001:db8:1:2::1", 0.0)
    same_64 = admission.accept("2001:db8:1:2:ffff::7", 0.0)
    other_64 = admission.accept("2001:db8:1:3::1", 0.0)
    assert first is not None and first.key == "2001:db8:1:2::/64"
    assert same_64 is not None and same_64.refusal is Refusal.TOO_MANY_CONNECTIONS
    assert other_64 is not None and other_64.refusal is None
    mapped = admission.accept("::ffff:203.0.113.4", 0.0)
    assert mapped is not None and mapped.key == "203.0.113.4"


def test_a_trusted_proxy_is_not_capped_but_the_client_it_names_is() -> None:
    admission = Admission(
        max_connections=100, max_per_address=1, trusted=parse_networks("10.0.0.0/8")
    )

    def through_proxy(forwarded: Sequence[str]) -> Refusal | None:
        ticket = admission.accept("10.1.2.3", 0.0)
        assert ticket is not None and ticket.refusal is None and ticket.key is None
        return admission.identify(ticket, forwarded, 0.0)

    assert through_proxy([]) is None  # the proxy itself, saying nobody: never capped
    assert through_proxy([]) is None
    assert through_proxy(["203.0.113.5"]) is None
    assert through_proxy(["203.0.113.5"]) is Refusal.TOO_MANY_CONNECTIONS
    # A chain the client began: only the proxy's last entry counts.
    assert through_proxy(["198.51.100.1, 203.0.113.5"]) is Refusal.TOO_MANY_CONNECTIONS
    assert through_proxy(["203.0.113.5, 198.51.100.1"]) is None
    assert through_proxy(["not an address"]) is None  # unreadable: the proxy, uncapped
    assert through_proxy(["10.9.9.9"]) is None  # only trusted hops: uncapped
    # Two proxies in a row (a balancer on a private address before nginx): the client
    # is the last address no trusted proxy holds. It was taken for a proxy, uncapped.
    assert through_proxy(["198.51.100.9, 10.0.0.5"]) is None
    assert through_proxy(["198.51.100.9", "10.0.0.5"]) is Refusal.TOO_MANY_CONNECTIONS
    # A peer outside the trusted networks cannot name someone else.
    direct = admission.accept("203.0.113.77", 0.0)
    assert direct is not None and direct.key == "203.0.113.77"
    assert admission.identify(direct, ["198.51.100.200"], 0.0) is None
    assert direct.key == "203.0.113.77"


def test_by_default_only_this_machine_is_a_trusted_proxy() -> None:
    """A LAN client is not a proxy: trusted by default (``loopback,private`` before),
    a client from a private address was never capped and its own ``X-Forwarded-For``
    was believed — a real node capped at 2 per address admitted 10 connections from
    fd00::2, each naming another 203.0.113.x. By default only loopback (nginx on the
    host, deploy/nginx.conf) is trusted; a private peer is capped by its own address."""
    admission = Admission(max_connections=100, max_per_address=2)
    for peer in ("10.1.2.3", "192.168.1.20", "172.16.0.9", "fd00::2"):
        admitted = [admission.accept(peer, 0.0) for _ in range(2)]
        for n, ticket in enumerate(admitted):
            assert ticket is not None and ticket.key is not None
            assert admission.identify(ticket, [f"203.0.113.{n + 1}"], 0.0) is None
            assert ticket.forwarded is None  # its claim is not believed
        third = admission.accept(peer, 0.0)
        assert third is not None
        assert admission.identify(third, ["198.51.100.7"], 0.0) is Refusal.TOO_MANY_CONNECTIONS
    # nginx on the host (deploy/nginx.conf, deploy/local.sh) still names its clients.
    for n in range(3):
        proxied = admission.accept("127.0.0.1", 0.0)
        assert proxied is not None and proxied.key is None
        assert admission.identify(proxied, [f"203.0.113.{50 + n}"], 0.0) is None
        assert proxied.forwarded == f"203.0.113.{50 + n}"


def test_the_default_limits_follow_the_open_file_limit() -> None:
    assert default_max_connections(1024) == 1024 - min(FD_RESERVE, 1024 // 4)
    assert default_max_connections(200) == 200 - 200 // 4
    assert default_max_connections(10**7) == MAX_CONNECTIONS_CEILING
    for open_files in (64, 200, 1024, 4096, 65_536):
        most = default_max_connections(open_files)
        assert Admission(most).drop_at < open_files  # a reserve is left either way
    assert Admission(10).max_per_address == DEFAULT_MAX_PER_ADDRESS


def test_trusted_networks_are_read_from_words_addresses_and_networks() -> None:
    loopback = parse_networks("loopback")
    assert [str(n) for n in loopback] == ["127.0.0.0/8", "::1/128"]
    assert len(parse_networks("loopback,private")) == 6
    assert [str(n) for n in parse_networks(" 192.0.2.7 , 10.0.0.0/8")] == [
        "192.0.2.7/32",
        "10.0.0.0/8",
    ]
    assert parse_networks("None") == ()
    for bad in ("proxy", "10.0.0.0/33", ",", ""):
        with pytest.raises(ValueError):
            parse_networks(bad)


# ------------------------------------------------------------------ real sockets


async def _open(url: str, forwarded_for: str | None = None) -> ClientConnection:
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    return await connect(url, subprotocols=[SUBPROTOCOL], additional_headers=headers)  # type: ignore[list-item]


async def _refused(url: str, forwarded_for: str | None = None) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as refused:
        await _open(url, forwarded_for)
    return refused.value


def _http_get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return answer.status, answer.read().decode()


async def _get(server_url: str, path: str) -> tuple[int, str]:
    http = server_url.replace("ws://", "http://", 1)
    return await asyncio.to_thread(_http_get, http + path)


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_past_its_share_an_address_gets_429_and_the_client_says_why(
    cluster: Cluster,
) -> None:
    admission = Admission(100, max_per_address=2, trusted=NOBODY_TRUSTED)
    server = await cluster.node(admission=admission)
    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", private=True)  # one address: two seats if private
    spare = await _open(server.url)
    refusal = await _refused(server.url)
    assert refusal.response.status_code == 429
    assert refusal.response.headers["Retry-After"] == "5"
    assert bytes(refusal.response.body or b"").startswith(b"too_many_connections: ")
    said = cannot_reach(server.url, refusal)
    assert "too many connections from your address" in said and "\n" not in said
    with pytest.raises(InvalidStatus):  # the library's connect is refused the same way
        await RaceClient.connect(server.url)
    assert (await ann.ping()) > 0  # the racers it holds play on
    status, _ = await _get(server.url, "/healthz")
    assert status == 200  # probes are never refused
    _, metrics = await _get(server.url, "/metrics")
    assert 'solrace_connections_refused_total{reason="too_many_connections"} 2.0' in metrics
    await spare.close()
    await asyncio.sleep(0.05)  # the close reaches the server
    bob = await RaceClient.connect(server.url)  # a slot is free again
    await bob.join(ann.code or "", "Bob")
    await bob.close()
    await ann.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_full_node_answers_503_and_still_answers_its_probes(cluster: Cluster) -> None:
    server = await cluster.node(admission=Admission(2, max_per_address=0))
    first, second = await _open(server.url), await _open(server.url)
    refusal = await _refused(server.url)
    assert refusal.response.status_code == 503
    assert bytes(refusal.response.body or b"").startswith(b"server_full: ")
    assert "the server is full" in cannot_reach(server.url, refusal)
    status, body = await _get(server.url, "/healthz")
    assert (status, body) == (200, "ok\n")
    _, metrics = await _get(server.url, "/metrics")
    assert "solrace_connections_max 2.0" in metrics
    assert 'solrace_connections_refused_total{reason="server_full"} 1.0' in metrics
    await first.close()
    await asyncio.sleep(0.05)
    third = await _open(server.url)
    await third.close()
    await second.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_behind_a_trusted_proxy_each_forwarded_client_is_capped(cluster: Cluster) -> None:
    proxy = Admission(100, max_per_address=1, trusted=parse_networks("127.0.0.1"))
    server = await cluster.node(admission=proxy)
    held = [await _open(server.url, "203.0.113.5"), await _open(server.url, "203.0.113.6")]
    assert (await _refused(server.url, "203.0.113.5")).response.status_code == 429
    assert (await _refused(server.url, "198.51.100.1, 203.0.113.5")).response.status_code == 429
    held += [await _open(server.url), await _open(server.url)]  # the proxy: not capped
    for ws in held:
        await ws.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_the_logs_name_the_client_a_trusted_proxy_forwards(cluster: Cluster) -> None:
    """Behind nginx every log line about a connection named nginx (its peer address):
    which client was rate limited, or failed, was nowhere. A trusted proxy's client is
    named beside it; an untrusted peer's claim is not."""
    proxy = Admission(100, trusted=parse_networks("127.0.0.1"))
    server = await cluster.node(admission=proxy)
    forwarded = await _open(server.url, "198.51.100.1, 203.0.113.5")
    direct = await _open(server.url)
    await asyncio.sleep(0.05)
    ids = sorted((s.ids() for s in server.node.peers), key=lambda i: "client" in i)
    assert [i.get("client") for i in ids] == [None, "203.0.113.5"]
    assert all("127.0.0.1" in str(i["peer"]) for i in ids)
    await forwarded.close()
    await direct.close()
    untrusting = await cluster.node(admission=Admission(100, trusted=NOBODY_TRUSTED))
    claimed = await _open(untrusting.url, "203.0.113.5")
    await asyncio.sleep(0.05)
    assert [s.ids().get("client") for s in untrusting.node.peers] == [None]
    await claimed.close()


def test_a_forwarded_clients_scope_id_stays_out_of_the_logs() -> None:
    """ipaddress reads anything after an IPv6 address's ``%`` as its scope id (an
    interface of the machine that wrote it, meaningless here): spaces, ``=``, C1
    controls, 7 KB of it. A client behind a trusted proxy (a LAN player, by default)
    sent ``X-Forwarded-For: 2a01:4f8::1%x room=r_forged racer=7`` and a real node wrote
    ``rate limited peer=127.0.0.1:36568 client=2a01:4f8::1%x room=r_forged racer=7``;
    with ``%\x9b31m``, a raw U+009B (a terminal's CSI) into the text log."""
    admission = Admission(100, trusted=parse_networks("127.0.0.1"))
    for forwarded in ("2a01:4f8::1%x room=r_forged racer=7", "[2a01:4f8::1%\x9b31m]:40001"):
        ticket = admission.accept("127.0.0.1", 0.0)
        assert ticket is not None and admission.identify(ticket, [forwarded], 0.0) is None
        assert ticket.forwarded == "2a01:4f8::1"
        assert ticket.key == "2a01:4f8::/64"


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_an_untrusted_peer_cannot_escape_its_cap_by_naming_another_address(
    cluster: Cluster,
) -> None:
    server = await cluster.node(admission=Admission(100, max_per_address=1, trusted=NOBODY_TRUSTED))
    held = await _open(server.url, "203.0.113.7")
    assert (await _refused(server.url, "203.0.113.8")).response.status_code == 429
    await held.close()


async def _answer(reader: asyncio.StreamReader, within_s: float) -> bytes:
    """All a socket is sent until it closes (a reset is a close too)."""
    try:
        return await asyncio.wait_for(reader.read(), within_s)
    except ConnectionResetError:
        return b""


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_refused_sockets_that_send_nothing_cannot_hold_descriptors(cluster: Cluster) -> None:
    """A socket past the limit that never sends its request is closed unanswered after
    REFUSAL_WAIT_S; past the margin a socket is closed at once."""
    admission = Admission(1, max_per_address=0)
    server = await cluster.node(admission=admission)
    admitted = await _open(server.url)
    host, port = server.host, server.port
    loop = asyncio.get_running_loop()
    silent = []
    while admission.open < admission.drop_at:  # refused, waiting for a request
        silent.append(await asyncio.open_connection(host, port))
        await asyncio.sleep(0.02)
    began = loop.time()
    dropped_reader, dropped_writer = await asyncio.open_connection(host, port)
    assert await _answer(dropped_reader, 1) == b""  # closed at once
    for reader, _ in silent:  # each closed unanswered once its wait is over
        assert await _answer(reader, REFUSAL_WAIT_S + 1) == b""
    assert loop.time() - began <= REFUSAL_WAIT_S + 1
    assert admission.open == 1
    _, metrics = await _get(server.url, "/metrics")
    assert 'solrace_connections_refused_total{reason="dropped"} 1.0' in metrics
    for _, writer in [*silent, (dropped_reader, dropped_writer)]:
        writer.close()
    await admitted.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_refusals_are_logged_once_the_quiet_time_is_up_even_if_none_follows(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The first refusal is logged at once; later ones within REFUSALS_LOG_EVERY_S were
    logged only if another refusal came after it (an audit: a 503 said 31 s late, or
    never). The quiet time is lowered to 0.3 s here; the server's is 10 s."""
    monkeypatch.setattr(server_module, "REFUSALS_LOG_EVERY_S", 0.3)
    server = await cluster.node(admission=Admission(1, max_per_address=0))
    held = await _open(server.url)
    with caplog.at_level(logging.WARNING, logger="solrace.server"):
        await _refused(server.url)
        await _refused(server.url)
        await _refused(server.url)
        lines = [r.getMessage() for r in caplog.records if "refusing" in r.getMessage()]
        assert len(lines) == 1 and "(1 server_full)" in lines[0]
        await asyncio.sleep(0.6)  # no refusal since: the two are said anyway
        lines = [r.getMessage() for r in caplog.records if "refusing" in r.getMessage()]
        assert len(lines) == 2 and "(2 server_full)" in lines[1], lines
    await held.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_the_refusals_line_names_the_addresses_refused_most(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """``refusing connections (1 dropped): 72 open, at most 19744 in all and 64 per
    address`` was all a real node said of one address opening 300 connections (236
    refused): which address, the operator could not tell. The line names the addresses
    refused most, as a repeated line does (solrace.rooms.repeats)."""
    proxy = Admission(100, max_per_address=1, trusted=parse_networks("127.0.0.1"))
    server = await cluster.node(admission=proxy)
    held = [await _open(server.url, "203.0.113.5"), await _open(server.url, "198.51.100.1")]
    with caplog.at_level(logging.WARNING, logger="solrace.server"):
        for _ in range(3):
            await _refused(server.url, "203.0.113.5")
        await _refused(server.url, "198.51.100.1")
        server._log_refusals()  # the 10 s are up
    lines = [r for r in caplog.records if "refusing" in r.getMessage()]
    assert [r.__dict__.get("most") for r in lines] == [
        "203.0.113.5(1)",
        "203.0.113.5(2),198.51.100.1(1)",
    ]
    for ws in held:
        await ws.close()


# ------------------------------------------------------------------ as a user runs it

#: A service manager's open-file limit can be this low (systemd's default is 1,024).
LOW_OPEN_FILES = 200


async def test_a_flood_of_connections_from_one_client_leaves_the_node_serving() -> None:
    """Before the limits: a node whose open-file limit was 200 took 183 idle
    connections from one client, then answered no one (``/healthz`` an empty reply,
    a newcomer no HTTP answer at all) and logged nothing, until the client let go.
    Now, with the default settings: it takes what its limit leaves room for, refuses
    the rest with 503 ``server_full``, keeps file descriptors for itself, answers its
    probes and its racers throughout, says so in its log, and takes newcomers once
    the flood is gone. (The flood comes from 127.0.0.1, which the default trusts, so
    it meets the node's total, not the per-address cap.)"""
    async with solrace_server("redis", open_files=LOW_OPEN_FILES) as server:
        most = default_max_connections(LOW_OPEN_FILES)
        assert f"connections={most} at most (open files {LOW_OPEN_FILES})" in server.log
        ann = await RaceClient.connect(server.url)
        await ann.create("yukon", "Ann")
        flood: list[ClientConnection] = []
        refusals: list[InvalidStatus] = []
        for _ in range(most + 20):
            try:
                flood.append(await _open(server.url))
            except InvalidStatus as refused:
                refusals.append(refused)
        assert len(flood) == most - 1  # Ann holds one
        assert len(refusals) == 21
        assert {r.response.status_code for r in refusals} == {503}
        assert all(bytes(r.response.body or b"").startswith(b"server_full") for r in refusals)
        status, body = await _get(server.url, "/healthz")
        assert (status, body) == (200, "ok\n")
        assert (await ann.ping()) > 0
        descriptors = len(os.listdir(f"/proc/{server.proc.pid}/fd"))
        assert descriptors < LOW_OPEN_FILES - 10, descriptors
        await asyncio.sleep(0.1)
        assert "refusing connections (1 server_full)" in server.log
        for ws in flood:
            await ws.close()
        await asyncio.sleep(0.1)
        bob = await RaceClient.connect(server.url)
        await bob.join(ann.code or "", "Bob")
        await bob.close()
        await ann.close()


# ------------------------------------------------------------------ rooms opened


def _admitted(admission: Admission, peer: str, forwarded_for: Sequence[str] = ()) -> Ticket:
    ticket = admission.accept(peer, 0.0)
    assert ticket is not None and admission.identify(ticket, forwarded_for, 0.0) is None
    return ticket


def test_an_address_opens_so_many_rooms_a_minute_and_is_told_when_it_may_again() -> None:
    """The count is the address's, not the connection's: a connection that opened a
    room and hung up (what an audit did, 10 rooms a second) leaves it behind."""
    admission = Admission(100, trusted=NOBODY_TRUSTED, rooms_per_minute=3)
    ticket = _admitted(admission, "203.0.113.5")
    assert [admission.open_room(ticket, 0.0) for _ in range(3)] == [None, None, None]
    assert admission.open_room(ticket, 0.0) == pytest.approx(20.0)  # one per 20 s
    admission.release(ticket)
    again = _admitted(admission, "203.0.113.5")
    assert admission.open_room(again, 10.0) == pytest.approx(10.0)
    assert admission.open_room(again, 20.0) is None
    assert admission.open_room(_admitted(admission, "203.0.113.6"), 20.0) is None
    same_64 = _admitted(admission, "2001:db8::1")
    for _ in range(3):
        assert admission.open_room(same_64, 0.0) is None
    assert admission.open_room(_admitted(admission, "2001:db8::2"), 0.0) is not None
    uncapped = Admission(100, trusted=NOBODY_TRUSTED, rooms_per_minute=0)
    anyone = _admitted(uncapped, "203.0.113.5")
    assert all(uncapped.open_room(anyone, 0.0) is None for _ in range(100))
    assert Admission(10).rooms_per_minute == DEFAULT_ROOMS_PER_MINUTE


def test_behind_a_trusted_proxy_each_forwarded_client_opens_its_own_rooms() -> None:
    admission = Admission(100, trusted=parse_networks("10.0.0.0/8"), rooms_per_minute=1)
    ann = _admitted(admission, "10.0.0.2", ["203.0.113.5"])
    assert admission.open_room(ann, 0.0) is None
    assert admission.open_room(_admitted(admission, "10.0.0.2", ["203.0.113.5"]), 0.0)
    assert admission.open_room(_admitted(admission, "10.0.0.2", ["203.0.113.6"]), 0.0) is None
    proxy = _admitted(admission, "10.0.0.2")  # the proxy's own: never counted
    assert all(admission.open_room(proxy, 0.0) is None for _ in range(10))


def test_addresses_that_opened_nothing_for_a_minute_are_forgotten() -> None:
    """The counts outlive connections, so they are bounded otherwise: past so many
    addresses, those whose count is full again go (as if never seen)."""
    admission = Admission(100, trusted=NOBODY_TRUSTED, rooms_per_minute=1, room_counts_kept=3)
    for n in range(3):
        assert admission.open_room(_admitted(admission, f"203.0.113.{n}"), 0.0) is None
    busy = _admitted(admission, "198.51.100.1")
    assert admission.open_room(busy, 59.0) is None  # a fourth: the others are short yet
    assert len(admission._rooms) == 4
    # That pass left 3: the next comes at twice as many (each is a pass over them all).
    for n in range(2, 5):
        assert admission.open_room(_admitted(admission, f"198.51.100.{n}"), 61.0) is None
    assert sorted(admission._rooms) == [f"198.51.100.{n}" for n in range(1, 5)]
    assert admission.open_room(busy, 61.0) is not None  # its own count is kept


async def _ask(ws: ClientConnection, request_id: int, t: str, **d: object) -> Envelope:
    """Send request ``t`` on a raw connection and read frames until its reply."""
    await ws.send(encode(Envelope(t, id=request_id, d=d)))
    while True:
        reply = decode(await ws.recv(), limits=SERVER_FRAME_LIMITS)
        if reply.id == request_id:
            return reply


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_rooms_opened_by_connections_that_hang_up_are_counted_by_address(
    cluster: Cluster,
) -> None:
    """An audit: a connection that sends ``create`` and hangs up costs 0.3 s; ten a
    second kept 100 junk lobbies listed, 1.3 a second kept the solver workers busy
    certifying. Behind a trusted proxy, each forwarded client may open so many rooms a
    minute; past them ``create`` and a ``quick`` that would open one are refused
    ``too_many_rooms`` (with when to try again), and a ``quick`` that joins is not."""
    proxy = Admission(100, trusted=parse_networks("127.0.0.1"), rooms_per_minute=3)
    server = await cluster.node(admission=proxy)
    for n in range(3):
        ws = await _open(server.url, "203.0.113.5")
        created = await _ask(ws, 1, "create", variant="klondike", name=f"J{n}", deals="random")
        assert created.t == "joined", created.d
        await ws.close()
    refused = []
    for t, settings in (("create", {"variant": "klondike"}), ("quick", {"variant": "yukon"})):
        ws = await _open(server.url, "203.0.113.5")
        refused.append(await _ask(ws, 1, t, name="Jo", **settings))
        await ws.close()
    for reply in refused:
        assert (reply.t, reply.d["code"]) == ("error", "too_many_rooms"), reply.d
        assert 0 < int(reply.d["retry_after_ms"]) <= 20_000  # one room per 20 s
        assert reply.d["message"].startswith("your address has opened too many rooms")
    _, metrics = await _get(server.url, "/metrics")  # an operator sees the refusals
    assert 'solrace_requests_refused_total{code="too_many_rooms"} 2.0' in metrics
    ann = await _open(server.url, "203.0.113.6")  # another client: a room of its own
    assert (await _ask(ann, 1, "quick", variant="yukon", name="Ann")).t == "joined"
    bob = await _open(server.url, "203.0.113.5")  # joining opens none: still welcome
    joined = await _ask(bob, 1, "quick", variant="yukon", name="Bob")
    assert joined.t == "joined", joined.d
    for ws in (ann, bob):
        await ws.close()


def test_an_address_that_tries_codes_naming_no_room_is_held_back() -> None:
    """Room codes are 6 characters of 32 (2**30): counted by nothing but the message
    rate, one address's 64 connections tried 1,083 a second on a real node (unknown
    codes answered ``unknown_room``), so a private room among a thousand was found in
    about 16 minutes. Past a burst, an address tries as many codes a minute as it has
    tried codes that named no room; a code that names one costs nothing."""
    admission = Admission(
        100, trusted=parse_networks("10.0.0.0/8"), code_misses_per_minute=6, code_miss_burst=2
    )
    guesser = _admitted(admission, "203.0.113.5")
    assert admission.code_wait(guesser, 0.0) is None
    admission.code_missed(guesser, 0.0)
    assert admission.code_wait(guesser, 0.0) is None
    admission.code_missed(guesser, 0.0)
    assert admission.code_wait(guesser, 0.0) == pytest.approx(10.0)  # one every 10 s
    assert admission.code_wait(guesser, 9.0) == pytest.approx(1.0)
    assert admission.code_wait(guesser, 10.0) is None
    again = _admitted(admission, "203.0.113.5")  # a new connection of that address
    admission.code_missed(again, 10.0)
    assert admission.code_wait(guesser, 10.0) is not None
    assert admission.code_wait(_admitted(admission, "203.0.113.6"), 10.0) is None
    # An IPv6 client counts by its /48 (one site): each /64 of it had a burst of its own.
    for n in range(2):
        admission.code_missed(_admitted(admission, f"2001:db8:0:{n}::1"), 10.0)
    assert admission.code_wait(_admitted(admission, "2001:db8:0:ffff::9"), 10.0) is not None
    assert admission.code_wait(_admitted(admission, "2001:db8:1::1"), 10.0) is None
    proxy = _admitted(admission, "10.0.0.2")  # the proxy's own: never counted
    for _ in range(10):
        admission.code_missed(proxy, 10.0)
    assert admission.code_wait(proxy, 10.0) is None
    unlimited = Admission(100, trusted=NOBODY_TRUSTED, code_misses_per_minute=0)
    anyone = _admitted(unlimited, "203.0.113.5")
    for _ in range(100):
        unlimited.code_missed(anyone, 0.0)
    assert unlimited.code_wait(anyone, 0.0) is None


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_guessing_room_codes_is_refused_past_a_burst_without_telling_which_exist(
    cluster: Cluster,
) -> None:
    """Behind a trusted proxy, a client that ``join``s and ``watch``es codes naming no
    room is refused ``rate_limited`` (with when to try again) past its burst, the real
    code of a private room included — the refusal says nothing of which codes exist —
    while another client joins and watches that room by its code as often as it likes.
    With the limits a node runs by default (CODE_MISS_BURST, then
    DEFAULT_CODE_MISSES_PER_MINUTE), not lowered for the test."""
    proxy = Admission(100, trusted=parse_networks("127.0.0.1"))
    server = await cluster.node(admission=proxy)
    host = await _open(server.url, "198.51.100.1")
    created = await _ask(host, 1, "create", variant="klondike", name="Host", private=True)
    assert created.t == "joined", created.d
    secret_code = created.d["code"]
    unknown = "2" * 6 if secret_code != "2" * 6 else "3" * 6
    # The burst spread over connections of one address, a few misses each (each also
    # under its own message rate): the count is the address's, not a connection's.
    guessers = [await _open(server.url, "203.0.113.5") for _ in range(4)]
    for n in range(CODE_MISS_BURST):
        guesser, t = guessers[n % len(guessers)], ("join", "watch")[n % 2]
        fields = {"name": "Guess"} if t == "join" else {}
        missed = await _ask(guesser, n, t, code=unknown, **fields)
        assert (missed.t, missed.d["code"]) == ("error", "unknown_room"), missed.d
    second = await _open(server.url, "203.0.113.5")  # a fresh connection changes nothing
    for n, (t, code) in enumerate((("watch", unknown), ("join", secret_code))):
        fields = {"name": "Guess"} if t == "join" else {}
        refused = await _ask(second, n, t, code=code, **fields)
        assert (refused.t, refused.d["code"]) == ("error", "rate_limited"), refused.d
        one_code_ms = 60_000 // DEFAULT_CODE_MISSES_PER_MINUTE
        assert 0 < int(refused.d["retry_after_ms"]) <= one_code_ms  # one code per 6 s
    friend = await _open(server.url, "198.51.100.2")
    for n in range(5):  # codes that name a room cost nothing
        watching = await _ask(friend, 2 * n, "watch", code=secret_code)
        assert watching.t == "watching", watching.d
        assert (await _ask(friend, 2 * n + 1, "leave")).t == "ok"
    joined = await _ask(friend, 10, "join", code=secret_code.lower(), name="Friend")
    assert joined.t == "joined", joined.d
    for ws in (host, *guessers, second, friend):
        await ws.close()


def test_a_tickets_seat_key_is_the_address_it_is_counted_by_ipv6_by_its_56() -> None:
    """What a public room seats once: one address, a mapped IPv4 as itself, a trusted
    proxy's client (its port cut off), an IPv6 client by its /56 (a home line is
    delegated one, and held a seat per /64 of it: a seat audit); None for a
    connection counted by no address."""
    admission = Admission(100, trusted=parse_networks("10.0.0.0/8"))

    def seat_key(peer: str, forwarded: list[str] | None = None) -> str | None:
        ticket = admission.accept(peer, 0.0)
        assert ticket is not None and admission.identify(ticket, forwarded or [], 0.0) is None
        return ticket.seat_key

    assert seat_key("203.0.113.5") == "203.0.113.5"
    assert seat_key("::ffff:203.0.113.5") == "203.0.113.5"
    assert seat_key("10.1.1.1", ["203.0.113.5"]) == "203.0.113.5"  # a trusted proxy's client
    assert seat_key("10.1.1.1", ["203.0.113.5:40001"]) == "203.0.113.5"  # with its port
    assert seat_key("10.1.1.1", ["[2001:db8::5]:40001"]) == "2001:db8::/56"
    assert seat_key("2001:db8:0:ff::1") == seat_key("2001:db8::1") == "2001:db8::/56"
    assert seat_key("2001:db8:0:100::1") == "2001:db8:0:100::/56"
    assert seat_key("10.1.1.1") is None  # the proxy's own connection: counted by none


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_behind_a_proxy_one_client_address_takes_one_seat_of_a_public_room(
    cluster: Cluster,
) -> None:
    """A second seat of one address is a scout for the first (the same deal): a quick
    race from it opens a room of its own, a join is refused ``same_address``; another
    client, the proxy's own connection and a private room are not capped."""
    server = await cluster.node(admission=Admission(100, trusted=parse_networks("127.0.0.1")))
    ann, scout = await _open(server.url, "203.0.113.5"), await _open(server.url, "203.0.113.5")
    first = await _ask(ann, 1, "quick", variant="yukon", name="Ann")
    second = await _ask(scout, 1, "quick", variant="yukon", name="Scout")
    assert first.t == second.t == "joined", (first.d, second.d)
    assert first.d["room"] != second.d["room"]
    await _ask(scout, 2, "leave")
    refused = await _ask(scout, 3, "join", code=first.d["code"], name="Scout")
    assert (refused.t, refused.d["code"]) == ("error", "same_address"), refused.d
    others = [await _open(server.url, "198.51.100.7"), await _open(server.url)]
    for n, ws in enumerate(others):
        joined = await _ask(ws, 1, "join", code=first.d["code"], name=f"Other{n}")
        assert (joined.t, joined.d["room"]) == ("joined", first.d["room"]), joined.d
    friends = await _ask(scout, 4, "create", variant="yukon", name="Host", private=True)
    fourth = await _open(server.url, "203.0.113.5")
    joined = await _ask(fourth, 1, "join", code=friends.d["code"], name="Friend")
    assert joined.t == "joined", joined.d
    for ws in (ann, scout, fourth, *others):
        await ws.close()


@pytest.mark.parametrize(("flags", "rooms"), [((), 2), (("--seats-per-address", "0"), 1)])
async def test_solrace_server_seats_an_address_once_a_public_room_unless_told_otherwise(
    flags: tuple[str, ...], rooms: int
) -> None:
    """``solrace-server`` as an operator runs it, its clients' own addresses capped
    (``--trusted-proxies none``): by default two ``solrace quick``s from one address
    race in two rooms; ``--seats-per-address 0`` seats them together."""
    async with solrace_server("redis", ["--trusted-proxies", "none", *flags]) as server:
        racers = [await RaceClient.connect(server.url) for _ in range(2)]
        joined = [await r.quick("yukon", f"R{n}") for n, r in enumerate(racers)]
        assert len({j["room"] for j in joined}) == rooms
        for racer in racers:
            await racer.close()


# ------------------------------------------------------------------ connections opened


def _connecting(
    admission: Admission, peer: str, now: float, forwarded_for: Sequence[str] = ()
) -> Ticket:
    """A connection from ``peer`` whose request is read at ``now``, then closed (the
    flood of an abuser that reconnects in a loop: it never holds one for long)."""
    ticket = admission.accept(peer, now)
    assert ticket is not None
    admission.identify(ticket, forwarded_for, now)
    admission.release(ticket)
    return ticket


def test_an_address_opens_so_many_connections_a_second_and_is_told_when_it_may_again() -> None:
    """A client reconnecting in a loop held one connection at a time, under the cap of
    those held at once, and opened 2,900 a second (each an accept and an upgrade; with
    a resume, a Redis read). Past its burst, an address opens connections_per_s a
    second; the refused are told when to come back (Retry-After, whole seconds), and a
    refused attempt takes nothing from the bucket."""
    admission = Admission(100, trusted=NOBODY_TRUSTED, connections_per_s=2, connection_burst=3)
    assert [_connecting(admission, "203.0.113.5", 0.0).refusal for _ in range(3)] == [None] * 3
    refused = _connecting(admission, "203.0.113.5", 0.0)
    assert refused.refusal is Refusal.CONNECTING_TOO_FAST
    assert (refused.refusal.code, refused.refusal.status) == ("connecting_too_fast", 429)
    assert refused.retry_after_s == 1  # 0.5 s, in whole seconds
    assert _connecting(admission, "203.0.113.5", 0.25).refusal is Refusal.CONNECTING_TOO_FAST
    assert _connecting(admission, "203.0.113.5", 0.5).refusal is None  # nothing was taken
    assert _connecting(admission, "203.0.113.6", 0.5).refusal is None  # another address
    assert admission.open == 0 and admission.holds("203.0.113.5") == 0
    slow = Admission(100, trusted=NOBODY_TRUSTED, connections_per_s=0.1, connection_burst=1)
    assert _connecting(slow, "203.0.113.5", 0.0).refusal is None
    assert _connecting(slow, "203.0.113.5", 0.0).retry_after_s == 10
    assert _connecting(slow, "203.0.113.5", 7.5).retry_after_s == 3  # 2.5 s, rounded up
    same_64 = [_connecting(slow, f"2001:db8::{n}", 0.0).refusal for n in (1, 2)]
    assert same_64 == [None, Refusal.CONNECTING_TOO_FAST]  # an IPv6 client by its /64
    off = Admission(100, trusted=NOBODY_TRUSTED, connections_per_s=0, connection_burst=1)
    assert all(_connecting(off, "203.0.113.5", 0.0).refusal is None for _ in range(1000))
    assert Admission(10).connections_per_s == DEFAULT_CONNECTIONS_PER_S
    assert Admission(10).connection_burst == CONNECTION_BURST


def test_behind_a_trusted_proxy_each_forwarded_client_opens_its_own_connections() -> None:
    """The proxy's own connections (the operator's tools, a health check, the test
    suite over loopback) are never counted; each client it names is, and one refused
    for opening too fast holds nothing (it is answered and closed at once)."""
    admission = Admission(
        100, trusted=parse_networks("10.0.0.0/8"), connections_per_s=1, connection_burst=2
    )
    assert all(_connecting(admission, "10.0.0.2", 0.0).refusal is None for _ in range(100))
    client = [_connecting(admission, "10.0.0.2", 0.0, ["203.0.113.5"]) for _ in range(3)]
    assert [t.refusal for t in client] == [None, None, Refusal.CONNECTING_TOO_FAST]
    held = admission.accept("10.0.0.2", 0.0)
    assert held is not None
    assert admission.identify(held, ["203.0.113.5"], 0.0) is Refusal.CONNECTING_TOO_FAST
    assert admission.holds("203.0.113.5") == 0 and held.key is None
    admission.release(held)
    other = _connecting(admission, "10.0.0.2", 0.0, ["198.51.100.1, 203.0.113.6"])
    assert other.refusal is None
    untrusted = Admission(100, trusted=NOBODY_TRUSTED, connections_per_s=1, connection_burst=1)
    assert _connecting(untrusted, "203.0.113.7", 0.0, ["198.51.100.1"]).refusal is None
    named = _connecting(untrusted, "203.0.113.7", 0.0, ["198.51.100.2"])
    assert named.refusal is Refusal.CONNECTING_TOO_FAST  # its claim names nobody else


def test_an_address_that_does_not_wait_is_not_answered_until_it_may_connect() -> None:
    """An answered refusal costs the node nearly what a bare handshake did: an abuser
    that did not wait was answered 2,000 times a second. Past so many answers in a row,
    a direct peer's sockets are closed at once, unanswered, until its bucket holds a
    connection again; then it is answered (and admitted) as before."""
    admission = Admission(100, trusted=NOBODY_TRUSTED, connections_per_s=1, connection_burst=1)
    assert _connecting(admission, "203.0.113.5", 0.0).refusal is None
    told = [_connecting(admission, "203.0.113.5", 0.25).refusal for _ in range(8)]
    assert told == [Refusal.CONNECTING_TOO_FAST] * CONNECTING_TOO_FAST_ANSWERED
    assert admission.accept("203.0.113.5", 0.25) is None  # closed at once
    assert admission.accept("203.0.113.5", 0.5) is None
    assert admission.open == 0
    assert _connecting(admission, "198.51.100.1", 0.5).refusal is None  # someone else
    assert _connecting(admission, "203.0.113.5", 1.0).refusal is None  # a token again
    assert _connecting(admission, "203.0.113.5", 1.0).refusal is Refusal.CONNECTING_TOO_FAST
    # A trusted proxy's client is known only once its request is read: always answered.
    proxy = Admission(
        100, trusted=parse_networks("10.0.0.0/8"), connections_per_s=1, connection_burst=1
    )
    refusals = [_connecting(proxy, "10.0.0.2", 0.0, ["203.0.113.5"]).refusal for _ in range(20)]
    assert refusals == [None] + [Refusal.CONNECTING_TOO_FAST] * 19


def test_an_address_over_its_share_is_refused_for_that_and_spends_no_new_connection() -> None:
    admission = Admission(
        100, max_per_address=1, trusted=NOBODY_TRUSTED, connections_per_s=1, connection_burst=2
    )
    held = admission.accept("203.0.113.5", 0.0)
    assert held is not None and admission.identify(held, [], 0.0) is None
    for _ in range(5):
        assert _connecting(admission, "203.0.113.5", 0.0).refusal is Refusal.TOO_MANY_CONNECTIONS
    admission.release(held)
    assert _connecting(admission, "203.0.113.5", 0.0).refusal is None  # its second token


def test_addresses_whose_connection_counts_are_full_again_are_forgotten() -> None:
    """Counts outlive connections (that is their point), so they are bounded as the
    rooms' are: past so many addresses, those whose bucket is full again go — as if
    never seen, which a full bucket is."""
    admission = Admission(
        100,
        trusted=NOBODY_TRUSTED,
        connections_per_s=1,
        connection_burst=1,
        connection_counts_kept=3,
    )
    for n in range(3):
        assert _connecting(admission, f"203.0.113.{n}", 0.0).refusal is None
    busy = "198.51.100.1"
    assert _connecting(admission, busy, 0.9).refusal is None  # the others are short yet
    assert len(admission._connects) == 4
    for n in range(2, 5):
        assert _connecting(admission, f"198.51.100.{n}", 1.1).refusal is None
    assert sorted(admission._connects) == [f"198.51.100.{n}" for n in range(1, 5)]
    assert _connecting(admission, busy, 1.1).refusal is Refusal.CONNECTING_TOO_FAST  # kept


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_past_its_burst_an_address_gets_429_connecting_too_fast_until_retry_after(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Real sockets, behind a trusted proxy (127.0.0.1, the test's own address): a
    client that opens connections past its burst is answered 429 ``connecting_too_fast``
    with the Retry-After its bucket needs, said in one line by the client library; the
    proxy's own connections and another client are unaffected; once the wait is over the
    client connects again. The refusals are counted and logged (the 10 s line)."""
    admission = Admission(
        100, trusted=parse_networks("127.0.0.1"), connections_per_s=0.5, connection_burst=3
    )
    server = await cluster.node(admission=admission)
    with caplog.at_level(logging.WARNING, logger="solrace.server"):
        for _ in range(3):
            await (await _open(server.url, "203.0.113.5")).close()
        refusals = [await _refused(server.url, "203.0.113.5") for _ in range(5)]
    assert {r.response.status_code for r in refusals} == {429}
    assert refusals[0].response.headers["Retry-After"] == "2"  # 2 s a connection
    assert {r.response.headers["Retry-After"] for r in refusals} <= {"1", "2"}
    assert all(bytes(r.response.body or b"").startswith(b"connecting_too_fast: ") for r in refusals)
    said = cannot_reach(server.url, refusals[0])
    assert "too many new connections from your address" in said and "wait 2 s" in said
    assert "\n" not in said
    other = await _open(server.url, "198.51.100.1")  # another client
    proxy_own = [await _open(server.url) for _ in range(5)]  # the proxy itself
    _, metrics = await _get(server.url, "/metrics")
    assert 'solrace_connections_refused_total{reason="connecting_too_fast"} 5.0' in metrics
    lines = [r for r in caplog.records if "refusing connections" in r.getMessage()]
    assert len(lines) == 1 and "(1 connecting_too_fast)" in lines[0].getMessage()
    assert lines[0].__dict__.get("most") == "203.0.113.5(1)"
    await asyncio.sleep(int(refusals[-1].response.headers["Retry-After"]))
    again = await _open(server.url, "203.0.113.5")
    for ws in (again, other, *proxy_own):
        await ws.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_direct_peer_that_does_not_wait_is_closed_unanswered_until_it_may(
    cluster: Cluster,
) -> None:
    admission = Admission(100, trusted=NOBODY_TRUSTED, connections_per_s=0.5, connection_burst=1)
    server = await cluster.node(admission=admission)
    await (await _open(server.url)).close()
    refusals = [await _refused(server.url) for _ in range(CONNECTING_TOO_FAST_ANSWERED)]
    assert {r.response.status_code for r in refusals} == {429}
    reader, writer = await asyncio.open_connection(server.host, server.port)
    assert await _answer(reader, 1) == b""  # closed at once, unanswered
    writer.close()
    await asyncio.sleep(int(refusals[-1].response.headers["Retry-After"]))
    await (await _open(server.url)).close()  # answered, and admitted, once it may
    _, metrics = await _get(server.url, "/metrics")
    assert 'solrace_connections_refused_total{reason="dropped"} 1.0' in metrics


async def test_solrace_server_says_its_connection_rate_and_takes_the_flag() -> None:
    """The "listening" line names every connection limit; 0 turns this one off."""
    async with solrace_server("redis", ["--connections-per-second-per-address", "0.5"]) as server:
        assert f"0.5 new a second per address (burst {CONNECTION_BURST})" in server.log
    async with solrace_server("redis", ["--connections-per-second-per-address", "0"]) as server:
        assert "new ones at any rate" in server.log


async def test_a_larger_address_cap_is_the_new_connections_burst_too() -> None:
    """A review: the burst stayed 64 under --max-connections-per-address 300, so a club's
    NAT whose link dropped met connecting_too_fast for most of its 300 reconnections."""
    assert connection_burst_for(0) == connection_burst_for(10) == CONNECTION_BURST
    args = ["--max-connections-per-address", "300"]
    async with solrace_server("redis", args) as server:
        assert "5 new a second per address (burst 300)" in server.log


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_browser_at_the_servers_url_is_told_what_the_port_is(cluster: Cluster) -> None:
    """A newcomer audit: http://127.0.0.1:8765/ in a browser (or curl), the address the
    server's "listening" line gives, answered websockets' own "Failed to open a
    WebSocket connection: missing Connection header. … You need a WebSocket client." —
    nothing of solrace, of the command that races there, or of the probes."""
    server = await cluster.node()
    http = server.url.replace("ws://", "http://", 1)
    with pytest.raises(urllib.error.HTTPError) as answered:
        await asyncio.to_thread(_http_get, http + "/")
    assert answered.value.code == 426  # still Upgrade Required: it is a WebSocket port
    body = answered.value.read().decode()
    assert body.startswith("This is a solrace-server: its port takes the solrace protocol"), body
    assert f"solrace quick --server {server.url}" in body and "/healthz" in body, body
    # behind the TLS proxy of deploy/nginx (X-Forwarded-Proto), the URL to give is wss
    proxied = urllib.request.Request(
        http + "/", headers={"Host": "race.example", "X-Forwarded-Proto": "https"}
    )
    with pytest.raises(urllib.error.HTTPError) as answered:
        await asyncio.to_thread(urllib.request.urlopen, proxied, timeout=5)
    body = answered.value.read().decode()
    assert "solrace quick --server wss://race.example " in body, body  # a review: ws://
    # a WebSocket client's handshake is not taken for a browser: a racer still connects
    client = await RaceClient.connect(server.url)
    await client.close()
