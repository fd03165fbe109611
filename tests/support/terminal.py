"""The ``solrace`` console script run as a player runs it: on a terminal (a
pseudo-terminal, so the UI commands go as far as they would for a person), with its
standard error read apart or on the terminal too."""

from __future__ import annotations

import asyncio
import functools
import os
import pty
import re
import signal
import subprocess
import sys
import termios
from collections.abc import Mapping
from pathlib import Path

SOLRACE = Path(sys.executable).parent / "solrace"
#: What the full-screen UI writes first: the switch to the terminal's alternate screen.
ALTERNATE_SCREEN = b"\x1b[?1049h"
#: What it writes last, giving the terminal back: the switch to its normal screen.
NORMAL_SCREEN = b"\x1b[?1049l"
TIMEOUT_S = 60.0
#: A cursor move to a row and column: where the program starts drawing a row.
CURSOR_MOVE = re.compile(rb"\x1b\[[0-9;]*H")
#: Any other control sequence (CSI: colours, modes) or an OSC (a title, a colour).
CONTROL = re.compile(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>]")


def signals_as_a_shell_gives() -> None:
    """In a child about to run a command (a ``preexec_fn``): SIGHUP and SIGINT at their
    default actions, as a shell gives a job it starts in a terminal. The tests may run
    under ``nohup`` or in a background job, which ignore them, and the child would
    inherit that: the SIGHUP tests of tests/client/tui/test_lifecycle.py timed out in a
    CI run started with ``nohup``, and the docs' Ctrl-C tests saw a bot race on and the
    README's example exit 0 in a suite started with ``&``."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _as_a_shell_starts_it(errors_closed: bool) -> None:
    """:func:`signals_as_a_shell_gives`, and standard error closed if asked
    (``2>&-``)."""
    signals_as_a_shell_gives()
    if errors_closed:
        os.close(2)


async def spawn(
    argv: list[str],
    *,
    errors_apart: bool,
    env: Mapping[str, str] | None = None,
    errors_closed: bool = False,
) -> tuple[asyncio.subprocess.Process, int]:
    """``solrace argv`` with standard input and output on a new pseudo-terminal (and
    standard error too unless ``errors_apart``, then a pipe; or closed, as the shell's
    ``2>&-`` does, with ``errors_closed``): the process and the terminal's master side,
    which the caller closes. ``env`` adds to (or overrides) the environment: ``TERM``,
    say."""
    assert SOLRACE.exists(), f"the console script is not installed: {SOLRACE}"
    master, slave = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        str(SOLRACE),
        *argv,
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE if errors_apart else slave,
        env={**os.environ, "SOLRACE_SERVER": "", "TERM": "xterm-256color", **(env or {})},
        preexec_fn=functools.partial(_as_a_shell_starts_it, errors_closed),
    )
    os.close(slave)
    return proc, master


async def read(master: int) -> bytes:
    """The terminal's next output; b"" once the process has closed its side."""

    def once() -> bytes:
        try:
            return os.read(master, 65536)
        except OSError:  # the other side closed: the process is done with it
            return b""

    return await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, once), TIMEOUT_S)


async def run(
    argv: list[str], *, errors_apart: bool = True, env: Mapping[str, str] | None = None
) -> tuple[int, bytes, str]:
    """Run ``solrace argv`` to its end: its exit status, everything it wrote to the
    terminal, and its standard error when read apart ("" otherwise)."""
    proc, master = await spawn(argv, errors_apart=errors_apart, env=env)
    shown = bytearray()

    async def drain() -> None:
        while chunk := await read(master):
            shown.extend(chunk)

    try:
        drained = asyncio.ensure_future(drain())
        err = b""
        if proc.stderr is not None:
            err = await asyncio.wait_for(proc.stderr.read(), TIMEOUT_S)
        code = await asyncio.wait_for(proc.wait(), TIMEOUT_S)
        await drained
    finally:
        os.close(master)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return code, bytes(shown), err.decode(errors="replace")


class Screen:
    """A pseudo-terminal's output, read as it comes (a terminal nobody reads blocks
    the program drawing on it) and kept for the test to look at; however long the
    program is silent (stopped by Ctrl-Z, say). :meth:`close` closes the terminal."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.out = bytearray()
        #: Done once the program has closed its side of the terminal.
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        os.set_blocking(master, False)
        asyncio.get_running_loop().add_reader(master, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.master, 65536)
        except BlockingIOError:
            return
        except OSError:  # the other side closed: the program is done with it
            chunk = b""
        if chunk:
            self.out.extend(chunk)
            return
        asyncio.get_running_loop().remove_reader(self.master)
        if not self.ended.done():
            self.ended.set_result(None)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        os.close(self.master)

    async def until(self, wanted: bytes, since: int = 0, timeout: float = 20.0) -> None:
        """Until ``wanted`` has been written past offset ``since`` of the output."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while wanted not in self.out[since:]:
            if loop.time() > deadline or self.ended.done():
                raise AssertionError(f"no {wanted!r} on the terminal: {bytes(self.out[-500:])!r}")
            await asyncio.sleep(0.02)

    def lines(self, since: int = 0) -> list[str]:
        """The text written past offset ``since``, without its control sequences, as
        the lines it was written in (each a screen row drawn: cut where the terminal
        ends)."""
        rows = CURSOR_MOVE.sub(b"\n", bytes(self.out[since:]))
        text = CONTROL.sub(b"", rows).decode(errors="replace")
        return [line for line in re.split(r"[\r\n]+", text) if line.strip()]

    def echoes(self) -> bool:
        """Whether the terminal is in its ordinary mode (echoing keys, as a shell
        wants it), not the full-screen UI's raw mode."""
        return bool(termios.tcgetattr(self.master)[3] & termios.ECHO)
