"""solrace.race."""
