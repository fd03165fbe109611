"""A run's key prefix: its family, the benchmark's process id (what an operator who
killed it knows: docs/performance.md, "When a run is killed"), a random part, nothing a
SCAN pattern would read as a wildcard; each store of the run under a part of its own.
What becomes of the keys when a run stops: tests/bench/test_stopping.py."""

from __future__ import annotations

import os
import re

from solrace.bench.runkeys import BENCH_FAMILY, CORE_FAMILY, part, run_prefix


def test_a_runs_prefix_is_its_family_its_process_id_and_a_random_part() -> None:
    for family in (BENCH_FAMILY, CORE_FAMILY):
        prefix = run_prefix(family)
        assert re.fullmatch(rf"{re.escape(family)}{os.getpid()}-[0-9a-f]{{12}}:", prefix)
        assert run_prefix(family) != prefix  # two runs of one process differ too


def test_each_store_of_a_run_has_its_own_part_of_the_runs_prefix() -> None:
    run = run_prefix(CORE_FAMILY)
    first, second = part(run, "sequential"), part(run, "sequential")
    assert re.fullmatch(rf"{re.escape(run)}sequential-[0-9a-f]{{8}}:", first)
    assert first != second
