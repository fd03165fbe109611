"""Log lines (solrace/net/logs.py): a connection's peer is ``host:port`` and a field
without a value is left out. The operator audit read ``room=None racer=None
peer=('127.0.0.1', 39898)`` on a line about a connection in no room."""

from __future__ import annotations

import json
import logging

import pytest
from solrace.net.logs import JsonFormatter, TextFormatter, address


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "solrace.requests", logging.WARNING, "x", 1, "store unavailable", (), None
    )
    record.__dict__.update(extra)
    return record


@pytest.mark.parametrize(
    ("peer", "written"),
    [
        (("127.0.0.1", 39898), "127.0.0.1:39898"),
        (("::1", 39898, 0, 0), "[::1]:39898"),
        ("/run/solrace.sock", "/run/solrace.sock"),
    ],
)
def test_a_peer_is_written_as_people_write_an_address(peer: object, written: str) -> None:
    assert address(peer) == written


def test_a_field_without_a_value_is_left_out_of_a_text_line() -> None:
    line = TextFormatter("%(levelname)s %(name)s: %(message)s").format(
        _record(room=None, racer=None, peer=address(("127.0.0.1", 39898)))
    )
    assert line == "WARNING solrace.requests: store unavailable peer=127.0.0.1:39898"


def test_a_field_without_a_value_is_left_out_of_a_json_line() -> None:
    data = json.loads(JsonFormatter().format(_record(room="r_1", racer=None, peer="h:1")))
    assert (data["room"], data["peer"]) == ("r_1", "h:1")
    assert "racer" not in data


def test_a_text_line_is_one_line_whatever_its_fields_hold() -> None:
    """A field is written as it is (``error=Redis is out of memory …``), but a control
    character in one — a newline, ESC, a C1 control such as U+009B, a terminal's CSI —
    is escaped: it forged a second line, or ran in the terminal of an operator tailing
    the log (a scope id in ``X-Forwarded-For`` reached ``client=``, test_admission)."""
    line = TextFormatter("%(levelname)s %(name)s: %(message)s").format(
        _record(client="2a01::1%\nERROR forged \x1b[2J\x9b31m", error="Redis is out of memory")
    )
    assert line == (
        "WARNING solrace.requests: store unavailable"
        " client=2a01::1%\\nERROR forged \\x1b[2J\\x9b31m error=Redis is out of memory"
    )
