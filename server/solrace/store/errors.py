"""Errors raised by :mod:`solrace.store`.

Everything the store raises on purpose derives from :class:`StoreError`, so callers
(net/) can catch one root and never import anything from ``redis``. Redis' own
exceptions never escape: connection and timeout failures become
:class:`StoreUnavailable`, and so do Redis' refusals for a state of its own (out of
memory, a read-only replica…: :class:`StoreRefusing`); unexpected server replies become
a plain :class:`StoreError`.
Programming errors (a malformed room id, a negative sequence number) are ``ValueError``:
they are bugs in the caller, not conditions to handle at run time.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AUTH_REFUSALS",
    "CodeTaken",
    "HeadLost",
    "StoreClosed",
    "StoreError",
    "StoreForbidden",
    "StoreRefusing",
    "StoreUnavailable",
    "VersionConflict",
]


#: What Redis and Valkey say when they refuse a connection's credentials (redis-py
#: raises AuthenticationError for some, a plain ConnectionError for others): start-up
#: refuses such a URL (net.main), and a running node logs it as such (_errors.translate).
AUTH_REFUSALS: Final = (
    "NOAUTH",
    "WRONGPASS",
    "NOPERM",
    "Authentication required",
    "invalid username-password pair",
    "invalid password",
    "HELLO must be called with the client already authenticated",
)


class StoreError(Exception):
    """Root of every error the store raises on purpose."""


class VersionConflict(StoreError):
    """An optimistic append lost: the room's stream moved on since the caller looked.

    ``current_version`` is the version the caller should re-read from (with
    ``events_since``) before deciding again; nothing was appended.
    """

    def __init__(self, current_version: int, expected_version: int | None = None) -> None:
        self.current_version = current_version
        self.expected_version = expected_version
        super().__init__(f"room is at version {current_version}, expected {expected_version}")


class HeadLost(VersionConflict):
    """Redis had lost the room's version or chain key alone, its event stream whole
    (a ``maxmemory-policy`` that evicts keys): the append restored them from the
    stream and appended nothing. ``what`` says what was lost. A lost write, which the
    caller announces (docs/store.md, "Lost writes") before it decides again: read as
    version 0, a lost version key conflicted with every decision for ever.
    """

    def __init__(self, current_version: int, expected_version: int | None, what: str) -> None:
        super().__init__(current_version, expected_version)
        self.what = what


class CodeTaken(StoreError):
    """The join code already names another room; the caller should draw a new code."""

    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(f"room code {code!r} is taken")


class StoreUnavailable(StoreError):
    """Redis could not be reached or did not answer in time.

    For a write (``append_move``, ``append_event``) the outcome is UNKNOWN: the command
    may have been applied before the connection broke. Never acknowledge such a move;
    re-read the log/stream (``log_length``, ``events_since``) to learn what happened.
    """


class StoreForbidden(StoreUnavailable):
    """Redis refused a command for the user's ACL (``NOPERM``: changed while the node
    runs; start-up checks it). Nothing ran, and nothing can until an operator mends
    the ACL: callers treat it as an outage; what reports the store's state can say why."""


class StoreRefusing(StoreUnavailable):
    """Redis answers, but refuses the command for a state of its own that no retry of
    the node mends at once: out of memory under ``maxmemory`` (OOM), a read-only
    replica (READONLY: a master demoted under the node), a replica whose master is
    down (MASTERDOWN), a disk it cannot save to (MISCONF), too few replicas to write
    to (NOREPLICAS), busy running a script (BUSY). Nothing ran. Callers treat it as
    an outage (``unavailable``, retry later); its message is the reason in one line,
    for the log line an outage gets. Raised as a plain error, every request was
    answered ``internal`` and every loop turn logged a traceback (the memory audit)."""


class StoreClosed(StoreUnavailable):
    """The store was closed (:meth:`Store.close <solrace.store.Store.close>`): it
    refuses every write, and nothing ran. Before, only moves were refused: every
    other write opened a new connection and ran (redis-py reconnects a closed client),
    so a task that outlived its node's stop still wrote to Redis."""

    def __init__(self) -> None:
        super().__init__("store is closed")
