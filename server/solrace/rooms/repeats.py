"""Log lines a client can cause at will, written at most once every
:data:`~solrace.protocol.limits.REPEATED_LOG_EVERY_S` each.

A connection closed for flooding, a room refused to an address, a spectator's made-up
``since``, a frame that is not msgpack: each is one line an operator wants to see, but
a client can cause any number of them (reconnect, flood again). An audit had one
address make a node write 260 "rate limited" lines, 25 KB, a second, for as long as it
liked. So the first is written at once, as it always was, and the rest of the interval
are counted and written as one line when it is up: how many, from how many addresses,
and which caused most (``repeated=731 addresses=2 most=198.51.100.7(700),203.0.113.5(31)``)
— which is also how the operator finds the abuser. Counted per node.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping

from solrace.protocol.limits import (
    REPEATED_ADDRESSES_KEPT,
    REPEATED_ADDRESSES_NAMED,
    REPEATED_LOG_EVERY_S,
)

#: The address of a line whose client is not known (counted, never named apart).
UNKNOWN = "unknown"


class AddressCounts:
    """How many lines each address caused in one interval: up to
    :data:`REPEATED_ADDRESSES_KEPT` addresses apart (a flood spread over many cannot
    grow the node's memory), as the fields that name those that caused most."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def add(self, address: str | None) -> None:
        key = address or UNKNOWN
        if key in self._counts or len(self._counts) < REPEATED_ADDRESSES_KEPT:
            self._counts[key] += 1

    def fields(self) -> dict[str, object]:
        """``addresses`` (an integer in either log format; its most, 1,024, means at
        least that many) and ``most``: ``198.51.100.7(700),…``."""
        addresses = len(self._counts)  # at most REPEATED_ADDRESSES_KEPT
        named = self._counts.most_common(REPEATED_ADDRESSES_NAMED)
        return {
            "addresses": addresses,
            "most": ",".join(f"{address}({n})" for address, n in named),
        }

    def clear(self) -> None:
        self._counts.clear()


class RepeatedLine:
    """One kind of line (its logger, level and message), written at once, then at
    most every ``every_s`` as a summary of the ones that came meanwhile."""

    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        level: int = logging.INFO,
        every_s: float = REPEATED_LOG_EVERY_S,
    ) -> None:
        self.logger = logger
        self.message = message
        self.level = level
        self.every_s = every_s
        #: Lines not written since the last one, by the address that caused them.
        self._by_address = AddressCounts()
        self._held = 0
        self._timer: asyncio.TimerHandle | None = None

    def note(self, address: str | None, extra: Mapping[str, object]) -> None:
        """One more line from ``address`` (None: not known) with its ``extra``
        fields: written now if the last one was written ``every_s`` ago, else counted."""
        if self._timer is None:
            self.logger.log(self.level, self.message, extra=dict(extra))
            self._timer = asyncio.get_running_loop().call_later(self.every_s, self._summary)
            return
        self._held += 1
        self._by_address.add(address)

    def _summary(self, again: bool = True) -> None:
        """The interval is up: one line for what it held back, and a new interval
        (unless not ``again``); nothing held back, the next line is written at once."""
        self._timer = None
        if not self._held:
            return
        self.logger.log(
            self.level,
            self.message,
            extra={
                "repeated": self._held,
                "seconds": round(self.every_s),
                **self._by_address.fields(),
            },
        )
        self._held = 0
        self._by_address.clear()
        if again:
            self._timer = asyncio.get_running_loop().call_later(self.every_s, self._summary)

    def stop(self) -> None:
        """The node stops: write what is held back now, and set no timer."""
        if self._timer is not None:
            self._timer.cancel()
        self._summary(again=False)


class RepeatedLines:
    """A node's repeated lines, one :class:`RepeatedLine` per message."""

    def __init__(self) -> None:
        self._lines: dict[str, RepeatedLine] = {}

    def note(
        self,
        logger: logging.Logger,
        message: str,
        address: str | None,
        extra: Mapping[str, object],
        level: int = logging.INFO,
    ) -> None:
        line = self._lines.get(message)
        if line is None:
            line = self._lines[message] = RepeatedLine(logger, message, level)
        line.note(address, extra)

    def stop(self) -> None:
        for line in self._lines.values():
            line.stop()


__all__ = ["AddressCounts", "RepeatedLine", "RepeatedLines"]
