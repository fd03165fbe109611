"""The race layer without I/O: folding events, decisions, standings, timers."""

from __future__ import annotations

from typing import Any

import pytest
from solrace.protocol import verify
from solrace.protocol.limits import MAX_UNREADY, RESUME_BURST
from solrace.protocol.messages import display_name
from solrace.race import RaceError, RacerGame, RoomSettings, RoomState, standings
from solrace.race import decisions as d
from solrace.race.events import EventType, RoomEvent, event
from solrace.race.fairness import round_commitment, round_salt, round_seed
from solrace.race.state import QUICK_LOBBY_MS, RESUME_INTERVAL_MS, RacerState

COMMIT = "ab" * 32


class Room:
    """A RoomState plus an append-only event list, like the store keeps."""

    def __init__(self, **settings: Any) -> None:
        self.state = RoomState("r_test", "ABCDEF", RoomSettings(**settings))
        self.now = 1_000_000
        #: Every event folded, by version (the room's stream, untrimmed).
        self.stored: dict[int, RoomEvent] = {}

    def apply(self, events: list[RoomEvent]) -> None:
        for ev in events:
            version = self.state.version + 1
            self.stored[version] = ev.but(at=self.now)
            self.state.apply(version, self.stored[version])

    def folded_from(self, version: int) -> RoomState:
        """The room folded from ``version`` on, as a node taking it up folds a stream
        trimmed to begin there."""
        state = RoomState(self.state.room, self.state.code, self.state.settings)
        for v in range(version, self.state.version + 1):
            state.apply(v, self.stored[v])
        return state

    def tick(self) -> list[RoomEvent]:
        return d.tick(self.state, self.now, lambda: COMMIT, self._result)

    @staticmethod
    def _result(table: list[dict[str, Any]], reason: str) -> dict[str, Any]:
        return {
            "reason": reason,
            "standings": table,
            "seed": 1,
            "salt": "00" * 32,
            "commitment": COMMIT,
        }


CERTIFIED = {"certified": True, "moves": 90, "difficulty": "easy"}


def _lobby(n: int = 2, **settings: Any) -> Room:
    room = Room(**settings)
    for name in ["Ann", "Bob", "Cy", "Di"][:n]:
        room.apply(d.join(room.state, name))
    room.apply(d.deal_chosen(room.state, 1, CERTIFIED))  # as the node's certifier does
    return room


def _racing(n: int = 2) -> Room:
    room = _lobby(n)
    for racer in list(room.state.racers)[1:]:
        room.apply(d.ready(room.state, racer, True))
    room.apply(d.start(room.state, 1, room.now, COMMIT))
    room.now += d.COUNTDOWN_MS
    room.apply(room.tick())
    assert room.state.phase == "racing"
    return room


def _progress(room: Room, racer: int, foundation: int, status: str = "playing") -> None:
    room.apply(
        [
            event(
                EventType.PROGRESS,
                racer=racer,
                foundation=foundation,
                moves=foundation,
                face_down=0,
                status=status,
                place=None,
            )
        ]
    )


def test_racer_ids_are_never_reused_and_the_first_racer_hosts() -> None:
    room = _lobby(2)
    assert room.state.host == 1
    room.apply(d.leave(room.state, 2))
    room.apply(d.join(room.state, "Cy"))
    assert list(room.state.racers) == [1, 3]


def test_join_refusals() -> None:
    room = _lobby(2, max_racers=2)
    with pytest.raises(RaceError) as full:
        d.join(room.state, "Cy")
    assert full.value.code == "room_full"
    racing = _racing()
    with pytest.raises(RaceError) as started:
        d.join(racing.state, "Cy")
    assert started.value.code == "wrong_phase"
    emptied = _lobby(2)
    for racer in (1, 2):
        emptied.apply(d.leave(emptied.state, racer))
    with pytest.raises(RaceError) as closed:
        d.join(emptied.state, "Cy")  # everyone left: it is closed (and expiring)
    assert closed.value.code == "unknown_room"
    assert d.join(Room().state, "Ann")  # but nobody has joined a new room yet


def test_start_needs_the_host_and_everyone_else_ready() -> None:
    room = _lobby(3)
    with pytest.raises(RaceError) as not_host:
        d.start(room.state, 2, room.now, COMMIT)
    assert not_host.value.code == "not_host"
    room.apply(d.ready(room.state, 2, True))
    with pytest.raises(RaceError) as not_ready:
        d.start(room.state, 1, room.now, COMMIT)
    assert not_ready.value.code == "not_ready" and "Cy" in not_ready.value.message
    room.apply(d.ready(room.state, 3, True))
    (countdown,) = d.start(room.state, 1, room.now, COMMIT)
    assert countdown.d == {"start_at_ms": room.now + d.COUNTDOWN_MS, "commitment": COMMIT}


def test_a_start_after_the_race_is_over_says_so_not_that_it_started() -> None:
    """A wire fuzz's ``start`` in a finished room was told "the race has already
    started": true once, but what the racer can do now is ask for a rematch."""
    room = _racing()
    for racer in (1, 2):
        room.apply(d.resign(room.state, racer))
    room.apply(room.tick())
    assert room.state.phase == "finished"
    for racer in (1, 2):  # the host too: its retry is ok only while the race runs
        with pytest.raises(RaceError) as refused:
            d.start(room.state, racer, room.now, COMMIT)
        assert refused.value.code == "wrong_phase"
        assert refused.value.message == "the race is over: ask for a rematch to race again"


def test_a_racer_takes_its_ready_flag_back_at_most_max_unready_times_a_round() -> None:
    """Each change is an event stored and sent to everyone in the room: toggled at the
    rate limit, an audit's racer stored 190 events in 10 s. Taking it back is bounded;
    making itself ready is always allowed, so the room can still start."""
    room = _lobby(2, private=True, spectators="open")
    for _ in range(MAX_UNREADY):
        room.apply(d.ready(room.state, 2, True))
        room.apply(d.ready(room.state, 2, False))
    room.apply(d.ready(room.state, 2, True))
    assert d.ready(room.state, 2, True) == []  # no change: no event, no refusal
    with pytest.raises(RaceError) as refused:
        d.ready(room.state, 2, False)
    assert (refused.value.code, refused.value.field) == ("rate_limited", "ready")
    # Agreeing to open spectating is a step forward; taking that back is counted too.
    room.apply(d.ready(room.state, 2, True, open_boards=True))
    with pytest.raises(RaceError):
        d.ready(room.state, 2, True, open_boards=False)
    assert room.state.racers[2].ready and room.state.racers[2].open_boards
    room.apply(d.ready(room.state, 1, True))
    room.apply(d.start(room.state, 1, room.now, COMMIT))
    room.now += d.COUNTDOWN_MS
    room.apply(room.tick())
    room.apply(d.resign(room.state, 1))
    room.apply(d.resign(room.state, 2))
    room.apply(room.tick())
    room.apply(d.rematch(room.state, 2))
    assert room.state.round == 2  # a new round: Bob may take its flag back again
    room.apply(d.ready(room.state, 2, True))
    assert [e.d["ready"] for e in d.ready(room.state, 2, False)] == [False]


def test_the_race_starts_at_the_announced_instant_not_before() -> None:
    room = _lobby(2)
    room.apply(d.ready(room.state, 2, True))
    room.apply(d.start(room.state, 1, room.now, COMMIT))
    assert room.state.phase == "countdown"
    room.now += d.COUNTDOWN_MS - 1
    assert room.tick() == []
    room.now += 1
    (started,) = room.tick()
    assert started.t == "started"
    assert started.d["ends_at_ms"] == started.d["start_at_ms"] + 900_000


def test_any_room_starts_once_everyone_host_included_is_ready() -> None:
    room = _lobby(3)
    room.apply(d.ready(room.state, 2, True))
    room.apply(d.ready(room.state, 3, True))
    assert room.tick() == []  # the host may still start by hand
    room.apply(d.ready(room.state, 1, True))
    assert [e.t for e in room.tick()] == ["countdown"]
    room.now += 10 * QUICK_LOBBY_MS
    assert d.next_wakeup(_lobby(2).state) is None  # no lobby timer outside quick rooms
    assert _lobby(2).tick() == []


def test_quick_rooms_start_when_all_are_ready_or_when_the_lobby_timer_runs_out() -> None:
    room = _lobby(2, quick=True)
    assert room.tick() == []
    room.apply(d.ready(room.state, 1, True))
    room.apply(d.ready(room.state, 2, True))
    assert [e.t for e in room.tick()] == ["countdown"]
    timed = _lobby(2, quick=True)
    timed.now += QUICK_LOBBY_MS - 1
    assert timed.tick() == []
    timed.now += 1
    assert [e.t for e in timed.tick()] == ["countdown"]
    assert d.next_wakeup(_lobby(2, quick=True).state) is not None


def test_time_limit_times_out_the_playing_racers_then_ends_the_race() -> None:
    room = _racing(3)
    _progress(room, 2, 10)
    _progress(room, 3, 0, "stuck")
    room.now = (room.state.ends_at_ms or 0) - 1
    assert room.tick() == []
    room.now += 1
    timeouts = room.tick()
    assert [(e.d["racer"], e.d["status"]) for e in timeouts] == [
        (1, "timeout"),
        (2, "timeout"),
    ]
    room.apply(timeouts)
    (over,) = room.tick()
    assert over.t == "race_over" and over.d["reason"] == "time_limit"
    assert [(s["racer"], s["place"]) for s in over.d["standings"]] == [(2, 1), (1, 2), (3, 3)]


def test_a_round_whose_seed_was_revealed_starts_and_ends_at_once() -> None:
    """Redis lost the round's race_over after the racers saw its seed (a restore): the
    round comes back counting down or racing, and the node says its seed is out. The
    countdown starts at once, and the race times out at once, whatever the clock."""
    room = _lobby(2)
    room.apply(d.ready(room.state, 2, True))
    room.apply(d.start(room.state, 1, room.now, COMMIT))
    assert d.next_wakeup(room.state, end_due=True) == 0
    assert room.tick() == []
    (started,) = d.tick(room.state, room.now, lambda: COMMIT, room._result, seed_revealed=True)
    assert started.t == "started"
    room.apply([started])
    assert d.next_wakeup(room.state, end_due=True) == 0
    assert room.tick() == []  # its time limit is 900 s away
    timeouts = d.tick(room.state, room.now, lambda: COMMIT, room._result, seed_revealed=True)
    assert [(e.d["racer"], e.d["status"]) for e in timeouts] == [(1, "timeout"), (2, "timeout")]
    room.apply(timeouts)
    (over,) = room.tick()
    assert over.t == "race_over" and over.d["reason"] == "time_limit"


def test_standings_follow_the_race_rules() -> None:
    """RULES race rules: finishers by finish order; then by cards up (more first), then
    by the earlier time that count was reached."""
    room = _racing(4)
    room.now += 1000
    _progress(room, 3, 20)  # Cy reaches 20 first
    room.now += 1000
    _progress(room, 4, 20)  # Di reaches 20 later
    _progress(room, 1, 52, "finished")
    room.apply(
        [event(EventType.FINISHED, racer=1, place=1, elapsed_ms=2000, foundation=52, moves=99)]
    )
    _progress(room, 2, 5, "resigned")
    table = standings(room.state)
    assert [(r["name"], r["place"], r["status"]) for r in table] == [
        ("Ann", 1, "finished"),
        ("Cy", 2, "timeout"),
        ("Di", 3, "timeout"),
        ("Bob", 4, "resigned"),
    ]
    assert table[1]["reached_ms"] < table[2]["reached_ms"]


def test_the_race_ends_when_nobody_is_playing() -> None:
    room = _racing(2)
    room.apply(d.resign(room.state, 1))
    assert room.tick() == []
    _progress(room, 2, 3, "stuck")
    (over,) = room.tick()
    assert over.d["reason"] == "all_done"
    room.apply([over])
    assert room.state.phase == "finished"
    (reset,) = d.rematch(room.state, 2)
    room.apply([reset])
    assert room.state.phase == "lobby" and room.state.round == 2
    assert all(r.status == "waiting" and not r.ready for r in room.state.racers.values())


def _presence(room: Room, racer: int, online: bool, conn: str) -> None:
    """A connection of ``racer`` came or went, stored as the node stores it: with the
    connection and the node (server-only fields)."""
    events = d.presence(room.state, racer, online, conn)
    room.apply([ev.but(conn=conn, node=f"node-{conn}") for ev in events])


def _presence_of(member: RacerState) -> tuple[bool, int | None, str | None, str | None]:
    return (member.online, member.offline_since_ms, member.conn, member.node)


def test_a_room_folded_from_any_rematch_is_the_room_folded_from_its_first_event() -> None:
    """A rematch trims the room's stream before the round it follows (docs/store.md,
    "A room's history"; a soak audit's room of 40 rounds held 6,282 events that a node
    taking it up folded in 147 ms), so a node folds the room from a ``room_reset``:
    that reset alone must give the state the whole history gives — the round, the
    racer ids still to come, each staying racer's presence (online, offline since,
    connection, node, address digest), the host, a quick room's lobby timer — through
    joins, leaves, racers away and back, and rounds of 2 and 3 racers."""
    room = _racing(3)
    resets = []
    for round_no in range(1, 9):
        racing = [r for r in room.state.racers if room.state.racers[r].status == "playing"]
        if round_no % 3 == 0:  # a racer drops, and another is away but comes back
            _presence(room, racing[-1], False, "c-gone")
        if round_no % 2 == 0:
            _presence(room, racing[0], False, f"c{round_no}")
            room.now += 1_000
            _presence(room, racing[0], True, f"c{round_no}b")
        for racer in racing:
            room.apply(d.resign(room.state, racer))
        room.apply(room.tick())
        assert room.state.phase == "finished"
        (reset,) = d.rematch(room.state, racing[0])
        assert reset.carried is not None and reset.carried.round == round_no + 1
        before = {r: _presence_of(m) for r, m in room.state.racers.items()}
        room.apply([reset])
        after = {r: _presence_of(m) for r, m in room.state.racers.items()}
        assert after == {r: before[r] for r in after}  # carried over as it was
        assert after[racing[0]][2] is not None or round_no % 2
        resets.append(room.state.version)
        assert room.state.round_began == room.state.version
        if len(room.state.racers) < 3:  # someone new takes the free seat
            room.apply(d.join(room.state, f"New{round_no}", origin=f"o{round_no}"))
        if round_no % 4 == 0:
            newest = max(room.state.racers)
            room.apply(d.leave(room.state, newest))
            room.apply(d.join(room.state, f"Late{round_no}"))
        room.apply(d.deal_chosen(room.state, room.state.round, CERTIFIED))
        for racer in list(room.state.racers)[1:]:
            room.apply(d.ready(room.state, racer, True))
        room.apply(d.start(room.state, room.state.host or 1, room.now, COMMIT))
        room.now += d.COUNTDOWN_MS
        room.apply(room.tick())
        assert room.state.phase == "racing"
        for version in resets:
            assert room.folded_from(version) == room.state
    assert room.state.round == 9 and room.state.next_racer > 4
    with pytest.raises(ValueError):  # any other event cannot begin the fold
        room.folded_from(resets[-1] + 1)


def test_a_reset_stored_before_resets_carried_the_past_folds_as_before() -> None:
    """A reset stored by a node of an earlier release carries nothing: the fold takes
    the round, the ids and the presence from the state as it did, and such a reset is
    never trimmed to (round_began stays 0)."""
    room = _racing(2)
    for racer in (1, 2):
        room.apply(d.resign(room.state, racer))
    room.apply(room.tick())
    _presence(room, 2, False, "c2")
    _presence(room, 1, False, "c1")
    _presence(room, 1, True, "c1b")
    (reset,) = d.rematch(room.state, 1)
    room.apply([reset.but(carried=None)])
    assert room.state.round == 2 and room.state.round_began == 0
    assert list(room.state.racers) == [1] and room.state.next_racer == 3
    assert room.state.racers[1].conn == "c1b" and room.state.racers[1].online
    with pytest.raises(ValueError):
        room.folded_from(room.state.version)


def test_a_rematch_without_its_host_is_hosted_by_the_earliest_joined_racer_kept() -> None:
    """Ann hosted and is offline when Cy asks for the rematch, so the reset drops her.
    The asker became host; the new host is now, as when a host leaves (racer_left),
    the earliest-joined racer who stays: Bob. A host still online stays host."""
    room = _racing(3)
    for racer in (1, 2, 3):
        room.apply(d.resign(room.state, racer))
    room.apply(room.tick())
    assert room.state.phase == "finished"
    kept_host = d.rematch(room.state, 3)[0]
    assert kept_host.d["host"] == 1
    room.apply(d.presence(room.state, 1, False))
    (reset,) = d.rematch(room.state, 3)
    assert [r["racer"] for r in reset.d["racers"]] == [2, 3]
    assert reset.d["host"] == 2
    room.apply([reset])
    assert room.state.host == 2


def test_a_racer_offline_past_the_grace_period_leaves() -> None:
    room = _racing(2)
    room.apply(d.presence(room.state, 2, False))
    room.now += d.DISCONNECT_GRACE_MS - 1
    assert room.tick() == []
    room.now += 1
    (left,) = room.tick()
    assert left == event(EventType.RACER_LEFT, racer=2, host=1, reason="grace")
    room.apply([left])
    assert room.state.racers[2].status == "left"


def test_a_racer_whose_race_is_over_leaves_with_its_result() -> None:
    """A winner who closed its window after finishing was recorded ``left`` (placed
    behind every finisher, and ``verify`` failed the honest race): a newcomer audit.
    A racer done racing goes offline; its status and place stay."""
    room = _racing(3)
    _progress(room, 1, 52, "finished")
    room.apply(
        [event(EventType.FINISHED, racer=1, place=1, elapsed_ms=2000, foundation=52, moves=99)]
    )
    room.apply(d.resign(room.state, 2))
    for racer in (1, 2):
        (gone,) = d.leave(room.state, racer)
        assert gone == event(EventType.PRESENCE, racer=racer, online=False)
        room.apply([gone])
        assert d.leave(room.state, racer) == []  # its retry: nothing more
    assert [(r.status, r.place) for r in room.state.racers.values()][:2] == [
        ("finished", 1),
        ("resigned", None),
    ]
    room.apply(d.leave(room.state, 3))  # one still racing: a forfeit, as before
    (over,) = room.tick()
    room.apply([over])
    assert [(s["name"], s["place"], s["status"]) for s in over.d["standings"]] == [
        ("Ann", 1, "finished"),
        ("Bob", 2, "resigned"),
        ("Cy", 3, "left"),
    ]


def test_a_done_racers_leave_from_a_connection_it_replaced_leaves_it_online() -> None:
    """A finished racer resumed in a second window, then closed the first: the leave
    wrote "offline" about no connection, and the racer was offline while connected
    (and dropped from the rematch): a review. Presence is per connection."""
    room = _racing(2)
    _progress(room, 1, 52, "finished")
    room.apply([event(EventType.PRESENCE, racer=1, online=True).but(conn="second")])
    assert d.leave(room.state, 1, conn="first") == []  # about a replaced connection
    assert room.state.racers[1].online
    (gone,) = d.leave(room.state, 1, conn="second")
    assert gone.t == EventType.PRESENCE and gone.d["online"] is False


def test_everyone_leaving_abandons_the_race() -> None:
    room = _racing(2)
    room.apply(d.leave(room.state, 1))
    room.apply(d.leave(room.state, 2))
    (over,) = room.tick()
    assert over.d["reason"] == "abandoned"


def test_events_must_arrive_in_order() -> None:
    room = _lobby(1)
    with pytest.raises(ValueError):
        room.state.apply(5, event(EventType.READY_CHANGED, racer=1, ready=True))


def test_round_seeds_commit_and_verify_and_differ_per_round() -> None:
    secret = b"s" * 32
    assert round_seed(secret, 1) != round_seed(secret, 2)
    assert round_salt(secret, 1) != round_salt(secret, 2)
    assert verify(round_commitment(secret, 1), round_seed(secret, 1), round_salt(secret, 1))
    assert not verify(round_commitment(secret, 1), round_seed(secret, 2), round_salt(secret, 1))


def test_racer_game_refusals_carry_codes() -> None:
    game = RacerGame("yukon", 7, {})
    with pytest.raises(RaceError) as notation:
        game.apply("zz", 0)
    assert notation.value.code == "bad_notation"
    with pytest.raises(RaceError) as illegal:
        game.apply("1:5>2", 0)
    assert illegal.value.code == "illegal_move"
    assert game.seq == 0


@pytest.mark.parametrize(("variant", "columns"), [("yukon", 7), ("double_yukon", 10)])
def test_a_column_beyond_every_variants_is_said_in_the_games_own_range(
    variant: str, columns: int
) -> None:
    """'99>F' in Yukon said 'column 99 is not between 1 and 10': the notation's limit,
    which no Yukon board has (solrace-rules said it right, the server did not)."""
    game = RacerGame(variant, 7, {})
    with pytest.raises(RaceError) as notation:
        game.apply("99>F", 0)
    assert notation.value.code == "bad_notation"
    assert str(notation.value).endswith(
        f"'99>F': column 99 is not between 1 and {columns} ({variant} has {columns} columns)"
    ), str(notation.value)


def test_a_winnable_room_counts_down_only_on_a_certified_deal() -> None:
    room = Room()
    for name in ("Ann", "Bob"):
        room.apply(d.join(room.state, name))
    room.apply(d.ready(room.state, 2, True))
    with pytest.raises(RaceError, match="certified"):
        d.start(room.state, 1, room.now, COMMIT)
    room.apply(d.ready(room.state, 1, True))
    assert room.tick() == []  # everyone ready, but no deal yet
    room.apply(d.deal_chosen(room.state, 1, CERTIFIED))
    assert room.state.deal == CERTIFIED
    assert d.deal_chosen(room.state, 1, CERTIFIED) == []  # once per round
    (countdown,) = room.tick()
    assert countdown.t == "countdown"


def test_a_lobby_everyone_left_gets_no_deal() -> None:
    """Its keys expire: a deal certified meanwhile is not written to it."""
    room = Room()
    room.apply(d.join(room.state, "Ann"))
    room.apply(d.leave(room.state, 1))
    assert not room.state.racers
    assert d.deal_chosen(room.state, 1, CERTIFIED) == []


def test_a_random_room_never_waits_for_a_deal() -> None:
    room = Room(deals="random")
    for name in ("Ann", "Bob"):
        room.apply(d.join(room.state, name))
    room.apply(d.ready(room.state, 2, True))
    assert d.start(room.state, 1, room.now, COMMIT)[0].t == "countdown"


def test_face_down_counts_are_the_dealt_ones_from_started_on() -> None:
    room = _racing()
    assert [r.face_down for r in room.state.racers.values()] == [21, 21]
    room.apply(d.resign(room.state, 2))
    assert room.state.racers[2].info()["face_down"] == 21


def test_a_stuck_racer_races_on_only_if_it_may_undo() -> None:
    for undo, racing in ((True, True), (False, False)):
        room = _racing()
        room.state.settings = RoomSettings(options={"undo": undo})
        _progress(room, 1, 3, "stuck")
        assert room.state.can_move(room.state.racers[1]) is racing
        room.apply(d.resign(room.state, 2))
        assert (room.tick() == []) is racing  # otherwise nobody can move: race over


def test_an_old_connections_offline_never_overrides_a_resume() -> None:
    room = _racing()
    room.state.apply(
        room.state.version + 1,
        event(EventType.PRESENCE, racer=1, online=True).but(conn="new", node="b"),
    )
    assert d.presence(room.state, 1, False, "old") == []
    room.state.apply(
        room.state.version + 1,
        event(EventType.PRESENCE, racer=1, online=False).but(conn="old"),
    )
    assert room.state.racers[1].online  # a stale offline folds to nothing
    assert d.presence(room.state, 1, False, "new") == [
        event(EventType.PRESENCE, racer=1, online=False)
    ]


def _resume(room: Room, racer: int, conn: str) -> None:
    """``racer`` resumes on connection ``conn`` (stored as a node stores it)."""
    room.apply([ev.but(conn=conn, node="a") for ev in d.resumed(room.state, racer, room.now)])


def test_a_racer_resumes_at_most_a_burst_then_once_every_resume_interval() -> None:
    """Each resume stores a presence online (and its connection's close an offline):
    a racer reconnecting in a loop stored 630 a second. Past RESUME_BURST resumes in a
    row, one sooner than RESUME_INTERVAL_S after the bucket had room is refused
    ``rate_limited``, saying when it may come (never later than the interval, should a
    node's clock be behind the one that stored the last online); the bucket refills
    with time, a join does not count, nor does a round before a rematch. Folded from
    the stored events, it is the same on every node, from any reset."""
    room = _racing()
    for n in range(RESUME_BURST):
        _resume(room, 1, f"c{n}")
        _presence(room, 1, False, f"c{n}")
    member = room.state.racers[1]
    assert (member.online_at_ms, member.resumes_left_ms) == (room.now, 0)
    for later_ms, wait_ms in ((0, RESUME_INTERVAL_MS), (1_500, RESUME_INTERVAL_MS - 1_500)):
        with pytest.raises(RaceError) as refused:
            d.resumed(room.state, 1, room.now + later_ms)
        assert (refused.value.code, refused.value.retry_after_ms) == ("rate_limited", wait_ms)
    behind = d.resume_too_soon(member, room.now - 5_000)
    assert behind is not None and behind.retry_after_ms == RESUME_INTERVAL_MS
    assert d.resumed(room.state, 2, room.now)  # another racer's bucket is its own
    room.now += RESUME_INTERVAL_MS
    _resume(room, 1, "due")  # one interval later: one more
    with pytest.raises(RaceError):
        d.resumed(room.state, 1, room.now + 1)
    room.now += 3 * RESUME_INTERVAL_MS  # three intervals: three more, no more
    for n in range(3):
        _resume(room, 1, f"later{n}")
    with pytest.raises(RaceError):
        d.resumed(room.state, 1, room.now)
    room.apply(d.resign(room.state, 1))
    room.apply(d.resign(room.state, 2))
    room.apply(room.tick())
    (reset,) = d.rematch(room.state, 2)
    room.apply([reset])
    assert d.resumed(room.state, 1, room.now)  # a new round begins full
    assert room.folded_from(room.state.version) == room.state


def test_a_rematch_keeps_each_racers_connection_and_node() -> None:
    """The room_reset kept each racer's online flag but dropped its connection and
    node: a late offline about an old connection then took a racer who had resumed
    for gone, and a racer whose node died was never marked offline by the lease check
    (it needs the node), so the new round waited for a ghost."""
    room = _racing()
    for racer, conn, node in ((1, "new", "b"), (2, "bob", "a")):
        room.state.apply(
            room.state.version + 1,
            event(EventType.PRESENCE, racer=racer, online=True).but(conn=conn, node=node),
        )
    room.apply(d.resign(room.state, 1))
    room.apply(d.resign(room.state, 2))
    room.apply(room.tick())
    assert room.state.phase == "finished"
    room.apply(d.rematch(room.state, 1))
    assert room.state.phase == "lobby"
    ann, bob = room.state.racers[1], room.state.racers[2]
    assert (ann.online, ann.conn, ann.node) == (True, "new", "b")
    assert (bob.online, bob.conn, bob.node) == (True, "bob", "a")
    assert d.presence(room.state, 1, False, "old") == []


def test_grace_counts_from_the_last_time_the_store_came_back() -> None:
    room = _racing()
    room.apply(d.presence(room.state, 2, False))
    offline = room.now
    room.now += d.DISCONNECT_GRACE_MS + 1
    floor = offline + 60_000  # the node (re)gained its store a minute later
    events = d.tick(room.state, room.now, lambda: COMMIT, room._result, grace_floor_ms=floor)
    assert events == []
    assert d.next_wakeup(room.state, floor) == floor + d.DISCONNECT_GRACE_MS


def test_open_spectating_needs_an_offer_and_every_racers_consent() -> None:
    for agree_bob, expected in ((True, True), (False, False)):
        room = _lobby(spectators="open", private=True)
        room.apply(d.ready(room.state, 1, True, open_boards=True))
        room.apply(d.ready(room.state, 2, True, open_boards=agree_bob))
        (countdown,) = room.tick()
        room.apply([countdown])
        assert room.state.open_boards is expected
    with pytest.raises(RaceError, match="does not offer"):
        d.ready(_lobby().state, 1, True, open_boards=True)


def test_a_stuck_racer_counts_as_playing_only_with_undo() -> None:
    state = RoomState("r", "C", RoomSettings(options={"undo": True}))
    state.racers[1] = RacerState(1, "Ann", status="stuck")
    assert state.playing()
    state = RoomState("r", "C", RoomSettings(options={"undo": False}))
    state.racers[1] = RacerState(1, "Ann", status="stuck")
    assert not state.playing()


def _seat(room: Room, name: str, origin: str | None, seats: int = 1) -> RoomEvent:
    """Join ``name`` from ``origin`` as a node does: the origin stored with the event."""
    (joined,) = d.join(room.state, name, origin, seats)
    room.apply([joined.but(origin=origin)])
    return joined


def test_a_public_room_seats_one_address_once() -> None:
    """Every racer gets the same deal: a second seat of one address is a scout that
    turns cards up for the first (docs/fairness.md)."""
    room = Room()
    _seat(room, "Ann", "aa")
    with pytest.raises(RaceError) as refused:
        d.join(room.state, "Scout", "aa", 1)
    assert refused.value.code == "same_address"
    assert refused.value.message.startswith("a racer from your address already has a seat")
    _seat(room, "Bob", "bb")  # another address
    _seat(room, "Cy", None)  # a connection counted by no address (a trusted peer's own)
    _seat(room, "Di", None)
    assert [r.origin for r in room.state.racers.values()] == ["aa", "bb", None, None]


def test_a_private_room_or_no_cap_seats_an_address_any_number_of_times() -> None:
    private = Room(private=True)
    _seat(private, "Ann", "aa")
    _seat(private, "Bob", "aa")  # friends behind one router, by the room's code
    uncapped = Room()
    _seat(uncapped, "Ann", "aa", seats=0)
    _seat(uncapped, "Bob", "aa", seats=0)
    two = Room()
    _seat(two, "Ann", "aa", seats=2)
    _seat(two, "Bob", "aa", seats=2)
    with pytest.raises(RaceError, match="already has a seat"):
        d.join(two.state, "Cy", "aa", 2)


def test_a_seat_given_up_in_the_lobby_frees_its_address_and_a_rematch_keeps_it() -> None:
    room = Room()
    _seat(room, "Ann", "aa")
    _seat(room, "Bob", "bb")
    room.apply(d.leave(room.state, 1))
    _seat(room, "Ann again", "aa")  # the address holds no seat any more
    for racer in list(room.state.racers):
        room.apply(d.ready(room.state, racer, True))
    room.apply(d.deal_chosen(room.state, 1, CERTIFIED))
    room.apply(d.start(room.state, 2, room.now, COMMIT))
    room.now += d.COUNTDOWN_MS
    room.apply(room.tick())
    for racer in list(room.state.racers):
        room.apply(d.resign(room.state, racer))
    room.apply(room.tick())
    room.apply(d.rematch(room.state, 2))
    assert room.state.phase == "lobby"
    with pytest.raises(RaceError, match="already has a seat"):
        d.join(room.state, "Scout", "aa", 1)  # the new round's lobby still seats it


def test_a_name_a_racer_of_the_room_goes_by_is_made_distinct() -> None:
    """Two racers of one name (the client's default, or a stranger taking the
    leader's) could not be told apart in the standings or by spectators (an audit:
    Ann, Ann, BotB, BotB in one room)."""
    room = Room(max_racers=8)
    for name in ("Ann", "ann", "ＡＮＮ", "Bob", "Ann (2)"):
        room.apply(d.join(room.state, name))
    names = [r.name for r in room.state.racers.values()]
    assert names == ["Ann", "ann (2)", "ＡＮＮ (3)", "Bob", "Ann (2) (2)"]
    long = "x" * 24
    room.apply(d.join(room.state, long))
    room.apply(d.join(room.state, long))
    assert [r.name for r in room.state.racers.values()][-2:] == [long, "x" * 20 + " (2)"]
    room.apply(d.leave(room.state, 1))
    room.apply(d.join(room.state, "Ann"))  # the name is free again
    assert room.state.racers[max(room.state.racers)].name == "Ann"


@pytest.mark.parametrize(
    "spoof",
    [
        "A\u200dnn",  # a zero-width joiner (allowed in names for emoji) between letters
        "Ann\u200d",
        "A\u034fnn",  # the combining grapheme joiner: a mark that draws nothing
        "Ann\ufe0f",  # a variation selector after a letter
        "Ann\U000e0100",
        "A\u180bnn",
        "Ann \u3164",  # a Hangul filler: a letter that draws nothing (NFKC: U+1160)
        "Ann\uffa0",
        "Ann \u2800",  # the braille blank
    ],
)
def test_a_name_that_differs_only_by_characters_that_draw_nothing_is_made_distinct(
    spoof: str,
) -> None:
    """A security audit: a stranger joined as ``Ann`` with a zero-width joiner (or a
    variation selector, a Hangul filler …) in it — a name the protocol takes, shown
    exactly as the leader's ``Ann`` in every list, standings and spectator's board —
    and kept it, as the names differed by those characters alone."""
    assert display_name(spoof) == spoof  # a name the server takes
    room = Room(max_racers=8)
    room.apply(d.join(room.state, "Ann"))
    room.apply(d.join(room.state, spoof))
    assert room.state.racers[2].name == spoof + " (2)"
    assert d.name_key(spoof) == d.name_key("Ann")
