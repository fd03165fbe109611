"""The ``solrace-server`` console script. This module loads the handler alone
(:mod:`solrace.interrupt`: ``sys``) and nothing of the node, so a Ctrl-C while the
node's command line loads (the first ~0.1-0.2 s: :mod:`solrace.net.main` and the
standard library it needs, socket, logging, …) lands in
:func:`~solrace.interrupt.interruptible`'s handler — one line, status 130 — instead of
printing a traceback (the script imported :mod:`solrace.net.main` before any handler
was in place), as ``solrace-rules`` and ``solrace`` do.

It imported :mod:`solrace.argtypes` for the handler, argparse with it: 7-10 ms before
the handler (median, 2 shared cores), now 0.5-0.7 ms. What comes before this module
is not solrace's and stays a traceback: Python's start-up and ``site`` (9-17 ms), then
the console script pip writes, whose first line is ``import re`` (6-11 ms). A Ctrl-C
in the first ~15-30 ms of ``solrace-server`` still prints Python's KeyboardInterrupt
traceback (docs/server.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from solrace.interrupt import interruptible


def _load() -> Callable[[Sequence[str] | None], int]:
    from solrace.net.main import main

    return main


def main(argv: Sequence[str] | None = None) -> int:
    return interruptible("solrace-server", _load, argv)
