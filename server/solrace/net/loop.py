"""Which event loop a node runs on: uvloop where it is installed, else asyncio's own.

Why (docs/performance.md, round 7): a node's CPU goes mostly to the event loop's
socket reads and writes — a move is one frame in, the ``moved`` reply and the fan-out
out, the group commit's Redis round trip — and uvloop (libuv, in C) does that work
for about 15 % less CPU a move than asyncio's selector loop, with the same code on top:
websockets, redis-py and solrace's own Redis link use only the standard loop and
transport interfaces. It is a dependency wherever it has wheels (not Windows, not PyPy:
``pyproject.toml``), so ``auto`` is the loop a user gets; ``asyncio`` remains for
comparison and for platforms without it. The benchmark's echo server runs on the
same loop as the node it is compared with, so the ratio compares code, not loops.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

T = TypeVar("T")

AUTO, UVLOOP, ASYNCIO = "auto", "uvloop", "asyncio"
#: The values of ``--loop`` / ``SOLRACE_LOOP``.
LOOPS: Final = (AUTO, UVLOOP, ASYNCIO)


class LoopUnavailable(ValueError):
    """The loop asked for is not installed here."""


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def resolve_loop(name: str, *, have_uvloop: bool | None = None) -> str:
    """The loop ``name`` means here: ``auto`` is uvloop when installed, else asyncio.
    Raises :class:`LoopUnavailable` for ``uvloop`` when it is not installed, and
    ``ValueError`` for a name not in :data:`LOOPS`."""
    if name not in LOOPS:
        raise ValueError(f"must be one of {', '.join(LOOPS)}, got {name!r}")
    installed = uvloop_installed() if have_uvloop is None else have_uvloop
    if name == AUTO:
        return UVLOOP if installed else ASYNCIO
    if name == UVLOOP and not installed:
        raise LoopUnavailable("uvloop is not installed here (pip install uvloop), use asyncio")
    return name


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop factory for ``asyncio.Runner`` for a resolved loop name."""
    if resolve_loop(name) == UVLOOP:
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(name: str, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop ``name`` resolves to."""
    with asyncio.Runner(loop_factory=loop_factory(name)) as runner:
        return runner.run(main)
