"""Typed refusals of the race layer; ``code`` is the protocol's error code."""

from __future__ import annotations


class RaceError(Exception):
    """A request the room refuses. ``code`` is a protocol error code (a string) and
    ``message`` a sentence for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
