"""Structured logs: one line per record, text or JSON, with room and racer ids.

Callers pass ids through ``extra={"room": ..., "racer": ...}``; the JSON formatter puts
every such field in the object, so logs can be filtered by room or racer. A field whose
value is None is left out of both formats: a line about a connection not in a room said
``room=None racer=None``, which reads as a room named "None".
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of ``record`` that have a value (None: absent)."""
    return {
        key: value
        for key, value in vars(record).items()
        if key not in _STANDARD and not key.startswith("_") and value is not None
    }


def address(peer: Any) -> str:
    """A socket address as people write it: ``127.0.0.1:39898``, ``[::1]:39898`` (a
    Python tuple, ``('127.0.0.1', 39898)``, is what the log said); anything else (a
    Unix socket's path, None) as ``str`` gives it."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        data.update(_fields(record))
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


#: The control characters (Unicode category Cc: C0, DEL and C1).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escaped(value: object) -> str:
    """A field's value as text, its control characters escaped (``\\n``, ``\\x1b``,
    ``\\x9b``): a field that held one forged a line of its own, or ran an escape
    sequence in the terminal of an operator tailing the log. Other text is kept as it
    is (``error=Redis is out of memory …``)."""
    return _CONTROL.sub(lambda found: found[0].encode("unicode_escape").decode(), str(value))


#: The text format's line, before its fields.
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = [f"{k}={_escaped(v)}" for k, v in _fields(record).items()]
        return base + (" " + " ".join(extras) if extras else "")


def configure(level: str = "info", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # websockets logs every failed handshake at INFO/ERROR; keep it at WARNING.
    logging.getLogger("websockets").setLevel(max(logging.WARNING, root.level))
