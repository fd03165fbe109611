"""``solrace replay``: the board at a step is the engine's board after that many log
entries, face-down cards in lower case; the interactive stepper moves both ways."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from solrace.rules import position_dict, replay
from solrace_client.cli import main
from solrace_client.replay import tracks
from solrace_client.results import SavedResult, finished_race, load_result, write_result

from tests.net.conftest import SOLVABLE_SECRET, Cluster
from tests.support.race import winning_moves

from .conftest import SEED, YUKON, _standing, bot_race, synthetic_result


def _columns(text: str) -> list[list[str]]:
    """The tableau lines of ``--print`` output: `` 1  7H ks …``."""
    rows = [line for line in text.splitlines() if line[:2].strip().isdigit()]
    return [line.split()[1:] for line in rows]


@pytest.mark.parametrize(("racer", "step"), [("1", 0), ("Ann", 5), ("bob", 7), ("2", 11)])
def test_print_shows_the_engine_board_at_that_step(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], racer: str, step: int
) -> None:
    saved = load_result(synthetic_race)
    standing = next(
        s for s in saved.standings if racer in (str(s["racer"]), s["name"].lower(), s["name"])
    )
    assert main(["replay", saved.race, "--step", str(step), "--racer", racer, "--print"]) == 0
    out = capsys.readouterr().out
    expected = position_dict(replay("yukon", SEED, {}, standing["log"][:step]))
    assert _columns(out) == expected["tableau"]
    assert f"racer {standing['racer']} {standing['name']}" in out
    if step:
        assert f"last move {standing['log'][step - 1]}" in out
    else:
        assert "the deal" in out
    assert any(card.islower() for column in _columns(out) for card in column)


def test_a_step_past_the_log_shows_the_final_board(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = load_result(synthetic_race)
    bob = saved.standings[1]
    assert main(["replay", str(synthetic_race), "--racer", "Bob", "--step", "999", "--print"]) == 0
    out = capsys.readouterr().out
    assert "final position" in out
    assert _columns(out) == position_dict(replay("yukon", SEED, {}, bob["log"]))["tableau"]


def test_an_unknown_racer_is_refused(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(synthetic_race), "--racer", "Zed", "--print"]) == 2
    assert "no racer 'Zed'" in capsys.readouterr().err


@pytest.mark.parametrize("who", ["²", "١"])
def test_a_racer_of_digits_other_than_0_to_9_is_a_name_not_a_traceback(
    who: str, synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--racer ²`` (a digit to str.isdigit, not to int()) ended in a ValueError
    traceback; ``١`` (Arabic-Indic one) named racer 1. An id is ASCII digits."""
    assert main(["replay", str(synthetic_race), "--racer", who, "--print"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"solrace: no racer {who!r} in this race; racers: 1 (Ann)"), err
    assert err.count("\n") == 1


def test_a_long_racer_name_is_quoted_cut(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was said whole: a 3,000-character line (MAX_QUOTED)."""
    assert main(["replay", str(synthetic_race), "--racer", "z" * 3000, "--print"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"solrace: no racer '{'z' * 40}'… (3,000 characters) in this race")


@pytest.mark.parametrize("who", ["", "  "])
def test_an_empty_racer_is_a_bad_argument(
    who: str, synthetic_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--racer ''`` (an unset variable) printed the first place's board, as if not given."""
    with pytest.raises(SystemExit) as refused:  # as argparse refuses any argument
        main(["replay", str(synthetic_race), "--racer", who, "--print"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "solrace replay: argument --racer: no racer given: the racer id or name is empty"
        " (see solrace replay --help)\n"
    )


def test_the_stepper_takes_a_step_of_other_digits_as_an_unknown_command(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``²`` (a digit to str.isdigit, not to int()) ended the stepper in a traceback."""
    monkeypatch.setattr("sys.stdin", io.StringIO("²\nq\n"))
    assert main(["replay", str(synthetic_race)]) == 0
    assert "unknown command '²'" in capsys.readouterr().out


def test_a_racer_or_step_of_more_digits_than_int_reads_is_no_traceback(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """5,000 nines, past int()'s 4,300 digits, ended ``--racer`` and the stepper in a
    ValueError traceback: no such racer, and a step past the end (the final board)."""
    nines = "9" * 5000
    assert main(["replay", str(synthetic_race), "--racer", nines, "--print"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"solrace: no racer '{'9' * 40}'… (5,000 characters) in this race")
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{nines}\nq\n"))
    assert main(["replay", str(synthetic_race)]) == 0
    last = len(load_result(synthetic_race).standings[0]["log"])
    assert f"step {last} of {last}" in capsys.readouterr().out


def test_the_stepper_quotes_a_long_unknown_command_at_most_in_its_first_characters(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 5,000-character line piped in came back whole in "unknown command …", one 5 KB
    line (solrace.quoting)."""
    monkeypatch.setattr("sys.stdin", io.StringIO("x" * 5000 + "\nq\n"))
    assert main(["replay", str(synthetic_race)]) == 0
    out = capsys.readouterr().out
    assert f"unknown command '{'x' * 40}'… (5,000 characters): n/Enter next" in out


def test_the_stepper_goes_forwards_backwards_and_jumps(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("n\nn\np\n20\nl\nbogus\nq\n"))
    assert main(["replay", str(synthetic_race)]) == 0
    out = capsys.readouterr().out
    last = len(load_result(synthetic_race).standings[0]["log"])
    shown = [line.split(" · step ")[1] for line in out.splitlines() if " · step " in line]
    steps = [int(s.split()[0]) for s in shown if s.split()[0].isdigit()]
    assert steps == [0, 1, 2, 1, 20, last, last]
    assert "unknown command 'bogus'" in out
    assert "Ann" in out and "Bob" in out


async def test_replay_of_a_real_race(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    server = await cluster.node()
    result, joined = await bot_race(server.url, max_moves=200)
    winner = result["standings"][0]
    step = len(winner["log"]) // 2
    capsys.readouterr()
    race = f"{joined['room']}.{result['commitment'][:8]}"
    assert main(["replay", race, "--racer", winner["name"], "--step", str(step), "--print"]) == 0
    expected = position_dict(replay("yukon", result["seed"], {}, winner["log"][:step]))
    assert _columns(capsys.readouterr().out) == expected["tableau"]


@pytest.mark.parametrize("commands", ["n\nq\n", "n\n", "n\nbogus\nq\n"])
def test_piped_commands_leave_no_prompt_open(
    synthetic_race: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    commands: str,
) -> None:
    """``printf 'n\\nq\\n' | solrace replay RACE`` (docs/client.md) ended its output
    with the prompt ``step 1/40> `` and no newline — the shell's prompt came after it —
    and each board's first line was glued to the prompt before it (a piped command is
    not echoed). At the end of the commands (Ctrl-D too) likewise."""
    monkeypatch.setattr("sys.stdin", io.StringIO(commands))
    assert main(["replay", str(synthetic_race)]) == 0
    out = capsys.readouterr().out
    assert out.endswith("> \n")
    assert all(line.endswith("> ") for line in out.splitlines() if "> " in line[:12])
    assert not any("> race" in line or "> unknown" in line for line in out.splitlines())


def _race_of(racers: int) -> SavedResult:
    """The synthetic race with ``racers`` racers (Ann and Bob, then Carolina, Dmitri…
    resigning early), saved."""
    result = synthetic_result()
    moves = winning_moves(SOLVABLE_SECRET)
    for racer, name in list(enumerate(["Carolina", "Dmitri"], start=3))[: racers - 2]:
        result["standings"].append(_standing(racer, racer, name, moves[:3], "resigned"))
    path = write_result(
        finished_race(
            f"r_{racers}", result, {**YUKON, "max_racers": 4}, "SYN123", published_commitment=None
        )
    )
    return load_result(path)


def _stepper(
    race: str,
    columns: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    commands: str = "q\n",
) -> list[str]:
    """The lines of the last step ``solrace replay`` shows at ``columns`` after
    ``commands``, from its ``race … · step`` line to the help under the boards."""
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr("sys.stdin", io.StringIO(commands))
    assert main(["replay", race]) == 0
    out = capsys.readouterr().out.splitlines()
    start = max(i for i, line in enumerate(out) if line.startswith(f"race {race} · "))
    end = next(i for i in range(start, len(out)) if out[i].startswith("n/Enter next"))
    return out[start:end]


def _titles(
    race: str, columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    """The panel titles ``solrace replay`` shows first at ``columns``, row after row."""
    lines = _stepper(race, columns, monkeypatch, capsys)
    return "\n".join(line for line in lines if "╭" in line)


@pytest.mark.parametrize(("columns", "per_row"), [(40, 1), (60, 1), (80, 2), (200, 4)])
def test_every_board_is_shown_whole_in_rows_that_fit(
    config_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    columns: int,
    per_row: int,
) -> None:
    """At 80 columns four Yukon boards side by side had tableau columns 6 and 7 cut off
    without a mark, their headings wrapped mid-line. Boards go side by side only as many
    as fit whole; the others in rows under them."""
    saved = _race_of(4)
    lines = _stepper(saved.race, columns, monkeypatch, capsys, "40\nq\n")
    assert all(len(line) <= columns for line in lines[1:])  # the boards (the title may wrap)
    cells = [[cell.strip() for cell in line.split("│")[1::2]] for line in lines]
    assert [len(c) for c in cells if c and "1  2  3" in c[0]] == [per_row] * (4 // per_row)
    assert sum(c.count("1  2  3  4  5  6  7") for c in cells) == 4  # every number row whole
    assert sum(line.count("╭") for line in lines) == 4
    text = "\n".join(lines)
    for track in tracks(saved):  # every board's top cards are there
        for column in track.at(40)["tableau"]:
            assert not column or re.search(rf"\b{column[-1]}\b", text), track.name
    if per_row < 4:  # whole headings: a board's own width, not a share of the terminal's
        assert "foundations  C 0  D 1  H 1  S 2" in text


@pytest.mark.parametrize("racers", [2, 3, 4])
def test_panel_titles_keep_every_place_at_80_columns(
    config_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    racers: int,
) -> None:
    """At 80 columns rich cropped the titles from their end, the place first:
    ``╭─ 2 · Bob · resigned · ─╮`` (``· #2`` at 200). The status goes, the name
    shortens; racer number and place stay."""
    titles = _titles(_race_of(racers).race, 80, monkeypatch, capsys)
    assert all(len(line) <= 80 for line in titles.splitlines())
    for n in range(1, racers + 1):
        assert re.search(rf"╭─ {n} · \w+…?( · \w+)? · #{n} ─", titles), titles


def test_a_wide_terminal_still_shows_the_whole_titles(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    titles = _titles(_race_of(4).race, 200, monkeypatch, capsys)
    for title in (
        "1 · Ann · finished · #1",
        "2 · Bob · resigned · #2",
        "3 · Carolina · resigned · #3",
        "4 · Dmitri · resigned · #4",
    ):
        assert f"╭─ {title} ─" in titles, titles


@pytest.mark.parametrize("print_one", [False, True])
def test_names_are_shown_as_they_are_and_no_escape_sequence(
    synthetic_race: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    print_one: bool,
) -> None:
    """An audit: a racer named ``[/]Evil`` (which a solrace server accepts) made the
    stepper a traceback (its panel titles were read as rich markup), and a name with an
    escape sequence (an edited file, a hostile server) went to the terminal raw."""
    data = json.loads(synthetic_race.read_text())
    data["result"]["standings"][0]["name"] = "[/]Evil"
    data["result"]["standings"][1]["name"] = "Bob\x1b]0;PWNED\x07"
    synthetic_race.write_text(json.dumps(data))
    monkeypatch.setattr("sys.stdin", io.StringIO("n\nq\n"))
    argv = ["replay", str(synthetic_race)] + (["--print", "--racer", "2"] if print_one else [])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert ("[/]Evil" in out or print_one) and "Bob?]0;PWNED?" in out and "\x1b" not in out


@pytest.fixture
def illegal_race(config_dir: Path) -> Path:
    """The synthetic race with Bob's fourth log entry replaced by one the engine refuses
    there (Ann's last move: it finishes her game, not a deal three moves old)."""
    result = synthetic_result()
    bob = result["standings"][1]
    bob["log"][3] = result["standings"][0]["log"][-1]
    return write_result(
        finished_race("r_illegal", result, YUKON, "SYN123", published_commitment=None)
    )


@pytest.mark.parametrize("racer", ["Bob", "Ann"])
def test_a_race_that_does_not_replay_exits_1(
    illegal_race: Path, capsys: pytest.CaptureFixture[str], racer: str
) -> None:
    """A saved race whose log held an illegal move showed ``!! log entry 4 … is
    illegal`` and exited 0, as a race that replays does (a newcomer walk): a script
    could not tell. It is a race that does not replay — status 1, as ``verify``'s FAIL
    — said in one line on standard error, for the racer shown or another."""
    assert main(["replay", str(illegal_race), "--racer", racer, "--print"]) == 1
    out, err = capsys.readouterr()
    assert ("!! log entry 4 " in out) == (racer == "Bob"), out
    assert err.startswith("solrace: the race does not replay: racer 2 (Bob): log entry 4 "), err
    assert err.count("\n") == 1, err


def test_the_stepper_of_a_race_that_does_not_replay_exits_1(
    illegal_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("n\nq\n"))
    assert main(["replay", str(illegal_race)]) == 1
    out, err = capsys.readouterr()
    assert "log entry 4 " in out and "is illegal" in out
    assert err.startswith("solrace: the race does not replay: racer 2 (Bob): "), err


def test_a_log_that_stops_being_legal_says_where_as_verify_does(
    illegal_race: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bob's fourth of 12 entries is illegal. The board past it read ``step 3 of 3
    (final position)``, as if his log ended there, and its ``!!`` line said the move
    twice and not how long the log was (``log entry 4 '…' is illegal: illegal move …:
    …``), in other words than verify's FAIL line for the same entry. Both now say it
    one way: which entry of how many, that the replay stops before it, and why."""
    saved = load_result(illegal_race)
    entry = saved.standings[1]["log"][3]
    fault = f"log entry 4 of 12 {entry!r} is illegal: "
    assert main(["replay", str(illegal_race), "--racer", "Bob", "--step", "7", "--print"]) == 1
    out, err = capsys.readouterr()
    heading = out.splitlines()[1]
    assert heading == "step 3 of 3 (where the log stops being legal: entry 4 of 12 is not)", out
    (marked,) = [line for line in out.splitlines() if line.startswith("!! ")]
    assert marked.startswith(f"!! {fault}") and f"illegal move {entry}" not in marked, marked
    assert err == f"solrace: the race does not replay: racer 2 (Bob): {marked[3:]}\n", err
    assert main(["verify", str(illegal_race)]) == 1
    said = capsys.readouterr().out
    assert f"FAIL  racer 2 (Bob): log: {marked[7:]}" in said, said
