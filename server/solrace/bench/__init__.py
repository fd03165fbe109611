"""Benchmarks that print machine-readable JSON (``python -m solrace.bench rules --json``)."""

from typing import Final

#: The command's name, as its every line starts.
PROG: Final = "python -m solrace.bench"
