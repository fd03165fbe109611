"""Ctrl-C while a console script starts: one line, ``PROG: interrupted``, status 130.

A console script (the one pip writes) imports its entry module —
:mod:`solrace.server_entry`, :mod:`solrace.rules_entry`, :mod:`solrace_client.entry`,
:mod:`solrace.bench.__main__` (``python -m solrace.bench``)
— and only then calls its ``main``, which loads the command line inside
:func:`interruptible`. A Ctrl-C while the entry module itself loads reaches no handler:
Python prints a KeyboardInterrupt traceback. So the entry modules import this module
and nothing else of solrace, and this module nothing but ``sys`` and
``collections.abc`` (both loaded by Python at start-up): not ``typing`` (some 3 ms),
not argparse with the rest of :mod:`solrace.argtypes` (some 8 ms), which re-exports
what is defined here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "interruptible"]

#: The exit status of a command Ctrl-C stopped: what a shell reports for a process
#: SIGINT stops (128 + SIGINT). (Not ``Final``: that would import ``typing``.)
EXIT_INTERRUPTED = 128 + 2

#: The exit status of a command SIGTERM stopped (``timeout``, a job cancelled) once it
#: had cleaned up after itself: what a shell reports for a process SIGTERM stops
#: (128 + SIGTERM), so a caller reads the same status as if it had died of it. Here,
#: beside its Ctrl-C twin, for ``python -m solrace.bench``'s ``__main__``, which must
#: load no more than this module before its handler.
EXIT_TERMINATED = 128 + 15


def interruptible(
    prog: str, load: Callable[[], Callable[[Sequence[str] | None], int]], argv: Sequence[str] | None
) -> int:
    """A console script's ``main``: ``load()`` imports the command line (and all it
    needs) and its ``main`` runs ``argv``. A Ctrl-C at any point — while the modules
    load too, which a script importing them first left to a traceback — ends in one
    line, ``PROG: interrupted``, status 130."""
    try:
        return load()(argv)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
