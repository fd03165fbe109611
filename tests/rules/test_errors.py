"""The rules engine's errors survive pickling (solrace/rules/errors.py): a solver
worker's error reaches the node pickled. A review: ``NotAMove`` and
``IllegalMoveError`` could not be unpickled at all (rebuilt from their message alone,
which their __init__ does not take: TypeError instead of the error)."""

from __future__ import annotations

import pickle

import pytest
from solrace.rules.errors import (
    IllegalMoveError,
    InvalidOptionError,
    InvalidPositionError,
    NotAMove,
    NotationError,
    RulesError,
    UnknownVariantError,
)

ERRORS: list[RulesError] = [
    NotationError("bad card 'Zx'", column=12),
    NotAMove("zz", ("1:2>3", "D", "u")),
    IllegalMoveError("7H>8", "7H cannot go on 8H: same colour"),
    InvalidPositionError("a card twice: AS"),
    InvalidOptionError("undo must be a boolean", option="undo"),
    UnknownVariantError("no variant 'spider'"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_comes_back_from_a_pickle_as_it_was(error: RulesError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert vars(back) == vars(error)
