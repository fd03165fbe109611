"""Clients that keep every frame they read (``RaceClient.keep_received``), for the
tests that check each frame a server sends: a user's client keeps none."""

from __future__ import annotations

import pytest
from solrace_client import RaceClient


def keep_every_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every RaceClient made until the test ends keeps the frames it reads in
    ``received``."""
    monkeypatch.setattr(RaceClient, "keep_received", True)


@pytest.fixture
def clients_keep_every_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`keep_every_frame`, for a test that asks for it."""
    keep_every_frame(monkeypatch)
