"""solrace.protocol."""
