"""The bare node's counters (:class:`solrace.rooms.counters.Tally`): what a long bench
leaves in them."""

from __future__ import annotations

import random
import statistics

from solrace.rooms.counters import RESERVOIR_SIZE, Tally

#: A long bench's moves (the core bench runs 10⁵-10⁶ on one node).
MOVES = 200_000


def test_move_latency_keeps_a_bounded_uniform_sample_of_a_long_run() -> None:
    """Every move's latency was appended to a list for the life of the node: 200,000
    moves kept 200,000 floats (~6.4 MB with the list), a million 32 MB. Now a
    reservoir of RESERVOIR_SIZE, a uniform sample of every observation (not the first
    ones), beside the exact count, sum and maximum."""
    tally = Tally()
    latency = tally.move_latency
    latency.rng = random.Random(7)  # a fixed draw, so the sample's figures are fixed
    for i in range(MOVES):
        latency.observe(i / MOVES)  # rising: a sample of the first ones would show it
    assert len(latency.samples) == RESERVOIR_SIZE
    assert latency.count == MOVES
    assert abs(latency.total - (MOVES - 1) / 2) < 1e-6
    assert latency.max == (MOVES - 1) / MOVES
    quartiles = statistics.quantiles(latency.samples, n=4)
    for got, want in zip(quartiles, (0.25, 0.5, 0.75), strict=True):
        assert abs(got - want) < 0.05, quartiles  # a uniform sample of the whole run


def test_move_latency_keeps_every_sample_of_a_short_run() -> None:
    tally = Tally()
    for value in (0.003, 0.001, 0.002):
        tally.move_latency.observe(value)
    assert tally.move_latency.samples == [0.003, 0.001, 0.002]
    assert tally.move_latency.count == 3
