"""tui/widgets.py: what the help screens say."""

from __future__ import annotations

import pytest
from solrace_client.tui.render import MONO
from solrace_client.tui.widgets import HELP, help_text


def test_only_a_racer_is_told_about_picked_cards() -> None:
    """A spectator's help listed "Blue: picked cards · green: where they may go": a
    spectator picks nothing (newcomer pass)."""
    assert "picked cards" in help_text("play").plain
    for kind in ("watch", "lobby", "standings"):
        assert "picked cards" not in help_text(kind).plain


def test_the_help_names_the_marks_the_board_uses() -> None:
    """Colours by default; under NO_COLOR, where the help said "yellow: cursor" of a
    cursor drawn in no colour at all, the attributes that mark it instead."""
    assert "Yellow: cursor" in help_text("play").plain
    plain = help_text("play", MONO).plain
    assert "Inverted: cursor" in plain and "underlined: picked cards" in plain
    assert not any(colour in plain.lower() for colour in ("yellow", "blue", "green"))


@pytest.mark.parametrize("kind", list(HELP))
def test_every_help_lists_its_keys_and_how_to_close(kind: str) -> None:
    text = help_text(kind).plain
    for key, what in HELP[kind]:
        # Each key apart from its words: "Shift+Tab / ← / hprevious racer's board".
        assert f"{key}  " in text and what in text
    assert text.endswith("Press any of Esc, q, ? to close")


def test_the_watch_help_says_boards_lag_and_may_be_held_back() -> None:
    """An audit: a board held back for fairness often did not say so, and the help
    said nothing of the delay or of holding back."""
    text = help_text("watch").plain
    assert "spectator delay" in text and "held back" in text
    assert "held back" not in help_text("play").plain
