"""Everything the protocol refuses, as typed errors under one root.

The server's connection loop needs exactly one decision per failure: *reply* with an
``error`` message and keep the connection, or *close* it with a WebSocket close code.
That decision is carried by the exception itself (``close_code`` is ``None`` for a
reply), so the loop is one ``except ProtocolError`` and cannot get it wrong per case::

    except ProtocolError as err:
        if err.close_code is None:
            send(encode(error_reply(err)))
        else:
            close(err.close_code, err.close_reason)

Errors raised because of a *peer's* bytes or requests are :class:`ProtocolError`.
Errors that mean the server itself built something wrong (a board view carrying a
face-down card, say) are ``ValueError``/``TypeError`` instead: they are bugs to crash
on, never something to report to a client.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Final


class CloseCode(IntEnum):
    """WebSocket close codes this protocol uses (RFC 6455 §7.4.1).

    Defined here rather than imported from ``websockets`` so the protocol layer stays
    free of I/O libraries; the values are the standard ones, so ``net/`` passes them
    through unchanged.
    """

    NORMAL = 1000  # the client left, or was replaced by a newer connection
    GOING_AWAY = 1001  # server draining: reconnect (to any node) and resume
    PROTOCOL_ERROR = 1002  # a frame that breaks RFC 6455 (websockets refuses it)
    UNSUPPORTED_DATA = 1003  # a text frame: this protocol is binary only
    INVALID_DATA = 1007  # a binary frame that is not a readable envelope
    POLICY_VIOLATION = 1008  # rate limit exceeded
    MESSAGE_TOO_BIG = 1009  # a frame or a value over the limits
    INTERNAL_ERROR = 1011  # the server failed in a way that leaves the session unusable


#: The close codes that mean the peer sent bad input (the ``code`` labels of a node's
#: ``solrace_protocol_closes_total``).
BAD_INPUT_CLOSES: Final = (
    CloseCode.PROTOCOL_ERROR,
    CloseCode.UNSUPPORTED_DATA,
    CloseCode.INVALID_DATA,
    CloseCode.POLICY_VIOLATION,
    CloseCode.MESSAGE_TOO_BIG,
)


class CloseReason(StrEnum):
    """Close-frame reasons that are not an :class:`ErrorCode` (docs/protocol.md §13)."""

    REPLACED = "replaced"  # 1000: the racer connected again elsewhere; do not reconnect
    DRAINING = "draining"  # 1001: the node is shutting down; reconnect and resume
    ROOM_GONE = "room_gone"  # 1001: Redis lost the whole room; a resume says it is gone


#: ``retry_after_ms`` hints of ``unavailable`` refusals: a move whose outcome is
#: unknown, a store that failed, a room busy with other nodes' decisions.
RETRY_MOVE_MS: Final = 500
RETRY_STORE_MS: Final = 1000
RETRY_BUSY_MS: Final = 200


class ErrorCode(StrEnum):
    """Machine-readable error codes, sent as ``d.code`` of ``error`` replies and as the
    reason of protocol close frames.

    Clients switch on the code, never on the human ``message``, so the message may be
    reworded freely while the code is part of the contract (docs/protocol.md).
    """

    # Frame and envelope (the connection is closed).
    BAD_FRAME = "bad_frame"
    TOO_LARGE = "too_large"
    RATE_LIMITED = "rate_limited"
    UNSUPPORTED_VERSION = "unsupported_version"
    # Handshake refusals (an HTTP answer instead of the upgrade).
    SERVER_FULL = "server_full"
    TOO_MANY_CONNECTIONS = "too_many_connections"
    CONNECTING_TOO_FAST = "connecting_too_fast"
    # Message shape (error reply).
    BAD_MESSAGE = "bad_message"
    UNKNOWN_TYPE = "unknown_type"
    # Rooms and roles (error reply).
    UNKNOWN_ROOM = "unknown_room"
    UNKNOWN_RACE = "unknown_race"
    ROOM_FULL = "room_full"
    SAME_ADDRESS = "same_address"
    WRONG_PHASE = "wrong_phase"
    NOT_HOST = "not_host"
    NOT_RACER = "not_racer"
    NOT_READY = "not_ready"
    BAD_OPTIONS = "bad_options"
    BAD_TOKEN = "bad_token"
    TOKEN_IN_USE = "token_in_use"
    SPECTATOR_CANNOT_ACT = "spectator_cannot_act"
    ALREADY_IN_ROOM = "already_in_room"
    TOO_MANY_ROOMS = "too_many_rooms"
    TOO_MANY_SPECTATORS = "too_many_spectators"
    # Moves (error reply).
    ILLEGAL_MOVE = "illegal_move"
    BAD_NOTATION = "bad_notation"
    BAD_SEQ = "bad_seq"
    MOVE_LIMIT = "move_limit"
    # Server side (error reply).
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"

    @property
    def message(self) -> str:
        """The default human-readable sentence for this code."""
        return _MESSAGES[self]


_MESSAGES: Final[dict[ErrorCode, str]] = {
    ErrorCode.BAD_FRAME: "the frame is not a readable solrace envelope",
    ErrorCode.TOO_LARGE: "the frame or one of its values is larger than the limits allow",
    ErrorCode.RATE_LIMITED: "too many messages: slow down",
    ErrorCode.UNSUPPORTED_VERSION: "no supported protocol version was offered",
    ErrorCode.SERVER_FULL: "the server holds as many connections as it may: try again later",
    ErrorCode.TOO_MANY_CONNECTIONS: (
        "too many connections from your address: close some, then try again"
    ),
    ErrorCode.CONNECTING_TOO_FAST: (
        "too many new connections from your address in a short time: wait as long as"
        " Retry-After says, then try again"
    ),
    ErrorCode.BAD_MESSAGE: "the message has a missing, unknown or invalid field",
    ErrorCode.UNKNOWN_TYPE: "unknown message type",
    ErrorCode.UNKNOWN_ROOM: "no such room",
    ErrorCode.UNKNOWN_RACE: "this server has no finished race with that id",
    ErrorCode.ROOM_FULL: "the room is full",
    ErrorCode.SAME_ADDRESS: (
        "a racer from your address already has a seat in this public room (yours, from"
        " before? resume it with its token; a seat whose join reply was lost is freed"
        " within 30 s): race them in a private room"
    ),
    ErrorCode.WRONG_PHASE: "not possible in the room's current phase",
    ErrorCode.NOT_HOST: "only the room's host can do that",
    ErrorCode.NOT_RACER: "you are not a racer in a room",
    ErrorCode.NOT_READY: "the race needs at least two racers, all ready but the host",
    ErrorCode.BAD_OPTIONS: "unknown variant or invalid options for it",
    ErrorCode.BAD_TOKEN: "the resume token does not match a racer of this room",
    ErrorCode.TOKEN_IN_USE: (
        "the proposed token already holds a seat, or another request proposing it is being"
        " seated: resume it, or propose a fresh one"
    ),
    ErrorCode.SPECTATOR_CANNOT_ACT: "spectators cannot do that",
    ErrorCode.ALREADY_IN_ROOM: "this connection is already in a room: leave it first",
    ErrorCode.TOO_MANY_ROOMS: (
        "your address has opened too many rooms lately: join one, or try again shortly"
    ),
    ErrorCode.TOO_MANY_SPECTATORS: (
        "this room has as many spectators as this server lets watch it: try again later"
    ),
    ErrorCode.ILLEGAL_MOVE: "that move is not legal in your position",
    ErrorCode.BAD_NOTATION: "that is not a move in canonical notation",
    ErrorCode.BAD_SEQ: "the move's seq is not the one expected: resynchronise",
    ErrorCode.MOVE_LIMIT: (
        "you have made the most moves a race allows: resign, or wait for the race to end"
    ),
    ErrorCode.INTERNAL: "internal server error",
    ErrorCode.UNAVAILABLE: "the server is temporarily unavailable: retry shortly",
}


class ProtocolError(Exception):
    """Root of every error caused by what a peer sent.

    ``code`` is the machine-readable :class:`ErrorCode`; ``message`` the human text
    (defaults to the code's message); ``close_code`` is ``None`` when the right answer
    is an ``error`` reply, or the WebSocket close code when the connection must close.
    """

    close_code: int | None = None

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        self.code = code
        self.message = message if message is not None else code.message
        super().__init__(self.message)

    @property
    def close_reason(self) -> str:
        """The close frame's reason: the bare error code, so clients can switch on it,
        and always well under the 123-byte limit of RFC 6455 §5.5.1."""
        return self.code.value


class MalformedFrame(ProtocolError):
    """The frame cannot be read as an envelope at all, so there is no request id to
    answer: the connection is closed (lila-ws closes on unreadable input too).

    ``close_code`` is 1003 for a text frame, 1009 for a frame or value over the limits
    (``code`` ``too_large``) and 1007 for everything else (``code`` ``bad_frame``).
    """

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode = ErrorCode.BAD_FRAME,
        close_code: int = CloseCode.INVALID_DATA,
    ) -> None:
        super().__init__(code, message)
        self.close_code = close_code


class BadMessage(ProtocolError):
    """A readable envelope whose request is refused: the server answers with an
    ``error`` reply echoing the request id and keeps the connection.

    Despite the name it is also what the server raises for refusals decided later
    (``room_full``, ``illegal_move``, ``bad_seq``…), so every refusal goes through one
    path. ``field`` names the offending field of ``d``; ``seq`` echoes a move's seq;
    ``expected`` is the seq the server expects next (``bad_seq`` only);
    ``retry_after_ms`` hints when to retry (``unavailable``, ``too_many_rooms``); ``room`` and
    ``token`` name the seat a refused ``create``/``join``/``quick`` may have taken
    (``unavailable`` only: the client resumes it rather than taking a second one).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str | None = None,
        *,
        field: str | None = None,
        seq: int | None = None,
        expected: int | None = None,
        retry_after_ms: int | None = None,
        room: str | None = None,
        token: str | None = None,
        request_id: int | None = None,
    ) -> None:
        super().__init__(code, message)
        self.field = field
        self.seq = seq
        self.expected = expected
        self.retry_after_ms = retry_after_ms
        self.room = room
        self.token = token
        self.request_id = request_id


class RateLimited(ProtocolError):
    """The connection sent faster than its token bucket allows: close 1008.

    Closing (rather than replying) is lila-ws's policy: a client that floods is broken
    or hostile, and every reply would only feed the flood.
    """

    close_code = CloseCode.POLICY_VIOLATION

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.RATE_LIMITED, message)


class UnsupportedVersion(ProtocolError):
    """The client offered no subprotocol this server speaks. Raised during the
    handshake, before any frame, so ``net/`` turns it into an HTTP 400 whose body is
    ``str(err)`` (which names the supported versions)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)
