"""solrace terminal client and protocol client library."""
