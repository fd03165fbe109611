"""solrace: a race server for patience games."""

__version__ = "0.1.0"
