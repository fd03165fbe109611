"""solrace.digits: the one test of a text of digits."""

from __future__ import annotations

import pytest
from solrace.digits import is_digits


@pytest.mark.parametrize("text", ["0", "7101", "0042"])
def test_ascii_digits_are_digits(text: str) -> None:
    assert is_digits(text)


@pytest.mark.parametrize("text", ["", "²", "7²", "١", "٣٤", "+1", "-1", " 1", "1 ", "1.0", "x"])
def test_anything_else_is_not(text: str) -> None:
    """``'²'`` and ``'١'`` are digits to ``str.isdigit``: ``int()`` refuses the one and
    reads the other as 1."""
    assert not is_digits(text)
