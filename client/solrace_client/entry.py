"""The ``solrace`` console script. This module and the package's ``__init__`` load only
the standard library, so a Ctrl-C while the client's modules load (websockets, rich:
the first ~0.1 s) lands in :func:`main`'s handler — one line, status 130 — instead of
printing a traceback (:func:`solrace.argtypes.interruptible`, as ``solrace-rules``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from solrace.argtypes import interruptible

#: Standard error's file descriptor.
STDERR_FD = 2


def _fill_closed_stderr() -> None:
    """Standard error closed by the shell (``solrace create 2>&-``) becomes the null
    device. Left closed, the next file opened took its number — the connection's
    socket — and the full-screen UI, which draws on standard error, drew into the
    connection: the terminal stayed blank and no key answered. (Standard output closed
    is said in one line, status 2: docs/client.md.)"""
    try:
        os.fstat(STDERR_FD)
        return
    except OSError:
        pass
    opened = os.open(os.devnull, os.O_WRONLY)
    if opened != STDERR_FD:
        os.dup2(opened, STDERR_FD)
        os.close(opened)
    stream = open(STDERR_FD, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115  (for the life of the process)
    # Python left both None; Textual draws on __stderr__ (typed final: it is not)
    sys.stderr = stream
    setattr(sys, "__stderr__", stream)  # noqa: B010


def _load() -> Callable[[Sequence[str] | None], int]:
    from .cli import main

    return main


def main(argv: Sequence[str] | None = None) -> int:
    _fill_closed_stderr()
    return interruptible("solrace", _load, argv)
