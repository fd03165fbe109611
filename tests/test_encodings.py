"""Every console script under an output encoding that lacks the symbols they print
(``PYTHONIOENCODING=ascii`` or ``latin-1``, or the C locale without Python's UTF-8
mode): never a traceback — an audit saw ``solrace races``, ``verify`` and ``replay``
end in UnicodeEncodeError with status 1 — and no ``\\u2014`` escapes on standard error
(which the race screen is drawn on): each such symbol is written as its ASCII stand-in
(solrace.streams)."""

from __future__ import annotations

import ast
import io
import os
import re
import socket
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Final

import pytest
from solrace.protocol.messages import DRAWS_NOTHING
from solrace.streams import STAND_INS, ascii_for
from solrace_client.results import finished_race, write_result
from solrace_client.tui import render
from solrace_client.tui.app import SolraceApp

from tests.client.conftest import YUKON, synthetic_result

BIN = Path(sys.executable).parent
#: The narrow encodings: by ``PYTHONIOENCODING``, and by the locale as the audit ran it.
SETTINGS = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    "C locale": {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
}
#: What standard error's backslashreplace wrote for a symbol it could not encode.
ESCAPED = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


@pytest.fixture
def race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A saved race in a config directory of the test's own: its id."""
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SOLRACE_SERVER", raising=False)
    saved = finished_race(
        "r_synthetic", synthetic_result(), YUKON, "SYN123", published_commitment=None
    )
    return write_result(saved).stem


def _run(setting: str, argv: list[str], stdin: str = "") -> subprocess.CompletedProcess[bytes]:
    """A console script of this environment under ``setting``, at 50 columns (``races``
    then writes its lines, with ``·``, rather than its table)."""
    env = {**os.environ, **SETTINGS[setting], "COLUMNS": "50"}
    for name in ("LANG", "LC_CTYPE", "LC_ALL", "PYTHONUTF8", "PYTHONIOENCODING"):
        if name not in SETTINGS[setting]:
            env.pop(name, None)
    command = [str(BIN / argv[0]), *argv[1:]]
    return subprocess.run(command, input=stdin.encode(), capture_output=True, env=env, timeout=60)


def _said(done: subprocess.CompletedProcess[bytes], setting: str) -> tuple[str, str]:
    """Standard output and error, decoded as the setting encoded them, checked to hold
    no traceback and no escaped symbol."""
    encoding = "ascii" if setting == "C locale" else setting
    out, err = done.stdout.decode(encoding), done.stderr.decode(encoding)
    assert "Traceback" not in err and not ESCAPED.search(err), err
    return out, err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_client_commands_work_and_say_their_symbols_in_ascii(setting: str, race: str) -> None:
    done = _run(setting, ["solrace", "verify", race])
    out, _ = _said(done, setting)
    assert done.returncode == 0 and "OK as far as checked" in out
    done = _run(setting, ["solrace", "races"])
    out, _ = _said(done, setting)
    dot = "·" if setting == "latin-1" else "-"  # Latin-1 has the middle dot
    assert done.returncode == 0 and f"code SYN123 {dot} yukon {dot} all_done" in out
    done = _run(setting, ["solrace", "replay", race], stdin="n\nq\n")
    out, _ = _said(done, setting)
    assert done.returncode == 0 and "Ann" in out
    done = _run(setting, ["solrace", "rooms", "--server", f"ws://127.0.0.1:{_closed_port()}"])
    _, err = _said(done, setting)
    assert done.returncode == 2 and "connection refused - is solrace-server running?" in err


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_rules_and_the_server_commands_say_their_help_in_ascii(setting: str) -> None:
    done = _run(setting, ["solrace-rules", "deal", "--help"])
    out, _ = _said(done, setting)
    assert done.returncode == 0 and "0 <= seed < 2**64" in out and "(decimal or 0x.)" in out
    done = _run(setting, ["solrace-server", "--help"])
    out, _ = _said(done, setting)
    assert done.returncode == 0 and "solrace-server" in out
    done = _run(setting, ["solrace-server", "--port", "0", "--log-format", "xml"])
    _, err = _said(done, setting)
    assert done.returncode == 2 and len(err.splitlines()) == 1, err


def test_the_race_screens_symbols_stand_in_one_character_for_one() -> None:
    """The race screen counts cells: a card is three (`` A♠`` → `` AS``), a mark one."""
    for symbol in [*render.SUIT_SYMBOL.values(), "▶", "✔", "░", "▒", "█", "⋮", "×", "…", "—"]:
        assert len(ascii_for(symbol)) == 1 and ascii_for(symbol).isascii(), symbol
    assert [ascii_for(c) for c in "─│┼━┃╋"] == ["-", "|", "+", "-", "|", "+"]
    assert ascii_for("é") == "e" and ascii_for("😀") == "?"
    assert all(stand_in.isascii() for stand_in in STAND_INS.values())


#: Symbols the code holds that are never written where they cannot be encoded: the
#: race screen's footer says ``spc`` for ``⏎`` there (tested below).
NEVER_DEGRADED: Final = frozenset("⏎")


def _string_literals(path: Path) -> list[tuple[str, int]]:
    """The string literals of a module that may reach a terminal: every one but its
    docstrings (``§`` and ``µ`` abound there)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            docstrings.add(id(body[0].value))
    return [
        (node.value, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_every_symbol_the_commands_print_has_a_stand_in() -> None:
    """An ASCII terminal showed ``?`` for the symbols the stand-ins did not name: the
    race screen's ``D ✓`` (a move the server took) read ``D ?``, an empty stock that
    may be turned over (``↺``) a ``?``, the bot's own row ``Bob ?``, and
    ``solrace-rules deal klondike 1 -o max_passes=0`` said ``a whole number ? 1``.
    Every non-ASCII character of the code's strings is now a stand-in, a letter that
    loses its accent, a box line, or one that draws nothing (a control or a filler
    character: data of the checks that refuse them)."""
    root = Path(__file__).parent.parent
    unnamed = []
    for package in (root / "client" / "solrace_client", root / "server" / "solrace"):
        for path in sorted(package.rglob("*.py")):
            for text, line in _string_literals(path):
                for char in set(text) - NEVER_DEGRADED:
                    control = unicodedata.category(char).startswith("C")
                    draws = not control and char not in DRAWS_NOTHING
                    if not char.isascii() and draws and ascii_for(char) == "?":
                        unnamed.append(f"{path.relative_to(root)}:{line}: {char!r}")
    assert unnamed == []
    for symbol in "✓◀↺":  # on the race screen and in the bot's table: one cell each
        assert len(ascii_for(symbol)) == 1, symbol
    assert ascii_for("≥") == ">="


def test_the_footer_names_the_pick_key_in_what_the_terminal_can_show(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race screen's footer began ``⏎ pick/put``; on an ASCII terminal that was
    ``? pick/put``, beside ``? help`` (``?`` opens the help, it picks nothing)."""
    app = SolraceApp("ws://127.0.0.1:1/", action="quick", name="Ann", params={})
    assert app.paint_hints("play", 80).plain.startswith(" ⏎ pick/put  ")
    ascii_terminal = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "__stderr__", ascii_terminal)  # what Textual draws on
    hints = app.paint_hints("play", 80).plain
    assert hints.startswith(" spc pick/put  ") and hints.isascii(), hints
