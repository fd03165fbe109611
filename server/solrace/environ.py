"""The one way solrace's programs read a ``SOLRACE_*`` environment variable: without
the spaces around it, and a blank one as unset.

Written in a unit file or a shell (``SOLRACE_HOST=" 0.0.0.0"``, ``export
SOLRACE_LOG_LEVEL="debug "``), a value with a space around it was refused by
``solrace-server`` while the client trimmed the server URL's variable: the same
mistake, two outcomes. No setting's value begins or ends with a space that means
anything, but the key prefix's, which names keys: solrace-server reads that one as
written, and refuses it with a space at either end (solrace.net.main.Setting.trim)."""

from __future__ import annotations

import os
from collections.abc import Mapping


def variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """``name`` in ``environ`` (the process's environment if None), trimmed; None if it
    is unset or blank."""
    value = (os.environ if environ is None else environ).get(name, "")
    return value.strip() or None
