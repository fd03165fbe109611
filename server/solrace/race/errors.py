"""Typed refusals of the race layer; ``code`` is the protocol's error code."""

from __future__ import annotations


class RaceError(Exception):
    """A request the room refuses. ``code`` is a protocol error code (a string),
    ``message`` a sentence for people, and ``field`` the request's field at fault, where
    one is (the protocol's ``error.field``), and ``retry_after_ms`` when the request
    may be made again, for a refusal that is only "not yet" (``rate_limited``)."""

    def __init__(
        self,
        code: str,
        message: str,
        field: str | None = None,
        *,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.retry_after_ms = retry_after_ms
