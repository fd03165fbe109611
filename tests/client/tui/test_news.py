"""The status bar's news lines: what each event, once folded, means to the player."""

from __future__ import annotations

from typing import Any

from solrace.protocol import Envelope
from solrace_client.roomview import RoomView
from solrace_client.tui.news import News, deal_words
from solrace_client.tui.render import render_lobby

from tests.client.test_roomview import ev, finished, progress, racer, snapshot


def told(view: RoomView, news: News, event: Envelope) -> str | None:
    """Fold ``event`` as the connection does, then ask for its line as the app does."""
    view.apply(event)
    return news.line(event, view)


def loaded(**kw: Any) -> tuple[RoomView, News]:
    view, news = RoomView(), News()
    view.load(snapshot(**kw), racer=1)
    news.reset(view)
    return view, news


def test_a_race_in_news_lines() -> None:
    view, news = loaded()
    assert told(view, news, ev("racer_joined", 3, **racer(3, "Cy"))) == "Cy joined"
    assert told(view, news, ev("ready_changed", 4, racer=2, ready=True)) == "Bob is ready"
    assert told(view, news, ev("ready_changed", 5, racer=1, ready=True)) == "you are ready"
    assert (
        told(view, news, ev("countdown", 6, start_at_ms=100, commitment="c"))
        == "the countdown has begun"
    )
    started = ev("started", 7, start_at_ms=100, ends_at_ms=900_100, commitment="c")
    assert told(view, news, started) == "go!"
    assert told(view, news, progress(8, 2, foundation=3)) is None
    assert told(view, news, progress(9, 3, status="resigned")) == "Cy resigned"
    assert told(view, news, progress(10, 2, status="stuck")) == "Bob is stuck"
    assert told(view, news, progress(11, 2, status="stuck", moves=2)) is None  # still stuck
    # the player's own: as the move's reply said it (it came after and replaced it)
    stuck = told(view, news, progress(12, 1, status="stuck"))
    assert stuck == "no legal move left: you are stuck (u undoes)"
    assert told(view, news, finished(13, racer=2, place=1)) == "Bob finished — place 1"
    assert told(view, news, ev("racer_left", 14, racer=3, host=1, reason="left")) == "Cy left"


def test_a_spectator_is_not_told_go() -> None:
    """An audit: watchers were told "go!" (and "get ready!" in the countdown), racer
    wording: they race not."""
    view, news = RoomView(), News()
    view.load(snapshot(you=None), racer=None)
    news.reset(view)
    started = ev("started", 3, start_at_ms=100, ends_at_ms=900_100, commitment="c")
    assert told(view, news, started) == "the race has started"


def test_a_line_comes_from_the_event_even_when_the_view_is_ahead() -> None:
    """The connection folds frames as they arrive, so the app may hear of an event
    after later ones were folded: Bob's resignation is still news."""
    view, news = loaded(phase="racing", version=6)
    first, second = progress(7, 2, status="resigned"), progress(8, 2, moves=2, status="resigned")
    view.apply(first)
    view.apply(second)
    assert news.line(first, view) == "Bob resigned"
    assert news.line(second, view) is None


def test_a_gap_event_is_no_news() -> None:
    view, news = loaded(version=5)
    assert told(view, news, ev("racer_joined", 7, **racer(3, "Cy"))) is None
    assert view.needs_resync


def test_presence_rematch_and_resync() -> None:
    view, news = loaded(phase="racing", version=6)
    assert told(view, news, ev("presence", 7, racer=2, online=False)) == (
        "Bob went offline (30 s to come back)"
    )
    assert told(view, news, ev("presence", 8, racer=2, online=True)) == "Bob is back"
    reset = ev("room_reset", 9, host=1, racers=[racer(1, "Ann"), racer(2, "Bob")])
    assert told(view, news, reset) == "rematch: back in the lobby"
    fresh = snapshot(version=6)
    notice = Envelope("resync", d={"reason": "lost 3", "lost_events": 3, "snapshot": fresh})
    assert told(view, news, notice) == "lost 3"


def test_a_racer_never_seen_gone_is_not_said_to_be_back() -> None:
    """A server stores ``presence`` online on every resume, also of a racer whose old
    connection it still held (a link gone silent and resumed before the server's
    keepalive noticed, another window's ``solrace resume``: the old one is closed
    ``replaced``, no offline sent). The others were told ``Bob is back`` of a racer
    never said to have gone — a real server's, with a second connection resuming
    Bob's token mid-race. Only a racer told (or loaded) offline comes back."""
    racers = [racer(1, "Ann", status="playing"), racer(2, "Bob", status="playing")]
    view, news = loaded(phase="racing", version=6, racers=racers)
    assert told(view, news, ev("presence", 7, racer=2, online=True)) is None
    assert told(view, news, ev("presence", 8, racer=2, online=False)) == (
        "Bob went offline (30 s to come back)"
    )
    assert told(view, news, ev("presence", 9, racer=2, online=True)) == "Bob is back"
    assert told(view, news, ev("presence", 10, racer=2, online=True)) is None
    # Offline in the snapshot a (re)connection loaded: back is news.
    away = [racer(1, "Ann", status="playing"), {**racers[1], "online": False}]
    view.load(snapshot(phase="racing", version=11, racers=away), racer=1)
    news.reset(view)
    assert told(view, news, ev("presence", 12, racer=2, online=True)) == "Bob is back"


def test_a_racer_who_goes_offline_is_not_said_to_have_lost_the_connection() -> None:
    racers = [
        racer(1, "Ann", status="playing"),
        racer(2, "Bot", status="resigned"),
        racer(3, "Cy", status="playing"),
    ]
    view, news = loaded(phase="racing", version=1, racers=racers, you=None)
    done = told(view, news, ev("presence", 2, racer=2, online=False))
    racing_one = told(view, news, ev("presence", 3, racer=3, online=False))
    assert done == "Bot went offline"
    assert racing_one == "Cy went offline (30 s to come back)"
    assert "lost" not in f"{done} {racing_one}"


def test_the_lobby_learns_how_the_deal_was_made() -> None:
    view, news = loaded()
    assert deal_words(view.deal) == "certifying a winnable deal…"
    # This release's server: certified, the difficulty asked for, no length.
    chosen = Envelope("deal_chosen", v=3, d={"certified": True, "moves": None, "difficulty": None})
    assert told(view, news, chosen) == "winnable deal (certified)"
    lobby = render_lobby([], view.settings, view.code, 1, 1, 80, deal_words(view.deal))
    assert "winnable deal (certified)" in lobby.plain
    (line,) = [
        span for span in lobby.spans if lobby.plain[span.start : span.end].startswith("winnable")
    ]
    assert "green" in str(line.style)
    asked = {"certified": True, "moves": None, "difficulty": "hard"}
    assert deal_words(asked) == "winnable deal (certified, hard)"
    # An earlier release's server said the length and the band found: said as sent.
    earlier = {"certified": True, "moves": 97, "difficulty": "easy"}
    assert deal_words(earlier) == "winnable deal (certified, 97 moves, easy)"
    assert deal_words(None, "random") == "random deal"
    assert deal_words({"certified": False, "moves": None, "difficulty": None}) == (
        "random deal (not certified)"
    )


def test_what_the_others_did_while_the_player_was_away() -> None:
    """A resume replays no event to the app: a rival who finished, resigned or left
    meanwhile was told only by the racers panel (the inflight audit's note). The fresh
    snapshot against the statuses last told says it; the player's own is not news here,
    nor a racer who joined meanwhile, nor a status unchanged."""
    racers = [racer(1, "Ann"), racer(2, "Bob"), racer(3, "Cy"), racer(4, "Di")]
    for one in racers:
        one["status"] = "playing"
    view, news = loaded(phase="racing", racers=racers)
    away = [dict(one) for one in racers] + [racer(5, "Ed")]
    away[0]["status"] = "finished"  # me: _reconnected says it from my moves
    away[1].update(status="finished", place=1)
    away[2]["status"] = "resigned"
    view.load(snapshot(phase="racing", version=9, racers=away), racer=1)
    assert news.missed(view) == ["Bob finished — place 1", "Cy resigned"]
    news.reset(view)
    assert news.missed(view) == []
