"""solrace's client side: the protocol client library that the terminal client, the bot
and the tests share — :class:`RaceClient` (one connection), :class:`RoomView` (the room
folded from snapshot and events) and :class:`Session` (a place in a room across
connections)."""

from .connection import DEFAULT_SERVER, RaceClient, ServerError
from .pacing import Pace
from .roomview import RoomView
from .session import Session

__all__ = ["DEFAULT_SERVER", "Pace", "RaceClient", "RoomView", "ServerError", "Session"]
