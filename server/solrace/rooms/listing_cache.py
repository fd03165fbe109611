"""The public listing a ``list`` reads, shared by every connection of a node.

Listing reads up to LISTING_SCAN listed rooms, each brought up to date from the store:
with 100 listed lobbies, 16 connections listing slowed an honest racer's acks from
1.5 to 6.9 ms and left a third of the lists unanswered (an adversarial audit). A node
now reads the listing at most once per LISTING_CACHE_S, whoever asks, and connections
that ask while it is being read share that read. A change this node folds (a racer
joined or left, a race started or ended) forgets it at once, so only other nodes'
changes can be up to LISTING_CACHE_S late — as a listing is anyway by the time a
human reads it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from solrace.protocol.views import RoomSummary

#: Longest a node answers ``list`` from a listing it read before.
LISTING_CACHE_S: Final = 1.0

Read = Callable[[], Awaitable[list[RoomSummary]]]


class ListingCache:
    """One node's cached listing: every listed room that can be joined or watched,
    unfiltered (each ``list`` filters its variant from it)."""

    def __init__(self) -> None:
        self._summaries: list[RoomSummary] = []
        self._until = float("-inf")
        self._reading: asyncio.Task[list[RoomSummary]] | None = None

    def forget(self) -> None:
        """The listing changed: the next ``list`` reads it again."""
        self._until = float("-inf")

    def tasks(self) -> list[asyncio.Task[list[RoomSummary]]]:
        """The read under way, if any: the node's, cancelled when it stops."""
        return [self._reading] if self._reading is not None else []

    async def summaries(self, read: Read) -> list[RoomSummary]:
        loop = asyncio.get_running_loop()
        if loop.time() < self._until:
            return self._summaries
        if self._reading is None:
            self._reading = loop.create_task(self._read(read))
            # Its failure is each waiter's to report; one nobody awaits any more (they
            # all went away) must not be logged as never retrieved.
            self._reading.add_done_callback(_retrieve)
        # Shielded: a connection that goes away mid-read must not cancel the read the
        # other connections wait for.
        return await asyncio.shield(self._reading)

    async def _read(self, read: Read) -> list[RoomSummary]:
        # A change folded during the read (the read's own syncs fold the rooms it
        # reads) does not void it: the read saw the rooms as they were when it read
        # them, which is what a cached listing is.
        try:
            summaries = await read()
        finally:
            self._reading = None
        self._summaries = summaries
        self._until = asyncio.get_running_loop().time() + LISTING_CACHE_S
        return summaries


def _retrieve(task: asyncio.Task[list[RoomSummary]]) -> None:
    if not task.cancelled():
        task.exception()


__all__ = ["LISTING_CACHE_S", "ListingCache"]
