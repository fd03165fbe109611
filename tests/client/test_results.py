"""Saved races (``solrace_client.results``): where a result is written, whatever the
server that sent it says its room and commitment are, and what a second save of one
race keeps."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from solrace import protocol
from solrace.protocol.fairness import RACE_ID
from solrace.protocol.limits import (
    MAX_LOG_LEN,
    MAX_MOVE_LEN,
    MAX_NAME_LEN,
    MAX_RACE_ID_LEN,
    MAX_RACERS,
    MAX_ROOM_ID_LEN,
    MAX_TIME_LIMIT_S,
)
from solrace_client.results import (
    MAX_RESULT_FILE_BYTES,
    Acknowledged,
    ResultNotFound,
    SavedResult,
    finished_race,
    last_revealed,
    load_result,
    race_id,
    results_dir,
    write_result,
)
from solrace_client.verify import verify_result

from .conftest import YUKON, synthetic_result


def test_a_solrace_servers_race_id_is_kept() -> None:
    result = synthetic_result()
    assert race_id("r_2147d18c011a", result) == f"r_2147d18c011a.{result['commitment'][:8]}"


def test_a_race_id_at_the_protocols_limits_is_kept_and_read_back(config_dir: Path) -> None:
    """The server's own id of a room as long as the protocol allows is the file's
    name and its ``race``, whole, and the file reads back: the client bounds both by
    the protocol's limits, not copies of them that could fall behind."""
    room = "r" * MAX_ROOM_ID_LEN
    result = synthetic_result()
    rid = race_id(room, result)
    assert rid == protocol.race_id(room, result["commitment"])
    assert RACE_ID.fullmatch(rid) and len(rid) == MAX_RACE_ID_LEN
    data = {"room": room, "race": rid, "settings": YUKON, "result": result}
    path = config_dir / "races" / f"{rid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_result(rid).race == rid


def test_a_saved_races_file_name_finds_it_from_anywhere(
    config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer's audit: ``solrace verify r_….json`` — the name ``ls`` shows in the
    races directory — run elsewhere said ``no saved race 'r_….json' in <that
    directory> and no such file``, of a file that is there."""
    result = synthetic_result()
    saved = write_result(finished_race("r_synthetic", result, YUKON, "SYN123"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_result(saved.name).race == saved.stem
    # A file of that name here is that file, whatever the races directory holds.
    (elsewhere / saved.name).write_text("{}")
    with pytest.raises(ValueError, match=f"^{re.escape(saved.name)}: not a saved race result"):
        load_result(saved.name)
    # A name with a directory is a path, never a race id.
    with pytest.raises(ResultNotFound, match="no such file"):
        load_result(f"nowhere/{saved.name}")


@pytest.mark.parametrize(
    ("room", "commitment"),
    [
        ("./../../../evil", None),  # the temporary file and the result two levels up
        ("./.", "/profile"),  # <config>/profile.json replaced
        ("./" + "../" * 30 + "TMP/evil", None),  # anywhere, from the root (TMP: tmp_path)
        ("/TMP/evil", None),
        ("", "../../xx"),
        ("r" * 5000, None),  # too long a name for a file
    ],
)
def test_a_hostile_room_or_commitment_cannot_write_outside_the_results(
    config_dir: Path, tmp_path: Path, room: str, commitment: str | None
) -> None:
    """A hostile server names the room (and the commitment) the race id, and so the
    file, is made of: the result is saved in the results directory all the same."""
    room = room.replace("TMP", str(tmp_path).lstrip("/"))
    deep = config_dir / "a" / "b"
    deep.mkdir(parents=True)
    (config_dir / "profile.json").write_text('{"name": "Ann"}')
    result = synthetic_result()
    if commitment is not None:
        result["commitment"] = commitment
    before = {p for p in tmp_path.rglob("*") if p.is_file()}
    path = write_result(finished_race(room, result, YUKON, "SYN123"))
    after = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert after - before == {path}
    assert path.resolve().parent == results_dir().resolve()
    assert (config_dir / "profile.json").read_text() == '{"name": "Ann"}'
    assert load_result(path.stem).result["seed"] == result["seed"]


#: What the lobby announced of the synthetic race's deal, as a racer's client saves it.
DEAL = {"certified": False, "moves": None, "difficulty": None}


def _racer_saves() -> Path:
    """The racer's save: it saw the countdown's commitment and settings, the lobby's
    deal, and its own moves acknowledged (Ann's)."""
    result = synthetic_result()
    return write_result(
        finished_race(
            "r_synthetic",
            result,
            YUKON,
            "SYN123",
            published_commitment=result["commitment"],
            deal=DEAL,
            countdown_settings=YUKON,
            acknowledged=Acknowledged(1, dict(enumerate(result["standings"][0]["log"]))),
        )
    )


def test_a_spectators_later_save_keeps_the_racers_countdown_commitment_and_deal() -> None:
    """Watching the finished room saved the race again without the countdown's
    commitment (the spectator came after it): the racer's file lost it, and ``verify``
    then skipped the check that holds the reveal to the countdown (an audit)."""
    path = _racer_saves()
    first = load_result(path.stem)
    write_result(finished_race("r_synthetic", synthetic_result(), YUKON, "SYN123"))
    kept = load_result(path.stem)
    assert kept.published_commitment == synthetic_result()["commitment"]
    assert kept.deal == DEAL
    assert kept.saved_at_ms == first.saved_at_ms
    report = verify_result(kept)
    assert report.ok
    assert not report.skipped


def test_a_fetched_copy_saved_over_a_file_keeps_its_code() -> None:
    """``fetch``'s archived copy has no room code (the server never sends it)."""
    path = _racer_saves()
    write_result(finished_race("r_synthetic", synthetic_result(), YUKON))
    assert load_result(path.stem).code == "SYN123"


def test_a_racers_save_after_a_spectators_adds_what_the_spectator_lacked() -> None:
    """The other order (a window watching the room saves first): the file gains the
    racer's commitment and deal."""
    path = write_result(finished_race("r_synthetic", synthetic_result(), YUKON, "SYN123"))
    _racer_saves()
    kept = load_result(path.stem)
    assert kept.published_commitment == synthetic_result()["commitment"]
    assert kept.deal == DEAL


def test_a_file_saved_before_servers_were_kept_reads_and_gains_one() -> None:
    """A race saved by an older client has no ``server``: it is read all the same, and
    the next save of the same race adds the server (``fetch`` asks it by default)."""
    path = _racer_saves()
    data = json.loads(path.read_text())
    assert "server" not in data  # saved with none
    assert load_result(path.stem).server is None
    write_result(finished_race("r_synthetic", synthetic_result(), YUKON, server="ws://h:1"))
    assert load_result(path.stem).server == "ws://h:1"
    assert json.loads(path.read_text())["server"] == "ws://h:1"
    write_result(finished_race("r_synthetic", synthetic_result(), YUKON, server="ws://h:2"))
    assert load_result(path.stem).server == "ws://h:1"  # a save never takes it away
    data["server"] = 5
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="not a saved race result: server is 5, not a server"):
        load_result(path.stem)


def test_another_story_of_the_race_does_not_replace_the_file_that_saw_the_countdown() -> None:
    """A result that differs (a server that told the spectator otherwise) is not mixed
    with the racer's file, nor does it replace it: the file that saw more stays."""
    path = _racer_saves()
    other = synthetic_result()
    other["standings"][0]["name"] = "Mallory"
    write_result(finished_race("r_synthetic", other, YUKON, "SYN123"))
    kept = load_result(path.stem)
    assert kept.result == synthetic_result()
    assert kept.published_commitment == synthetic_result()["commitment"]


def test_a_file_that_holds_no_race_is_replaced(config_dir: Path) -> None:
    race = finished_race("r_synthetic", synthetic_result(), YUKON, "SYN123")
    results_dir().mkdir(parents=True)
    (results_dir() / f"{race.race}.json").write_text("not json")
    path = write_result(race)
    assert load_result(path.stem).code == "SYN123"


def test_two_saves_at_once_both_leave_their_part(config_dir: Path) -> None:
    """A bot and a window watching its room save one race at the same moment: each
    read-then-write sees the other's file, so the racer's commitment survives."""
    result = synthetic_result()
    racer = finished_race(
        "r_synthetic", result, YUKON, "SYN123", published_commitment=result["commitment"]
    )
    spectator = finished_race("r_synthetic", result, YUKON, deal=DEAL)
    for _ in range(20):
        for path in results_dir().glob("*.json") if results_dir().is_dir() else ():
            path.unlink()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(write_result, [racer, spectator]))
        kept = load_result(racer.race)
        assert (kept.published_commitment, kept.deal) == (result["commitment"], DEAL)


def test_the_newest_saved_result_of_a_room_is_its_proof(synthetic_race: Path) -> None:
    """``last_revealed``: what a resume (by room) or a watch (by code) from a new process
    sends back as ``revealed`` — the newest saved race of the room, else nothing."""
    result = synthetic_result()
    pair = {"seed": result["seed"], "salt": result["salt"]}
    assert last_revealed(room="r_synthetic") == pair
    assert last_revealed(code="SYN123") == pair
    assert last_revealed(room="r_other") is None
    assert last_revealed(code="OTHER1") is None
    assert last_revealed() is None


def test_a_fetched_copy_of_an_older_race_is_not_the_rooms_proof(synthetic_race: Path) -> None:
    """A copy fetched from the archive (``solrace fetch``) is untimed — when its race
    was run is unknown — and orders after every race saved as it ended: fetched now
    and timed now, an older race of the room became its "newest", the pair a resume
    from a new process sent, which the server ignored (a review)."""
    live = synthetic_result()
    older = {**live, "seed": 7, "salt": "b" * 64}
    write_result(
        SavedResult(
            race="r_synthetic.0badc0de",
            room="r_synthetic",
            settings=YUKON,
            result=older,
            saved_at_ms=None,
        )
    )
    assert last_revealed(room="r_synthetic") == {"seed": live["seed"], "salt": live["salt"]}


@pytest.mark.parametrize("hostile", ["\x1b[2J", "\u202e", "\x9b31m", "a\u2028b"])
def test_a_hostile_value_in_a_files_error_line_is_escaped(tmp_path: Path, hostile: str) -> None:
    """A race file (hostile, or written from a hostile server's reply) whose value is
    quoted in the one-line error: a control character or a direction override reached
    the terminal as it was (``short_json`` wrote it with ``ensure_ascii=False``). It is
    written escaped, as every other JSON value an error quotes (quoting.json_quoted)."""
    data = {
        "room": "r_x",
        "settings": {**YUKON, "variant": hostile},
        "result": synthetic_result(),
    }
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        load_result(path)
    said = str(refused.value)
    assert "settings.variant is " in said, said
    assert said.isprintable(), said
    assert json.dumps(hostile)[1:-1] in said, said  # its JSON escape, readable


def test_a_prefix_of_many_saved_races_names_a_few_and_counts_the_rest(config_dir: Path) -> None:
    """``solrace verify r`` on a computer of 200 saved races named all 200 in its one
    line (5 KB): it names the first three, and how many more, as a "cannot reach" of
    many servers does; two or three are named as before."""
    directory = results_dir()
    directory.mkdir(parents=True)
    ids = [f"r_{n:012x}.abcdef01" for n in range(200)]
    for race in ids:
        (directory / f"{race}.json").write_text("{}")
    with pytest.raises(ResultNotFound) as refused:
        load_result("r_")
    assert str(refused.value) == (
        f"'r_' matches 200 saved races: {ids[0]}, {ids[1]}, {ids[2]} and 197 more "
        "(solrace races lists them)"
    )
    with pytest.raises(ResultNotFound) as refused:
        load_result("r_00000000000")  # r_…000 to r_…00f: 16, then two
    assert "and 13 more" in str(refused.value)
    (directory / f"{ids[0]}.json").unlink()
    for race in ids[3:]:
        (directory / f"{race}.json").unlink()
    with pytest.raises(ResultNotFound) as refused:
        load_result("r_")
    assert str(refused.value) == f"'r_' matches several saved races: {ids[1]}, {ids[2]}"


def test_what_only_a_racer_saw_is_saved_and_kept_through_a_spectators_save(
    config_dir: Path,
) -> None:
    """The settings seen at the countdown and the moves acknowledged to the racer are
    written to the file and read back; a spectator who came late (who saw neither)
    saving the same race takes neither away, and a racer's save adds them to a
    spectator's file."""
    result = synthetic_result()
    acked = Acknowledged(2, {0: result["standings"][1]["log"][0], 2: "1:1>2"})
    racer = finished_race("r_seen", result, YUKON, countdown_settings=YUKON, acknowledged=acked)
    spectator = finished_race("r_seen", result, YUKON)
    path = write_result(racer)
    on_disk = json.loads(path.read_text())
    assert on_disk["countdown_settings"] == YUKON
    # by seq: null where no reply came
    assert on_disk["acknowledged"] == {"racer": 2, "moves": [acked.moves[0], None, "1:1>2"]}
    write_result(spectator)
    kept = load_result(path)
    assert kept.countdown_settings == YUKON and kept.acknowledged == acked
    path.unlink()
    write_result(spectator)
    write_result(racer)
    kept = load_result(path)
    assert kept.countdown_settings == YUKON and kept.acknowledged == acked


def _largest_saved_race() -> SavedResult:
    """A saved race as large as the protocol lets one be: every racer a room holds, each
    with a full log of the longest moves, their times and the longest names (in
    characters JSON escapes to 12 bytes each), a certificate, and a racer's
    acknowledged moves."""
    result = synthetic_result()
    row = result["standings"][0]
    result["standings"] = [
        {
            **row,
            "place": racer,
            "racer": racer,
            "name": "\N{GRINNING FACE}" * MAX_NAME_LEN,
            "log": ["9" * MAX_MOVE_LEN] * MAX_LOG_LEN,
            "times": [MAX_TIME_LIMIT_S * 1000] * MAX_LOG_LEN,
        }
        for racer in range(1, MAX_RACERS + 1)
    ]
    result["certificate"] = ["9" * MAX_MOVE_LEN] * 2_000
    moves = {seq: "9" * MAX_MOVE_LEN for seq in range(MAX_LOG_LEN)}
    return finished_race("r_largest", result, YUKON, "SYN123", acknowledged=Acknowledged(1, moves))


def test_the_largest_race_a_server_can_send_is_saved_well_under_the_file_cap(
    config_dir: Path,
) -> None:
    """MAX_RESULT_FILE_BYTES, the most a result file is read of, leaves room for any
    race: the largest is a quarter of it."""
    path = write_result(_largest_saved_race())
    assert 4 * path.stat().st_size < MAX_RESULT_FILE_BYTES
    assert load_result("r_largest").room == "r_largest"


def test_a_result_file_past_the_cap_is_refused_without_reading_it_whole(
    config_dir: Path,
) -> None:
    """A newcomer audit: ``solrace verify`` of a 150 MB file read it whole (4 s, 330 MB
    of memory, and on to "missing 'result'"); a race result is never that large, so a
    file past MAX_RESULT_FILE_BYTES is said to be none, in one line."""
    big = config_dir / "big.json"
    config_dir.mkdir(parents=True, exist_ok=True)
    big.write_text('{"room": "' + "a" * MAX_RESULT_FILE_BYTES + '"}', encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_result(big)
    mib = MAX_RESULT_FILE_BYTES // 2**20
    assert str(caught.value) == f"{big}: not a race result (larger than {mib} MiB)"


def test_a_pipe_among_the_saved_races_is_named_not_waited_for(config_dir: Path) -> None:
    """A newcomer audit: a FIFO named like a saved race (``r_evil.json``) made
    ``solrace races``, ``solrace verify r_evil`` and every ``resume`` wait for ever for
    a writer. Now it is a file that cannot be read, said in one line, status 2."""
    races = config_dir / "races"
    races.mkdir(parents=True)
    os.mkfifo(races / "r_evil.json")
    solrace = Path(sys.executable).parent / "solrace"
    for argv in (["races"], ["verify", "r_evil"]):
        done = subprocess.run(
            [str(solrace), *argv], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2, done
        [said] = done.stderr.strip().splitlines()
        assert said.startswith(f"solrace: {races / 'r_evil.json'}: not a race result (not a file)")


#: A process holding a write lease on a file (Linux ``F_SETLEASE``), as Samba's kernel
#: oplocks or an NFS server's delegation do, and letting it go when told (SIGIO), as
#: they do when another process opens the file.
_LEASE_HOLDER = """
import fcntl, os, signal, sys
F_SETLEASE = 1024
fd = os.open(sys.argv[1], os.O_RDONLY)
def let_go(signum, frame):
    fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
    os._exit(0)
signal.signal(signal.SIGIO, let_go)
fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)
print("held", flush=True)
while True:
    signal.pause()
"""


def test_a_result_file_another_process_holds_a_lease_on_is_read_once_it_lets_go(
    config_dir: Path,
) -> None:
    """A review: a result file is opened without waiting (O_NONBLOCK, so a FIFO is not
    waited for), and on a file another process holds a lease on (a Samba share's
    oplock, an NFS server's delegation) such an open fails at once, EWOULDBLOCK, where
    a plain open waits the moment it takes the holder to let go: ``solrace verify``
    said "cannot read a race result: Resource temporarily unavailable" of a good file,
    and a save over it read nothing there and replaced what it held."""
    path = write_result(finished_race("r_leased", synthetic_result(), YUKON, "SYN123"))
    with subprocess.Popen(
        [sys.executable, "-c", _LEASE_HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            assert load_result(path).room == "r_leased"
            assert holder.wait(timeout=60) == 0  # it was told, and let go
        finally:
            holder.kill()
