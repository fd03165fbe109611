"""solrace's client side: the protocol client library (:class:`RaceClient`) that the
terminal client, the bot and the tests share."""

from .connection import DEFAULT_SERVER, RaceClient, ServerError
from .pacing import Pace

__all__ = ["DEFAULT_SERVER", "Pace", "RaceClient", "ServerError"]
