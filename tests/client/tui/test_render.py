"""Rendering without a terminal: cards, backs, colours, foundations, stock and waste,
fitting 80×24, long columns, progress bars, lobby and standings."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from rich.console import Console
from rich.style import Style
from rich.text import Text
from solrace.rules import VARIANTS, Board, deal, new_board, parse_move, view
from solrace.rules.options import OPTION_NAMES
from solrace_client.cli import standings_table
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.controller import Controller, Cursor, Marks, Source
from solrace_client.tui.render import (
    CURSOR_BG,
    DEST_BG,
    MONO,
    PICKED_BG,
    MoveTimes,
    back_text,
    board_width,
    card_label,
    card_text,
    format_ms,
    plain_cards,
    progress_bar,
    race_clock,
    refusal_text,
    render_board,
    render_lobby,
    render_progress,
    render_standings,
    render_watch,
    total_cards,
    watch_needs,
    wrap_parts,
)
from solrace_client.verify import CHECKING, Verdict

#: The board area of the play screen in an 80×24 terminal: 80 − sidebar (30) − padding
#: (2) columns, 24 − header, status and hints rows.
BOARD_COLS, BOARD_ROWS = 48, 21


def lines(text: Text) -> list[str]:
    return text.plain.split("\n")


def cell(text: Text, row: int, column: int) -> tuple[str, str]:
    """(the three characters, their styles) of tableau column ``column`` on text row
    ``row``."""
    offset = offset_of(text, row, column)
    styles = " ".join(str(s.style) for s in text.spans if s.start <= offset < s.end)
    return text.plain[offset : offset + 3], styles


def offset_of(text: Text, row: int, column: int) -> int:
    """Where tableau column ``column`` is on text row ``row``, as an offset into the text."""
    return sum(len(r) + 1 for r in lines(text)[:row]) + column * 4


def find_row(text: Text, column: int, label: str) -> int:
    for r, row in enumerate(lines(text)):
        if r >= 3 and row[column * 4 : column * 4 + 3] == label:
            return r
    raise AssertionError(f"{label!r} not in column {column + 1}")


def test_card_labels_are_three_cells_with_suit_symbols() -> None:
    assert card_label("AS") == " A♠"
    assert card_label("TH") == "10♥"
    assert card_label("7D") == " 7♦"
    assert card_label("KC") == " K♣"
    assert all(len(card_label(c)) == 3 for c in ("AS", "TH", "QD"))


def test_red_and_black_cards_on_a_light_face() -> None:
    red, black = card_text("7H"), card_text("7S")
    assert red.style.color.name == "red3"  # type: ignore[union-attr]
    assert black.style.color.name == "black"  # type: ignore[union-attr]
    assert red.style.bgcolor == black.style.bgcolor  # type: ignore[union-attr]
    assert card_text("QD").style.color.name == "red3"  # type: ignore[union-attr]
    assert card_text("JC").style.color.name == "black"  # type: ignore[union-attr]


def test_backs_and_counted_backs() -> None:
    assert back_text().plain == "░░░"
    assert back_text(5).plain == "▒×5"
    assert back_text(12).plain == "▒12"


def test_yukon_board_shows_cards_backs_foundations_and_column_numbers() -> None:
    seen = view(deal("yukon", 7), owner=True)
    text = render_board(seen)
    rows = lines(text)
    assert "foundations" in rows[0]
    assert rows[1].split() == ["♣", "♦", "♥", "♠"]  # four empty foundations
    assert rows[2].split() == [str(n) for n in range(1, 8)]
    assert rows[3].startswith(card_label(seen["tableau"][0]["up"][0]))
    assert text.plain.count("░░░") == sum(c["down"] for c in seen["tableau"])
    for column in seen["tableau"]:
        for name in column["up"]:
            assert card_label(name).strip() in text.plain
    assert "stk" not in text.plain  # Yukon has no stock


def test_foundation_tops_and_double_yukon_has_eight() -> None:
    seen = view(deal("yukon", 7), owner=True)
    seen["foundations"] = {"C": 0, "D": 3, "H": 0, "S": 13}
    top = lines(render_board(seen))[1]
    assert "3♦" in top and "K♠" in top and "♣" in top
    double = view(deal("double_yukon", 7), owner=True)
    double["foundations"]["H"] = [1, 0]
    top = lines(render_board(double))[1]
    assert top.count("♣") == 2 and top.count("♠") == 2 and "A♥" in top
    assert lines(render_board(double))[2].split()[-1] == "10"


def test_klondike_shows_stock_count_and_waste() -> None:
    board = deal("klondike", 3, {"draw": 3})
    board.play("D")
    seen = view(board, owner=True)
    text = render_board(seen)
    assert "stk" in text.plain and "waste" in text.plain
    assert "▒21" in text.plain  # 24 − 3 drawn
    top = lines(text)[1]
    for name in seen["waste"]:
        assert card_label(name).strip() in top


@pytest.mark.parametrize("draw", [1, 3])
def test_thoughtful_klondike_shows_its_player_the_stock(draw: int) -> None:
    """An audit: under thoughtful (every card face up to its player, the stock too:
    docs/rules.md) the board drew the stock as ``▒24`` only, though the owner's view
    lists its cards. They are drawn under the top row, bottom to top, in the board's
    width and in the 80×24 board area."""
    board = deal("klondike", 3, {"draw": draw, "thoughtful": True})
    board.play("D")
    seen = view(board, owner=True)
    stock = seen["stock_cards"]
    assert len(stock) == 24 - draw
    text = render_board(seen, max_rows=BOARD_ROWS)
    rows = lines(text)
    assert len(rows) <= BOARD_ROWS
    assert max(Text(r).cell_len for r in rows) <= board_width(seen)
    under = rows[2 : rows.index(next(r for r in rows if r.split()[:2] == ["1", "2"]))]
    drawn = [label for row in under for label in (row[i : i + 3] for i in range(0, len(row), 4))]
    assert drawn == [card_label(name) for name in stock]
    for column in seen["tableau"]:  # the tableau is still all there
        assert card_label(column["up"][-1]).strip() in "\n".join(rows[len(under) + 3 :])
    # Nobody else sees them: a spectator's view has no stock cards, nor the board.
    spectated = render_board(view(board), max_rows=BOARD_ROWS)
    assert not any(card_label(name) in spectated.plain for name in stock)


def _stock_drawn_out(variant: str, options: dict[str, Any]) -> Board:
    """A deal of ``variant`` whose stock is all drawn, the waste holding it."""
    board = deal(variant, 3, options)
    while board.refusal(parse_move("D")) is None:
        board.play("D")
    return board


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        ("klondike", {}),
        ("klondike", {"draw": 3}),
        ("klondike", {"max_passes": 1}),
        ("klondike", {"scoring": "vegas"}),
        ("australian", {}),
    ],
)
def test_an_empty_stock_shows_the_recycle_mark_only_when_a_recycle_is_legal(
    variant: str, options: dict[str, Any]
) -> None:
    """An audit: ``↺`` (turn the waste over) stood on every empty stock with a waste,
    also where the engine refuses it: Australian (one pass), Klondike with its passes
    spent. The play screen's footer offered ``r recycle`` in Australian. Both now
    follow the engine. So does ``d draw`` (a variants audit): it stood in the footer
    over an empty stock, where ``d`` is refused, beside ``r recycle`` or alone."""
    board = _stock_drawn_out(variant, options)
    legal = board.refusal(parse_move("R")) is None
    assert legal == (variant == "klondike" and board.options.max_passes != 1)
    for owner in (True, False):
        top = lines(render_board(view(board, owner=owner)))[1]
        assert top.startswith(" ↺ " if legal else " · "), top
    app = SolraceApp("ws://127.0.0.1:1/", action="quick", name="Ann", params={})
    app.controller.set_view(view(board, owner=True))
    hints = app.paint_hints("play", 80).plain
    assert ("r recycle" in hints) == legal, hints
    assert "d draw" not in hints, hints
    if legal:  # turned over: a full stock again, nothing to turn over
        board.play("R")
        assert lines(render_board(view(board, owner=True)))[1].startswith("▒")
        app.controller.set_view(view(board, owner=True))
        hints = app.paint_hints("play", 80).plain
        assert "r recycle" not in hints and "d draw" in hints, hints


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_fits_the_80x24_board_area(variant: str) -> None:
    seen = view(deal(variant, 11), owner=True)
    text = render_board(seen, max_rows=BOARD_ROWS)
    rows = lines(text)
    assert len(rows) <= BOARD_ROWS
    assert max(Text(r).cell_len for r in rows) <= BOARD_COLS


def _long_column_view() -> dict[str, Any]:
    seen = view(deal("yukon", 7), owner=True)
    # a Yukon column can grow long: 6 face-down cards and 20 face-up ones on top
    seen["tableau"][6] = {"down": 6, "up": ["KS", "QH"] * 10}
    return seen


def test_a_column_too_long_compresses_backs_then_shows_a_window() -> None:
    seen = _long_column_view()
    text = render_board(seen, max_rows=BOARD_ROWS)
    rows = lines(text)
    assert len(rows) <= BOARD_ROWS
    assert "▒×6" in text.plain  # backs counted, not drawn
    assert "░░░" not in text.plain
    assert "⋮+" in text.plain  # the column's hidden part is marked
    # the top card of the long column is on screen
    assert rows[-1].rstrip().endswith(card_label("QH"))


def test_the_window_follows_the_cursor_up_a_long_column() -> None:
    seen = _long_column_view()
    marks = Marks(cursor=Cursor("tableau", 6, 0))
    text = render_board(seen, marks, max_rows=BOARD_ROWS)
    assert len(lines(text)) <= BOARD_ROWS
    assert "+" in text.plain and "⋮" in text.plain  # more below the window now
    row = find_row(text, 6, card_label("KS"))
    assert CURSOR_BG in cell(text, row, 6)[1]


def test_backs_are_drawn_one_a_row_when_there_is_room() -> None:
    seen = view(deal("yukon", 7), owner=True)
    text = render_board(seen, max_rows=40)
    assert text.plain.count("░░░") == 21


def test_cursor_picked_and_destination_highlights() -> None:
    seen = view(deal("yukon", 7), owner=True)
    controller = Controller(seen)
    board = controller.board
    assert board is not None
    move = next(m for m in board.legal_moves() if m.kind == 0)
    controller.number(move.src)
    for _ in range(move.number - 1):
        controller.up()
    controller.activate()
    assert move.dst in controller.destinations
    text = render_board(seen, controller.marks())
    col = seen["tableau"][move.src]["up"]
    picked = card_label(col[len(col) - move.number])
    assert CURSOR_BG in cell(text, find_row(text, move.src, picked), move.src)[1]
    dest_top = card_label(seen["tableau"][move.dst]["up"][-1])
    assert DEST_BG in cell(text, find_row(text, move.dst, dest_top), move.dst)[1]
    numbers = lines(text)[2]
    assert numbers[move.dst * 4 : move.dst * 4 + 3].strip() == str(move.dst + 1)
    mark = [str(s.style) for s in text.spans if "green3" in str(s.style)]
    assert mark, "the destination's column number is marked"


def test_progress_bars_names_and_status() -> None:
    racers = [
        {"racer": 1, "name": "Ann", "status": "playing", "foundation": 26, "place": None},
        {"racer": 2, "name": "Bob", "status": "finished", "foundation": 52, "place": 1},
        {"racer": 3, "name": "Cy", "status": "playing", "foundation": 0, "online": False},
    ]
    text = render_progress(racers, 52, me=1, width=28)
    rows = lines(text)
    assert len(rows) == 6
    assert rows[0].startswith("▶Ann") and rows[0].endswith("playing")
    assert rows[1].endswith("26/52") and "█" in rows[1]
    assert "#1 finished" in rows[2]
    assert "offline" in rows[4]
    assert all(len(r) <= 28 for r in rows)
    assert progress_bar(0, 52, 10).plain == "░" * 10
    assert progress_bar(52, 52, 10).plain == "█" * 10
    assert progress_bar(1, 52, 10).plain.count("█") == 1  # any progress shows


@pytest.mark.parametrize("name", ["漢" * 24, "🏁" * 24, "Ann" + "漢" * 21, "x" * 24])
def test_a_name_of_wide_characters_keeps_its_racer_on_one_line(name: str) -> None:
    """A newcomer's audit: 24 CJK characters (two cells each) counted as 24 wrapped the
    racers panel's line at 80 columns, its moves and status pushed under it."""
    for width in (20, 28, 38):
        racers = [{"racer": 1, "name": name, "status": "playing", "moves": 8, "foundation": 3}]
        rows = lines(render_progress(racers, 52, me=1, width=width))
        assert len(rows) == 2
        assert all(Text(r).cell_len == width for r in rows), (width, rows)
        assert rows[0].endswith("playing") and rows[0].startswith("▶" + name[0])
    assert all(Text(line).cell_len <= 20 for line in wrap_parts([name, "yukon"], 20))


def test_clock() -> None:
    assert format_ms(83_000) == "01:23"
    assert format_ms(312_456, 1) == "5:12.5"
    assert race_clock("racing", 1_000, 901_000, 84_000) == "01:23 · 13:37 left"
    # the time left rounds up: the last second says 00:01, the end 00:00; the two add up
    assert race_clock("racing", 0, 900_000, 899_001) == "14:59 · 00:01 left"
    assert race_clock("racing", 0, 900_000, 899_999) == "14:59 · 00:01 left"
    assert race_clock("racing", 0, 900_000, 900_000) == "15:00 · 00:00 left"
    assert race_clock("racing", 0, 900_000, 83_400) == "01:23 · 13:37 left"
    assert race_clock("countdown", 5_000, None, 2_600) == "starts in 2.4 s"
    assert race_clock("lobby", None, None, 0) == ""


def test_finish_time_rounding_up_to_a_minute_carries() -> None:
    """A finish time whose seconds round up to 60 is the next minute: 59,960 ms was
    shown as ``0:60.0`` on the results screen (and 119,999 ms in thousandths-free
    hundredths as ``1:60.00``), where ``solrace result`` said ``60.0s``."""
    assert format_ms(59_960, 1) == "1:00.0"
    assert format_ms(119_999, 2) == "2:00.00"
    assert format_ms(59_949, 1) == "0:59.9"
    assert format_ms(3_599_999, 1) == "60:00.0"
    assert format_ms(59_999, 3) == "0:59.999"


def test_lobby_shows_code_racers_ready_flags_and_host() -> None:
    racers = [
        {"racer": 1, "name": "Ann", "ready": False},
        {"racer": 2, "name": "Bob", "ready": True},
        {"racer": 3, "name": "Cy", "ready": False},
    ]
    settings = {
        "variant": "klondike",
        "options": {"draw": 3},
        "max_racers": 4,
        "time_limit_s": 600,
        "private": True,
        "spectator_delay_s": 30,
    }
    text = render_lobby(racers, settings, "K7QX2M", host=1, me=3).plain
    assert "K7QX2M" in text and "solrace join K7QX2M" in text
    assert "klondike" in text and "draw 3" in text and "private" in text
    rows = {
        r.split()[1] if r.startswith("▶") else r.split()[0]: r
        for r in text.split("\n")
        if r.strip()[:1] in ("▶", "A", "B", "C")
    }
    # The host's flag too: a room starts once everyone, its host included, is ready.
    assert "host" in rows["Ann"] and "not ready" in rows["Ann"]
    assert "✔ ready" in rows["Bob"]
    assert "not ready" in rows["Cy"] and rows["Cy"].startswith("▶")
    racers[0]["ready"] = True
    text = render_lobby(racers, settings, "K7QX2M", host=1, me=3).plain
    [ann] = [r for r in text.split("\n") if r.strip().startswith("Ann")]
    assert "✔ ready" in ann and "host" in ann


def test_the_lobbys_join_command_names_the_server_it_needs() -> None:
    """The lobby's "others join with: solrace join K7QX2M" dropped the --server the host
    typed: run as printed in a second terminal it asked ws://127.0.0.1:8765. Whole,
    wrapped or not."""
    settings = {"variant": "yukon", "options": {}, "max_racers": 4, "time_limit_s": 900}
    flag = " --server ws://127.0.0.1:19000"
    for width in (80, 38):
        text = render_lobby([], settings, "K7QX2M", host=1, me=1, width=width, server=flag)
        said = " ".join(text.plain.split())
        assert "others join with: solrace join K7QX2M --server ws://127.0.0.1:19000" in said


def test_a_narrow_lobby_keeps_each_racer_on_one_line_and_the_deal_whole() -> None:
    """In 40 columns (38 for the lobby) the deal's words were cut (`winnable deal
    (certified, 65 moves, e`) and each racer's row, its name padded to 24 cells,
    wrapped its flags onto a line of their own (`▶ Ann   · not` / `ready  (host)`)."""
    racers = [
        {"racer": 1, "name": "Ann", "ready": False},
        {"racer": 2, "name": "Bartholomew-the-Quick", "ready": True, "online": False},
    ]
    deal = "winnable deal (certified, 65 moves, easy)"
    settings = {"variant": "yukon", "options": {}, "max_racers": 4, "time_limit_s": 900}
    for width in (38, 34):
        text = render_lobby(racers, settings, "K7QX2M", host=1, me=1, width=width, deal=deal)
        lines = text.plain.split("\n")
        assert all(len(line) < width for line in lines), "\n".join(lines)
        assert deal in " ".join(" ".join(lines).split())
        [ann] = [line for line in lines if "Ann" in line]
        assert "not ready" in ann and "(host)" in ann, ann
        [bart] = [line for line in lines if "Barth" in line]
        assert "✔ ready" in bart, bart


@pytest.mark.parametrize("name", ["漢" * 24, "🏁" * 24, "Ann" + "漢" * 21, "x" * 24])
def test_lobby_and_standings_rows_of_a_wide_name_fit_and_line_up(name: str) -> None:
    """The lobby and the race-over screen cut and padded a name by its characters: 24
    CJK characters (two cells each) took 48 cells, the lobby's row of a host offline
    ran to 82 cells in the lobby's 78 (``(offline)`` cut off), the standings' to 84
    (the winner's finish time cut off), and their flags and columns no longer lined
    up under the header's. Each name takes its column's cells, whatever it is made of."""
    racers = [
        {"racer": 1, "name": name, "ready": True, "online": False},
        {"racer": 2, "name": "Bob", "ready": False},
    ]
    settings = {"variant": "yukon", "options": {}, "max_racers": 4, "time_limit_s": 900}
    lobby = lines(render_lobby(racers, settings, "K7QX2M", host=1, me=2, width=78))
    rows = [r for r in lobby if "ready" in r and "racer" not in r]
    assert len(rows) == 2 and all(Text(r).cell_len <= 77 for r in rows), rows
    assert rows[0].endswith("(offline)"), rows
    flag = [Text(re.split("✔ ready|· not ready", r)[0]).cell_len for r in rows]
    assert flag[0] == flag[1], rows  # the flags line up
    result = {**RESULT, "standings": [dict(s) for s in RESULT["standings"]]}
    result["standings"][0]["name"] = name
    for me in (1, 2):
        text = render_standings(result, {"variant": "yukon"}, me=me, race_id="r_8f3k2", width=78)
        rows = [r for r in lines(text) if re.match(r" [12]  ", r)]
        assert len(rows) == 2, rows
        assert [Text(r).cell_len for r in rows] == [Text(rows[1]).cell_len] * 2, rows
        assert Text(rows[0]).cell_len <= 77 and rows[0].endswith("5:12.5"), rows
        assert "(you)" in rows[me - 1], rows


RESULT = {
    "reason": "all_done",
    "seed": 1234567890123,
    "salt": "ab" * 32,
    "commitment": "9f" * 32,
    "standings": [
        {
            "place": 1,
            "racer": 1,
            "name": "Ann",
            "status": "finished",
            "foundation": 52,
            "moves": 141,
            "score": 585,
            "elapsed_ms": 312456,
            "reached_ms": 312456,
            "log": [],
        },
        {
            "place": 2,
            "racer": 2,
            "name": "Bob",
            "status": "resigned",
            "foundation": 7,
            "moves": 30,
            "score": 70,
            "elapsed_ms": None,
            "reached_ms": 5000,
            "log": [],
        },
    ],
}


VERDICTS = [
    None,  # still being checked
    Verdict(True, "✔ verified: the deal was committed at the countdown, every move is legal"),
    Verdict(
        False,
        "✘ NOT VERIFIED — racer 2 (Rival): standing: finish time 1, the last move's is None; "
        "status 'finished' but the replayed game is not won",
    ),
]


@pytest.mark.parametrize("verdict", VERDICTS)
def test_standings_places_seed_and_how_to_verify(verdict: Verdict | None) -> None:
    text = render_standings(RESULT, {"variant": "yukon"}, me=2, race_id="r_8f3k2", verdict=verdict)
    plain = text.plain
    assert "Race over" in plain
    rows = [r for r in plain.split("\n") if r.strip()[:1] in ("1", "2")]
    assert rows[0].split()[:3] == ["1", "Ann", "finished"]
    assert "52/52" in rows[0] and "141" in rows[0] and "585" in rows[0] and "5:12.5" in rows[0]
    assert "Bob (you)" in rows[1] and "7/52" in rows[1]
    assert "1234567890123" in plain
    assert "solrace verify r_8f3k2" in plain
    assert "solrace replay r_8f3k2" in plain  # a spectator's way to the whole race
    said = CHECKING if verdict is None else verdict.line
    assert " ".join(said.split()) in " ".join(plain.split())  # said whole, in 80 columns
    assert ("✔" in plain) == (verdict is not None and verdict.ok)
    assert max(len(r) for r in plain.split("\n")) <= 80


def test_finish_times_equal_in_tenths_are_told_apart() -> None:
    """An audit: 0:37.2 and 0:37.2 in first and second place (37,222 and 37,225 ms):
    two rows that looked equal. Tenths unless two different times would read the
    same; the bot's table too."""
    bob = {**RESULT["standings"][1], "status": "finished", "elapsed_ms": 312_459}
    close = {**RESULT, "standings": [RESULT["standings"][0], bob]}
    plain = render_standings(close, {"variant": "yukon"}, me=2, race_id="r_1").plain
    assert "5:12.456" in plain and "5:12.459" in plain
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(standings_table(close, 2))
    table = console.export_text()
    assert "312.456s" in table and "312.459s" in table
    tied = {**RESULT, "standings": [RESULT["standings"][0], {**bob, "elapsed_ms": 312_456}]}
    assert (
        render_standings(tied, {"variant": "yukon"}, me=2, race_id="r_1").plain.count("5:12.5") == 2
    )  # a real tie reads as one


@pytest.mark.parametrize("elapsed", ["soon", [312_456], 312.5])
def test_a_finish_time_that_is_not_whole_milliseconds_is_shown_as_none(elapsed: object) -> None:
    """A race_over whose standing said ``elapsed_ms: "soon"`` (a faulty or hostile
    server's: the race-over screen shows a result before ``verify`` has judged it)
    ended the terminal client with a ValueError traceback from the time column, and
    ``solrace bot``'s table with a TypeError; a float (312.5) showed a time no server
    counts. The time is shown as none; ``verify`` says what is wrong."""
    odd = {**RESULT["standings"][0], "elapsed_ms": elapsed}
    result = {**RESULT, "standings": [odd, RESULT["standings"][1]]}
    plain = render_standings(result, {"variant": "yukon"}, me=2, race_id="r_1").plain
    (row,) = [r for r in plain.split("\n") if r.strip().startswith("1 ")]
    assert row.split()[-1] == "-", row
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(standings_table(result, 2))
    (line,) = [r for r in console.export_text().split("\n") if "Ann" in r]
    assert line.split()[-1] == "—", line


@pytest.mark.parametrize("field", ["place", "foundation", "moves", "score"])
@pytest.mark.parametrize("value", [[1, 2], {"n": 1}, "soon", None])
def test_a_standing_figure_of_the_wrong_type_is_shown_as_unknown(field: str, value: object) -> None:
    """A race_over whose standing's moves or score was a list or a map (a faulty or
    hostile server's) ended the race-over screen with a TypeError from its format spec,
    and a place of ``{}`` did too: the figure is shown as unknown (``?``; ``-`` for a
    place), and ``verify`` says what is wrong."""
    odd = {**RESULT["standings"][0], field: value}
    result = {**RESULT, "standings": [odd, RESULT["standings"][1]]}
    plain = render_standings(result, {"variant": "yukon"}, me=2, race_id="r_1").plain
    (row,) = [r for r in plain.split("\n") if "Ann" in r]
    shown = {"place": "-", "foundation": "?/52", "moves": "?", "score": "?"}[field]
    assert shown in row.split(), row
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(standings_table(result, 2))
    assert "Ann" in console.export_text()


@pytest.mark.parametrize("standings", ["soon", 7, [1, "x", None]])
def test_standings_that_are_not_a_list_of_maps_show_no_row(standings: object) -> None:
    """``standings`` sent as a string or a number, or holding numbers, ended the
    race-over screen and the bot's table with an AttributeError or a TypeError: what
    is not a standing is not shown (``verify`` names it)."""
    result = {**RESULT, "standings": standings}
    plain = render_standings(result, {"variant": "yukon"}, me=2, race_id="r_1").plain
    assert "Race over" in plain
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(standings_table(result, 2))
    assert "race over" in console.export_text()


def test_watch_puts_two_yukon_boards_side_by_side_in_80_columns() -> None:
    racers = [
        {"racer": 1, "name": "Ann", "status": "playing", "foundation": 0},
        {"racer": 2, "name": "Bob", "status": "playing", "foundation": 0},
        {"racer": 3, "name": "Cy", "status": "stuck", "foundation": 0},
    ]
    seen = view(deal("yukon", 7))
    boards = {1: (1000, seen), 2: (1000, seen), 3: (1000, seen)}
    text = render_watch(racers, boards, width=59, height=21, focus=0, now_ms=4000)
    rows = lines(text)
    assert "Ann" in rows[0] and "Bob" in rows[0] and "Cy" not in rows[0]
    assert "3 s ago" in rows[1]
    assert "Tab" in rows[-1]  # the third board is one Tab away
    assert len(rows) <= 21 and max(Text(r).cell_len for r in rows) <= 59
    focused = lines(render_watch(racers, boards, width=59, height=21, focus=2))
    assert "Cy" in focused[0] and "Ann" in focused[0]
    narrow = lines(render_watch(racers, boards, width=40, height=21, focus=1))
    assert "Bob" in narrow[0] and "Ann" not in narrow[0]


@pytest.mark.parametrize("name", ["Bartholomew-the-Quickest", "漢" * 24, "Ann"])
def test_a_watched_boards_title_keeps_its_status_whatever_the_name(name: str) -> None:
    """The title over a watched board is the name, then the status, cut to the board's
    28 cells: a name of 24 letters left ``1  Bartholomew-the-Quickest`` and no status
    (finished? resigned? — the spectator could not tell), one of wide characters not
    even the whole name. The name is cut, with ``…``, the status kept."""
    racers = [
        {"racer": 1, "name": name, "status": "finished", "foundation": 52},
        {"racer": 2, "name": "Bob", "status": "resigned", "foundation": 3},
    ]
    seen = view(deal("yukon", 7))
    boards = {1: (1000, seen), 2: (1000, seen)}
    rows = lines(render_watch(racers, boards, width=58, height=21, now_ms=4000))
    left, right = rows[0].split("2  Bob")
    assert Text(left).cell_len == 28 + 2, rows[0]  # the panel, and the gap after it
    assert left.rstrip().endswith(" finished") and name[:2] in left, rows[0]
    assert right.rstrip().endswith(" resigned"), rows[0]
    assert Text(rows[0]).cell_len <= 58


def test_a_watched_boards_title_says_offline_of_a_racer_whose_connection_is_gone() -> None:
    """A racer still in the race whose connection is gone is ``offline`` over its
    watched board, as in the racers panel: the title said ``playing`` (a racer-
    experience audit), and the panel that said otherwise is hidden on a narrow screen."""
    racers = [
        {"racer": 1, "name": "Ann", "status": "playing", "online": False, "foundation": 3},
        {"racer": 2, "name": "Bob", "status": "playing", "online": True, "foundation": 5},
    ]
    seen = view(deal("yukon", 7))
    boards = {1: (1000, seen), 2: (1000, seen)}
    rows = lines(render_watch(racers, boards, width=58, height=21, now_ms=4000))
    left, right = rows[0].split("2  Bob")
    assert left.rstrip().endswith("Ann offline"), rows[0]
    assert right.rstrip().endswith(" playing"), rows[0]


def test_refusals_in_plain_words() -> None:
    assert plain_cards("7H cannot go on 8H: same colour") == "7♥ cannot go on 8♥: same colour"
    assert plain_cards("TD cannot go on JS") == "10♦ cannot go on J♠"
    assert refusal_text("illegal_move", "AD cannot go on 2C: same colour") == (
        "A♦ cannot go on 2♣: same colour"
    )
    assert "not a move" in refusal_text("bad_notation", "…", "3-4")
    assert plain_cards("column 3 is empty") == "column 3 is empty"


#: Refusals that say a move does not exist in a game (its variant or options), not
#: that this position does not allow it: the engine's option names, and its words.
_NOT_IN_THIS_GAME = (*OPTION_NAMES, "has no", "foundations per suit", "foundation per suit")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize(
    "options",
    [{}, {"foundation_to_tableau": True, "auto_flip": False}, {"undo": False}],
)
def test_a_mistyped_move_is_answered_with_the_moves_of_that_game_in_80_columns(
    variant: str, options: dict[str, Any]
) -> None:
    """An audit: ``'11:1>2' is not a move: write it like 3:4>6, 2>F, W>5, W>F, FH>4,
    U3, D, R or…`` was cut at 80 columns, and suggested ``FH>4`` in double Yukon, which
    refuses it as ambiguous (``FH2>4``), a waste in Yukon. Each example it gives now is
    a move of that game (the engine refuses it, if at all, for the position only), and
    the status line (a space, then the text) holds it whole."""
    allowed = new_board(variant).allowed_options
    options = {k: v for k, v in options.items() if k in allowed}
    board = deal(variant, 5, options)
    seen = view(board, owner=True)
    for typed in ("11:1>2", "3:4>66666666666"):
        said = refusal_text("bad_notation", "…", typed, seen)
        assert 1 + len(said) <= 80, said
    examples = said.partition("(moves: ")[2].rstrip(")").split(", ")
    assert examples[:2] == ["3:4>6", "2>F"]
    for example in examples:
        if example == "undo":
            assert board.options.undo
            continue
        why = board.refusal(parse_move(example))
        assert why is None or not any(word in why for word in _NOT_IN_THIS_GAME), (example, why)
    assert ("FH2>4" in examples) == (
        variant == "double_yukon" and board.options.foundation_to_tableau
    )
    assert ("D" in examples) == new_board(variant).has_stock
    assert ("R" in examples) == (variant == "klondike")  # Australian: one pass
    assert ("U3" in examples) == (not board.options.auto_flip)


def spans_at(text: Text, offset: int) -> list[Style]:
    return [Style.parse(str(s.style)) for s in text.spans if s.start <= offset < s.end]


def test_without_colour_the_marks_are_attributes() -> None:
    """NO_COLOR's look: the cursor inverted, a pick underlined, the destinations'
    column numbers and the foundations' label inverted; no mark is a colour."""
    for mark in (MONO.cursor, MONO.picked, MONO.dest_label):
        assert mark.color is None and mark.bgcolor is None
    seen = view(deal("yukon", 7), owner=True)
    marks = Marks(
        cursor=Cursor("tableau", 6, 2),
        picked=Source("tableau", 6, 3),
        dests=frozenset({1}),
        to_foundation=True,
    )
    text = render_board(seen, marks, look=MONO)
    up = seen["tableau"][6]["up"]
    for i, name in enumerate(up):
        row = find_row(text, 6, card_label(name))
        styles = Style.combine(spans_at(text, offset_of(text, row, 6)))
        assert bool(styles.reverse) == (i == 2), name
        assert bool(styles.underline) == (i > 2), name
    for c in range(7):
        label = Style.combine(spans_at(text, offset_of(text, 2, c) + 1))
        assert bool(label.reverse) == (c == 1), f"column {c + 1}'s number"
    top = lines(text)[0]
    assert Style.combine(spans_at(text, top.index("foundations"))).reverse
    # The cursor on an empty column is an inverted slot.
    empty = {**seen, "tableau": [{"down": 0, "up": []}, *seen["tableau"][1:]]}
    text = render_board(empty, Marks(cursor=Cursor("tableau", 0, 0)), look=MONO)
    assert Style.combine(spans_at(text, offset_of(text, find_row(text, 0, " · "), 0))).reverse


def test_console_render_is_plain_text_friendly() -> None:
    # a smoke check that rich can print a board without a terminal (no markup errors)
    console = Console(width=80, record=True, color_system=None)
    console.print(render_board(view(deal("australian", 2), owner=True)))
    assert "foundations" in console.export_text()


def test_picked_group_is_blue() -> None:
    seen = view(deal("yukon", 7), owner=True)
    marks = Marks(cursor=Cursor("tableau", 6, 2), picked=Source("tableau", 6, 3))
    text = render_board(seen, marks)
    up = seen["tableau"][6]["up"]
    for i, name in enumerate(up):
        styles = cell(text, find_row(text, 6, card_label(name)), 6)[1]
        if i == 2:
            assert CURSOR_BG in styles
        elif i > 2:
            assert PICKED_BG in styles
        else:
            assert PICKED_BG not in styles and CURSOR_BG not in styles


def test_a_board_behind_its_racers_moves_past_the_delay_says_held_back() -> None:
    """An audit: "3/52 up · 33 s ago" under "boards 5 s behind" — held back, but its
    racer's cards up had not changed, so only its age said anything. Its moves had:
    a board older than a move made more than the delay ago is held back."""
    board = view(deal("yukon", 7))
    racers = [{"racer": 1, "name": "Ann", "status": "playing", "foundation": 0}]
    boards = {1: (1000, board)}
    times = MoveTimes()
    times.reset(racers)
    times.saw(1, 0, 2_000)  # a status alone (a resign): no move
    assert times.at == {}
    times.saw(1, 1, 3_000)
    times.saw(1, 2, 4_000)

    def title(now_ms: int, moved: Mapping[int, Sequence[int]]) -> str:
        text = render_watch(racers, boards, 80, 24, now_ms=now_ms, delay_ms=5_000, moved_at=moved)
        return lines(text)[1]

    assert "held back, 33 s old" in title(34_000, times.at)
    assert "held back" not in title(34_000, {})  # before: "0/52 up · 33 s ago"
    assert "held back" not in title(8_000, times.at)  # its first move is 5 s old: the delay
    # The racer's moves all before the board (as this window saw them, a little late):
    # the board is its latest, however old.
    assert "held back" not in title(34_000, {1: [500, 1_900]})


def test_a_board_behind_its_racers_live_count_past_the_delay_says_held_back() -> None:
    """A newcomer audit: the top line said "boards live", a board "Fast finished 0/52
    up · 11 s ago", the standings "Fast #1 finished 52/52" — fair spectating holding
    the board back, which nothing on the screen said."""
    seen = view(deal("yukon", 7))
    racers = [
        {"racer": 1, "name": "Fast", "status": "finished", "foundation": 52},
        {"racer": 2, "name": "Slow", "status": "playing", "foundation": 0},
    ]
    boards = {1: (1000, seen), 2: (1000, seen)}
    rows = lines(render_watch(racers, boards, width=80, height=24, now_ms=12_000))
    fast, slow = rows[1][: len(rows[1]) // 2], rows[1][len(rows[1]) // 2 :]
    assert "0/52 · held back, 11 s old" in fast
    assert "held back" not in slow  # its board shows all it has up
    delayed = lines(render_watch(racers, boards, 80, 24, now_ms=12_000, delay_ms=30_000))
    assert "held back" not in delayed[1]  # 11 s behind is the room's 30 s delay at work
    late = lines(render_watch(racers, boards, 80, 24, now_ms=33_000, delay_ms=30_000))
    assert "held back" in late[1]


#: A tableau cell as the watch screen draws it, and how many cards it stands for.
_CELL_CARDS = (
    (re.compile(r"^( [A2-9JQK]|10)[♣♦♥♠]$"), lambda m: 1),
    (re.compile(r"^░░░$"), lambda m: 1),
    (re.compile(r"^▒×?(\d+)$"), lambda m: int(m.group(1))),
    (re.compile(r"^⋮\+?(\d+)$"), lambda m: int(m.group(1))),
    (re.compile(r"^\+?(\d+)⋮$"), lambda m: int(m.group(1))),
)


def drawn_columns(rows: Sequence[str], offset: int, columns: int) -> list[tuple[int, str]]:
    """Per tableau column of the watch panel at ``offset`` (its rows under the column
    numbers): (the cards its cells stand for, its last cell)."""
    drawn = []
    for c in range(columns):
        count, last = 0, ""
        for row in rows:
            text = row[offset + c * 4 : offset + c * 4 + 3]
            if not text.strip() or text == " · ":
                continue
            matched = [(p.match(text), f) for p, f in _CELL_CARDS]
            count += next(f(m) for m, f in matched if m)  # an unknown cell fails here
            last = text
        drawn.append((count, last))
    return drawn


def _piled_view(variant: str, onto: int, sources: Sequence[int]) -> dict[str, Any]:
    """A fresh deal whose face-up cards of the ``sources`` columns lie on ``onto``'s: a
    column longer than a watch panel, the deal's cards all there."""
    seen = view(deal(variant, 7))
    tableau = [dict(column) for column in seen["tableau"]]
    for c in sources:
        tableau[onto]["up"] = [*tableau[onto]["up"], *tableau[c]["up"]]
        tableau[c]["up"] = []
    return {**seen, "tableau": tableau}


@pytest.mark.parametrize(
    ("variant", "racers", "onto", "sources"),
    [("yukon", 3, 3, (4, 5, 6)), ("double_yukon", 2, 2, (1, 3, 4, 5))],
)
def test_watch_draws_every_card_of_a_long_column_when_not_every_board_fits(
    variant: str, racers: int, onto: int, sources: Sequence[int]
) -> None:
    """An audit: at 80×24, with a board one Tab away, the note under the boards took
    the last row of every board, the top card of its longest column (Yukon 51 of 52
    cards, double Yukon 103 of 104). Every card is drawn or counted (`▒×n`, `⋮+n`),
    the top card of each column drawn, and the note under the boards."""
    seen = _piled_view(variant, onto, sources)
    assert max(len(column["up"]) for column in seen["tableau"]) >= 20
    who = [{"racer": r, "name": f"R{r}", "status": "playing"} for r in range(1, racers + 1)]
    rows = lines(render_watch(who, {r["racer"]: (1000, seen) for r in who}, 80, 24))
    assert len(rows) <= 24 and "Tab" in rows[-1]
    panel = max(board_width(seen), 20) + 2
    shown = (80 + 2) // panel
    assert 1 <= shown < racers
    for slot in range(shown):
        drawn = drawn_columns(rows[5:-1], slot * panel, len(seen["tableau"]))
        for column, (count, last) in zip(seen["tableau"], drawn, strict=True):
            assert count == column["down"] + len(column["up"])
            if column["up"]:
                assert last == card_label(column["up"][-1])
        assert sum(count for count, _ in drawn) == total_cards(variant)


@pytest.mark.parametrize(
    ("status", "offers_moves"),
    [("playing", True), ("stuck", True), ("resigned", False), ("finished", False)],
)
def test_the_footer_offers_moves_only_to_a_racer_who_can_still_make_one(
    status: str, offers_moves: bool
) -> None:
    """A newcomer walk: after a resign the footer still offered pick/put, undo and
    type, each of which then said "no more moves". Stuck keeps them (undo may help)."""
    app = SolraceApp("ws://127.0.0.1:1/", action="quick", name="Ann", params={})
    app.controller.set_view(view(deal("yukon", 1), owner=True))
    app.state.you = {"racer": 0, "status": status}
    hints = app.paint_hints("play", 80).plain
    assert ("pick/put" in hints and "u undo" in hints) == offers_moves, hints
    assert (f"you: {status} — the others race on" in hints) != offers_moves, hints
    assert hints.rstrip().endswith("? help  q quit"), hints


def test_the_footer_offers_undo_only_where_the_room_allows_it() -> None:
    """A review: the help hid ``u`` in a room without undo while the footer offered it,
    and a racer stuck there (for good: no undo) was still offered every key."""
    app = SolraceApp("ws://127.0.0.1:1/", action="quick", name="Ann", params={})
    app.controller.set_view(view(deal("yukon", 1, {"undo": False}), owner=True))
    app.state.you = {"racer": 0, "status": "playing"}
    assert "u undo" not in app.paint_hints("play", 80).plain
    app.state.you = {"racer": 0, "status": "stuck"}
    assert "you: stuck — the others race on" in app.paint_hints("play", 80).plain
    app.controller.set_view(view(deal("yukon", 1), owner=True))
    hints = app.paint_hints("play", 80).plain
    assert "u undo" in hints and "pick/put" in hints, hints


@pytest.mark.parametrize(
    ("variant", "options", "recycles", "shown"),
    [
        ("klondike", {"max_passes": 3}, 0, "pass 1/3"),
        ("klondike", {"max_passes": 3}, 2, "pass 3/3"),
        ("klondike", {"scoring": "vegas", "draw": 3}, 1, "pass 2/3"),  # Vegas's default
        ("australian", {}, 0, "pass 1/1"),
        ("klondike", {}, 1, None),  # unlimited
        ("yukon", {}, 0, None),  # no stock
    ],
)
def test_the_top_line_says_which_pass_of_how_many(
    variant: str,
    options: dict[str, Any],
    recycles: int,
    shown: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variants audit: with a limited number of passes through the stock (Klondike's
    ``max_passes``, Vegas scoring's default, Australian's one) nothing said how many
    were left: the player learnt it when the empty stock showed ``·`` and ``r`` was
    refused. The top line says it, beside the move counter."""
    board = deal(variant, 3, options)
    for _ in range(recycles):
        while board.refusal(parse_move("D")) is None:
            board.play("D")
        board.play("R")
    app = SolraceApp("ws://127.0.0.1:1/", action="quick", name="Ann", params={})
    app.controller.set_view(view(board, owner=True))
    app.state.you = {"racer": 0, "status": "playing", "moves": 7}
    header = app.paint_header("play", 80).plain
    assert "moves 7" in header, header
    if shown is None:
        assert "pass" not in header, header
    else:
        assert f"{shown}  moves 7" in header, header
    # In 80 columns, mid-race, with a room: the app's name gives way, not the score
    # (with the pass in, `moves 81  score 41` lost the score).
    state = app.state
    state.loaded, state.code, state.settings = True, "HWCSND", {"variant": variant}
    state.phase, state.start_at_ms, state.ends_at_ms = "racing", 0, 900_000
    app.server_now = lambda: 16_000  # type: ignore[method-assign]
    monkeypatch.setattr(SolraceApp, "online", property(lambda _: True))
    state.you = {"racer": 0, "status": "playing", "moves": 161, "score": 1250}
    header = app.paint_header("play", 80).plain
    assert len(header) <= 80 and header.rstrip().endswith("moves 161  score 1250"), header
    assert f"{variant}  room HWCSND" in header, header


@pytest.mark.parametrize("options", ["soon", [1, 2], 7, {1: True, "draw": 3}])
@pytest.mark.parametrize("limit", ["soon", [600], 1.5, None])
def test_the_lobby_shows_settings_of_the_wrong_type_as_unknown(
    options: object, limit: object
) -> None:
    """A faulty or hostile server's room whose options were a string or a list ended the
    lobby with an AttributeError, a time limit of ``"soon"`` with a ValueError (and
    options keyed by numbers and strings a sort's TypeError): what is not a map of
    options shows none, a time limit that is not whole is not shown."""
    settings = {"variant": "klondike", "max_racers": 2, "options": options, "time_limit_s": limit}
    plain = render_lobby([], settings, "ABC234", None, None).plain
    assert "klondike · up to 2 racers\n" in plain
    assert " min" not in plain


def test_move_times_survive_a_snapshot_of_the_same_round_only() -> None:
    """A reconnection's snapshot kept no move times, and a board held back by its
    racer's moves alone then said only its age (a spectator audit). They are kept for
    the same round (its commitment) and a count that has not gone down; another
    round's, or a count gone down, are dropped."""
    racers = [{"racer": 1, "moves": 0}]
    times = MoveTimes()
    times.reset(racers, None)  # watched from the lobby
    times.saw(1, 1, 3_000, "c1")
    times.reset([{"racer": 1, "moves": 2}], "c1")  # reconnected: a move made meanwhile
    assert times.at == {1: [3_000]}
    times.reset([{"racer": 1, "moves": 0}], "c1")  # a count gone down: not these moves
    assert times.at == {}
    times.saw(1, 1, 4_000, "c1")
    times.reset([{"racer": 1, "moves": 1}], "c2")  # another round
    assert times.at == {}
    times.saw(1, 2, 5_000, "c2")
    times.saw(1, 1, 6_000, "c3")  # a new round's first move: the old round's dropped
    assert times.at == {1: [6_000]}


@pytest.mark.parametrize("width", [28, 30, 32])
def test_the_watch_note_fits_a_narrow_terminal(width: int) -> None:
    """A spectator audit at 32 columns: "1 of 3 boards: Tab for the others" (33
    cells) was wider than the screen and wrapped onto a second row, which
    watch_needs counts as one (in a terminal as high as it needs, a row lost). It is
    said shorter where it does not fit, on one row."""
    seen = view(deal("yukon", 7))
    racers = [{"racer": r, "name": n, "status": "playing"} for r, n in enumerate("ABC", 1)]
    boards = {r["racer"]: (1000, seen) for r in racers}
    need_w, need_h = watch_needs(racers, boards, width)
    assert need_w <= width
    rows = lines(render_watch(racers, boards, width, need_h))
    assert all(len(row.rstrip()) <= width for row in rows), rows
    assert "Tab" in rows[-1] and "1" in rows[-1] and "3" in rows[-1]
    wide = lines(render_watch(racers, boards, 80, 24))
    assert wide[-1].startswith("2 of 3 boards: Tab for the others")  # unchanged where it fits
