"""Typed errors of the rules engine.

One root, :class:`RulesError`, so callers can catch everything the engine refuses, and
distinct subclasses so a caller can tell *what* was wrong: a move that cannot be read
(:class:`NotationError`) from a move that can be read but is not allowed here
(:class:`IllegalMoveError`), a bad position file from a bad option.
"""

from __future__ import annotations

from solrace.quoting import quoted


class RulesError(ValueError):
    """Root of every error the rules engine raises on bad input."""


class NotationError(RulesError):
    """A move or card string that is not valid canonical notation.

    ``column``: the column a move names when it is beyond every variant's — a board
    then says it in its own range (:meth:`solrace.rules.Board.play`)."""

    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(message)
        self.column = column

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled by its own arguments (a solver worker's error reaches the node
        # pickled): by default an exception is rebuilt from its message alone, and
        # an error whose __init__ takes other arguments (NotAMove, IllegalMoveError)
        # could not be unpickled at all — TypeError instead of the error (a review).
        return (type(self), (str(self), self.column))


class NotAMove(NotationError):
    """A string that is no notation at all; the message lists the ``forms`` that are
    (those :func:`solrace.rules.parse_move` takes, and ``undo`` where a caller takes
    it too: a log entry, ``solrace-rules play``)."""

    def __init__(self, notation: str, forms: tuple[str, ...]) -> None:
        expected = f"{', '.join(forms[:-1])} or {forms[-1]}"
        super().__init__(f"not a move: {quoted(notation)} (expected {expected})")
        self.notation = notation
        self.forms = forms

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.notation, self.forms))


class IllegalMoveError(RulesError):
    """A well-formed move that the rules do not allow in this position.

    ``reason`` is a sentence meant for players ("7H cannot go on 8H: same colour").
    """

    def __init__(self, move: str, reason: str) -> None:
        super().__init__(f"illegal move {move}: {reason}")
        self.move = move
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.move, self.reason))  # see NotationError.__reduce__


class InvalidPositionError(RulesError):
    """A position that cannot occur: a card twice, a card missing, a face-up card under
    a face-down one, a key of the wrong type."""


class InvalidOptionError(RulesError):
    """An option the variant does not have, or a value it does not accept.

    ``option``: the option at fault, when the error is about one (None for options
    that are not a mapping), so the protocol can name it (``error.field`` is
    ``options.undo``, docs/protocol.md §6)."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.option))  # see NotationError.__reduce__


class UnknownVariantError(RulesError):
    """A variant id that the engine does not know."""
