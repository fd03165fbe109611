"""The keyboard controller without a terminal: cursor, picking, legal destinations (the
engine's), and the notation each key sequence produces."""

from __future__ import annotations

import random

import pytest
from solrace.rules import VARIANTS, deal, parse_move, view
from solrace.rules.moves import (
    FOUNDATION_TO_TABLEAU,
    TABLEAU,
    TO_FOUNDATION,
    WASTE_TO_FOUNDATION,
    WASTE_TO_TABLEAU,
)
from solrace_client.tui.controller import (
    FOUNDATION,
    STOCK,
    TABLEAU_ZONE,
    WASTE,
    Controller,
    Cursor,
    Source,
)
from solrace_client.tui.render import card_label, render_board


def yukon() -> Controller:
    return Controller(view(deal("yukon", 7), owner=True))


def test_cursor_starts_on_the_first_column_and_walks_the_columns() -> None:
    c = yukon()
    assert c.cursor == Cursor(TABLEAU_ZONE, 0, 0)
    c.right()
    up = len(c.view["tableau"][1]["up"])  # type: ignore[index]
    assert c.cursor == Cursor(TABLEAU_ZONE, 1, up - 1)  # on the column's top card
    c.up()
    assert c.cursor == Cursor(TABLEAU_ZONE, 1, up - 2)
    c.down()
    c.down()  # stays on the top card
    assert c.cursor == Cursor(TABLEAU_ZONE, 1, up - 1)
    c.left()
    c.left()  # wraps around
    assert c.cursor.col == 6


def test_up_from_the_first_face_up_card_reaches_the_foundations_and_back() -> None:
    c = yukon()
    c.number(3)
    for _ in range(10):
        c.up()
    assert c.cursor == Cursor(FOUNDATION, 3)
    c.right()
    assert c.cursor == Cursor(FOUNDATION, 0)  # four foundations, wrapping
    c.down()
    assert c.cursor == Cursor(TABLEAU_ZONE, 0, 0)


def test_klondike_top_row_has_stock_and_waste() -> None:
    c = Controller(view(deal("klondike", 3), owner=True))
    c.up()
    assert c.cursor == Cursor(STOCK, 0)
    c.right()
    assert c.cursor == Cursor(WASTE, 0)
    c.left()
    assert c.activate().move == "D"  # Enter on the stock draws


def test_enter_on_an_empty_stock_with_a_waste_recycles() -> None:
    seen = view(deal("klondike", 3), owner=True)
    seen["waste"], seen["stock"] = ["AS"], 0
    seen["tableau"][6]["down"] += 23  # keep the card count honest for board_from_view
    c = Controller(seen)
    c.up()
    assert c.activate().move == "R"


def _legal_sources(board_moves: list[str]) -> set[tuple[int, int]]:
    out = set()
    for text in board_moves:
        m = parse_move(text)
        if m.kind == TABLEAU:
            out.add((m.src, m.number))
    return out


def test_picked_cards_highlight_exactly_the_engines_destinations() -> None:
    seen = view(deal("yukon", 7), owner=True)
    board = deal("yukon", 7)
    legal = {str(m) for m in board.legal_moves()}
    for col, column in enumerate(seen["tableau"]):
        for count in range(1, len(column["up"]) + 1):
            c = Controller(seen)
            c.number(col)
            for _ in range(count - 1):
                c.up()
            c.activate()
            assert c.picked == Source(TABLEAU_ZONE, col, count)
            expected = {d for d in range(7) if f"{col + 1}:{count}>{d + 1}" in legal}
            assert c.destinations == expected
            assert c.foundation_is_legal == (count == 1 and f"{col + 1}>F" in legal)


def test_pick_then_drop_produces_the_canonical_move() -> None:
    board = deal("yukon", 7)
    move = next(m for m in board.legal_moves() if m.kind == TABLEAU)
    c = Controller(view(board, owner=True))
    c.number(move.src)
    for _ in range(move.number - 1):
        c.up()
    assert c.activate().move is None  # picking sends nothing
    c.number(move.dst)  # with cards picked, a column number drops them there
    assert c.picked is None
    c2 = Controller(view(board, owner=True))
    c2.number(move.src)
    for _ in range(move.number - 1):
        c2.up()
    c2.activate()
    # or walk the cursor to the destination and press Enter
    while c2.cursor.col != move.dst:
        c2.right()
    assert c2.activate().move == str(move)


def test_number_key_drop_gives_notation() -> None:
    c = yukon()
    c.number(6)
    c.up()
    c.activate()
    assert c.number(2).move == "7:2>3"


def test_an_illegal_drop_is_still_sent_the_server_judges_it() -> None:
    c = yukon()
    c.number(0)
    c.activate()
    assert not c.destinations
    assert c.number(1).move == "1:1>2"


def test_dropping_back_on_the_same_column_or_escape_puts_it_back() -> None:
    c = yukon()
    c.number(4)
    c.activate()
    action = c.activate()
    assert action.move is None and c.picked is None
    c.activate()
    c.cancel()
    assert c.picked is None and not c.destinations


def test_f_sends_the_cursor_column_or_picked_card_to_the_foundation() -> None:
    c = yukon()
    c.number(3)
    assert c.foundation().move == "4>F"
    c.number(5)
    c.activate()
    assert c.foundation().move == "6>F"
    c.number(5)
    c.up()
    c.activate()  # two cards: no notation sends a group to a foundation
    action = c.foundation()
    assert action.move is None and "single" in (action.message or "")


def test_drop_on_the_foundation_row() -> None:
    c = yukon()
    c.number(2)
    c.activate()
    for _ in range(10):
        c.up()
    assert c.cursor.zone == FOUNDATION
    assert c.activate().move == "3>F"


def test_waste_moves() -> None:
    board = deal("klondike", 5)
    board.play("D")
    seen = view(board, owner=True)
    c = Controller(seen)
    c.up()
    c.right()
    assert c.cursor == Cursor(WASTE, 0)
    c.activate()
    assert c.picked == Source(WASTE)
    legal = board.legal_moves()
    assert c.destinations == {m.dst for m in legal if m.kind == WASTE_TO_TABLEAU}
    assert c.foundation_is_legal == any(m.kind == WASTE_TO_FOUNDATION for m in legal)
    assert c.number(3).move == "W>4"
    c.number(0)
    c.up()
    c.right()
    assert c.cursor == Cursor(WASTE, 0)
    assert c.foundation().move == "W>F"


def test_foundation_to_tableau_in_double_yukon_names_the_pile() -> None:
    seed = next(
        s
        for s in range(100)
        if any(c["up"][-1] == "AH" for c in view(deal("double_yukon", s))["tableau"])
    )
    seen = view(deal("double_yukon", seed, {"foundation_to_tableau": True}), owner=True)
    # an Ace of hearts on top of a column goes up to the first hearts pile
    for column in seen["tableau"]:
        if column["up"][-1] == "AH":
            column["up"].pop()
            break
    seen["foundations"]["H"] = [1, 0]
    c = Controller(seen)
    c.number(0)
    for _ in range(20):
        c.up()
    while c.cursor != Cursor(FOUNDATION, 4):  # piles: C1 C2 D1 D2 H1 H2 …
        c.right()
    c.activate()
    assert c.picked == Source(FOUNDATION, 4)
    assert c.number(3).move == "FH1>4"


def test_foundation_to_tableau_destinations_come_from_the_engine() -> None:
    board = deal("klondike", 1)
    rng = random.Random(4)
    for _ in range(400):  # play until something is on a foundation
        moves = board.legal_moves()
        ups = [m for m in moves if m.kind in (TO_FOUNDATION, WASTE_TO_FOUNDATION)]
        board.push(ups[0] if ups else rng.choice(moves))
        if any(m.kind == FOUNDATION_TO_TABLEAU for m in board.legal_moves()):
            break
    else:
        raise AssertionError("the fixed deal no longer reaches a foundation → tableau move")
    move = next(m for m in board.legal_moves() if m.kind == FOUNDATION_TO_TABLEAU)
    c = Controller(view(board, owner=True))
    c.number(0)
    for _ in range(30):
        c.up()
    while c.cursor != Cursor(FOUNDATION, move.src):
        c.right()
    c.activate()
    expected = {
        m.dst for m in board.legal_moves() if m.kind == FOUNDATION_TO_TABLEAU and m.src == move.src
    }
    assert c.destinations == expected
    assert c.number(move.dst).move == str(move)


def test_flip_when_auto_flip_is_off() -> None:
    board = deal("yukon", 3, {"auto_flip": False})
    seen = view(board, owner=True)
    seen["tableau"][2]["down"] += len(seen["tableau"][2]["up"])
    seen["tableau"][2]["up"] = []
    c = Controller.__new__(Controller)
    Controller.__init__(c)
    c.view = seen  # not a consistent deal: only the cursor logic is under test
    c.layout = type(c.layout).of(seen)
    c.number(2)
    assert c.activate().move == "U3"


def test_a_new_board_keeps_the_cursor_column_and_drops_the_pick() -> None:
    board = deal("yukon", 7)
    c = Controller(view(board, owner=True))
    c.number(4)
    c.activate()
    board.push(board.legal_moves()[0])
    c.set_view(view(board, owner=True))
    assert c.picked is None and not c.destinations
    assert c.cursor.col == 4
    assert c.cursor.index == len(c.view["tableau"][4]["up"]) - 1  # type: ignore[index]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_legal_move_can_be_keyed(variant: str) -> None:
    """Each legal tableau, waste and foundation move of a fresh deal is reachable by
    cursor keys, and produces exactly its notation."""
    board = deal(variant, 21, {"foundation_to_tableau": True} if variant == "yukon" else None)
    for _ in range(3):
        if board.has_stock:
            board.play("D")
    seen = view(board, owner=True)
    for move in board.legal_moves():
        c = Controller(seen)
        if move.kind == TABLEAU:
            c.number(move.src)
            for _ in range(move.number - 1):
                c.up()
            c.activate()
            assert move.dst in c.destinations
            assert c.number(move.dst).move == str(move)
        elif move.kind == TO_FOUNDATION:
            c.number(move.src)
            assert c.foundation().move == str(move)
        elif move.kind == WASTE_TO_TABLEAU:
            c.up()
            c.right()
            c.activate()
            assert c.number(move.dst).move == str(move)


def test_typed_moves_are_normalised_to_canonical_notation() -> None:
    from solrace_client.tui.controller import normalise

    assert normalise(" 3:4 > 6 ") == "3:4>6"
    assert normalise("fh>4") == "FH>4"
    assert normalise("w>f") == "W>F"
    assert normalise("d") == "D"
    assert normalise("Undo") == "undo"
    # No move in any case: as typed, so the refusal quotes what was typed.
    assert normalise(" gar bage ") == "garbage"
    assert normalise("3:4>z") == "3:4>z"


@pytest.mark.parametrize("variant", VARIANTS)
def test_f_on_an_empty_foundation_says_it_is_empty(variant: str) -> None:
    """A variants audit: ``f`` with the cursor on an empty foundation said ``that card
    is on a foundation already`` — there is no card — where Enter there says ``that
    foundation is empty``. Both say that now, on every pile of every variant."""
    c = Controller(view(deal(variant, 7), owner=True))
    piles = [col for zone, col in c.layout.top_zones if zone == FOUNDATION]
    assert len(piles) == (8 if variant == "double_yukon" else 4)
    for pile in piles:
        c.cursor = Cursor(FOUNDATION, pile)
        for action in (c.foundation(), c.activate()):
            assert action.move is None and action.message == "that foundation is empty"


@pytest.mark.parametrize(("draw", "over"), [(1, [0, 1, 2, 3, 4, 5, 5]), (3, [0, 1, 1, 1, 2, 3, 4])])
def test_up_and_down_go_to_the_place_drawn_over_the_column(draw: int, over: list[int]) -> None:
    """A variants audit: Klondike draw 3 draws three waste cards, so its foundations
    stand over columns 5 to 8, but ↑ went by place number: from column 3 to ♣ (over
    column 5), from column 5 to ♥ (over column 7); ↓ from ♣ came down on column 3.
    ``over`` is the top-row place (stock, waste, ♣ ♦ ♥ ♠) ↑ reaches from each column."""
    board = deal("klondike", 3, {"draw": draw})
    for _ in range(3):
        board.play(parse_move("D"))
    seen = view(board, owner=True)
    top = render_board(seen).plain.split("\n")[1]
    drawn = [top[4 * col : 4 * col + 3].strip() for col in range(8)]
    # as drawn: the stock, the waste's top card over column 1 + draw, then the piles
    under = [0, draw, *range(1 + draw, 5 + draw)]
    assert drawn[0].startswith("▒") and drawn[draw] == card_label(seen["waste"][-1]).strip()
    assert [drawn[col] for col in under[2:]] == ["♣", "♦", "♥", "♠"], drawn
    zones = Controller(seen).layout.top_zones
    for col, place in enumerate(over):
        c = Controller(seen)
        c.number(col)
        while c.cursor.zone == TABLEAU_ZONE:
            c.up()
        assert c.cursor == Cursor(*zones[place]), (col, c.cursor)
    for place, zone in enumerate(zones):  # ↓ comes down on the column under the place
        c = Controller(seen)
        c.cursor = Cursor(*zone)
        c.down()
        assert (c.cursor.zone, c.cursor.col) == (TABLEAU_ZONE, min(under[place], 6)), zone
