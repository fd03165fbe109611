"""Where the optional compiled accelerator lives, and whether to use it (see
``accel.py``, which builds it). Imported by the package's ``__init__`` before the
search core, so that the package's search path can point at the build: the only file
reading in the solver package, at import."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from solrace.environ import variable

#: The modules compiled, in import order.
MODULES = ("faces", "deadlock", "search")
HERE = Path(__file__).resolve().parent
STAMP = "STAMP"


def compiled_dir() -> Path:
    """Where the build goes and is looked for."""
    override = variable("SOLRACE_SOLVER_COMPILED")
    return Path(override) if override else HERE / "_compiled"


def source_stamp() -> str:
    """SHA-256 of the compiled modules' sources (and the Python version), as the build
    records it."""
    digest = hashlib.sha256(sys.version.encode())
    for name in MODULES:
        digest.update((HERE / f"{name}.py").read_bytes())
    return digest.hexdigest()


def usable() -> Path | None:
    """The build directory if the accelerator should be used: a build of the current
    sources exists and ``SOLRACE_SOLVER_PURE`` is not set."""
    if variable("SOLRACE_SOLVER_PURE") not in (None, "0"):
        return None
    where = compiled_dir()
    try:
        stamp = (where / STAMP).read_text().strip()
        return where if stamp == source_stamp() else None
    except OSError:
        return None
