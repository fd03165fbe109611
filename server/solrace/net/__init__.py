"""solrace.net."""
