"""Which connections a node takes: at most so many in all, and so many per address.

Why: every connection costs the node a file descriptor, and a node out of them can
no longer accept anyone, answer ``/healthz``, or reconnect to Redis. Measured before
this existed: a node whose open-file limit was 200 took 183 idle connections from one
client, then answered nobody (not even ``/healthz``) and logged nothing, until that
client let go. Under systemd a service's limit is 1,024 unless raised. So a node
counts its sockets, keeps a reserve of descriptors for its own links, and refuses the
connections past its limits with an HTTP answer that says why (docs/protocol.md §1):

- ``server_full`` (503): the node holds :attr:`Admission.max_connections` sockets;
- ``too_many_connections`` (429): the client's address holds
  :attr:`Admission.max_per_address` of them, so one address cannot take the node.

The address of a connection is the peer's, unless the peer is in a *trusted* network
(by default loopback alone: the machine itself, nginx beside the node; a container
network's or a LAN proxy's range is named by the operator). A trusted peer's own
address is never capped (it is a proxy or the operator's own tools, speaking for many
people); when it forwards
``X-Forwarded-For``, the last entry no trusted proxy holds (the client as the proxies
saw it) is the address capped. An IPv6 client is counted by its /64, which one user
usually holds whole.

The same address is what a node counts the rooms it opens by: at most
:attr:`Admission.rooms_per_minute` a minute (a token bucket, that many at once),
past which ``create`` and a ``quick`` that would open a room are refused
``too_many_rooms`` with a ``retry_after_ms`` (docs/protocol.md). Why: a room costs
whoever opens it nothing, and each one may keep the node's two solver workers busy
certifying its deal, or sit in the listing ``quick`` reads. An audit measured both
(100 junk lobbies in 10 s hid a waiting quick room; 40 certifying rooms in 30 s
delayed an honest room's deal by 29 s), each from connections that opened a room and
hung up at once: the connection cap does not count connections that are gone, so the
count of rooms outlives them.

The same address is what a node counts the connections it *opens* by: past a burst of
:attr:`Admission.connection_burst`, :attr:`Admission.connections_per_s` a second (a
token bucket), past which a handshake is answered ``connecting_too_fast`` (429) with
the ``Retry-After`` its bucket needs. Why: the cap on connections held at once does
not see a client that reconnects in a loop — it holds one at a time. Measured on a
real node (2 cores, Redis on the machine): one address opening and closing plain
handshakes as fast as it could got 2,900 a second accepted and took the node from 2 %
to 70 % CPU; resuming a seated racer with its valid token in a loop, 620-880 a second,
each a Redis read (HGETALL) before the racer's resume bucket refused it; meanwhile an
honest racer from another address saw its moves' p50 go from 1.8 to 3.8 ms and p99 from
5 to 13 ms. Checked once the request is read (a forwarded client is known only then);
a refused attempt takes nothing from the bucket and costs the node an accept, the
request's read and a short answer: no upgrade, no session, no store — and past
:data:`CONNECTING_TOO_FAST_ANSWERED` answers in a row, only the accept (A/B on the same
floods: 240-280 µs of the node's CPU an attempt without the cap, 90-110 µs with it).

This module is the pure decision (sans-I/O, as :mod:`solrace.protocol`): it reads no
socket and no clock (the time is passed in); :mod:`solrace.net.server` calls it when a
socket is accepted, when its request has been read, and when it closes, and a session
when its client asks to open a room.
"""

from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from solrace.protocol import ErrorCode
from solrace.protocol.handshake import exact_number
from solrace.protocol.limits import (
    CONNECTING_TOO_FAST_STATUS,
    CONNECTION_RETRY_AFTER_S,
    SERVER_FULL_STATUS,
    TOO_MANY_CONNECTIONS_STATUS,
    TokenBucket,
)
from solrace.quoting import quoted

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Connections one address may hold at once by default (``--max-connections-per-address``):
#: a household or a club behind one address races and watches with a few dozen.
DEFAULT_MAX_PER_ADDRESS: Final = 64
#: Rooms one address may open a minute by default (``--rooms-per-minute-per-address``),
#: and at once: a household opens a few an evening (a rematch opens none, a ``quick``
#: that finds a room none), and a club behind one address a dozen at a time.
DEFAULT_ROOMS_PER_MINUTE: Final = 12
#: Addresses whose room counts are kept before the full ones (an address that opened
#: nothing for a minute) are forgotten; the bound doubles with what is left.
ROOM_COUNTS_KEPT: Final = 4096
#: Room codes naming no room one address may try a minute on a node, past
#: :data:`CODE_MISS_BURST`: a ``join`` or ``watch`` by a code refused ``unknown_room``
#: takes one, a code naming a room none. Why: a code is 6 characters of 32 (2**30), and
#: nothing else counted them: one address's 64 connections tried 1,083 a second on a real
#: node at the message rate, which finds a private room among a thousand in about 16
#: minutes (a security audit). At 10 a minute that address needs months. A person
#: mistypes a code a few times; a household behind one NAT shares the burst.
DEFAULT_CODE_MISSES_PER_MINUTE: Final = 10
#: Codes naming no room one address may try at once (a fresh or rested address).
CODE_MISS_BURST: Final = 20
#: New connections one address may open at once (``connection_burst``): as many as it
#: may hold (``--max-connections-per-address``' default; a node started with a larger
#: cap takes that as its burst: :func:`connection_burst_for`), so a household or a club
#: behind one NAT whose link dropped gets every window, bot and spectator back in one
#: go however many of its 64 it held — each reconnects within a second or two of the
#: others (the client's backoff starts at 0.2 s) — and a player's ``solrace`` commands
#: (``rooms``, ``fetch``, ``replay``: one connection each) never meet it.
CONNECTION_BURST: Final = DEFAULT_MAX_PER_ADDRESS


def connection_burst_for(max_per_address: int) -> int:
    """The burst of new connections for a node whose address cap is ``max_per_address``
    (0: none): at least :data:`CONNECTION_BURST`, and what the cap lets an address hold,
    so that one whose link dropped gets all of them back at once (a review: a club's
    NAT under ``--max-connections-per-address 300`` would have waited ~47 s)."""
    return max(CONNECTION_BURST, max_per_address)


#: New connections one address may open a second past that burst, sustained, by default
#: (``--connections-per-second-per-address``; 0: no cap). A person opens a connection a
#: race, or a command; a household on a bad link reconnects every racer's session a few
#: times a minute (a test's racers through a link cut every few KB: 15 resumes in 3 s,
#: 5 a second, which is 5 a second for the whole household only if all of it is on that
#: link at once, and the burst takes the rest). An abuser opened 2,900 a second: 5 cuts
#: that to 1/600 once its burst is spent, and the burst refills in 13 s.
DEFAULT_CONNECTIONS_PER_S: Final = 5.0
#: Addresses whose connection counts are kept before the full ones (an address that
#: opened none for ``CONNECTION_BURST / connections_per_s`` seconds, 13 s by default) are
#: forgotten; the bound doubles with what is left, as for the rooms.
CONNECTION_COUNTS_KEPT: Final = 4096
#: The most connections a node takes by default, whatever its open-file limit: about
#: 17 KB each when idle (measured), and far more than one core serves moves for.
MAX_CONNECTIONS_CEILING: Final = 20_000
#: The most connections a connection count (``--max-connections``,
#: ``--max-connections-per-address``, ``--spectators-per-room``) may name: Linux's
#: default cap on one process's file descriptors (``fs.nr_open``, 2**20), and each
#: connection is one, so no node holds more. Unbounded, ``--max-connections 10**30``
#: was taken and logged as the node's cap, and a per-address cap of 400 digits failed
#: every connection (HTTP 500: an OverflowError in its token bucket).
MOST_CONNECTIONS: Final = 1_048_576
#: The most ``--rooms-per-minute-per-address`` may name: a thousand rooms a second,
#: far past what a node opens (each room's deal is certified by the solver); a
#: larger one is no cap, which 0 says. One of 400 digits failed every ``create``
#: (``internal``: an OverflowError).
MAX_ROOMS_PER_MINUTE: Final = 60_000
#: The most ``--connections-per-second-per-address`` may name: 30 times the 2,900
#: handshakes a second one address's flood got accepted by a node with no cap
#: (docs/server.md, "Connection limits"); a larger one is no cap, which 0 says.
MAX_CONNECTIONS_PER_S: Final = 100_000
#: File descriptors a node keeps for itself beyond its connections (Redis links, the
#: solver's worker processes, the embedded engine, logs, sockets being refused): at
#: most this many, and at most a quarter of a small limit.
FD_RESERVE: Final = 256
#: The open-file limit a node raises its own soft limit to, where the hard limit allows.
WANTED_OPEN_FILES: Final = 65_536
#: Prefix length an IPv6 client is counted by.
IPV6_PREFIX: Final = 64
#: An IPv6 client's seats in a public room count by this prefix (Ticket.seat_key), wider
#: than a connection's /64: a home line is delegated a /56 (or a /48) and could hold a
#: seat per /64 of it.
SEAT_IPV6_PREFIX: Final = 56
#: An IPv6 client's room codes that name no room count by this prefix (Ticket.code_key):
#: a /48 is one site, and a tunnel broker hands one out for free — 65,536 /64s, each
#: with a guesser's burst of its own.
CODE_IPV6_PREFIX: Final = 48
#: Sockets one address may hold beyond its share while they wait for their refusal;
#: past them its new sockets are closed at once, unanswered.
REFUSALS_PER_ADDRESS: Final = 8
#: Seconds a refused socket may take to send its request (the refusal is its answer)
#: before it is dropped without one.
REFUSAL_WAIT_S: Final = 2.0
#: ``connecting_too_fast`` answers an address gets in a row; past them its sockets are
#: closed at once, unanswered, until its bucket holds a connection again. Why: an
#: answered refusal costs the node nearly what a bare handshake did (reading the
#: request, answering it): an abuser that did not wait got 2,000 a second and kept the
#: node at 47-50 % CPU (56-58 % with no cap). A client that waits its Retry-After never
#: meets this; a household behind one NAT gets this many clear answers, the rest of its
#: hasty attempts a closed socket, which its backoff retries. Only an address known at
#: accept (a direct peer's): a trusted proxy's client is known once its request is read.
CONNECTING_TOO_FAST_ANSWERED: Final = 8
#: The words ``--trusted-proxies`` takes for groups of networks.
NAMED_NETWORKS: Final[dict[str, tuple[str, ...]]] = {
    "loopback": ("127.0.0.0/8", "::1/128"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
}
#: Trusted by default: the machine itself (nginx on the host, deploy/nginx.conf) and
#: nothing else. Why not the private ranges too (the default before): a LAN client is a
#: private address, and a trusted one is uncapped and believed when it names another
#: client in ``X-Forwarded-For`` — a real node capped at 2 per address admitted 10
#: connections from fd00::2, each naming another address. A proxy on a container or
#: LAN network is named with ``--trusted-proxies`` (deploy/compose.yaml, deploy/k8s).
DEFAULT_TRUSTED: Final = "loopback"


class Refusal(enum.Enum):
    """Why a connection is refused, with the HTTP status and the error code it gets."""

    SERVER_FULL = (ErrorCode.SERVER_FULL, SERVER_FULL_STATUS)
    TOO_MANY_CONNECTIONS = (ErrorCode.TOO_MANY_CONNECTIONS, TOO_MANY_CONNECTIONS_STATUS)
    CONNECTING_TOO_FAST = (ErrorCode.CONNECTING_TOO_FAST, CONNECTING_TOO_FAST_STATUS)

    @property
    def code(self) -> ErrorCode:
        return self.value[0]

    @property
    def status(self) -> int:
        return self.value[1]


#: The ``reason`` of a socket dropped unanswered (past the limits and their margin).
DROPPED: Final = "dropped"
#: Every ``reason`` label of ``solrace_connections_refused_total``.
REFUSAL_REASONS: Final = (*(str(refusal.code) for refusal in Refusal), DROPPED)


def parse_networks(text: str) -> tuple[Network, ...]:
    """``--trusted-proxies``: addresses, networks and the words ``loopback`` and
    ``private``, separated by commas; ``none`` for none. Raises ValueError saying
    which entry is not one."""
    if text.strip().lower() == "none":
        return ()
    networks: list[Network] = []
    for entry in text.split(","):
        entry = entry.strip()
        named = NAMED_NETWORKS.get(entry.lower())
        if named is not None:
            networks.extend(ipaddress.ip_network(n) for n in named)
            continue
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            words = ", ".join(NAMED_NETWORKS)
            raise ValueError(
                f"{quoted(entry)} is not an address or network (e.g. 10.0.0.0/8, 192.0.2.7, ::1, "
                f"or {words}; none: trust none)"
            ) from None
    if not networks:
        raise ValueError("names no network (none: trust no proxy)")
    return tuple(networks)


def default_max_connections(open_files: int) -> int:
    """The connections a node takes when not told: its open-file limit less a
    reserve for its own descriptors, at most :data:`MAX_CONNECTIONS_CEILING`."""
    return max(1, min(MAX_CONNECTIONS_CEILING, open_files - _reserve(open_files)))


def _reserve(count: int) -> int:
    return min(FD_RESERVE, count // 4)


def _address(text: str) -> Address | None:
    """An address, from ``X-Forwarded-For`` too: some proxies write the client's port
    beside it (``198.51.100.1:40001``, ``[2001:db8::5]:40001``), and an entry read as
    no address left its client uncounted (a seat audit took every seat of a room).
    An IPv6 scope id (``fe80::1%eth0``) is dropped: it names an interface of the
    machine that wrote it, and ipaddress keeps anything after the ``%`` — a client
    behind a trusted proxy wrote ``client=2a01:4f8::1%x room=r_forged`` into the log."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    text = text.partition("%")[0]
    try:
        found = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def _key(address: Address) -> str:
    """What an address is counted by: itself, or its /64 for IPv6."""
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False))
    return str(address)


def counted_as(text: str) -> str:
    """What the logs count a client address by (solrace.rooms.repeats): as connections
    are counted, an IPv6 address by its /64 — one user usually holds the whole /64, and
    a flood spread over its addresses read as 1,024 addresses of one line each."""
    address = _address(text)
    return text if address is None else _key(address)


@dataclass(eq=False)
class Ticket:
    """One accepted socket, from its accept until it closes."""

    #: The address it is counted against, or None while unknown or not capped.
    key: str | None = None
    #: Why it will be refused once its request is read; None if admitted so far.
    refusal: Refusal | None = None
    trusted: bool = False
    released: bool = False
    #: The client a trusted proxy named (``X-Forwarded-For``), for the logs.
    forwarded: str | None = None
    #: Whole seconds the refused client is asked to wait (``Retry-After``).
    retry_after_s: int = CONNECTION_RETRY_AFTER_S

    @property
    def seat_key(self) -> str | None:
        """The address a public room seats once (rooms.peer.Peer.address): the one the
        ticket is counted against, an IPv6 client's by its /56; None if not counted."""
        return self._wider(SEAT_IPV6_PREFIX)

    @property
    def code_key(self) -> str | None:
        """The address room codes naming no room are counted by (Admission.code_wait):
        the one the ticket is counted against, an IPv6 client's by its /48; None if
        not counted."""
        return self._wider(CODE_IPV6_PREFIX)

    def _wider(self, prefix: int) -> str | None:
        """The ticket's address, an IPv6 /64 widened to ``prefix``; None if none."""
        if self.key is None:
            return None
        if ":" in self.key:  # an IPv6 /64 (_key)
            network = ipaddress.IPv6Network(self.key)
            return str(network.supernet(new_prefix=prefix))
        return self.key


class AddressBucket(TokenBucket):
    """An address's token bucket, and the refusals it was answered since it last had a
    token (:data:`CONNECTING_TOO_FAST_ANSWERED`)."""

    __slots__ = ("refused",)

    def __init__(self, now: float, rate: float, burst: float) -> None:
        super().__init__(now, rate, burst)
        self.refused = 0


class AddressBuckets(dict[str, AddressBucket]):
    """A token bucket per address, outliving the address's connections (that is their
    point), so bounded otherwise: past ``kept`` addresses (or twice those the last
    pass left, if more: each pass costs a look at them all), the addresses whose bucket
    is full again are forgotten — as if never seen, which a full bucket is."""

    def __init__(self, kept: int) -> None:
        super().__init__()
        self.kept = kept
        #: Buckets left by the last pass (the next waits for twice as many).
        self._left = 0

    def take(self, key: str, now: float, per_s: float, burst: float) -> float | None:
        """``key`` spends one token at ``now``: None if it had one, else the seconds
        until it has (nothing is taken then)."""
        bucket = self.bucket(key, now, per_s, burst)
        if bucket.take(now):
            bucket.refused = 0
            return None
        bucket.refused += 1
        return (1 - bucket.tokens(now)) / bucket.rate

    def bucket(self, key: str, now: float, per_s: float, burst: float) -> AddressBucket:
        """``key``'s bucket, a full one made at ``now`` if it has none."""
        bucket = self.get(key)
        if bucket is None:
            self._forget(now)
            bucket = self[key] = AddressBucket(now, per_s, burst)
        return bucket

    def hasty(self, key: str, now: float, answered: int) -> bool:
        """Whether ``key`` was refused ``answered`` times in a row and has no token yet."""
        bucket = self.get(key)
        return bucket is not None and bucket.refused >= answered and bucket.tokens(now) < 1

    def _forget(self, now: float) -> None:
        if len(self) < max(self.kept, 2 * self._left):
            return
        for key, bucket in list(self.items()):
            if bucket.tokens(now) >= bucket.burst:
                del self[key]
        self._left = len(self)


@dataclass
class Admission:
    """The counts of one node. ``max_per_address`` 0 caps no address;
    ``rooms_per_minute`` 0 lets an address open any number of rooms;
    ``connections_per_s`` 0 lets it open connections at any rate."""

    max_connections: int
    max_per_address: int = DEFAULT_MAX_PER_ADDRESS
    trusted: Sequence[Network] = field(default_factory=lambda: parse_networks(DEFAULT_TRUSTED))
    rooms_per_minute: int = DEFAULT_ROOMS_PER_MINUTE
    connections_per_s: float = DEFAULT_CONNECTIONS_PER_S
    connection_burst: int = CONNECTION_BURST
    #: Sockets open now (admitted or about to be refused).
    open: int = 0
    _by_key: dict[str, int] = field(default_factory=dict)
    #: Addresses whose room counts are kept before full ones are forgotten.
    room_counts_kept: int = ROOM_COUNTS_KEPT
    #: Addresses whose connection counts are kept before full ones are forgotten.
    connection_counts_kept: int = CONNECTION_COUNTS_KEPT
    #: Codes naming no room an address may try a minute (0: any number), and at once.
    code_misses_per_minute: int = DEFAULT_CODE_MISSES_PER_MINUTE
    code_miss_burst: int = CODE_MISS_BURST
    #: The rooms each address may still open (kept after its connections close).
    _rooms: AddressBuckets = field(init=False)
    #: The connections each address may still open (kept after they close).
    _connects: AddressBuckets = field(init=False)
    #: The codes naming no room each address may still try (kept after it hangs up).
    _code_misses: AddressBuckets = field(init=False)

    def __post_init__(self) -> None:
        self._rooms = AddressBuckets(self.room_counts_kept)
        self._connects = AddressBuckets(self.connection_counts_kept)
        self._code_misses = AddressBuckets(self.room_counts_kept)

    def code_wait(self, ticket: Ticket, now: float) -> float | None:
        """A connection of ``ticket`` asks to look a room code up at ``now`` (monotonic
        seconds): None if it may, else the seconds until its address may try one again
        (it tried too many that named no room: :meth:`code_missed`). Refused before the
        lookup, a code that names a room is refused as one that names none, so the
        refusal tells nothing of which codes exist. A connection counted against no
        address is never refused."""
        key = ticket.code_key
        if key is None or not self.code_misses_per_minute:
            return None
        bucket = self._code_misses.get(key)
        if bucket is None:
            return None  # a full bucket (never counted, or forgotten full)
        tokens = bucket.tokens(now)
        return None if tokens >= 1 else (1 - tokens) / bucket.rate

    def code_missed(self, ticket: Ticket, now: float) -> None:
        """The code a connection of ``ticket`` looked up at ``now`` named no room:
        counted against its address — into debt if its other connections missed
        meanwhile (each passed :meth:`code_wait` before its lookup), which it waits out."""
        key = ticket.code_key
        if key is None or not self.code_misses_per_minute:
            return
        per_minute = self.code_misses_per_minute
        self._code_misses.bucket(key, now, per_minute / 60, self.code_miss_burst).charge(now, 1)

    def open_room(self, ticket: Ticket, now: float) -> float | None:
        """A connection of ``ticket`` asks to open a room at ``now`` (monotonic
        seconds): None if it may (counted), else the seconds until its address may
        open one again. A connection counted against no address (a trusted peer's own,
        as for connections) is never refused."""
        key = ticket.key
        if key is None or not self.rooms_per_minute:
            return None
        per_minute = self.rooms_per_minute
        return self._rooms.take(key, now, per_minute / 60, per_minute)

    @property
    def drop_at(self) -> int:
        """Past this many open sockets a new one is closed at once, unanswered: the
        sockets waiting for their refusal may take at most half the reserve that
        :func:`default_max_connections` keeps beside ``max_connections``."""
        return self.max_connections + max(1, _reserve(self.max_connections) // 2)

    def holds(self, key: str) -> int:
        return self._by_key.get(key, 0)

    def is_trusted(self, address: Address | None) -> bool:
        return address is not None and any(address in network for network in self.trusted)

    def accept(self, peer: str, now: float) -> Ticket | None:
        """A socket from ``peer`` (its IP address as text) was accepted at ``now``
        (monotonic seconds). None: close it at once, unanswered (too many sockets
        already, in all or from its address; or its address was answered
        ``connecting_too_fast`` :data:`CONNECTING_TOO_FAST_ANSWERED` times in a row and
        may not connect yet); else its ticket, refused or not. A socket from an address
        that is not trusted counts against that address from now until it closes,
        whatever its answer, so one address holds at most its share plus
        :data:`REFUSALS_PER_ADDRESS`."""
        if self.open >= self.drop_at:
            return None
        address = _address(peer)
        trusted = self.is_trusted(address)
        key = None if address is None or trusted else _key(address)
        held = 0 if key is None else self.holds(key)
        share = self.max_per_address
        if share and held >= share + REFUSALS_PER_ADDRESS:
            return None
        if key is not None and self._connects.hasty(key, now, CONNECTING_TOO_FAST_ANSWERED):
            return None
        self.open += 1
        ticket = Ticket(trusted=trusted)
        if share and held >= share:
            ticket.refusal = Refusal.TOO_MANY_CONNECTIONS
        elif self.open > self.max_connections:
            ticket.refusal = Refusal.SERVER_FULL
        if key is not None:
            self._hold(ticket, key)
        return ticket

    def identify(self, ticket: Ticket, forwarded_for: Iterable[str], now: float) -> Refusal | None:
        """The ticket's request has been read at ``now`` (monotonic seconds), with these
        ``X-Forwarded-For`` values: the refusal it gets, or None if it is admitted. Only
        a trusted peer's header is believed (:meth:`forwarded_client`). An admitted
        connection counted against an address spends one of the new connections that
        address may open (:meth:`_opening`)."""
        if ticket.trusted and ticket.key is None:
            client = self.forwarded_client(forwarded_for)
            if client is not None:
                ticket.forwarded = str(client)
                if ticket.refusal is None:
                    self._count(ticket, _key(client), now)
        elif ticket.refusal is None and ticket.key is not None:
            self._opening(ticket, ticket.key, now)
        return ticket.refusal

    def forwarded_client(self, forwarded_for: Iterable[str]) -> Address | None:
        """The client a trusted proxy names: the last ``X-Forwarded-For`` entry that is
        not itself a trusted proxy (each proxy appends the address it saw, so entries
        left of an untrusted one are that client's own claims); None if every entry
        is trusted, or the first untrusted one is unreadable."""
        entries = [e for value in forwarded_for for e in value.split(",") if e.strip()]
        for entry in reversed(entries):
            address = _address(entry)
            if address is None or not self.is_trusted(address):
                return address
        return None

    def _count(self, ticket: Ticket, key: str, now: float) -> None:
        """Admit ``ticket`` against ``key``, or refuse it (its request is read: it is
        answered and closed at once, so it is not held)."""
        if self.max_per_address and self.holds(key) >= self.max_per_address:
            ticket.refusal = Refusal.TOO_MANY_CONNECTIONS
        elif self._opening(ticket, key, now):
            self._hold(ticket, key)

    def _opening(self, ticket: Ticket, key: str, now: float) -> bool:
        """``key`` opens ``ticket``'s connection at ``now``: True if its bucket allows
        it, else False with the ticket refused and told when to come back (whole
        seconds, at least one: ``Retry-After`` takes no fraction)."""
        if not self.connections_per_s:
            return True
        wait = self._connects.take(key, now, self.connections_per_s, self.connection_burst)
        if wait is None:
            return True
        ticket.refusal = Refusal.CONNECTING_TOO_FAST
        ticket.retry_after_s = max(1, math.ceil(wait))
        return False

    def _hold(self, ticket: Ticket, key: str) -> None:
        ticket.key = key
        self._by_key[key] = self.holds(key) + 1

    def release(self, ticket: Ticket) -> None:
        """The ticket's socket closed (idempotent)."""
        if ticket.released:
            return
        ticket.released = True
        self.open -= 1
        if ticket.key is not None:
            left = self._by_key[ticket.key] - 1
            if left:
                self._by_key[ticket.key] = left
            else:
                del self._by_key[ticket.key]


@dataclass(frozen=True)
class CodeTries:
    """The room codes one connection's address may still try (Admission.code_wait,
    Admission.code_missed), for its session."""

    admission: Admission
    ticket: Ticket

    def wait_s(self, now: float) -> float | None:
        return self.admission.code_wait(self.ticket, now)

    def missed(self, now: float) -> None:
        self.admission.code_missed(self.ticket, now)


def connection_rate(admission: Admission) -> str:
    """The cap on new connections, as the node's log lines say it."""
    if not admission.connections_per_s:
        return "new ones at any rate"
    return (
        f"{exact_number(admission.connections_per_s)} new a second per address "
        f"(burst {admission.connection_burst})"
    )
