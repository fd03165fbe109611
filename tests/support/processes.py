"""What a test can see of a process from outside: its state in /proc (Linux)."""

from __future__ import annotations

from pathlib import Path


def state(pid: int) -> str | None:
    """The process's state letter (R running, S sleeping, T stopped, Z a zombie not
    yet reaped…); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None
