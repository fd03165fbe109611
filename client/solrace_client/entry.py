"""The ``solrace`` console script. This module and the package's ``__init__`` load only
the standard library, so a Ctrl-C while the client's modules load (websockets, rich:
the first ~0.1 s) lands in :func:`main`'s handler — one line, status 130 — instead of
printing a traceback."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .exits import EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from .cli import main as run

        return run(argv)
    except KeyboardInterrupt:
        print("solrace: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
