"""``solrace.rules.position``: positions as JSON (RULES "Positions and move notation",
docs/rules.md "Positions of double-deck variants") — round trips and every rejection,
each with a clear message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from solrace.rules import (
    InvalidPositionError,
    RulesError,
    deal,
    dump_position,
    load_position,
    position_dict,
)

from tests.rules.test_support import KLONDIKE_DEFAULTS, POSITION_KEYS, build, legal, position

OPTION_SETS = {
    "yukon": [{}, {"auto_flip": False, "foundation_to_tableau": True}],
    "klondike": [{}, {"draw": 3, "scoring": "vegas"}, {"thoughtful": True}],
    "russian": [{}],
    "alaska": [{"undo": False}],
    "australian": [{}],
    "double_yukon": [{}, {"foundation_to_tableau": True}],
}


@pytest.mark.parametrize(
    ("variant", "options"),
    [(v, o) for v, sets in OPTION_SETS.items() for o in sets],
)
@pytest.mark.parametrize("seed", [0, 42])
def test_position_round_trip_every_variant(variant: str, options: dict, seed: int) -> None:
    """RULES positions: the engine reads and writes any position as JSON; dump → load →
    dump is the identity, for a deal and after some moves, in every variant."""
    board = deal(variant, seed, options)
    for step in range(12):
        text = dump_position(board)
        again = load_position(text)
        assert dump_position(again) == text
        assert position_dict(again) == json.loads(text)
        assert legal(again) == legal(board)
        if board.decks == 1:  # single deck: card identities are the names
            assert again.snapshot()[:6] == board.snapshot()[:6]
        moves = sorted(board.legal_moves(), key=str)
        if not moves:
            break
        board.play(moves[(seed + step) % len(moves)])


def test_position_dump_is_canonical() -> None:
    """RULES positions: keys in the rule book's order, every option spelled out."""
    pos = position_dict(deal("klondike", 1))
    assert list(pos) == POSITION_KEYS
    assert pos["options"] == KLONDIKE_DEFAULTS
    assert pos["foundations"] == {"C": 0, "D": 0, "H": 0, "S": 0}
    assert all(n.islower() for n in pos["stock"])
    assert json.loads(dump_position(deal("klondike", 1), indent=2)) == pos


def test_position_partial_options_take_defaults() -> None:
    """RULES positions: ``options`` may be partial (or missing)."""
    data = position("klondike", [["KH"]], options={"draw": 3})
    board = load_position(data)
    assert board.options.draw == 3 and board.options.foundation_to_tableau is True
    del data["options"]
    assert load_position(data).options.draw == 1


def test_position_accepts_text_bytes_and_mappings() -> None:
    data = position("yukon", [["KH"]])
    text = json.dumps(data)
    for source in (data, text, text.encode()):
        assert position_dict(load_position(source))["tableau"][0] == ["KH"]


def test_position_rules_example_shape() -> None:
    """RULES positions: the example's shape — a face-down card is lower case, foundations
    give top ranks per suit — completed into a real position."""
    data = position(
        "yukon",
        [["7H"], ["ks", "QD", "JC"]],
        options={"auto_flip": True, "foundation_to_tableau": False},
        foundations={"C": 0, "D": 0, "H": 6, "S": 12},
    )
    board = load_position(data)
    assert position_dict(board)["tableau"][:2] == [["7H"], ["ks", "QD", "JC"]]
    assert board.down[:2] == [0, 1]
    assert position_dict(board)["foundations"] == {"C": 0, "D": 0, "H": 6, "S": 12}


def test_position_double_deck_foundations_are_lists_of_two() -> None:
    """docs/rules.md: double-deck foundations map each suit to two ranks."""
    board = build("double_yukon", [["KH"]], foundations={"C": [3, 0], "H": [13, 5]})
    assert position_dict(board)["foundations"] == {
        "C": [3, 0],
        "D": [0, 0],
        "H": [13, 5],
        "S": [0, 0],
    }


# --------------------------------------------------------------------------- rejections


def _rejects(data: Any, message: str) -> None:
    with pytest.raises(InvalidPositionError) as info:
        load_position(data)
    assert message in str(info.value), str(info.value)
    assert isinstance(info.value, RulesError)


def test_position_rejects_a_card_twice() -> None:
    _rejects(position("yukon", [["7H"], ["7H"]]), "column 2: 7H appears more than once")


def test_position_rejects_a_card_three_times_in_a_double_deck() -> None:
    _rejects(position("double_yukon", [["7H"], ["7H"], ["7H"]]), "7H appears more than twice")


def test_position_rejects_a_card_on_a_foundation_and_in_the_tableau() -> None:
    _rejects(position("yukon", [["AH"]], foundations={"H": 1}), "AH appears more than once")


def test_position_rejects_a_missing_card() -> None:
    data = position("yukon", [["KH"]])
    data["tableau"][-1] = [c for c in data["tableau"][-1] if c.upper() != "5D"]
    _rejects(data, "cards missing: 5D")


def test_position_rejects_face_up_under_face_down() -> None:
    _rejects(
        position("yukon", [["KH", "qs", "JD"]]), "column 1: face-down qs lies on a face-up card"
    )


def test_position_rejects_face_down_top_with_auto_flip_on() -> None:
    data = position("yukon", [["kh", "qs"]])
    _rejects(data, "column 1: its top card qs is face down, which cannot happen with auto_flip on")
    data["options"] = {"auto_flip": False}
    assert load_position(data).down[0] == 2


def test_position_rejects_lower_case_waste() -> None:
    _rejects(position("klondike", [["KH"]], waste=["7h"]), "waste: 7h must be face up (upper case)")


def test_position_rejects_upper_case_stock_unless_thoughtful() -> None:
    data = position("klondike", [["KH"]], stock=["7h"])
    data["stock"] = ["7H"]
    _rejects(data, "stock: 7H must be face down (lower case)")
    thoughtful = position("klondike", [["KH"]], stock=["7H"], options={"thoughtful": True})
    assert load_position(thoughtful).stock
    thoughtful["stock"] = ["7h"]
    _rejects(thoughtful, "stock: 7h must be face up (upper case)")


def test_position_rejects_face_down_cards_where_every_card_is_face_up() -> None:
    _rejects(
        position("klondike", [["qs", "KH"]], options={"thoughtful": True}),
        "every tableau card is face up in thoughtful klondike",
    )
    _rejects(position("australian", [["qs", "KH"]]), "every tableau card is face up in australian")


def test_position_rejects_mixed_case_card() -> None:
    _rejects(position("yukon", [["Kh"]]), 'column 1: card "Kh" mixes upper and lower case')


def test_position_rejects_a_non_card() -> None:
    _rejects(position("yukon", [["KH", "1H"]]), 'column 1: not a card: "1H"')


@pytest.mark.parametrize(
    ("card", "shown"),
    [
        (True, "true"),
        (None, "null"),
        (7, "7"),
        (["7H"], '["7H"]'),
        ('x"', '"x\\""'),
        ("é'", '"é\'"'),
        ("7" * 100, '"' + "7" * 40 + '"… (100 characters)'),  # as solrace.quoting cuts
    ],
)
def test_a_non_card_is_quoted_as_the_json_it_was(card: object, shown: str) -> None:
    """A position is JSON: what it holds is quoted as JSON writes it, ``true`` and
    ``null``, ``"x\\""`` — it said Python's ``True``, ``None``, ``['7H']``, ``'x"'``."""
    data = position("yukon", [["KH"]])
    data["tableau"][1] = [card]
    _rejects(data, f"column 2: not a card: {shown} (")


def test_position_rejects_stock_in_yukon() -> None:
    data = position("yukon", [["KH"]], stock=["7h"])
    _rejects(data, "yukon has no stock or waste")
    _rejects(position("double_yukon", [["KH"]], waste=["7H"]), "double_yukon has no stock or waste")


@pytest.mark.parametrize(
    ("variant", "columns"), [("yukon", 7), ("klondike", 7), ("double_yukon", 10)]
)
def test_position_rejects_wrong_column_count(variant: str, columns: int) -> None:
    data = position(variant, [["KH"]])
    data["tableau"].append([])
    _rejects(data, f"{variant} has {columns} tableau columns")
    data["tableau"] = data["tableau"][:-2]
    _rejects(data, f"{variant} has {columns} tableau columns")


@pytest.mark.parametrize("rank", [14, -1, "3", True, 2.0, None])
def test_position_rejects_bad_foundation_rank(rank: object) -> None:
    data = position("yukon", [["KH"]])
    data["foundations"]["C"] = rank
    _rejects(data, f"foundation C: rank {json.dumps(rank)} is not 0–13")  # true, not True


def test_position_rejects_bad_foundation_shapes() -> None:
    data = position("yukon", [["KH"]])
    del data["foundations"]["S"]
    _rejects(data, "foundations must give a rank for each of C, D, H, S")
    double = position("double_yukon", [["KH"]])
    double["foundations"]["H"] = 3
    _rejects(double, "foundation H must be a list of two ranks")
    single = position("yukon", [["KH"]])
    single["foundations"]["H"] = [0, 0]
    _rejects(single, "foundation H: rank [0, 0] is not 0–13")


def test_position_rejects_recycles_beyond_max_passes() -> None:
    """RULES positions / Klondike 6: ``recycles`` cannot exceed max_passes − 1."""
    data = position("klondike", [["KH"]], options={"max_passes": 3}, recycles=3)
    _rejects(data, "recycles is 3, but this game allows at most 2")
    data["recycles"] = 2
    assert load_position(data).recycles == 2
    _rejects(position("australian", [["KH"]], recycles=1), "allows at most 0")
    _rejects(position("yukon", [["KH"]], recycles=1), "allows at most 0")
    _rejects(
        position("klondike", [["KH"]], options={"scoring": "vegas"}, recycles=1), "allows at most 0"
    )
    assert load_position(position("klondike", [["KH"]], recycles=99)).recycles == 99


@pytest.mark.parametrize("value", [-1, True, "1", 1.0])
def test_position_rejects_bad_recycles(value: object) -> None:
    data = position("klondike", [["KH"]])
    data["recycles"] = value
    _rejects(data, "recycles must be a whole number ≥ 0")


def test_position_rejects_unknown_key() -> None:
    data = position("yukon", [["KH"]])
    data["seed"] = 42
    _rejects(data, 'unknown keys in position: "seed"')
    data["a, b\nc"] = 1  # each key itself, on one line
    _rejects(data, 'unknown keys in position: "a, b\\nc", "seed"')


def test_many_unknown_keys_are_said_in_a_short_line() -> None:
    """A file of 60,000 stray keys (under the command line's 1,000,000 characters) was
    refused with every one of them quoted: one line of 589 KB on the terminal. The
    first few are named, and how many more there are."""
    data = position("yukon", [["KH"]])
    for i in range(60_000):
        data[f"k{i:05}"] = 0
    with pytest.raises(InvalidPositionError) as info:
        load_position(data)
    message = str(info.value)
    assert message == 'unknown keys in position: "k00000", "k00001", "k00002" and 59,997 more'


def test_position_rejects_missing_keys() -> None:
    data = position("yukon", [["KH"]])
    del data["foundations"]
    _rejects(data, "a position needs at least variant, tableau and foundations")


def test_position_rejects_unknown_variant() -> None:
    data = position("yukon", [["KH"]])
    data["variant"] = "spider"
    _rejects(data, 'unknown variant "spider" (known: yukon,')
    data["variant"] = True
    _rejects(data, "unknown variant true (known: yukon,")


def test_a_refused_key_or_variant_is_said_with_its_controls_escaped() -> None:
    """JSON's quoting past ASCII leaves a C1 control (U+009B, CSI: a terminal reads
    what follows as a command; U+0085, a next line) and U+2028 as they are: a
    position's variant holding them drove the terminal or broke the one-line error,
    where its ``repr`` had said ``'k\\x9b31m'``. Escaped as JSON escapes them."""
    data = position("yukon", [["KH"]])
    data["variant"] = "k\x9b31m\x85z"
    _rejects(data, 'unknown variant "k\\u009b31m\\u0085z" (known: yukon,')
    data["variant"] = "yukon"
    data["x\u2028y"] = 1
    _rejects(data, 'unknown keys in position: "x\\u2028y"')


def test_position_rejects_unknown_option() -> None:
    _rejects(position("yukon", [["KH"]], options={"draw": 3}), 'variant yukon has no option "draw"')
    _rejects(position("klondike", [["KH"]], options={"draw": 2}), "option draw must be 1 or 3")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "not JSON"),
        ("[]", "a position is a JSON object"),
        (b"42", "a position is a JSON object"),
    ],
)
def test_position_rejects_non_objects(data: Any, message: str) -> None:
    _rejects(data, message)


def test_position_rejects_non_list_parts() -> None:
    data = position("klondike", [["KH"]])
    data["tableau"][0] = "KH"
    _rejects(data, "column 1 must be a list of cards")
    data = position("klondike", [["KH"]])
    data["stock"] = "kh"
    _rejects(data, "stock must be a list of cards")
    data = position("klondike", [["KH"]])
    data["options"] = ["draw"]
    _rejects(data, "options must be a JSON object")


@pytest.mark.parametrize("options", [[], False, 0, ""])
def test_position_rejects_empty_options_that_are_not_an_object(options: object) -> None:
    """An empty list, false, 0 or "" is no options object either: only a non-empty one
    was refused, an empty one read as the defaults."""
    data = position("klondike", [["KH"]])
    data["options"] = options
    _rejects(data, "options must be a JSON object")


def test_position_reads_missing_or_null_options_as_the_defaults() -> None:
    data = position("klondike", [["KH"]])
    data["options"] = None
    assert load_position(data).options.draw == 1
    del data["options"]
    assert load_position(data).options.draw == 1


def test_position_with_a_number_too_long_to_read_says_so_in_its_own_words() -> None:
    """``"recycles": 999…`` (5,000 digits) said Python's "Exceeds the limit (4300
    digits) for integer string conversion: …; use sys.set_int_max_str_digits() to
    increase the limit": advice no user of a position can follow."""
    text = '{"variant": "yukon", "tableau": [], "foundations": {}, "recycles": ' + "9" * 5000 + "}"
    with pytest.raises(InvalidPositionError) as caught:
        load_position(text)
    assert str(caught.value) == "not a position: a number of more than 4300 digits"
