"""``python -m solrace.bench``: the command line is :mod:`solrace.bench.cli`'s.

``-m`` runs this module as the main program, so what it imports at its top comes
before any handler: it loads the handler's module only (:mod:`solrace.interrupt`, not
:mod:`solrace.argtypes` with argparse: a Ctrl-C some 40 ms in was a traceback), and
:func:`~solrace.interrupt.interruptible` loads the command, so that a Ctrl-C while its
modules load (the first ~0.1-0.2 s: its limits, and with them solrace.protocol) is one
line and status 130 — it printed a traceback and died by the signal."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence

from solrace.interrupt import EXIT_INTERRUPTED, EXIT_TERMINATED, interruptible

from . import PROG


def _load() -> Callable[[Sequence[str] | None], int]:
    from .cli import main

    return main


def main(argv: Sequence[str] | None = None) -> int:
    return interruptible(PROG, _load, argv)


def ignore_late_signals() -> None:
    """SIGINT and SIGTERM ignored from now on: for a run that a signal stopped and that
    has cleaned up, so that another signal during the interpreter's exit — which puts
    Python's handlers back to the default actions — does not change its status (a
    second Ctrl-C 0.05 s after the first ended a core run with -2, not 130)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


if __name__ == "__main__":
    exit_status = main()
    if exit_status in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        ignore_late_signals()
    sys.exit(exit_status)
