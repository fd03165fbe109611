"""``solrace.rules.board``: the move rules of Yukon (RULES Yukon 1–5) and Klondike (RULES
Klondike 1–8), and the rules common to every variant (undo, auto-complete, stuck, win,
move counter, elapsed time). Scoring is in ``test_scoring.py``, the other variants in
``test_variants.py``.

Every position is built by hand so that each test shows exactly the cards its rule needs.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from solrace.rules import (
    PLAYING,
    STUCK,
    WON,
    Board,
    IllegalMoveError,
    Move,
    deal,
    load_position,
    parse_move,
    position_dict,
)
from solrace.rules.log import apply_entry

from tests.rules.test_support import (
    ALL_FACES,
    VARIANT_IDS,
    build,
    legal,
    position,
    tableau_of,
    won_position,
)


def refusal(board: Board, notation: str) -> str | None:
    return board.refusal(parse_move(notation))


def assert_illegal(board: Board, notation: str, reason: str) -> None:
    """``notation`` is refused with ``reason`` in it, and the board is unchanged."""
    before, count = board.snapshot(), board.move_count
    with pytest.raises(IllegalMoveError) as info:
        board.play(notation)
    assert reason in info.value.reason, info.value.reason
    assert notation not in legal(board)
    assert board.snapshot() == before and board.move_count == count


# =============================================================================== Yukon


def test_yukon_rule1_group_move_ignores_internal_order() -> None:
    """RULES Yukon 1: any face-up card moves with every card on it, whatever their order;
    only the group's first card must fit the destination."""
    board = build("yukon", [["8S"], ["7H", "2C", "KD", "5S"]])
    assert "2:4>1" in legal(board)
    board.play("2:4>1")
    assert tableau_of(board)[:2] == [["8S", "7H", "2C", "KD", "5S"], []]


def test_yukon_rule1_group_first_card_must_be_one_lower_and_opposite_colour() -> None:
    """RULES Yukon 1: the group's first card goes on a card one rank higher, opposite colour."""
    board = build("yukon", [["8S"], ["7H", "2C", "KD", "5S"], ["9C"], ["8H"]])
    assert_illegal(board, "2:3>1", "2C cannot go on 8S: same colour")
    assert_illegal(board, "2:2>1", "KD cannot go on 8S: it must be one rank lower (7)")
    assert_illegal(board, "2:4>3", "7H cannot go on 9C: it must be one rank lower (8)")
    assert_illegal(board, "2:4>4", "7H cannot go on 8H: same colour")
    board.play("4:1>3")  # 8H (red) on 9C (black)
    # The rank a player says, not the notation's letter: "(10)", not "(T)" (an audit).
    jack = build("yukon", [["JD"], ["AC"]])
    assert_illegal(jack, "2:1>1", "AC cannot go on JD: it must be one rank lower (10)")


def test_yukon_rule1_each_group_size_is_its_own_move() -> None:
    """RULES notation: moving 1, 2 or 3 cards off one column are three moves."""
    board = build("yukon", [["9H", "8C", "7D"], ["TS"], ["9D"], ["8S"]])
    assert {"1:3>2", "1:2>3", "1:1>4"} <= legal(board)


def test_yukon_rule1_only_face_up_cards_move() -> None:
    """RULES Yukon 1: a group starts at a face-up card; face-down cards never move."""
    board = build("yukon", [["ks", "7H"], ["8S"]])
    assert_illegal(board, "1:2>2", "column 1 has only 1 face-up card")


def test_yukon_rule2_empty_column_takes_king_only() -> None:
    """RULES Yukon 2: only a King, or a group whose first card is a King, may go to an
    empty column."""
    board = build("yukon", [["QH"], [], ["KD", "3C", "9S"]])
    assert_illegal(board, "1:1>2", "only a King may go to an empty column, not QH")
    assert_illegal(board, "3:2>2", "only a King may go to an empty column, not 3C")
    moves = legal(board)
    # Two empty columns (2 and 4–6) are distinct destinations; the whole King-led
    # column may move to another empty column.
    assert {"3:3>2", "3:3>4", "3:3>5", "3:3>6"} <= moves
    board.play("3:3>5")
    assert tableau_of(board)[4] == ["KD", "3C", "9S"]


def test_yukon_rule2_king_off_face_down_cards_to_empty_column() -> None:
    """RULES Yukon 2 and 4: a King lying on face-down cards may go to an empty column; the
    card under it turns up."""
    board = build("yukon", [["qd", "KS"], []])
    board.play("1:1>2")
    assert tableau_of(board)[:2] == [["QD"], ["KS"]]


def test_yukon_rule3_single_top_card_to_foundation_ace_first() -> None:
    """RULES Yukon 3: only the single top card goes to a foundation; an Ace starts it."""
    board = build("yukon", [["5C", "AH"], ["AD", "9S"], ["2H"]])
    assert_illegal(board, "2>F", "9S cannot go to a foundation: the spade foundation needs AS")
    assert_illegal(board, "3>F", "2H cannot go to a foundation: the heart foundation needs AH")
    board.play("1>F")
    assert position_dict(board)["foundations"]["H"] == 1
    assert tableau_of(board)[0] == ["5C"]  # only the top card moved
    board.play("3>F")
    assert position_dict(board)["foundations"]["H"] == 2


def test_yukon_rule3_next_rank_of_the_same_suit_only() -> None:
    """RULES Yukon 3: a foundation takes the next rank of its own suit."""
    board = build("yukon", [["3H"], ["3D"], ["4D"]], foundations={"H": 2, "D": 2})
    board.play("1>F")
    assert_illegal(board, "3>F", "4D cannot go to a foundation: the diamond foundation needs 3D")
    board.play("2>F")
    board.play("3>F")
    assert position_dict(board)["foundations"] == {"C": 0, "D": 4, "H": 3, "S": 0}


def test_yukon_rule4_auto_flip_true_flips_as_part_of_the_move() -> None:
    """RULES Yukon 4 (auto_flip default true): the uncovered face-down card turns up as part
    of the move that uncovered it; one move is counted."""
    board = build("yukon", [["8S"], ["kc", "qd", "7H"]])
    assert board.options.auto_flip is True
    board.play("2:1>1")
    assert tableau_of(board)[1] == ["kc", "QD"]
    assert board.move_count == 1
    assert not any(m.startswith("U") for m in legal(board))
    assert_illegal(board, "U2", "cards turn up by themselves here (auto_flip is on)")


def test_yukon_rule4_auto_flip_true_flips_after_foundation_move() -> None:
    """RULES Yukon 4: a card to a foundation also uncovers and flips."""
    board = build("yukon", [["qd", "AH"]])
    board.play("1>F")
    assert tableau_of(board)[0] == ["QD"]


def test_yukon_rule4_auto_flip_false_flip_is_an_explicit_counted_move() -> None:
    """RULES Yukon 4 (auto_flip=false): nothing turns up by itself; ``Uc`` turns the card
    up and counts as a move; until then nothing moves from or onto that column."""
    board = build("yukon", [["8S"], ["kc", "qd", "7H"]], options={"auto_flip": False})
    board.play("2:1>1")
    assert tableau_of(board)[1] == ["kc", "qd"]
    assert "U2" in legal(board)
    assert_illegal(board, "2:1>3", "column 2's top card is face down: turn it up first (U2)")
    assert_illegal(board, "2>F", "column 2's top card is face down: turn it up first (U2)")
    assert_illegal(board, "1:1>2", "column 2's top card is face down: turn it up first (U2)")
    assert_illegal(board, "U1", "column 1's top card is already face up")
    assert_illegal(board, "U3", "column 3 is empty")
    board.play("U2")
    assert tableau_of(board)[1] == ["kc", "QD"]
    assert board.move_count == 2
    assert "U2" not in legal(board)


def test_yukon_rule5_foundation_to_tableau_default_false() -> None:
    """RULES Yukon 5: by default foundation cards are fixed."""
    board = build("yukon", [["8C"], []], foundations={"H": 7, "S": 13})
    assert board.options.foundation_to_tableau is False
    assert not any(m.startswith("F") for m in legal(board))
    assert_illegal(board, "FH>1", "foundation cards stay where they are")
    assert_illegal(board, "FS>2", "foundation_to_tableau is off")


def test_yukon_rule5_foundation_to_tableau_true() -> None:
    """RULES Yukon 5 (foundation_to_tableau=true): the top foundation card moves onto a
    column by the building rule, or a King to an empty column."""
    board = build(
        "yukon",
        [["8C"], [], ["8H"]],
        options={"foundation_to_tableau": True},
        foundations={"H": 7, "S": 13, "D": 5},
    )
    moves = legal(board)
    assert {"FH>1", "FS>2", "FS>4", "FS>5", "FS>6"} <= moves
    assert_illegal(board, "FH>3", "7H cannot go on 8H: same colour")
    assert_illegal(board, "FH>2", "only a King may go to an empty column, not 7H")
    assert_illegal(board, "FD>1", "5D cannot go on 8C: it must be one rank lower (7)")
    assert_illegal(board, "FC>1", "the club foundation is empty")
    board.play("FH>1")
    assert tableau_of(board)[0] == ["8C", "7H"]
    assert position_dict(board)["foundations"]["H"] == 6
    board.play("FS>2")
    assert tableau_of(board)[1] == ["KS"]


# ============================================================================ Klondike


def test_klondike_rule1_moves_runs_only() -> None:
    """RULES Klondike 1: a face-up card and everything on it moves only as a descending,
    alternating-colour run (unlike Yukon)."""
    run = build("klondike", [["9S", "8H", "7C"], ["TD"]])
    assert "1:3>2" in legal(run)
    run.play("1:3>2")
    assert tableau_of(run)[1] == ["TD", "9S", "8H", "7C"]

    broken = build("klondike", [["9S", "2D", "7C"], ["TD"]])
    assert_illegal(broken, "1:3>2", "only a run moves in klondike: 2D does not build on 9S")
    assert not any(m.startswith("1:3>") or m.startswith("1:2>") for m in legal(broken))
    # The same layout in Yukon: the group moves.
    assert "1:3>2" in legal(build("yukon", [["9S", "2D", "7C"], ["TD"]]))


def test_klondike_rule1_destination_one_higher_opposite_colour() -> None:
    """RULES Klondike 1: onto a card one rank higher of the opposite colour."""
    board = build("klondike", [["9S", "8H"], ["9D"], ["9C"]])
    assert_illegal(board, "1:1>2", "8H cannot go on 9D: same colour")
    board.play("1:1>3")


def test_klondike_rule2_empty_column_king_or_king_led_run() -> None:
    """RULES Klondike 2: only a King or a run led by a King goes to an empty column."""
    board = build("klondike", [["KS", "QH", "JC"], []])
    assert_illegal(board, "1:2>2", "only a King may go to an empty column, not QH")
    assert_illegal(board, "1:1>2", "only a King may go to an empty column, not JC")
    board.play("1:3>2")
    assert tableau_of(board)[:2] == [[], ["KS", "QH", "JC"]]


def test_klondike_rule3_column_and_waste_top_to_foundation() -> None:
    """RULES Klondike 3: the top card of a column or of the waste goes to a foundation,
    Ace first, then the next rank of the same suit."""
    board = build("klondike", [["AH"]], waste=["3H", "2H"])
    assert_illegal(board, "W>F", "2H cannot go to a foundation: the heart foundation needs AH")
    board.play("1>F")
    board.play("W>F")
    board.play("W>F")
    assert position_dict(board)["foundations"]["H"] == 3
    assert_illegal(board, "W>F", "the waste is empty")


def test_klondike_rule4_waste_to_tableau_by_the_building_rule() -> None:
    """RULES Klondike 4: the top waste card goes on a column by rule 1's destination rule
    (a King to an empty column)."""
    board = build("klondike", [["8H"], ["8S"], []], waste=["KC", "5D", "7C"])
    assert_illegal(board, "W>2", "7C cannot go on 8S: same colour")
    assert_illegal(board, "W>3", "only a King may go to an empty column, not 7C")
    board.play("W>1")
    assert tableau_of(board)[0] == ["8H", "7C"]
    assert_illegal(board, "W>1", "5D cannot go on 7C: it must be one rank lower (6)")
    assert position_dict(board)["waste"] == ["KC", "5D"]
    assert "W>3" not in legal(board)  # only the top waste card (5D) plays, not KC


def test_klondike_rule5_draw_one() -> None:
    """RULES Klondike 5 (draw=1, default): one stock card turns onto the waste; the stock's
    last card is the next drawn."""
    board = build("klondike", [], stock=["9D", "5S", "3H", "JC"])
    assert board.options.draw == 1
    board.play("D")
    pos = position_dict(board)
    assert pos["waste"] == ["JC"] and pos["stock"] == ["9d", "5s", "3h"]


def test_klondike_rule5_draw_three_then_fewer() -> None:
    """RULES Klondike 5 (draw=3): three cards turn over (the third drawn ends on top); fewer
    when the stock has fewer; only the top waste card is playable."""
    board = build("klondike", [["6H"], ["6C"]], options={"draw": 3}, stock=["9D", "5S", "3H", "JC"])
    board.play("D")
    pos = position_dict(board)
    assert pos["waste"] == ["JC", "3H", "5S"] and pos["stock"] == ["9d"]
    assert "W>1" in legal(board)  # 5S on 6H: the top waste card plays …
    assert not any(m.startswith("W>") and m != "W>1" for m in legal(board))  # … JC does not
    board.play("D")
    pos = position_dict(board)
    assert pos["waste"] == ["JC", "3H", "5S", "9D"] and pos["stock"] == []


def test_klondike_rule6_recycle_turns_the_waste_over_without_shuffle() -> None:
    """RULES Klondike 6: with the stock empty the whole waste turns over, in order, as the
    new stock: the next pass draws the same cards in the same order."""
    start = ["9D", "5S", "3H", "JC", "2C"]
    board = build("klondike", [], stock=start)
    first_pass = []
    while board.stock:
        board.play("D")
        first_pass.append(position_dict(board)["waste"][-1])
    assert_illegal(board, "D", "the stock is empty: turn the waste over (R)")
    board.play("R")
    pos = position_dict(board)
    assert pos["stock"] == [n.lower() for n in start] and pos["waste"] == []
    assert pos["recycles"] == 1
    second_pass = []
    while board.stock:
        board.play("D")
        second_pass.append(position_dict(board)["waste"][-1])
    assert second_pass == first_pass == list(reversed(start))


def test_klondike_rule6_recycle_only_when_stock_empty_and_waste_not() -> None:
    """RULES Klondike 6: recycle needs an empty stock and something in the waste."""
    board = build("klondike", [], stock=["9D"])
    assert_illegal(board, "R", "the stock is not empty yet")
    empty = build("klondike", [])
    assert_illegal(empty, "R", "the waste is empty: nothing to turn over")
    assert_illegal(empty, "D", "the stock and the waste are empty")


def _recycles_allowed(max_passes: int | None, tries: int = 6) -> int:
    options = {} if max_passes is None else {"max_passes": max_passes}
    board = build("klondike", [], options=options, waste=["9D", "5S"])
    for n in range(tries):
        if "R" not in legal(board):
            reason = refusal(board, "R")
            assert reason == f"no passes left (max_passes is {max_passes})"
            return n
        board.play("R")
        board.play("D")
        board.play("D")
    return tries


@pytest.mark.parametrize(("max_passes", "recycles"), [(None, 6), (3, 2), (1, 0), (2, 1)])
def test_klondike_rule6_max_passes_allows_n_minus_1_recycles(
    max_passes: int | None, recycles: int
) -> None:
    """RULES Klondike 6: max_passes unlimited (default), 3 or 1; N passes allow N−1
    recycles and a recycle past the limit is illegal."""
    assert _recycles_allowed(max_passes) == recycles


def test_klondike_rule7_foundation_to_tableau_default_true() -> None:
    """RULES Klondike 7: foundation → tableau is on by default in Klondike."""
    board = build("klondike", [["8S"]], foundations={"H": 7})
    assert board.options.foundation_to_tableau is True
    assert "FH>1" in legal(board)
    board.play("FH>1")
    assert tableau_of(board)[0] == ["8S", "7H"]


def test_klondike_rule7_foundation_to_tableau_false() -> None:
    """RULES Klondike 7: the option can turn it off."""
    board = build(
        "klondike", [["8S"]], foundations={"H": 7}, options={"foundation_to_tableau": False}
    )
    assert_illegal(board, "FH>1", "foundation_to_tableau is off")


def test_klondike_rule8_auto_flip() -> None:
    """RULES Klondike 8 (as Yukon 4, auto_flip default true)."""
    board = build("klondike", [["kc", "7H"], ["8S"]])
    board.play("1:1>2")
    assert tableau_of(board)[0] == ["KC"]


def test_klondike_rule8_auto_flip_false_needs_explicit_flip() -> None:
    """RULES Klondike 8 with auto_flip=false: ``Uc`` is a counted move."""
    board = build("klondike", [["kc", "7H"], ["8S"]], options={"auto_flip": False})
    board.play("1:1>2")
    assert tableau_of(board)[0] == ["kc"]
    assert_illegal(board, "1>F", "column 1's top card is face down: turn it up first (U1)")
    board.play("U1")
    assert tableau_of(board)[0] == ["KC"] and board.move_count == 2


def test_klondike_layout_deal() -> None:
    """RULES Klondike layout: columns of 1…7 cards, top face up, 24 in the stock."""
    board = deal("klondike", 3)
    assert [len(c) for c in board.tableau] == [1, 2, 3, 4, 5, 6, 7]
    assert board.down == [0, 1, 2, 3, 4, 5, 6]
    assert len(board.stock) == 24 and board.waste == []


def test_klondike_thoughtful_deals_every_card_face_up() -> None:
    """RULES Klondike options (thoughtful): every card face up, stock included (upper case
    in the position)."""
    board = deal("klondike", 3, {"thoughtful": True})
    plain = deal("klondike", 3)
    assert board.down == [0] * 7
    pos = position_dict(board)
    assert all(n.isupper() for col in pos["tableau"] for n in col)
    assert all(n.isupper() for n in pos["stock"]) and len(pos["stock"]) == 24
    assert board.tableau == plain.tableau and board.stock == plain.stock  # same deal


# ============================================================ common to all variants


def _play_random(board: Board, n: int, seed: int) -> list[tuple[object, ...]]:
    """Play ``n`` random legal moves; return the snapshots before each."""
    rng = random.Random(seed)
    snapshots = []
    for _ in range(n):
        moves = board.legal_moves()
        if not moves:
            break
        snapshots.append(board.snapshot())
        board.play(rng.choice(moves))
    return snapshots


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_common_undo_unlimited_and_counted_as_a_move(variant: str) -> None:
    """RULES common (undo, default true): unlimited undo; each undo counts as a move."""
    board = deal(variant, 11)
    assert board.options.undo is True
    snapshots = _play_random(board, 40, seed=5)
    played = len(snapshots)
    assert played > 10
    for snap in reversed(snapshots):
        board.undo()
        assert board.snapshot() == snap
    assert board.move_count == 2 * played
    assert board.snapshot() == deal(variant, 11).snapshot()
    with pytest.raises(IllegalMoveError, match="there is no move to undo"):
        board.undo()
    assert board.move_count == 2 * played


def test_common_undo_restores_score_and_turns_an_auto_flipped_card_down_again() -> None:
    """RULES common (undo) / docs: undo takes back a move exactly — position, score and the
    card the move turned up, which is face down again."""
    board = build("yukon", [["8S"], ["kc", "qd", "7H"]])
    before_pos, before_score = position_dict(board), board.score
    board.play("2:1>1")
    assert board.score == before_score + 5
    board.undo()
    assert position_dict(board) == before_pos
    assert board.score == before_score
    assert board.down[1] == 2


def test_common_undo_of_every_kind_of_move() -> None:
    """RULES common (undo): every kind of move — tableau, flip, draw, waste → foundation,
    recycle, foundation → tableau, waste → tableau — is taken back exactly."""
    board = build(
        "klondike",
        [["kc", "7H"], ["8S"]],
        options={"auto_flip": False},
        stock=["AS", "5D"],
        foundations={"H": 6, "C": 6},
    )
    start = position_dict(board), board.score, board.snapshot()
    sequence = ["1:1>2", "U1", "D", "D", "W>F", "R", "D", "FC>2", "W>2"]
    for notation in sequence:
        assert notation in legal(board), notation
        board.play(notation)
    assert tableau_of(board)[1] == ["8S", "7H", "6C", "5D"]
    for _ in sequence:
        board.undo()
    assert (position_dict(board), board.score, board.snapshot()) == start
    assert board.move_count == 2 * len(sequence)


def test_common_undo_false_refuses_undo() -> None:
    """RULES common (undo=false): undo is refused and nothing changes."""
    board = build("yukon", [["8S"], ["7H"]], options={"undo": False})
    board.play("2:1>1")
    assert not board.can_undo()
    before = board.snapshot()
    with pytest.raises(IllegalMoveError, match="undo is off in this game"):
        board.undo()
    assert board.snapshot() == before and board.move_count == 1


def _auto_completable(variant: str = "yukon") -> Board:
    """Every card face up, every column strictly descending: C 10, D 11, H 12, S 9 on the
    foundations and the rest in four columns."""
    return build(
        variant,
        [["KC", "QC", "JC"], ["KD", "QD"], ["KH"], ["KS", "QS", "JS", "TS"]],
        foundations={"C": 10, "D": 11, "H": 12, "S": 9},
        filler=None,
    )


def test_common_auto_complete_detected_when_all_face_up_and_descending() -> None:
    """RULES common (auto_complete): every tableau card face up and each column strictly
    descending → the condition holds."""
    assert _auto_completable().can_auto_complete()


def test_common_auto_complete_descending_need_not_be_consecutive() -> None:
    """RULES common (auto_complete): "strictly descending in rank", gaps allowed."""
    board = build(
        "yukon",
        [["KD", "QD", "9D"], ["KC", "JD", "TD"]],
        foundations={"C": 12, "D": 8, "H": 13, "S": 13},
        filler=None,
    )
    assert board.can_auto_complete()
    played = board.auto_complete()
    assert [str(m) for m in played] == ["1>F", "2>F", "2>F", "1>F", "1>F", "2>F"]
    assert board.is_won()


@pytest.mark.parametrize(
    ("columns", "options"),
    [
        # a face-down card (auto_flip off, so it can be the top)
        (
            [["KC", "QC", "JC"], ["KD", "QD"], ["kh"], ["KS", "QS", "JS", "TS"]],
            {"auto_flip": False},
        ),
        # a face-down card under a face-up one
        ([["kc", "QC", "JC"], ["KD", "QD"], ["KH"], ["KS", "QS", "JS", "TS"]], {}),
        # a column not strictly descending (Q under K)
        ([["QC", "KC", "JC"], ["KD", "QD"], ["KH"], ["KS", "QS", "JS", "TS"]], {}),
        # equal ranks in one column (K on K)
        ([["KC", "KD", "QC", "JC"], ["QD"], ["KH"], ["KS", "QS", "JS", "TS"]], {}),
    ],
    ids=["face-down-top", "face-down-under", "rising", "equal-ranks"],
)
def test_common_auto_complete_not_detected_otherwise(
    columns: list[list[str]], options: dict[str, object]
) -> None:
    """RULES common (auto_complete): the condition fails with a face-down card or a column
    that is not strictly descending; auto_complete then does nothing."""
    board = build(
        "yukon",
        columns,
        foundations={"C": 10, "D": 11, "H": 12, "S": 9},
        options=options,
        filler=None,
    )
    assert not board.can_auto_complete()
    assert board.auto_complete() == [] and board.move_count == 0


def test_common_auto_complete_klondike_needs_empty_stock_and_waste() -> None:
    """RULES common (auto_complete): in Klondike the stock and waste must be empty too."""
    cols = [["KC", "QC", "JC"], ["KD", "QD"], ["KH"], ["KS", "QS", "JS"]]
    found = {"C": 10, "D": 11, "H": 12, "S": 9}
    in_stock = build("klondike", cols, foundations=found, stock=["TS"], filler=None)
    in_waste = build("klondike", cols, foundations=found, waste=["TS"], filler=None)
    assert not in_stock.can_auto_complete()
    assert not in_waste.can_auto_complete()
    in_waste.play("W>F")
    assert in_waste.can_auto_complete()
    assert _auto_completable("klondike").can_auto_complete()


def test_common_auto_complete_execution_plays_counted_foundation_moves() -> None:
    """RULES common (auto_complete): the remaining cards go to the foundations, lowest rank
    first, each a counted ``c>F`` move; the game is won."""
    board = _auto_completable()
    played = board.auto_complete(at_ms=9000)
    # Tops by rank: TS (col 4), then J: JC (col 1, the leftmost of two) before JS, …
    assert " ".join(str(m) for m in played) == "4>F 1>F 4>F 1>F 2>F 4>F 1>F 2>F 3>F 4>F"
    assert board.is_won() and board.status() == WON
    assert board.move_count == len(played) == 10
    assert board.elapsed_ms == 9000
    assert not board.can_auto_complete()
    assert board.auto_complete() == []


@pytest.mark.parametrize("on", [True, False])
def test_common_auto_complete_option_via_the_move_log(on: bool) -> None:
    """RULES common (auto_complete, default true): with the option on, the move log
    (``apply_entry``) completes the game right after the move that makes the condition
    hold; with it off the player must play the cards."""
    board = build(
        "yukon",
        [["KC", "QC", "JC"], ["KD", "QD"], ["KH"], ["KS", "QS"], ["TS", "JS"]],
        foundations={"C": 10, "D": 11, "H": 12, "S": 9},
        options={"auto_complete": on},
        filler=None,
    )
    assert not board.can_auto_complete()  # column 5 rises from 10 to J
    apply_entry(board, "5:1>2", at_ms=777)
    assert board.is_won() is on
    assert board.can_auto_complete() is not on
    assert board.move_count == (11 if on else 1)
    assert board.elapsed_ms == 777


def test_common_stuck_when_no_legal_move_and_foundations_incomplete() -> None:
    """RULES common (stuck): no legal move (undo aside) and foundations incomplete → lost."""
    board = load_position(_stuck_yukon())
    assert board.legal_moves() == []
    assert board.is_stuck() and board.status() == STUCK
    board2 = build("yukon", [["8S"], ["7H"]])
    assert not board2.is_stuck() and board2.status() == PLAYING


def _stuck_yukon(variant: str = "yukon", stock: tuple[str, ...] = (), **options: object) -> dict:
    """Seven columns whose face-up tops are all black and never fit one another; every other
    card face down in column 1."""
    tops = ["KC", "KS", "QC", "QS", "JC", "JS", "TC"]
    others = [f.lower() for f in ALL_FACES if f not in tops and f not in stock]
    cols = [[*others, tops[0]]] + [[t] for t in tops[1:]]
    return position(variant, cols, stock=stock, options=options, filler=None)


def test_common_stuck_klondike_with_usable_stock_is_not_stuck() -> None:
    """RULES common (stuck): drawing and recycling are moves, so a usable stock means the
    game is not stuck; once the passes run out it is."""
    unlimited = load_position(_stuck_yukon("klondike", stock=("9S",)))
    assert [str(m) for m in unlimited.legal_moves()] == ["D"]
    unlimited.play("D")
    assert [str(m) for m in unlimited.legal_moves()] == ["R"]
    assert not unlimited.is_stuck()
    one_pass = load_position(_stuck_yukon("klondike", stock=("9S",), max_passes=1))
    one_pass.play("D")
    assert one_pass.is_stuck() and one_pass.status() == STUCK


@pytest.mark.parametrize("variant", VARIANT_IDS)
@pytest.mark.parametrize("f2t", [False, True])
def test_common_win_has_no_legal_moves(variant: str, f2t: bool) -> None:
    """RULES common (win): all foundations complete; a won game has no legal moves — even
    with foundation_to_tableau on, where Kings could otherwise come back to empty columns."""
    options = {"foundation_to_tableau": f2t} if variant != "australian" else {}
    board = load_position(won_position(variant, options))
    assert board.is_won() and board.status() == WON and not board.is_stuck()
    assert board.legal_moves() == []
    if board.options.foundation_to_tableau:
        notation = "FS>1" if variant != "double_yukon" else "FS1>1"
        with pytest.raises(IllegalMoveError, match="won"):
            board.play(notation)


def test_common_win_by_the_last_move() -> None:
    """RULES common (win): the move that completes the foundations wins the game."""
    board = build(
        "klondike", [["KS"]], foundations={"C": 13, "D": 13, "H": 13, "S": 12}, filler=None
    )
    assert board.status() == PLAYING
    board.play("1>F")
    assert board.is_won() and board.legal_moves() == [] and board.status() == WON


def test_common_move_counter() -> None:
    """RULES common: moves are counted — every move, every undo, every auto-complete move;
    a refused move is not."""
    board = build("yukon", [["8S"], ["7H"], ["AD"]])
    board.play("2:1>1")
    board.play(Move.to_foundation(2))
    with pytest.raises(IllegalMoveError):
        board.play("1:1>2")
    board.undo()
    board.pop()  # the engine's take-back (search, perft) is not a player's move
    assert board.move_count == 3


def test_common_elapsed_time_is_passed_in_by_the_caller() -> None:
    """RULES common: elapsed time is counted — from the caller's ``at_ms``; the engine
    reads no clock."""
    board = build("yukon", [["8S"], ["7H"]])
    assert board.elapsed_ms == 0
    board.play("2:1>1", at_ms=1500)
    assert board.elapsed_ms == 1500
    board.undo(at_ms=2750)
    assert board.elapsed_ms == 2750
    board.play("2:1>1")
    assert board.elapsed_ms == 2750


def test_engine_reads_no_clock_and_no_global_randomness() -> None:
    """RULES "Deals must be reproducible" and docs: the engine is pure — no clock, no
    ``random``, no I/O imports in ``solrace/rules`` (the CLI aside)."""
    import solrace.rules as package

    source_dir = Path(package.__file__).parent
    pattern = re.compile(r"^\s*(?:import|from)\s+(time|random|datetime|secrets|os)\b", re.M)
    for path in sorted(source_dir.glob("*.py")):
        found = pattern.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{path.name} imports {found}"


def test_play_accepts_move_or_notation_and_returns_the_move() -> None:
    board = build("yukon", [["8S"], ["7H"]])
    assert board.play("2:1>1") == Move.tableau(1, 1, 0)
    board.undo()
    assert board.play(Move.tableau(1, 1, 0)) == parse_move("2:1>1")
    assert board.history == [parse_move("2:1>1")]


def test_copy_is_independent() -> None:
    board = deal("yukon", 1)
    other = board.copy()
    other.play(other.legal_moves()[0])
    assert board.snapshot() == deal("yukon", 1).snapshot()
    assert other.snapshot() != board.snapshot()
    assert board.history == [] and len(other.history) == 1


def test_undo_records_are_left_alone_by_the_cyclic_collector() -> None:
    """A server keeps every racer's game with its undo stack: records the collector
    tracks are walked by every collection (they held the Move, a named tuple, which
    is never untracked — 52,000 of them cost collections of up to 145 ms). Records of
    plain ints are untracked after their first collection; undo still restores the
    exact position."""
    import gc

    from solrace.rules import deal

    board = deal("klondike", 3)
    start = board.snapshot()
    played = []
    for _ in range(40):
        moves = board.legal_moves()
        if not moves:
            break
        board.push(moves[0])
        played.append(moves[0])
    assert board.history == played
    gc.collect()
    records = board._history  # the stack itself: what a collection would walk
    assert records and not any(gc.is_tracked(record) for record in records)
    while board.history:
        board.pop()
    assert board.snapshot() == start
