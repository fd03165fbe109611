"""The client's one fold: a snapshot plus events, replays skipped, gaps refused, and —
against a real server — the same room a fresh snapshot shows after the same events."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import pytest
from solrace.protocol import Envelope, commitment
from solrace.protocol.views import RacerInfo, You
from solrace.rules import deal, view
from solrace_client import RaceClient
from solrace_client.roomview import Fold, RoomView

from tests.net.conftest import SOLVABLE_SECRET, Cluster
from tests.protocol.samples import racer
from tests.support.race import close_all, lobby, play_until_done, winning_moves

from .conftest import YUKON


def snapshot(**kw: Any) -> dict[str, Any]:
    snap = {
        "room": "r_1",
        "code": "ABC234",
        "version": 2,
        "phase": "lobby",
        "settings": dict(YUKON),
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
        "deal": None,
    }
    snap.update(kw)
    return snap


def ev(t: str, v: int | None, **d: Any) -> Envelope:
    return Envelope(t, v=v, d=d)


def progress(v: int, racer: int, **kw: Any) -> Envelope:
    d = {"racer": racer, "foundation": 0, "moves": 1, "face_down": 21, "status": "playing"}
    d.update(kw)
    return ev("progress", v, place=None, **d)


def finished(v: int, racer: int, place: int) -> Envelope:
    """Racer ``racer``'s ``finished`` event, version ``v``: all 52 cards home in 99 moves."""
    return ev(
        "finished",
        v,
        racer=racer,
        place=place,
        elapsed_ms=5,
        foundation=52,
        moves=99,
        face_down=0,
        status="finished",
    )


def test_events_in_order_update_the_room() -> None:
    s = RoomView()
    s.load(snapshot(), racer=1)
    assert s.me == 1 and s.phase == "lobby" and s.code == "ABC234"
    assert s.apply(ev("racer_joined", 3, **racer(3, "Cy"))) is Fold.APPLIED
    assert s.apply(ev("ready_changed", 4, racer=2, ready=True)) is Fold.APPLIED
    assert s.racers[2]["ready"] is True and s.racers[3]["name"] == "Cy"
    s.apply(ev("countdown", 5, start_at_ms=100, commitment="c"))
    assert s.phase == "countdown" and s.start_at_ms == 100 and s.published_commitment == "c"
    s.apply(ev("started", 6, start_at_ms=100, ends_at_ms=900_100, commitment="c"))
    assert s.phase == "racing" and s.my_status == "playing" and s.ends_at_ms == 900_100
    # As the server counts them: every racer starts with a fresh deal's face-down cards.
    assert all(r["status"] == "playing" and r["face_down"] == 21 for r in s.racers.values())
    s.apply(progress(7, 2, foundation=3, moves=9, face_down=18))
    assert s.racers[2]["foundation"] == 3 and s.racers[2]["face_down"] == 18
    s.apply(progress(8, 3, status="resigned"))
    assert s.racers[3]["status"] == "resigned"
    s.apply(finished(9, racer=2, place=1))
    assert s.racers[2]["place"] == 1 and s.racers[2]["status"] == "finished"
    assert s.ranked()[0]["name"] == "Bob"
    assert s.version == 9 and not s.needs_resync


def test_replayed_events_are_skipped() -> None:
    s = RoomView()
    s.load(snapshot(version=5), racer=1)
    assert s.apply(ev("racer_joined", 4, **racer(9, "Old"))) is Fold.OLD
    assert s.apply(ev("racer_joined", 5, **racer(9, "Old"))) is Fold.OLD
    assert 9 not in s.racers and s.version == 5 and not s.needs_resync
    assert s.apply(ev("ready_changed", 6, racer=2, ready=True)) is Fold.APPLIED
    # The same event again (a duplicate frame) changes nothing.
    assert s.apply(ev("ready_changed", 6, racer=2, ready=False)) is Fold.OLD
    assert s.racers[2]["ready"] is True and s.version == 6


def test_a_gap_is_not_folded_and_asks_for_a_resync() -> None:
    s = RoomView()
    s.load(snapshot(version=5), racer=1)
    assert s.apply(ev("ready_changed", 7, racer=2, ready=True)) is Fold.GAP
    assert s.needs_resync and s.racers[2]["ready"] is False and s.version == 5
    # Not even the missing version is folded once a gap was seen: the events between
    # may have been lost anywhere, only a snapshot knows the room again.
    assert s.apply(ev("ready_changed", 6, racer=1, ready=True)) is Fold.GAP
    assert s.racers[1]["ready"] is False and s.version == 5
    s.load(snapshot(version=7, racers=[racer(1, "Ann"), racer(2, "Bob", ready=True)]), racer=1)
    assert not s.needs_resync and s.racers[2]["ready"] is True
    assert s.apply(ev("ready_changed", 8, racer=1, ready=True)) is Fold.APPLIED


#: Two boards as the server sends them (solrace.rules.view of a real deal).
_BOARD = view(deal("yukon", 1), owner=True)
_BOARD_2 = view(deal("yukon", 2), owner=True)


def test_own_board_from_notices_and_moved_replies() -> None:
    s = RoomView()
    s.load(snapshot(phase="racing", version=6), racer=1)
    assert s.apply(Envelope("board", d={"racer": 1, "at_ms": 5, "view": _BOARD})) is Fold.NOTICE
    assert s.my_board == _BOARD and s.boards == {}
    s.on_moved({"seq": 0, "board": _BOARD_2, "status": "stuck", "moves": 1, "score": 10})
    assert s.my_board == _BOARD_2 and s.my_status == "stuck" and s.next_seq == 1
    assert s.racers[1]["moves"] == 1 and s.racers[1]["status"] == "stuck"


def test_spectator_keeps_every_racers_latest_board() -> None:
    s = RoomView()
    s.load(snapshot(you=None, phase="racing"))
    s.apply(Envelope("board", d={"racer": 2, "at_ms": 5, "view": _BOARD}))
    s.apply(Envelope("board", d={"racer": 2, "at_ms": 9, "view": _BOARD_2}))
    assert s.boards[2] == (9, _BOARD_2) and s.me is None and s.my_board is None


@pytest.mark.parametrize(
    "bad",
    [{"variant": "klondike", "tableau": "x"}, {"x": 1}, [1, 2], {**_BOARD, "stock": -1}],
)
def test_a_board_of_another_shape_is_refused(bad: Any) -> None:
    """An audit (a hostile server): a board notice ``{"tableau": "x"}`` was kept as the
    racer's board, and the bot rebuilding it ended in a traceback. It is refused
    (ValueError: the connection folding it closes) and the last board stays."""
    s = RoomView()
    s.load(snapshot(phase="racing", version=6), racer=1)
    s.apply(Envelope("board", d={"racer": 1, "at_ms": 5, "view": _BOARD}))
    for fold in (
        lambda: s.apply(Envelope("board", d={"racer": 1, "at_ms": 6, "view": bad})),
        lambda: s.apply(Envelope("board", d={"racer": 2, "at_ms": 6, "view": bad})),
        lambda: s.on_moved({"seq": 0, "board": bad, "status": "playing", "moves": 1}),
        lambda: s.load(
            snapshot(phase="racing", version=7, you={"racer": 1, "board": bad, "next_seq": 0})
        ),
    ):
        with pytest.raises(ValueError):
            fold()
    assert s.my_board == _BOARD and s.boards == {}


def test_a_racer_who_joins_is_online() -> None:
    """A random-requests audit: after ``racer_joined`` the view left the racer's
    ``online`` unknown while the server's fold (and its next snapshot) had it online."""
    s = RoomView()
    s.load(snapshot(racers=[racer(1, "Ann")]), racer=1)
    s.apply(ev("racer_joined", 3, **racer(2, "Bob")))
    assert s.racers[2]["online"] is True
    s.apply(ev("presence", 4, racer=2, online=False))
    assert s.racers[2]["online"] is False


def test_race_over_reset_presence_and_leaving() -> None:
    s = RoomView()
    s.load(snapshot(phase="racing", version=6), racer=1)
    s.apply(ev("presence", 7, racer=2, online=False))
    assert s.racers[2]["online"] is False
    s.load(snapshot(phase="racing", version=7), racer=1)
    assert s.racers[2]["online"] is False  # a snapshot does not say; the view remembers
    result = {
        "reason": "all_done",
        "seed": 1,
        "salt": "0" * 64,
        "commitment": "c",
        "certificate": None,
        "standings": [
            {"place": 1, "racer": 2, "name": "Bob", "status": "finished"},
            {"place": 2, "racer": 1, "name": "Ann", "status": "timeout"},
        ],
    }
    s.apply(ev("race_over", 8, **result))
    assert s.phase == "finished" and s.result == result and s.racers[2]["place"] == 1
    assert s.my_status == "timeout"
    s.apply(ev("room_reset", 9, host=1, racers=[racer(1, "Ann"), racer(2, "Bob")]))
    assert s.phase == "lobby" and s.result is None and s.my_board is None
    assert s.racers[2]["online"] is False and s.you is not None and s.you["next_seq"] == 0
    s.apply(ev("racer_left", 10, racer=2, host=1, reason="left"))
    assert 2 not in s.racers and s.name_of(2) == "Bob"  # gone from the lobby, still named


def test_the_countdowns_commitment_is_the_published_one() -> None:
    """An audit: a server announced one commitment at the countdown and another in
    ``started``, then revealed a seed matching the second; the race-over screen said
    "✔ seed and salt match the commitment published at the countdown" and verify "the
    commitment announced at the countdown is the one revealed"."""
    s = RoomView()
    s.load(snapshot(), racer=1)
    s.apply(ev("countdown", 3, start_at_ms=100, commitment="c1"))
    s.apply(ev("started", 4, start_at_ms=100, ends_at_ms=900_100, commitment="c2"))
    assert s.commitment == "c2" and s.published_commitment == "c1"
    result = {"reason": "all_done", "seed": 1, "salt": "0" * 64, "certificate": None}
    result["commitment"] = commitment(1, "0" * 64)
    assert s.published_commitment != result["commitment"]  # what verify compares
    s.apply(ev("race_over", 5, standings=[], **result))
    s.apply(ev("room_reset", 6, host=1, racers=[racer(1, "Ann"), racer(2, "Bob")]))
    assert s.published_commitment is None  # the next round publishes its own
    s.apply(ev("started", 7, start_at_ms=200, ends_at_ms=900_200, commitment="c3"))
    assert s.published_commitment == "c3"


def test_a_snapshot_of_another_round_after_the_reveal_publishes_nothing() -> None:
    """Only a client that saw a round's countdown (or a snapshot before its reveal) has
    a published commitment for it: coming back into a finished room whose commitment is
    another, the one seen before is not this round's (a spectator away for a whole
    rematch kept round 1's, and verify failed round 2 against an honest server)."""
    s = RoomView()
    s.load(snapshot(), racer=None)
    s.apply(ev("countdown", 3, start_at_ms=100, commitment="c1"))
    s.load(snapshot(version=9, phase="finished", commitment="c1", you=None))
    assert s.published_commitment == "c1"  # the same round: what it saw announced
    s.load(snapshot(version=20, phase="finished", commitment="c2", you=None))
    assert s.published_commitment is None
    s.load(snapshot(version=21, phase="racing", commitment="c3", you=None))
    assert s.published_commitment == "c3"  # seen before the reveal
    s.load(snapshot(version=30, phase="lobby", commitment=None, you=None))
    assert s.published_commitment is None


def test_the_last_race_over_seen_is_kept_as_the_rooms_proof() -> None:
    """What a resume or watch sends back (``revealed``): the last race_over's seed and
    salt, kept past the rematch and a snapshot of the same room — a store that lost the
    race_over sends a snapshot of the race under way — and dropped for another room."""
    s = RoomView()
    s.load(snapshot(phase="racing", version=6), racer=1)
    assert s.revealed is None
    result = {"reason": "all_done", "seed": 7, "salt": "ab" * 32, "commitment": "c"}
    s.apply(ev("race_over", 7, standings=[], certificate=None, **result))
    assert s.revealed == {"seed": 7, "salt": "ab" * 32}
    s.apply(ev("room_reset", 8, host=1, racers=[racer(1, "Ann"), racer(2, "Bob")]))
    s.load(snapshot(phase="racing", version=5, commitment="c"), racer=1)  # rewound
    assert s.revealed == {"seed": 7, "salt": "ab" * 32}
    finished = {**result, "seed": 8, "standings": [], "certificate": None}
    s.load(snapshot(phase="finished", version=20, commitment="c", result=finished), racer=1)
    assert s.revealed == {"seed": 8, "salt": "ab" * 32}  # a finished room's snapshot
    s.load(snapshot(room="r_2", phase="racing", version=3, commitment="c"), racer=1)
    assert s.revealed is None


def test_a_racer_who_leaves_mid_race_stays_listed() -> None:
    s = RoomView()
    s.load(snapshot(phase="racing", version=6), racer=1)
    s.apply(ev("racer_left", 7, racer=2, host=1, reason="grace"))
    assert s.racers[2]["status"] == "left" and s.racers[2]["place"] is None


def test_a_deal_chosen_is_kept_and_a_reset_forgets_it() -> None:
    s = RoomView()
    s.load(snapshot(), racer=1)
    s.apply(ev("deal_chosen", 3, certified=True, moves=97, difficulty="easy"))
    assert s.deal == {"certified": True, "moves": 97, "difficulty": "easy"}
    s.apply(ev("room_reset", 4, host=1, racers=[racer(1, "Ann")]))
    assert s.deal is None


def test_a_resync_replaces_the_state_even_with_a_lower_version() -> None:
    s = RoomView()
    s.load(snapshot(version=9), racer=1)
    s.apply(ev("ready_changed", 11, racer=2, ready=True))
    assert s.needs_resync
    fresh = snapshot(version=6, racers=[racer(1, "Ann", ready=True)])
    notice = Envelope("resync", d={"reason": "lost 3", "lost_events": 3, "snapshot": fresh})
    assert s.apply(notice) is Fold.NOTICE
    assert s.version == 6 and s.racers[1]["ready"] is True and 2 not in s.racers
    assert not s.needs_resync and s.me == 1
    assert s.apply(ev("ready_changed", 7, racer=1, ready=False)) is Fold.APPLIED


# ---------------------------------------------- against the server's own snapshots
def public(room: Mapping[str, Any]) -> dict[str, Any]:
    """What a snapshot says about the room, in the view's terms (racers keyed by id,
    only the protocol's RacerInfo fields; the spectator count and clock left out)."""
    keys = set(RacerInfo.__annotations__)
    return {
        "room": room["room"],
        "code": room["code"],
        "version": room["version"],
        "phase": room["phase"],
        "settings": dict(room["settings"]),
        "host": room["host"],
        "racers": {r["racer"]: {k: r[k] for k in keys} for r in room["racers"]},
        "start_at_ms": room["start_at_ms"],
        "ends_at_ms": room["ends_at_ms"],
        "commitment": room["commitment"],
        "result": room["result"],
        "deal": room["deal"],
    }


def folded(view: RoomView) -> dict[str, Any]:
    """The same, from a view."""
    return public(
        {
            "room": view.room,
            "code": view.code,
            "version": view.version,
            "phase": view.phase,
            "settings": view.settings,
            "host": view.host,
            "racers": view.racer_list(),
            "start_at_ms": view.start_at_ms,
            "ends_at_ms": view.ends_at_ms,
            "commitment": view.commitment,
            "result": view.result,
            "deal": view.deal,
        }
    )


def you_of(you: Mapping[str, Any] | None) -> dict[str, Any]:
    assert you is not None
    return {k: you[k] for k in You.__annotations__}


async def fresh_watch(url: str, code: str) -> dict[str, Any]:
    """A fresh spectator's snapshot of the room (a new connection, no state)."""
    spy = await RaceClient.connect(url)
    try:
        return dict((await spy.watch(code=code))["snapshot"])
    finally:
        await spy.close()


async def test_a_whole_race_folds_to_what_the_server_says(cluster: Cluster) -> None:
    """Two racers and a spectator: at the start, mid-race and after race_over, the
    views folded from the events equal fresh snapshots of the room."""
    server = await cluster.node()
    url = server.url
    ann, bob = await lobby(url)
    watcher = await RaceClient.connect(url)
    await watcher.watch(code=ann.code)
    code = ann.code or ""
    before = copy.deepcopy(folded(watcher.view))
    await ann.start()
    await ann.wait_started()
    await bob.wait_started()
    await watcher.next_event("started")
    assert folded(watcher.view) != before  # the fold did something
    started = await fresh_watch(url, code)
    for client in (ann, bob, watcher):
        assert folded(client.view) == public(started), client.view.me

    moves = winning_moves(SOLVABLE_SECRET)
    await play_until_done(ann, moves[:12])
    await play_until_done(bob, moves[:3])
    # Everything the moves caused has arrived once the watcher sees Bob's last progress
    # (Ann's came first: she played first, through the same node).
    await watcher.wait_for(lambda e: e.t == "progress" and e.d["racer"] == bob.racer)
    await asyncio.sleep(0.2)
    mid = await fresh_watch(url, code)
    assert mid["phase"] == "racing"
    for client in (ann, bob, watcher):
        assert folded(client.view) == public(mid), client.view.me
        assert not client.view.needs_resync

    reply = await play_until_done(ann, moves[12:])
    assert reply["status"] == "finished"
    await bob.resign()
    over = await watcher.next_event("race_over", timeout=30)
    await ann.next_event("race_over", timeout=30)
    await bob.next_event("race_over", timeout=30)
    end = await fresh_watch(url, code)
    assert end["phase"] == "finished" and end["result"] == over.d
    for client in (ann, bob, watcher):
        assert folded(client.view) == public(end), client.view.me
    standings = {s["racer"]: s for s in end["result"]["standings"]}
    assert ann.view.racers[ann.racer or 0]["place"] == standings[ann.racer]["place"] == 1

    # Each racer's own game as the view has it (board, next seq, moves, score, status)
    # is the one the server resumes it with.
    for client in (ann, bob):
        mine = you_of(client.view.you)
        again = await RaceClient.connect(url)
        resumed = await again.resume(room=client.room, token=client.token, since=None)
        assert mine == you_of(resumed["snapshot"]["you"])
        await again.close()
    await close_all(ann, bob, watcher)


def test_names_and_statuses_are_kept_fit_for_a_terminal() -> None:
    """An audit: a hostile server's racer named ``Riv\\x1b]0;PWNED\\x07`` reached the
    terminal through the UI as an escape sequence (it set the terminal's title). The
    view keeps names and statuses with their control characters as ``?``; the race's
    logs and reveal stay as they came."""
    evil = "Riv\x1b]0;PWNED\x07"
    s = RoomView()
    s.load(snapshot(racers=[racer(1, "Ann"), racer(2, evil)], code="AB\x1bC"), racer=1)
    assert s.racers[2]["name"] == s.name_of(2) == "Riv?]0;PWNED?" and s.code == "AB?C"
    s.apply(ev("racer_joined", 3, **racer(3, "Cy\x9b2J")))
    assert s.name_of(3) == "Cy?2J"
    s.apply(progress(4, 3, status="\x1b[5mresigned"))
    assert s.racers[3]["status"] == "?[5mresigned"
    log = ["D", "\x1b"]
    standings = [{"place": 1, "racer": 2, "name": evil, "status": "timeout", "log": log}]
    s.apply(ev("race_over", 5, reason="time_limit", standings=standings, seed=1))
    assert s.result is not None and s.result["standings"][0]["name"] == "Riv?]0;PWNED?"
    assert s.result["standings"][0]["log"] == log and s.result["seed"] == 1


def test_the_settings_and_acknowledged_moves_are_kept_with_the_rounds_countdown() -> None:
    """What ``verify`` holds a saved file to beside the countdown's commitment: the
    room's settings then (not under the commitment), and each move the server
    acknowledged to this racer (``moved``: the move sent, the seq echoed). Kept with
    the round through a resume; another round forgets them."""
    s = RoomView()
    s.load(snapshot(), racer=1)
    assert s.countdown_settings is None and s.acknowledged == {}
    s.apply(ev("countdown", 3, start_at_ms=100, commitment="c1"))
    assert s.countdown_settings == YUKON
    s.apply(ev("started", 4, start_at_ms=100, ends_at_ms=900_100, commitment="c1"))
    s.on_moved({"seq": 0, "board": _BOARD_2, "status": "playing", "moves": 1}, "1:1>2")
    s.on_moved({"seq": 1, "board": _BOARD_2, "status": "playing", "moves": 2}, "undo")
    assert s.acknowledged == {0: "1:1>2", 1: "undo"}
    # a resume into the same round keeps both (the snapshot's settings are not taken)
    s.load(snapshot(version=9, phase="racing", commitment="c1", settings={**YUKON, "x": 1}))
    assert s.countdown_settings == YUKON and s.acknowledged == {0: "1:1>2", 1: "undo"}
    result = {"reason": "all_done", "seed": 1, "salt": "0" * 64, "certificate": None}
    s.apply(ev("race_over", 10, standings=[], commitment="c1", **result))
    over = s.overs[10]
    assert over.countdown_settings == YUKON
    assert over.acknowledged is not None and over.acknowledged.racer == 1
    assert dict(over.acknowledged.moves) == {0: "1:1>2", 1: "undo"}
    s.apply(ev("room_reset", 11, host=1, racers=[racer(1, "Ann"), racer(2, "Bob")]))
    assert s.countdown_settings is None and s.acknowledged == {}
    assert s.overs[10].acknowledged is not None  # the round kept, as it ended
    # a round seen first in a snapshot taken while it raced: its settings then
    s.load(snapshot(version=20, phase="racing", commitment="c2"), racer=1)
    assert s.countdown_settings == YUKON
    s.on_moved({"seq": 0, "board": _BOARD_2, "status": "playing", "moves": 1}, "1:1>2")
    # back after the reveal into a round not the one seen: nothing of it was seen
    s.load(snapshot(version=40, phase="finished", commitment="c3"), racer=1)
    assert s.countdown_settings is None and s.acknowledged == {}


def test_a_spectators_round_has_no_acknowledged_moves() -> None:
    s = RoomView()
    s.load(snapshot(you=None), racer=None)
    s.apply(ev("countdown", 3, start_at_ms=100, commitment="c1"))
    s.apply(ev("race_over", 4, standings=[], commitment="c1", seed=1, salt="0" * 64))
    assert s.overs[4].acknowledged is None and s.overs[4].countdown_settings == YUKON


def test_a_moved_reply_of_a_round_arriving_in_the_next_lobby_is_not_held_to_the_next() -> None:
    """A retry of a round's stored move is answered ``moved`` after its race_over
    (docs/protocol.md §11), and the reply may come after the rematch's ``room_reset``
    (replies are sent when done, events as folded). Its ack belongs to the round
    before: the next round's countdown forgets it, so the next round's log is not held
    to a move it never had (a review of the acknowledged-moves check)."""
    s = RoomView()
    s.load(snapshot(), racer=1)
    s.apply(ev("countdown", 3, start_at_ms=100, commitment="c1"))
    s.apply(ev("started", 4, start_at_ms=100, ends_at_ms=900_100, commitment="c1"))
    s.on_moved({"seq": 0, "board": _BOARD_2, "status": "playing", "moves": 1}, "1:1>2")
    s.apply(ev("race_over", 5, standings=[], commitment="c1", seed=1, salt="0" * 64))
    s.apply(ev("room_reset", 6, host=1, racers=[racer(1, "Ann"), racer(2, "Bob")]))
    s.on_moved({"seq": 0, "board": _BOARD_2, "status": "playing", "moves": 1}, "1:1>2")
    s.apply(ev("countdown", 7, start_at_ms=200, commitment="c2"))
    s.apply(ev("started", 8, start_at_ms=200, ends_at_ms=900_200, commitment="c2"))
    s.apply(ev("race_over", 9, standings=[], commitment="c2", seed=2, salt="0" * 64))
    acknowledged = s.overs[9].acknowledged
    assert acknowledged is not None and dict(acknowledged.moves) == {}
    first = s.overs[5].acknowledged
    assert first is not None and dict(first.moves) == {0: "1:1>2"}


@pytest.mark.parametrize("bad", ["soon", None, 1.5, True, [1]])
def test_a_time_that_is_not_whole_milliseconds_is_not_kept(bad: Any) -> None:
    """The countdown's and the race's times, and the snapshot's clock, are kept only
    when they are whole milliseconds (a faulty or hostile server's are not): the race
    screen's clock subtracted them, and a ``started`` whose ``ends_at_ms`` was
    ``"soon"`` ended the terminal client with a TypeError traceback."""
    s = RoomView()
    s.load(snapshot(now_ms=bad, start_at_ms=bad, ends_at_ms=bad), racer=1)
    assert (s.now_ms, s.start_at_ms, s.ends_at_ms) == (None, None, None)
    s.apply(ev("countdown", 3, start_at_ms=bad, commitment="c"))
    assert s.phase == "countdown" and s.start_at_ms is None
    s.apply(ev("started", 4, start_at_ms=100, ends_at_ms=bad, commitment="c"))
    assert s.phase == "racing" and (s.start_at_ms, s.ends_at_ms) == (100, None)
    s.apply(ev("started", 5, start_at_ms=bad, ends_at_ms=900_100, commitment="c"))
    assert (s.start_at_ms, s.ends_at_ms) == (None, 900_100)


@pytest.mark.parametrize("value", ["soon", [1], {"n": 1}, 1.5, None, True])
@pytest.mark.parametrize("field", ["place", "foundation", "moves", "face_down"])
def test_a_racer_count_of_the_wrong_type_is_kept_as_unknown(field: str, value: object) -> None:
    """A faulty or hostile server's racer entry with ``place: "soon"`` ended the racers
    panel's sort (``ranked``) with a TypeError; ``foundation: "x"`` its bar with a
    ValueError. The fold reads a racer's counts once: a count that is not a whole
    number is kept as None (unknown), whichever frame brought it."""
    bent = {**racer(2, "Bob"), field: value}
    rv = RoomView()
    rv.load(snapshot(racers=[racer(1, "Ann"), bent]))
    assert rv.racers[2][field] is None
    rv.apply(ev("racer_joined", 3, **{**racer(3, "Cy"), field: value}))
    assert rv.racers[3][field] is None
    if field != "place":
        rv.apply(progress(4, 1, **{field: value}))
        assert rv.racers[1][field] is None
    assert sorted(r["racer"] for r in rv.ranked()) == [1, 2, 3]


@pytest.mark.parametrize("bent", [{"racer": "soon"}, {"racer": None}, "Bob", {"name": "x"}])
def test_a_racer_entry_that_names_no_racer_is_refused(bent: object) -> None:
    """An entry that is not a map or names no racer by a whole number is a frame the
    fold does not expect: it raises (RaceClient closes the connection, saying why)."""
    rv = RoomView()
    with pytest.raises(ValueError, match="racer entry"):
        rv.load(snapshot(racers=[racer(1, "Ann"), bent]))


@pytest.mark.parametrize("status", [["finished"], {"s": 1}, 7])
def test_a_status_that_is_not_a_string_is_kept_as_unknown(status: object) -> None:
    """A ``progress`` whose status was a list ended the news line with an unhashable
    TypeError: the fold keeps it as None."""
    rv = RoomView()
    rv.load(snapshot())
    rv.apply(progress(3, 2, status=status))
    assert rv.racers[2]["status"] is None


@pytest.mark.parametrize("result", ["soon", [1, 2], 7])
def test_a_finished_rooms_result_that_is_not_a_map_is_no_result(result: object) -> None:
    """A finished room's snapshot whose result was a string (a faulty or hostile
    server's) was kept as the view's result, and the race-over screen, reading it as a
    map, ended with an AttributeError: it is no result (the screen waits for one)."""
    rv = RoomView()
    rv.load(snapshot(phase="finished", result=result))
    assert rv.result is None
    assert rv.overs == {}


@pytest.mark.parametrize("seq", [2**70, 10**9, -3])
def test_a_moved_reply_with_a_seq_no_log_can_reach_keeps_no_acknowledged_move(seq: int) -> None:
    """A faulty or hostile server's ``moved`` echoing seq 2**70 was kept as the move
    acknowledged at that place, and the race's file (``Acknowledged.to_json``, a list
    by seq) was built 2**70 entries long when the race ended: the terminal client and
    the bot hung, their memory growing. A seq past the longest log a server keeps (or
    below 0) is in no log: nothing is kept as acknowledged there."""
    rv = RoomView()
    rv.load(snapshot(), racer=1)
    rv.on_moved({"seq": seq, "board": None, "status": "playing", "moves": 1, "score": 0}, "D")
    assert rv.acknowledged == {}


@pytest.mark.parametrize(
    "bend",
    [
        {"foundations": {"C": [1, 2], "D": 0, "H": 0, "S": 0}},
        {"options": {"draw": "soon"}},
    ],
)
def test_a_board_its_variant_cannot_have_is_refused(bend: dict[str, Any]) -> None:
    """A Klondike board whose foundation came as a list (a two-deck variant's shape)
    or whose draw was ``"soon"`` passed the wire check and ended the board screen with
    int()'s TypeError or ValueError: the fold refuses it (the connection closes)."""
    board = {**view(deal("klondike", 7, {"draw": 1}), owner=True), **bend}
    rv = RoomView()
    rv.load(snapshot(settings={**YUKON, "variant": "klondike"}), racer=1)
    with pytest.raises(ValueError, match="board view"):
        rv.apply(ev("board", None, racer=1, at_ms=1, view=board))
    assert rv.my_board is None
