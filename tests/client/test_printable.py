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


def test_invisible_formatting_and_line_separators_become_question_marks() -> None:
    # What the server refuses in a name (protocol.messages.display_name), a hostile
    # server or an edited file may still send: a direction override reorders the rest of
    # the line (Ann's name read as Bob's), U+2028/U+2029 break it in some terminals.
    assert printable("Ann\u202eboB") == "Ann?boB"
    assert printable("a\u2028b\u2029c\u200bd\ufeffe") == "a?b?c?d?e"
    assert printable("\U000e0001tag\ue000") == "?tag?"  # a tag and a private-use character


def test_emoji_sequences_and_spaces_of_other_scripts_stay() -> None:
    # A zero-width joiner binds an emoji sequence (the server lets it in a name); a
    # no-break or ideographic space is a space.
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert printable(f"{family} a\u00a0b\u3000c é") == f"{family} a\u00a0b\u3000c é"


def test_characters_newer_than_the_clients_unicode_stay() -> None:
    # U+1FAE8 (a face, Unicode 15.0): unassigned for Python 3.11 (Unicode 14), a name a
    # server on a newer Python accepts (display_name asks its own Unicode). Unassigned
    # is not invisible formatting: shown as ``?``, a newer emoji in a name was lost.
    assert printable("Ann \U0001fae8\U0001fa77") == "Ann \U0001fae8\U0001fa77"
    assert printable("Ann\u202e\U0001fae8") == "Ann?\U0001fae8"


def test_a_byte_that_is_not_utf8_is_shown_as_the_byte() -> None:
    # A file or directory name of another locale (SOLRACE_CONFIG_DIR=$'/tmp/\xff'): Python
    # reads each such byte as a lone surrogate U+DC80-U+DCFF, which was shown as "?" —
    # where every error line quotes it as typed, \xff (solrace.quoting.quoted).
    assert printable("/tmp/\udcff/races") == "/tmp/\\xff/races"
    assert printable("a\udc80b") == "a\\x80b"
    assert printable("\ud800") == "?"  # a surrogate no byte stands for: not text
