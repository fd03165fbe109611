"""What a user sees when something is wrong: the installed ``solrace`` command, run as a
user runs it, answers every bad argument, bad server URL and unreachable server with
one line on stderr and the exit status of docs/client.md's table — the terminal UI
commands included — and never a traceback. Room codes are typed as people type them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import websockets.asyncio.client
from solrace.net.admission import Admission, parse_networks
from solrace_client import DEFAULT_SERVER, RaceClient, ServerError, errors
from solrace_client.cli import build_parser, main
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import (
    ConnectionClosed,
    ConnectionClosedError,
    InvalidMessage,
    InvalidStatus,
)
from websockets.frames import Close
from websockets.http11 import Response

from tests.client.test_cli import FakeUI, ui  # noqa: F401  (fixture)
from tests.net.conftest import Cluster
from tests.support import terminal
from tests.support.redis import REDIS_URL

DOCS = Path(__file__).parents[2] / "docs"
DEPLOY = Path(__file__).parents[2] / "deploy"
ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=$]*[a-zA-Z~]|\][^\x07]*\x07|[=>])")


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def solrace(*args: str) -> tuple[int, str, str]:
    """The console script on a terminal, as a player runs it (tests/support/terminal.py):
    its status, what reached the terminal and its errors, escapes removed."""
    code, shown, err = await terminal.run(list(args))
    return code, ESCAPES.sub("", shown.decode(errors="replace")), ESCAPES.sub("", err)


def one_line(err: str) -> str:
    """The error, checked to be exactly one line starting ``solrace``."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("solrace"), err
    assert "Traceback" not in err
    return lines[0]


UI_COMMANDS = [["quick"], ["join", "ABC123"], ["create"], ["watch", "ABC123"]]


@pytest.mark.parametrize("command", [["rooms"], ["bot", "--quick"], *UI_COMMANDS])
async def test_a_bad_server_url_is_one_line_and_status_2(command: list[str]) -> None:
    for url, says in (
        ("ws://127.0.0.1:99999", "port 99999 is out of range (1 to 65535)"),
        ("ws://127.0.0.1:abc", "its port 'abc' is not a number"),
        # said "port ² is out of range", a digit to str.isdigit only
        ("ws://127.0.0.1:²", "its port '²' is not a number"),
        ("http://127.0.0.1:8765", "must start with ws:// or wss://"),
        ("ws://[::1", "bad server URL"),
    ):
        status, _, err = await solrace(*command, "--server", url)
        assert status == errors.EXIT_FAILED
        assert says in one_line(err)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        # each was a traceback (status 1): the host reached getaddrinfo, whose IDNA
        # encoding refused it, or the path websockets' quoting
        (
            "ws://" + "a" * 64 + ":8765",
            # quoted in its first 40 characters (solrace.quoting), and its length
            "'" + "a" * 40 + "'… (64 characters) is not a host name (label empty or too long)",
        ),
        ("ws://a..b:8765", "'a..b' is not a host name (label empty or too long)"),
        ("ws://.:8765", "'.' is not a host name (label empty or too long)"),
        # an audit: looked up, "cannot reach …: unknown host 'host with space'"; a name of
        # 10,010 characters (short labels) too, and said whole in that line
        ("ws://host with space:8765", "'host with space' is not a host name (it holds a space)"),
        (
            "ws://" + "a." * 200 + "com:8765",
            "'" + "a." * 20 + "'… (403 characters) is not a host name (longer than 253 characters)",
        ),
        # "its port '-1' is not a number": a number, not a port
        ("ws://127.0.0.1:-1", "port -1 is out of range (1 to 65535)"),
        ("ws://h\udcffst:8765", "not UTF-8 text: 'ws://h\\xffst:8765'"),
        ("ws://127.0.0.1:8765/\udcff", "not UTF-8 text: 'ws://127.0.0.1:8765/\\xff'"),
        # "cannot reach ws://…#x: bad server URL (… isn't a valid URI: fragment
        # identifier is meaningless)": websockets' words, after trying to connect
        ("ws://127.0.0.1:8765/#x", "'ws://127.0.0.1:8765/#x': a WebSocket URL takes no #"),
    ],
)
def test_a_server_url_no_connection_can_take_is_one_line_and_status_2(url: str, says: str) -> None:
    """A host name that is not one (an empty or 64-character label, a byte that is not
    UTF-8 — ``$'ws://h\\xffst'`` as a shell passes it) is a bad server URL, said before
    anything connects, not a traceback."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "solrace"), "--server", url, "rooms"],
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=60,
    )
    assert done.returncode == errors.EXIT_FAILED, done.stderr
    line = one_line(done.stderr)
    assert line.startswith("solrace: bad server URL") and says in line


@pytest.mark.parametrize(
    ("url", "example"),
    [
        ("ws://::1:8765", "ws://[::1]:8765"),
        ("ws://::1", "ws://[::1]:8765"),
        ("wss://2001:db8::5:443/", "wss://[2001:db8::5]:443"),
    ],
)
def test_an_ipv6_address_without_brackets_is_told_to_take_them(url: str, example: str) -> None:
    """``ws://::1:8765`` was "port 8765 is out of range (1 to 65535)": urllib reads the
    port after the first colon. It says the brackets, with the URL bracketed."""
    with pytest.raises(errors.BadServerURL) as refused:
        errors.check_server_url(url)
    assert str(refused.value) == (
        f"bad server URL {url!r}: an IPv6 address goes in brackets (e.g. {example})"
    )
    assert errors.check_server_url(example) == example
    with pytest.raises(errors.BadServerURL, match=r"its port '2:3' is not a number"):
        errors.check_server_url("ws://1:2:3")  # not IPv6: the port as urllib read it
    with pytest.raises(errors.BadServerURL, match=r"port 99999 is out of range"):
        errors.check_server_url("ws://[::1]:99999")


@pytest.mark.parametrize(
    ("url", "after"),
    [
        ("ws://[::1]x:8765", "'x'"),
        ("ws://[::1]8765", "'8765'"),
        ("wss://[2001:db8::5]a.b/", "'a.b'"),
    ],
)
def test_text_between_an_ipv6_address_bracket_and_its_port_is_refused(url: str, after: str) -> None:
    """urllib reads ``ws://[::1]x:8765`` as host ::1, port 8765, the ``x`` dropped: the
    URL was taken, and tried as ``ws://[::1]:8765`` (``cannot reach ws://[::1]x:8765:
    connection refused``), a typo connecting somewhere the user did not write."""
    with pytest.raises(errors.BadServerURL) as refused:
        errors.check_server_url(url)
    assert str(refused.value) == (
        f"bad server URL {url!r}: {after} follows the IPv6 address's closing bracket, "
        "where only :PORT may (e.g. ws://[::1]:8765)"
    )
    assert errors.check_server_url("ws://[::1]:8765/x") == "ws://[::1]:8765/x"
    assert errors.check_server_url("wss://[2001:db8::5]/") == "wss://[2001:db8::5]/"


def test_an_unbracketed_ipv6_url_with_a_port_of_unicode_digits_suggests_no_such_port() -> None:
    """``ws://::1:²``: ``'²'.isdigit()``, so the hint bracketed the address and kept
    the port, ``(e.g. ws://[::1]:²)``, a URL this same check refuses (its port '²' is
    not a number). A port is the digits 0-9 (solrace.digits)."""
    with pytest.raises(errors.BadServerURL) as refused:
        errors.check_server_url("ws://::1:²")
    assert "[::1]:²" not in str(refused.value), refused.value


def test_a_long_port_out_of_range_is_quoted_at_most_in_its_first_characters() -> None:
    """``ws://127.0.0.1:<5,000 nines>``: the URL was quoted cut, and then its port said
    whole, one 5 KB line (solrace.quoting)."""
    with pytest.raises(errors.BadServerURL) as refused:
        errors.check_server_url("ws://127.0.0.1:" + "9" * 5000)
    said = str(refused.value)
    assert f"port '{'9' * 40}'… (5,000 characters) is out of range (1 to 65535)" in said
    assert len(said) < 300, said[:400]


@pytest.mark.parametrize(
    "url",
    [
        "ws://a\x1b[2Jb:8765",  # ESC [: urllib's "invalid IPv6 URL"
        "ws://a\x1bb:8765",  # was tried, and said raw: "cannot reach ws://a<ESC>b:8765"
        "ws://127.0.0.1:8765/\x1b]0;pwned\x07",  # was sent, and said raw by rooms
        "ws://127.0.0.1:8765/\x9b31m",  # a C1 CSI
        "ws://127.0.0.1:8765/a\u202eb",  # a direction override
    ],
)
def test_a_server_url_with_a_control_character_is_refused_escaped(url: str) -> None:
    """A control character in ``--server``/``$SOLRACE_SERVER`` (a paste gone wrong, a
    hostile script's environment) was taken: the URL was tried and said as typed —
    ``cannot reach ws://a<ESC>b:8765``, ``no open rooms on ws://…/<ESC>]0;…`` — so the
    escape sequence reached the terminal. It is a bad server URL, said escaped."""
    with pytest.raises(errors.BadServerURL) as refused:
        errors.check_server_url(url)
    said = str(refused.value)
    assert said.isprintable(), said
    assert said.startswith(f"bad server URL {url!r}: ") and "not printable" in said, said


def test_rooms_on_an_unbracketed_ipv6_url_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["rooms", "--server", "ws://::1:8765"]) == errors.EXIT_FAILED
    line = one_line(capsys.readouterr().err)
    assert line.endswith("an IPv6 address goes in brackets (e.g. ws://[::1]:8765)")


@pytest.mark.parametrize("command", [["rooms"], ["bot", "--quick"], *UI_COMMANDS])
async def test_no_server_is_one_line_status_2_and_suggests_starting_one(
    command: list[str],
) -> None:
    url = f"ws://127.0.0.1:{closed_port()}"
    status, _, err = await solrace(*command, "--server", url)
    assert status == errors.EXIT_FAILED
    line = one_line(err)
    assert f"cannot reach {url}: connection refused" in line
    assert f"start one with: solrace-server --port {url.rpartition(':')[2]})" in line


@pytest.mark.parametrize(
    "command", [["rooms"], ["fetch", "abcdef.0123abcd"], ["bot", "--quick"], *UI_COMMANDS]
)
async def test_several_servers_none_reached_says_how_many_and_the_last_ones_reason(
    command: list[str],
) -> None:
    """``--server`` with several URLs, none reachable: one line says how many were
    tried and names them, and the reason is the last one's, naming its own host. It
    said ``cannot reach ws://127.0.0.1:P, ws://nohost-b.invalid:8765: unknown host
    '127.0.0.1'``: the reason was worked out from the URLs joined, so it named the
    first host for the last one's failure."""
    refused = f"ws://127.0.0.1:{closed_port()}"
    unknown = "ws://nohost-b.invalid:8765"
    status, _, err = await solrace(*command, "--server", f"{refused},{unknown}")
    assert status == errors.EXIT_FAILED
    assert one_line(err) == (
        f"solrace: cannot reach any of 2 servers ({refused}, {unknown}); "
        "the last: unknown host 'nohost-b.invalid'"
    )
    four = ",".join([unknown.replace("-b", f"-{c}") for c in "wxy"] + [refused])
    status, _, err = await solrace(*command, "--server", four)
    assert status == errors.EXIT_FAILED
    assert one_line(err) == (
        "solrace: cannot reach any of 4 servers (ws://nohost-w.invalid:8765 and 3 more); "
        f"the last, {refused}: connection refused — {errors.start_hint(refused)}"
    )


def test_a_very_long_server_url_is_named_cut_and_an_ordinary_one_whole() -> None:
    """A 3,000-character path was named whole in "cannot reach …" (a newcomer walk):
    one 3 KB line. Past :data:`solrace.quoting.MAX_URL_SHOWN` characters the URL is
    cut as solrace.quoting cuts a long value; a real deployment's wss:// URL, path
    included, stays whole (it is what the user copies)."""
    long = f"ws://127.0.0.1:{closed_port()}/" + "p" * 3000
    ordinary = "wss://race-eu-west-1.games.example.org:443/solrace/v1/ws?client=cli"
    refused = ConnectionRefusedError()
    for said in (
        errors.cannot_reach(long, refused),
        errors.cannot_reach([ordinary, long], refused),
        errors.cannot_reach([long, long, ordinary, long], refused),
        errors.no_reply(long),
    ):
        assert len(said) < 600 and "… (3,0" in said and "p" * 200 not in said, said[:700]
    assert errors.cannot_reach(ordinary, refused).startswith(f"cannot reach {ordinary}: ")
    assert errors.no_reply(ordinary).startswith(f"connected to {ordinary}, ")


def test_no_open_rooms_on_a_very_long_url_names_it_cut(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``solrace rooms`` of a server at a 3,000-character path that answered with no
    room said ``no open rooms on <the whole URL>; start one with: solrace create …
    --server <the whole URL again>``: 6 KB. The URL is named cut, and the command to
    copy says to give the same --server rather than a URL that is not the one typed."""
    long = "ws://127.0.0.1:8765/" + "p" * 3000

    async def no_rooms(servers: str, variant: str | None) -> tuple[str, list[object]]:
        return servers, []

    monkeypatch.setattr("solrace_client.cli._list_rooms", no_rooms)
    assert main(["rooms", "--server", long]) == 0
    out = capsys.readouterr().out
    assert "no open rooms on 'ws://127.0.0.1:8765/ppp" in out and "… (3,020 characters)" in out
    assert "p" * 200 not in out and len(out) < 400, out[:500]


def test_no_open_rooms_on_a_very_long_default_server_hints_a_command_that_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The very long URL is ``$SOLRACE_SERVER``'s, no --server typed: the hint's
    command needs no --server (server_flag), and runs as printed. It said ``solrace
    create --variant yukon and the same --server``: a --server never given, and
    words no shell runs."""
    long = "ws://127.0.0.1:8765/" + "p" * 3000

    async def no_rooms(servers: str, variant: str | None) -> tuple[str, list[object]]:
        return servers, []

    monkeypatch.setattr("solrace_client.cli._list_rooms", no_rooms)
    monkeypatch.setenv("SOLRACE_SERVER", long)
    assert main(["rooms"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("start one with: solrace create --variant yukon"), out[-200:]
    assert "p" * 200 not in out, out[:500]


async def test_wss_against_a_plain_server_says_why(cluster: Cluster) -> None:
    server = await cluster.node()
    url = server.url.replace("ws://", "wss://")
    status, _, err = await solrace("rooms", "--server", url)
    assert status == errors.EXIT_FAILED
    assert "TLS handshake failed" in one_line(err) and "try ws://" in err


@pytest.mark.parametrize("probe", ["/healthz", "/metrics", "/healthz?format=json"])
async def test_a_url_naming_a_probe_says_to_drop_the_path(probe: str, cluster: Cluster) -> None:
    """A newcomer audit: ``solrace rooms --server ws://127.0.0.1:8765/healthz`` (the
    probe's URL, from docs/server.md, with ws://) said "it answered HTTP 200, not as a
    solrace server — is that the right port?": the port was right, the path is the
    node's HTTP probe. Any other path of the node's port is its WebSocket."""
    server = await cluster.node()
    status, _, err = await solrace("rooms", "--server", server.url + probe)
    assert status == errors.EXIT_FAILED
    said = one_line(err)
    assert "right port" not in said, said
    path = probe.partition("?")[0]
    assert f"{path} is the node's HTTP probe, not its WebSocket: use {server.url}" in said, said


async def test_another_servers_probe_path_is_not_taken_for_a_nodes() -> None:
    """A review: any HTTP server's ``/healthz`` was taken for a node's probe — a 404
    from a plain web server told "/healthz is the node's HTTP probe … use
    ws://host:port", the wrong port. Only a solrace node's answer says so."""

    async def not_found(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
        await writer.drain()
        writer.close()

    web = await asyncio.start_server(not_found, "127.0.0.1", 0)
    port = web.sockets[0].getsockname()[1]
    try:
        status, _, err = await solrace("rooms", "--server", f"ws://127.0.0.1:{port}/healthz")
    finally:
        web.close()
        await web.wait_closed()
    said = one_line(err)
    assert status == errors.EXIT_FAILED
    assert "HTTP probe" not in said and "right port" in said, said


async def test_connecting_too_fast_is_one_line_saying_how_long_to_wait(cluster: Cluster) -> None:
    """A node that refuses an address opening connections too fast (429
    ``connecting_too_fast``) is said as the other refusals are, with the wait its
    Retry-After asks for: it said "it answered HTTP 429, not as a solrace server"."""
    admission = Admission(
        100, trusted=parse_networks("none"), connections_per_s=0.1, connection_burst=1
    )
    server = await cluster.node(admission=admission)
    first = await RaceClient.connect(server.url)  # the address's one connection for 10 s
    status, _, err = await solrace("rooms", "--server", server.url)
    assert status == errors.EXIT_FAILED
    said = re.fullmatch(
        f"solrace: cannot reach {re.escape(server.url)}: too many new connections from your "
        r"address to this server in a short time: wait (\d+) s, then try again",
        one_line(err),
    )
    assert said is not None, one_line(err)
    # The bucket refills one connection in 10 s; the command's own start-up (1 s and
    # more on a loaded machine: "wait 9 s") comes off the wait.
    assert 1 <= int(said[1]) <= 10, said[1]
    await first.close()


# ------------------------------------------------ TLS: trust, plain servers, proxies
@contextlib.asynccontextmanager
async def answering(response: bytes, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """A listener on 127.0.0.1 (with ``tls``, a TLS one) that answers any HTTP request
    with ``response``, as a proxy in front of a server does: its port."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(response)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=tls)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


FORBIDDEN = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def tls_context(crt: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(crt, key)
    return context


@pytest.fixture
def example_cert(tmp_path: Path) -> tuple[Path, Path]:
    """deploy/tls/make-example-cert.sh's self-signed pair (localhost, 127.0.0.1, ::1)."""
    script = DEPLOY / "tls" / "make-example-cert.sh"
    subprocess.run(["bash", str(script), str(tmp_path)], check=True, capture_output=True)
    return tmp_path / "example.crt", tmp_path / "example.key"


async def test_wss_to_a_certificate_not_trusted_says_so_and_how_to_trust_it(
    example_cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "the TLS handshake failed — a solrace-server speaks plain ws:// …; try
    ws://", for nginx with the example certificate; ws:// then got HTTP 400. The
    certificate was the trouble, and SSL_CERT_FILE, which the line names, mends it."""
    crt, key = example_cert
    async with answering(FORBIDDEN, tls_context(crt, key)) as port:
        url = f"wss://127.0.0.1:{port}/"
        status, _, err = await solrace("rooms", "--server", url)
        assert status == errors.EXIT_FAILED
        assert one_line(err) == (
            f"solrace: cannot reach {url}: 127.0.0.1 sent a TLS certificate this machine "
            "does not trust (self-signed certificate): to trust it, run with "
            "SSL_CERT_FILE=/path/to/its-ca.pem (its certificate, or its CA's, in PEM)"
        )
        monkeypatch.setenv("SSL_CERT_FILE", str(crt))  # as the line says
        status, _, err = await solrace("rooms", "--server", url)
        assert status == errors.EXIT_FAILED
        assert "it answered HTTP 403" in one_line(err)  # TLS passed: the listener spoke


async def test_a_certificate_for_another_name_is_not_told_to_be_trusted(
    tmp_path: Path,
) -> None:
    """Trusting the file does not mend a certificate made out to another host: the
    reason says that, and does not offer SSL_CERT_FILE."""
    crt, key = tmp_path / "other.crt", tmp_path / "other.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=solrace.test", "-addext", "subjectAltName=DNS:solrace.test",
         "-keyout", str(key), "-out", str(crt)],
        check=True, capture_output=True,
    )  # fmt: skip
    async with answering(FORBIDDEN, tls_context(crt, key)) as port:
        url = f"wss://127.0.0.1:{port}/"
        trusted = ssl.create_default_context(cafile=str(crt))
        with pytest.raises(ssl.SSLCertVerificationError) as refused:
            await RaceClient.connect(url, ssl=trusted, open_timeout=5)
    said = errors.connect_reason(url, refused.value)
    assert said.startswith("127.0.0.1 sent a TLS certificate made out to another name (")
    assert "SSL_CERT_FILE" not in said and "ws://" not in said


async def test_wss_to_a_plain_server_still_says_try_ws() -> None:
    """The advice the certificate case wrongly got is right for a plain listener."""

    async def handler(ws: ServerConnection) -> None:
        await ws.close()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"wss://127.0.0.1:{port}"
        status, _, err = await solrace("rooms", "--server", url)
    assert status == errors.EXIT_FAILED
    line = one_line(err)
    assert "the TLS handshake failed" in line and "try ws://" in line
    assert "certificate" not in line


async def test_ws_to_a_tls_port_of_nginx_says_use_wss() -> None:
    """Following the old advice to ws:// on nginx's 443 got "it answered HTTP 400, not
    as a solrace server — is that the right port?": it is, with wss://."""
    page = b"<html><center>The plain HTTP request was sent to HTTPS port</center></html>"
    response = b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (
        len(page),
        page,
    )
    async with answering(response) as port:
        url = f"ws://127.0.0.1:{port}/"
        status, _, err = await solrace("rooms", "--server", url)
    assert status == errors.EXIT_FAILED
    assert one_line(err) == (
        f"solrace: cannot reach {url}: that port takes TLS only (HTTPS): use wss:// "
        "instead of ws://"
    )


def redirect(location: str) -> bytes:
    """nginx's port 80 in deploy/nginx.conf: ``return 301 https://$host$request_uri``."""
    return (
        f"HTTP/1.1 301 Moved Permanently\r\nLocation: {location}\r\n"
        "Content-Length: 0\r\nConnection: close\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("location", "says"),
    [
        ("https://127.0.0.1/", "the server redirects to https://127.0.0.1/: use wss://127.0.0.1/"),
        ("http://127.0.0.1/play", "the server redirects to http://127.0.0.1/play: use ws://"),
        (
            "ftp://127.0.0.1/",
            "the server redirects to ftp://127.0.0.1/, which is not a WebSocket server",
        ),
    ],
)
async def test_a_redirect_to_a_web_address_says_where_not_bad_url(location: str, says: str) -> None:
    """ws:// to nginx's port 80 said "bad server URL (https://127.0.0.1/ isn't a valid
    URI: scheme isn't ws or wss)": the user's URL was fine, the server sends elsewhere."""
    async with answering(redirect(location)) as port:
        url = f"ws://127.0.0.1:{port}"
        status, _, err = await solrace("rooms", "--server", url)
    assert status == errors.EXIT_FAILED
    line = one_line(err)
    assert line.startswith(f"solrace: cannot reach {url}: {says}")
    assert "bad server URL" not in line and "isn't a valid URI" not in line


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["create", "--racers", "9"], "--racers: must be 2 to 8, got 9"),
        (["create", "--time-limit", "5"], "--time-limit: must be 60 to 7200 s"),
        (["create", "--spectator-delay", "11m"], "--spectator-delay: must be 0 to 600 s"),
        (["create", "--option", "draw"], "--option"),
        (["join", "AB-12!"], "is not a room code"),
        # it said "letters and digits, like K7QX2M" of 17 letters: true of them, not why
        (["join", "ABCDEFGHJKLMNPQRS"], "is not a room code: 1 to 16 letters and digits"),
        (["bot", "ABCDEFGHJKLMNPQRS"], "is not a room code: 1 to 16 letters and digits"),
        (
            ["--server", "ws://h:1", "verify", "r_x"],
            "solrace verify: it works on this computer's saved races: no --server "
            "(see solrace verify --help)",
        ),
        (
            ["replay", "r_x", "--server", "ws://h:1"],
            "solrace replay: it works on this computer's saved races: no --server "
            "(see solrace replay --help)",
        ),
        (["bot"], "solrace bot: give one of: a room CODE, --quick, --create (see solrace bot"),
        (["races", "--limit", "0"], "--limit: must be 1 to"),
        (["frobnicate"], "invalid choice"),
        (["verify", "r_nosuchrace"], "r_nosuchrace"),
    ],
)
async def test_bad_arguments_are_one_line_and_status_2(argv: list[str], says: str) -> None:
    status, _, err = await solrace(*argv)
    assert status == errors.EXIT_FAILED
    assert says in one_line(err)


def test_one_exit_status_table_in_the_docs_matches_the_code() -> None:
    client = (DOCS / "client.md").read_text()
    table = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", client, re.M))
    assert set(table) == {
        str(errors.EXIT_OK),
        str(errors.EXIT_NO),
        str(errors.EXIT_FAILED),
        str(errors.EXIT_INTERRUPTED),
        str(errors.EXIT_READER_GONE),
        str(errors.EXIT_TERMINATED),
    }
    assert "cannot be reached" in table[str(errors.EXIT_FAILED)]
    described = " ".join((build_parser().description or "").split())
    for status in table:  # `solrace --help` names every one (143 was left out)
        assert re.search(rf"\b{status} \w", described), (status, described)
    tui = (DOCS / "tui.md").read_text()
    assert "docs/client.md's table" in tui
    assert "1 when the server" not in tui  # the old, contradicting statement


# ----------------------------------------------------------------- room codes
def test_codes_are_normalised_as_the_docs_say(ui: FakeUI) -> None:  # noqa: F811
    assert main(["join", "h77 mlr", "--name", "Bob", "--server", "ws://h:1"]) == 0
    assert main(["watch", "k7qx 2m", "--server", "ws://h:1"]) == 3
    assert main(["watch", "k7q-x2m", "--server", "ws://h:1"]) == 3
    assert [call[1][-1] if call[0] == "watch" else call[2]["code"] for call in ui.calls] == [
        "H77MLR",
        "K7QX2M",
        "K7QX2M",
    ]


async def test_the_server_ignores_case_spaces_and_dashes_in_codes(cluster: Cluster) -> None:
    server = await cluster.node()
    ann, bob, eve, dan = [await RaceClient.connect(server.url) for _ in range(4)]
    await ann.create("yukon", "Ann")
    assert ann.code is not None
    typed = " ".join(ann.code.lower()[i : i + 3] for i in (0, 3))  # "h77 mlr"
    joined = await bob.join(typed, "Bob")
    assert joined["code"] == ann.code
    watching = await eve.watch(code=f" {typed}\t")
    assert watching["snapshot"]["code"] == ann.code
    dashed = await dan.watch(code=typed.replace(" ", "-"))  # "h77-mlr", written down
    assert dashed["snapshot"]["code"] == ann.code
    for client in (ann, bob, eve, dan):
        await client.close()


async def test_refusals_are_shown_in_words_not_field_paths(cluster: Cluster) -> None:
    server = await cluster.node()
    client = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as racers:
        await client.create("yukon", "Ann", max_racers=9)
    assert racers.value.data["message"].startswith("create.max_racers")  # the wire
    words = errors.refusal_of(racers.value.data, "create")
    assert words == "most racers (--racers): must be an integer in 2..8, got 9"
    with pytest.raises(ServerError) as option:
        await client.create("yukon", "Ann", options={"undo": "maybe" * 10})
    assert "options." not in errors.refusal_of(option.value.data, "create")
    assert "option undo" in errors.refusal_of(option.value.data, "create")
    with pytest.raises(ServerError) as unknown:
        await client.join("ZZZZZZ", "Bob")
    assert errors.refusal_of(unknown.value.data, "join") == (
        "no room has that code (or it has expired, or everyone left it)"
    )
    await client.close()


def test_a_refusal_names_the_code_the_user_gave() -> None:
    """It said "watch it with solrace watch CODE", the placeholder left in."""
    said = errors.refusal("wrong_phase", "racing", None, "join", "YWT9VB")
    assert said == (
        "that room takes no racers now (its race has started, or is over): watch it with "
        "solrace watch YWT9VB"
    )
    assert "CODE" in errors.refusal("wrong_phase", "racing", None, "join")  # unknown: a hint


def test_a_refused_resume_passes_on_the_servers_reason() -> None:
    """It said only "you are no longer in the saved race": not that the 30 s grace
    ran out, nor that the race can still be watched, which the server says."""
    why = "you were away longer than the 30 s grace: you can watch room K7QX2M"
    said = errors.refusal("bad_token", why, None, "resume")
    assert said == f"you are no longer in the saved race ({why})"


@pytest.mark.parametrize(
    ("url", "tried", "meant"),
    [
        ("ws://127.0.0.1", 80, "ws://127.0.0.1:8765"),
        ("wss://race.example", 443, "ws://race.example:8765"),
        ("ws://[::1]/", 80, "ws://[::1]:8765"),
    ],
)
def test_a_url_without_a_port_refused_says_which_port_was_tried(
    url: str, tried: int, meant: str
) -> None:
    """A newcomer's ``--server ws://127.0.0.1`` went to port 80 and was told only "is
    solrace-server running?" while the server listened on 8765."""
    reason = errors.connect_reason(url, ConnectionRefusedError(111, "Connection refused"))
    assert reason.startswith("connection refused — the URL names no port"), reason
    assert f"port {tried} was tried" in reason and meant in reason, reason
    with_port = errors.connect_reason("ws://127.0.0.1:9", ConnectionRefusedError())
    assert with_port == f"connection refused — {errors.start_hint('ws://127.0.0.1:9')}"


@pytest.mark.parametrize(
    ("url", "start"),
    [
        ("ws://127.0.0.1:8765", "solrace-server)"),
        ("ws://localhost:18720", "solrace-server --port 18720)"),
        ("ws://[::1]:9000/x", "solrace-server --port 9000)"),
        ("wss://example.org:8765", "solrace-server)"),
    ],
)
def test_the_hint_to_start_a_server_names_the_port_tried(url: str, start: str) -> None:
    """A newcomer's audit: ``ws://127.0.0.1:18720`` refused was told "start one with:
    solrace-server", which listens on 8765 — not the port it would still be refused on."""
    reason = errors.connect_reason(url, ConnectionRefusedError(111, "Connection refused"))
    assert reason == f"connection refused — is solrace-server running? (start one with: {start}"


def test_a_retry_after_of_other_digits_is_not_taken() -> None:
    """A review: ``"²".isdigit()`` is true and ``float("²")`` raises, outside any try:
    a proxy's odd Retry-After would have ended the reconnecting with a traceback."""

    def refused(value: str) -> InvalidStatus:
        return InvalidStatus(Response(429, "Too Many Requests", Headers({"Retry-After": value})))

    assert errors.handshake_retry_after_s(refused("²")) is None
    assert errors.handshake_retry_after_s(refused("3")) == 3.0
    assert errors.handshake_retry_after_s(refused("9999")) == errors.MAX_RETRY_AFTER_S


def _closed(
    rcvd: tuple[int, str] | None, sent: tuple[int, str] | None, rcvd_first: bool | None
) -> ConnectionClosed:
    return ConnectionClosedError(
        None if rcvd is None else Close(*rcvd),
        None if sent is None else Close(*sent),
        rcvd_first if rcvd is not None and sent is not None else None,
    )


@pytest.mark.parametrize(
    ("closed", "says"),
    [
        (_closed((1001, "draining"), (1001, "draining"), True), "the server is restarting"),
        (_closed((1001, "room_gone"), (1001, "room_gone"), True), "the server lost the room"),
        (
            _closed((1000, "replaced"), (1000, "replaced"), True),
            "a newer connection of this racer took over",
        ),
        (_closed((1008, "rate_limited"), None, None), "too many requests"),
        (
            _closed((1011, "keepalive ping timeout"), None, None),
            "the server heard nothing from this client in time",
        ),
        (_closed((1011, "internal"), None, None), "the server failed"),
        (_closed((4000, "odd"), None, None), "closed by the server (4000 odd)"),
        (_closed((4000, ""), None, None), "closed by the server (4000)"),
        (_closed((4000, "\x1b]0;PWNED\x07"), None, None), "closed by the server (4000 ?]0;PWNED?)"),
        (
            _closed(None, (1011, "keepalive ping timeout"), None),
            "no answer from the server in time",
        ),
        (_closed((1000, ""), (1000, "bye"), False), "connection closed"),  # this client's close
        (_closed(None, None, None), "connection closed"),  # no frame either way
    ],
)
def test_a_close_frame_is_told_in_words_and_a_servers_own_reason_made_printable(
    closed: ConnectionClosed, says: str
) -> None:
    """docs/protocol.md §13's closes, as a bot's "connection lost (…)" and a command's
    error say them: websockets' "received 1001 (going away) draining; then sent …" was
    printed; a server's own reason reached the terminal with its escape sequences."""
    assert errors.lost_reason(closed) == says


@pytest.mark.parametrize(
    ("reason", "says"),
    [("draining", "the server is restarting"), ("\x1b]0;PWNED\x07", "(1001 ?]0;PWNED?)")],
)
async def test_rooms_on_a_server_that_closes_says_it_was_reached_and_why(
    reason: str, says: str
) -> None:
    """A node that closes 1001 on the request (it is draining): ``rooms`` said "cannot
    reach …: the server is restarting — is solrace-server running?" of the server it had
    reached, and a hostile server's close reason reached the terminal raw."""

    async def handler(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.close(1001, reason)

    async with serve(handler, "127.0.0.1", 0) as server:
        url = f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}"
        status, _, err = await terminal.run(["rooms", "--server", url])
    assert status == errors.EXIT_FAILED
    assert "\x1b" not in err and "\x07" not in err, repr(err)
    line = one_line(err)
    assert line.startswith(f"solrace: {url} closed the connection before answering ("), line
    assert says in line and "cannot reach" not in line, line


@pytest.mark.parametrize("url", ["ws://127.0.0.1:8765/#", "ws://127.0.0.1:8765/?a=b#"])
def test_an_empty_fragment_is_no_bad_server_url(url: str) -> None:
    """websockets refuses only a fragment with something in it."""
    assert errors.check_server_url(url) == url


async def test_a_server_url_on_redis_port_says_it_is_redis_not_try_again() -> None:
    """A newcomer audit: ``solrace quick --server ws://127.0.0.1:6379`` (the port the
    README's ``--redis-url`` names) was told "the connection was closed before the
    server answered (the network, or a proxy, dropped it): try again" — Redis closes a
    WebSocket handshake unanswered, and trying again changes nothing. The failure is
    the one a real Redis gives (the test's own, on whatever port it listens)."""
    redis = urlsplit(REDIS_URL)
    with pytest.raises(InvalidMessage) as closed:
        await websockets.asyncio.client.connect(f"ws://{redis.hostname}:{redis.port or 6379}")
    said = errors.connect_reason("ws://127.0.0.1:6379", closed.value)
    assert "try again" not in said, said
    assert "port 6379 is Redis's" in said and "ws://127.0.0.1:8765" in said
    assert "--redis-url" in said
    # another port's unanswered close is still the network's (tests/client/test_flaky_link)
    assert errors.connect_reason("ws://127.0.0.1:9", closed.value) == errors.CLOSED_UNANSWERED


def _works_as_printed(command: str, server: str, env: Mapping[str, str]) -> None:
    """``command`` (``solrace watch CODE …``), parsed as the shell and ``solrace`` would,
    asks ``server`` with the environment ``env``."""
    argv = shlex.split(command)
    assert argv[0] == "solrace"
    args = build_parser().parse_args(argv[1:])
    given = getattr(args, "server", None) or env.get("SOLRACE_SERVER") or DEFAULT_SERVER
    assert given == server, command


@pytest.mark.parametrize("command", ["bot", "join"])
async def test_a_full_room_says_it_can_be_watched(command: str, cluster: Cluster) -> None:
    """A newcomer audit: ``solrace join CODE`` of a full room said only "that room is
    full" — a room whose race has started says how to watch it, and a full one can be
    watched as well. And the command works as printed: it dropped the ``--server`` the
    user typed (``solrace watch CODE`` then asked ws://127.0.0.1:8765), which it names
    unless ``$SOLRACE_SERVER`` names that server already."""
    server = await cluster.node()
    host = await RaceClient.connect(server.url)
    await host.create("yukon", "Ann", max_racers=2, private=True)
    guest = await RaceClient.connect(server.url)
    await guest.join(host.code, "Bob")
    told = f"solrace: {'join refused: ' if command == 'bot' else ''}that room is full: "
    try:
        status, _, err = await solrace(command, host.code, "--name", "Cy", "--server", server.url)
        assert status == errors.EXIT_FAILED
        said = one_line(err)
        assert said == f"{told}watch it with solrace watch {host.code} --server {server.url}"
        _works_as_printed(said.partition("watch it with ")[2], server.url, {})
        env = {"SOLRACE_SERVER": server.url}
        status, _, err = await terminal.run([command, host.code, "--name", "Cy"], env=env)
        said = one_line(ESCAPES.sub("", err))
        assert said == f"{told}watch it with solrace watch {host.code}"
        _works_as_printed(said.partition("watch it with ")[2], server.url, env)
    finally:
        await guest.close()
        await host.close()


@pytest.mark.parametrize(
    ("url", "use"),
    [
        ("127.0.0.1:19000", "ws://127.0.0.1:19000"),
        ("localhost:8765", "ws://localhost:8765"),
        ("http://127.0.0.1:8765", "ws://127.0.0.1:8765"),
        ("https://race.example.org/", "wss://race.example.org/"),
    ],
)
def test_a_url_without_ws_says_the_one_to_use(url: str, use: str) -> None:
    """A newcomer's ``--server 127.0.0.1:19000`` (the host and port the server logs)
    was told only "it must start with ws:// or wss:// (e.g. ws://127.0.0.1:8765)": an
    example on another port. Where the URL meant is plain, it is said, to copy."""
    with pytest.raises(errors.BadServerURL) as refused:
        errors.check_server_url(url)
    assert str(refused.value) == (
        f"bad server URL {url!r}: it must start with ws:// or wss:// (use {use})"
    )


def test_a_url_that_names_no_server_gets_the_example() -> None:
    with pytest.raises(errors.BadServerURL) as refused:
        errors.check_server_url("bogus")
    assert str(refused.value) == (
        "bad server URL 'bogus': it must start with ws:// or wss:// (e.g. ws://127.0.0.1:8765)"
    )


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        ("ws://127.0.0.1:", "ws://127.0.0.1:8765"),
        ("ws://[::1]:", "ws://[::1]:8765"),
        ("wss://race.example:", "ws://race.example:8765"),
    ],
)
def test_a_url_with_an_empty_port_suggests_a_url_that_works(url: str, meant: str) -> None:
    """An audit: ``--server ws://127.0.0.1:`` (the port left off after its colon) is
    accepted, tries port 80, and the hint suggested ``ws://127.0.0.1::8765`` — the
    URL's netloc, its trailing colon included, with ``:8765`` added — which is itself
    refused as a bad URL when copied."""
    errors.check_server_url(url)  # accepted (as urllib reads it: no port)
    reason = errors.connect_reason(url, ConnectionRefusedError(111, "Connection refused"))
    assert meant in reason, reason
    assert "::8765" not in reason.replace("[::1]", ""), reason
