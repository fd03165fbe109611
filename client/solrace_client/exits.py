"""Exit statuses that must be known before anything else loads (the standard library
and :mod:`solrace.argtypes` only): :mod:`solrace_client.entry` answers a Ctrl-C during
the client's imports with one; :mod:`solrace_client.errors` gives it to the commands."""

from __future__ import annotations

from solrace.argtypes import EXIT_INTERRUPTED

__all__ = ["EXIT_INTERRUPTED"]
