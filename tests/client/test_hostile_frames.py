"""A whole race's frames, as a real server sends them (tests/support/race_frames.py,
built with the server's own builders), bent one field at a time the ways a faulty or
hostile server might — a wrong type, a missing field, an unknown one, an unknown event
type, an oversized string or list — folded by the client's one fold (RoomView) and
shown by everything that shows it: the news line, the lobby, the racers panel, the
board, the watch screen, the race clock, the race-over screen, the bot's standings
table and ``verify``'s verdict.

The property: nothing raises to the user. The fold may refuse a frame (it raises,
and the connection closes with the reason in ``client.failure``: docs/client.md);
whatever it folded before is still shown, and must show.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from solrace.protocol import SERVER_FRAME_LIMITS, Envelope, decode, encode
from solrace_client.cli import standings_table
from solrace_client.results import finished_race
from solrace_client.roomview import RoomView
from solrace_client.tui.news import News, deal_words
from solrace_client.tui.render import (
    progress_brief,
    race_clock,
    render_board,
    render_lobby,
    render_progress,
    render_standings,
    render_watch,
    total_cards,
    watch_needs,
)
from solrace_client.verify import race_verdict

from tests.support.race_frames import START_MS, race_frames

Frames = list[tuple[str, Envelope]]
Path = tuple[Any, ...]

#: Values of the wrong kind for any field.
HOSTILE: tuple[object, ...] = (
    "soon", "", "x" * 5_000, ["x"], [1, 2], {}, {"a": 1}, None, True, 2**70, -(2**70),
    -1, 0, 1.5, float("nan"), b"\x00\xff",
)  # fmt: skip


def _wire() -> Frames:
    """The frames as they come off the wire (enums as strings, tuples as lists)."""
    return [(how, decode(encode(env), limits=SERVER_FRAME_LIMITS)) for how, env in race_frames()]


def _paths(value: Any, path: Path = ()) -> Iterator[Path]:
    """Every field of a frame's data, nested ones too."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:3]):
            yield (*path, i)
            yield from _paths(item, (*path, i))


WIRE: Frames = _wire()
FIELDS: list[tuple[int, Path]] = [(i, p) for i, (_, env) in enumerate(WIRE) for p in _paths(env.d)]


def _bent(index: int, path: Path, change: Callable[[Any, Any], None]) -> Frames:
    frames = copy.deepcopy(WIRE)
    how, env = frames[index]
    d = copy.deepcopy(dict(env.d))
    parent: Any = d
    for step in path[:-1]:
        parent = parent[step]
    change(parent, path[-1])
    frames[index] = (how, Envelope(env.t, id=env.id, v=env.v, d=d))
    return frames


def _set(value: object) -> Callable[[Any, Any], None]:
    def change(parent: Any, key: Any) -> None:
        parent[key] = copy.deepcopy(value)

    return change


def _drop(parent: Any, key: Any) -> None:
    del parent[key]


def _extra(parent: Any, key: Any) -> None:
    target = parent[key]
    if isinstance(target, dict):
        target["unknown_field"] = {"nested": [1, "x"]}
    elif isinstance(target, list):
        target.append({"unknown": "item"})


def _huge(parent: Any, key: Any) -> None:
    target = parent[key]
    parent[key] = target * 2_000 if isinstance(target, str | list) else "y" * 10_000


CHANGES = st.one_of(
    st.sampled_from(HOSTILE).map(_set),
    st.sampled_from([_drop, _extra, _huge]),
)


def _show(view: RoomView, news: News, event: Envelope | None) -> None:
    """What the terminal UI and the bot show of ``view`` (and of ``event``)."""
    if event is not None:
        news.line(event, view)
    race_clock(view.phase, view.start_at_ms, view.ends_at_ms, START_MS + 1_234)
    total = total_cards(view.variant)
    deal_text = deal_words(view.deal, str(view.settings.get("deals") or "random"))
    render_lobby(view.racer_list(), view.settings, view.code, view.host, view.me, 60, deal_text)
    render_progress(view.ranked(), total, view.me, 30)
    progress_brief(view.ranked(), total, view.me, 60)
    if view.my_board is not None:
        render_board(view.my_board)
    watch_needs(view.racer_list(), view.boards, 120)
    render_watch(view.racer_list(), view.boards, 200, 60, 0, START_MS + 1_234)
    if view.result:
        render_standings(view.result, view.settings, view.me, None, width=80)
        Console(width=80, file=io.StringIO()).print(standings_table(view.result, 1))
    for over in view.overs.values():
        saved = finished_race(
            over.room or "",
            over.result,
            over.settings,
            over.code,
            published_commitment=over.published_commitment,
            countdown_settings=over.countdown_settings,
            acknowledged=over.acknowledged,
            deal=over.deal,
        )
        race_verdict(saved)
        render_standings(over.result, over.settings, view.me, saved.race, width=80)


def _race(frames: Frames) -> None:
    """Each frame folded as RaceClient folds it, and shown after it; a frame the fold
    refuses ends the connection (the frames after it never come)."""
    view, news = RoomView(), News()
    for how, env in frames:
        try:
            if how == "load":
                snapshot, racer = env.d.get("snapshot"), env.d.get("racer")
                if isinstance(snapshot, dict):
                    view.load(snapshot, racer if isinstance(racer, int) else None)
                news.reset(view)
            elif how == "moved":
                view.on_moved(env.d, "D")
            else:
                view.apply(env)
        except Exception:  # the connection closes: shown as the fold left it
            _show(view, news, None)
            return
        _show(view, news, env)


def test_the_race_as_sent_folds_and_shows() -> None:
    _race(WIRE)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(FIELDS), change=CHANGES)
def test_a_field_bent_by_the_server_never_raises_to_the_user(
    field: tuple[int, Path], change: Callable[[Any, Any], None]
) -> None:
    index, path = field
    _race(_bent(index, path, change))


@settings(max_examples=30, deadline=None)
@given(index=st.integers(0, len(WIRE) - 1), t=st.sampled_from(["no_such_event", "x" * 32]))
def test_an_unknown_event_type_never_raises_to_the_user(index: int, t: str) -> None:
    frames = copy.deepcopy(WIRE)
    how, env = frames[index]
    frames[index] = (how, Envelope(t, id=env.id, v=env.v, d=env.d))
    _race(frames)
