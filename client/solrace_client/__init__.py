"""solrace's client side: the protocol client library that the terminal client, the bot
and the tests share — :class:`RaceClient` (one connection), :class:`RoomView` (the room
folded from snapshot and events) and :class:`Session` (a place in a room across
connections).

The names are loaded on first use, not with the package: the ``solrace`` command
imports this package first, and a Ctrl-C while websockets and rich load must reach its
own handler (one line, status 130), not a traceback (:mod:`solrace_client.entry`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import DEFAULT_SERVER, RaceClient, ServerError
    from .pacing import Pace
    from .roomview import RoomView
    from .session import Session

__all__ = ["DEFAULT_SERVER", "Pace", "RaceClient", "RoomView", "ServerError", "Session"]

_HOMES = {
    "DEFAULT_SERVER": "connection",
    "RaceClient": "connection",
    "ServerError": "connection",
    "Pace": "pacing",
    "RoomView": "roomview",
    "Session": "session",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)
