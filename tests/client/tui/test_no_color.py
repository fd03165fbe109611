"""The race screen under ``NO_COLOR`` (https://no-color.org), driven by Textual's pilot
against a real server node: the cursor, the picked cards and where they may go must
show without colour. Textual turns every colour grey under ``NO_COLOR`` (or drops it,
on a terminal of native ANSI colours), so these tests look at what survives either:
the cells' attributes (reverse, underline, bold) with their colours taken off."""

from __future__ import annotations

import pytest
from rich.style import Style
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.render import card_label

from tests.net.conftest import Cluster

from .conftest import column_key, first_view, racing, wait_for_text

Cell = tuple[str, Style]


def board_rows(app: SolraceApp) -> list[list[Cell]]:
    """The board's rows on the screen, each cell with its style as the terminal gets it
    (after the app's NO_COLOR filter), colours taken off."""
    region = app.screen.query_one("#board").region
    strips = app.screen._compositor.render_strips()[region.y : region.bottom]
    rows = []
    for strip in strips:
        cells: list[Cell] = []
        for segment in strip:
            style = (segment.style or Style()).without_color
            cells += [(ch, style) for ch in segment.text]
        rows.append(cells[region.x : region.right])
    return rows


def marked_cards(app: SolraceApp) -> dict[str, Style]:
    """Every card on the board whose look (without colour) is not the plain card's,
    with that look. A card is found by its label; the plain look is the commonest."""
    looks: dict[str, Style] = {}
    labels = {card_label(c) for c in _all_cards()}
    for cells in board_rows(app):
        text = "".join(ch for ch, _ in cells)
        for x in range(len(text) - 2):
            if text[x : x + 3] in labels and (x == 0 or text[x - 1] == " "):
                looks[text[x : x + 3]] = cells[x][1] + cells[x + 2][1]
    counts: dict[Style, int] = {}
    for look in looks.values():
        counts[look] = counts.get(look, 0) + 1
    plain = max(counts, key=lambda look: counts[look])
    return {label: look for label, look in looks.items() if look != plain}


def _all_cards() -> list[str]:
    return [r + s for r in "A23456789TJQK" for s in "CDHS"]


def number_looks(app: SolraceApp) -> list[Style]:
    """The look (without colour) of each tableau column's number, left to right."""
    for cells in board_rows(app):
        text = "".join(ch for ch, _ in cells)
        if text.split() == [str(n) for n in range(1, 8)]:
            return [cells[text.index(f" {n} ") + 1][1] for n in range(1, 8)]
    raise AssertionError("no row of column numbers on the screen")


async def test_cursor_pick_and_destinations_show_without_colour(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    server = await cluster.node()
    app = SolraceApp(server.url, action="create", name="Ann", params={"variant": "yukon"})
    assert app.no_color
    async with app.run_test(size=(80, 24)) as pilot:
        bob, _ = await racing(pilot, app, server.url)
        await wait_for_text(pilot, "foundations")
        tops = [card_label(col["up"][-1]) for col in first_view()["tableau"]]

        # The cursor starts on column 1's top card: the one card marked.
        await pilot.pause(0.1)
        assert list(marked_cards(app)) == [tops[0]]
        cursor_look = marked_cards(app)[tops[0]]
        # l moves it: column 2's top card is marked now, the same way, column 1's not.
        await pilot.press("l")
        await pilot.pause(0.1)
        assert marked_cards(app) == {tops[1]: cursor_look}

        # Pick a group of several cards that has a legal destination (the cursor stays
        # on its first card): the rest of the group is marked, otherwise than the
        # cursor, and the destinations' column numbers are marked.
        assert app.controller.board is not None
        move = next(m for m in app.controller.board.legal_moves() if m.kind == 0 and m.number > 1)
        await pilot.press(column_key(move.src), *["k"] * (move.number - 1), "enter")
        await pilot.pause(0.1)
        assert app.controller.marks().picked is not None
        up = first_view()["tableau"][move.src]["up"]
        group = [card_label(c) for c in up[len(up) - move.number :]]
        marked = marked_cards(app)
        assert marked.get(group[0]) == cursor_look
        assert all(marked.get(label) not in (None, cursor_look) for label in group[1:])
        numbers = number_looks(app)
        dests = app.controller.marks().dests
        assert move.dst in dests
        plain = numbers[next(c for c in range(7) if c not in dests)]
        for c in range(7):
            assert (numbers[c] != plain) == (c in dests), f"column {c + 1}'s number"

        # The help says what to look for without colour.
        await pilot.press("question_mark")
        screen = await wait_for_text(pilot, "picked cards")
        assert "inverted" in screen and "underlined" in screen
        await bob.close()
