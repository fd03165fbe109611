"""The error a benchmark raises when its run cannot go on.

A child that does not start, rooms that do not start their race, a count that does
not add up: the figures would be wrong, so the run stops. ``python -m solrace.bench``
says so in one line and exits 1 (``bench/cli.py``), as it does when Redis fails;
a traceback is for a bug, not for a run the machine could not carry.
"""

from __future__ import annotations


class RunFailed(RuntimeError):
    """The run could not go on; the message says what did not happen."""


__all__ = ["RunFailed"]
