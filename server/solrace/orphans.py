"""Child processes that die with their parent, even one killed by SIGKILL.

A parent's clean-up does not survive SIGKILL (nor the out-of-memory killer), so the
children it started must end by themselves when it goes: the embedded engine (its data
directory locked, its socket held), the node's solver workers, a benchmark's servers
and workers. On Linux a child asks the kernel for a signal at its parent's death
(``prctl(PR_SET_PDEATHSIG)``); elsewhere there is no such request, and nothing is
asked. One definition for all of them (there were three)."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import Final

#: prctl's option: the signal a process gets when its parent thread dies (linux/prctl.h).
PR_SET_PDEATHSIG: Final = 1


def death_signal(sig: int, parent: int | None = None) -> Callable[[], None] | None:
    """What a child calls first — a ``preexec_fn``, or a worker's start — to receive
    ``sig`` when its parent (``parent``, default this process) dies; None where that
    cannot be asked (not Linux, no prctl). Everything is looked up here, in the
    parent: between fork and exec the child only calls prctl, and exits at once if the
    parent died before it could ask (no signal would come then)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid() if parent is None else parent

    def ask() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return ask
