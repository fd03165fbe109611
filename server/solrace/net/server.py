"""The WebSocket server of one node, with ``GET /healthz`` and ``GET /metrics`` on
the same port (websockets' ``process_request`` answers plain HTTP requests before
the upgrade), protocol-version negotiation, connection limits (:mod:`.admission`),
and a graceful drain."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import http
import ipaddress
import json
import logging
import math
import os
import resource
import socket
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import NegotiationError
from websockets.frames import CloseCode as WsCloseCode
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from solrace.protocol import (
    MAX_FRAME_BYTES,
    SUPPORTED_SUBPROTOCOLS,
    CloseCode,
    CloseReason,
    ErrorCode,
    UnsupportedVersion,
)
from solrace.protocol.handshake import (
    HEALTHZ_PATH,
    METRICS_PATH,
    RATE_LIMIT_HEADER,
    format_rate_limit,
    parse_subprotocol_header,
    select_subprotocol,
)
from solrace.protocol.limits import (
    CLOSE_TIMEOUT_S,
    CONNECTION_RETRY_AFTER_S,
    KEEPALIVE_INTERVAL_S,
    KEEPALIVE_TIMEOUT_S,
    MAX_UNREAD_BYTES_PER_NODE,
    STUCK_OUTPUT_S,
)
from solrace.rooms import lobby
from solrace.rooms.clock import offset_ms, store_offset_ms
from solrace.rooms.node import Node
from solrace.rooms.repeats import AddressCounts
from solrace.store import Store
from solrace.store.errors import StoreUnavailable
from solrace.store.keeping import EVICTION_ADVICE, UNKNOWN, Eviction

from . import logs
from .admission import (
    DROPPED,
    REFUSAL_WAIT_S,
    WANTED_OPEN_FILES,
    Admission,
    CodeTries,
    Refusal,
    Ticket,
    connection_rate,
    counted_as,
    default_max_connections,
)
from .metrics import Metrics
from .session import Session, UnreadBudget
from .stalls import LoopStalls

log = logging.getLogger("solrace.server")


def _select(connection: ServerConnection, offered: Sequence[Subprotocol]) -> Subprotocol:
    try:
        return Subprotocol(select_subprotocol(offered))
    except UnsupportedVersion as exc:
        raise NegotiationError(str(exc)) from None


#: The bare code websockets' own refusals close with (docs/protocol.md §13), in place of
#: its English sentence: a frame over ``max_size`` or with too many fragments (1009), a
#: text frame that is not UTF-8 (1007), a frame that breaks RFC 6455 (1002).
_REASONS: dict[int, str] = {
    CloseCode.MESSAGE_TOO_BIG: ErrorCode.TOO_LARGE.value,
    CloseCode.INVALID_DATA: ErrorCode.BAD_FRAME.value,
    CloseCode.PROTOCOL_ERROR: ErrorCode.BAD_FRAME.value,
}


class _Protocol(ServerProtocol):
    """websockets' protocol, whose failures close with the protocol's bare error code
    as the reason, as every close of solrace does (clients switch on it)."""

    def fail(self, code: WsCloseCode | int, reason: str = "") -> None:
        super().fail(code, _REASONS.get(code, reason))

    def process_subprotocol(self, headers: Headers) -> Subprotocol | None:
        """The offered versions read as :func:`parse_subprotocol_header` reads them: an
        empty or malformed header offers nothing, and is refused ``unsupported_version``
        naming the versions this server speaks (websockets' strict parser answered it
        in its own words, with no code)."""
        offered = parse_subprotocol_header(headers.get_all("Sec-WebSocket-Protocol"))
        return self.select_subprotocol([Subprotocol(p) for p in offered])


class _Connection(ServerConnection):
    """A connection whose protocol is :class:`_Protocol`, counted by its server's
    :class:`Admission` from accept to close. websockets builds the protocol itself, so
    its class is swapped here, before any frame is read (a method stored on the
    instance would be a reference cycle: see ``RaceServer._handler``). Each server
    makes its own subclass naming its admission (:meth:`RaceServer._connection_class`):
    websockets calls the class with its own arguments only."""

    race_server: ClassVar[RaceServer]
    ticket: Ticket | None = None
    _refusal_timer: asyncio.TimerHandle | None = None
    _stuck_timer: asyncio.TimerHandle | None = None

    def pause_writing(self) -> None:
        """Output waits for a client that does not read it: drop the connection if it
        still waits :data:`STUCK_OUTPUT_S` from now. Neither the keepalive nor a close
        can: websockets' ping and close frames both wait for this output to drain
        first, so a client that stopped reading held its connection, and up to
        MAX_UNREAD_BYTES of output, for ever (a test found the 1008 close of a
        non-reading client waiting after 15 s, and nothing ever dropping it)."""
        super().pause_writing()
        self._stuck_timer = self.loop.call_later(STUCK_OUTPUT_S, self._drop_stuck)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stuck_timer is not None:
            self._stuck_timer.cancel()
            self._stuck_timer = None

    def _drop_stuck(self) -> None:
        self._stuck_timer = None
        log.warning("dropping a connection whose output has not moved for %.0f s", STUCK_OUTPUT_S)
        self.race_server.metrics.closes.labels(str(int(CloseCode.POLICY_VIOLATION))).inc()
        self.transport.abort()

    def __init__(self, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
        protocol.__class__ = _Protocol
        super().__init__(protocol, *args, **kwargs)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) else ""
        ticket = self.race_server.admission.accept(address, self.loop.time())
        # Past a limit and its margin, or from an address that does not wait its
        # Retry-After: no answer (reading the request and answering is the cost).
        if ticket is None:
            self.race_server.refused(DROPPED, self.origin())
            self.transport.abort()
            return
        self.ticket = ticket
        if ticket.refusal is not None:  # answered once its request is read, if soon
            self._refusal_timer = self.loop.call_later(REFUSAL_WAIT_S, self.transport.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._refusal_timer is not None:
            self._refusal_timer.cancel()
        if self._stuck_timer is not None:
            self._stuck_timer.cancel()
        if self.ticket is not None:
            self.race_server.admission.release(self.ticket)

    def origin(self) -> str | None:
        """The client's address for the logs: the one a trusted proxy forwarded, else
        the peer's."""
        if self.ticket is not None and self.ticket.forwarded is not None:
            return counted_as(self.ticket.forwarded)
        peer = self.remote_address
        return counted_as(str(peer[0])) if isinstance(peer, tuple) else None

    def refusal(self, forwarded_for: Sequence[str]) -> Refusal | None:
        """Why this connection's upgrade is refused, now that its request is read."""
        if self._refusal_timer is not None:
            self._refusal_timer.cancel()
        if self.ticket is None:
            return None
        return self.race_server.admission.identify(self.ticket, forwarded_for, self.loop.time())


#: Seconds between two log lines about refused connections (each says how many).
REFUSALS_LOG_EVERY_S: Final = 10.0
#: The HTTP methods the port answers (``/healthz``, ``/metrics``, the WebSocket
#: handshake): any other is 405 with ``Allow`` naming these (docs/server.md).
ALLOWED_METHODS: Final = ("GET", "HEAD")
ALLOWED: Final = ", ".join(ALLOWED_METHODS)

#: Seconds ``/healthz`` waits for the store's PING before it answers 503: well under
#: the probes' own timeouts (deploy/: Docker HEALTHCHECK 3 s, Kubernetes 3 s). With the
#: store's 5 s, a Redis that accepted connections and never answered made every probe
#: time out instead of seeing 503.
HEALTHZ_PING_TIMEOUT_S: Final = 1.0
#: Seconds one PING's answer serves every ``/healthz`` after it; those asked while it is
#: in flight share it. /healthz is public through deploy/'s nginx and answered whatever
#: the connection limits, and each probe sent a PING to the Redis every node shares: one
#: client's flood (4,200 probes a second, an audit) loaded that Redis for all of them.
#: Now a flood costs one PING a second. Load balancers and kubelets probe every few
#: seconds, so their answers are fresh, or at most a second old; a store that stops
#: answering is still a 503 within this plus HEALTHZ_PING_TIMEOUT_S; ``store_down`` and
#: draining are read live on every request.
HEALTHZ_ANSWER_REUSE_S: Final = 1.0
#: Seconds a drain may take in all before the node stops anyway, its connections' last
#: writes unmade: inside the 20 s deploy/'s files give a drain before SIGKILL
#: (TimeoutStopSec, stop_grace_period), with DRAIN_HAND_OFF_MIN_S and the store's close
#: on top. On a Redis that stalled (a partition, a frozen Redis) each racer's
#: "offline" waited out the store's 5 s timeout in turn (its room's lock), then each
#: hand-off call as long: four racers in a room took 25 s, a full room 45 s, and the
#: unit SIGKILLed the node (an audit). Nothing is lost cut short: the node's lease
#: lapses, and the other nodes record its racers offline and take its rooms up as a
#: dead node's (Node.check_rooms, the orphan sweep).
DRAIN_LIMIT_S: Final = 15.0
#: Seconds the hand-off gets even past DRAIN_LIMIT_S: a Redis that answers makes it in
#: milliseconds (and a node handed off is taken up at once, not after its lease).
DRAIN_HAND_OFF_MIN_S: Final = 1.0
#: Seconds between two looks at whether Redis evicts keys (its maxmemory-policy may be
#: changed while the node runs, by CONFIG SET or a managed service's console); /healthz
#: reports the last look. Not final: the tests look more often.
EVICTION_CHECK_S = 10.0


#: The line a handshake stripped of its upgrade headers is logged with (a repeated
#: line: at most one every 10 s, docs/server.md).
UPGRADE_STRIPPED: Final = (
    "a WebSocket handshake came without its Upgrade and Connection headers (answered"
    " 426): a proxy in front of this node that does not pass them? nginx needs"
    " proxy_set_header Upgrade $http_upgrade and proxy_set_header Connection"
    " $connection_upgrade (deploy/nginx.conf)"
)


def upgrade_stripped(headers: Headers) -> bool:
    """Whether a request is a WebSocket client's handshake — it carries the key only
    such a client sends — without the headers that make it an upgrade: what a proxy
    that does not pass them forwards (nginx sends ``Connection: close`` and no
    ``Upgrade``). An operator audit found the node answered it 426 and said nothing,
    and every racer was refused through that proxy."""
    if "Sec-WebSocket-Key" not in headers:
        return False
    upgrade = {t.strip().lower() for v in headers.get_all("Upgrade") for t in v.split(",")}
    connection = {t.strip().lower() for v in headers.get_all("Connection") for t in v.split(",")}
    return "websocket" not in upgrade or "upgrade" not in connection


def plain_http(headers: Headers) -> bool:
    """Whether a request is no WebSocket handshake at all — no key, no ``Upgrade``: a
    browser or curl at the address the "listening" line gives (a proxy's stripped
    handshake still has its key: :func:`upgrade_stripped`)."""
    return "Sec-WebSocket-Key" not in headers and "Upgrade" not in headers


def not_a_browsers_port(host: str | None, url: str, forwarded_proto: str | None = None) -> bytes:
    """What a browser at the node's port is told: websockets' own words ("You need a
    WebSocket client") named neither solrace nor the command that races there. The URL
    is the one the browser used (its ``Host``; ``wss`` when a TLS proxy says it took
    ``https``, ``X-Forwarded-Proto``), else the node's own. A hint, so the proxy's word
    is taken as it comes: it decides nothing."""
    if host and host.isascii() and host.isprintable() and " " not in host and len(host) <= 255:
        scheme = "wss" if (forwarded_proto or "").strip().lower() == "https" else "ws"
        url = f"{scheme}://{host}"
    return (
        "This is a solrace-server: its port takes the solrace protocol over WebSocket, not a"
        f" browser. Race from a terminal: solrace quick --server {url} (docs/client.md)."
        " Probes on the node's own port: /healthz, /metrics.\n"
    ).encode()


class RaceServer:
    def __init__(
        self,
        node: Node,
        host: str,
        port: int,
        admission: Admission | None = None,
        max_unread_bytes: int = MAX_UNREAD_BYTES_PER_NODE,
    ) -> None:
        self.node = node
        #: Prometheus metrics (``/metrics``); the node counts into them too.
        self.metrics = Metrics(node)
        node.metrics = self.metrics
        self.host = host
        self.port = port
        self.server: Server | None = None
        #: The connection limits; by default from this process's open-file limit.
        self.admission = admission or Admission(default_max_connections(open_files_limit()))
        self.metrics.watch_admission(self.admission)
        #: Refusals since the last log line about them, by reason, and by address.
        self._refusals: dict[str, int] = {}
        self._refused_from = AddressCounts()
        self._refusals_logged_at = -math.inf
        self._refusals_timer: asyncio.TimerHandle | None = None
        #: The event loop's stalls, which no connection's rate limit counts against it.
        self.stalls = LoopStalls()
        #: Output all connections together leave unread (``--max-unread-mib``; 0: any).
        self.unread = UnreadBudget(max_unread_bytes)
        #: The last PING /healthz sent (in flight or answered), and when it was sent.
        self._ping: asyncio.Future[bool] | None = None
        self._pinged_at = -math.inf

    def _connection_class(self) -> type[_Connection]:
        return type("_Connection", (_Connection,), {"race_server": self})

    def refused(self, reason: str, address: str | None) -> None:
        """Count a refused connection from ``address``; log the refusals at most every
        10 s, so a flood of them is a line an operator sees, not a flood of lines —
        naming the addresses refused most (it named none: which address flooded, the
        operator could not tell)."""
        self.metrics.connections_refused.labels(reason).inc()
        self._refusals[reason] = self._refusals.get(reason, 0) + 1
        self._refused_from.add(address)
        loop = asyncio.get_running_loop()
        wait = self._refusals_logged_at + REFUSALS_LOG_EVERY_S - loop.time()
        if wait > 0:  # said when the 10 s are up, even if no refusal follows
            if self._refusals_timer is None:
                self._refusals_timer = loop.call_later(wait, self._log_refusals)
            return
        self._log_refusals()

    def _log_refusals(self) -> None:
        self._refusals_timer = None
        if not self._refusals:
            return
        self._refusals_logged_at = asyncio.get_running_loop().time()
        counts = ", ".join(f"{n} {why}" for why, n in sorted(self._refusals.items()))
        self._refusals.clear()
        fields = self._refused_from.fields()
        self._refused_from.clear()
        admission = self.admission
        log.warning(
            "refusing connections (%s): %d open, at most %d in all and %s per address, %s",
            counts,
            admission.open,
            admission.max_connections,
            admission.max_per_address or "any number",
            connection_rate(admission),
            extra=fields,
        )

    async def start(self) -> None:
        """Start the node and listen. A port that cannot be had is an OSError that says
        which and why, and the node is stopped first: its loops must not outlive it
        (they would report the closing store as unavailable)."""
        self.node.start()
        try:
            self.server = await serve(
                self._handler,
                self.host,
                self.port,
                subprotocols=[Subprotocol(p) for p in SUPPORTED_SUBPROTOCOLS],
                select_subprotocol=_select,
                process_request=self._http,
                process_response=self._advertise,
                create_connection=self._connection_class(),
                max_size=MAX_FRAME_BYTES,
                compression=None,
                ping_interval=KEEPALIVE_INTERVAL_S,
                ping_timeout=KEEPALIVE_TIMEOUT_S,
                close_timeout=CLOSE_TIMEOUT_S,
            )
        except OSError as exc:
            await self.node.stop()
            if isinstance(exc, socket.gaierror):  # its codes are not errnos
                why = f"{exc.strerror} (--host takes an address or name of this machine)"
            else:
                why = os.strerror(exc.errno) if exc.errno else str(exc)
            if exc.errno == errno.EADDRINUSE:
                why += " (another server there? --port chooses another)"
            raise OSError(f"{logs.address((self.host, self.port))}: {why}") from None
        if self.port == 0:
            self.port = self.server.sockets[0].getsockname()[1]
        self.stalls.start()
        self.node.spawn(self._watch_eviction())  # stopped with the node's tasks

    async def _watch_eviction(self) -> None:
        """Every :data:`EVICTION_CHECK_S`, whether Redis evicts keys now: one error
        line when it starts to (start-up refuses such a Redis: docs/server.md), one
        info line when it stops; a Redis that cannot say changes nothing."""
        evicting = False
        while True:
            await asyncio.sleep(EVICTION_CHECK_S)
            found = await self.node.store.eviction()
            if found.policy == UNKNOWN or found.evicts == evicting:
                continue
            evicting = found.evicts
            if evicting:
                log.error("Redis evicts keys now (%s): %s", found.detail, EVICTION_ADVICE)
            else:
                log.info("Redis no longer evicts keys (%s)", found.detail)

    @property
    def url(self) -> str:
        """Where clients connect: an IPv6 address in brackets (``ws://[::1]:8765``), as a
        URL must have it — ``ws://::1:8765`` is read as host ``:`` and a bad port. A
        node listening on every address (``--host 0.0.0.0``, ``::``) is reached on this
        machine's loopback address of that family: ``ws://0.0.0.0:8765``, what the log
        said, is no address a client can use (an operator audit)."""
        host = self.host
        if (family := every_address(host)) is not None:
            host = "127.0.0.1" if family == socket.AF_INET else "::1"
        return f"ws://{logs.address((host, self.port))}"

    @property
    def listens_on(self) -> str | None:
        """For a node listening on every address of a family, what the "listening" line
        says beside its loopback :attr:`url`: which addresses, and the URL other
        machines use (this machine's name, which they may or may not resolve)."""
        family = every_address(self.host)
        if family is None:
            return None
        which = "IPv4" if family == socket.AF_INET else "IPv6"
        elsewhere = f"ws://{logs.address((socket.gethostname(), self.port))}"
        return (
            f"every {which} address ({self.host}): from another machine, this one's name "
            f"or address, e.g. {elsewhere}"
        )

    async def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.method not in ALLOWED_METHODS:
            # websockets reads any method: POST /healthz was answered 200 as GET was,
            # and a WebSocket handshake is a GET (RFC 6455 §4.1).
            body = f"{request.method} is not allowed here: use {ALLOWED}\n".encode()
            allow = [("Allow", ALLOWED)]
            status = http.HTTPStatus.METHOD_NOT_ALLOWED
            return _response(status, body, "text/plain; charset=utf-8", allow)
        path = request.path.split("?", 1)[0]
        if path == HEALTHZ_PATH:
            # 200 "ok" when the store answers and the node is not draining, else 503.
            # "Answers" is PING within a second *and* the node's last call to the store
            # not failed: PING passes whatever the user's ACL, so a node whose ACL was
            # changed under it answered 200 while it refused every request.
            # Durability (docs/deploy.md) rides along: a header on every answer, and the
            # whole report as JSON with ?format=json; it never changes the status. Nor
            # does eviction (a maxmemory-policy turned evicting while the node runs):
            # every node shares that Redis, and 503 from all would make a risk an outage.
            # Nor does the clock's offset (the wall clock minus the node's race clock,
            # which never steps): the node's races run on its own clock whatever the
            # wall clock says, so a node whose wall clock stepped serves as well as
            # before, and 503 from every node after one NTP step would be an outage.
            query = request.path.partition("?")[2].split("&")
            if "probe=live" in query:  # liveness: the process answers, whatever Redis does
                return _response(http.HTTPStatus.OK, b"alive\n", "text/plain; charset=utf-8")
            store = self.node.store
            answers, pinged = await self._store_answers()
            failing = self.node.store_down
            ok = answers and not failing and not self.node.draining
            status = http.HTTPStatus.OK if ok else http.HTTPStatus.SERVICE_UNAVAILABLE
            # Asked again at most every 10 s, by the probe that sent the PING, right after
            # its answer (a reused one may be a second old: CONFIG or INFO on a Redis
            # stalled since would wait out the store's timeout); else the last answer.
            fresh = answers and pinged
            durability = await store.durability(max_age_s=10.0 if fresh else math.inf)
            if fresh or (answers and store.last_eviction is None):
                eviction = await store.eviction(max_age_s=EVICTION_CHECK_S)
            else:  # the last answer, if any: INFO would wait out the store's timeout
                eviction = store.last_eviction or Eviction(UNKNOWN, "cannot check: no answer")
            extra = [("Solrace-Durability", durability.level)]
            if "format=json" in query:
                report = {
                    "status": "ok" if ok else "unavailable",
                    "store": _store_kind(store),
                    "store_answers": answers,
                    "store_failing": failing,
                    "draining": self.node.draining,
                    "durability": durability.level,
                    "durability_detail": durability.detail,
                    "eviction": eviction.policy,
                    "eviction_detail": eviction.detail,
                    "clock_offset_ms": offset_ms(self.node.clock),
                    "store_clock_offset_ms": store_offset_ms(self.node.clock),
                }
                body = json.dumps(report).encode() + b"\n"
                return _response(status, body, "application/json", extra)
            body = b"ok\n" if ok else b"unavailable\n"
            return _response(status, body, "text/plain; charset=utf-8", extra)
        if path == METRICS_PATH:
            return _response(http.HTTPStatus.OK, self.metrics.render(), "text/plain; version=0.0.4")
        if self.node.draining:
            return _response(http.HTTPStatus.SERVICE_UNAVAILABLE, b"draining\n", "text/plain")
        if plain_http(request.headers):  # a browser, curl: no WebSocket client at all
            headers = request.headers
            page = not_a_browsers_port(
                headers.get("Host"), self.url, headers.get("X-Forwarded-Proto")
            )
            upgrade = [("Upgrade", "websocket")]
            return _response(
                http.HTTPStatus.UPGRADE_REQUIRED, page, "text/plain; charset=utf-8", upgrade
            )
        # Probes above are answered whatever the limits: a full node is alive.
        assert isinstance(connection, _Connection)
        if upgrade_stripped(request.headers):  # websockets answers it 426
            peer = connection.remote_address
            address = counted_as(str(peer[0])) if isinstance(peer, tuple) else None
            fields = {"peer": logs.address(peer)}
            self.node.repeated.note(log, UPGRADE_STRIPPED, address, fields, logging.WARNING)
            return None
        refusal = connection.refusal(request.headers.get_all("X-Forwarded-For"))
        if refusal is None:
            return None
        self.refused(refusal.code, connection.origin())
        body = f"{refusal.code.value}: {refusal.code.message}\n".encode()
        status = http.HTTPStatus(refusal.status)
        ticket = connection.ticket
        wait = CONNECTION_RETRY_AFTER_S if ticket is None else ticket.retry_after_s
        retry = [("Retry-After", str(wait))]
        return _response(status, body, "text/plain; charset=utf-8", retry)

    async def _store_answers(self) -> tuple[bool, bool]:
        """Whether the store answers PING (within :data:`HEALTHZ_PING_TIMEOUT_S`), and
        whether this call sent that PING: one in flight is shared, and an answer
        younger than :data:`HEALTHZ_ANSWER_REUSE_S` reused, so a flood of probes sends
        Redis one PING a second, not one each."""
        now = asyncio.get_running_loop().time()
        ping, sent = self._ping, False
        if ping is None or (ping.done() and now - self._pinged_at >= HEALTHZ_ANSWER_REUSE_S):
            ping = asyncio.ensure_future(_answers_within(self.node.store, HEALTHZ_PING_TIMEOUT_S))
            self._ping, self._pinged_at, sent = ping, now, True
        # Shielded: a probe whose client went away must not cancel the others' PING.
        return await asyncio.shield(ping), sent

    def _advertise(
        self, connection: ServerConnection, request: Request, response: Response
    ) -> None:
        """Tell every connection accepted its rate limit (:data:`RATE_LIMIT_HEADER` on the
        101 answer), so that clients pace inside the limit this node runs, not the
        default: a lowered ``--rate-per-s`` closed every paced client 1008. Refusals
        (HTTP 4xx/5xx, probes) carry none: they are no connection to pace."""
        if response.status_code == http.HTTPStatus.SWITCHING_PROTOCOLS:
            node = self.node
            response.headers[RATE_LIMIT_HEADER] = format_rate_limit(
                node.rate_per_s, node.rate_burst
            )

    async def _handler(self, ws: ServerConnection) -> None:
        # websockets keeps the handshake's subprotocol callback on the connection's
        # protocol, a closure over the connection itself: a reference cycle that keeps
        # every closed connection (~50 objects) for the cyclic collector, which then
        # stalled the node for 60-330 ms at a time under load (docs/performance.md,
        # round 8). The handshake is over: drop the callback, and refcounting frees a
        # connection as soon as it closes.
        vars(ws.protocol).pop("select_subprotocol", None)
        ticket = ws.ticket if isinstance(ws, _Connection) else None
        client = None if ticket is None else ticket.forwarded
        open_room = None if ticket is None else functools.partial(self.admission.open_room, ticket)
        address = None if ticket is None else ticket.seat_key
        code_tries = None if ticket is None else CodeTries(self.admission, ticket)
        session = Session(
            ws,
            self.node,
            self.metrics,
            client,
            self.stalls,
            open_room,
            address,
            self.unread,
            code_tries,
        )
        node = self.node
        node.peers.add(session)
        try:
            await session.run()
        finally:
            node.peers.discard(session)
            self.unread.forget(session)
            await lobby.disconnected(node, session)

    async def drain(self) -> None:
        """Stop accepting, let in-flight moves reach the store, then close every
        connection with 1001 so clients reconnect elsewhere and resume."""
        node = self.node
        node.draining = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_LIMIT_S
        log.info("draining", extra={"connections": len(node.peers)})
        if self._refusals_timer is not None:  # said now: the timer would not outlive the node
            self._refusals_timer.cancel()
        self._log_refusals()
        await node.drained()
        if self.server is not None:
            self.server.close(close_connections=False)
            for session in list(node.peers):
                session.close_later(CloseCode.GOING_AWAY, CloseReason.DRAINING)
            try:
                async with asyncio.timeout_at(deadline):
                    await self.server.wait_closed()
            except TimeoutError:
                log.warning(
                    "the drain's time is up: stopping before its connections' last writes"
                    " reached the store (the other nodes record its racers offline)",
                    extra={"connections": len(node.peers), "seconds": DRAIN_LIMIT_S},
                )
        await node.stop()
        self.stalls.stop()
        with contextlib.suppress(StoreUnavailable, TimeoutError):
            async with asyncio.timeout_at(max(deadline, loop.time() + DRAIN_HAND_OFF_MIN_S)):
                await node.hand_off()
        await node.store.close()


def every_address(host: str) -> socket.AddressFamily | None:
    """The address family whose every address ``host`` listens on (``0.0.0.0``:
    IPv4; ``::``: IPv6 only, as asyncio binds it), or None for a particular address
    or a name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if not address.is_unspecified:
        return None
    return socket.AF_INET if address.version == 4 else socket.AF_INET6


async def _answers_within(store: Store, timeout_s: float) -> bool:
    """Whether the store answers PING within ``timeout_s``: a health probe must answer
    before its caller gives up, whatever the store's own timeout."""
    try:
        async with asyncio.timeout(timeout_s):
            return await store.ping()
    except TimeoutError:
        return False


def _response(
    status: http.HTTPStatus,
    body: bytes,
    content_type: str,
    extra: Sequence[tuple[str, str]] = (),
) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
            *extra,
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def raise_open_files_limit() -> int:
    """Raise this process's soft open-file limit to its hard limit, up to
    :data:`WANTED_OPEN_FILES` (a service's soft limit is often 1,024: a node's
    connections would stop there); the soft limit it then has."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = WANTED_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, WANTED_OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return open_files_limit()


def open_files_limit() -> int:
    """This process's soft limit on open files (``ulimit -n``)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return WANTED_OPEN_FILES if soft == resource.RLIM_INFINITY else soft


def _store_kind(store: Store) -> str:
    """``embedded``, ``redis-cluster`` or ``redis``: what ``/healthz`` says the node runs on."""
    if store.embedded:
        return "embedded"
    return "redis-cluster" if store.cluster else "redis"
