"""``python -m solrace.bench solver``'s node certify measure, tiny: the JSON names both
settings (one candidate at a time, the baseline, and the node's candidates in flight),
and every walk ends on a won candidate."""

from __future__ import annotations

import json
import subprocess
import sys

from solrace.rooms.certify import CANDIDATES_IN_FLIGHT, CERTIFY_BUDGET_NODES
from solrace.rooms.solver_workers import SOLVER_WORKERS


def test_the_node_certify_measure_runs_both_settings_through_the_node_code() -> None:
    argv = ["solver", "--json", "--variant", "yukon", "--deals", "0", "--certify", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "solrace.bench", *argv, "--certify-node", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)["certify_node"]
    assert measured["budget_nodes"] == CERTIFY_BUDGET_NODES  # the node's, by default
    assert measured["walks"] == 3 and measured["solver_workers"] == SOLVER_WORKERS
    assert set(measured["in_flight"]) == {"1", str(CANDIDATES_IN_FLIGHT)}
    for setting in measured["in_flight"].values():
        assert set(setting) == {"idle", "back_to_back"}
        for figures in setting.values():
            assert figures["candidates_mean"] >= 1
            assert 0 < figures["seconds_p50"] <= figures["seconds_p95"] <= figures["seconds_max"]
