"""``GET /metrics`` (solrace/net/metrics.py) exports exactly the series docs/server.md
names, with the type and labels its "Metrics" table gives them, and they move when what
they count happens: prometheus_client's ``*_created`` gauges, one per counter and
histogram, each repeating its counter's HELP, were 13 undocumented series (the operator
audit); the table itself came from the second audit, which found the families spread
over three partial lists and the documented series count (73) one short."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from solrace.net import metrics
from solrace.net.server import RaceServer
from solrace.rooms.node import Node
from solrace.store import Store
from solrace_client import ServerError

from tests.support.race import play_until_done, racing, winning_moves
from tests.support.redis import REDIS_URL, new_prefix, redis_process, spare_port

from .conftest import SOLVABLE_SECRET, Cluster, stop_own_server

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def _documented() -> set[str]:
    """Every ``solrace_…`` series docs/server.md names (suffix ``_total`` dropped: the
    family's name, as the parser gives it)."""
    names = set(re.findall(r"`(solrace_[a-z_]+)", DOCS.read_text()))
    return {name.removesuffix("_total") for name in names}


def _table() -> dict[str, tuple[str, frozenset[str]]]:
    """docs/server.md's "Metrics" table: each family's type and label names."""
    section = DOCS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `(solrace_[a-z_]+)` \| (\w+) \|([^|]*)\|", line)
        if match:
            name, kind, labels = match.groups()
            rows[name.removesuffix("_total")] = (
                kind,
                frozenset(re.findall(r"`(\w+)`", labels)),
            )
    return rows


async def _rendered() -> str:
    store = await Store.connect(REDIS_URL)  # not contacted: metrics read the node only
    try:
        return RaceServer(Node(store, name="metrics"), "127.0.0.1", 0).metrics.render().decode()
    finally:
        await store.close()


async def test_metrics_exports_the_documented_families_and_no_created_series() -> None:
    text = await _rendered()
    assert "_created" not in text
    families = {f.name for f in text_string_to_metric_families(text)}
    assert families == _documented(), (families - _documented(), _documented() - families)


async def test_the_metrics_table_gives_each_family_its_type_and_labels() -> None:
    exported = {
        family.name: (
            family.type,
            frozenset(k for s in family.samples for k in s.labels if k != "le"),
        )
        for family in text_string_to_metric_families(await _rendered())
    }
    assert _table() == exported


async def test_the_documented_series_count_is_what_a_node_exports_at_start() -> None:
    series = [line for line in (await _rendered()).splitlines() if not line.startswith("#")]
    counts = {int(n) for n in re.findall(r"(\d+) series on a node at start", DOCS.read_text())}
    counts |= {int(n) for n in re.findall(r"\((\d+) on a node at start", DOCS.read_text())}
    assert counts == {len(series)}


def _scrape(server: RaceServer) -> dict[str, float]:
    """The node's series as ``name{labels}`` → value, read over HTTP as Prometheus does."""
    url = f"http://127.0.0.1:{server.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


@pytest.fixture
async def on_redis(tmp_path: Path) -> AsyncIterator[Cluster]:
    """Nodes on Redis only: the counting is the node's, whatever its store."""
    nodes = Cluster("redis", new_prefix(), tmp_path / "engine")
    try:
        yield nodes
    finally:
        await nodes.close()


async def test_the_counters_move_when_a_race_is_played_through_a_node(on_redis: Cluster) -> None:
    """A race on a real node, scraped over HTTP: each documented series that a race
    moves moves by exactly what happened."""
    server = await on_redis.node()
    before = await asyncio.to_thread(_scrape, server)
    assert before["solrace_connections"] == 0 and before["solrace_races_running"] == 0
    ann, bob = await racing(server.url)
    moves = winning_moves(SOLVABLE_SECRET)
    await ann.move(moves[0])
    racing_now = await asyncio.to_thread(_scrape, server)
    assert racing_now["solrace_connections"] == 2
    assert racing_now["solrace_rooms"] == 1
    assert racing_now["solrace_races_running"] == 1
    assert racing_now["solrace_races_started_total"] == 1
    # A move sent again with its seq: answered from the log, counted as a retry.
    assert (await ann.request("move", seq=0, move=moves[0]))["status"] == "playing"
    # A stale seq, and notation the protocol cannot read: each counted as a refused
    # move and a refused request (the second was not a refused move before the audit).
    for seq, move, code in ((0, moves[1], "bad_seq"), (1, "zz", "bad_notation")):
        with pytest.raises(ServerError) as refused:
            await ann.request("move", seq=seq, move=move)
        assert refused.value.code == code
    ann.seq = 1
    last = await play_until_done(ann, moves[1:])
    assert last["status"] == "finished"
    await bob.resign()
    await ann.next_event("race_over", timeout=10)
    after = await asyncio.to_thread(_scrape, server)
    assert after["solrace_moves_accepted_total"] == len(moves)
    assert after["solrace_move_latency_seconds_count"] == len(moves)
    assert after["solrace_moves_retried_total"] == 1
    assert after['solrace_moves_refused_total{reason="bad_seq"}'] == 1
    assert after['solrace_moves_refused_total{reason="bad_notation"}'] == 1
    assert after['solrace_requests_refused_total{code="bad_seq"}'] == 1
    assert after['solrace_requests_refused_total{code="bad_notation"}'] == 1
    assert after["solrace_races_running"] == 0
    assert after["solrace_frames_in_total"] >= len(moves) + 3
    assert after["solrace_frames_out_total"] > after["solrace_frames_in_total"]
    assert sum(v for k, v in after.items() if k.startswith("solrace_defects_total")) == 0
    await ann.close()
    await bob.close()


async def _store_up_within(server: RaceServer, value: float, seconds: float) -> None:
    """Until ``solrace_store_up``, scraped over HTTP, reads ``value`` (or fail after
    ``seconds``: the node learns it at its next call to the store — its lease renewal,
    every LEASE_RENEW_S, when nothing else calls)."""
    deadline = time.monotonic() + seconds
    while (read := (await asyncio.to_thread(_scrape, server)).get("solrace_store_up")) != value:
        assert time.monotonic() < deadline, f"solrace_store_up is {read}, not {value}"
        await asyncio.sleep(0.1)


async def test_store_up_reads_0_while_redis_is_gone_and_1_once_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator had no series saying whether a node's store answers (/healthz does,
    to a probe, but a dashboard or an alert reads /metrics). ``solrace_store_up`` is 1
    while the node's calls to the store are answered, 0 once one failed: Redis
    stopped under a running node, then started again on the same port. The hold after
    the last failure (a scrape interval, 15 s) is shortened to see it end within the
    test; tests/rooms/test_fault_windows.py reads the gauge at its default."""
    monkeypatch.setattr(metrics, "STORE_FAILED_RECENTLY_S", 1.0)
    port = spare_port()
    redis = contextlib.ExitStack()
    url = redis.enter_context(redis_process(tmp_path / "redis", port=port))
    store = await Store.connect(url, prefix=new_prefix())
    server = RaceServer(Node(store, name="store-up"), "127.0.0.1", 0)
    try:
        await server.start()
        await _store_up_within(server, 1, 0)
        redis.close()  # Redis goes away
        await _store_up_within(server, 0, 15)
        assert redis.enter_context(redis_process(tmp_path / "redis", port=port)) == url
        await _store_up_within(server, 1, 15)
    finally:
        await stop_own_server(server)
        redis.close()
