"""solrace.digits: the one test of a text of digits."""

from __future__ import annotations

import sys

import pytest
from solrace.digits import digits_value, is_digits


@pytest.mark.parametrize("text", ["0", "7101", "0042"])
def test_ascii_digits_are_digits(text: str) -> None:
    assert is_digits(text)


@pytest.mark.parametrize("text", ["", "²", "7²", "١", "٣٤", "+1", "-1", " 1", "1 ", "1.0", "x"])
def test_anything_else_is_not(text: str) -> None:
    """``'²'`` and ``'١'`` are digits to ``str.isdigit``: ``int()`` refuses the one and
    reads the other as 1."""
    assert not is_digits(text)


def test_the_number_of_digits_is_theirs() -> None:
    assert digits_value("0042") == 42 and digits_value("7101") == 7101


@pytest.mark.parametrize("text", ["", "²", "-1", "x", "9" * (sys.get_int_max_str_digits() + 1)])
def test_no_number_of_other_text_nor_of_more_digits_than_int_reads(text: str) -> None:
    """Digits past ``int()``'s limit (4,300) were a ValueError: a traceback in ``solrace
    replay``, and redis-py, which drops a database index it cannot read, ran the node on
    database 0."""
    assert digits_value(text) is None
