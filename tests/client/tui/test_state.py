"""The client's room state: snapshot plus events, replays skipped, gaps noticed."""

from __future__ import annotations

from typing import Any

from solrace.protocol import Envelope
from solrace_client.tui.render import render_lobby
from solrace_client.tui.state import RoomState, deal_words


def racer(n: int, name: str, **kw: Any) -> dict[str, Any]:
    info = {
        "racer": n,
        "name": name,
        "ready": False,
        "status": "waiting",
        "foundation": 0,
        "moves": 0,
        "face_down": 0,
        "place": None,
    }
    info.update(kw)
    return info


def snapshot(**kw: Any) -> dict[str, Any]:
    snap = {
        "room": "r_1",
        "code": "ABC234",
        "version": 2,
        "phase": "lobby",
        "settings": {
            "variant": "yukon",
            "options": {},
            "max_racers": 4,
            "time_limit_s": 900,
            "private": False,
            "spectator_delay_s": 0,
            "quick": False,
        },
        "host": 1,
        "racers": [racer(1, "Ann"), racer(2, "Bob")],
        "spectators": 0,
        "now_ms": 1,
        "start_at_ms": None,
        "ends_at_ms": None,
        "commitment": None,
        "you": {
            "racer": 1,
            "board": None,
            "next_seq": 0,
            "moves": 0,
            "score": 0,
            "status": "waiting",
        },
        "result": None,
    }
    snap.update(kw)
    return snap


def ev(t: str, v: int | None, **d: Any) -> Envelope:
    return Envelope(t, v=v, d=d)


def test_events_in_order_update_the_room() -> None:
    s = RoomState()
    s.load(snapshot(), racer=1)
    assert s.me == 1 and s.phase == "lobby" and s.code == "ABC234"
    assert s.apply(ev("racer_joined", 3, **racer(3, "Cy"))) == "Cy joined"
    assert s.apply(ev("ready_changed", 4, racer=2, ready=True)) == "Bob is ready"
    assert s.racers[2]["ready"] is True
    s.apply(ev("countdown", 5, start_at_ms=100, commitment="c"))
    assert s.phase == "countdown" and s.start_at_ms == 100
    s.apply(ev("started", 6, start_at_ms=100, ends_at_ms=900_100, commitment="c"))
    assert s.phase == "racing" and s.my_status == "playing"
    assert all(r["status"] == "playing" for r in s.racers.values())
    s.apply(
        ev(
            "progress",
            7,
            racer=2,
            foundation=3,
            moves=9,
            face_down=18,
            status="playing",
            place=None,
        )
    )
    assert s.racers[2]["foundation"] == 3
    assert (
        s.apply(
            ev(
                "progress",
                8,
                racer=3,
                foundation=0,
                moves=1,
                face_down=21,
                status="resigned",
                place=None,
            )
        )
        == "Cy resigned"
    )
    assert (
        s.apply(
            ev(
                "finished",
                9,
                racer=2,
                place=1,
                elapsed_ms=5,
                foundation=52,
                moves=99,
                face_down=0,
                status="finished",
            )
        )
        == "Bob finished — place 1"
    )
    assert s.ranked()[0]["name"] == "Bob"
    assert s.version == 9


def test_replayed_events_are_skipped_and_a_gap_is_noticed() -> None:
    s = RoomState()
    s.load(snapshot(version=5), racer=1)
    assert s.apply(ev("racer_joined", 4, **racer(9, "Old"))) is None
    assert 9 not in s.racers and not s.gap
    s.apply(ev("ready_changed", 7, racer=2, ready=True))
    assert s.gap and s.racers[2]["ready"] is False and s.version == 5


def test_own_board_from_notices_and_moved_replies() -> None:
    s = RoomState()
    s.load(snapshot(phase="racing", version=6), racer=1)
    board = {"variant": "yukon", "tableau": []}
    s.apply(Envelope("board", d={"racer": 1, "at_ms": 5, "view": board}))
    assert s.my_board == board
    s.on_moved({"seq": 0, "board": {"x": 1}, "status": "stuck", "moves": 1, "score": 10})
    assert s.my_board == {"x": 1} and s.my_status == "stuck" and s.you["next_seq"] == 1  # type: ignore[index]


def test_spectator_keeps_every_racers_latest_board() -> None:
    s = RoomState()
    s.load(snapshot(you=None, phase="racing"))
    s.apply(Envelope("board", d={"racer": 2, "at_ms": 5, "view": {"v": 1}}))
    s.apply(Envelope("board", d={"racer": 2, "at_ms": 9, "view": {"v": 2}}))
    assert s.boards[2] == (9, {"v": 2}) and s.me is None


def test_race_over_reset_and_presence() -> None:
    s = RoomState()
    s.load(snapshot(phase="racing", version=6), racer=1)
    assert s.apply(ev("presence", 7, racer=2, online=False)) == (
        "Bob went offline (30 s to come back)"
    )
    assert s.racers[2]["online"] is False
    result = {
        "reason": "all_done",
        "seed": 1,
        "salt": "0" * 64,
        "commitment": "c",
        "standings": [
            {
                "place": 1,
                "racer": 2,
                "name": "Bob",
                "status": "finished",
                "foundation": 52,
                "moves": 3,
            }
        ],
    }
    s.apply(ev("race_over", 8, **result))
    assert s.phase == "finished" and s.result == result and s.racers[2]["place"] == 1
    s.apply(ev("room_reset", 9, host=1, racers=[racer(1, "Ann"), racer(2, "Bob")]))
    assert s.phase == "lobby" and s.result is None and s.my_board is None
    s.apply(ev("racer_left", 10, racer=2, host=1))
    assert 2 not in s.racers  # in the lobby a racer who leaves is gone


def test_the_lobby_learns_how_the_deal_was_made() -> None:
    state = RoomState()
    state.load(snapshot(), racer=1)
    assert deal_words(state.deal) == "certifying a winnable deal…"
    news = state.apply(
        Envelope("deal_chosen", v=3, d={"certified": True, "moves": 97, "difficulty": "easy"})
    )
    assert news == "winnable deal (certified, 97 moves, easy)"
    lobby = render_lobby([], state.settings, state.code, 1, 1, 80, deal_words(state.deal))
    assert "winnable deal (certified, 97 moves, easy)" in lobby.plain
    assert deal_words(None, "random") == "random deal"


def test_a_resync_replaces_the_state_even_with_a_lower_version() -> None:
    state = RoomState()
    state.load(snapshot(version=9), racer=1)
    fresh = snapshot(version=6, racers=[racer(1, "Ann", ready=True)])
    news = state.apply(
        Envelope("resync", d={"reason": "lost 3", "lost_events": 3, "snapshot": fresh})
    )
    assert news == "lost 3"
    assert state.version == 6 and state.racers[1]["ready"] is True
