"""LiveRoom.back_in_race and decisions.out_again, without a store: which racers a node
remembers out of the round's race (through the refold after lost writes), and how
their race ends again when the store brings them back (tests/net/test_rewound_forfeits.py
runs it against a real rewind)."""

from __future__ import annotations

from typing import Any

from solrace.race import RoomSettings
from solrace.race import decisions as d
from solrace.race.events import RoomEvent, progress
from solrace.rooms.records import RoomMeta
from solrace.rooms.room import LiveRoom

COMMIT = "ab" * 32


class _Room:
    """A LiveRoom folding decided events (no store), and every event it folded, so
    that a rewind is a refold of a prefix."""

    def __init__(self, **options: Any) -> None:
        settings = RoomSettings(variant="yukon", options=options, deals="random")
        self.live = LiveRoom(RoomMeta("r_test", "ABCDEF", b"s" * 32, settings, 0))
        self.now = 1_000_000
        self.stored: list[RoomEvent] = []

    def apply(self, events: list[RoomEvent]) -> None:
        for ev in events:
            self.stored.append(ev.but(at=self.now))
            self.live.fold(len(self.stored), self.stored[-1], "", live=False)

    def tick(self) -> list[RoomEvent]:
        return d.tick(self.live.state, self.now, lambda: COMMIT, lambda t, r: {})

    def rewind(self, version: int) -> None:
        """Redis lost every event after ``version``: the node refolds what it holds."""
        del self.stored[version:]
        self.live.reset()
        for v, ev in enumerate(self.stored, 1):
            self.live.fold(v, ev, "", live=False)


def _racing(**options: Any) -> _Room:
    room = _Room(**options)
    for name in ("Ann", "Bob", "Cy"):
        room.apply(d.join(room.live.state, name))
    for racer in (2, 3):
        room.apply(d.ready(room.live.state, racer, True))
    room.apply(d.start(room.live.state, 1, room.now, COMMIT))
    room.now += d.COUNTDOWN_MS
    room.apply(room.tick())
    assert room.live.state.phase == "racing"
    return room


def _stuck(room: _Room, racer: int) -> None:
    member = room.live.state.racers[racer]
    counts = {"foundation": 0, "moves": 3, "face_down": member.face_down}
    room.apply([progress(racer, counts, "stuck")])


def test_a_racer_out_of_the_race_is_back_after_a_rewind_and_goes_out_again() -> None:
    room = _racing(undo=False)
    before = len(room.stored)
    room.apply(d.resign(room.live.state, 1))
    room.apply(d.leave(room.live.state, 2))
    _stuck(room, 3)  # no undo here: out of the race too (the race is over: no tick)
    assert room.live.back_in_race() == {}  # out, and the store agrees
    room.rewind(before)
    back = room.live.back_in_race()
    assert back == {1: "resigned", 2: "left", 3: "stuck"}
    assert d.next_wakeup(room.live.state, end_due=room.live.end_due()) == 0
    # One a decision: the resigned one resigns, the one who left leaves, the stuck
    # one (its board rewound may have moves again) resigns: statuses that close logs.
    for racer, status in ((1, "resigned"), (2, None), (3, "resigned")):
        (again,) = d.out_again(room.live.state, room.live.back_in_race())
        assert again.racer == racer
        assert (again.t, again.d.get("status")) == (
            ("progress", status) if status else ("racer_left", None)
        )
        room.apply([again])
    assert room.live.back_in_race() == {}


def test_a_stuck_racer_who_may_undo_is_not_out_and_a_rematch_forgets() -> None:
    room = _racing(undo=True)
    before = len(room.stored)
    _stuck(room, 3)  # may undo: still racing, its cards still counted
    room.apply(d.resign(room.live.state, 1))
    room.rewind(before)
    assert room.live.back_in_race() == {1: "resigned"}
    # A leave by grace leaves by grace again.
    room.live.out_of_race[1] = ("grace", "Ann")
    (again,) = d.out_again(room.live.state, room.live.back_in_race())
    assert (again.t, again.d["reason"]) == ("racer_left", "grace")
    # Another round: what the last one's racers did is no business of it.
    room.live.out_round = room.live.state.round - 1
    assert room.live.back_in_race() == {}


def test_out_of_the_countdown_a_racer_leaves_again() -> None:
    room = _racing()
    countdown = next(i for i, e in enumerate(room.stored, 1) if e.t == "countdown")
    room.apply(d.resign(room.live.state, 1))
    room.rewind(countdown)  # the store holds the countdown: nobody resigns there
    assert room.live.state.phase == "countdown"
    (again,) = d.out_again(room.live.state, room.live.back_in_race())
    assert (again.t, again.racer, again.d["reason"]) == ("racer_left", 1, "left")


def _over(room: _Room) -> None:
    """End the race (nobody left playing) and fold its race_over."""
    events = d.tick(
        room.live.state, room.now, lambda: COMMIT, lambda t, r: {"standings": t, "reason": r}
    )
    assert [e.t for e in events] == ["race_over"]
    room.apply(events)


def test_a_rewind_in_a_rematch_refolds_the_last_round_without_forgetting_this_ones() -> None:
    # The stream keeps the round before the one under way (a rematch trims only the
    # rounds before that): the refold after lost writes folds round 1's outs first,
    # and they must not wipe what the node saw go out of round 2.
    room = _racing(undo=False)
    room.apply(d.resign(room.live.state, 1))
    for racer in (2, 3):
        room.apply(d.resign(room.live.state, racer))
    _over(room)
    room.apply(d.rematch(room.live.state, 1))
    for racer in (1, 2, 3):
        room.apply(d.ready(room.live.state, racer, True))
    room.apply(room.tick())  # everyone ready: the countdown
    room.now += d.COUNTDOWN_MS
    room.apply(room.tick())
    assert (room.live.state.round, room.live.state.phase) == (2, "racing")
    before = len(room.stored)
    room.apply(d.resign(room.live.state, 2))
    room.rewind(before)  # Bob's resignation in round 2 is lost
    assert room.live.state.racers[2].status == "playing"
    assert room.live.back_in_race() == {2: "resigned"}


def test_a_new_racer_given_the_id_of_one_a_rewind_unjoined_is_not_forced_out() -> None:
    # Cy joins, races and resigns; the store is put back to before Cy joined, so the
    # next joiner, Dee, gets Cy's id. Dee never raced: nothing of hers is out.
    room = _Room(undo=False)
    for name in ("Ann", "Bob"):
        room.apply(d.join(room.live.state, name))
    before_cy = len(room.stored)
    room.apply(d.join(room.live.state, "Cy"))
    for racer in (2, 3):
        room.apply(d.ready(room.live.state, racer, True))
    room.apply(d.start(room.live.state, 1, room.now, COMMIT))
    room.now += d.COUNTDOWN_MS
    room.apply(room.tick())
    room.apply(d.resign(room.live.state, 3))
    assert room.live.out_of_race == {3: ("resigned", "Cy")}
    room.rewind(before_cy)
    room.apply(d.join(room.live.state, "Dee"))
    assert room.live.state.racers[3].name == "Dee"
    for racer in (2, 3):
        room.apply(d.ready(room.live.state, racer, True))
    room.apply(d.start(room.live.state, 1, room.now, COMMIT))
    assert room.live.state.phase == "countdown"
    assert room.live.back_in_race() == {}


def test_is_back_answers_as_back_in_race() -> None:
    room = _racing(undo=False)
    before = len(room.stored)
    room.apply(d.resign(room.live.state, 1))
    assert not any(room.live.is_back(r) for r in (1, 2, 3))
    room.rewind(before)
    assert [r for r in (1, 2, 3) if room.live.is_back(r)] == [1]
