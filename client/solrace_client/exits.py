"""Exit statuses that must be known before anything else loads (the standard library
only): :mod:`solrace_client.entry` answers a Ctrl-C during the client's imports with
one; :mod:`solrace_client.errors` gives it to the commands."""

from __future__ import annotations

from typing import Final

#: A command interrupted by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED: Final = 130
