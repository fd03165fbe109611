"""Every number the protocol enforces, in one place, plus the rate limiter.

Limits are the first line of defence of a server that decodes bytes from strangers:
they bound memory and CPU per frame *before* any game code runs. They live here, not
scattered through validators, so docs/protocol.md's limits table can be checked
against one file, and ``net/`` configures websockets (``max_size``) from the same
constants the codec enforces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .errors import RateLimited

# --------------------------------------------------------------------------- versions
SUBPROTOCOL: Final = "solrace.v1"
#: In order of preference: the server picks the first one the client also offers.
SUPPORTED_SUBPROTOCOLS: Final[tuple[str, ...]] = (SUBPROTOCOL,)
#: HTTP status of a handshake refused for offering no supported subprotocol. 400, as
#: websockets itself uses: 426 would require an ``Upgrade`` header naming an HTTP
#: protocol, which is not what is missing.
HANDSHAKE_REFUSAL_STATUS: Final = 400
#: HTTP statuses of handshakes a node refuses for its connection limits
#: (solrace.net.admission): it holds as many as it may (503), or the client's address
#: does (429), or that address opens new ones faster than it may (429). All carry
#: ``Retry-After`` and a body that starts with the error code.
SERVER_FULL_STATUS: Final = 503
TOO_MANY_CONNECTIONS_STATUS: Final = 429
CONNECTING_TOO_FAST_STATUS: Final = 429
#: Seconds a client refused for the connections held is asked to wait (``Retry-After``;
#: one refused for opening them too fast is told when its address may open one again).
CONNECTION_RETRY_AFTER_S: Final = 5


# --------------------------------------------------------------------------- frames
@dataclass(frozen=True, slots=True)
class FrameLimits:
    """Decoder limits for one direction.

    ``max_frame_bytes`` bounds the whole frame; the others are passed to
    ``msgpack.unpackb`` (so oversized values are refused before they are allocated),
    except ``max_depth``, which msgpack cannot bound and the codec checks itself.
    ``max_str_bytes`` counts UTF-8 bytes, as msgpack does.
    """

    max_frame_bytes: int
    max_str_bytes: int
    max_array_len: int
    max_map_len: int
    max_depth: int


#: Client → server, enforced by the server. No client message needs more than a few
#: fields, one small map (``options``) and short strings, so these are tight.
MAX_FRAME_BYTES: Final = 16 * 1024
CLIENT_FRAME_LIMITS: Final = FrameLimits(
    max_frame_bytes=MAX_FRAME_BYTES,
    max_str_bytes=256,
    max_array_len=32,
    max_map_len=32,
    max_depth=4,
)

#: Server → client, enforced by the client. Snapshots and ``race_over`` (with every
#: racer's move log) are far larger than any request; this still bounds a hostile or
#: broken server. Clients set websockets' ``max_size`` to ``MAX_SERVER_FRAME_BYTES``.
MAX_SERVER_FRAME_BYTES: Final = 1024 * 1024
SERVER_FRAME_LIMITS: Final = FrameLimits(
    max_frame_bytes=MAX_SERVER_FRAME_BYTES,
    max_str_bytes=4096,
    max_array_len=20_000,
    max_map_len=256,
    max_depth=16,
)

#: Length of a message type string (``t``).
MAX_TYPE_LEN: Final = 32
#: Request ids are non-negative and fit in 31 bits, so every client language can hold
#: them in a plain int; clients count up and may wrap around.
MAX_REQUEST_ID: Final = 2**31 - 1
#: Largest room event version / move seq a peer may send (fits a signed 64-bit int).
MAX_VERSION: Final = 2**63 - 1
MAX_SEQ: Final = 2**31 - 1

# --------------------------------------------------------------------------- fields
#: A room numbers its racers in join order from this one (``RoomState.next_racer``):
#: no racer id is smaller, and a result file naming one is malformed (solrace verify).
FIRST_RACER_ID: Final = 1
MAX_NAME_LEN: Final = 24  # characters, after trimming surrounding white space
MAX_VARIANT_LEN: Final = 32
MAX_OPTIONS: Final = 16  # entries in a create's ``options`` map
MAX_OPTION_KEY_LEN: Final = 32
MAX_OPTION_STR_LEN: Final = 32
MAX_ROOM_ID_LEN: Final = 64
#: A race id: a room id, a dot, and 8 hex digits of the round's commitment.
MAX_RACE_ID_LEN: Final = MAX_ROOM_ID_LEN + 9
MAX_CODE_LEN: Final = 16  # what a client may send; the server issues ROOM_CODE_LEN
ROOM_CODE_LEN: Final = 6
#: Room codes are typed by humans: no 0/O or 1/I to confuse.
ROOM_CODE_ALPHABET: Final = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
MIN_TOKEN_LEN: Final = 16
MAX_TOKEN_LEN: Final = 128
#: Random bytes in a seat's secret, drawn by the server (``secrets.token_urlsafe``: 32
#: characters, 192 bits) or, the same, proposed by solrace's own client.
TOKEN_BYTES: Final = 24
#: The shortest seat secret a client may propose with ``create``/``join``/``quick``:
#: 22 url-safe base64 characters carry 132 bits, past the 128 a guess must beat.
MIN_PROPOSED_TOKEN_LEN: Final = 22
#: The fewest different characters a proposed secret may have. A resume by the token
#: alone finds its seat, so a constant or patterned one (``"T" * 32``, a client's
#: hard-coded string) would hand the seat to whoever tries it; 22 random characters
#: have fewer than 11 different about once in a million, fewer than 8 practically never.
MIN_PROPOSED_TOKEN_DISTINCT: Final = 8
MAX_MOVE_LEN: Final = 16
#: Most entries (moves and undos) a racer's log may hold in one race. ``race_over``
#: carries every racer's log, and a client decodes no frame over
#: ``SERVER_FRAME_LIMITS``: without a cap a racer replaying moves back and forth
#: through a long time limit (20 a second for 17 minutes is 20,000) made a result no
#: client could read, so nobody saw the race end. At the cap, 8 racers' logs of
#: entries of MAX_MOVE_LEN bytes fit in a frame with room to spare (tests/protocol).
MAX_LOG_LEN: Final = 5_000

#: Times a racer may take its ready flag back in one round's lobby (``ready`` false
#: after true); making itself ready is always allowed, so the room can still start.
#: Every change is an event stored in the room's stream and sent to everyone in the
#: room: toggled at the rate limit, an audit's racer stored 190 events in 10 s, and the
#: room's stream lives a day.
MAX_UNREADY: Final = 50

#: Resumes of one racer that reconnect it: one every RESUME_INTERVAL_S sustained, in
#: bursts of up to RESUME_BURST (a token bucket per racer, kept in the room's folded
#: state; a ``resume`` on the connection that already is the racer's only
#: resynchronises, and is not counted). Each such resume stores a ``presence`` online
#: in the room's stream and its connection's close an offline, each sent to everyone
#: in the room and folded by every node taking the room up; a connection's rate and
#: work buckets are fresh, so a racer reconnecting in a loop stored 630 events (and its
#: node logged 950 lines) a second. Past the bucket a resume is refused
#: ``rate_limited`` with ``retry_after_ms``: decided on the room's stored state, so it
#: holds whichever nodes the resumes reach. The burst is for an honest client on a bad
#: link, which may lose a few connections in a row (a test's racers, playing at
#: machine speed through a link that cuts every few KB, resumed 15 times in 3 s).
RESUME_INTERVAL_S: Final = 2.0
RESUME_BURST: Final = 20

#: Joins of one room's lobby from one client address (its seat digest, the address
#: connections are counted by): JOIN_BURST in a row, then one every JOIN_INTERVAL_S
#: (a token bucket per address, kept in the round's folded state; a rematch gives
#: every address its burst again). Each join stores a ``racer_joined`` and the
#: racer's token, and its ``leave`` a ``racer_left``, in a room a host keeps open for
#: a day: a soak audit's client joining a private lobby and leaving it in a loop, at
#: the client library's pace, stored 20 events and 10 tokens a second (1.7 million
#: events, some 340 MB, a day in one room). Past the bucket a join is refused
#: ``rate_limited`` with ``retry_after_ms``, decided on the stored state like the
#: resume bucket, so it holds on every node. A connection counted by no address (a
#: trusted peer's own) is not limited, as for seats.
JOIN_INTERVAL_S: Final = 2.0
JOIN_BURST: Final = 20

#: How long after a client-proposed token is claimed for a seat a resume by that token
#: alone may find the claim without its seat (or its room) and be answered
#: ``unavailable`` — the seat may still be being written — before it is told
#: ``bad_token`` (never stored: ask again). The server's writes after the claim are at
#: most five store calls (a create's code and room, then the seat's node set, read and
#: event), each waited for at most its command timeout (5 s, store.COMMAND_TIMEOUT_S);
#: a client that lost an entry's reply resumes for at least this long before it
#: gives up (a shorter window told a seat still being written ``bad_token``, and the
#: client, asking again, opened a second room beside it).
SEAT_SETTLE_S: Final = 25

MIN_RACERS: Final = 2
MAX_RACERS: Final = 8
DEFAULT_MAX_RACERS: Final = 4
#: A race needs this many racers present (and all ready) to start.
MIN_RACERS_TO_START: Final = 2
#: Seats one client address may hold in one public room (listed or quick). Racers get
#: the same deal, so a second seat is a scout: it turns cards up for the first, which
#: then plays a deal it has seen. Private rooms (friends, by code) take any number.
#: Counted by the address connections are counted by (a trusted proxy's client; a
#: trusted peer's own connections are not counted), but an IPv6 client by its /56
#: (net/admission.py, SEAT_IPV6_PREFIX). ``--seats-per-address``.
SEATS_PER_ADDRESS: Final = 1
#: Spectators one node lets watch one room at once (``--spectators-per-room``; 0: no
#: cap). Every spectator costs the node each frame the room sends (an event, a board:
#: encoded once, but framed and written once per connection), so a popular room's
#: watchers are what its racers wait behind: an audit's 8 racers at 10 moves/s each had
#: their acks' p99 at 7 ms with no spectator, 36 ms with 500 and 125 ms with 1,000 (2-core machine).
#: Past it a ``watch`` is refused ``too_many_spectators``. Each node counts its own: N
#: nodes serving a room let up to N times as many watch it.
SPECTATORS_PER_ROOM: Final = 500
MIN_TIME_LIMIT_S: Final = 60
MAX_TIME_LIMIT_S: Final = 2 * 60 * 60
DEFAULT_TIME_LIMIT_S: Final = 15 * 60
MIN_SPECTATOR_DELAY_S: Final = 0
MAX_SPECTATOR_DELAY_S: Final = 10 * 60
DEFAULT_SPECTATOR_DELAY_S: Final = 0
#: Most rooms a ``rooms`` reply lists.
MAX_ROOMS_LISTED: Final = 50
#: Most missed events replayed after ``resume``/``watch``. Past that (or past what the
#: room's stream still holds) the server replays nothing and the snapshot, which is
#: always complete, is the client's new state.
MAX_REPLAY_EVENTS: Final = 1000
#: Longest a host's ``start`` is held while the room's deal is still being certified
#: winnable; ``not_ready`` after that. A client waits this long for the reply, and its
#: usual reply time on top, before it takes the link for dead.
START_WAIT_S: Final = 15.0

# --------------------------------------------------------------------------- keepalive
#: The server pings every connection (a WebSocket ping, websockets' keepalive) this
#: often, and closes it 1011 ``keepalive ping timeout`` when a ping is not answered
#: (a pong) within KEEPALIVE_TIMEOUT_S: a client of any language answers pings within
#: that time. A client that stops reading its socket answers none, so this is what
#: closes it at the latest (docs/protocol.md §13).
KEEPALIVE_INTERVAL_S: Final = 20.0
KEEPALIVE_TIMEOUT_S: Final = 20.0
#: How long the server waits for the client's answer to its close frame before it
#: drops the TCP connection (websockets' ``close_timeout``): a client that does not
#: read never gets the close frame, and sees the connection reset instead.
CLOSE_TIMEOUT_S: Final = 10.0
#: Server output a connection may leave unread in the node's own buffer (beyond what
#: the operating system's socket buffers hold) before the connection is dropped
#: (docs/protocol.md §13).
MAX_UNREAD_BYTES: Final = 4 * 1024 * 1024
#: Server output all a node's connections together may leave unread in its buffers
#: (``solrace-server --max-unread-mib``; 0: no cap). Past it the connection holding the
#: most is dropped, as one past MAX_UNREAD_BYTES is. Without it N clients that never
#: read pinned N × MAX_UNREAD_BYTES of the node's memory, and a node takes up to 20,000
#: connections (docs/server.md, "Connection limits").
MAX_UNREAD_BYTES_PER_NODE: Final = 64 * 1024 * 1024
#: How long output may wait in the node's buffer, its writing paused for a client that
#: does not read, before the connection is dropped: the keepalive's longest wait (a
#: ping and a close both queue behind that output, so the keepalive cannot do it).
STUCK_OUTPUT_S: Final = KEEPALIVE_INTERVAL_S + KEEPALIVE_TIMEOUT_S

# --------------------------------------------------------------------------- rate
#: Sustained messages per second per connection, and the burst allowed on top.
RATE_PER_S: Final = 20.0
RATE_BURST: Final = 40.0
#: The most an operator may set them to (``solrace-server --rate-per-s``,
#: ``--rate-burst``): past the 6,630 moves a second the most a node has carried from
#: all its connections together (docs/performance.md), so a larger limit is none.
#: Unbounded, ``--rate-per-s 1e30`` was taken and announced to every client.
MAX_RATE_PER_S: Final = 10_000.0
MAX_RATE_BURST: Final = 10_000.0
#: Longest stall whose tokens a connection keeps past the burst. While the server is
#: busy with a connection's own request (its store stalled, or it waits out the
#: connection's work debt) it does not read the socket, and the frames the client
#: sends meanwhile queue: at a legal pace they are not a burst, so the tokens earned
#: meanwhile pay for them — up to this many seconds' worth, so no client banks more
#: than ``RATE_BURST + RATE_STALL_S × RATE_PER_S`` (140 frames) however long a stall.
#: (A 3.5 s Redis stall closed a racer that pipelined moves at 15/s.)
RATE_STALL_S: Final = 5.0
#: How long tokens kept past the burst last once the server reads again: long enough
#: to read what queued during the stall, short enough not to be a standing burst.
RATE_STALL_KEEP_S: Final = 2.0

# --------------------------------------------------------------------------- work
#: Some requests make the node do far more than a ping (an audit measured 10–20×): a
#: replay reads and frames up to MAX_REPLAY_EVENTS events, a resume also rebuilds the
#: racer's engine from its stored log, a listing reads up to 100 rooms. Each message
#: takes one token from the rate bucket; a request's work *beyond* that is charged, in
#: the same units (one unit ≈ one cheap message), to a second bucket per connection,
#: the work bucket. It never closes a connection: one in debt is not read until the
#: bucket is back in credit, so an honest client that reconnects with a long replay
#: just waits a moment, and no connection makes the node do more than WORK_PER_S units
#: of this work a second (plus WORK_BURST).
WORK_PER_S: Final = 10.0
WORK_BURST: Final = 40.0
#: Replayed events (``resume``/``watch``, read from the store, one frame each) that
#: cost one unit: a full replay of MAX_REPLAY_EVENTS costs 20.
REPLAY_EVENTS_PER_UNIT: Final = 50
#: A ``resume``, on top of its replay: it rebuilds the racer's engine from its log.
RESUME_COST: Final = 5.0
#: A ``list`` or ``quick``: each reads listed rooms (a per-node cache shares a listing
#: between connections, but each reply is still built and sent).
LISTING_COST: Final = 5.0
#: A ``result``: it reads one archived result from the store and sends it whole (every
#: racer's log), as large as a ``race_over``.
RESULT_COST: Final = 5.0


# --------------------------------------------------------------------------- logs
#: A log line any client can cause at will (its connection rate limited, a room
#: refused to its address, a made-up ``since``, bad input) is written at once the
#: first time, then at most once this often: one line saying how many more there were
#: and from which addresses (solrace.rooms.repeats). One address flooding and
#: reconnecting made a node write 260 lines (25 KB) a second, one for each.
REPEATED_LOG_EVERY_S: Final = 10.0
#: Addresses a repeated line counts apart in one interval; past them, its line counts
#: the rest in its total only (a spread flood cannot grow the node's memory).
REPEATED_ADDRESSES_KEPT: Final = 1024
#: Addresses a repeated line names, those that caused most.
REPEATED_ADDRESSES_NAMED: Final = 3


def replay_cost(events: int) -> float:
    """Work units of replaying ``events`` stored events."""
    return events / REPLAY_EVENTS_PER_UNIT


class TokenBucket:
    """A token bucket whose clock is an argument (sans-I/O: no clock is read here).

    The bucket holds up to ``burst`` tokens and refills at ``rate`` tokens per second;
    each message takes one. ``now`` is any monotonic time in seconds (``net/`` passes
    ``loop.time()``); tests pass plain numbers, so the limiter is tested exactly,
    without sleeping. A clock that steps backwards refills nothing rather than
    draining the bucket.

    Two refinements, both for a server that does not read a connection while it is
    handling one of its requests:

    * between :meth:`busy` and :meth:`idle` (the server is not reading), tokens are
      earned past ``burst``, up to ``stall_s`` seconds' worth for that busy period,
      and kept for ``keep_s`` once it ends — the frames a client sent at its legal
      pace meanwhile queued, and are not a burst when they are read at once;
    * :meth:`charge` takes tokens even into debt (work already done), and
      :meth:`wait_s` says how long until the bucket is back in credit.
    """

    __slots__ = (
        "_accrued",
        "_busy_since",
        "_keep_until",
        "_last",
        "_tokens",
        "burst",
        "keep_s",
        "rate",
        "stall_s",
    )

    def __init__(
        self,
        now: float,
        rate: float = RATE_PER_S,
        burst: float = RATE_BURST,
        stall_s: float = RATE_STALL_S,
        keep_s: float = RATE_STALL_KEEP_S,
    ) -> None:
        if rate <= 0 or burst < 1 or stall_s < 0 or keep_s < 0:
            raise ValueError("a token bucket needs rate > 0, burst >= 1, stall_s, keep_s >= 0")
        self.rate = rate
        self.burst = burst
        self.stall_s = stall_s
        self.keep_s = keep_s
        self._tokens = burst
        self._last = now
        self._busy_since: float | None = None
        self._keep_until = now
        #: Whether the current busy period earned tokens past the burst.
        self._accrued = False

    def _refill(self, now: float) -> None:
        if now <= self._last:
            return
        earned = (now - self._last) * self.rate
        if self._busy_since is not None:
            # Past the burst by what this busy period earned (never by what earlier
            # ones did: those are kept, not added to), and never below what is held.
            ceiling = self.burst + min(now - self._busy_since, self.stall_s) * self.rate
            held = max(self.burst, self._tokens)
            tokens = min(max(ceiling, self._tokens), self._tokens + earned)
            self._accrued = self._accrued or tokens > held
        elif now <= self._keep_until:
            tokens = min(max(self.burst, self._tokens), self._tokens + earned)
        else:
            tokens = min(self.burst, self._tokens + earned)
        self._tokens = tokens
        self._last = now

    def tokens(self, now: float) -> float:
        """Tokens available at ``now`` (refills as a side effect); below 0 in debt."""
        self._refill(now)
        return self._tokens

    def take(self, now: float, cost: float = 1.0) -> bool:
        """Take ``cost`` tokens if available. ``False`` means the message is over the
        limit; nothing is taken then, so a refused message costs nothing."""
        self._refill(now)
        if self._tokens >= cost:
            self._tokens -= cost
            return True
        return False

    def require(self, now: float, cost: float = 1.0) -> None:
        """Like :meth:`take`, but raise :class:`RateLimited` (close 1008) when over the
        limit, so the connection loop handles it like every other protocol error."""
        if not self.take(now, cost):
            raise RateLimited(
                f"more than {self.rate:g} messages/s (burst {self.burst:g}) on this connection"
            )

    def charge(self, now: float, cost: float) -> None:
        """Take ``cost`` tokens for work already done, into debt if need be."""
        self._refill(now)
        self._tokens -= cost

    def wait_s(self, now: float) -> float:
        """Seconds until the bucket is out of debt (0 if it is not in debt)."""
        self._refill(now)
        return max(0.0, -self._tokens / self.rate)

    def busy(self, now: float) -> None:
        """The server stops reading this connection (it handles one of its requests)."""
        self._refill(now)
        if self._busy_since is None:
            self._busy_since = now
            self._accrued = False

    def stalled(self, start: float, end: float) -> None:
        """The server could not read this connection from ``start`` to ``end`` (its
        whole event loop stalled): count that as busy time, as if it had been."""
        if self._busy_since is not None or end <= self._last:
            return  # busy anyway, or already counted
        self.busy(max(start, self._last))
        self.idle(end)

    def idle(self, now: float) -> None:
        """The server reads this connection again: what the busy period earned past
        the burst is kept for ``keep_s``."""
        self._refill(now)
        if self._busy_since is not None and self._accrued:
            self._keep_until = max(self._keep_until, now + self.keep_s)
        self._busy_since = None
