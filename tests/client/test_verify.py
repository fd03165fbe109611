"""``solrace verify``: a real finished race verifies; tampering with its move logs,
seed, salt, commitment or standings is caught; and the command's exit status says so."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from solrace.protocol import commitment
from solrace.protocol.limits import MAX_LOG_LEN, MAX_ROOM_ID_LEN, MAX_TIME_LIMIT_S
from solrace_client.cli import main
from solrace_client.results import SavedResult, finished_race, load_result, race_id, write_result
from solrace_client.verify import Acknowledged, Verdict, race_verdict, verify_result

from tests.net.conftest import Cluster

from .conftest import SALT, SEED, YUKON, _standing, bot_race, synthetic_result


def _tamper_log(data: dict[str, Any]) -> str:
    """A move taken out of the winner's log: later moves become illegal, or the
    counts stop adding up (either way that racer fails)."""
    standing = data["result"]["standings"][0]
    del standing["log"][3]
    return f"racer {standing['racer']} ("


def _tamper_log_entry(data: dict[str, Any]) -> str:
    data["result"]["standings"][1]["log"][0] = "1:1>2"
    return "log"


def _tamper_seed(data: dict[str, Any]) -> str:
    data["result"]["seed"] += 1
    return "commitment"


def _tamper_salt(data: dict[str, Any]) -> str:
    salt = data["result"]["salt"]
    data["result"]["salt"] = ("0" if salt[0] != "0" else "1") + salt[1:]
    return "commitment"


def _tamper_commitment(data: dict[str, Any]) -> str:
    value = data["result"]["commitment"]
    data["result"]["commitment"] = value[::-1]
    return "commitment"


def _tamper_published(data: dict[str, Any]) -> str:
    data["published_commitment"] = "0" * 64
    return "published commitment"


def _tamper_foundation(data: dict[str, Any]) -> str:
    data["result"]["standings"][1]["foundation"] += 1
    return "standing"


def _tamper_status(data: dict[str, Any]) -> str:
    data["result"]["standings"][0]["status"] = "resigned"
    return "standing"


def _tamper_order(data: dict[str, Any]) -> str:
    standings = data["result"]["standings"]
    standings[0]["place"], standings[1]["place"] = 2, 1
    standings.reverse()
    return "standings order"


def _tamper_late_finish(data: dict[str, Any]) -> str:
    """The winner's finish moved to the room's time limit: no move at or after it
    counts (verify took a finish at the limit itself: a timing audit)."""
    data["result"]["standings"][0]["elapsed_ms"] = data["settings"]["time_limit_s"] * 1000
    return "standings order"


def _tamper_finish_time(data: dict[str, Any]) -> str:
    """The winner's finish put a second earlier than its last move: a place won on a
    time its log does not bear out."""
    data["result"]["standings"][0]["elapsed_ms"] -= 1_000
    return "standing"


def _tamper_move_time(data: dict[str, Any]) -> str:
    """The loser's cards-up time put before the move that reached that count."""
    standing = data["result"]["standings"][1]
    standing["reached_ms"] = (standing["reached_ms"] or 1) - 1
    return "standing"


def _tamper_time_order(data: dict[str, Any]) -> str:
    times = data["result"]["standings"][1]["times"]
    times[0], times[1] = times[1], times[0]
    return "standing"


def _tamper_certificate(data: dict[str, Any]) -> str:
    """The certified line cut short: it no longer wins, and no longer hashes to what
    the countdown committed to."""
    data["result"]["certificate"] = data["result"]["certificate"][:-5]
    return "certificate"


def _tamper_times_taken_out(data: dict[str, Any]) -> str:
    """An audit: the loser's times taken out of its log and a faster finish claimed —
    verify checked no times for a standing without them, even beside others with
    theirs, and said OK."""
    ann, bob = data["result"]["standings"]
    ann_won_at = ann["elapsed_ms"]
    del bob["times"]
    bob["status"], bob["log"] = ann["status"], list(ann["log"])
    bob.update({k: ann[k] for k in ("foundation", "moves", "score")})
    bob["elapsed_ms"] = bob["reached_ms"] = ann_won_at - 100
    ann["place"], bob["place"] = 2, 1
    data["result"]["standings"] = [bob, ann]
    return "racer 2 (Bob): standing"


def _tamper_moves_after_the_time_limit(data: dict[str, Any]) -> str:
    """An audit: a racer's moves stored after the time limit (which no server takes)
    still counted for its cards up, and verify said OK."""
    bob = data["result"]["standings"][1]
    late = data["settings"]["time_limit_s"] * 1000
    bob["times"] = [t + late for t in bob["times"]]
    if bob["reached_ms"] is not None:
        bob["reached_ms"] += late
    return "racer 2 (Bob): standing"


def _tamper_move_at_the_time_limit(data: dict[str, Any]) -> str:
    """A timing audit: a racer's last move put at the time limit itself, which the
    server refuses ("at or after" it, docs/rules.md), and verify said OK."""
    bob = data["result"]["standings"][1]
    last, limit = bob["times"][-1], data["settings"]["time_limit_s"] * 1000
    bob["times"][-1] = limit
    if bob["reached_ms"] == last:
        bob["reached_ms"] = limit
    return "racer 2 (Bob): standing"


def _tamper_racer_twice(data: dict[str, Any]) -> str:
    """An audit: a racer listed twice (its standing copied) verified OK."""
    standings = data["result"]["standings"]
    standings.append({**copy.deepcopy(standings[1]), "place": 3})
    return "standings order"


def _tamper_name_twice(data: dict[str, Any]) -> str:
    """A verify audit: two racers of one name (the server gives each racer of a room a
    name of its own, compared case-folded: race.decisions.distinct_name) verified OK,
    the report's lines of the two told apart by their ids alone."""
    data["result"]["standings"][1]["name"] = "ANN"
    return "standings order"


def _tamper_tie_out_of_join_order(data: dict[str, Any]) -> str:
    """A timing audit: racers tied on cards up and on the time they reached it are
    ranked in join order (docs/protocol.md, Standing); two swapped verified OK. Here a
    third racer who played exactly as Bob is placed ahead of him, though he joined
    first."""
    standings = data["result"]["standings"]
    bob = standings[1]
    cy = {**copy.deepcopy(bob), "racer": bob["racer"] + 1, "name": "Cy", "place": 2}
    bob["place"] = 3
    standings[1:] = [cy, bob]
    return "standings order"


def _tamper_unknown_status(data: dict[str, Any]) -> str:
    data["result"]["standings"][1]["status"] = "winner!"
    return "racer 2 (Bob): standing"


def _tamper_race_id(data: dict[str, Any]) -> str:
    """A verify audit: a race a cheater won, sent as another race (the one they lost):
    verify printed "verifying race <the other>" and OK, the id bound to nothing."""
    data["race"] = "r_000000000000.deadbeef"
    return "race id"


def _tamper_room(data: dict[str, Any]) -> str:
    data["room"] = "r_000000000000"
    return "race id"


def _tamper_room_cut(data: dict[str, Any]) -> str:
    """A verify audit: a room id longer than any (MAX_ROOM_ID_LEN) names the race its
    first 64 characters do (the client cuts a hostile server's room there), so a file
    of another room of that prefix verified OK as this race."""
    room = data["room"] + "x" * (MAX_ROOM_ID_LEN - len(data["room"]))
    data["race"] = race_id(room, data["result"])
    data["room"] = room + "-another-room"
    return "race id"


def _tamper_room_unsafe(data: dict[str, Any]) -> str:
    """A verify audit: a room no server names (``r/synthetic``) made the race id of
    ``r_synthetic`` (the client replaces what cannot be in a file name), and verified
    OK as that room's race."""
    data["room"] = data["room"].replace("_", "/")
    return "race id"


def _tamper_end_reason(data: dict[str, Any]) -> str:
    """A verify audit: a race every racer finished or resigned, said to have ended at
    its time limit (or "abandoned", or any word, or none) verified OK. The server's
    reason follows from the final statuses (docs/protocol.md, RaceResult)."""
    data["result"]["reason"] = "time_limit"
    return "end reason"


def _tamper_no_end_reason(data: dict[str, Any]) -> str:
    del data["result"]["reason"]
    return "end reason"


def _tamper_still_playing(data: dict[str, Any]) -> str:
    """A verify audit: a racer still "playing" (or "waiting") in a race that is over
    verified OK; the server ends a race with nobody playing (timeout at the limit)."""
    data["result"]["standings"][1]["status"] = "playing"
    return "racer 2 (Bob): standing"


def _tamper_finish_time_of_a_loser(data: dict[str, Any]) -> str:
    """A verify audit: a finish time given to a racer who resigned verified OK (the
    standings then show a time for a racer who never finished)."""
    data["result"]["standings"][1]["elapsed_ms"] = 1_234
    return "racer 2 (Bob): standing"


def _tamper_more_racers_than_seats(data: dict[str, Any]) -> str:
    """A verify audit: a third racer added to a room of two (a copy of one, with an id
    of its own, ranked after it as join order ranks a tie) verified OK."""
    data["settings"]["max_racers"] = 2
    standings = data["result"]["standings"]
    last = standings[-1]
    standings.append({**copy.deepcopy(last), "racer": last["racer"] + 1, "place": 3})
    return "standings order"


TAMPERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "more racers than seats": _tamper_more_racers_than_seats,
    "finish time of a racer who did not finish": _tamper_finish_time_of_a_loser,
    "end reason": _tamper_end_reason,
    "no end reason": _tamper_no_end_reason,
    "still playing": _tamper_still_playing,
    "race id": _tamper_race_id,
    "room": _tamper_room,
    "room cut to the race's": _tamper_room_cut,
    "room no server names": _tamper_room_unsafe,
    "times taken out": _tamper_times_taken_out,
    "moves after the time limit": _tamper_moves_after_the_time_limit,
    "move at the time limit": _tamper_move_at_the_time_limit,
    "racer twice": _tamper_racer_twice,
    "name twice": _tamper_name_twice,
    "tie out of join order": _tamper_tie_out_of_join_order,
    "unknown status": _tamper_unknown_status,
    "log entry removed": _tamper_log,
    "log entry": _tamper_log_entry,
    "seed": _tamper_seed,
    "salt": _tamper_salt,
    "commitment": _tamper_commitment,
    "published commitment": _tamper_published,
    "foundation count": _tamper_foundation,
    "status": _tamper_status,
    "standings order": _tamper_order,
    "finish after the time limit": _tamper_late_finish,
    "finish time": _tamper_finish_time,
    "cards-up time": _tamper_move_time,
    "times out of order": _tamper_time_order,
}


def _tampered(path: Path, tamper: Callable[[dict[str, Any]], str]) -> tuple[Path, str]:
    data = json.loads(path.read_text())
    data = copy.deepcopy(data)
    data.setdefault("published_commitment", data["result"]["commitment"])
    what = tamper(data)
    out = path.with_name("tampered.json")
    out.write_text(json.dumps(data))
    return out, what


async def test_a_real_race_verifies_and_every_tampering_fails(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    server = await cluster.node()
    result, joined = await bot_race(server.url, max_moves=300)
    rid = race_id(joined["room"], result)
    assert main(["verify", rid]) == 0
    out = capsys.readouterr().out
    assert "OK: the deal was committed in advance" in out and "FAIL" not in out
    # A quick room deals a certified winnable deal: verify replays the certificate.
    assert result["certificate"], "a quick room's deal is certified by default"
    assert "the certified line wins the deal" in out
    # Every move's time is in the result, so the standings' times were checked too.
    assert all(len(s["times"]) == len(s["log"]) > 0 for s in result["standings"])
    saved = load_result(rid)
    assert saved.path is not None
    # What the bots saw themselves, saved with the race (both saved this one file:
    # the first bot's acknowledged moves, each at its place in its revealed log).
    assert saved.countdown_settings == saved.settings
    assert "OK settings: " in " ".join(out.split()) and "SKIP" not in out
    own = saved.acknowledged
    assert own is not None and own.moves
    log = next(s["log"] for s in result["standings"] if s["racer"] == own.racer)
    assert all(log[seq] == move for seq, move in own.moves.items())
    for name in ("log entry removed", "seed", "commitment", "cards-up time"):
        path, what = _tampered(saved.path, TAMPERS[name])
        assert main(["verify", str(path)]) == 1, name
        out = capsys.readouterr().out
        assert "FAIL" in out and what in out, (name, out)
    path, _ = _tampered(saved.path, _tamper_certificate)
    assert main(["verify", str(path)]) == 1
    capsys.readouterr()
    failed = {c.what for c in verify_result(load_result(path)).failures}
    # The lobby announced no length (docs/fairness.md): the commitment binds the line.
    assert failed == {"certificate", "commitment"}, failed


def test_a_result_saved_before_logs_had_times_still_verifies(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It verifies as far as it can be checked: an audit took every log's times out
    and swapped the racers' finish times and places, and verify said a plain OK."""
    data = json.loads(synthetic_race.read_text())
    for standing in data["result"]["standings"]:
        del standing["times"]
    synthetic_race.write_text(json.dumps(data))
    report = verify_result(load_result(synthetic_race))
    assert report.ok
    assert any(s.startswith("move times: ") for s in report.skipped), report.skipped
    assert main(["verify", str(synthetic_race)]) == 0
    out = capsys.readouterr().out
    assert "SKIP  move times" in out and "OK as far as checked" in out


def test_a_finisher_with_no_finish_time_fails(synthetic_race: Path) -> None:
    """With no times to check, a finisher with no finish time was ranked as if it had
    finished at 0 ms."""
    data = json.loads(synthetic_race.read_text())
    for standing in data["result"]["standings"]:
        del standing["times"]
    data["result"]["standings"][0]["elapsed_ms"] = None
    synthetic_race.write_text(json.dumps(data))
    failed = verify_result(load_result(synthetic_race)).failures
    assert [c.what for c in failed] == ["racer 1 (Ann): standing"], failed
    assert "no finish time" in failed[0].detail


@pytest.mark.parametrize("name", list(TAMPERS))
def test_tampering_is_caught(synthetic_race: Path, name: str) -> None:
    assert verify_result(load_result(synthetic_race)).ok
    path, what = _tampered(synthetic_race, TAMPERS[name])
    report = verify_result(load_result(path))
    assert not report.ok
    failed = [c.what for c in report.failures]
    assert any(what in c for c in failed), (name, failed)


def test_the_report_names_the_first_illegal_entry(synthetic_race: Path) -> None:
    path, _ = _tampered(synthetic_race, _tamper_log_entry)
    report = verify_result(load_result(path))
    (bad,) = [c for c in report.failures if c.what.endswith(": log")]
    assert "racer 2 (Bob)" in bad.what and "entry 1 of" in bad.detail and "1:1>2" in bad.detail


def test_a_seed_that_is_not_a_number_fails_cleanly(synthetic_race: Path) -> None:
    """A file with such a seed is refused where it is loaded (tests/client/test_cli.py);
    a SavedResult built in code with one fails verification, without a traceback."""
    saved = load_result(synthetic_race)
    with pytest.raises(ValueError, match=r'result\.seed is "x", not a whole number'):
        SavedResult.from_json({**saved.to_json(), "result": {**saved.result, "seed": "x"}})
    broken = SavedResult(saved.race, saved.room, saved.settings, {**saved.result, "seed": "x"})
    report = verify_result(broken)
    assert not report.ok and {c.what for c in report.failures} >= {"commitment", "deal"}


def test_verify_of_an_unknown_race_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "r_nothing.deadbeef"]) == 2
    assert "no saved race" in capsys.readouterr().err


def test_a_finish_after_the_time_limit_is_named(synthetic_race: Path) -> None:
    path, _ = _tampered(synthetic_race, _tamper_late_finish)
    (order,) = [c for c in verify_result(load_result(path)).failures if c.what == "standings order"]
    assert "finished at or after the" in order.detail and "time limit" in order.detail, order.detail


def test_a_commitment_that_cannot_be_computed_says_why(synthetic_race: Path) -> None:
    """A seed out of range (a whole number, so the file loads) failed the commitment
    line as "= (cannot compute:… but the race committed to …": the reason was cut to
    16 characters, like a hash."""
    saved = load_result(synthetic_race)
    broken = SavedResult(saved.race, saved.room, saved.settings, {**saved.result, "seed": -5})
    (line,) = [c for c in verify_result(broken).failures if c.what == "commitment"]
    assert "(cannot compute: " in line.detail and "-5" in line.detail, line.detail
    assert "(cannot compute:…" not in line.detail


def test_a_certificate_that_is_not_a_list_fails_cleanly(synthetic_race: Path) -> None:
    """Refused where files are loaded (tests/client/test_cli.py); built in code, it
    fails the certificate and the commitment in words (``true`` raised TypeError)."""
    saved = load_result(synthetic_race)
    broken = SavedResult(
        saved.race, saved.room, saved.settings, {**saved.result, "certificate": True}
    )
    failures = {c.what: c.detail for c in verify_result(broken).failures}
    assert "is not a list of moves" in failures["certificate"], failures
    assert "commitment" in failures


def test_the_race_over_verdict_is_the_whole_of_verify(synthetic_race: Path) -> None:
    """The race-over screen's ✔ checked the commitment alone: a hostile server's
    standings with a racer "finished" at 0/52 in first place got a green ✔ (only
    ``solrace verify`` failed them). The verdict the screen and the bot show is every
    check verify makes, in one line."""
    saved = load_result(synthetic_race)
    result = saved.result
    revealed = str(result["commitment"])

    # as the lobby announced it (a deal not certified: the result reveals no line)
    deal = {"certified": False, "moves": None, "difficulty": None}

    def verdict(published: str | None = revealed, **changes: Any) -> Verdict:
        return race_verdict(
            dataclasses.replace(
                saved,
                published_commitment=published,
                deal=deal,
                countdown_settings=saved.settings,
                result={**result, **changes},
            ),
            Acknowledged(2, dict(enumerate(result["standings"][1]["log"]))),
        )

    ok = verdict()
    assert ok.ok and ok.line.startswith("✔ verified: "), ok
    # a spectator who came later did not see the countdown: said, not failed
    late = verdict(None)
    assert late.ok and late.line.startswith("✔") and "published commitment" in late.line
    # the commitment published at the countdown is not the one revealed
    other = verdict("0" * 64)
    assert not other.ok and other.line.startswith("✘ NOT VERIFIED — published commitment")
    # a server that picked another seed after the fact and committed to it at the end
    seed = int(result["seed"]) + 1
    forged = commitment(seed, str(result["salt"]), result.get("certificate"))
    assert not verdict(seed=seed, commitment=forged).ok
    assert verdict(seed=seed).line.startswith("✘ NOT VERIFIED — commitment: ")
    # the commitment is right, the standings are not: Bob, who resigned 10 moves in, is
    # declared the winner
    ann, bob = copy.deepcopy(result["standings"])
    bob.update(place=1, status="finished", elapsed_ms=bob["times"][-1])
    ann.update(place=2)
    wrong = verdict(standings=[bob, ann])
    assert not wrong.ok and wrong.line.startswith("✘ NOT VERIFIED — racer 2 (Bob): standing")
    assert "status 'finished' but the replayed game is not won" in wrong.line
    assert "✔" not in wrong.line
    # what the reason quotes of the server's data reaches no terminal as an escape
    hostile = verdict(commitment="\x1b]0;PWNED\x07" + revealed[9:])
    assert not hostile.ok and "?]0;PWNED?" in hostile.line and "\x1b" not in hostile.line
    # what verify refuses to read is not verified either (and does not raise)
    garbage = verdict(standings=[1, "two", None])
    assert not garbage.ok and "malformed: result.standings[0] is 1" in garbage.line


def test_a_certified_deal_announced_but_no_certificate_revealed_fails(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An audit (a hostile server): the lobby said "winnable deal (certified, 97
    moves)", the commitment bound no certificate and none was revealed; the race-over
    screen said ✔ and verify said OK, the winnable claim never checked. The client now
    keeps the announced deal with the result, and verify holds it to a certificate."""
    deal = {"certified": True, "moves": 97, "difficulty": "easy"}
    result = synthetic_result()
    path = write_result(
        finished_race("r_liar", result, YUKON, "LIAR01", published_commitment=None, deal=deal)
    )
    assert load_result(path).deal == deal
    report = verify_result(load_result(path))
    assert [c.what for c in report.failures] == ["certificate"], report.failures
    assert "announced a certified winnable deal but" in report.failures[0].detail
    assert main(["verify", str(path)]) == 1
    capsys.readouterr()
    # Not certified (no candidate won), or never seen: nothing to hold it to.
    for seen in ({"certified": False, "moves": None, "difficulty": None}, None):
        path = write_result(finished_race("r_honest", result, YUKON, "OK0001", deal=seen))
        assert verify_result(load_result(path)).ok


def test_a_standing_of_one_card_and_one_move_reads_singular(config_dir: Path) -> None:
    """An audit: verify said ``resigned, 1 cards up, 1 moves``."""
    result = synthetic_result()
    ann = result["standings"][0]
    bob = _standing(2, 2, "Bob", ann["log"][:1], "resigned")
    assert (bob["foundation"], bob["moves"]) == (1, 1)
    result["standings"][1] = bob
    path = write_result(finished_race("r_one", result, YUKON, "SYN123", published_commitment=None))
    report = verify_result(load_result(path))
    assert report.ok, report.failures
    said = {c.what: c.detail for c in report.checks}
    assert said["racer 2 (Bob): standing"] == "resigned, 1 card up, 1 move"
    assert said["racer 1 (Ann): standing"].endswith(" cards up, " + f"{ann['moves']} moves")


def test_a_log_of_one_move_reads_singular(config_dir: Path) -> None:
    """A newcomer's audit: a racer who made one move verified as ``log: 1 moves, all
    legal`` beside ``standing: resigned, 1 card up, 1 move``."""
    result = synthetic_result()
    ann = result["standings"][0]
    result["standings"][1] = _standing(2, 2, "Bob", ann["log"][:1], "resigned")
    path = write_result(finished_race("r_one", result, YUKON, "SYN123", published_commitment=None))
    report = verify_result(load_result(path))
    assert report.ok, report.failures
    said = {c.what: c.detail for c in report.checks}
    assert said["racer 2 (Bob): log"] == "1 move, all legal"


def test_a_certificate_other_than_the_lobby_announced_fails(config_dir: Path) -> None:
    """A verify audit (a dishonest server): the lobby announced "winnable deal
    (certified, 20 moves)" — or a random deal, not certified — and the result revealed
    a certificate of another length (or one at all); verify said OK. What the lobby
    announced is held to the certificate revealed."""
    result = synthetic_result()
    line = list(result["standings"][0]["log"])
    result["certificate"] = line
    result["commitment"] = commitment(SEED, SALT, line)
    honest = {"certified": True, "moves": len(line), "difficulty": "easy"}
    cases = {
        "honest": (honest, None),
        # this release's lobby: certified, no length (docs/fairness.md)
        "no_length": ({"certified": True, "moves": None, "difficulty": None}, None),
        "shorter": ({**honest, "moves": 20}, f"20 moves, but the certificate has {len(line)}"),
        "uncertified": (
            {"certified": False, "moves": None, "difficulty": None},
            "announced a deal not certified, but the result reveals a certificate",
        ),
    }
    for room, (deal, says) in cases.items():
        path = write_result(finished_race(f"r_{room}", result, YUKON, "CERT01", deal=deal))
        report = verify_result(load_result(path))
        if says is None:
            assert report.ok, report.failures
            continue
        assert [c.what for c in report.failures] == ["announced deal"], (room, report.failures)
        assert says in report.failures[0].detail, report.failures[0].detail


def test_a_result_without_the_lobbys_deal_says_the_certificate_was_not_held_to_it(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tamper audit: taking ``deal`` out of a file that has the countdown's
    commitment verified a plain OK, where taking the commitment out says SKIP — so a
    sharer could hide that the lobby announced a certified deal the result does not
    reveal (a random deal committed and revealed: every other check passes)."""
    result = synthetic_result()
    revealed = str(result["commitment"])
    # what else a racer's client saw (the settings, the moves acknowledged to it)
    ann = Acknowledged(1, dict(enumerate(result["standings"][0]["log"])))
    path = write_result(
        finished_race(
            "r_nodeal",
            result,
            YUKON,
            published_commitment=revealed,
            countdown_settings=YUKON,
            acknowledged=ann,
        )
    )
    report = verify_result(load_result(path))
    assert report.ok, report.failures
    assert [s.partition(": ")[0] for s in report.skipped] == ["announced deal"], report.skipped
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "SKIP  announced deal" in out and "OK as far as checked" in out, out
    assert race_verdict(load_result(path)).line == (
        "✔ verified, but not checked here: announced deal"
    )
    # with the lobby's word kept, nothing is skipped
    seen = {"certified": False, "moves": None, "difficulty": None}
    path = write_result(
        finished_race(
            "r_dealt",
            result,
            YUKON,
            published_commitment=revealed,
            deal=seen,
            countdown_settings=YUKON,
            acknowledged=ann,
        )
    )
    report = verify_result(load_result(path))
    assert report.ok and not report.skipped, (report.failures, report.skipped)
    # a random room announces no deal (docs/protocol.md, Deal): nothing was skipped
    random_room = {**YUKON, "deals": "random"}
    path = write_result(
        finished_race(
            "r_random",
            result,
            random_room,
            published_commitment=revealed,
            countdown_settings=random_room,
            acknowledged=ann,
        )
    )
    report = verify_result(load_result(path))
    assert report.ok and not report.skipped, (report.failures, report.skipped)


def test_a_status_of_any_length_fails_in_a_short_line(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tamper audit: a status of 100,000 characters was quoted whole three times in
    its standing's line (a 300,000-character FAIL line), and in the race-over verdict."""
    data = json.loads(synthetic_race.read_text())
    data["result"]["standings"][1]["status"] = "x" * 100_000
    synthetic_race.write_text(json.dumps(data))
    assert main(["verify", str(synthetic_race)]) == 1
    out = capsys.readouterr().out.splitlines()
    (line,) = [x for x in out if "racer 2 (Bob)" in x and "FAIL" in x]
    assert "is no racer status" in line and len(line) < 300, len(line)
    verdict = race_verdict(load_result(synthetic_race))
    assert not verdict.ok and len(verdict.line) < 300, len(verdict.line)


def test_the_verdict_holds_a_racers_log_to_the_moves_acknowledged_to_it(
    synthetic_race: Path,
) -> None:
    """What the racer's own client saw acknowledged (``moved``, seq by seq) is in the
    log the result reveals: a log that adds up on its own but drops, replaces or
    leaves out that racer's acknowledged moves is ✘ (tests/client/test_bot_hostile.py
    runs it through ``solrace bot``)."""
    saved = dataclasses.replace(
        load_result(synthetic_race),
        published_commitment=str(synthetic_result()["commitment"]),
        deal={"certified": False, "moves": None, "difficulty": None},
    )
    bob = saved.standings[1]
    played = dict(enumerate(bob["log"]))
    assert race_verdict(saved, Acknowledged(2, played)).ok
    other = {**played, 3: "D"}
    swapped = race_verdict(saved, Acknowledged(2, other))
    assert swapped.line == (
        f"✘ NOT VERIFIED — racer 2 (Bob): acknowledged moves: move 4 'D' was acknowledged, "
        f"but the log revealed has {bob['log'][3]!r} there"
    ), swapped
    longer = race_verdict(saved, Acknowledged(2, {**played, len(played): "D"}))
    assert not longer.ok and f"ends after {len(played)} moves" in longer.line, longer
    absent = race_verdict(saved, Acknowledged(7, played))
    assert not absent.ok and "who is not in the standings" in absent.line, absent


def _with(path: Path, **fields: Any) -> Path:
    """The race file ``path`` with ``fields`` set at its top level, as a new file."""
    data = json.loads(path.read_text())
    data.update(fields)
    out = path.with_name("edited.json")
    out.write_text(json.dumps(data))
    return out


def _last_move_s(data: dict[str, Any]) -> int:
    return max(t for s in data["result"]["standings"] for t in s["times"]) // 1000


def test_settings_edited_after_the_countdown_fail_in_one_line(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/fairness.md, "What it cannot check": the settings are not under the
    commitment, so a file whose time limit was cut to just past the last move — every
    log still within it — verified OK. Held to the settings its racer's client saw in
    the room at the countdown, it fails: one line, status 1."""
    data = json.loads(synthetic_race.read_text())
    seen = _with(synthetic_race, countdown_settings=data["settings"])
    assert main(["verify", str(seen)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "OK settings: the room's settings as seen at the countdown" in said, said
    cut = _last_move_s(data) + 1
    assert cut < data["settings"]["time_limit_s"]
    edited = {**data["settings"], "time_limit_s": cut}
    # Without what the client saw, the cut limit adds up: what the gap was.
    assert main(["verify", str(_with(synthetic_race, settings=edited))]) == 0
    assert "SKIP  settings: " in capsys.readouterr().out
    tampered = _with(synthetic_race, settings=edited, countdown_settings=data["settings"])
    assert main(["verify", str(tampered)]) == 1
    said = " ".join(capsys.readouterr().out.split())
    assert said.count("FAIL ") == 1 and "FAIL: 1 of " in said, said
    assert (
        f"FAIL settings: time_limit_s is {cut}, but the room's at the countdown was "
        f"{data['settings']['time_limit_s']} OK " in said
    ), said
    # an option set and the seats cut: the first named, how many more said
    more = {**data["settings"], "options": {"undo": False}, "max_racers": 2}
    report = verify_result(
        load_result(_with(synthetic_race, settings=more, countdown_settings=data["settings"]))
    )
    first = report.failures[0]  # (Bob's undo fails his log too, under undo: false)
    assert (first.what, first.detail) == (
        "settings",
        "max_racers is 2, but the room's at the countdown was 4 (and 1 other)",
    )


def test_an_old_race_file_verifies_as_before_with_skip_lines(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file saved before the client kept the settings seen and the moves
    acknowledged (or by a spectator, or fetched) verifies as it did: each check it
    cannot make is a SKIP line, and the last line says "as far as checked"."""
    data = json.loads(synthetic_race.read_text())
    assert "countdown_settings" not in data and "acknowledged" not in data
    assert main(["verify", str(synthetic_race)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "SKIP settings: this file does not hold the room's settings as seen at the " in said
    assert "SKIP acknowledged moves: this file does not hold the moves the server " in said
    assert "OK as far as checked" in said and "FAIL" not in said


def test_the_skip_lines_of_an_older_clients_file_read_clearly(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer's reading (an audit): an older racer's client saved the countdown's
    commitment but not its settings nor the moves acknowledged. verify said "OK
    published commitment: the commitment announced at the countdown is the one
    revealed", then "SKIP settings: … (saved by someone who did not see the
    countdown)" — both of one file — and "are the file's word", "is the server's word":
    jargon. Each SKIP line now says what the file lacks, who saves files like it (an
    older client among them), and what goes unchecked, in plain words."""
    data = json.loads(synthetic_race.read_text())
    data["published_commitment"] = data["result"]["commitment"]
    synthetic_race.write_text(json.dumps(data))
    assert main(["verify", str(synthetic_race)]) == 0
    out = capsys.readouterr().out
    assert "OK   published commitment: " in out, out
    skips = [" ".join(line.split()) for line in out.splitlines() if line.startswith(" SKIP ")]
    assert [line.split(":")[0] for line in skips] == [
        "SKIP settings",
        "SKIP announced deal",
        "SKIP acknowledged moves",
    ], skips
    for line in skips:
        assert "this file does not hold " in line and "an older client" in line, line
        assert "did not see the countdown" not in line and "'s word" not in line, line
    assert skips[0].endswith(
        "so its variant, options, time limit and seats are taken as the file gives them"
    )
    assert skips[2].endswith("so every log is taken as the server revealed it"), skips[2]


def test_a_saved_files_log_is_held_to_the_moves_acknowledged_to_its_racer(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The acknowledged moves a racer's client saved with the race are checked by
    ``solrace verify`` later, as the race-over verdict checked them."""
    data = json.loads(synthetic_race.read_text())
    bob = data["result"]["standings"][1]
    acked = {"racer": 2, "moves": [*bob["log"][:3], None, *bob["log"][4:]]}
    held = _with(synthetic_race, acknowledged=acked)
    assert main(["verify", str(held)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    holds = f"OK racer 2 (Bob): acknowledged moves: the log holds the {len(bob['log']) - 1} "
    assert holds in said, said
    other = {"racer": 2, "moves": [*bob["log"][:2], "D"]}
    assert main(["verify", str(_with(synthetic_race, acknowledged=other))]) == 1
    said = " ".join(capsys.readouterr().out.split())
    assert (
        f"FAIL racer 2 (Bob): acknowledged moves: move 3 'D' was acknowledged, but the log "
        f"revealed has {bob['log'][2]!r} there"
    ) in said, said
    assert main(["verify", str(_with(synthetic_race, acknowledged={"racer": 2}))]) == 2
    err = capsys.readouterr().err
    assert 'not a saved race result: acknowledged is {"racer": 2}' in err, err


def test_the_longest_log_a_race_allows_verifies_and_one_entry_more_is_malformed(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server takes no entry past MAX_LOG_LEN: a log that long is a race's (and
    verifies), a longer one no server wrote — refused as the file's fault (status 2),
    as an entry longer than any move is; it verified OK (a verify audit)."""
    data = json.loads(synthetic_race.read_text())
    data["settings"]["time_limit_s"] = MAX_TIME_LIMIT_S  # a move a second, all in time
    first = data["result"]["standings"][0]["log"][0]
    data["result"]["standings"][1] = _standing(
        2, 2, "Bob", [first, "undo"] * (MAX_LOG_LEN // 2), "resigned"
    )
    synthetic_race.write_text(json.dumps(data))
    assert main(["verify", str(synthetic_race)]) == 0
    assert f"OK   racer 2 (Bob): log: {MAX_LOG_LEN} moves, all legal" in capsys.readouterr().out
    data["result"]["standings"][1] = _standing(
        2, 2, "Bob", [first, "undo"] * (MAX_LOG_LEN // 2) + [first], "resigned"
    )
    synthetic_race.write_text(json.dumps(data))
    assert main(["verify", str(synthetic_race)]) == 2
    assert capsys.readouterr().err.endswith(
        f"result.standings[1].log holds {MAX_LOG_LEN + 1:,} entries, more than the "
        f"{MAX_LOG_LEN:,} a race allows\n"
    )
