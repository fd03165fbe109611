"""The ``solrace-rules`` console script. This module loads the handler alone
(:mod:`solrace.interrupt`, as :mod:`solrace.server_entry` says why) and nothing of the
engine, so a Ctrl-C while the engine's modules load (the first ~0.05 s) lands in
:func:`~solrace.interrupt.interruptible`'s handler — one line, status 130 — instead
of printing a traceback (the script imported :mod:`solrace.rules.cli`, and with it the
whole engine, before any handler was in place)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from solrace.interrupt import interruptible


def _load() -> Callable[[Sequence[str] | None], int]:
    from solrace.rules.cli import main

    return main


def main(argv: Sequence[str] | None = None) -> int:
    return interruptible("solrace-rules", _load, argv)
