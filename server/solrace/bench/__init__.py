"""Benchmarks that print machine-readable JSON (``python -m solrace.bench rules --json``)."""
