"""The ``solrace-server`` console script. This module loads the command line's helpers
(standard library only) and nothing of the node, so a Ctrl-C while the node's command
line loads (the first ~0.1-0.2 s: :mod:`solrace.net.main` and the standard library it
needs, socket, logging, …) lands in :func:`~solrace.argtypes.interruptible`'s handler —
one line, status 130 — instead of printing a traceback (the script imported
:mod:`solrace.net.main` before any handler was in place), as ``solrace-rules`` and
``solrace`` do."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from solrace.argtypes import interruptible


def _load() -> Callable[[Sequence[str] | None], int]:
    from solrace.net.main import main

    return main


def main(argv: Sequence[str] | None = None) -> int:
    return interruptible("solrace-server", _load, argv)
