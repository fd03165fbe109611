"""A node's race clock (solrace.rooms.clock.SteadyClock) never steps: the system's
wall clock, set by hand or stepped by NTP, moved the times of moves and the start,
time-limit and grace decisions with it (a step of +10 min ended every race on the
node; a step back put a racer's log out of time order). The step is logged once and
its size stays visible (the offset)."""

from __future__ import annotations

import logging
import time

import pytest
from solrace.rooms.clock import APART_MS, SteadyClock, offset_ms

#: The real wall clock, before any test steps it.
REAL_TIME_NS = time.time_ns


def _wall_ms() -> int:
    return REAL_TIME_NS() // 1_000_000


def _step(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Set the system clock ``seconds`` away from the real time, as an operator or a
    stepping NTP client would."""
    monkeypatch.setattr(time, "time_ns", lambda: REAL_TIME_NS() + int(seconds * 1e9))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("step_s", [600.0, -5.0])
def test_a_step_of_the_system_clock_moves_no_node_clock_and_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, step_s: float
) -> None:
    caplog.set_level(logging.INFO, logger="solrace.clock")
    clock = SteadyClock()
    before = clock()
    assert abs(before - _wall_ms()) < 100 and abs(offset_ms(clock)) < 100
    _step(monkeypatch, step_s)
    readings = [clock() for _ in range(5)]
    # The node's clock goes on from where it was, in order, with the real time.
    assert readings == sorted(readings) and 0 <= readings[0] - before < 1000
    assert abs(readings[-1] - _wall_ms()) < 1000
    assert abs(offset_ms(clock) - step_s * 1000) < 100
    assert _warnings(caplog) == [
        f"the system clock stepped by {step_s:+.1f} s; this node keeps its own time until"
        " restarted: races in progress are not affected"
    ]


def test_a_new_step_after_the_clocks_agree_again_is_a_new_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One line per episode: while the clocks stay apart nothing more is said; set
    right again, it says so once; stepped again, it warns again."""
    caplog.set_level(logging.INFO, logger="solrace.clock")
    clock = SteadyClock()
    _step(monkeypatch, 600)
    for _ in range(3):
        clock()
    monkeypatch.setattr(time, "time_ns", REAL_TIME_NS)
    for _ in range(3):
        clock()
    _step(monkeypatch, -5)
    clock()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert messages[0].startswith("the system clock stepped by +600.0 s")
    assert messages[1].startswith("the system clock agrees with this node's again")
    assert messages[2].startswith("the system clock stepped by -5.0 s")


def test_a_difference_under_a_second_is_not_a_step(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """NTP slewing and the rounding to milliseconds keep the clocks well within
    :data:`APART_MS`; nothing is logged for them (the offset still shows them)."""
    caplog.set_level(logging.INFO, logger="solrace.clock")
    clock = SteadyClock()
    _step(monkeypatch, 0.6 * APART_MS / 1000)
    clock()
    assert caplog.records == []
    assert abs(offset_ms(clock) - 0.6 * APART_MS) < 100
