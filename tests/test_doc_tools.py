"""The documentation's own tools (docs/tools/), called as functions where running the
documented command (tests/test_docs_commands.py) cannot show the defect."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOLS = Path(__file__).parents[1] / "docs" / "tools"


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"doc_tool_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there (fair_counts)
    spec.loader.exec_module(module)
    return module


def test_screenshot_png_without_cairosvg_fails_before_the_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``screenshot.py OUT.svg --png OUT.png`` without cairosvg raced a whole screenshot
    (seconds: a server, an app, two bots) and wrote the SVG before it said that the PNG
    needs cairosvg. It says so first, in one line, and runs nothing."""
    screenshot = _tool("screenshot")
    monkeypatch.setitem(sys.modules, "cairosvg", None)  # not installed: import fails

    async def shoot(*args: object) -> None:
        raise AssertionError("the screenshot ran although the PNG cannot be written")

    monkeypatch.setattr(screenshot, "shoot", shoot)
    svg, png = tmp_path / "shot.svg", tmp_path / "shot.png"
    with pytest.raises(SystemExit) as stopped:
        screenshot.main([str(svg), "--png", str(png)])
    assert stopped.value.code == (
        "screenshot: --png needs cairosvg (pip install cairosvg), or leave --png out and "
        "convert the SVG yourself"
    )
    assert not svg.exists() and not png.exists()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("size", "says"),
    [
        ("99999999x99999999", "at most 500x200, got 99999999x99999999"),
        ("501x24", "at most 500x200, got 501x24"),
        ("80x201", "at most 500x200, got 80x201"),
        ("10x5", "at least 40x12, got 10x5"),
    ],
)
def test_screenshot_size_out_of_range_is_refused_before_the_race(
    size: str,
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A newcomer audit: ``screenshot.py OUT.svg --size 99999999x99999999`` was taken and
    ran for as long as it was let (60 s here: an app laid out on a screen of 10**16
    cells); a size is now 40x12 to 500x200, said before anything runs."""
    screenshot = _tool("screenshot")

    async def shoot(*args: object) -> None:
        raise AssertionError("the screenshot ran at a size it should have refused")

    monkeypatch.setattr(screenshot, "shoot", shoot)
    with pytest.raises(SystemExit) as stopped:
        screenshot.main([str(tmp_path / "shot.svg"), "--size", size])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.endswith(f"error: argument --size: {says}\n")


@pytest.mark.parametrize(
    ("tool", "argv", "says"),
    [
        ("soak", ["--port", "x"], "argument --port: not a whole number: 'x'"),
        ("soak", ["--port", "99999"], "argument --port: must be 1 to 65535, got 99999"),
        ("soak", ["--phases", "0"], "argument --phases: must be 1 or more, got 0"),
        ("soak", ["--per-phase", "1e3"], "argument --per-phase: not a whole number: '1e3'"),
        ("soak", ["--parallel", "-3"], "argument --parallel: must be 1 or more, got -3"),
        ("soak", ["--settle", "nan"], "argument --settle: not a finite number: 'nan'"),
        ("soak", ["--idle-room-s", "-1"], "argument --idle-room-s: must be 0 or more s, got -1 s"),
        ("fair_counts", ["--seeds", "0", "x"], "argument --seeds: not a whole number: 'x'"),
        ("fair_counts", ["--seeds", "-1", "5"], "argument --seeds: must be 0 or more, got -1"),
        ("latency", ["--redis-url", "r", "ten"], "argument rtt_ms: not a whole number: 'ten'"),
        (
            "latency",
            ["--redis-url", "r", "40", "--think", "-1"],
            "argument --think: must be 0 or more s, got -1 s",
        ),
        (
            "latency",
            ["--redis-url", "r", "40", "--server-port", "0x1_0"],
            "argument --server-port: not a whole number: '0x1_0'",
        ),
    ],
)
def test_a_doc_tools_bad_number_is_refused_in_one_clear_line(
    tool: str,
    argv: list[str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The tools read their numbers with argparse's ``type=int``/``float``: ``--port x``
    said "invalid int value: 'x'", and ``--port 99999``, ``--phases 0``, ``--settle nan``
    or ``--idle-room-s -1`` was taken and the tool ran (a soak of minutes, a node that
    could not listen). They read them as every solrace command does (solrace.argtypes):
    one line saying what is wrong, status 2, before anything runs."""
    module = _tool(tool)

    def ran(*args: object) -> None:
        raise AssertionError(f"{tool} ran with a value it should have refused")

    # What each tool does once its flags are read (a soak, a server, the solver): never
    # run here, even by a tool that takes a bad value.
    monkeypatch.setattr(module, {"soak": "drive", "latency": "race"}.get(tool, "solve_deal"), ran)
    monkeypatch.setattr(sys, "argv", [f"{tool}.py", *argv])
    with pytest.raises(SystemExit) as stopped:
        main = module.main()
        if asyncio.iscoroutine(main):
            asyncio.run(main)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f"error: {says}\n"), err
