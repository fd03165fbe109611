"""``solrace.quoting``: what a person typed, quoted in an error line at most in part."""

from __future__ import annotations

import errno

from solrace.quoting import (
    MAX_QUOTED,
    MAX_URL_SHOWN,
    as_typed,
    file_name,
    json_quoted,
    quoted,
    quoted_number,
    url_shown,
    without_password,
)


def test_a_short_text_is_its_repr_and_a_long_one_its_start_and_length() -> None:
    assert quoted("2:1>4") == "'2:1>4'"
    assert quoted("x" * MAX_QUOTED) == repr("x" * MAX_QUOTED)
    assert quoted("x" * 100_000) == f"'{'x' * MAX_QUOTED}'… (100,000 characters)"
    assert quoted("\x1b" * 50) == repr("\x1b" * MAX_QUOTED) + "… (50 characters)"
    assert quoted("d\\xff", as_is=True) == "'d\\xff'"  # already escaped: not twice
    assert quoted(5) == "5" and quoted([1] * 100).endswith("… (300 characters)")


def test_arguments_are_said_as_typed_unless_long() -> None:
    assert as_typed(["--budget", "9"]) == "--budget 9"
    assert as_typed(["e" * 41]) == f"'{'e' * MAX_QUOTED}'… (41 characters)"


def test_a_file_name_is_whole_unless_the_system_found_it_too_long() -> None:
    long_name = "p" * 5000
    assert file_name(OSError(errno.ENOENT, "No such file", long_name)) == long_name
    too_long = OSError(errno.ENAMETOOLONG, "File name too long", long_name)
    assert file_name(too_long) == f"'{'p' * MAX_QUOTED}'… (5,000 characters)"


def test_a_url_loses_its_credentials_and_keeps_the_rest() -> None:
    assert without_password("redis://:s3cret@h:6379/0") == "redis://***@h:6379/0"
    assert without_password("redis+cluster://u:s3cret@a:1,b:2/0?x=1") == (
        "redis+cluster://***@a:1,b:2/0?x=1"
    )
    assert without_password("redis://:p@ss/w@h:6379") == "redis://***@h:6379"  # raw @ and /
    assert (
        without_password("redis://h:6379/0?client_name=a@b") == "redis://h:6379/0?client_name=a@b"
    )
    assert without_password("redis://h:6379/0") == "redis://h:6379/0"
    assert without_password("not a url at all") == "not a url at all"


def test_a_mistyped_url_loses_its_credentials_too() -> None:
    """A URL without its ``://`` (``redis:/:pw@h``, a missing slash) was returned whole,
    and ``--redis-url`` quoted it, password and all, as "not a Redis URL"."""
    assert without_password("redis:/:s3cret@h:6379/0") == "***@h:6379/0"
    assert without_password("redis//u:s3cret@h:6379/0?x=a@b") == "***@h:6379/0?x=a@b"


def test_a_number_is_written_whole_unless_long() -> None:
    assert quoted_number(8765) == "8765" and quoted_number(0.5) == "0.5"
    assert quoted_number(int("9" * 41)) == f"'{'9' * 40}'… (41 characters)"
    assert quoted_number(16**4000 - 1) == "a number of 16,000 bits"  # past str()'s digits


def test_json_quoted_is_json_with_what_is_not_printable_escaped() -> None:
    """As JSON writes a value, but a character that is not printable (a C1 control, a
    line separator, a direction override) as its escape, as ``repr`` escapes it: JSON's
    quoting past ASCII left them raw in an error line."""
    assert json_quoted(True) == "true" and json_quoted(None) == "null"
    assert json_quoted("é\x9b[31m") == '"é\\u009b[31m"'
    assert json_quoted(["\u2028", "\u202e"]) == '["\\u2028", "\\u202e"]'
    assert json_quoted("\U000e0001") == '"\\udb40\\udc01"'
    assert json_quoted("\x85" * 50) == '"' + "\\u0085" * MAX_QUOTED + '"… (50 characters)'
    assert json_quoted({1, 2}) == "{1, 2}"  # not JSON: its repr


def test_json_quoted_says_a_value_nested_too_deeply_in_one_line() -> None:
    """A race file's value nested deeper than the recursion limit lets in (json.loads
    takes a few levels more than json.dumps can write again, deeper in the stack):
    its fallback, ``repr``, recursed as deeply, and ``solrace races``, ``resume`` or
    ``verify`` ended in a RecursionError traceback instead of the file's one line."""
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert json_quoted(deep) == "a value nested too deeply to show"


def test_a_server_url_is_shown_whole_unless_very_long() -> None:
    """A deployment's URL, path included, is what the user copies: whole up to
    MAX_URL_SHOWN characters; a 3,000-character one is cut as quoted() cuts."""
    ordinary = "wss://race.example.org:443/" + "p" * (MAX_URL_SHOWN - 27)
    assert url_shown(ordinary) == ordinary
    long = "ws://h:1/" + "p" * 2991
    assert url_shown(long) == f"'{long[:MAX_URL_SHOWN]}'… (3,000 characters)"


def test_what_is_not_printable_is_escaped_in_arguments_and_file_names() -> None:
    """An argument or a file name holding an escape sequence was said as it is: an
    unrecognized ``$'\\e[2J'`` cleared the terminal, a race file named with one turned
    the error line red (a newcomer walk). Escaped as ``repr`` escapes, it is readable."""
    assert as_typed(["--x", "a\x1b[2J"]) == "--x 'a\\x1b[2J'"
    name = "races/a\x1b]0;title\x07.json"
    assert file_name(OSError(errno.ENOENT, "No such file", name)) == repr(name)
    assert file_name(OSError(errno.ENOENT, "No such file", "a b/ü.json")) == "a b/ü.json"


def test_bytes_that_are_not_utf8_are_quoted_as_the_bytes_typed() -> None:
    """Python reads a command line's byte 0xff as the lone surrogate U+DCFF; quoted as
    ``repr`` shows it, ``'\\udcff'`` named a character nobody typed (``--option
    draw=$'\\xff'``, ``--limit``, a race file's name, a replay command): the byte it
    stands for is said, as ``utf8`` says it of a name. A backslash typed stays one."""
    assert quoted("d\udcff\udc80") == "'d\\xff\\x80'"
    assert quoted("\\udcff") == repr("\\udcff")
    assert quoted("\\\udcff") == "'\\\\\\xff'"
    assert as_typed(["\udcfe"]) == "'\\xfe'"


def test_a_password_in_the_query_loses_its_value_too() -> None:
    """redis-py reads ``?password=`` (and ``?username=``) from a URL's query: the
    "store: redis" start line logged ``url=redis://h:6379/0?password=s3cret`` (an
    operator audit)."""
    for url in (
        "redis://h:6379/0?password=s3cret",
        "redis://h:6379/0?socket_timeout=2&password=s3cret",
        "redis+cluster://a:1,b:2?password=s3cret",
    ):
        assert "s3cret" not in without_password(url), url
