"""The ``solrace`` console script. This module and the package's ``__init__`` load only
the standard library, so a Ctrl-C while the client's modules load (websockets, rich:
the first ~0.1 s) lands in :func:`main`'s handler — one line, status 130 — instead of
printing a traceback (:func:`solrace.interrupt.interruptible`, as ``solrace-rules``)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Final

from solrace.interrupt import interruptible

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


#: The modules of the ``client`` extra (pyproject.toml) the command line loads.
CLIENT_EXTRA_MODULES: Final = ("rich", "textual")


def _load() -> Callable[[Sequence[str] | None], int]:
    try:
        from .cli import main
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in CLIENT_EXTRA_MODULES:
            raise
        return functools.partial(_without_the_client_extra, missing)
    return main


def _without_the_client_extra(missing: str, argv: Sequence[str] | None) -> int:
    """Every command, where the ``client`` extra is not installed: any ``pip install``
    of the package installs this console script (deploy/README.md's server install,
    the Dockerfile's), and each command was a traceback ending in
    ``ModuleNotFoundError: No module named 'rich'``."""
    from .errors import EXIT_FAILED

    print(
        "solrace: the terminal client needs the 'client' extra, which is not installed here "
        f"(no module named {missing!r}): install the package with it, e.g. "
        ".venv/bin/pip install -e '.[client]' in its checkout (docs/client.md)",
        file=sys.stderr,
    )
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    _fill_closed_stderr()
    return interruptible("solrace", _load, argv)
