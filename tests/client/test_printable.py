"""solrace_client.printable: what reaches the terminal of a server's or a file's string."""

from __future__ import annotations

from solrace_client.printable import printable


def test_escape_sequences_and_c1_controls_become_question_marks() -> None:
    # An audit's racer name set the terminal's title: OSC 0 ; … BEL.
    assert printable("Riv\x1b]0;PWNED\x07") == "Riv?]0;PWNED?"
    assert printable("a\x9bb\x7fc\nd") == "a?b?c?d"  # CSI (C1), DEL, a newline


def test_ordinary_text_and_non_strings_pass_as_text() -> None:
    assert printable("Ann ◀ [/]x") == "Ann ◀ [/]x"  # markup is the caller's to keep literal
    assert printable(42) == "42"
    assert printable(None) == "None"
