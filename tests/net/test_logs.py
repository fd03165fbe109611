"""Log lines (solrace/net/logs.py): a connection's peer is ``host:port`` and a field
without a value is left out. The operator audit read ``room=None racer=None
peer=('127.0.0.1', 39898)`` on a line about a connection in no room."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

import pytest
from solrace.net.logs import JsonFormatter, TextFormatter, address
from solrace.protocol import SERVER_FRAME_LIMITS, SUBPROTOCOL, Envelope, decode, encode
from solrace.protocol.limits import REPEATED_ADDRESSES_KEPT
from solrace.rooms.repeats import RepeatedLine
from solrace_client import RaceClient
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .conftest import Cluster


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "solrace.requests", logging.WARNING, "x", 1, "store unavailable", (), None
    )
    record.__dict__.update(extra)
    return record


@pytest.mark.parametrize(
    ("peer", "written"),
    [
        (("127.0.0.1", 39898), "127.0.0.1:39898"),
        (("::1", 39898, 0, 0), "[::1]:39898"),
        ("/run/solrace.sock", "/run/solrace.sock"),
    ],
)
def test_a_peer_is_written_as_people_write_an_address(peer: object, written: str) -> None:
    assert address(peer) == written


def test_a_field_without_a_value_is_left_out_of_a_text_line() -> None:
    line = TextFormatter("%(levelname)s %(name)s: %(message)s").format(
        _record(room=None, racer=None, peer=address(("127.0.0.1", 39898)))
    )
    assert line == "WARNING solrace.requests: store unavailable peer=127.0.0.1:39898"


def test_a_field_without_a_value_is_left_out_of_a_json_line() -> None:
    data = json.loads(JsonFormatter().format(_record(room="r_1", racer=None, peer="h:1")))
    assert (data["room"], data["peer"]) == ("r_1", "h:1")
    assert "racer" not in data


def test_a_text_line_is_one_line_whatever_its_fields_hold() -> None:
    """A field is written as it is (``error=Redis is out of memory …``), but a control
    character in one — a newline, ESC, a C1 control such as U+009B, a terminal's CSI —
    is escaped: it forged a second line, or ran in the terminal of an operator tailing
    the log (a scope id in ``X-Forwarded-For`` reached ``client=``, test_admission)."""
    line = TextFormatter("%(levelname)s %(name)s: %(message)s").format(
        _record(client="2a01::1%\nERROR forged \x1b[2J\x9b31m", error="Redis is out of memory")
    )
    assert line == (
        "WARNING solrace.requests: store unavailable"
        " client=2a01::1%\\nERROR forged \\x1b[2J\\x9b31m error=Redis is out of memory"
    )


# ------------------------------------------------------------ lines a client causes


def _said(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == message]


async def _flood(url: str, forwarded_for: str) -> None:
    """One connection that sends 100 pings at once: closed 1008 at the default limit
    (its replies unread: ``max_queue=None``, or the client stops reading before the close)."""
    ws = await connect(
        url, subprotocols=[SUBPROTOCOL], additional_headers=_from(forwarded_for), max_queue=None
    )
    with contextlib.suppress(ConnectionClosed):
        for request in range(100):
            await ws.send(encode(Envelope("ping", id=request)))
    await asyncio.wait_for(ws.wait_closed(), 5)
    assert ws.close_code == 1008


def _from(forwarded_for: str) -> dict[str, str]:
    return {"X-Forwarded-For": forwarded_for}


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_flood_of_rate_limited_connections_is_one_line_and_a_summary(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Each connection closed for flooding was a "rate limited" line: one address
    flooding and reconnecting made a real node write 260 lines (25 KB) a second, as
    long as it liked. The first is written at once; the rest of 10 s are one line that
    says how many, from how many addresses, and which sent most."""
    server = await cluster.node(rate=None)  # the limit a user's server has
    with caplog.at_level(logging.INFO, logger="solrace.session"):
        for _ in range(12):
            await _flood(server.url, "198.51.100.7")
        for _ in range(3):
            await _flood(server.url, "203.0.113.5")
        first = _said(caplog, "rate limited")
        assert len(first) == 1 and first[0].__dict__["client"] == "198.51.100.7"
        server.node.repeated.stop()  # as the node stops: what is held back is said
        summary = _said(caplog, "rate limited")[1:]
    assert [(r.__dict__["repeated"], r.__dict__["addresses"]) for r in summary] == [(14, 2)]
    assert summary[0].__dict__["most"] == "198.51.100.7(11),203.0.113.5(3)"


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_connection_closed_for_bad_input_is_logged_with_its_address(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A frame that is not msgpack closes its connection 1007, counted in
    solrace_protocol_closes_total{code} — but the log said nothing, so the operator
    could not tell which address sent it (an audit's 1,000 bad frames a second: no
    line). A repeated line now, as flooding is."""
    server = await cluster.node(rate=None)
    with caplog.at_level(logging.INFO, logger="solrace.session"):
        for _ in range(5):
            ws = await connect(
                server.url, subprotocols=[SUBPROTOCOL], additional_headers=_from("198.51.100.8")
            )
            await ws.send(b"\xc1 not msgpack")
            await asyncio.wait_for(ws.wait_closed(), 5)
            assert ws.close_code == 1007
        await asyncio.sleep(0.05)
        server.node.repeated.stop()
    lines = _said(caplog, "closed for bad input")
    assert [(r.__dict__.get("client"), r.__dict__.get("code")) for r in lines[:1]] == [
        ("198.51.100.8", 1007)
    ]
    assert [(r.__dict__["repeated"], r.__dict__["most"]) for r in lines[1:]] == [
        (4, "198.51.100.8(4)")
    ]


async def test_a_repeated_line_is_written_at_once_after_a_quiet_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first line of an interval is written as it comes (an operator sees the
    first flood at once), the rest when the interval is up, and a line after a quiet
    interval at once again; past REPEATED_ADDRESSES_KEPT addresses the rest are
    counted in the total only."""
    logger = logging.getLogger("solrace.test_repeats")
    line = RepeatedLine(logger, "flooded", every_s=0.1)
    with caplog.at_level(logging.INFO, logger="solrace.test_repeats"):
        line.note("192.0.2.1", {"peer": "192.0.2.1:1"})
        for n in range(REPEATED_ADDRESSES_KEPT + 5):
            line.note(f"10.{n // 256}.{n % 256}.1", {})
        line.note("10.0.0.1", {})
        assert len(caplog.records) == 1 and caplog.records[0].__dict__["peer"] == "192.0.2.1:1"
        await asyncio.sleep(0.15)
        summary = caplog.records[1].__dict__
        assert summary["repeated"] == REPEATED_ADDRESSES_KEPT + 6
        assert summary["addresses"] == REPEATED_ADDRESSES_KEPT  # an integer: at least
        assert summary["most"].startswith("10.0.0.1(2),")
        await asyncio.sleep(0.15)  # an interval with nothing: the next is said at once
        line.note("192.0.2.2", {"peer": "192.0.2.2:1"})
        assert [r.__dict__.get("peer") for r in caplog.records[2:]] == ["192.0.2.2:1"]
        line.stop()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_made_up_since_is_logged_with_the_spectators_address_and_repeated(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Anyone may ``watch`` with a ``since`` the room never held: a line each time
    (77 a second from 8 connections of one address), and it named the room but not
    who sent it. One line with the spectator's address, then a summary."""
    server = await cluster.node(rate=None)
    host = await RaceClient.connect(server.url)
    await host.create("yukon", "Ann", deals="random")
    ws = await connect(
        server.url, subprotocols=[SUBPROTOCOL], additional_headers=_from("198.51.100.9")
    )
    message = "a spectator had seen a version the room does not hold: resynchronised"
    with caplog.at_level(logging.INFO, logger="solrace.lobby"):
        for request in range(0, 8, 2):
            await ws.send(
                encode(Envelope("watch", id=request, d={"code": host.code, "since": 10**6}))
            )
            await ws.send(encode(Envelope("leave", id=request + 1)))
        while decode(await ws.recv(), limits=SERVER_FRAME_LIMITS).id != 7:
            pass
        first = _said(caplog, message)
        assert [(r.__dict__.get("client"), r.__dict__["room"]) for r in first] == [
            ("198.51.100.9", host.room)
        ]
        server.node.repeated.stop()
    assert [(r.__dict__["repeated"], r.__dict__["most"]) for r in _said(caplog, message)[1:]] == [
        (3, "198.51.100.9(3)")
    ]
    await ws.close()
    await host.close()


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
async def test_a_repeated_line_counts_an_ipv6_client_by_its_64(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """One user usually holds a whole IPv6 /64 (connections are counted so): a flood
    spread over its addresses named each apart, ``addresses=1024`` with one line each,
    and hid who it was. The line itself names the address as it is."""
    server = await cluster.node(rate=None)
    with caplog.at_level(logging.INFO, logger="solrace.session"):
        for host in range(1, 7):
            await _flood(server.url, f"2a01:4f8:1:2::{host}")
        server.node.repeated.stop()
    lines = _said(caplog, "rate limited")
    assert lines[0].__dict__["client"] == "2a01:4f8:1:2::1"
    assert [(r.__dict__["addresses"], r.__dict__["most"]) for r in lines[1:]] == [
        (1, "2a01:4f8:1:2::/64(5)")
    ]
