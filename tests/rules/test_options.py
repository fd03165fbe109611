"""``solrace.rules.options``: every room option of docs/rules.md, its default per variant, and
validation (docs/rules.md "Variants and their options")."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from solrace.rules import InvalidOptionError, Options, deal, new_board, position_dict
from solrace.rules.options import MAX_PASSES

from tests.rules.test_support import KLONDIKE_DEFAULTS

YUKON_DEFAULTS = {
    "auto_flip": True,
    "foundation_to_tableau": False,
    "undo": True,
    "auto_complete": True,
    "scoring": "standard",
}


@pytest.mark.parametrize("variant", ["yukon", "russian", "alaska", "double_yukon"])
def test_options_yukon_family_defaults(variant: str) -> None:
    """RULES Yukon 4/5 and common: auto_flip true, foundation_to_tableau false, undo true,
    auto_complete true; scoring standard."""
    assert position_dict(deal(variant, 0))["options"] == YUKON_DEFAULTS


def test_options_klondike_defaults() -> None:
    """RULES Klondike 5–8 and options: draw 1, max_passes unlimited, scoring standard,
    thoughtful false, foundation_to_tableau true, auto_flip true."""
    assert position_dict(deal("klondike", 0))["options"] == KLONDIKE_DEFAULTS


def test_options_australian_fixed_values() -> None:
    """RULES Australian: draw 1, one pass, nothing back off a foundation — fixed."""
    options = new_board("australian").options
    assert (options.draw, options.max_passes, options.foundation_to_tableau) == (1, 1, False)
    assert options.auto_flip is True


@pytest.mark.parametrize(
    ("variant", "options", "message"),
    [
        ("klondike", {"draw": 2}, "option draw must be 1 or 3, not 2"),
        # a refused value as JSON writes it (the CLI's -o, positions, the protocol)
        ("klondike", {"draw": True}, "option draw must be 1 or 3, not true"),
        ("klondike", {"draw": "3"}, 'option draw must be 1 or 3, not "3"'),
        ("klondike", {"draw": None}, "option draw must be 1 or 3, not null"),
        # equal to 3 but not a whole number: taken, it ended a draw in a TypeError
        ("klondike", {"draw": 3.0}, "option draw must be 1 or 3, not 3.0"),
        ("klondike", {"max_passes": 0}, "option max_passes must be a whole number 1 to"),
        ("klondike", {"max_passes": True}, "option max_passes must be a whole number 1 to"),
        ("klondike", {"max_passes": 2.0}, "option max_passes must be a whole number 1 to"),
        (
            "klondike",
            {"scoring": "golf"},
            'option scoring must be one of standard, vegas, none, not "golf"',
        ),
        ("yukon", {"auto_flip": 1}, "option auto_flip must be true or false, not 1"),
        ("yukon", {"undo": "yes"}, 'option undo must be true or false, not "yes"'),
        ("klondike", {"thoughtful": None}, "option thoughtful must be true or false"),
        ("yukon", {"draw": 1}, 'variant yukon has no option "draw"'),
        ("yukon", {"thoughtful": True}, 'variant yukon has no option "thoughtful"'),
        ("double_yukon", {"max_passes": 1}, 'variant double_yukon has no option "max_passes"'),
        ("klondike", {"bogus": 1}, 'variant klondike has no option "bogus"'),
    ],
)
def test_options_invalid_values_and_unknown_options_refused(
    variant: str, options: dict[str, Any], message: str
) -> None:
    """docs/rules.md: unknown options and values of the wrong type or out of range are
    refused with InvalidOptionError."""
    with pytest.raises(InvalidOptionError) as info:
        deal(variant, 0, options)
    assert message in str(info.value)


@pytest.mark.parametrize("max_passes", [1, 2, 3, 10, MAX_PASSES, None])
def test_options_max_passes_accepts_any_whole_number_or_null(max_passes: int | None) -> None:
    assert deal("klondike", 0, {"max_passes": max_passes}).options.max_passes == max_passes


def test_options_max_passes_past_what_a_room_takes_is_refused() -> None:
    """Unbounded, a max_passes the protocol cannot carry was taken: `solrace bot --create
    --option max_passes=<23 digits>` ended in msgpack's TypeError traceback, and one
    past 2**31 - 1 was refused by the server only ("integer option out of range")."""
    with pytest.raises(InvalidOptionError) as info:
        deal("klondike", 0, {"max_passes": MAX_PASSES + 1})
    assert str(info.value) == (
        f"option max_passes must be a whole number 1 to {MAX_PASSES} or null (unlimited), "
        f"not {MAX_PASSES + 1}"
    )


def test_options_vegas_changes_the_max_passes_default_only() -> None:
    """RULES Klondike options: Vegas → max_passes 3 for draw 3, 1 for draw 1; explicit
    values (null included) win."""
    cases = [
        ({"scoring": "vegas"}, 1),
        ({"scoring": "vegas", "draw": 3}, 3),
        ({"scoring": "vegas", "draw": 3, "max_passes": 5}, 5),
        ({"scoring": "vegas", "draw": 1, "max_passes": None}, None),
        ({"scoring": "none", "draw": 3}, None),
        ({"scoring": "standard", "draw": 3}, None),
    ]
    for given, expected in cases:
        assert deal("klondike", 0, given).options.max_passes == expected, given


def test_options_are_frozen() -> None:
    options = deal("yukon", 0).options
    assert isinstance(options, Options)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.undo = False  # type: ignore[misc]


def test_options_given_mapping_is_not_modified() -> None:
    given = {"scoring": "vegas", "draw": 3}
    deal("klondike", 0, given)
    assert given == {"scoring": "vegas", "draw": 3}


@pytest.mark.parametrize(
    ("option", "value", "shown"),
    [
        ("draw", "9" * 5000, '"' + "9" * 39),  # --option draw=<5,000 digits>
        ("draw", 10**100, "1" + "0" * 39),
        ("scoring", "s" * 5000, '"' + "s" * 39),
        ("undo", ["x"] * 2000, '["x", "x", "x", "x", "x", "x", "x", "x"'),
    ],
    ids=["digits", "number", "text", "list"],
)
def test_a_long_refused_value_is_quoted_at_most_in_its_first_characters(
    option: str, value: Any, shown: str
) -> None:
    """A refused value was said whole: ``solrace bot --create --option draw=<5,000
    digits>`` (or ``solrace-rules deal``, or a create on the wire) was one 5 KB line."""
    with pytest.raises(InvalidOptionError) as info:
        deal("klondike", 0, {option: value})
    said = str(info.value)
    assert len(said) < 200, said[:300]
    assert shown in said and " characters)" in said
