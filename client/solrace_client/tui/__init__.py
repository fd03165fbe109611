"""The terminal client (Textual): race and watch.

The command line calls these; each blocks until the player quits and returns an exit
status (:mod:`solrace_client.errors`): 0 fine; 2 could not run — the server cannot be
reached or refused (unknown code, full room, stale token…), said in one line; 143
ended by SIGTERM, the terminal given back.

    run_race("ws://127.0.0.1:8765", "create", "Ann", variant="yukon", options={},
             max_racers=4, private=False, time_limit_s=900, spectator_delay_s=0)
    run_race(server, "join", "Bob", code="K7QX2M")
    run_race(server, "quick", "Cy", variant="klondike")
    run_race(server, "resume", "Ann", room="r_8f3k2", token="…")
    run_watch(server, "K7QX2M")
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Final

from ..errors import EXIT_FAILED
from ..printable import printable
from .app import SolraceApp


def run_race(server: str, action: str, name: str, **params: object) -> int:
    """Race: ``action`` is ``create`` (params variant, options, max_racers, private,
    time_limit_s, spectator_delay_s), ``join`` (code), ``quick`` (variant) or
    ``resume`` (room, token)."""
    return _run(SolraceApp(server, mode="race", action=action, name=name, params=params))


def run_watch(server: str, code: str) -> int:
    """Watch room ``code``: every racer's board, delayed by the room's spectator delay."""
    return _run(SolraceApp(server, mode="watch", code=code))


#: Say "connecting" when entering the room takes longer than this (a slow or silent
#: server); a quick entry prints nothing before the screen opens.
CONNECTING_NOTICE_S = 1.0


def _say(line: str) -> None:
    """A line on standard error, through printable as the command line's failure line
    is: it may quote a server's refusal (a ``join`` refused with ``ESC [31m`` in its
    message turned the terminal red) or name a server."""
    print(printable(line), file=sys.stderr, flush=True)


#: ``TERM`` values of terminals that cannot move their cursor (Emacs' ``M-x shell``,
#: some IDEs' run consoles): Textual draws there all the same, a stream of escapes.
DUMB_TERMINALS: Final = frozenset({"dumb"})


def _run(app: SolraceApp) -> int:
    what = "watch screen" if app.mode == "watch" else "race screen"
    bot = "; `solrace bot` races without one" if app.mode == "race" else ""
    if not all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout)):
        # Textual would draw into a pipe or a log file and wait for keys that never come
        _say(f"solrace: the {what} needs a terminal (standard input and output are not one){bot}")
        return EXIT_FAILED
    term = os.environ.get("TERM", "")
    if term in DUMB_TERMINALS:
        _say(
            f"solrace: the {what} needs a terminal that can draw a full screen "
            f"(TERM={term} cannot: run it in a terminal emulator){bot}"
        )
        return EXIT_FAILED
    return asyncio.run(_enter_then_run(app))


@contextlib.contextmanager
def _screen_on_the_terminal() -> Iterator[None]:
    """Textual draws on standard error: with it redirected (``solrace create 2>log``)
    the screen went into the file and the terminal stayed blank while the race ran.
    The screen is then drawn on standard output's terminal, and standard error is put
    back for the one line said after it."""
    try:
        apart = not os.isatty(2) and os.isatty(1)
    except OSError:
        apart = False
    if not apart:
        yield
        return
    saved = os.dup(2)
    os.dup2(1, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def _terminated_ends(app: SolraceApp) -> Iterator[None]:
    """SIGTERM (``kill PID`` from another terminal, ``timeout``) ends the screen as a
    lost connection would leave the race: the connection closed (the server starts the
    racer's grace at once: ``solrace resume`` rejoins), the terminal given back, status
    143 (:data:`~solrace_client.errors.EXIT_TERMINATED`). Its default action killed the
    process where it stood and left the terminal raw (no echo) on the alternate screen
    until ``reset``. (SIGHUP keeps its default: the terminal is gone, and with it what
    there was to give back.)"""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, app.terminated)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _enter_then_run(app: SolraceApp) -> int:
    """Enter the room first and open the screen only then: a refusal or an unreachable
    server is one line on standard error, never a screen that opens and vanishes."""
    notice = asyncio.get_running_loop().call_later(
        CONNECTING_NOTICE_S, _say, f"solrace: connecting to {app.server}…"
    )
    try:
        entered = await app.enter()
    finally:
        notice.cancel()
    if entered:
        with _screen_on_the_terminal(), _terminated_ends(app):
            await app.run_async()
    if app.failure:  # one line, after the screen is restored (Textual would wrap it)
        _say(f"solrace: {app.failure}")
        return int(app.return_code or EXIT_FAILED)
    return int(app.return_code or 0)


__all__ = ["SolraceApp", "run_race", "run_watch"]
