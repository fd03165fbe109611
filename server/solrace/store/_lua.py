"""Loading the store's Lua scripts.

The scripts live as ``.lua`` files in :mod:`solrace.store.scripts` rather than as Python
string constants: they are real programs whose atomicity arguments are documented line
by line, they read (and lint, and can be pasted into ``redis-cli --eval``) much better
as files, and ``docs/store.md`` can point at them. ``lib.lua`` is prepended to each so
the shared helpers (gap-free event append, TTL inheritance) exist exactly once.

The SHA1 is computed locally, so nothing needs Redis at import or connect time: the
store calls EVALSHA directly and loads the script only when Redis answers NOSCRIPT
(first use, after a restart, after SCRIPT FLUSH, or on a fresh cluster node).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Final

#: How many times a call answered NOSCRIPT is sent again, its script loaded first
#: (NOSCRIPT: it did not run, so a resend applies nothing twice). More than once:
#: the scripts may go again between the load and the resend (a failover, a restart,
#: another SCRIPT FLUSH), and a move answered ``internal`` for it was a test run's
#: failure while another test flushed the shared Redis's scripts twice.
SCRIPT_LOADS: Final = 3

__all__ = [
    "ACCESS_PROBE",
    "APPEND_EVENT",
    "APPEND_MOVE",
    "CLEAR_ARCHIVE_NOTE",
    "CLOCK",
    "EXPIRE_CODE",
    "EXPIRE_ROOM",
    "JOIN_ROOM_NODES",
    "REVEAL_ROUND",
    "ROUND_ENDED",
    "SETTLE_EXPIRY",
    "LuaScript",
]


@dataclass(frozen=True, slots=True)
class LuaScript:
    """A script's full source (library prepended) and the SHA1 Redis will know it by."""

    name: str
    source: str
    sha: str


def _read(filename: str) -> str:
    return resources.files("solrace.store.scripts").joinpath(filename).read_text("utf-8")


def _load(name: str) -> LuaScript:
    source = _read("lib.lua") + "\n" + _read(f"{name}.lua")
    return LuaScript(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())


APPEND_EVENT = _load("append_event")
APPEND_MOVE = _load("append_move")
EXPIRE_ROOM = _load("expire_room")
EXPIRE_CODE = _load("expire_code")
SETTLE_EXPIRY = _load("settle_expiry")
JOIN_ROOM_NODES = _load("join_room_nodes")
#: A round proved revealed by a client (Store.reveal_round).
REVEAL_ROUND = _load("reveal_round")
#: The last round whose race_over is stored, told from a proof (Store.round_ended).
ROUND_ENDED = _load("round_ended")
#: A room's archive note cleared unless it notes a later race (Store.clear_unarchived).
CLEAR_ARCHIVE_NOTE = _load("clear_archive_note")
#: The store's clock, sampled by every node (Store.time_ms).
CLOCK = _load("clock")
#: Run once at start-up only (store/probe.py): may this Redis user run scripts?
ACCESS_PROBE = _load("access_probe")
