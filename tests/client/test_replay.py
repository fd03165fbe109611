"""``solrace replay``: the board at a step is the engine's board after that many log
entries, face-down cards in lower case; the interactive stepper moves both ways."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from solrace.rules import position_dict, replay
from solrace_client.cli import main
from solrace_client.results import load_result

from tests.net.conftest import Cluster

from .conftest import SEED, bot_race


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
