"""solrace.store."""
