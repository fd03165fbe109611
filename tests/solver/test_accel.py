"""The optional compiled accelerator (solver/accel.py) gives the same answers as the
pure-Python solver: it is built with mypyc into a scratch directory, and the same
deals of every variant are solved in two fresh processes, one with the build and one
without; outcome, line, node count and table size must be identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from solrace.solver import accel
from solrace.solver._accel_path import STAMP, usable

# Deals of every variant and a few options, at budgets that give won, unwinnable and
# unknown answers (Yukon 17 stays unknown at 20,000 nodes; most Russian deals are
# proved unwinnable; Klondike covers the stock macros and foundation → tableau).
JOBS: list[tuple[str, dict[str, Any], int, int]] = [
    *(("yukon", {}, seed, 20_000) for seed in (0, 1, 2, 17, 116, 156)),
    ("yukon", {"auto_flip": False, "foundation_to_tableau": True}, 3, 5_000),
    *(("russian", {}, seed, 5_000) for seed in range(4)),
    *(("alaska", {}, seed, 5_000) for seed in range(3)),
    *(("australian", {}, seed, 3_000) for seed in range(3)),
    *(("double_yukon", {}, seed, 5_000) for seed in range(2)),
    *(("klondike", {}, seed, 5_000) for seed in range(3)),
    *(("klondike", {"draw": 3, "max_passes": 2}, seed, 5_000) for seed in range(3)),
    *(
        ("klondike", {"draw": 3, "thoughtful": True, "foundation_to_tableau": False}, s, 5_000)
        for s in range(3)
    ),
]

SCRIPT = """
import json, sys
from solrace.solver import solve_deal
from solrace.solver.accel import accelerated
out = [accelerated()]
for variant, options, seed, budget in json.loads(sys.argv[1]):
    r = solve_deal(variant, seed, options, budget)
    out.append([r.outcome.value, list(r.moves), r.nodes, r.stored])
print(json.dumps(out))
"""


def _base_env() -> dict[str, str]:
    """This process's environment without the accelerator switches (the test may itself
    run with SOLRACE_SOLVER_PURE=1)."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("SOLRACE_SOLVER_PURE", "SOLRACE_SOLVER_COMPILED")
    }


def _solve_all(env: dict[str, str]) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(JOBS)],
        env={**_base_env(), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: list[object] = json.loads(done.stdout)
    return result


def test_compiled_and_pure_give_identical_answers(tmp_path: Path) -> None:
    pytest.importorskip("mypyc.build")
    target = accel.build(tmp_path / "compiled")
    assert (target / STAMP).is_file()
    compiled = _solve_all({"SOLRACE_SOLVER_COMPILED": str(target)})
    pure = _solve_all({"SOLRACE_SOLVER_PURE": "1"})
    assert compiled[0] is True, "the build was not loaded"
    assert pure[0] is False
    assert compiled[1:] == pure[1:]
    outcomes = {row[0] for row in pure[1:]}  # type: ignore[index]
    assert outcomes == {"won", "unwinnable", "unknown"}


def test_a_stale_or_missing_build_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOLRACE_SOLVER_PURE", raising=False)
    monkeypatch.setenv("SOLRACE_SOLVER_COMPILED", str(tmp_path))
    assert usable() is None  # no stamp
    (tmp_path / STAMP).write_text("0" * 64 + "\n")
    assert usable() is None  # a build of other sources
    (tmp_path / STAMP).write_text(accel.source_stamp() + "\n")
    assert usable() == tmp_path
    monkeypatch.setenv("SOLRACE_SOLVER_PURE", "1")
    assert usable() is None
