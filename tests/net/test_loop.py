"""net/loop.py: the event loop a node runs on — uvloop when installed (``auto``),
asyncio's own on request, and a clear refusal for uvloop where it is missing."""

from __future__ import annotations

import asyncio

import pytest
import uvloop
from solrace.net.loop import ASYNCIO, AUTO, LOOPS, UVLOOP, LoopUnavailable, resolve_loop, run


def test_auto_is_uvloop_where_installed_and_asyncio_where_not() -> None:
    assert resolve_loop(AUTO, have_uvloop=True) == UVLOOP
    assert resolve_loop(AUTO, have_uvloop=False) == ASYNCIO
    assert resolve_loop(AUTO) == UVLOOP  # this project depends on it on Linux
    assert resolve_loop(ASYNCIO, have_uvloop=True) == ASYNCIO


def test_uvloop_asked_for_where_it_is_missing_is_refused_saying_what_to_do() -> None:
    with pytest.raises(LoopUnavailable, match=r"uvloop is not installed here \(pip install"):
        resolve_loop(UVLOOP, have_uvloop=False)


def test_a_name_not_a_loop_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="must be one of auto, uvloop, asyncio, got 'fast'"):
        resolve_loop("fast")
    assert LOOPS == (AUTO, UVLOOP, ASYNCIO)


@pytest.mark.parametrize(
    ("name", "loop_type"),
    [(UVLOOP, uvloop.Loop), (ASYNCIO, asyncio.BaseEventLoop), (AUTO, uvloop.Loop)],
)
def test_run_runs_the_coroutine_on_the_loop_named(name: str, loop_type: type) -> None:
    async def which() -> asyncio.AbstractEventLoop:
        await asyncio.sleep(0)
        return asyncio.get_running_loop()

    loop = run(name, which())
    assert isinstance(loop, loop_type)
    if name == ASYNCIO:
        assert not isinstance(loop, uvloop.Loop)
    assert loop.is_closed()  # run() closes the loop it made, as asyncio.run does
