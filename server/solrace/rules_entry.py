"""The ``solrace-rules`` console script. This module loads the command line's helpers
(standard library only) and nothing of the engine, so a Ctrl-C while the engine's
modules load (the first ~0.05 s) lands in :func:`main`'s handler — one line, status
130 — instead of printing a traceback (the script imported :mod:`solrace.rules.cli`,
and with it the whole engine, before any handler was in place)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from solrace.argtypes import EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from solrace.rules.cli import main as run

        return run(argv)
    except KeyboardInterrupt:
        print("solrace-rules: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
